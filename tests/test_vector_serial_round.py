"""The compact engine's rounding unit (``rtl.vector.serial_round.SerialRounding``) against the
one-encoder-per-lane ``rtl.round.rounding_unit.RoundingUnit`` on the Amaranth simulator: the
same beats (RNE, RTZ, SR, raw; every format) under random idle, back-pressure and re-seeding
between beats give the same output beats, so every lane's SR stream is its own generator's;
and its latency and throughput."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.round.prng import LanePrngs
from rtl.round.rounding_unit import RoundingUnit
from rtl.vector.serial_round import CompactSeedPrngs, SerialRounding
from sim.dtypes import Format, RoundMode
from sim.rounding import RAW_MODE

SEED = 20261129
MODES = (RoundMode.RNE, RoundMode.RTZ, RoundMode.SR, RoundMode.SR, RAW_MODE)


def _stream(dut, beats, rng, seeds, lanes, cycles):
    """Offer ``beats`` (words, fmt, mode) on ``dut.i`` with random idle, random ``o.ready``
    and a re-seed (``seeds``: beat index -> seed, sent once no beat waits); returns the output
    beats."""
    got = []

    async def bench(ctx):
        k = 0
        for _ in range(cycles):
            if len(got) == len(beats):
                break
            if k in seeds and not ctx.get(dut.i.valid):
                ctx.set(dut.seed, seeds.pop(k))
                ctx.set(dut.seed_load, 1)
            else:
                ctx.set(dut.seed_load, 0)
            offer = k < len(beats) and k not in seeds and rng.random() < 0.7
            if offer or ctx.get(dut.i.valid):
                if offer and not ctx.get(dut.i.valid):
                    words, fmt, mode = beats[k]
                    for l in range(lanes):
                        ctx.set(dut.i.p.data[l], words[l])
                    ctx.set(dut.i.p.fmt, fmt)
                    ctx.set(dut.i.p.mode, mode)
                    ctx.set(dut.i.valid, 1)
            ready = rng.random() < 0.6
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                got.append([ctx.get(dut.o.p.data[l]) for l in range(lanes)])
            took = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            await ctx.tick()
            if took:
                ctx.set(dut.i.valid, 0)
                k += 1
        assert k == len(beats), f"{k} of {len(beats)} beats taken"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("lanes,units", [(4, 1), (4, 2)])
def test_serial_rounding_matches_rounding_unit(lanes, units):
    rng = np.random.default_rng(SEED + 10 * lanes + units)
    beats = []
    for _ in range(40):
        mode = MODES[int(rng.integers(len(MODES)))]
        fmt = Format.FP32 if mode == RAW_MODE else Format(int(rng.integers(len(Format))))
        words = [int(rng.integers(0, 1 << 32)) if rng.random() < 0.3 else
                 int(np.float32(rng.normal(0, 4)).view(np.uint32)) for _ in range(lanes)]
        beats.append((words, fmt, mode))
    seeds = {17: 0x1234ABCD}
    n = len(beats) * (lanes // units + 2) * 6 + 400
    ref = _stream(RoundingUnit(lanes, n_rand=16, stages=2, encoder_stages=3), beats,
                  np.random.default_rng(SEED), dict(seeds), lanes, n)
    got = _stream(SerialRounding(lanes, units, n_rand=16, encoder_stages=3), beats,
                  np.random.default_rng(SEED + 1), dict(seeds), lanes, n)
    assert len(ref) == len(beats)
    assert got == ref


@pytest.mark.parametrize("units", [1, 2, 4])
def test_serial_rounding_latency_and_rate(units):
    """Beats offered back to back (``o`` always ready): the first is valid ``latency`` cycles
    after it is offered, then one beat every ``lanes // units`` cycles."""
    lanes = 4
    dut = SerialRounding(lanes, units, encoder_stages=3)
    subs = lanes // units
    valid_at = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        for _ in range(3):              # the random-word buffer fills after reset
            await ctx.tick()
        ctx.set(dut.i.p.mode, RoundMode.RNE)
        ctx.set(dut.i.p.fmt, Format.BF16)
        ctx.set(dut.i.valid, 1)
        for t in range(40):
            if ctx.get(dut.o.valid):
                valid_at.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert dut.latency == subs + 1 + 3
    assert valid_at[0] == dut.latency, valid_at
    assert all(b - a == subs for a, b in zip(valid_at, valid_at[1:8])), valid_at


def test_serial_rounding_parameters():
    with pytest.raises(ValueError, match="units"):
        SerialRounding(4, 3)
    with pytest.raises(ValueError, match="n_rand"):
        SerialRounding(4, 1, n_rand=0)


@pytest.mark.parametrize("seed", [0x12345678, 0xFFFFFFFF, 0])
def test_compact_seed_prngs_match(seed):
    """The seeder with two MULT18X18D gives ``LanePrngs``' lane states in as many cycles."""
    def run(cls):
        dut = cls(3)
        words, busy = [], [0]

        async def bench(ctx):
            ctx.set(dut.seed, seed)
            ctx.set(dut.seed_load, 1)
            await ctx.tick()
            ctx.set(dut.seed_load, 0)
            while ctx.get(dut.busy):
                busy[0] += 1
                await ctx.tick()
            ctx.set(dut.advance, 0b111)
            for _ in range(8):
                words.append([ctx.get(dut.out[i]) for i in range(3)])
                await ctx.tick()

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        return words, busy[0]

    ref, got = run(LanePrngs), run(CompactSeedPrngs)
    assert got == ref
    assert got[1] == LanePrngs(3).seed_cycles
