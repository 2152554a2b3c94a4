"""The sequencer's state units in the Amaranth simulator, each against a Python model over a
seeded random stream of operations with random stalls: the loop stack
(``rtl/control/loop_stack.py``), the address generators (``rtl/control/addr_gens.py``) and an
engine's record under construction (``rtl/control/record_builder.py``).

Each operation is one cycle in which X's micro-instruction goes, after a random number of
cycles in which it holds (stalled); ``res_q`` carries its result in the next cycle (W), and
the outputs are compared with the model once W has passed."""

import random

import pytest
from amaranth.hdl import Cat, Elaboratable, Module
from amaranth.sim import Simulator

from rtl.control.addr_gens import PAIRS, AddressGenerators
from rtl.control.loop_stack import LoopStack
from rtl.control.record_builder import RecordBuilder
from sim import isa
from sim.isa import Engine

MASK = 0xFFFF_FFFF


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _count(rng):
    return rng.choice([0, 1, 2, 3, 4, 0x10000, 0x10001, MASK, rng.getrandbits(32)])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_loop_stack(seed):
    rng = random.Random(seed)
    dut = LoopStack()
    stack = []      # [start, remaining]

    async def op(ctx, kind, pc=0, count=0):
        ctx.set(dut.pc, pc)
        for n in ("push", "step", "pop"):
            ctx.set(getattr(dut, n), int(kind == n))
        ctx.set(dut.top, int(kind in ("step", "pop")))
        ctx.set(dut.x_live, 1)
        for _ in range(rng.choice([0, 0, 1, 3])):       # X holds it
            await ctx.tick()
        ctx.set(dut.go, 1)
        ctx.set(dut.adv_pre, 1)
        await ctx.tick()
        for n in ("x_live", "go", "adv_pre", "push", "step", "pop", "top"):
            ctx.set(getattr(dut, n), 0)
        ctx.set(dut.res_q, count)
        assert ctx.get(dut.more_pending) == 1
        assert ctx.get(dut.step_pending) == int(kind != "push")
        await ctx.tick()
        ctx.set(dut.res_q, rng.getrandbits(32))
        assert ctx.get(dut.more_pending) == 0

    def check(ctx, what):
        depth = len(stack)
        assert ctx.get(dut.depth) == depth, what
        assert ctx.get(dut.level_oh) == 1 << depth, what
        assert (ctx.get(dut.empty), ctx.get(dut.full)) == (depth == 0,
                                                            depth == isa.LOOP_DEPTH), what
        assert ctx.get(dut.more) == int(depth > 0 and stack[-1][1] > 1), what
        if depth:
            assert ctx.get(dut.start) == stack[-1][0], what

    async def bench(ctx):
        for i in range(300):
            choices = (["push"] if len(stack) < isa.LOOP_DEPTH else []) + (
                ["step", "step", "pop"] if stack else [])
            kind = rng.choice(choices)
            pc, count = rng.getrandbits(32), _count(rng)
            await op(ctx, kind, pc, count)
            if kind == "push":
                stack.append([(pc + 1) & MASK, count])
            elif kind == "step":
                stack[-1][1] = (stack[-1][1] - 1) & MASK
            else:
                stack.pop()
            check(ctx, f"op {i} {kind} (seed {seed}), stack {stack}")
            if rng.random() < 0.03:
                ctx.set(dut.clear, 1)
                await ctx.tick()
                ctx.set(dut.clear, 0)
                stack.clear()
                check(ctx, f"clear after op {i}")

    _run(dut, bench)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_address_generators(seed):
    rng = random.Random(seed)
    dut = AddressGenerators()
    n = isa.NUM_AG
    gens = [dict(level=0, reg=0, stride=0, base=0) for _ in range(n)]

    def check(ctx, rd, depth, what):
        for j, g in enumerate(gens):
            assert ctx.get(dut.reg[j]) == g["reg"], what
            assert ctx.get(dut.stride[j]) == g["stride"], what
            assert ctx.get(dut.base[j]) == g["base"], what
            assert ctx.get(dut.rd_eq[j]) == int(g["reg"] == rd), what
            assert ctx.get(dut.hit_ok[j]) == int(depth != 0 and g["level"] == depth and
                                                 g["reg"] != 0), what
        for p, (i, j) in enumerate(PAIRS):
            assert ctx.get(dut.pair_eq) >> p & 1 == int(gens[i]["reg"] == gens[j]["reg"]), what

    async def bench(ctx):
        rd, depth = 0, 0
        ctx.set(dut.clear, 1)       # START (``rd_eq`` is valid from a clear or a load on)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        for i in range(400):
            kind = rng.choice(["set", "set", "snap", "snap", "load", "depth"])
            if kind == "load" or rng.random() < 0.02:        # a new instruction (MAP)
                rd = rng.choice([0, rng.randrange(64), gens[rng.randrange(n)]["reg"]])
                ctx.set(dut.rd, rd)
                ctx.set(dut.rd_nz, int(rd != 0))
                ctx.set(dut.load, 1)
                await ctx.tick()
                ctx.set(dut.load, 0)
            elif kind == "depth":
                depth = rng.randrange(isa.LOOP_DEPTH + 1)
                ctx.set(dut.level_oh, (1 << depth) >> 1)
            else:
                j, value = rng.randrange(n), rng.getrandbits(32)
                level = rng.randrange(8)
                ctx.set(dut.index, j if kind == "set" else rng.randrange(n))
                ctx.set(dut.level, level)
                ctx.set(dut.snap_k, 1 << j)
                ctx.set(dut.set_x, int(kind == "set"))
                for _ in range(rng.choice([0, 0, 1, 2])):    # X holds it
                    await ctx.tick()
                if kind == "set":
                    assert ctx.get(dut.set_oh) == 1 << j
                    assert ctx.get(dut.eff[j]) == rd
                ctx.set(dut.set_go if kind == "set" else dut.snap_go, 1)
                await ctx.tick()
                for s_ in (dut.set_go, dut.snap_go, dut.set_x):
                    ctx.set(s_, 0)
                ctx.set(dut.res_q, value)
                if kind == "set":
                    gens[j].update(level=level, reg=rd, stride=value)
                elif depth != 0 and gens[j]["level"] == depth:
                    gens[j]["base"] = value
                check(ctx, rd, depth, f"W of op {i} {kind} {j} (seed {seed})")
                await ctx.tick()
                ctx.set(dut.res_q, rng.getrandbits(32))
            check(ctx, rd, depth, f"op {i} {kind} (seed {seed}), rd {rd}, gens {gens}")
            if rng.random() < 0.02:
                ctx.set(dut.clear, 1)
                await ctx.tick()
                ctx.set(dut.clear, 0)
                for g in gens:
                    g.update(level=0, reg=0, stride=0, base=0)
                check(ctx, rd, depth, f"clear after op {i}")

    _run(dut, bench)


class _CheckedRecord(Elaboratable):
    """A record builder with a stand-in for the core's check: slot ``s``'s two terms are
    ``res_q + s`` (low two bits), a blank slot's are ``blank``, and a record is illegal when
    any slot's terms are 3."""

    def __init__(self, engine, blank):
        self.bu = RecordBuilder(engine, check_terms=2)
        self.blank = blank

    def elaborate(self, platform):
        m = Module()
        m.submodules.bu = bu = self.bu
        slots = isa.RECORD_SLOTS[bu.engine]
        m.d.comb += [bu.slot_terms[s].eq((bu.res_q + s)[:2]) for s in range(slots)]
        m.d.comb += [bu.blank_terms[s].eq(self.blank) for s in range(slots)]
        m.d.comb += bu.illegal.eq(Cat(*[bu.terms[s] == 3 for s in range(slots)]).any())
        return m


@pytest.mark.parametrize("engine, blank, seed", [(Engine.DMA, 0, 1), (Engine.TENSOR, 0, 2),
                                                 (Engine.VECTOR, 0, 3), (Engine.TENSOR, 3, 4)])
def test_record_builder(engine, blank, seed):
    rng = random.Random(seed)
    checked = engine != Engine.DMA
    top = _CheckedRecord(engine, blank) if checked else None
    dut = top.bu if checked else RecordBuilder(engine)
    slots = isa.RECORD_SLOTS[engine]
    chk = isa.CHECKED_SLOTS.get(engine, ())
    values = [None] * slots         # written since the last EMIT, else None

    def terms(s):
        return blank if values[s] is None else (values[s] + s) & 3

    def check(ctx, what):
        want = sum((v or 0) << 32 * s for s, v in enumerate(values))
        assert ctx.get(dut.record) == want, what
        if checked:
            assert ctx.get(dut.ill) == int(any(terms(s) == 3 for s in range(slots))), what
            assert [ctx.get(dut.terms[s]) for s in range(slots)] == [terms(s)
                                                                       for s in range(slots)]
        else:
            assert ctx.get(dut.ill) == 0, what

    async def bench(ctx):
        for i in range(300):
            kind = rng.choice(["write", "write", "write", "emit"])
            s, value = rng.randrange(slots), rng.getrandbits(32)
            ctx.set(dut.slot, s)
            ctx.set(dut.write, int(kind == "write"))
            ctx.set(dut.emit, int(kind == "emit"))
            if checked:
                ctx.set(dut.write_chk, int(kind == "write" and s in chk))
            ctx.set(dut.x_live, 1)
            for _ in range(rng.choice([0, 0, 1, 2])):        # X holds it
                await ctx.tick()
            ctx.set(dut.go, 1)
            await ctx.tick()
            for sig in (dut.x_live, dut.go, dut.write, dut.emit):
                ctx.set(sig, 0)
            ctx.set(dut.res_q, value)
            if kind == "write":
                values[s] = value
                assert ctx.get(dut.chk_pend) == int(checked and s in chk)
                assert ctx.get(dut.record) >> 32 * s & MASK == value    # shown in W
            else:
                values[:] = [None] * slots
            await ctx.tick()
            ctx.set(dut.res_q, rng.getrandbits(32))
            assert ctx.get(dut.chk_pend) == 0
            await ctx.tick()
            check(ctx, f"op {i} {kind} slot {s} (seed {seed}), values {values}")
            if rng.random() < 0.03:
                ctx.set(dut.clear, 1)
                await ctx.tick()
                ctx.set(dut.clear, 0)
                values[:] = [None] * slots
                await ctx.tick()
                check(ctx, f"clear after op {i}")

    _run(top if checked else dut, bench)
