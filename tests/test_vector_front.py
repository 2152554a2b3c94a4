"""The vector engine's datapath in front of the LUT (``rtl.vector.front.VectorFront``) on the
Amaranth simulator: ``alu(op1, alu(op0, a, s0), s1)`` (``sim.vector.alu``) for every source
of the scalars, FP32 operands, a unit per lane and shared units, one element per cycle, the
result checked ``latency`` cycles after its entry."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.front import VectorFront
from sim.dtypes import Format
from sim.vector import CMD_FIELDS, Src, alu

SEED = 20261130


def _word(rng):
    if rng.random() < 0.1:
        return int(rng.choice([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000]))
    return int(rng.integers(0, 2)) << 31 | int(rng.integers(110, 140)) << 23 | \
        int(rng.integers(0, 1 << 23))


@pytest.mark.parametrize("lanes,units,deep", [(2, None, False), (4, 2, False), (2, 1, True)])
def test_front_vs_alu(lanes, units, deep):
    rng = np.random.default_rng(SEED + lanes + 3 * (units or 0) + deep)
    dut = VectorFront(lanes, units, deep=deep)
    units = units or lanes
    G = lanes // units
    lat = dut.latency
    bad = []

    async def bench(ctx):
        for episode in range(6 if deep else 12):
            c = {name: 0 for name, _ in CMD_FIELDS}
            c.update(op0=int(rng.integers(0, 13)), op1=int(rng.integers(0, 13)),
                     src0=int(rng.integers(0, 3)), src1=int(rng.integers(0, 3)),
                     imm0=_word(rng), imm1=_word(rng), fmt_b=int(Format.FP32))
            for k, v in c.items():
                ctx.set(getattr(dut.c, k), v)
            ctx.set(dut.fmt_a, int(Format.FP32))
            lane_regs = []
            for i in range(2):                        # prologue beats for both lane registers
                words = [_word(rng) for _ in range(lanes)]
                lane_regs.append(words)
                for j in range(G):
                    for l in range(lanes):
                        ctx.set(dut.b[l], words[l])
                    if G > 1:
                        ctx.set(dut.sub, j)
                    ctx.set(dut.take_lane0 if i == 0 else dut.take_lane1, 1)
                    await ctx.tick()
                    ctx.set(dut.take_lane0 if i == 0 else dut.take_lane1, 0)
            elems = [([_word(rng) for _ in range(lanes)], [_word(rng) for _ in range(lanes)])
                     for _ in range(5)]
            seq = [(e, j) for e in elems for j in range(G)]
            outs = []
            for t in range(len(seq) + lat):
                if t < len(seq):
                    (a, b), j = seq[t]
                    for l in range(lanes):
                        ctx.set(dut.a[l], a[l])
                        ctx.set(dut.b[l], b[l])
                    if G > 1:
                        ctx.set(dut.sub, j)
                if t >= lat:
                    outs.append([ctx.get(dut.o[u]) for u in range(units)])
                await ctx.tick()
            for t, ((a, b), j) in enumerate(seq):
                for u in range(units):
                    l = j * units + u
                    s0 = {Src.IMM: c["imm0"], Src.LANE: lane_regs[0][l]}.get(c["src0"], b[l])
                    s1 = {Src.IMM: c["imm1"], Src.LANE: lane_regs[1][l]}.get(c["src1"], b[l])
                    y0 = int(alu(c["op0"], np.uint32(a[l]), np.uint32(s0)))
                    exp = int(alu(c["op1"], np.uint32(y0), np.uint32(s1)))
                    if outs[t][u] != exp:
                        bad.append((c, l, hex(a[l]), hex(b[l]), hex(outs[t][u]), hex(exp)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:3]


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_front_latency():
    assert VectorFront(2, deep=False).latency == 2
    assert VectorFront(2, deep=True).latency == 3 + 2 * 5
