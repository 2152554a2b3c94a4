"""The vector engine's output stage (``rtl.vector.output.VectorOutput``) on the Amaranth
simulator: beats written under a credit count leave ``o`` in order under random
back-pressure, raw beats unchanged and encoded beats as ``sim.rounding.encode``; ``ret``
returns every credit; the latency without stalls."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.output import VectorOutput
from sim.dtypes import Format, RoundMode
from sim.rounding import RAW_MODE, encode

SEED = 20261131


@pytest.mark.parametrize("lanes,depth,deep,units", [(2, 4, False, None), (1, 8, True, None),
                                                    (4, 4, True, 1)])
def test_output_order_and_credits(lanes, depth, deep, units):
    rng = np.random.default_rng(SEED + lanes + depth)
    dut = VectorOutput(lanes, depth, deep=deep, units=units)
    sent, got = [], []
    n = 120

    async def bench(ctx):
        credits = depth
        for cyc in range(n * 6):
            write = len(sent) < n and credits > 0 and rng.random() < 0.6
            ctx.set(dut.w_en, write)
            if write:
                words = [int(rng.integers(0, 1 << 32)) for _ in range(lanes)]
                raw = rng.random() < 0.5
                fmt, mode = (Format.FP32, RAW_MODE) if raw else (Format.BF16, RoundMode.RNE)
                for l in range(lanes):
                    ctx.set(dut.w_data.data[l], words[l])
                ctx.set(dut.w_data.fmt, fmt)
                ctx.set(dut.w_data.mode, mode)
                sent.append([words[l] if raw else int(encode(np.uint32(words[l]), fmt, mode))
                             for l in range(lanes)])
                credits -= 1
            ready = rng.random() < 0.5
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                got.append([ctx.get(dut.o.payload[l]) for l in range(lanes)])
            credits += ctx.get(dut.ret)
            await ctx.tick()
        assert credits == depth

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(sent) == n
    assert got == sent


@pytest.mark.parametrize("deep,lanes,units", [(False, 1, None), (True, 1, None), (True, 4, 1),
                                              (True, 4, 2)])
def test_output_latency(deep, lanes, units):
    """Latency without stalls: FIFO 2, the register after it 1, the rounding unit 2 +
    encoder stages; with ``G`` sub-beats the serial unit in place of the rounding unit's
    two: ``G + 1`` + encoder stages."""
    dut = VectorOutput(lanes, 4, deep=deep, units=units)
    subs = lanes // (units or lanes)
    enc = 3 if deep else 0
    assert dut.latency == (2 + 1 + 2 + enc if subs == 1 else 2 + 1 + subs + 1 + enc)
    seen = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.w_data.data[0], 0x3F800000)
        ctx.set(dut.w_data.mode, RAW_MODE)
        ctx.set(dut.w_en, 1)
        await ctx.tick()
        ctx.set(dut.w_en, 0)
        for t in range(1, 20):
            if ctx.get(dut.o.valid):
                seen.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen[:1] == [dut.latency]
