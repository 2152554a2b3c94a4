"""The tensor engine's golden model (``sim.tensor``) against references nobody here wrote:
numpy int64 matmul for INT8 (exact, wrapped to INT32), numpy float64 matmul of values decoded by
ml_dtypes for the floating-point formats (within the stated error bound), numpy float32 for the
order of the additions, and the PSUM model against the same."""

import ml_dtypes
import numpy as np
import pytest

from sim import formats
from sim.dtypes import Format
from sim.tensor import (ENGINE_FORMATS, PsumModel, column_sums, error_bound, matmul,
                        random_operands)

FP_FORMATS = [f for f in ENGINE_FORMATS if f != Format.INT8]

ML_DTYPE = {
    Format.BF16: (ml_dtypes.bfloat16, np.uint16),
    Format.FP16: (np.float16, np.uint16),
    Format.FP8_E4M3: (ml_dtypes.float8_e4m3fn, np.uint8),
    Format.FP8_E5M2: (ml_dtypes.float8_e5m2, np.uint8),
    Format.FP8_E3M4: (ml_dtypes.float8_e3m4, np.uint8),
}

SEED = 20261122


def as_float64(bits, fmt):
    """Decode bit patterns with ml_dtypes/numpy (independent of sim.formats)."""
    dt, ut = ML_DTYPE[fmt]
    return np.asarray(bits).astype(ut).view(dt).astype(np.float64)


def wrap32(x):
    return (np.asarray(x, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


@pytest.mark.parametrize("shape", [(1, 1, 1), (4, 4, 7), (16, 8, 300), (128, 3, 5)])
def test_int8_exact(shape):
    K, M, N = shape
    rng = np.random.default_rng(SEED + K)
    st = rng.integers(0, 256, size=(K, M), dtype=np.uint64)
    mv = rng.integers(0, 256, size=(K, N), dtype=np.uint64)
    ref = st.astype(np.int64).astype(np.uint8).view(np.int8).astype(np.int64)
    mref = mv.astype(np.int64).astype(np.uint8).view(np.int8).astype(np.int64)
    assert np.array_equal(matmul(st, mv, Format.INT8), wrap32(ref.T @ mref))


def test_int8_wraps():
    # 128 products of (-128) * (-128) = 2**14 each: 2**21, no wrap; add PSUM accumulation to
    # cross 2**31: 1024 accumulations of 2**21 = 2**31 wraps to -2**31.
    st = np.full((128, 1), 0x80, np.uint64)
    mv = np.full((128, 1), 0x80, np.uint64)
    col = matmul(st, mv, Format.INT8)
    assert int(col[0, 0]) == 1 << 21
    psum = PsumModel(1, 4)
    psum.write(0, col, False, Format.INT8)
    for _ in range(1023):
        psum.write(0, col, True, Format.INT8)
    assert int(psum.read(0)[0, 0]) == 0x80000000


@pytest.mark.parametrize("fmt", FP_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("K", [1, 2, 8, 128])
def test_fp_within_bound_of_float64(fmt, K):
    """|golden - float64 exact| <= gamma(K-1) sum|p| + K 2**-126 for finite results."""
    rng = np.random.default_rng(SEED + K + int(fmt))
    M, N = 5, 40
    st = random_operands(rng, fmt, (K, M), "normal")
    mv = random_operands(rng, fmt, (K, N), "normal")
    got = formats.f32_value(matmul(st, mv, fmt)).astype(np.float64)
    a, b = as_float64(st, fmt), as_float64(mv, fmt)
    exact = a.T @ b          # exact in float64: K <= 128 products of <= 22-bit significands
    bound = error_bound(np.abs(a).T @ np.abs(b), K)
    assert np.all(np.isfinite(got))
    err = np.abs(got - exact)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"
    if K == 1:
        assert np.array_equal(got, exact)      # one exact product, no addition


@pytest.mark.parametrize("fmt", FP_FORMATS, ids=lambda f: f.name)
def test_fp_order_matches_float32_column_loop(fmt):
    """The documented order (row 0 first, one FP32 rounding per row) equals a plain float32
    loop over k (numpy float32 rounds RNE; the values stay far from subnormals)."""
    rng = np.random.default_rng(SEED + 7 + int(fmt))
    K, M, N = 16, 4, 30
    st = random_operands(rng, fmt, (K, M), "normal")
    mv = random_operands(rng, fmt, (K, N), "normal")
    a, b = as_float64(st, fmt), as_float64(mv, fmt)
    s = (a[0][:, None] * b[0][None, :]).astype(np.float32)
    for k in range(1, K):
        s = (s + (a[k][:, None] * b[k][None, :]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(matmul(st, mv, fmt), s.view(np.uint32))
    if fmt not in (Format.BF16, Format.FP16):
        return      # FP8 sums of this size are exact in FP32: every order agrees
    # A different order gives a different result somewhere (so the test can fail).
    r = (a[K - 1][:, None] * b[K - 1][None, :]).astype(np.float32)
    for k in range(K - 2, -1, -1):
        r = (r + (a[k][:, None] * b[k][None, :]).astype(np.float32)).astype(np.float32)
    assert not np.array_equal(r.view(np.uint32), s.view(np.uint32))


def test_specials():
    f = Format.BF16
    one, inf, nan, neg0 = 0x3F80, 0x7F80, 0x7FC1, 0x8000
    st = np.array([[one], [one]], np.uint64)
    assert int(matmul(st, np.array([[inf], [0xFF80]], np.uint64), f)[0, 0]) == 0x7FC00000
    assert int(matmul(st, np.array([[inf], [one]], np.uint64), f)[0, 0]) == 0x7F800000
    assert int(matmul(st, np.array([[nan], [one]], np.uint64), f)[0, 0]) == 0x7FC00000
    # -0 + -0 = -0; padding with a zero row (hardware rows > K) turns it into +0.
    mv = np.array([[neg0], [neg0]], np.uint64)
    assert int(matmul(st, mv, f)[0, 0]) == 0x80000000
    assert int(matmul(st, mv, f, rows=3)[0, 0]) == 0x00000000
    # 0 x Inf is NaN
    assert int(matmul(np.array([[0]], np.uint64), np.array([[inf]], np.uint64), f)[0, 0]) \
        == 0x7FC00000


def test_column_sums_pads_lanes():
    rng = np.random.default_rng(SEED)
    st = random_operands(rng, Format.FP16, (3, 2), "normal")
    mv = random_operands(rng, Format.FP16, (3, 9), "normal")
    full = column_sums(st, mv, Format.FP16, rows=4, cols=5)
    assert full.shape == (5, 9)
    assert np.array_equal(full[:2], matmul(st, mv, Format.FP16, rows=4))
    assert np.all((full[2:] & 0x7FFFFFFF) == 0)        # zero weights: +-0


@pytest.mark.parametrize("fmt", [Format.INT8, Format.BF16], ids=lambda f: f.name)
def test_psum_split_k(fmt):
    """K = 3 x rows as three matmuls into PSUM (overwrite, accumulate, accumulate) equals the
    reference within the bound (exactly for INT8)."""
    rng = np.random.default_rng(SEED + 3)
    rows, M, N = 8, 4, 20
    st = random_operands(rng, fmt, (3 * rows, M), "normal")
    mv = random_operands(rng, fmt, (3 * rows, N), "normal")
    psum = PsumModel(M, 64)
    for t in range(3):
        sl = slice(t * rows, (t + 1) * rows)
        psum.write(10, matmul(st[sl], mv[sl], fmt), t > 0, fmt)
    got = psum.read(10, N)
    if fmt == Format.INT8:
        s = st.astype(np.uint8).view(np.int8).astype(np.int64)
        v = mv.astype(np.uint8).view(np.int8).astype(np.int64)
        assert np.array_equal(got, wrap32(s.T @ v))
    else:
        a, b = as_float64(st, fmt), as_float64(mv, fmt)
        err = np.abs(formats.f32_value(got).astype(np.float64) - a.T @ b)
        assert np.all(err <= error_bound(np.abs(a).T @ np.abs(b), 3 * rows))


def test_psum_model_overwrite_and_wrap_address():
    p = PsumModel(2, 4)
    p.write(3, np.array([[1, 2], [3, 4]], np.uint32), False, Format.INT32)
    assert p.read(3, 2).tolist() == [[1, 2], [3, 4]]        # words 3 and 0 (wrapped)
    # FP32 accumulate: the old words 2 and 4 are FP32 subnormals, read as zero (DAZ).
    p.write(0, np.array([[0x3F800000], [0x40000000]], np.uint32), True, Format.FP32)
    assert p.read(0).tolist() == [[0x3F800000], [0x40000000]]
    p.write(0, np.array([[0x3F800000], [0x40000000]], np.uint32), True, Format.FP32)
    assert p.read(0).tolist() == [[0x40000000], [0x40800000]]
    p.write(0, np.array([[5], [0xFFFFFFFF]], np.uint32), True, Format.INT32)
    assert p.read(0).tolist() == [[0x40000005], [0x407FFFFF]]


def test_matmul_argument_errors():
    st = np.zeros((2, 2), np.uint64)
    with pytest.raises(ValueError, match="fmt must be one of"):
        matmul(st, st, Format.FP32)
    with pytest.raises(ValueError, match="must share K"):
        matmul(st, np.zeros((3, 2), np.uint64), Format.INT8)
    with pytest.raises(ValueError, match="rows must be at least K = 2, not 1"):
        matmul(st, st, Format.INT8, rows=1)
    with pytest.raises(ValueError, match="M must be at most cols = 1, not 2"):
        column_sums(st, st, Format.INT8, rows=2, cols=1)
    with pytest.raises(ValueError, match="mode must be"):
        random_operands(np.random.default_rng(0), Format.BF16, (2,), "odd")
