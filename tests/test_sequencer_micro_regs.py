"""The sequencer's micro-registers and branch decision (``rtl/control/micro_regs.py``) in the
Amaranth simulator, fed by the micro-word decoder, against a Python model of T0, T1, UCTR,
the flags and ``sim.isa.UCond`` over a seeded random stream of micro-instructions."""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from rtl.control.micro_decode import MicroDecoder
from rtl.control.micro_regs import MicroRegisters
from sim import isa
from sim.isa import UCond, UDst, USeq

MASK = 0xFFFF_FFFF


class _Decoded(Elaboratable):
    def __init__(self):
        self.dec = MicroDecoder()
        self.regs = MicroRegisters()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dec, m.submodules.regs = self.dec, self.regs
        m.d.comb += self.regs.flags.eq(self.dec.r)
        return m


def _s32(x):
    return x - (1 << 32) if x >> 31 else x


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_micro_registers(seed):
    rng = random.Random(seed)
    top = _Decoded()
    r = top.regs
    st = dict(t0=0, t1=0, uctr=0, eq=0, lt=0, ltu=0)

    def taken(cond, res_prev, loop_more):
        return {UCond.ALWAYS: 1, UCond.Z: res_prev == 0, UCond.NZ: res_prev != 0,
                UCond.EQ: st["eq"], UCond.NE: not st["eq"], UCond.LT: st["lt"],
                UCond.GE: not st["lt"], UCond.LTU: st["ltu"], UCond.GEU: not st["ltu"],
                UCond.LOOP_MORE: loop_more}[cond]

    async def bench(ctx):
        ctx.set(r.clear, 1)
        await ctx.tick()
        ctx.set(r.clear, 0)
        for i in range(400):
            kind = rng.choice(["t0", "t1", "uctr", "flags", "branch", "uloop", "ret"])
            res = rng.choice([0, 1, 2, rng.getrandbits(32)])
            a, b = rng.getrandbits(32), rng.choice([0, rng.getrandbits(32)])
            cond = rng.choice(list(UCond))
            fields = {"t0": dict(dst=UDst.T0), "t1": dict(dst=UDst.T1),
                      "uctr": dict(dst=UDst.UCTR), "flags": dict(dst=UDst.FLAGS),
                      "branch": dict(seq=USeq.BRANCH, cond=cond), "uloop": dict(seq=USeq.ULOOP),
                      "ret": dict(seq=USeq.RET)}[kind]
            ctx.set(top.dec.word, isa.pack(isa.MICRO_FIELDS, **{k: int(v)
                                                                 for k, v in fields.items()}))
            # The cycle before: X's result of the previous micro-instruction is ``res_q``
            # (the zero test registers it), the compares are of this one's operands.
            res_prev = rng.choice([0, rng.getrandbits(32)])
            loop_more = rng.getrandbits(1)
            ctx.set(r.res_q, res_prev)
            ctx.set(r.loop_more, loop_more)
            ctx.set(r.alu_eq, int(a == b))
            ctx.set(r.alu_lt, int(_s32(a) < _s32(b)))
            ctx.set(r.alu_ltu, int(a < b))
            await ctx.tick()
            what = f"op {i} {kind} {cond.name} state {st} (seed {seed})"
            want = {"branch": taken(cond, res_prev, loop_more), "uloop": st["uctr"] != 0,
                    "ret": True}.get(kind, False)
            assert ctx.get(r.redirect) == int(want), what
            ctx.set(r.go, 1)
            ctx.set(r.adv, 1)
            await ctx.tick()
            ctx.set(r.go, 0)
            ctx.set(r.adv, 0)
            ctx.set(top.dec.word, 0)
            ctx.set(r.res_q, res)           # W
            if kind in ("t0", "t1"):
                st[kind] = res
                assert ctx.get(getattr(r, kind)) == res, what     # shown in W
            elif kind == "uctr":
                st["uctr"] = res & 0xFFFF
                assert ctx.get(r.uctr_fix) == 1, what
            elif kind == "flags":
                st.update(eq=int(a == b), lt=int(_s32(a) < _s32(b)), ltu=int(a < b))
                assert ctx.get(r.flags_w) == 1, what
            elif kind == "uloop" and st["uctr"]:
                st["uctr"] -= 1
            await ctx.tick()
            assert (ctx.get(r.t0), ctx.get(r.t1)) == (st["t0"], st["t1"]), what
            assert ctx.get(r.macro_flags) == st["eq"] | st["lt"] << 1 | st["ltu"] << 2, what
            assert (ctx.get(r.uctr_fix), ctx.get(r.flags_w)) == (0, 0), what

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
