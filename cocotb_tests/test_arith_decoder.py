"""cocotb tests of ``rtl.arith.decoder.FormatDecoder`` against ``sim.formats.decode``.

Every BF16, FP16, E4M3, E5M2, E3M4 and INT8 pattern (exhaustive), INT32 edge values (rounding
ties, +-2**31) and seeded random INT32/FP32 patterns, through a wrapper of ``lanes`` decoders
with a format code per lane; the vectors are shuffled so every cycle mixes formats (run-time
format switching). Formats outside the instance's ``formats`` must give 0.
"""

import numpy as np

import cocotb

from cocotb_tests.common.config import dut_config
from cocotb_tests.test_arith_common import LANES, check_vectors, formats_and_bias, seed
from sim.dtypes import STORAGE_BITS, Format
from sim.formats import decode

INT32_EDGES = [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 1 << 24, (1 << 24) + 1,
               (1 << 24) + 2, (1 << 24) + 3, (1 << 25) + 2, (1 << 25) + 6, 0xFEFFFFFF,
               0xFEFFFFFD, (1 << 30) + 64, (1 << 30) + 192, 0x40000040, 0x00FFFFFF]


def expected(a, fmt, formats, bias):
    out = np.zeros(len(a), dtype=np.uint32)
    for f in Format:
        sel = fmt == int(f)
        if f in formats and sel.any():
            out[sel] = decode(a[sel], f, bias.get(f))
    return out


def stimulus(rng, n_random, exhaustive16=True):
    """Every 8-bit pattern; every 16-bit pattern (or ``n_random`` of them); INT32 edges,
    ``n_random`` random INT32 (half of them of a random magnitude class: 0..31 significant
    bits, either sign, so that every normalising shift is taken); ``n_random // 4`` random
    FP32. Shuffled."""
    a, fmt = [], []
    for f in Format:
        if STORAGE_BITS[f] == 16 and not exhaustive16:
            x = rng.integers(0, 1 << 16, n_random, dtype=np.uint64)
        elif STORAGE_BITS[f] <= 16:
            x = np.arange(1 << STORAGE_BITS[f], dtype=np.uint64)
            # bits above the format's width must be ignored
            x = x | (rng.integers(0, 1 << 16, len(x), dtype=np.uint64) << np.uint64(16)) \
                if STORAGE_BITS[f] <= 8 else x
        elif f == Format.INT32:
            bits = rng.integers(0, 32, n_random // 2)
            mag = rng.integers(0, 1 << 31, n_random // 2, dtype=np.uint64) >> \
                (31 - bits).astype(np.uint64)
            signed = np.where(rng.random(n_random // 2) < 0.5, mag,
                              (np.uint64(1 << 32) - mag) % np.uint64(1 << 32))
            x = np.concatenate([np.array(INT32_EDGES, dtype=np.uint64),
                                rng.integers(0, 1 << 32, n_random - n_random // 2,
                                             dtype=np.uint64), signed])
        else:
            x = rng.integers(0, 1 << 32, n_random // 4, dtype=np.uint64)
        a.append(x)
        fmt.append(np.full(len(x), int(f)))
    a, fmt = np.concatenate(a), np.concatenate(fmt)
    perm = rng.permutation(len(a))
    return a[perm].astype(np.uint32), fmt[perm]


@cocotb.test()
async def decoder_all_patterns(dut):
    """Exhaustive narrow formats plus seeded random INT32/FP32, formats mixed per cycle."""
    cfg = dut_config()
    s = seed()
    rng = np.random.default_rng(s)
    formats, bias = formats_and_bias(cfg)
    a, fmt = stimulus(rng, cfg["n_random"], cfg.get("exhaustive16", True))
    n = await check_vectors(dut, lanes=cfg["lanes"], stages=cfg.get("stages", 0),
                            inputs={"a": (a, 32), "fmt": (fmt, 3)},
                            expected=expected(a, fmt, formats, bias),
                            en_prob=cfg.get("en_prob", 1.0), rng=rng, label=f"seed={s}")
    counts = {f.name: int(np.sum(fmt == int(f))) for f in Format}
    cocotb.log.info("decoder: %d vectors %s, 0 mismatches", n, counts)


def _wrapper(lanes, formats, fp8_bias, stages=0):
    from rtl.arith.decoder import FormatDecoder
    from rtl.arith.lanes import ArithLanes
    return ArithLanes(lambda: FormatDecoder(formats, fp8_bias=fp8_bias, stages=stages), lanes,
                      inputs={"a": 32, "fmt": 3}, outputs={"o": 32},
                      shared={"en": 1} if stages else {})


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIGS = {
        "all": (list(Format), {}),
        # a cFP8 instance: two FP8 formats at other biases, nothing else generated
        "fp8bias": ([Format.FP8_E4M3, Format.FP8_E3M4, Format.BF16],
                    {Format.FP8_E4M3: 12, Format.FP8_E3M4: 1}),
    }

    def _test(simulator, config, n_random, exhaustive16=True, stages=0, en_prob=1.0):
        lanes = LANES[simulator]
        formats, bias = CONFIGS[config]
        cfg = {"lanes": lanes, "formats": [int(f) for f in formats],
               "fp8_bias": {int(k): v for k, v in bias.items()}, "n_random": n_random,
               "exhaustive16": exhaustive16, "stages": stages, "en_prob": en_prob}
        run_cocotb(lambda: _wrapper(lanes, formats, bias, stages),
                   name=f"decoder_{config}_l{lanes}_s{stages}", config=cfg,
                   test_module="cocotb_tests.test_arith_decoder", simulator=simulator)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_decoder(simulator):
        """Every 8- and 16-bit pattern of every format, 12,288 random INT32, 3,072 FP32."""
        _test(simulator, "all", 12288)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_decoder_pipelined(simulator):
        """One register stage (as the deep vector engine uses it), en low 25% of cycles:
        every 8-bit pattern, 4,096 of each 16-bit format, 4,096 random INT32, 1,024 FP32."""
        _test(simulator, "all", 4096, exhaustive16=False, stages=1, en_prob=0.75)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_decoder_fp8bias(simulator):
        """cFP8 biases, a reduced format set (others must give 0); every 8-bit pattern."""
        _test(simulator, "fp8bias", 2048, exhaustive16=False)

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_decoder_long(simulator):
        _test(simulator, "all", 1_000_000)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
