"""The vector engine's INT32 paths in the golden model (``sim.vector``), against numpy: the
exact INT32 copy, the requantization INT32 * scale + bias -> INT8 (RNE and SR), the
conversion table of docs/isa.md (which copies are exact), and the reference simulator's
``copy`` / ``requant`` instructions on PSUM.

The references are numpy: int64 arithmetic, float32 arithmetic (each operation correctly
rounded, as the engine's FP32 units; no subnormals or NaN in those operands), float64 and
``np.rint`` (round half to even), ml_dtypes for the narrow formats.
"""

import ml_dtypes
import numpy as np
import pytest

from sim import isa
from sim.asm import assemble, disassemble
from sim.dtypes import Format, RoundMode
from sim.formats import decode
from sim.refsim import RefSim
from sim.rounding import RAW_MODE, encode
from sim.vector import AluOp, Src, VectorEngineModel, make_cmd, raw_copy

LANES = 8
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def _words(values):
    return (np.asarray(values, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


def _signed(words, bits=32):
    w = np.asarray(words, dtype=np.int64) & ((1 << bits) - 1)
    return np.where(w >> (bits - 1), w - (1 << bits), w)


def _f32(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def _run(cmd, a, lanes=LANES, b=(), seed=0):
    """One command over flat ``a`` (``lanes``-major beats); the flat outputs."""
    m = VectorEngineModel(lanes, depth=64, seed=seed)
    a = np.asarray(a, dtype=np.uint32).reshape(-1, lanes)
    cmd = make_cmd(**{**cmd, "count": a.shape[0]})
    return np.concatenate(m.execute(cmd, a, b))


def requant_cmd(scale, bias=0, rmode=RoundMode.RNE):
    return dict(op0=AluOp.MUL, op1=AluOp.ADD, src0=Src.IMM, src1=Src.IMM, imm0=scale,
                imm1=bias, lut=0, emit=1, fmt_a=Format.INT32, fmt_o=Format.INT8, rmode=rmode)


def requant_numpy(x, scale, bias):
    """``sat(rint(fp32(fp32(fp32(x) * scale) + bias)))`` with numpy float32 operations."""
    s = np.array(scale, dtype=np.uint32).view(np.float32)
    b = np.array(bias, dtype=np.uint32).view(np.float32)
    y = (np.asarray(x, dtype=np.int64).astype(np.float32) * s) + b
    return np.clip(np.rint(y.astype(np.float64)), -128, 127).astype(np.int64)


# -- exact INT32 copy -------------------------------------------------------------------------

def test_int32_copy_every_pattern_class():
    """INT32 -> INT32 copy returns every word: 16777217, INT32 min/max, random words, and words
    whose bits read as FP32 NaN, Inf, subnormals and -0 (no DAZ, no NaN rule on the way)."""
    rng = np.random.default_rng(1)
    edges = [16777217, 16777219, -16777217, I32_MIN, I32_MAX, 0, 1, -1, 0x7F800001,
             0x7FC00000, 0x7F800000, 0x007FFFFF, 0x00000001, I32_MIN + 1, 19500001, 33554435]
    vals = np.concatenate([_words(edges), rng.integers(0, 1 << 32, 4000, dtype=np.uint64)
                           .astype(np.uint32)])
    vals = np.resize(vals, (len(vals) + LANES - 1) // LANES * LANES)
    cmd = dict(emit=1, fmt_a=Format.INT32, fmt_o=Format.INT32)
    for rm in RoundMode:
        got = _run(dict(cmd, rmode=rm), vals)
        bad = np.flatnonzero(got != vals)
        assert not len(bad), (f"{rm.name}: {len(bad)} of {len(vals)} words changed, first "
                              f"{_signed(vals[bad[0]])} -> {_signed(got[bad[0]])}")


def test_int32_copy_through_fp32_rounds():
    """The near misses of ``raw_copy`` convert through FP32 (docs/isa.md's table): INT32 ADD
    of 0 rounds 16777217 to 16777216 (numpy's int32 -> float32, RNE), INT32 -> FP32 likewise."""
    vals = _words([16777217, 16777219, 33554435, -16777217, 7, I32_MAX, I32_MIN, 0])
    exp_f32 = _signed(vals).astype(np.float32)
    cmd = dict(emit=1, fmt_a=Format.INT32, fmt_o=Format.INT32)
    assert raw_copy(make_cmd(**cmd)) and not raw_copy(make_cmd(**cmd, op0=AluOp.ADD))
    assert not raw_copy(make_cmd(**cmd, lut=1)) and not raw_copy(make_cmd(**dict(
        cmd, fmt_o=Format.FP32)))
    got = _run(dict(cmd, op0=AluOp.ADD), vals)
    assert np.array_equal(_signed(got), np.clip(exp_f32.astype(np.float64), I32_MIN, I32_MAX))
    got = _run(dict(cmd, fmt_o=Format.FP32), vals)
    assert np.array_equal(got.view(np.float32), exp_f32)
    assert _signed(_run(cmd, vals))[0] == 16777217


def test_raw_mode_is_fp32_only():
    x = np.array([0x00000001, 0x7F800001], dtype=np.uint32)
    assert np.array_equal(encode(x, Format.FP32, RAW_MODE), x)
    with pytest.raises(ValueError, match="RAW_MODE needs fmt FP32"):
        encode(x, Format.INT32, RAW_MODE)


# -- requantization -----------------------------------------------------------------------------

def test_requantize_edges():
    """Saturation at both ends, RNE ties to even (both signs, with and without a bias), INT32
    min/max, NaN scale (0), +-Inf scale (saturates; 0 * Inf is NaN: 0), subnormal scale (DAZ:
    0), NaN bias (0)."""
    x = _words([5, -5, 7, -7, 1, 3, 0, -1, 255, 256, 257, -256, -257, -258, I32_MIN, I32_MAX])
    half = _f32(0.5)
    q = _signed(_run(requant_cmd(half), x, lanes=16), 8)
    assert q.tolist() == [2, -2, 4, -4, 0, 2, 0, 0, 127, 127, 127, -128, -128, -128, -128, 127]
    q = _signed(_run(requant_cmd(half, _f32(-0.5)), x, lanes=16), 8)
    assert q.tolist()[:8] == [2, -3, 3, -4, 0, 1, 0, -1]
    q = _signed(_run(requant_cmd(0x7FC00000), x, lanes=16), 8)
    assert not q.any()
    q = _signed(_run(requant_cmd(0x7F800000), x, lanes=16), 8)
    assert q.tolist() == [127, -128, 127, -128, 127, 127, 0, -128, 127, 127, 127, -128, -128,
                          -128, -128, 127]
    q = _signed(_run(requant_cmd(0xFF800000), x, lanes=16), 8)
    assert q[0] == -128 and q[1] == 127 and q[6] == 0
    assert not _run(requant_cmd(0x00000001), x, lanes=16).any()
    assert not _run(requant_cmd(_f32(1.0), 0x7FC00000), x, lanes=16).any()


@pytest.mark.parametrize("seed", range(4))
def test_requantize_rne_vs_numpy(seed):
    """RNE requantization equals numpy's float32 arithmetic then np.rint and the clip to
    [-128, 127], over random INT32 values (small and full range), scales and biases."""
    rng = np.random.default_rng(seed)
    n = 4096
    x = np.where(rng.random(n) < 0.5, rng.integers(-40000, 40000, n),
                 rng.integers(I32_MIN, I32_MAX, n, endpoint=True))
    for _ in range(8):
        scale = _f32(rng.uniform(0.5, 2) * 2.0 ** -rng.integers(0, 31) * rng.choice([-1, 1]))
        bias = _f32(rng.uniform(-64, 64)) if rng.random() < 0.5 else 0
        got = _signed(_run(requant_cmd(scale, bias), _words(x)), 8)
        assert np.array_equal(got, requant_numpy(x, scale, bias)), (seed, scale, bias)


def test_requantize_single_rounding_in_exact_range():
    """Where every FP32 step is exact (|x| <= 2**24, a power-of-two scale, a bias on the same
    grid) the result is the single rounding of the exact value: int64 arithmetic, round half
    to even, saturation."""
    rng = np.random.default_rng(7)
    x = rng.integers(-(1 << 24), 1 << 24, 8192, endpoint=True)
    for k in range(0, 18):
        scale = 2.0 ** -k
        bias = float(rng.integers(-64, 64)) / 2
        num = x.astype(np.int64) + int(bias * (1 << k))          # (x * scale + bias) * 2**k
        q, r = np.divmod(num, 1 << k)                             # floor division
        up = (2 * r > (1 << k)) | ((2 * r == (1 << k)) & (q % 2 == 1))
        exp = np.clip(q + up, -128, 127)
        got = _signed(_run(requant_cmd(_f32(scale), _f32(bias)), _words(x)), 8)
        assert np.array_equal(got, exp), k


def test_requantize_sr_unbiased():
    """SR: every output is the floor or the ceiling of the FP32 value, and their mean over
    many draws is the value (within 4 standard errors)."""
    vals = np.array([3, 5, 7, -3, -5, 11, 1, -1] * 4, dtype=np.int64)   # x * 0.3 + 0.1
    scale, bias = _f32(0.3), _f32(0.1)
    y = (vals.astype(np.float32) * np.float32(0.3) + np.float32(0.1)).astype(np.float64)
    m = VectorEngineModel(len(vals), depth=64, seed=12345)
    reps = 2000
    a = np.tile(_words(vals), (reps, 1))
    outs = np.array(m.execute(make_cmd(**requant_cmd(scale, bias, RoundMode.SR), count=reps),
                              a))
    q = _signed(outs, 8).astype(np.float64)
    assert np.all((q == np.floor(y)) | (q == np.ceil(y)))
    frac = y - np.floor(y)
    err = np.abs(q.mean(axis=0) - y)
    assert np.all(err <= 4 * np.sqrt(frac * (1 - frac) / reps) + 1e-9), err.max()


# -- the conversion table (docs/isa.md) ---------------------------------------------------------

#: The COPY pairs docs/isa.md states are exact for every finite input (values, not patterns:
#: -0 stays -0; narrow subnormals count; FP32/BF16 subnormals flush to zero on the FP32 side).
EXACT = [
    (Format.INT8, Format.INT8), (Format.INT8, Format.INT32), (Format.INT8, Format.FP32),
    (Format.INT8, Format.BF16), (Format.INT8, Format.FP16),
    (Format.FP16, Format.FP32), (Format.FP16, Format.FP16),
    (Format.FP8_E4M3, Format.FP32), (Format.FP8_E4M3, Format.BF16),
    (Format.FP8_E4M3, Format.FP16), (Format.FP8_E4M3, Format.FP8_E4M3),
    (Format.FP8_E5M2, Format.FP32), (Format.FP8_E5M2, Format.BF16),
    (Format.FP8_E5M2, Format.FP16), (Format.FP8_E5M2, Format.FP8_E5M2),
    (Format.FP8_E3M4, Format.FP32), (Format.FP8_E3M4, Format.BF16),
    (Format.FP8_E3M4, Format.FP16), (Format.FP8_E3M4, Format.FP8_E3M4),
]
_ML = {Format.BF16: ml_dtypes.bfloat16, Format.FP16: np.float16,
       Format.FP8_E4M3: ml_dtypes.float8_e4m3fn, Format.FP8_E5M2: ml_dtypes.float8_e5m2,
       Format.FP8_E3M4: ml_dtypes.float8_e3m4}
_BITS = {Format.INT8: 8, Format.INT32: 32, Format.FP32: 32, Format.BF16: 16, Format.FP16: 16,
         Format.FP8_E4M3: 8, Format.FP8_E5M2: 8, Format.FP8_E3M4: 8}


def _value(words, fmt):
    """float64 values of ``fmt`` words (NaN for NaN)."""
    if fmt in (Format.INT8, Format.INT32):
        return _signed(words, _BITS[fmt]).astype(np.float64)
    if fmt == Format.FP32:
        return np.asarray(words, dtype=np.uint32).view(np.float32).astype(np.float64)
    return np.asarray(words, dtype=np.uint64).astype(
        np.uint16 if _BITS[fmt] == 16 else np.uint8).view(_ML[fmt]).astype(np.float64)


@pytest.mark.parametrize("fa, fo", EXACT, ids=lambda f: f.name)
def test_exact_copies(fa, fo):
    """Every input pattern of ``fa`` (narrow formats: all of them) copies to ``fo`` with the
    same value in every rounding mode (RNE, RTZ; SR draws do not matter for exact values)."""
    words = np.arange(1 << _BITS[fa], dtype=np.uint32)
    words = np.resize(words, (len(words) + LANES - 1) // LANES * LANES)
    x = _value(words, fa)
    keep = np.isfinite(x)
    for rm in (RoundMode.RNE, RoundMode.RTZ, RoundMode.SR):
        got = _value(_run(dict(emit=1, fmt_a=fa, fmt_o=fo, rmode=rm), words), fo)
        assert np.array_equal(got[keep], x[keep]), (fa, fo, rm)
        assert np.array_equal(np.signbit(got[keep]), np.signbit(x[keep]))


def test_int32_to_int8_saturates_exactly():
    """INT32 -> INT8 COPY is exact in [-128, 127] and saturates elsewhere, also where the
    decoder rounds (|x| > 2**24)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.arange(-300, 300), rng.integers(I32_MIN, I32_MAX, 4000),
                        [I32_MIN, I32_MAX, 16777217, -16777217]])
    x = np.resize(x, (len(x) + LANES - 1) // LANES * LANES)
    for rm in RoundMode:
        got = _signed(_run(dict(emit=1, fmt_a=Format.INT32, fmt_o=Format.INT8, rmode=rm),
                           _words(x)), 8)
        assert np.array_equal(got, np.clip(x, -128, 127))


def test_decode_int32_rounds_as_numpy():
    x = np.array([16777217, 16777219, -16777217, I32_MAX, I32_MIN, 33554435], dtype=np.int64)
    got = decode(_words(x), Format.INT32).view(np.float32)
    assert np.array_equal(got, x.astype(np.int32).astype(np.float32))


# -- ISA: copy and requant on the reference simulator ---------------------------------------------

def test_refsim_copy_and_requant_from_psum():
    """``copy`` (INT32 -> INT32) and ``requant`` of PSUM words on the reference simulator:
    the copy is exact, the requantization equals numpy's; ``requant`` is ``act`` with
    ``func=ACT_FUNC_LINEAR, in_fmt=INT32, out_fmt=INT8`` (it disassembles to that)."""
    rng = np.random.default_rng(5)
    P, N = 4, 8
    vals = np.concatenate([[16777217, 19500001, I32_MAX, I32_MIN],
                           rng.integers(I32_MIN, I32_MAX, P * N - 4)]).reshape(P, N)
    scale, bias = _f32(2.0 ** -24 * 1.7), _f32(0.25)
    text = f"""
        li r1, 0
        li r2, 16
        li r3, 32
        li r4, {N}
        li r5, {scale}
        li r6, {bias}
        copy r2, r1, r0, r4, a_space=psum, in_fmt=int32, out_fmt=int32
        requant r3, r1, r5, r4, a_space=psum, rnd=rne
        halt
    """
    words = assemble(text)
    act = isa.decode(words[7])
    assert act["op"] == isa.Opcode.ACT
    assert "act r3, r1, r5, r4, func=2" in disassemble(words)
    sim = RefSim(words, partitions=P, cols=P, sbuf_depth=64, psum_depth=16, check=True)
    sim.psum[:, :N] = _words(vals)
    sim.run()
    assert not sim.error
    assert np.array_equal(_signed(sim.sbuf[:, 16:16 + N]), vals)
    q = _signed(sim.sbuf[:, 32:32 + N], 8)
    assert np.array_equal(q, requant_numpy(vals, scale, bias))
    assert (q == 127).any() and (q == -128).any()
