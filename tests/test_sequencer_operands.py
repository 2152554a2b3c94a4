"""The sequencer's operand stage (``rtl/control/operands.py``) in the Amaranth simulator:
random micro-words pass F -> R -> X with random R holds, forwarding from X, W's pending
register write and AG_SETs in X, and X's operands are compared with a Python model of
``sim.isa.USrc``."""

import random

import pytest
from amaranth.hdl import Array, Elaboratable, Module, Signal
from amaranth.sim import Simulator

from rtl.control.addr_gens import PAIRS
from rtl.control.operands import REG_SRCS, OperandStage
from sim import isa
from sim.isa import USrc

MASK = 0xFFFF_FFFF
N_AG = isa.NUM_AG


class _WithRegisterFile(Elaboratable):
    """The operand stage reading a register file of 64 signals the testbench sets."""

    def __init__(self):
        self.ops = OperandStage()
        self.regs = [Signal(32, name=f"r{i}") for i in range(isa.NUM_REGS)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.ops = ops = self.ops
        regs = Array(self.regs)
        m.d.comb += [ops.rf_a_data.eq(regs[ops.rf_a_addr]),
                     ops.rf_b_data.eq(regs[ops.rf_b_addr])]
        return m


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_operand_stage(seed):
    rng = random.Random(seed)
    top = _WithRegisterFile()
    ops = top.ops
    rf = [rng.getrandbits(32) for _ in range(isa.NUM_REGS)]
    ag = [dict(reg=rng.randrange(64), stride=rng.getrandbits(32), base=rng.getrandbits(32))
          for _ in range(N_AG)]

    def set_ags(ctx, rd):
        for j, g in enumerate(ag):
            ctx.set(ops.ag_reg[j], g["reg"])
            ctx.set(ops.ag_eff[j], g["reg"])
            ctx.set(ops.ag_stride[j], g["stride"])
            ctx.set(ops.ag_base[j], g["base"])
        ctx.set(ops.ag_rd_eq, sum((g["reg"] == rd) << j for j, g in enumerate(ag)))
        ctx.set(ops.ag_pair_eq, sum((ag[i]["reg"] == ag[j]["reg"]) << p
                                    for p, (i, j) in enumerate(PAIRS)))

    def index(src, ins, k):
        return {USrc.RD: ins["rd"], USrc.RS1: ins["rs1"], USrc.RS2: ins["rs2"],
                USrc.RS3: ins["rs3"], USrc.RD1: ins["rd"] + 1, USrc.RD2: ins["rd"] + 2,
                USrc.RD3: ins["rd"] + 3, USrc.RS2P1: ins["rs2"] + 1,
                USrc.AGREG: ag[k]["reg"]}[src] & 63

    async def bench(ctx):
        for t in range(120):
            ins = {n: rng.randrange(64) for n in ("rd", "rs1", "rs2", "rs3")}
            if rng.random() < 0.3:
                ins["rs1"] = ins["rd"]
            ins["imm"] = rng.getrandbits(32)
            for n, v in ins.items():
                ctx.set(getattr(ops, n), v)
            ctx.set(ops.rd_nz, int(ins["rd"] != 0))
            set_ags(ctx, ins["rd"])
            ctx.set(ops.load, 1)
            await ctx.tick()
            ctx.set(ops.load, 0)
            for _ in range(4):          # micro-words of this instruction
                sa, sb = rng.choice(list(USrc)), rng.choice(list(USrc))
                k, const = rng.randrange(N_AG), rng.getrandbits(16)
                k_const = const & ~3 | k
                # F -> R
                ctx.set(ops.f_a, sa)
                ctx.set(ops.f_b, sb)
                ctx.set(ops.f_k, k)
                ctx.set(ops.r_load, 1)
                await ctx.tick()
                ctx.set(ops.r_load, 0)
                ctx.set(ops.r_a, sa)
                ctx.set(ops.r_b, sb)
                ctx.set(ops.r_const, k_const)
                ctx.set(ops.r_valid, 1)
                ctx.set(ops.r_reads_set, int(USrc.AGREG in (sa, sb)))
                if rng.random() < 0.2:       # R holds while X's AG_SET of generator k goes
                    ctx.set(ops.ag_set_oh, 1 << k)
                    await ctx.tick()
                    ctx.set(ops.ag_set_oh, 0)
                    ag[k]["reg"] = ins["rd"]
                    set_ags(ctx, ins["rd"])
                # R -> X, with X's write of this cycle and W's pending write
                t0, t1, fwd = (rng.getrandbits(32) for _ in range(3))
                neg = rng.getrandbits(1)
                x = {"wr_rd": rng.random() < 0.3, "dst_t0": rng.random() < 0.2,
                     "dst_t1": rng.random() < 0.2}
                agw = rng.randrange(N_AG) if rng.random() < 0.3 else None
                hit_ok = rng.getrandbits(N_AG)
                for n, v in x.items():
                    ctx.set(getattr(ops, "x_" + n), int(v))
                ctx.set(ops.x_dst_agreg_k, 0 if agw is None else 1 << agw)
                ctx.set(ops.ag_hit_ok, hit_ok)
                ctx.set(ops.x_valid, 1)
                ctx.set(ops.x_fwd, fwd)
                ctx.set(ops.x_fwd_n, fwd ^ (MASK if neg else 0))
                ctx.set(ops.neg_r, neg)
                ctx.set(ops.t0, t0)
                ctx.set(ops.t1, t1)
                w_en, w_addr, w_data = rng.random() < 0.3, rng.randrange(64), rng.getrandbits(32)
                if rng.random() < 0.3:
                    w_addr = index(sa, ins, k) if sa in REG_SRCS else w_addr
                ctx.set(ops.w_rf_en, int(w_en))
                ctx.set(ops.w_rf_addr, w_addr)
                ctx.set(ops.w_rf_data, w_data)
                for i in range(isa.NUM_REGS):
                    ctx.set(top.regs[i], rf[i])

                def value(src):
                    if src in REG_SRCS:
                        idx = index(src, ins, k)
                        if x["wr_rd"] and ins["rd"] != 0 and idx == ins["rd"]:
                            return fwd
                        if agw is not None and hit_ok >> agw & 1 and idx == ag[agw]["reg"]:
                            return fwd
                        return w_data if w_en and w_addr == idx else rf[idx]
                    if src == USrc.T0:
                        return fwd if x["dst_t0"] else t0
                    if src == USrc.T1:
                        return fwd if x["dst_t1"] else t1
                    return {USrc.IMM: ins["imm"], USrc.CONST: k_const,
                            USrc.AGSTRIDE: ag[k]["stride"], USrc.AGBASE: ag[k]["base"]}.get(
                                src, 0)

                want = value(sa), value(sb)
                ctx.set(ops.x_load, 1)
                await ctx.tick()
                ctx.set(ops.x_load, 0)
                ctx.set(ops.x_valid, 0)
                ctx.set(ops.w_rf_en, 0)
                what = f"{sa.name}, {sb.name} k={k} ins {ins} (seed {seed}, step {t})"
                assert (ctx.get(ops.a), ctx.get(ops.b)) == want, what
                assert ctx.get(ops.b_n) == want[1] ^ (MASK if neg else 0), what
                for _ in range(rng.choice([0, 1])):      # X holds: its operands stay
                    ctx.set(ops.x_fwd, rng.getrandbits(32))
                    await ctx.tick()
                    assert (ctx.get(ops.a), ctx.get(ops.b)) == want, what

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
