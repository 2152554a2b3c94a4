"""The pieces of the compact vector engine (``VectorEngine(units=...)``) on the Amaranth
simulator: the ALU without its multiplier and the interleaved accumulators against
``sim.vector``, the parameter checks and the cycle model. The engine itself is checked bit for
bit by ``cocotb_tests/test_vector.py`` (``test_vector_engine_compact``)."""

import functools
import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from rtl.vector.alu import VectorAlu
from rtl.vector.engine import VectorEngine
from rtl.vector.interleaved_acc import InterleavedAcc
from sim import isa
from sim.cycles import EngineCost
from sim.vector import AccOp, AluOp, acc_identity, acc_update, alu, element_cycles

SEED = 20261128
EDGES = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000,
         0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x40490FDB]


def _values(rng, n):
    """FP32 patterns: mostly moderate normals (so that sums stay finite), some edge cases."""
    out = []
    for _ in range(n):
        if rng.random() < 0.15:
            out.append(int(rng.choice(EDGES)))
        else:
            out.append(int(rng.integers(0, 2)) << 31 | int(rng.integers(110, 140)) << 23 |
                       int(rng.integers(0, 1 << 23)))
    return out


@pytest.mark.parametrize("stages", [0, 3])
def test_alu_without_multiplier(stages):
    """``VectorAlu(mul=False)``: every op as ``sim.vector.alu`` but MUL, which gives +0."""
    rng = np.random.default_rng(SEED + stages)
    dut = VectorAlu(stages, mul=False)
    n = 600
    ops = [int(rng.integers(0, 16)) for _ in range(n)]
    xs, ss = _values(rng, n), _values(rng, n)
    got = []

    async def bench(ctx):
        for i in range(n + stages):
            if i < n:
                ctx.set(dut.op, ops[i])
                ctx.set(dut.x, xs[i])
                ctx.set(dut.s, ss[i])
            if i >= stages:
                got.append(ctx.get(dut.o))
            if stages:
                await ctx.tick()

    sim = Simulator(dut)
    if stages:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    exp = [int(alu(op, x, s)) if op <= AluOp.GE and op != AluOp.MUL else 0
           for op, x, s in zip(ops, xs, ss)]
    bad = [i for i in range(n) if got[i] != exp[i]]
    assert not bad, [(ops[i], hex(xs[i]), hex(ss[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]


def test_alu_without_multiplier_has_no_dsp():
    """Without the multiplier the ALU instantiates no FP32Multiplier."""
    from amaranth.back import rtlil
    text = rtlil.convert(VectorAlu(3, mul=False), name="top", emit_src=False)
    assert "mul" not in [line.split()[-1] for line in text.splitlines()
                         if line.startswith("  cell ") and "top." in line]
    assert "FP32Multiplier" not in text and "fp32_mul" not in text.lower()


@pytest.mark.parametrize("lanes,units,stages", [(4, 1, 3), (4, 2, 3), (4, 1, 0), (8, 2, 3),
                                                (2, 2, 3)])
@pytest.mark.parametrize("acc_op", [AccOp.SUM, AccOp.MAX, AccOp.MIN, AccOp.NONE])
def test_interleaved_acc_vs_golden(lanes, units, stages, acc_op):
    """Element beats in sub-beats (lane ``j * units + u`` in sub-beat ``j``), with random gaps
    between beats (no sooner than the contract allows: a lane's next element ``latency``
    cycles after the last), a reset in the middle; every accumulator against
    ``sim.vector.acc_update`` applied in element order, checked after each beat has landed."""
    rng = np.random.default_rng(SEED + 7 * lanes + 3 * units + stages + 11 * int(acc_op))
    dut = InterleavedAcc(lanes, units, stages)
    subs = lanes // units
    beats = [_values(rng, lanes) for _ in range(24)]
    reset_at = 12

    async def bench(ctx):
        ctx.set(dut.op, acc_op)
        ctx.set(dut.rst_value, int(acc_identity(acc_op)))
        model = [int(acc_identity(acc_op))] * lanes
        ctx.set(dut.rst, 1)
        await ctx.tick()
        ctx.set(dut.rst, 0)
        assert list(ctx.get(dut.acc)) == model
        last_start = -100
        cycle = 0
        for b, beat in enumerate(beats):
            if b == reset_at:
                ctx.set(dut.rst, 1)
                await ctx.tick()
                cycle += 1
                ctx.set(dut.rst, 0)
                model = [int(acc_identity(acc_op))] * lanes
            # the contract: sub-beat j of this beat no sooner than latency after the last's
            while cycle - last_start < max(dut.latency, subs) or rng.random() < 0.3:
                ctx.set(dut.valid, 0)
                ctx.set(dut.y, [int(v) for v in _values(rng, units)])   # must not matter
                await ctx.tick()
                cycle += 1
            last_start = cycle
            for j in range(subs):
                ctx.set(dut.valid, 1)
                ctx.set(dut.sub, j)
                ctx.set(dut.y, [beat[j * units + u] for u in range(units)])
                await ctx.tick()
                cycle += 1
            ctx.set(dut.valid, 0)
            model = [int(acc_update(acc_op, a, y)) for a, y in zip(model, beat)]
            # after the last sub-beat's latency every lane holds the model's value
            busy_cycles = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                cycle += 1
                busy_cycles += 1
                assert busy_cycles <= dut.latency
            got = list(ctx.get(dut.acc))
            assert got == model, (b, [hex(g) for g in got], [hex(e) for e in model])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def quiet(test):
    """Run ``test`` ignoring the warnings of the components it builds and never elaborates
    (collected before the warnings filter is restored)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnusedElaboratable)
            test(*args, **kwargs)
            gc.collect()
    return run


@quiet
def test_units_parameter():
    """``units`` must be a divisor of ``lanes`` from 1 to ``lanes``; None is one per lane."""
    assert VectorEngine(4, 64).units == 4 and VectorEngine(4, 64).subs == 1
    assert VectorEngine(4, 64, units=1).subs == 4
    with pytest.raises(ValueError, match="units must be a divisor of lanes \\(4\\), not 3"):
        VectorEngine(4, 64, units=3)
    with pytest.raises(ValueError, match="units must be an integer from 1 to 4, not 0"):
        VectorEngine(4, 64, units=0)
    with pytest.raises(TypeError, match="units must be an integer"):
        VectorEngine(4, 64, units=2.0)
    with pytest.raises(ValueError, match="units must be a divisor of lanes \\(4\\), not 3"):
        InterleavedAcc(4, 3)
    with pytest.raises(TypeError, match="mul must be a bool"):
        VectorAlu(0, mul=1)


@quiet
def test_element_cycles():
    """Cycles per element beat: the unit-per-lane engine's (1, a summed one 1 + acc_wait) and
    the compact engine's (``subs``; accumulating at least 1 + acc_wait), as the RTL reports."""
    for deep in (True, False):
        for lanes, units in ((4, 4), (4, 2), (4, 1), (8, 1)):
            eng = VectorEngine(lanes, 64, deep=deep, units=units)
            w = eng.acc_wait
            for op in AccOp:
                exp = (1 + w if op == AccOp.SUM else 1) if units == lanes else \
                    (eng.subs if op == AccOp.NONE else max(eng.subs, 1 + w))
                assert eng.element_cycles(op) == exp == element_cycles(eng.subs, w, op)


def test_cycle_model_compact_cost():
    """``EngineCost(vector_subs=...)``: the cost with a unit per lane (unchanged) plus the
    compact engine's extra span: elements ``element_cycles`` apart, the last one's sub-beats
    (or a read-out's wait), the serial output's ``G - 1`` cycles (the register after the
    FIFO, ``G`` sub-beats, less the one-beat rounding unit's two registers)."""
    act = {"op": isa.VecOp.ACT, "acc": 0, "n": 10}
    act_acc = dict(act, acc=1)
    red_max = {"op": isa.VecOp.REDUCE, "alu": isa.VecAlu.MAX, "n": 10}
    one, four, two = EngineCost(), EngineCost(vector_subs=4), EngineCost(vector_subs=2)
    assert one(isa.Engine.VECTOR, act) == 10 + 54
    assert one(isa.Engine.VECTOR, act_acc) == 40 + 54
    assert one(isa.Engine.VECTOR, red_max) == 10 + 54
    assert four(isa.Engine.VECTOR, act) == 10 + 54 + 10 * 3 + 3
    assert four(isa.Engine.VECTOR, act_acc) == 40 + 54 + 3 + 3
    assert two(isa.Engine.VECTOR, act) == 10 + 54 + 10 * 1 + 1
    assert two(isa.Engine.VECTOR, red_max) == 10 + 54 + 9 * 3 + 4 - 2 + 1


@quiet
def test_core_option():
    """``CoreConfig.vector_units`` / ``NeuronCore(vector_units=...)`` reach the engine's
    ``units``; the default (None) leaves the configuration's name unchanged."""
    from rtl.core.top import NeuronCore
    from sim.config import CoreConfig
    base = CoreConfig(rows=4)
    cfg = CoreConfig(rows=4, vector_units=1)
    assert base.vector_units is None and cfg.name == base.name + "-v1"
    assert CoreConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="vector_units must be a divisor of rows \\(4\\), not 3"):
        CoreConfig(rows=4, vector_units=3)
    with pytest.raises(ValueError, match="vector_units must be an integer from 1 to 4, not 8"):
        CoreConfig(rows=4, vector_units=8)
    core = NeuronCore.from_config(cfg)
    assert core.config()["vector_units"] == 1 and core.core_config() == cfg


def test_cycle_model_of_config():
    """``EngineCost.of_config``: the compact engine's sub-beats from ``vector_units``."""
    from sim.config import CoreConfig
    assert EngineCost.of_config(CoreConfig(rows=8)).vector_subs == 1
    cost = EngineCost.of_config(CoreConfig(rows=8, vector_units=2), dma_setup=3)
    assert (cost.rows, cost.cols, cost.vector_subs, cost.dma_setup) == (8, 8, 4, 3)
