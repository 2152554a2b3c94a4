"""cocotb tests of ``rtl.arith.fp_mul.FPMultiplier`` against ``sim.formats.mul_exact``.

Every FP8 x FP8 pair of every FP8 format in the instance (65,536 per format), every INT8 x
INT8 pair, and seeded random BF16/FP16/FP32 (as TF32) pairs with their edge values mixed in,
through a wrapper of ``lanes`` multipliers with a format code per lane (vectors shuffled, so
every cycle mixes formats). Pipelined configurations stall (``en`` low) on random cycles and
are checked on every cycle. Format codes outside the instance's ``formats`` must give 0.
"""

import numpy as np

import cocotb

from cocotb_tests.common.config import dut_config
from cocotb_tests.test_arith_common import (LANES, F32_EDGES, check_vectors, formats_and_bias,
                                          seed)
from sim.dtypes import Format
from sim.formats import FORMAT_INFO, mul_exact

_EDGES16 = {
    f: [0, 1, 0x8000, 0x8001, FORMAT_INFO[f].min_normal_bits, FORMAT_INFO[f].max_finite_bits,
        FORMAT_INFO[f].max_finite_bits | 0x8000, FORMAT_INFO[f].inf_bits,
        FORMAT_INFO[f].inf_bits | 0x8000, FORMAT_INFO[f].nan_bits, 0xFFFF,
        FORMAT_INFO[f].inf_bits + 1, 0x3C00, 0x3F80, 0x4000, 0xC000, 0x7BFF, 0x03FF, 0x0200]
    for f in (Format.BF16, Format.FP16)
}


def expected(a, b, fmt, formats, bias):
    out = np.zeros(len(a), dtype=np.uint32)
    for f in Format:
        sel = fmt == int(f)
        if f in formats and sel.any():
            out[sel] = mul_exact(a[sel], b[sel], f, bias.get(f))
    return out


def stimulus(rng, n_random, formats, pairs8=None):
    """Every pair (or ``pairs8`` random pairs) for the 8-bit formats, random (plus all edge
    pairs) for the others; every format code is present (also the unsupported ones, which
    must give 0)."""
    a, b, fmt = [], [], []
    for f in Format:
        if f in (Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4, Format.INT8):
            if f not in formats or pairs8:
                x = rng.integers(0, 256, (2, pairs8 or 256), dtype=np.uint64)
                xa, xb = x[0], x[1]
            else:
                x = np.arange(256, dtype=np.uint64)
                xa, xb = np.repeat(x, 256), np.tile(x, 256)
        elif f in (Format.BF16, Format.FP16):
            e = np.array(_EDGES16[f], dtype=np.uint64)
            xa = np.concatenate([np.repeat(e, len(e)),
                                 rng.integers(0, 1 << 16, n_random, dtype=np.uint64)])
            xb = np.concatenate([np.tile(e, len(e)),
                                 rng.integers(0, 1 << 16, n_random, dtype=np.uint64)])
        elif f not in formats:
            x = rng.integers(0, 1 << 32, (2, 256), dtype=np.uint64)
            xa, xb = x[0], x[1]
        else:   # FP32 (as TF32)
            e = np.array(F32_EDGES, dtype=np.uint64)
            m = n_random
            xa = np.concatenate([np.repeat(e, len(e)),
                                 rng.integers(0, 1 << 32, m, dtype=np.uint64)])
            xb = np.concatenate([np.tile(e, len(e)),
                                 rng.integers(0, 1 << 32, m, dtype=np.uint64)])
        # junk above the format's width must be ignored
        width = {Format.BF16: 16, Format.FP16: 16}.get(f, 8)
        if f not in (Format.FP32, Format.INT32):
            junk = rng.integers(0, 1 << 16, (2, len(xa)), dtype=np.uint64) << np.uint64(width)
            xa, xb = xa | junk[0], xb | junk[1]
        a.append(xa)
        b.append(xb)
        fmt.append(np.full(len(xa), int(f)))
    a, b, fmt = (np.concatenate(v) for v in (a, b, fmt))
    perm = rng.permutation(len(a))
    return (a[perm] & np.uint64(0xFFFFFFFF)).astype(np.uint32), \
        (b[perm] & np.uint64(0xFFFFFFFF)).astype(np.uint32), fmt[perm]


@cocotb.test()
async def fp_mul_all(dut):
    """Exhaustive FP8 and INT8 pairs, random 16/32-bit pairs, formats mixed per cycle."""
    cfg = dut_config()
    s = seed()
    rng = np.random.default_rng(s)
    formats, bias = formats_and_bias(cfg)
    a, b, fmt = stimulus(rng, cfg["n_random"], formats, cfg.get("pairs8"))
    n = await check_vectors(dut, lanes=cfg["lanes"], stages=cfg["stages"],
                            inputs={"a": (a, 32), "b": (b, 32), "fmt": (fmt, 3)},
                            expected=expected(a, b, fmt, formats, bias), out="p",
                            en_prob=cfg.get("en_prob", 1.0), rng=rng, label=f"seed={s}")
    counts = {f.name: int(np.sum(fmt == int(f))) for f in Format}
    cocotb.log.info("fp_mul: %d vectors %s, 0 mismatches", n, counts)


def _wrapper(lanes, formats, stages, fp8_bias):
    from rtl.arith.fp_mul import FPMultiplier
    from rtl.arith.lanes import ArithLanes
    return ArithLanes(lambda: FPMultiplier(formats, stages, fp8_bias=fp8_bias), lanes,
                      inputs={"a": 32, "b": 32, "fmt": 3}, outputs={"p": 32},
                      shared={"en": 1})


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    ALL = [f for f in Format if f != Format.INT32]
    PE = [Format.BF16, Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4,
          Format.INT8]
    CONFIGS = {
        # name: (formats, stages, en_prob, fp8_bias)
        # the tensor-engine set, pipelined, stalling
        "pe_s2": (PE, 2, 0.75, {}),
        # everything (FP32 as TF32), combinational
        "all_s0": (ALL, 0, 1.0, {}),
        # the tensor engine's default (mul_stages=1), stalling
        "pe_s1": (PE, 1, 0.7, {}),
        # cFP8 biases, 3 stages, no FP16 (8-bit significand path, no INT8: unsigned)
        "cfp8_s3": ([Format.BF16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4], 3, 0.6,
                    {Format.FP8_E4M3: 3, Format.FP8_E5M2: 20, Format.FP8_E3M4: 6}),
        # the FPGA core2's PEs: every step registered (the DSP fed from registers), stalling
        "pe_s4": (PE, 4, 0.65, {}),
    }

    def _test(simulator, config, n_random, pairs8=None):
        lanes = LANES[simulator]
        formats, stages, en_prob, bias = CONFIGS[config]
        cfg = {"lanes": lanes, "formats": [int(f) for f in formats], "stages": stages,
               "en_prob": en_prob, "fp8_bias": {int(k): v for k, v in bias.items()},
               "n_random": n_random, "pairs8": pairs8}
        run_cocotb(lambda: _wrapper(lanes, formats, stages, bias),
                   name=f"fp_mul_{config}_l{lanes}", config=cfg,
                   test_module="cocotb_tests.test_arith_fp_mul", simulator=simulator)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fp_mul(simulator):
        """The PE configuration: every FP8 x FP8 pair of each FP8 format and every INT8 pair
        (4 x 65,536), 8,192 random BF16 and FP16 pairs plus their edge pairs, stalling."""
        _test(simulator, "pe_s2", 8192)

    @pytest.mark.parametrize("config", ["all_s0", "cfp8_s3", "pe_s4"])
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fp_mul_configs(simulator, config):
        """Other configurations: 4,096 random pairs per 8-bit format, 4,096 per wider one."""
        _test(simulator, config, 4096, pairs8=4096)

    @pytest.mark.long
    @pytest.mark.parametrize("config", list(CONFIGS))
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fp_mul_long(simulator, config):
        _test(simulator, config, 500_000)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
