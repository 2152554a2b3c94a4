"""cocotb tests of ``rtl.round.encoder.FPEncoder`` against ``sim.rounding.encode``.

Throughput: a test wrapper instantiates ``LANES`` encoders side by side with packed ports (one
wide integer per port per step); every lane has its own format, mode and random bits, so one
step checks ``LANES`` independent conversions. The encoder is combinational: drive, wait 1 ns,
compare.
"""

import numpy as np

import cocotb
from cocotb.triggers import Timer

from cocotb_tests.common.tb import logged_seed, pack_lanes, unpack_lanes
from cocotb_tests.common.config import dut_config
from sim.dtypes import Format, RoundMode
from sim.rounding import edge_patterns, encode

_FORMATS = list(Format)
_MODES = list(RoundMode)


async def _check_batches(dut, batches, lanes, n_rand):
    """Faster checker: ``batches`` is a list of (a_array, fmt, mode, rand_array) with one
    format and mode per batch; expected values are computed per batch with numpy."""
    vectors = []
    expected = []
    for a, fmt, mode, rand in batches:
        exp = encode(a, fmt, mode, rand=rand if mode == RoundMode.SR else None, n_rand=n_rand)
        for x, r, y in zip(a.tolist(), rand.tolist(), exp.tolist()):
            vectors.append((x, int(fmt), int(mode), r))
            expected.append(y)
    for start in range(0, len(vectors), lanes):
        chunk = vectors[start:start + lanes]
        exp = expected[start:start + lanes]
        pad = lanes - len(chunk)
        a, fmt, mode, rand = zip(*(chunk + [(0, 0, 0, 0)] * pad))
        dut.a.value = pack_lanes(a, 32)
        dut.fmt.value = pack_lanes(fmt, 3)
        dut.mode.value = pack_lanes(mode, 2)
        dut.rand.value = pack_lanes(rand, n_rand)
        await Timer(1, unit="ns")
        got = unpack_lanes(dut.o.value.to_unsigned(), 32, lanes)
        bad = [f"a=0x{chunk[i][0]:08x} fmt={Format(chunk[i][1]).name} "
               f"mode={RoundMode(chunk[i][2]).name} rand=0x{chunk[i][3]:x}: "
               f"got 0x{got[i]:08x} expected 0x{exp[i]:08x}"
               for i in range(len(chunk)) if got[i] != exp[i]]
        assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:20])
    return len(vectors)


@cocotb.test()
async def edge_cases_all_formats_modes(dut):
    """Every edge pattern of every format in RNE, RTZ and SR (SR with random bits, plus the
    extreme random words 0 and all-ones)."""
    cfg = dut_config()
    lanes, n_rand = cfg["lanes"], cfg["n_rand"]
    rng = np.random.default_rng(logged_seed(dut))
    batches = []
    for fmt in _FORMATS:
        pats = edge_patterns(fmt)
        for mode in _MODES:
            if mode == RoundMode.SR:
                rands = [rng.integers(0, 1 << n_rand, len(pats), dtype=np.uint64),
                         np.zeros(len(pats), dtype=np.uint64),
                         np.full(len(pats), (1 << n_rand) - 1, dtype=np.uint64)]
            else:
                rands = [rng.integers(0, 1 << n_rand, len(pats), dtype=np.uint64)]
            for r in rands:
                batches.append((pats, fmt, mode, r))
    n = await _check_batches(dut, batches, lanes, n_rand)
    dut._log.info(f"{n} edge conversions bit-exact")


@cocotb.test()
async def random_sweep(dut):
    """Seeded random FP32 patterns (half uniform over all patterns, half concentrated on the
    target's exponent range), every format and mode."""
    cfg = dut_config()
    lanes, n_rand, count = cfg["lanes"], cfg["n_rand"], cfg.get("random_per_case", 512)
    rng = np.random.default_rng(logged_seed(dut, 17))
    dut._log.info(f"{count} per (format, mode)")
    batches = []
    for fmt in _FORMATS:
        for mode in _MODES:
            a = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
            # half of them with an exponent near 127 (values around 2**-20 .. 2**20)
            near = (rng.integers(107, 148, count // 2).astype(np.uint32) << 23)
            a[:count // 2] = (a[:count // 2] & np.uint32(0x807FFFFF)) | near
            r = rng.integers(0, 1 << n_rand, count, dtype=np.uint64)
            batches.append((a, fmt, mode, r))
    n = await _check_batches(dut, batches, lanes, n_rand)
    dut._log.info(f"{n} random conversions bit-exact")


# ---------------------------------------------------------------------------------------------
# pytest side (not collected by cocotb: it only runs functions decorated with cocotb.test)

def _wrapper(lanes, n_rand):
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from rtl.round.encoder import FPEncoder

    class EncoderLanes(wiring.Component):
        """``lanes`` independent FPEncoders with packed ports (test wrapper only)."""

        def __init__(self):
            super().__init__({
                "a": In(32 * lanes), "fmt": In(3 * lanes), "mode": In(2 * lanes),
                "rand": In(n_rand * lanes), "o": Out(32 * lanes),
            })

        def elaborate(self, platform):
            m = Module()
            for i in range(lanes):
                enc = m.submodules[f"enc{i}"] = FPEncoder(n_rand)
                m.d.comb += [
                    enc.a.eq(self.a[32 * i:32 * (i + 1)]),
                    enc.fmt.eq(self.fmt[3 * i:3 * (i + 1)]),
                    enc.mode.eq(self.mode[2 * i:2 * (i + 1)]),
                    enc.rand.eq(self.rand[n_rand * i:n_rand * (i + 1)]),
                    self.o[32 * i:32 * (i + 1)].eq(enc.o),
                ]
            return m

    return EncoderLanes()


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    # Icarus by default; Verilator in the long set (the rounding unit's tests run the same
    # encoders on Verilator by default).
    @pytest.mark.parametrize("n_rand", [16, pytest.param(3, marks=pytest.mark.long)])
    @pytest.mark.parametrize("simulator", [
        "icarus", pytest.param("verilator", marks=pytest.mark.long)])
    def test_round_encoder(simulator, n_rand):
        # Icarus pays per step, Verilator per lane at build time
        lanes = 32 if simulator == "icarus" else 16
        run_cocotb(lambda: _wrapper(lanes, n_rand), name=f"round_encoder_l{lanes}_n{n_rand}",
                   config={"lanes": lanes, "n_rand": n_rand, "random_per_case": 256},
                   test_module="cocotb_tests.test_round_encoder", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
