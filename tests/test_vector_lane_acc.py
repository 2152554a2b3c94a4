"""The vector engine's accumulators (``rtl.vector.lane_acc.LaneAcc``) on the Amaranth
simulator against ``sim.vector.acc_update``: every accumulate op, a unit per lane and shared
units, elements at random spacing (the engine's minimum for the op at least), random words on
``y`` between them, a read-out slot that accumulates nothing, and the hold register ``y_h``."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.lane_acc import LaneAcc
from sim.vector import AccOp, acc_identity, acc_update

SEED = 20261132
EDGES = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x7F800000,
         0xFF800000, 0x7FC00000, 0x7F7FFFFF]


def _word(rng):
    if rng.random() < 0.15:
        return int(rng.choice(EDGES))
    return int(rng.integers(0, 2)) << 31 | int(rng.integers(110, 140)) << 23 | \
        int(rng.integers(0, 1 << 23))


@pytest.mark.parametrize("lanes,units,stages", [(2, 2, 0), (2, 2, 3), (4, 2, 0), (4, 1, 3)])
def test_lane_acc_vs_golden(lanes, units, stages):
    rng = np.random.default_rng(SEED + 10 * lanes + units + stages)
    dut = LaneAcc(lanes, units, stages)
    G = lanes // units
    bad = []

    async def bench(ctx):
        async def idle(k):
            for _ in range(k):
                for u in range(units):
                    ctx.set(dut.y[u], int(rng.integers(0, 1 << 32)))
                await ctx.tick()

        for episode in range(24):
            op = AccOp(episode % 4)
            summing = op == AccOp.SUM
            ctx.set(dut.op, op)
            ctx.set(dut.summing, summing and G == 1)
            ctx.set(dut.rst, 1)
            await idle(1)
            ctx.set(dut.rst, 0)
            await idle(3)
            acc = [acc_identity(op)] * lanes
            elems = [[_word(rng) for _ in range(lanes)] for _ in range(int(rng.integers(1, 7)))]
            for e in elems:
                for j in range(G):
                    ctx.set(dut.y_valid, 1)
                    if G > 1:
                        ctx.set(dut.sub, j)
                    for u in range(units):
                        ctx.set(dut.y[u], e[j * units + u])
                    await ctx.tick()
                ctx.set(dut.y_valid, 0)
                acc = [int(acc_update(op, np.uint32(acc[l]), np.uint32(e[l])))
                       for l in range(lanes)]
                if summing or (G > 1 and op != AccOp.NONE):
                    await idle(stages + int(rng.integers(0, 2)))
                else:
                    await idle(int(rng.integers(0, 3)))
            await idle(stages + 3)
            got = [ctx.get(dut.acc[l]) for l in range(lanes)]
            held = [ctx.get(dut.y_h[l]) for l in range(lanes)]
            if got != acc or held != elems[-1] or ctx.get(dut.busy):
                bad.append((op, [hex(v) for v in got], [hex(v) for v in acc]))
            # the read-out slot: y_emit, no accumulation
            ctx.set(dut.y_valid, 1)
            ctx.set(dut.y_emit, 1)
            if G > 1:
                ctx.set(dut.sub, 0)
            await idle(1)
            ctx.set(dut.y_valid, 0)
            ctx.set(dut.y_emit, 0)
            assert ctx.get(dut.yh_valid) and ctx.get(dut.yh_emit)
            await idle(stages + 3)
            assert [ctx.get(dut.acc[l]) for l in range(lanes)] == got

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:3]
