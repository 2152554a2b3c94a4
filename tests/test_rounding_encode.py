"""Cross-checks of the golden encoder ``sim.rounding.encode`` against references nobody here
wrote: ml_dtypes / numpy casts (RNE) and a float64 grid computation (RTZ, SR, INT targets).

Deliberate differences from ml_dtypes (see docs/rounding.md) are applied to the reference
explicitly and nowhere else: FP32 subnormal inputs are zero (DAZ); any NaN becomes the format's
canonical positive NaN; E4M3 saturates to +-448 where ml_dtypes gives NaN.
"""

import ml_dtypes
import numpy as np
import pytest

from sim.dtypes import FLOAT_SPECS, Format, RoundMode
from sim.rounding import (DEFAULT_N_RAND, canonical_nan, edge_patterns, encode,
                          max_finite_bits)

DTYPES = {
    Format.BF16: ml_dtypes.bfloat16,
    Format.FP16: np.float16,
    Format.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    Format.FP8_E5M2: ml_dtypes.float8_e5m2,
    Format.FP8_E3M4: ml_dtypes.float8_e3m4,
}
FLOATS = list(DTYPES)
SEED = 20261121


def _uint(fmt):
    return np.uint16 if FLOAT_SPECS[fmt].bits == 16 else np.uint8


def _daz(bits):
    """FP32 values of ``bits`` with subnormals replaced by zero of the same sign."""
    bits = np.asarray(bits, dtype=np.uint32)
    sub = (bits & np.uint32(0x7F800000)) == 0
    return np.where(sub, bits & np.uint32(0x80000000), bits).view(np.float32)


def _decode(out, fmt):
    """Our encoded patterns as float64, through ml_dtypes (an independent decoder)."""
    return out.astype(_uint(fmt)).view(DTYPES[fmt]).astype(np.float64)


def _random_patterns(rng, count):
    """Half uniform over all 2**32 patterns, half with exponents near 1.0 (2**-30 .. 2**20)."""
    a = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    h = count // 2
    e = rng.integers(97, 148, h).astype(np.uint32) << np.uint32(23)
    a[:h] = (a[:h] & np.uint32(0x807FFFFF)) | e
    return a


def _check_rne_vs_ml_dtypes(bits, fmt):
    bits = np.asarray(bits, dtype=np.uint32)
    got = encode(bits, fmt, RoundMode.RNE)
    f = _daz(bits)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = f.astype(DTYPES[fmt]).view(_uint(fmt)).astype(np.uint32)
    nan_in = np.isnan(f)
    assert np.all(got[nan_in] == canonical_nan(fmt))
    if fmt == Format.FP8_E4M3:
        # ml_dtypes gives NaN for values that round beyond 448 (and for Inf); we saturate.
        sat = ~nan_in & np.isnan(ref.astype(np.uint8).view(DTYPES[fmt]).astype(np.float32))
        sign = (bits >> np.uint32(31)).astype(np.uint32) << np.uint32(7)
        ref = np.where(sat, sign | np.uint32(max_finite_bits(fmt)), ref)
    bad = ~nan_in & (got != ref)
    idx = np.flatnonzero(bad)[:10]
    assert not bad.any(), [(hex(bits[i]), hex(got[i]), hex(ref[i])) for i in idx]


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_rne_edges_vs_ml_dtypes(fmt):
    _check_rne_vs_ml_dtypes(edge_patterns(fmt), fmt)


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_rne_random_vs_ml_dtypes(fmt):
    rng = np.random.default_rng(SEED + int(fmt))
    _check_rne_vs_ml_dtypes(_random_patterns(rng, 1_000_000), fmt)


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_rne_every_bf16_and_fp8_neighbourhood(fmt):
    """Every pattern of the target format, decoded to FP32, and its FP32 neighbours one ULP
    and half a target ULP away (ties) must round as ml_dtypes rounds them."""
    n = 1 << FLOAT_SPECS[fmt].bits
    vals = np.arange(n, dtype=np.uint32).astype(_uint(fmt)).view(DTYPES[fmt]).astype(np.float32)
    vals = vals[np.isfinite(vals)]
    b = vals.view(np.uint32)
    man = FLOAT_SPECS[fmt].man_bits
    half = np.uint32(1 << (22 - man))
    cands = np.concatenate([b, b + 1, b - 1, b + half, b + half + 1, b + half - 1, b - half])
    _check_rne_vs_ml_dtypes(cands, fmt)


def _grid(absx, fmt):
    """Lower neighbour on the format's grid, the grid spacing, for finite float64 ``absx``."""
    spec = FLOAT_SPECS[fmt]
    emin = 1 - spec.bias
    with np.errstate(divide="ignore"):
        ex = np.floor(np.log2(np.where(absx > 0, absx, 1.0)))
    ulp = np.exp2(np.maximum(ex, emin) - spec.man_bits)
    lower = np.floor(absx / ulp) * ulp
    return lower, ulp


def _reference(bits, fmt, mode, rand=None, n_rand=DEFAULT_N_RAND):
    """float64 reference of encode for finite inputs: the value it must decode to."""
    f = _daz(bits).astype(np.float64)
    s = np.signbit(f)
    ax = np.abs(f)
    lower, ulp = _grid(ax, fmt)
    frac = (ax - lower) / ulp
    if mode == RoundMode.RTZ:
        up = np.zeros(ax.shape, bool)
    elif mode == RoundMode.SR:
        # round up iff r + RNE(frac * 2**N) >= 2**N (add and carry): probability RNE(frac*2**N)/2**N
        up = rand + np.round(frac * 2.0 ** n_rand) >= 2.0 ** n_rand
    else:
        raise ValueError(mode)
    res = np.where(up, lower + ulp, lower)
    maxf = float(np.asarray(max_finite_bits(fmt), _uint(fmt)).view(DTYPES[fmt]))
    if FLOAT_SPECS[fmt].has_inf:
        res = np.where(res > maxf, np.inf if mode == RoundMode.SR else maxf, res)
    else:
        res = np.where(res > maxf, maxf, res)
    return np.where(s, -res, res)


def _check_vs_reference(bits, fmt, mode, rand=None, n_rand=DEFAULT_N_RAND):
    bits = np.asarray(bits, dtype=np.uint32)
    f = bits.view(np.float32)
    fin = np.isfinite(f)
    bits = bits[fin]
    r = None if rand is None else np.broadcast_to(rand, f.shape)[fin]
    got = _decode(encode(bits, fmt, mode, rand=r, n_rand=n_rand), fmt)
    ref = _reference(bits, fmt, mode, r, n_rand)
    ok = (got == ref) & (np.signbit(got) == np.signbit(ref))
    idx = np.flatnonzero(~ok)[:10]
    assert ok.all(), [(hex(bits[i]), got[i], ref[i]) for i in idx]


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_rtz_vs_float64(fmt):
    rng = np.random.default_rng(SEED + 100 + int(fmt))
    bits = np.concatenate([edge_patterns(fmt), _random_patterns(rng, 300_000)])
    _check_vs_reference(bits, fmt, RoundMode.RTZ)


@pytest.mark.parametrize("n_rand", [1, 3, 8, 16, 24, 32])
@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_sr_vs_float64(fmt, n_rand):
    rng = np.random.default_rng(SEED + 200 + int(fmt) + 16 * n_rand)
    bits = np.concatenate([edge_patterns(fmt), _random_patterns(rng, 100_000)])
    rand = rng.integers(0, 1 << n_rand, bits.shape, dtype=np.uint64)
    _check_vs_reference(bits, fmt, RoundMode.SR, rand, n_rand)


@pytest.mark.parametrize("n_rand", [1, 2, 3, 4])
@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_sr_all_random_words(fmt, n_rand):
    """For small N, every random word for every edge pattern: the number of words that round
    up is exactly RNE(frac * 2**N) (the definition of the unbiased few-bit SR)."""
    bits = edge_patterns(fmt)
    for r in range(1 << n_rand):
        _check_vs_reference(bits, fmt, RoundMode.SR, np.full(bits.shape, r), n_rand)


def test_sr_endpoints():
    """SR never leaves the two neighbours: r=0 gives the RNE-fraction-rounded-down choice and
    r=all-ones rounds up every inexact value."""
    x = np.array([0x3F800001, 0x3F80FFFF, 0x3F808000], dtype=np.uint32)   # BF16 1.0 + tiny
    assert list(encode(x, Format.BF16, RoundMode.SR, rand=0, n_rand=16)) == [0x3F80] * 3
    assert list(encode(x, Format.BF16, RoundMode.SR, rand=0xFFFF, n_rand=16)) == [0x3F81] * 3
    # exactly representable: never moves
    y = np.array([0x3F800000, 0x3F810000], dtype=np.uint32)
    for r in (0, 0x8000, 0xFFFF):
        assert list(encode(y, Format.BF16, RoundMode.SR, rand=r)) == [0x3F80, 0x3F81]


# --- special values ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(RoundMode), ids=lambda m: m.name)
@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_specials(fmt, mode):
    spec = FLOAT_SPECS[fmt]
    w = spec.bits
    sbit = 1 << (w - 1)
    maxf = max_finite_bits(fmt)
    inf = (((1 << spec.exp_bits) - 1) << spec.man_bits) if spec.has_inf else maxf
    cases = {
        0x00000000: 0, 0x80000000: sbit,
        0x00000001: 0, 0x807FFFFF: sbit,                      # DAZ
        0x7F800000: inf, 0xFF800000: sbit | inf,
        0x7FC00000: canonical_nan(fmt), 0xFFFFFFFF: canonical_nan(fmt),
        0x7F800001: canonical_nan(fmt), 0xFFC00001: canonical_nan(fmt),
        0x7F7FFFFF: (maxf if (mode == RoundMode.RTZ or not spec.has_inf) else inf),
    }
    if fmt == Format.BF16 and mode == RoundMode.SR:
        # FP32 max lies just below BF16's overflow point: with r = 0 SR keeps max finite
        cases[0x7F7FFFFF] = maxf
    bits = np.array(list(cases), dtype=np.uint32)
    got = encode(bits, fmt, mode, rand=np.zeros(len(bits), int) if mode == RoundMode.SR else None)
    assert [hex(v) for v in got] == [hex(v) for v in cases.values()]


def test_canonical_nans_and_max_finite():
    assert canonical_nan(Format.BF16) == 0x7FC0
    assert canonical_nan(Format.FP16) == 0x7E00
    assert canonical_nan(Format.FP8_E4M3) == 0x7F
    assert canonical_nan(Format.FP8_E5M2) == 0x7E
    for fmt in FLOATS:
        got = float(np.asarray(max_finite_bits(fmt), _uint(fmt)).view(DTYPES[fmt]))
        assert got == float(ml_dtypes.finfo(DTYPES[fmt]).max)


def test_e4m3_saturates_every_mode():
    x = np.array([np.float32(v) for v in (448, 449, 464, 480, 1e6, -464, -1e30)]).view(np.uint32)
    for mode in RoundMode:
        got = encode(x, Format.FP8_E4M3, mode, rand=np.full(x.shape, 0xFFFF) if mode == 2 else None)
        assert list(got) == [0x7E] * 5 + [0xFE] * 2


def test_overflow_rtz_vs_rne():
    x = np.array([np.float32(65520.0), np.float32(65519.0), np.float32(1e9)]).view(np.uint32)
    assert list(encode(x, Format.FP16, RoundMode.RNE)) == [0x7C00, 0x7BFF, 0x7C00]
    assert list(encode(x, Format.FP16, RoundMode.RTZ)) == [0x7BFF, 0x7BFF, 0x7BFF]
    # SR: 65519 and 65520 lie between max finite 65504 and (would-be) 65536: Inf when r large
    assert list(encode(x, Format.FP16, RoundMode.SR, rand=0xFFFF)) == [0x7C00, 0x7C00, 0x7C00]
    assert list(encode(x, Format.FP16, RoundMode.SR, rand=0)) == [0x7BFF, 0x7BFF, 0x7C00]


def test_subnormal_targets_produced():
    # FP16 smallest subnormal 2**-24; half of it is a tie to even (0), 0.75 of it rounds up.
    x = np.array([2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14 - 2.0 ** -26],
                 dtype=np.float32).view(np.uint32)
    assert list(encode(x, Format.FP16, RoundMode.RNE)) == [0x0001, 0x0000, 0x0001, 0x0400]
    assert list(encode(x, Format.FP16, RoundMode.RTZ)) == [0x0001, 0x0000, 0x0000, 0x03FF]


# --- integer targets --------------------------------------------------------------------------

INT_RANGE = {Format.INT8: (-128, 127, 8), Format.INT32: (-(2 ** 31), 2 ** 31 - 1, 32)}


def _int_ref(bits, fmt, mode, rand=None, n_rand=DEFAULT_N_RAND):
    lo, hi, w = INT_RANGE[fmt]
    f = _daz(bits).astype(np.float64)
    nan = np.isnan(f)
    f = np.where(nan, 0.0, f)
    ax = np.abs(f)
    fl = np.floor(ax)
    if mode == RoundMode.RNE:
        mag = np.rint(ax)
    elif mode == RoundMode.RTZ:
        mag = fl
    else:
        frac = np.where(np.isfinite(ax), ax - fl, 0.0)
        mag = fl + (rand + np.round(frac * 2.0 ** n_rand) >= 2.0 ** n_rand)
    v = np.clip(np.where(np.signbit(f), -mag, mag), lo, hi)
    return (v.astype(np.int64) & ((1 << w) - 1)).astype(np.uint32)


@pytest.mark.parametrize("mode", list(RoundMode), ids=lambda m: m.name)
@pytest.mark.parametrize("fmt", [Format.INT8, Format.INT32], ids=lambda f: f.name)
def test_int_targets(fmt, mode):
    rng = np.random.default_rng(SEED + 300 + int(fmt) + int(mode))
    bits = np.concatenate([edge_patterns(fmt), _random_patterns(rng, 200_000)])
    rand = rng.integers(0, 1 << 16, bits.shape, dtype=np.uint64) if mode == 2 else None
    got = encode(bits, fmt, mode, rand=rand)
    with np.errstate(invalid="ignore"):
        ref = _int_ref(bits, fmt, mode, rand)
    bad = np.flatnonzero(got != ref)[:10]
    assert len(bad) == 0, [(hex(bits[i]), hex(got[i]), hex(ref[i])) for i in bad]


def test_int_rne_vs_numpy_rint():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 127.5, 126.5, -128.5, -129, 300, -1e10, np.inf,
                  -np.inf, np.nan], dtype=np.float32).view(np.uint32)
    got = encode(x, Format.INT8, RoundMode.RNE).astype(np.uint8).view(np.int8)
    assert list(got) == [0, 2, 2, 0, -2, 127, 126, -128, -128, 127, -128, 127, -128, 0]
    got32 = encode(np.array([2.0 ** 31, -2.0 ** 31, 2.0 ** 30 + 128, 8388609.0], dtype=np.float32)
                   .view(np.uint32), Format.INT32, RoundMode.RNE).view(np.int32)
    assert list(got32) == [2 ** 31 - 1, -2 ** 31, 2 ** 30 + 128, 8388609]


def test_fp32_target_passes_through():
    x = np.array([0x3F800000, 0xC0490FDB, 0x00000001, 0x80400000, 0x7F800000, 0xFFC01234,
                  0x7F7FFFFF], dtype=np.uint32)
    for mode in RoundMode:
        got = encode(x, Format.FP32, mode, rand=np.zeros(len(x), int) if mode == 2 else None)
        assert [hex(v) for v in got] == ["0x3f800000", "0xc0490fdb", "0x0", "0x80000000",
                                         "0x7f800000", "0x7fc00000", "0x7f7fffff"]


# --- parameter checks -------------------------------------------------------------------------

def test_parameter_errors():
    x = np.array([0x3F800000], dtype=np.uint32)
    with pytest.raises(ValueError, match=r"n_rand must be an integer in 1\.\.32, not 0"):
        encode(x, Format.BF16, RoundMode.RNE, n_rand=0)
    with pytest.raises(TypeError, match="n_rand must be an integer, not 2.5"):
        encode(x, Format.BF16, RoundMode.RNE, n_rand=2.5)
    with pytest.raises(ValueError, match="rand is required for mode SR"):
        encode(x, Format.BF16, RoundMode.SR)
    with pytest.raises(ValueError, match="rand must hold 4-bit unsigned integers"):
        encode(x, Format.BF16, RoundMode.SR, rand=16, n_rand=4)
    with pytest.raises(ValueError, match="sr_variant must be one of rne, trunc"):
        encode(x, Format.BF16, RoundMode.SR, rand=1, sr_variant="x")
    with pytest.raises(ValueError):
        encode(x, 9, RoundMode.RNE)


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_scalar_encode_one_equals_encode(fmt):
    from sim.rounding import encode_one
    rng = np.random.default_rng(SEED + 400 + int(fmt))
    bits = np.concatenate([edge_patterns(fmt), _random_patterns(rng, 20_000)])
    for mode in RoundMode:
        for n_rand in (3, 16):
            rand = rng.integers(0, 1 << n_rand, bits.shape, dtype=np.uint64)
            ref = encode(bits, fmt, mode, rand=rand if mode == RoundMode.SR else None,
                         n_rand=n_rand)
            got = [encode_one(b, fmt, mode, r, n_rand) for b, r in zip(bits.tolist(),
                                                                         rand.tolist())]
            bad = np.flatnonzero(np.array(got, dtype=np.uint32) != ref)[:5]
            assert len(bad) == 0, [(hex(bits[i]), mode.name, hex(got[i]), hex(ref[i]))
                                   for i in bad]
