"""The kernel library on the reference simulator (race checker on), against numpy.

Bit-exact where numpy can emulate the core's arithmetic: GEMM and conv2d against the tensor
engine's accumulation order (``kernels.lib.linalg.reference_gemm_tn``: per K tile of ``rows``
exact products summed top to bottom in FP32 RNE, tiles accumulated in PSUM in order), the
linear layer without a LUT function (then one FP32 add of the bias), INT8 GEMM against int64
numpy and the requantized layer against its FP32 emulation. Elsewhere against float64 within
a bound derived from the formats:

* GEMM, float64: ``|err| <= (K + 1) * 2**-23 * (|W|^T |X|)`` (FP32 RNE per add).
* LUT functions: ``exp``, ``reciprocal`` and ``rsqrt`` need at most 49 entries and are within
  1 BF16 ULP (relative ``2**-8``) of the true value in the 64-entry banks of these cores
  (``docs/vector.md``); the smooth activations (``gelu``, ``sigmoid``) need hundreds of
  entries for that, and with 64 are within ``2**-8 * (1 + |f|)`` (gelu's tail measured at
  3.4e-3 absolute, 3 % relative where ``|f| < 2**-12``); softmax has three factors
  (exp, reciprocal, and the exp inside the sum): ``3 * 2**-8`` relative; the norms one
  (rsqrt): ``2**-8`` of ``|x_norm * gamma|`` plus FP32 rounding.
* attention: the scores' exp and the sums' reciprocal (``3 * 2**-8``) and the exponentials
  rounded to BF16 before the products and the sums (``2**-9``): ``|err| <= 4 * 2**-8 *
  max|v|`` (the probabilities sum to 1).
* MLP: the hidden layer rounded to BF16 after the LUT (``2 * 2**-8`` relative per element):
  ``|err| <= 2**-6 * (|h| @ |w2|) + GEMM bound``.
"""

import ml_dtypes
import numpy as np
import pytest

from kernels.lib import (attention, conv2d, gemm, gemm_int8, gemm_tn, layernorm, linear,
                         linear_int8, mlp, rmsnorm, softmax)
from kernels.lib.linalg import reference_gemm_tn
from sim.config import CoreConfig

BF = ml_dtypes.bfloat16
CFG8 = CoreConfig.preset("core8").replace(pmem_depth=2048)
CFG4 = CoreConfig.preset("core4").replace(pmem_depth=2048)


def _rng(*key):
    return np.random.default_rng(abs(hash(key)) % (1 << 32))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("cfg", [CFG8, CFG4], ids=["core8", "core4"])
@pytest.mark.parametrize("K, M, N", [(8, 8, 8), (20, 13, 37), (3, 5, 2), (24, 17, 150)])
def test_gemm_tn_bit_exact(cfg, K, M, N):
    rng = _rng("gemm", K, M, N)
    w = rng.standard_normal((K, M)).astype(BF)
    x = rng.standard_normal((K, N)).astype(BF)
    y = gemm_tn(w, x, config=cfg)
    ref = reference_gemm_tn(w, x, cfg.rows)
    assert np.array_equal(_bits(y), _bits(ref))
    wf, xf = w.astype(np.float64), x.astype(np.float64)
    bound = (K + 1) * 2.0 ** -23 * (np.abs(wf).T @ np.abs(xf))
    assert np.all(np.abs(y - wf.T @ xf) <= bound)


@pytest.mark.parametrize("dt", [BF, np.float16, ml_dtypes.float8_e4m3fn,
                                ml_dtypes.float8_e5m2, ml_dtypes.float8_e3m4])
def test_gemm_every_float_format(dt):
    rng = _rng("fmt", str(dt))
    a = (rng.standard_normal((11, 19)) * 0.5).astype(dt)
    b = (rng.standard_normal((19, 10)) * 0.5).astype(dt)
    y = gemm(a, b, config=CFG8)
    assert np.array_equal(_bits(y), _bits(reference_gemm_tn(a.T, b, 8)))


@pytest.mark.parametrize("K, M, N", [(8, 8, 8), (40, 12, 30)])
def test_gemm_int8_exact(K, M, N):
    rng = _rng("int8", K, M, N)
    w = rng.integers(-128, 128, (K, M)).astype(np.int8)
    x = rng.integers(-128, 128, (K, N)).astype(np.int8)
    y = gemm_int8(w, x, config=CFG8)
    assert y.dtype == np.int32
    assert np.array_equal(y, w.astype(np.int64).T @ x.astype(np.int64))


@pytest.mark.parametrize("rnd", ["rne", "sr"])
def test_linear_int8_requantized(rnd):
    rng = _rng("q8", rnd)
    x = rng.integers(-128, 128, (12, 20)).astype(np.int8)
    w = rng.integers(-128, 128, (20, 10)).astype(np.int8)
    scale, bias = 0.0123, 3.0
    y = linear_int8(x, w, scale=scale, bias=bias, rnd=rnd, config=CFG8)
    acc = (x.astype(np.int64) @ w.astype(np.int64)).astype(np.float32)
    z = acc * np.float32(scale) + np.float32(bias)          # FP32, as the vector engine
    if rnd == "rne":
        assert np.array_equal(y, np.clip(np.rint(z), -128, 127).astype(np.int8))
    else:
        assert np.all(np.abs(y - np.clip(z, -128, 127)) < 1)


def test_linear_bias_bit_exact():
    rng = _rng("linear")
    x = rng.standard_normal((13, 20)).astype(BF)
    w = rng.standard_normal((20, 11)).astype(BF)
    b = rng.standard_normal(11).astype(np.float32)
    y = linear(x, w, b, config=CFG8)
    ref = reference_gemm_tn(w, x.T, 8).T + b            # FP32 RNE add
    assert np.array_equal(_bits(y), _bits(ref))


@pytest.mark.parametrize("func, fn", [
    ("gelu", lambda z: 0.5 * z * (1 + np.vectorize(__import__("math").erf)(z / np.sqrt(2)))),
    ("relu", lambda z: np.maximum(z, 0)),
    ("sigmoid", lambda z: 1 / (1 + np.exp(-z)))])
def test_linear_activation(func, fn):
    rng = _rng("lin", func)
    x = rng.standard_normal((9, 16)).astype(BF)
    w = rng.standard_normal((16, 8)).astype(BF)
    b = rng.standard_normal(8).astype(np.float32)
    y = linear(x, w, b, func=func, config=CFG8)
    z = reference_gemm_tn(w, x.T, 8).T.astype(np.float64) + b
    assert np.all(np.abs(y - fn(z)) <= 2 ** -8 * (1 + np.abs(fn(z))))


def test_linear_bf16_out_stochastic_rounding():
    rng = _rng("linsr")
    x = rng.standard_normal((8, 8)).astype(BF)
    w = rng.standard_normal((8, 8)).astype(BF)
    b = np.zeros(8, np.float32)
    y = linear(x, w, b, out_dtype="bf16", rnd="sr", config=CFG8)
    assert y.dtype == BF
    z = reference_gemm_tn(w, x.T, 8).T
    assert np.all(np.abs(y.astype(np.float32) - z) <= 2 ** -7 * np.abs(z))


def test_mlp():
    rng = _rng("mlp")
    x = rng.standard_normal((10, 16)).astype(BF)
    w1 = (rng.standard_normal((16, 12)) / 4).astype(BF)
    b1 = rng.standard_normal(12).astype(np.float32)
    w2 = (rng.standard_normal((12, 6)) / 4).astype(BF)
    b2 = rng.standard_normal(6).astype(np.float32)
    y = mlp(x, w1, b1, w2, b2, config=CFG8)
    import math
    gelu = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))
    h = gelu(x.astype(np.float64) @ w1.astype(np.float64) + b1)
    ref = h @ w2.astype(np.float64) + b2
    bound = 2 ** -6 * (np.abs(h) @ np.abs(w2.astype(np.float64))) + 1e-5
    assert np.all(np.abs(y - ref) <= bound)


def test_softmax():
    x = _rng("sm").standard_normal((13, 24)).astype(np.float32) * 3
    y = softmax(x, config=CFG8)
    e = np.exp(x - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    assert np.all(np.abs(y - ref) <= 3 * 2 ** -8 * ref)


def test_softmax_bf16_input():
    x = _rng("smb").standard_normal((4, 16)).astype(BF)
    y = softmax(x, config=CFG8)
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    assert np.all(np.abs(y - e / e.sum(1, keepdims=True)) <= 3 * 2 ** -8 * y)


def test_layernorm_rmsnorm():
    rng = _rng("norm")
    x = rng.standard_normal((10, 24)).astype(np.float32)
    g = rng.standard_normal(24).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    xf = x.astype(np.float64)
    xn = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5)
    y = layernorm(x, g, b, config=CFG8)
    assert np.all(np.abs(y - (xn * g + b)) <= 2 ** -8 * np.abs(xn * g) + 2 ** -18)
    y = rmsnorm(x, g, config=CFG8)
    rn = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + 1e-6) * g
    assert np.all(np.abs(y - rn) <= 2 ** -8 * np.abs(rn) + 2 ** -18)


@pytest.mark.parametrize("cfg", [CFG8, CFG8.replace(sbuf_depth=2048, psum_depth=512,
                                                  dma_data_width=128)],
                         ids=["core8", "core8_w128"])
@pytest.mark.parametrize("S, T, d", [(8, 16, 8), (10, 20, 8), (5, 8, 4), (10, 24, 32),
                                     (8, 16, 64)])
def test_attention(S, T, d, cfg):
    """Heads of ``d`` up to ``rows`` and multiples of it (the scores accumulated over K tiles
    of ``d``)."""
    rng = _rng("attn", S, T, d)
    q, k, v = (rng.standard_normal(s).astype(BF) for s in ((S, d), (T, d), (T, d)))
    o = attention(q, k, v, config=cfg)
    qf, kf, vf = (a.astype(np.float64) for a in (q, k, v))
    s = qf @ kf.T / np.sqrt(d)
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert np.all(np.abs(o - p @ vf) <= 4 * 2 ** -8 * np.abs(vf).max())


def test_attention_head_size_limit():
    q = np.zeros((8, 12), BF)
    with pytest.raises(ValueError, match="head size d = 12 .* must be at most rows = 8 or a "
                                         "multiple of it"):
        attention(q, q, q, config=CFG8)


@pytest.mark.parametrize("C, H, W, O, kh, kw", [(3, 6, 7, 5, 3, 3), (2, 5, 5, 9, 2, 1)])
def test_conv2d_bit_exact(C, H, W, O, kh, kw):
    rng = _rng("conv", C, H, W, O)
    x = rng.standard_normal((C, H, W)).astype(BF)
    w = rng.standard_normal((O, C, kh, kw)).astype(BF)
    y = conv2d(x, w, config=CFG8)
    OH, OW = H - kh + 1, W - kw + 1
    cols = np.stack([x[c, dy:dy + OH, dx:dx + OW].reshape(-1) for c in range(C)
                     for dy in range(kh) for dx in range(kw)])          # im2col [K, OH*OW]
    ref = reference_gemm_tn(w.reshape(O, -1).T, cols, 8).reshape(O, OH, OW)
    assert np.array_equal(_bits(y), _bits(ref))
