"""cocotb tests of ``rtl.round.rounding_unit.RoundingUnit`` against
``sim.rounding.RoundingUnitModel`` (bit-exact, every format and mode), with idle and
back-pressure patterns on both streams, run-time re-seeding, statistical tests of the SR output
and two of the published SR checks run through the hardware.

Statistical tests (see docs/rounding.md for the derivation). With a seeded generator the
outcome is deterministic; the false-alarm rates below are over random seeds (the seed comes
from COCOTB_RANDOM_SEED and is logged):

* probability of rounding up: G grid points p_g between two BF16 neighbours, n samples each;
  fail if |k_g/n - p_g| > 5 sqrt(p_g(1-p_g)/n) + 2**-(N+1). Per point the two-sided 5-sigma
  normal tail is 5.7e-7 (exactly unbiased for BF16 when N >= 16, so the 2**-(N+1) term only
  absorbs the quantisation of p_g for smaller N): false-alarm rate <= G * 5.7e-7.
* mean error: the mean of (rounded - x) / ULP over all samples must be within 5 standard
  deviations (sqrt(sum p(1-p))/n_total) of zero, plus 2**-(N+1): false-alarm rate 5.7e-7.
* lanes uncorrelated: for every pair of lanes the Pearson correlation of the centred decisions
  (up - p) over the beats must be below 5/sqrt(beats): false-alarm rate <= pairs * 5.7e-7.
"""

import math

import numpy as np

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import (Scoreboard, StreamMonitor, StreamSink, StreamSource,
                                         seeded_rng)
from cocotb_tests.common.tb import pack_lanes, unpack_lanes
from sim.dtypes import Format, RoundMode
from sim.rounding import RoundingUnitModel


def _pack_in(data, fmt, mode):
    """The input beat: the lanes of ``data``, then ``fmt`` (3 bits) and ``mode`` (2 bits)."""
    return pack_lanes(list(data) + [int(fmt) & 7 | (int(mode) & 3) << 3], 32)


class Harness:
    """Drives ``i`` (``StreamSource``) and takes ``o`` (``StreamSink``) with seeded random idle
    cycles and back-pressure, both streams checked by a ``StreamMonitor``. The golden model
    converts each input beat in the cycle it is taken. A re-seed acts on the beats after every
    beat taken on ``i`` in the cycle of the pulse or before and every beat offered on ``o`` in
    that cycle: with ``stages`` 0 a beat waiting on ``o`` is the beat on ``i``, so the model
    re-seeds after that beat is taken."""

    def __init__(self, dut, lanes, n_rand, rng, seed=0):
        self.dut = dut
        self.lanes = lanes
        self.rng = rng
        self.model = RoundingUnitModel(lanes, n_rand, seed)
        self.comb = dut_config()["stages"] == 0
        self.held_seed = None   # a re-seed waiting for the beat on ``o`` (``stages`` 0)
        self.inputs = []        # (data, fmt, mode) of each beat taken by the unit
        self.expected = []
        self.outputs = []

    async def start(self):
        dut = self.dut
        start_clock(dut)
        dut.i__payload.value = 0
        dut.seed.value = 0
        dut.seed_load.value = 0
        self.src = StreamSource(dut, "i", rng=self.rng)
        self.sink = StreamSink(dut, "o", rng=self.rng)
        await reset(dut)
        self.monitors = [StreamMonitor(dut, "i", on_beat=self._taken), StreamMonitor(dut, "o")]

    def _taken(self, payload):
        words = unpack_lanes(payload, 32, self.lanes + 1)
        data, fmt, mode = words[:-1], Format(words[-1] & 7), RoundMode(words[-1] >> 3 & 3)
        self.inputs.append((data, fmt, mode))
        self.expected.append([int(v) for v in
                              self.model.convert(np.array(data, dtype=np.uint32), fmt, mode)])
        if self.held_seed is not None:
            self.model.reseed(self.held_seed)
            self.held_seed = None

    def _describe(self, k):
        data, fmt, mode = self.inputs[k]
        return f"input {fmt.name} {mode.name} {[hex(v) for v in data]}"

    async def _pulse_seed(self, seed):
        """``seed_load`` for one cycle; the model re-seeds after the edge that loads it, or
        (``stages`` 0, a beat waiting on ``o``) after that beat is taken."""
        dut = self.dut
        dut.seed.value = seed
        dut.seed_load.value = 1
        await ReadOnly()
        o_waits = bool(dut.o__valid.value) and not bool(dut.o__ready.value)
        await RisingEdge(dut.clk)
        dut.seed_load.value = 0
        dut.seed.value = seed ^ 0xFFFFFFFF    # ``seed`` matters in the cycle of the pulse only
        if self.comb and o_waits:
            self.held_seed = seed
        else:
            self.held_seed = None
            self.model.reseed(seed)

    async def reseed(self, seed):
        """Pulse ``seed_load`` with no beat in flight (no beat can use the old streams)."""
        await self._pulse_seed(seed)

    async def _reseeds(self, reseed_at):
        cycle = 0
        for at, seed in sorted(reseed_at.items()):
            while cycle < at:
                await RisingEdge(self.dut.clk)
                cycle += 1
            await self._pulse_seed(seed)
            cycle += 1

    async def run(self, beats, idle_p=0.2, ready_p=0.7, reseed_at=None, max_cycles=None):
        """Send ``beats`` (list of (data, fmt, mode)) with idle probability ``idle_p`` before
        each beat and ``ready`` probability ``ready_p``; ``reseed_at`` maps a cycle (from this
        call) to a seed to pulse then. Returns the output beats once every beat has come out,
        each checked against the model."""
        first = len(self.expected)
        self.src.idle_p, self.sink.ready_p = idle_p, ready_p
        send = cocotb.start_soon(self.src.send_all([_pack_in(*b) for b in beats]))
        pulses = cocotb.start_soon(self._reseeds(dict(reseed_at or {})))
        timeout = max_cycles or 200_000 + 50 * len(beats)
        got = [unpack_lanes(w, 32, self.lanes)
               for w in await self.sink.collect(len(beats), timeout=timeout)]
        await send
        await pulses
        self.check(first, got)
        return got

    def check(self, first, got):
        """Both streams' protocol, then ``got`` against the model's beats from ``first``."""
        for mon in self.monitors:
            mon.check()
        Scoreboard("o", fmt=hex, describe=lambda k: self._describe(first + k)).compare(
            got, self.expected[first:first + len(got)])
        self.outputs += got


def _random_beats(rng, lanes, count):
    """Random beats: random format and mode; values concentrated around the target ranges,
    with occasional specials."""
    specials = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x7F7FFFFF,
                0x43E00000, 0x477FF000, 0x3F800000]
    beats = []
    for _ in range(count):
        fmt = rng.choice(list(Format))
        mode = rng.choice([RoundMode.RNE, RoundMode.RTZ, RoundMode.SR, RoundMode.SR])
        d = []
        for _ in range(lanes):
            r = rng.random()
            if r < 0.1:
                d.append(rng.choice(specials) ^ (rng.getrandbits(1) << 31))
            elif r < 0.7:
                d.append((rng.getrandbits(1) << 31) | (rng.randint(100, 150) << 23)
                         | rng.getrandbits(23))
            else:
                d.append(rng.getrandbits(32))
        beats.append((d, fmt, mode))
    return beats


@cocotb.test()
async def bit_exact_with_backpressure_and_reseed(dut):
    """Random beats of every format and mode; phases: full rate, random idle and back-pressure,
    stuttering output; re-seeds at random cycles (also while beats are in flight)."""
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = seeded_rng(dut)
    h = Harness(dut, lanes, n_rand, rng)
    await h.start()
    count = cfg.get("beats", 300)
    for idle_p, ready_p in ((0.0, 1.0), (0.4, 0.5), (0.0, 0.3), (0.7, 1.0)):
        beats = _random_beats(rng, lanes, count)
        reseed = {rng.randint(1, count): rng.getrandbits(32) for _ in range(2)}
        # (bounded: a unit that never becomes ready again after a re-seed must fail, not hang)
        await h.run(beats, idle_p, ready_p, reseed_at=reseed, max_cycles=50 * count + 1000)
        dut._log.info(f"idle {idle_p} ready {ready_p}: {count} beats bit-exact, "
                      f"re-seeds {sorted(reseed.values())}")


@cocotb.test()
async def reseed_while_output_waits(dut):
    """A re-seed pulsed while ``o`` holds a beat waiting for ``ready``: the beat stays offered
    with its payload (the monitor) and uses the old streams, the beats after it the new ones
    (the model). Repeated with the pulse 1 to 3 cycles into the wait and a second pulse."""
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = seeded_rng(dut, 4)
    h = Harness(dut, lanes, n_rand, rng)
    await h.start()
    x = [0x3F800000 + rng.getrandbits(16) for _ in range(lanes)]
    for k in range(6):
        first = len(h.expected)
        beats = [(x, Format.BF16, RoundMode.SR)] * 3
        send = cocotb.start_soon(h.src.send_all([_pack_in(*b) for b in beats]))
        dut.o__ready.value = 0
        while True:
            await ReadOnly()
            if dut.o__valid.value:
                break
            await RisingEdge(dut.clk)
        for _ in range(1 + k % 3):
            await RisingEdge(dut.clk)
        await h._pulse_seed(rng.getrandbits(32))
        if k >= 3:
            await h._pulse_seed(rng.getrandbits(32))
        await RisingEdge(dut.clk)
        got = [unpack_lanes(w, 32, lanes) for w in await h.sink.collect(len(beats))]
        await send
        h.check(first, got)
    dut._log.info("6 re-seeds while o waits: beats held, bit-exact")


@cocotb.test()
async def same_seed_same_results(dut):
    """Re-seeding with the same seed replays exactly the same SR results."""
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = seeded_rng(dut, 1)
    h = Harness(dut, lanes, n_rand, rng)
    await h.start()
    x = [0x3F800000 + rng.getrandbits(16) for _ in range(lanes)]
    beats = [(x, Format.BF16, RoundMode.SR)] * 64
    await h.reseed(1234)
    a = await h.run(beats)
    await h.reseed(1234)
    b = await h.run(beats)
    await h.reseed(999)
    c = await h.run(beats)
    assert a == b
    assert a != c


@cocotb.test()
async def sr_statistics(dut):
    """Probability of rounding up vs fraction, mean error, lane correlation (see module doc)."""
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = seeded_rng(dut, 2)
    seed = rng.getrandbits(32)
    h = Harness(dut, lanes, n_rand, rng)
    await h.start()
    G = 16
    reps = cfg.get("stat_reps", 64)
    # grid point g: x = BF16(1.0) + p_g ULP (negative for odd g), p_g = (g + 0.5) / G
    frac = [(g + 0.5) / G for g in range(G)]
    xs = []
    for g in range(G):
        bits = 0x3F800000 + int(frac[g] * 65536)
        xs.append(bits | (0x80000000 if g & 1 else 0))
    beats = [([xs[g]] * lanes, Format.BF16, RoundMode.SR) for _ in range(reps) for g in range(G)]
    await h.reseed(seed)
    outs = await h.run(beats)
    ups = np.array([[(o & 0x7FFF) != 0x3F80 for o in out] for out in outs], dtype=float)
    n_rand_slack = 2.0 ** -(n_rand + 1)
    worst = 0.0
    for g in range(G):
        k = ups[g::G].ravel()
        n = len(k)
        p = frac[g]
        sigma = math.sqrt(p * (1 - p) / n)
        dev = abs(k.mean() - p)
        worst = max(worst, dev / sigma)
        assert dev <= 5 * sigma + n_rand_slack, f"grid {g}: P(up) {k.mean():.4f} vs {p:.4f}"
    p_all = np.array([frac[b % G] for b in range(len(outs))])[:, None]
    err = ups - p_all                                      # error in ULPs (sign-free)
    sd = math.sqrt(float((p_all * (1 - p_all)).sum() * lanes)) / err.size
    assert abs(err.mean()) <= 5 * sd + n_rand_slack, f"mean error {err.mean():.5f} ULP"
    bound = 5 / math.sqrt(len(outs))
    worst_r = 0.0
    for i in range(lanes):
        for j in range(i + 1, lanes):
            r = float(np.corrcoef(err[:, i], err[:, j])[0, 1])
            worst_r = max(worst_r, abs(r))
            assert abs(r) < bound, f"lanes {i},{j}: correlation {r:.4f} >= {bound:.4f}"
    dut._log.info(f"seed 0x{seed:08x}: {ups.size} SR decisions, worst |dev|/sigma "
                  f"{worst:.2f}, mean error {err.mean():+.5f} ULP (sd {sd:.5f}), worst lane "
                  f"|r| {worst_r:.4f} (bound {bound:.4f})")


async def _serial_sum(h, lanes, fmt, mode, start_bits, terms, steps):
    """Per lane s <- encode(fp32_add(decode(s), term_k)) through the hardware, one beat per
    step (each beat waits for the previous result)."""
    from sim.formats import decode, fp32_add
    s = np.full(lanes, start_bits, dtype=np.uint32)
    for k in range(steps):
        t = np.uint32(terms(k))
        x = fp32_add(decode(s, fmt), np.full(lanes, t, dtype=np.uint32))
        out = await h.run([(list(x), fmt, mode)])
        s = np.array(out[0], dtype=np.uint32)
    return s


@cocotb.test()
async def published_checks_short(dut):
    """FP16 1024 + 0.5 x 2048 (RNE stays 1024, SR ends near 2048) and the BF16 harmonic sum
    stagnating at 5.0625 after 65 terms under RNE, through the hardware (bit-exact with the
    golden model on the way, since every beat is checked)."""
    from sim.formats import decode
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = seeded_rng(dut, 3)
    h = Harness(dut, lanes, n_rand, rng)
    await h.start()
    half = int(np.float32(0.5).view(np.uint32))
    steps = cfg.get("half_steps", 2048)
    rne = await _serial_sum(h, lanes, Format.FP16, RoundMode.RNE, 0x6400, lambda k: half, steps)
    assert all(np.asarray(rne, np.uint16).view(np.float16) == 1024), rne
    sr = await _serial_sum(h, lanes, Format.FP16, RoundMode.SR, 0x6400, lambda k: half, steps)
    vals = np.asarray(sr, np.uint16).view(np.float16).astype(float)
    # exact sum 1024 + steps/2; SR error sd <= sqrt(steps) * ULP(2048)/2 = sqrt(steps)
    exact = 1024 + steps / 2
    assert np.all(np.abs(vals - exact) < 5 * math.sqrt(steps) + 2), vals
    dut._log.info(f"FP16 1024 + 0.5 x {steps}: RNE 1024, SR {vals.tolist()}")
    h_terms = lambda k: int(np.float32(1.0 / (k + 1)).view(np.uint32))  # noqa: E731
    hs = await _serial_sum(h, lanes, Format.BF16, RoundMode.RNE, 0, h_terms, 70)
    hv = decode(hs, Format.BF16).view(np.float32)
    assert np.all(hv == 5.0625), hv
    dut._log.info(f"BF16 harmonic sum, RNE, 70 terms: {hv.tolist()}")


# ---------------------------------------------------------------------------------------------
try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    def _dut(lanes, n_rand, stages, enc):
        from rtl.round.rounding_unit import RoundingUnit
        return RoundingUnit(lanes, n_rand, stages, encoder_stages=enc)

    # (2, 16, 2, 3) is the vector engine's deep configuration (pipelined encoders). The main
    # and the deep configuration run on both simulators by default, the other two on Icarus
    # (on Verilator in the long set).
    _LONG_ON_VERILATOR = {(2, 5, 0, 0), (2, 16, 1, 2)}

    @pytest.mark.parametrize("simulator,lanes,n_rand,stages,enc", [
        pytest.param(s, *c, marks=(pytest.mark.long,) if (
            s == "verilator" and c in _LONG_ON_VERILATOR) or c == (3, 16, 1, 0) else ())
        for c in [(4, 16, 2, 0), (2, 5, 0, 0), (2, 16, 1, 2), (2, 16, 2, 3), (3, 16, 1, 0)]
        for s in SIMULATORS])
    def test_round_unit(simulator, lanes, n_rand, stages, enc):
        main = (lanes, n_rand, stages) == (4, 16, 2)
        cfg = {"lanes": lanes, "n_rand": n_rand, "stages": stages, "encoder_stages": enc,
               "beats": 300 if main else 100, "stat_reps": 64,
               "half_steps": 2048 if main else 256}
        run_cocotb(lambda: _dut(lanes, n_rand, stages, enc),
                   name=f"round_unit_l{lanes}_n{n_rand}_s{stages}_e{enc}", config=cfg,
                   test_module="cocotb_tests.test_round_unit", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
