"""The number-format golden model (``sim/formats.py``) against references nobody here wrote:
ml_dtypes (decode, every pattern), numpy float32 (FP32 add/mul, with DAZ/FTZ and the canonical
NaN applied to numpy's result) and float64 (exact products). Pure numpy; a few seconds.

The figures these tests establish are quoted in ``docs/formats.md``.
"""

import ml_dtypes
import numpy as np
import pytest

from cocotb_tests.test_arith_common import add_stimulus, edge_pairs, mul_stimulus
from sim import formats as F
from sim.dtypes import FLOAT_SPECS, Format

ML = {
    Format.BF16: ml_dtypes.bfloat16,
    Format.FP16: np.float16,
    Format.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    Format.FP8_E5M2: ml_dtypes.float8_e5m2,
    Format.FP8_E3M4: ml_dtypes.float8_e3m4,
}
NARROW = list(ML)
FP8 = list(F.FP8_FORMATS)


def all_patterns(fmt):
    return np.arange(1 << FLOAT_SPECS[fmt].bits, dtype=np.uint32)


def ml_values(bits, fmt):
    udt = np.uint8 if FLOAT_SPECS[fmt].bits == 8 else np.uint16
    return np.asarray(bits).astype(udt).view(ML[fmt])


def f32_rules(values):
    """numpy float32 results as the interface defines them: FTZ, canonical NaN."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    bits = F.ftz(bits)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, np.uint32(0x7FC00000), bits).astype(np.uint32)


# -- the format table -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NARROW, ids=lambda f: f.name)
def test_table_matches_ml_dtypes(fmt):
    info = F.FORMAT_INFO[fmt]
    fi = ml_dtypes.finfo(ML[fmt])
    assert info.max_finite == float(fi.max)
    assert info.min_normal == float(fi.smallest_normal)
    assert info.min_subnormal == float(fi.smallest_subnormal)
    assert float(ml_values(info.max_finite_bits, fmt)) == info.max_finite
    assert float(ml_values(info.min_normal_bits, fmt)) == info.min_normal
    assert F.is_nan(info.nan_bits, fmt) and np.isnan(ml_values(info.nan_bits, fmt))
    assert info.nan_bits >> (info.bits - 1) == 0          # positive
    if info.has_inf:
        assert np.isposinf(ml_values(info.inf_bits, fmt))
    else:
        assert info.inf_bits is None and info.overflow == "saturate"


def test_canonical_nans_are_the_documented_ones():
    assert F.CANONICAL_NAN == {Format.FP32: 0x7FC00000, Format.BF16: 0x7FC0,
                               Format.FP16: 0x7E00, Format.FP8_E4M3: 0x7F,
                               Format.FP8_E5M2: 0x7E, Format.FP8_E3M4: 0x7C}


@pytest.mark.parametrize("fmt", NARROW, ids=lambda f: f.name)
def test_classification_matches_ml_dtypes(fmt):
    x = all_patterns(fmt)
    with np.errstate(invalid="ignore"):
        v = ml_values(x, fmt).astype(np.float64)
    assert np.array_equal(F.is_nan(x, fmt), np.isnan(v))
    assert np.array_equal(F.is_inf(x, fmt), np.isinf(v))
    assert np.array_equal(F.is_zero(x, fmt), v == 0)
    tiny = float(ml_dtypes.finfo(ML[fmt]).smallest_normal)
    assert np.array_equal(F.is_subnormal(x, fmt), (v != 0) & (np.abs(v) < tiny))


# -- decode -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NARROW, ids=lambda f: f.name)
def test_decode_every_pattern_vs_ml_dtypes(fmt):
    """Exhaustive: every pattern decodes to ml_dtypes' float32 bits, except that every NaN
    becomes the canonical NaN (ml_dtypes keeps sign and payload): a deliberate difference."""
    x = all_patterns(fmt)
    ref = ml_values(x, fmt).astype(np.float32).view(np.uint32)
    got = F.decode(x, fmt)
    nan = F.is_nan(x, fmt)
    assert np.array_equal(got[~nan], ref[~nan])
    assert np.all(got[nan] == 0x7FC00000)
    assert np.all(np.isnan(ref[nan].view(np.float32)))
    # the raw disagreement is exactly the NaNs other than the canonical one
    raw = int(np.sum(got != ref))
    assert raw == int(np.sum(nan)) - int(np.sum(ref[nan] == 0x7FC00000))


def test_decode_int8_every_value():
    x = np.arange(256, dtype=np.uint32)
    ref = x.astype(np.uint8).view(np.int8).astype(np.float32).view(np.uint32)
    assert np.array_equal(F.decode(x, Format.INT8), ref)


def test_decode_int32_rne_vs_numpy():
    rng = np.random.default_rng(1)
    edges = np.array([0, 1, -1, 2**31 - 1, -2**31, 2**24, 2**24 + 1, 2**24 + 2, 2**24 + 3,
                      2**25 + 2, 2**25 + 6, -(2**24 + 1), 2**30 + 64, 2**30 + 192,
                      16777217, 33554435], dtype=np.int64)
    x = np.concatenate([edges, rng.integers(-2**31, 2**31, 10**6)]).astype(np.int32)
    ref = x.astype(np.float32).view(np.uint32)
    assert np.array_equal(F.decode(x.view(np.uint32), Format.INT32), ref)


def test_decode_fp32_passes_through():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 1 << 32, 10**5, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(F.decode(x, Format.FP32), x)


def test_decode_ignores_upper_bits():
    x = np.arange(256, dtype=np.uint32)
    for fmt in FP8:
        assert np.array_equal(F.decode(x | 0xABCDEF00, fmt), F.decode(x, fmt))


# -- cFP8 bias --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.name)
def test_decode_bias_scales_by_power_of_two(fmt):
    x = all_patterns(fmt)
    default = FLOAT_SPECS[fmt].bias
    ref = ml_values(x, fmt).astype(np.float64)
    r = F.bias_range(fmt)
    for bias in (r.start, default - 4, default + 1, default + 20, r.stop - 1):
        got = F.decode(x, fmt, bias=bias).view(np.float32).astype(np.float64)
        exp = ref * 2.0 ** (default - bias)
        fin = np.isfinite(ref)
        assert np.array_equal(got[fin], exp[fin]), bias
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        # every finite value stays an FP32 normal (or zero) over the whole bias range
        g = F.decode(x, fmt, bias=bias)
        assert not np.any(F.is_subnormal(g, Format.FP32))


@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.name)
def test_bias_range_limits(fmt):
    r = F.bias_range(fmt)
    with pytest.raises(ValueError, match=rf"bias of {fmt.name} must be in {r.start}\.\."):
        F.decode(0, fmt, bias=r.stop)
    with pytest.raises(ValueError, match="bias of"):
        F.decode(0, fmt, bias=r.start - 1)
    with pytest.raises(TypeError, match="bias must be an integer"):
        F.decode(0, fmt, bias=7.5)


def test_bias_only_for_fp8():
    with pytest.raises(ValueError, match="bias can only be set for the FP8 formats"):
        F.decode(0, Format.BF16, bias=100)
    assert F.decode(0x3F80, Format.BF16, bias=127) == 0x3F800000


# -- FP32 arithmetic vs numpy float32 ----------------------------------------------------------

def _ref_add(a, b):
    with np.errstate(all="ignore"):
        return f32_rules(F.f32_value(F.daz(a)) + F.f32_value(F.daz(b)))


def _ref_mul(a, b):
    with np.errstate(all="ignore"):
        return f32_rules(F.f32_value(F.daz(a)) * F.f32_value(F.daz(b)))


def _mismatch_report(a, b, got, ref):
    bad = np.nonzero(got != ref)[0][:5]
    return [(hex(a[i]), hex(b[i]), hex(got[i]), hex(ref[i])) for i in bad]


def test_fp32_add_edges_vs_numpy():
    a, b = edge_pairs()
    got, ref = F.fp32_add(a, b), _ref_add(a, b)
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


def test_fp32_add_random_vs_numpy():
    """10**6 mixed pairs plus 10**6 uniform bit patterns."""
    rng = np.random.default_rng(3)
    a, b = add_stimulus(rng, 10**6)
    u = rng.integers(0, 1 << 32, (2, 10**6), dtype=np.uint64).astype(np.uint32)
    a, b = np.concatenate([a, u[0]]), np.concatenate([b, u[1]])
    got, ref = F.fp32_add(a, b), _ref_add(a, b)
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


def test_fp32_mul_edges_vs_numpy():
    a, b = edge_pairs()
    got, ref = F.fp32_mul(a, b), _ref_mul(a, b)
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


def test_fp32_mul_random_vs_numpy():
    rng = np.random.default_rng(4)
    a, b = mul_stimulus(rng, 10**6)
    u = rng.integers(0, 1 << 32, (2, 10**6), dtype=np.uint64).astype(np.uint32)
    a, b = np.concatenate([a, u[0]]), np.concatenate([b, u[1]])
    got, ref = F.fp32_mul(a, b), _ref_mul(a, b)
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


def test_fp32_ieee_special_rules():
    one, m_one = 0x3F800000, 0xBF800000
    pz, nz, inf, ninf = 0x00000000, 0x80000000, 0x7F800000, 0xFF800000
    nan = 0x7FC00000
    cases_add = [
        (one, m_one, pz),            # x + (-x) = +0 under RNE
        (nz, nz, nz), (nz, pz, pz), (pz, nz, pz),
        (0x80000001, nz, nz),        # -subnormal is -0 (DAZ)
        (0x00000001, 0x80000001, pz),
        (inf, ninf, nan), (inf, one, inf), (ninf, 0x7F7FFFFF, ninf),
        (0xFFC00001, one, nan), (0x7F800001, inf, nan),
        (0x7F7FFFFF, 0x7F7FFFFF, inf),                      # overflow
        (0x7F7FFFFF, 0x73000000, inf),                      # max + half ULP: tie, even is 2**128
        (0x7F7FFFFF, 0x72FFFFFF, 0x7F7FFFFF),               # just below the tie
        (0x00800000, 0x80800001, nz),                       # -2**-149 flushed: -0
        (0x00800001, 0x80800000, pz),                       # +2**-149 flushed: +0
        (one, 0x33800000, one),                             # 1 + 2**-24: tie to even
        (0x3F800001, 0x33800000, 0x3F800002),               # odd: tie rounds up
    ]
    for a, b, exp in cases_add:
        assert F.fp32_add(np.uint32(a), np.uint32(b)) == exp, (hex(a), hex(b))
        assert F.fp32_add(np.uint32(b), np.uint32(a)) == exp, (hex(b), hex(a))
    cases_mul = [
        (pz, inf, nan), (nz, one, nz), (m_one, pz, nz), (ninf, m_one, inf),
        (0x00000001, inf, nan),                             # DAZ: subnormal x Inf = 0 x Inf
        (0x1F800000, 0x1F800000, pz),                       # 2**-128: FTZ
        (0x5F800000, 0x60000000, inf),                      # 2**128: overflow
    ]
    for a, b, exp in cases_mul:
        assert F.fp32_mul(np.uint32(a), np.uint32(b)) == exp, (hex(a), hex(b))


def test_int32_add_wraps():
    a = np.array([0x7FFFFFFF, 0xFFFFFFFF, 5], dtype=np.uint32)
    b = np.array([1, 1, 0xFFFFFFFE], dtype=np.uint32)
    assert list(F.int32_add(a, b)) == [0x80000000, 0, 3]


# -- exact products vs float64 ------------------------------------------------------------------

def _ref_exact(va, vb):
    """float64 product (exact for <= 2 x 11-bit significands) mapped to FP32 under the
    interface's rules: below 2**-126 a signed zero, from 2**128 Inf, NaN canonical."""
    with np.errstate(all="ignore"):
        p = va.astype(np.float64) * vb.astype(np.float64)
    tiny = np.abs(p) < 2.0 ** -126
    p = np.where(tiny, np.copysign(0.0, p), p)
    with np.errstate(over="ignore"):
        p32 = p.astype(np.float32)
    assert np.array_equal(p32.astype(np.float64)[np.isfinite(p32)],
                          p[np.isfinite(p32)]), "reference product not exact in FP32"
    return f32_rules(p32)


@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.name)
def test_mul_exact_every_fp8_pair_vs_float64(fmt):
    x = all_patterns(fmt)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    got = F.mul_exact(a, b, fmt)
    ref = _ref_exact(ml_values(a, fmt), ml_values(b, fmt))
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.name)
def test_mul_exact_fp8_bias_vs_float64(fmt):
    """With a non-standard bias (both ends of the range): products scale by 2**(2 d), and
    leave the FP32 normal range where the bias pushes them there (FTZ / Inf)."""
    x = all_patterns(fmt)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    r = F.bias_range(fmt)
    for bias in (r.start, r.stop - 1, FLOAT_SPECS[fmt].bias + 3):
        va = F.decode(a, fmt, bias=bias).view(np.float32)
        vb = F.decode(b, fmt, bias=bias).view(np.float32)
        got = F.mul_exact(a, b, fmt, bias=bias)
        ref = _ref_exact(va, vb)
        assert np.array_equal(got, ref), (bias, _mismatch_report(a, b, got, ref))


@pytest.mark.parametrize("fmt", [Format.BF16, Format.FP16], ids=lambda f: f.name)
def test_mul_exact_16bit_vs_float64(fmt):
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 16, 10**6).astype(np.uint32)
    b = rng.integers(0, 1 << 16, 10**6).astype(np.uint32)
    va, vb = ml_values(a, fmt), ml_values(b, fmt)
    if fmt == Format.BF16:   # BF16 subnormals are FP32 subnormals: DAZ in arithmetic
        va = np.where(F.is_subnormal(a, fmt), np.copysign(0.0, va.astype(np.float32)), va)
        vb = np.where(F.is_subnormal(b, fmt), np.copysign(0.0, vb.astype(np.float32)), vb)
    got = F.mul_exact(a, b, fmt)
    ref = _ref_exact(np.asarray(va, dtype=np.float32), np.asarray(vb, dtype=np.float32))
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)


def test_mul_exact_fp32_is_tf32():
    rng = np.random.default_rng(6)
    a = rng.integers(0, 1 << 32, 10**6, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, 10**6, dtype=np.uint64).astype(np.uint32)
    ta, tb = F.tf32_truncate(a), F.tf32_truncate(b)
    va, vb = F.f32_value(F.daz(ta)), F.f32_value(F.daz(tb))
    got = F.mul_exact(a, b, Format.FP32)
    ref = _ref_exact(va, vb)
    assert np.array_equal(got, ref), _mismatch_report(a, b, got, ref)
    # a NaN whose payload is only in the dropped bits stays a NaN
    assert F.mul_exact(np.uint32(0x7F800001), np.uint32(0x3F800000), Format.FP32) == 0x7FC00000
    assert F.mul_exact(np.uint32(0x3F801FFF), np.uint32(0x3F800000), Format.FP32) == 0x3F800000


def test_mul_exact_int8_every_pair():
    x = np.arange(256, dtype=np.uint32)
    a, b = np.repeat(x, 256), np.tile(x, 256)
    ref = (a.astype(np.uint8).view(np.int8).astype(np.int32)
           * b.astype(np.uint8).view(np.int8).astype(np.int32)).view(np.uint32)
    assert np.array_equal(F.mul_exact(a, b, Format.INT8), ref)


def test_mul_exact_rejects_int32():
    with pytest.raises(ValueError, match="INT32"):
        F.mul_exact(0, 0, Format.INT32)
