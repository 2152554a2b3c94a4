"""Fused column accumulation (``accumulate="fused"``, ``docs/tensor.md``): the golden model
(``sim.tensor``) against exact sums of ml_dtypes-decoded operands (``fractions.Fraction``) within
the documented bound, and bit for bit against numpy's float32 rounding where no bit is dropped;
then the RTL (the fused PE, the column normaliser, a small array) against the golden model in
Amaranth's simulator."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from amaranth.sim import Simulator

from amaranth_tb import run_tensor_engine
from test_tensor_golden import ML_DTYPE
from rtl.tensor.engine import TensorEngine
from rtl.tensor.fused import ColumnNormaliser, FusedAdder
from rtl.tensor.fused_pe import OperandDecoder
from sim import formats
from sim.asm import assemble
from sim.config import CoreConfig
from sim.dtypes import Format
from sim.tensor import (ENGINE_FORMATS, FUSED_F, column_sums, fused_empty, fused_error_bound,
                        fused_normalise, fused_step, fused_width, matmul, matmul_fast,
                        random_operands)

FP_FORMATS = [f for f in ENGINE_FORMATS if f != Format.INT8]
SEED = 20261129

#: Significand bits of each format (hidden bit included).
SIG = {Format.BF16: 8, Format.FP16: 11, Format.FP8_E4M3: 4, Format.FP8_E5M2: 3,
       Format.FP8_E3M4: 5}


def as_float64(bits, fmt):
    """Decode bit patterns with ml_dtypes/numpy (independent of sim.formats)."""
    dt, ut = ML_DTYPE[fmt]
    return np.asarray(bits).astype(ut).view(dt).astype(np.float64)


def ref_product(a, b, fmt):
    """The product the spec names, from decoded operands: ``None`` for NaN, a float inf, or an
    exact Fraction (BF16 subnormal operands read as zero, products below 2**-126 are zero,
    at or above 2**128 Inf)."""
    if math.isnan(a) or math.isnan(b):
        return None
    if fmt == Format.BF16:
        a = 0.0 if abs(a) < 2.0 ** -126 else a
        b = 0.0 if abs(b) < 2.0 ** -126 else b
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return None
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    p = Fraction(a) * Fraction(b)
    if abs(p) < Fraction(2) ** -126:
        return Fraction(0)
    if abs(p) >= Fraction(2) ** 128:
        return math.inf if p > 0 else -math.inf
    return p


def check_against_exact(st, mv, fmt, out):
    """Every result of ``out = matmul(st, mv, fmt, accumulate="fused")`` against the exact sum
    within :func:`fused_error_bound`; returns the largest error in units of the bound."""
    a = as_float64(st, fmt)
    b = as_float64(mv, fmt)
    K = st.shape[0]
    worst = 0.0
    for i in range(st.shape[1]):
        for j in range(mv.shape[1]):
            ps = [ref_product(a[k, i], b[k, j], fmt) for k in range(K)]
            r = int(out[i, j])
            where = f"fmt={fmt.name} m={i} n={j} st={st[:, i]} mv={mv[:, j]} out={r:#010x}"
            pinf = any(isinstance(p, float) and p > 0 for p in ps)
            ninf = any(isinstance(p, float) and p < 0 for p in ps)
            if any(p is None for p in ps) or (pinf and ninf):
                assert r == 0x7FC00000, where
                continue
            if pinf or ninf:
                assert r == (0x7F800000 if pinf else 0xFF800000), where
                continue
            exact = sum(ps, Fraction(0))
            nz = [p for p in ps if p != 0]
            if not nz:
                assert r == 0, where
                continue
            max_exp = max(math.floor(math.log2(abs(p))) for p in nz) + 127
            if (r & 0x7F800000) == 0x7F800000:
                # Overflow: the exact sum lies beyond FP32's largest finite value's rounding.
                assert r & 0x7FFFFF == 0 and abs(exact) >= Fraction(2) ** 127, where
                continue
            value = Fraction(float(np.uint32(r).view(np.float32)))
            bound = Fraction(float(fused_error_bound(r, max_exp, K)))
            err = abs(value - exact)
            assert err <= bound, f"{where} err={float(err)} bound={float(bound)}"
            worst = max(worst, float(err / bound))
    return worst


def spread_operands(rng, fmt, shape):
    """Normal values with any exponent of the format (wide exponent spread), a few zeros."""
    spec = formats.float_spec(fmt)
    top = (1 << spec.exp_bits) - 1
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    exp = rng.integers(1, top, size=shape, dtype=np.uint64)
    man = rng.integers(0, 1 << spec.man_bits, size=shape, dtype=np.uint64)
    out = (sign << np.uint64(spec.bits - 1)) | (exp << np.uint64(spec.man_bits)) | man
    return np.where(rng.random(size=shape) < 0.1, 0, out).astype(np.uint64)


def cancelling_operands(rng, fmt, K, M, N):
    """Pairs of rows whose products cancel exactly, plus one small row: the sum is the small
    row's product, far below the cancelled terms."""
    st = random_operands(rng, fmt, (K, M))
    mv = random_operands(rng, fmt, (K, N))
    spec = formats.float_spec(fmt)
    sign = np.uint64(1 << (spec.bits - 1))
    for k in range(0, K - 1, 2):
        st[k + 1] = st[k]
        mv[k + 1] = mv[k] ^ sign
    return st, mv


@pytest.mark.parametrize("fmt", FP_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", ["normal", "special", "wide", "spread", "cancel"])
def test_fused_within_bound(fmt, mode):
    rng = np.random.default_rng(SEED + 7 * FP_FORMATS.index(fmt) + len(mode))
    K, M, N = 8, 6, 20
    if mode == "spread":
        st, mv = spread_operands(rng, fmt, (K, M)), spread_operands(rng, fmt, (K, N))
    elif mode == "cancel":
        st, mv = cancelling_operands(rng, fmt, K, M, N)
    else:
        st, mv = random_operands(rng, fmt, (K, M), mode), random_operands(rng, fmt, (K, N), mode)
    out = matmul(st, mv, fmt, accumulate="fused")
    check_against_exact(st, mv, fmt, out)


def test_fused_bound_is_reached():
    """The truncation term matters: products far below the running maximum lose bits, and
    the error against the exact sum exceeds half an ulp somewhere (the bound is not vacuous)."""
    rng = np.random.default_rng(SEED)
    fmt = Format.BF16
    st, mv = spread_operands(rng, fmt, (8, 16)), spread_operands(rng, fmt, (8, 64))
    out = matmul(st, mv, fmt, accumulate="fused")
    worst = check_against_exact(st, mv, fmt, out)
    assert 0.0 < worst <= 1.0


def ftz_f32(x):
    """float64 -> FP32 bits: numpy's RNE rounding, then subnormals flushed to zeros."""
    u = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).copy()
    sub = (u & 0x7F800000) == 0
    u[sub] &= np.uint32(0x80000000)
    return u


@pytest.mark.parametrize("fmt", FP_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("K", [1, 2, 8, 16])
def test_fused_exact_when_no_bit_is_dropped(fmt, K):
    """Products whose exponents span at most ``F + 1 - 2 * sig`` binades: no alignment drops a
    bit, so the result is the float64 sum (exact here) rounded once to FP32 with FTZ."""
    rng = np.random.default_rng(SEED + K)
    spec = formats.float_spec(fmt)
    span = (FUSED_F + 1 - 2 * SIG[fmt]) // 2          # each operand's exponent range
    lo = max(1, spec.bias - span // 2)
    shape_st, shape_mv = (K, 5), (K, 40)

    def ops(shape):
        sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
        exp = rng.integers(lo, lo + span // 2 + 1, size=shape, dtype=np.uint64)
        man = rng.integers(0, 1 << spec.man_bits, size=shape, dtype=np.uint64)
        return (sign << np.uint64(spec.bits - 1)) | (exp << np.uint64(spec.man_bits)) | man

    st, mv = ops(shape_st), ops(shape_mv)
    out = matmul(st, mv, fmt, accumulate="fused")
    exact = as_float64(st, fmt).T @ as_float64(mv, fmt)      # exact: < 53 significant bits
    want = ftz_f32(exact)
    want[exact == 0] = 0                                      # S == 0 gives +0
    assert np.array_equal(out, want), (fmt, K)


@pytest.mark.parametrize("fmt", FP_FORMATS, ids=lambda f: f.name)
def test_fused_one_row_is_the_product(fmt):
    """K = 1: the product is exact in FP32, so the fused sum is the product (a -0 becomes +0)."""
    rng = np.random.default_rng(SEED + 3)
    st = random_operands(rng, fmt, (1, 8), "special")
    mv = random_operands(rng, fmt, (1, 30), "special")
    want = formats.mul_exact(st[0][:, None], mv[0][None, :], fmt).astype(np.uint32)
    want[want == 0x80000000] = 0
    assert np.array_equal(matmul(st, mv, fmt, accumulate="fused"), want)


def test_fused_same_exponent_equals_fp32_when_exact():
    """Small integers: every partial sum is exact in FP32, so fused and fp32 agree."""
    rng = np.random.default_rng(SEED + 5)
    vals = np.array([0x3F80, 0x4000, 0x4040, 0xBF80, 0xC000], np.uint64)   # BF16 +-1, 2, 3
    st, mv = rng.choice(vals, size=(8, 4)), rng.choice(vals, size=(8, 9))
    a = matmul(st, mv, Format.BF16)
    b = matmul(st, mv, Format.BF16, accumulate="fused")
    a[a == 0x80000000] = 0
    assert np.array_equal(a, b)


def test_int8_unchanged():
    rng = np.random.default_rng(SEED + 9)
    st = rng.integers(0, 256, size=(8, 5), dtype=np.uint64)
    mv = rng.integers(0, 256, size=(8, 11), dtype=np.uint64)
    want = matmul(st, mv, Format.INT8)
    assert np.array_equal(matmul(st, mv, Format.INT8, accumulate="fused"), want)
    assert np.array_equal(matmul_fast(st, mv, Format.INT8, accumulate="fused"), want)


def test_rows_padding_and_fast_path():
    rng = np.random.default_rng(SEED + 11)
    fmt = Format.FP8_E4M3
    st = random_operands(rng, fmt, (5, 3), "special")
    mv = random_operands(rng, fmt, (5, 7), "special")
    a = matmul(st, mv, fmt, accumulate="fused")
    assert np.array_equal(matmul(st, mv, fmt, rows=8, accumulate="fused"), a)
    assert np.array_equal(matmul_fast(st, mv, fmt, rows=8, accumulate="fused"), a)
    full = column_sums(st, mv, fmt, rows=8, cols=4, fast=True, accumulate="fused")
    assert np.array_equal(full[:3], a)


@pytest.mark.parametrize("bad", ["FP32", "fp16", None, 1])
def test_accumulate_checked(bad):
    st = np.zeros((2, 2), np.uint64)
    for f in (matmul, matmul_fast):
        with pytest.raises(ValueError, match=r"accumulate must be one of fp32, fused, not"):
            f(st, st, Format.BF16, accumulate=bad)


def test_width():
    assert fused_width(8) == FUSED_F + 5 == 31
    assert fused_width(16) == 32
    assert fused_width(2) == FUSED_F + 3
    assert fused_width(512) == 37


# -- RTL: rtl/tensor/fused.py, rtl/tensor/pe.py, rtl/tensor/array.py -----------------------


def pack_state(state, W, is_int=0):
    E, S, nan, pinf, ninf = (int(v) for v in state)
    return ((S & ((1 << W) - 1)) | E << W | nan << (W + 8) | pinf << (W + 9)
            | ninf << (W + 10) | is_int << (W + 11))


def column_cases(rng, rows, n):
    """``n`` (states before each row, products of each row) columns of ``rows`` products
    from every FP format and mode (specials, subnormals, spread, cancellation)."""
    cases = []
    for i in range(n):
        fmt = FP_FORMATS[i % len(FP_FORMATS)]
        mode = ["normal", "special", "wide", "spread", "cancel"][(i // 5) % 5]
        if mode == "spread":
            a, b = spread_operands(rng, fmt, (rows, 1)), spread_operands(rng, fmt, (rows, 1))
        elif mode == "cancel":
            a, b = cancelling_operands(rng, fmt, rows, 1, 1)
        else:
            a, b = random_operands(rng, fmt, (rows, 1), mode), random_operands(
                rng, fmt, (rows, 1), mode)
        p = formats.mul_exact(a, b, fmt).astype(np.uint32)[:, 0]
        state = fused_empty(())
        states = []
        for k in range(rows):
            states.append(state)
            state = fused_step(state, p[k])
        states.append(state)
        cases.append((states, p))
    return cases


def run_pipeline(dut, stages, vectors, drive, read, expect, seed):
    """Drive ``vectors`` through ``dut`` one per cycle with random clock-enable stalls and check
    that the output is ``expect`` of the vector presented ``stages`` enabled edges earlier."""
    rng = random.Random(seed)

    async def bench(ctx):
        history = []
        i = 0
        while i < len(vectors) + stages:
            v = vectors[min(i, len(vectors) - 1)]
            en = int(rng.random() < 0.75)
            ctx.set(dut.en, en)
            drive(ctx, v)
            src = v if stages == 0 else (history[-stages] if len(history) >= stages else None)
            if src is not None:
                got = read(ctx)
                assert got == expect(src), f"seed {seed} vector {src}: {got:#x}"
            await ctx.tick()
            if en:
                history.append(v)
                i += 1

    sim = Simulator(dut)
    if stages:
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
    else:
        async def comb(ctx):
            ctx.tick = lambda: ctx.delay(1e-6)
            await bench(ctx)
        sim.add_testbench(comb)
    sim.run()


@pytest.mark.parametrize("stages", [0, 1, 3, 4])
def test_fused_adder_matches_golden(stages):
    W = fused_width(8)
    rng = np.random.default_rng(SEED + 100 + stages)
    vectors = []
    for states, p in column_cases(rng, 8, 60):
        for k in range(8):
            vectors.append((pack_state(states[k], W), int(p[k]), 0,
                            pack_state(states[k + 1], W)))
    # INT8 products (INT32 bits) ride in S.
    prng = random.Random(SEED)
    for _ in range(100):
        s = prng.randrange(-(1 << 17), 1 << 17)
        q = prng.randrange(-(1 << 14), (1 << 14) + 1)
        vectors.append((pack_state((0, s, 0, 0, 0), W, 1), q & 0xFFFFFFFF, 1,
                        pack_state((0, s + q, 0, 0, 0), W, 1)))
    dut = FusedAdder(W, stages)

    def drive(ctx, v):
        ctx.set(dut.psum_in.as_value(), v[0])
        ctx.set(dut.product, v[1])
        ctx.set(dut.is_int, v[2])

    run_pipeline(dut, stages, vectors, drive, lambda ctx: ctx.get(dut.psum_out.as_value()),
                 lambda v: v[3], SEED + stages)


@pytest.mark.parametrize("stages", [0, 1, 2])
def test_column_normaliser_matches_golden(stages):
    W = fused_width(8)
    rng = np.random.default_rng(SEED + 200 + stages)
    vectors = []
    for states, _ in column_cases(rng, 8, 100):
        for st in states[1:]:
            vectors.append((pack_state(st, W), int(fused_normalise(st))))
    # Extremes of S and E: overflow to Inf, FTZ, ties, the most negative S.
    prng = random.Random(SEED + stages)
    for _ in range(600):
        s = prng.choice([prng.randrange(-(1 << (W - 1)), 1 << (W - 1)), -(1 << (W - 1)),
                         (1 << (W - 1)) - 1, prng.randrange(-64, 64),
                         prng.randrange(1 << 24) << prng.randrange(W - 25),
                         ((1 << 24) | 1) << 1, (0xFFFFFF << 2) | 2])
        e = prng.choice([prng.randrange(256), 0, 1, 2, 254, prng.randrange(20), 250])
        flags = prng.choice([(0, 0, 0)] * 6 + [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)])
        st = (e, s) + flags
        vectors.append((pack_state(st, W), int(fused_normalise(tuple(np.asarray(v)
                                                                      for v in st)))))
    for _ in range(100):
        s = prng.randrange(-(1 << 20), 1 << 20)
        vectors.append((pack_state((0, s, 0, 0, 0), W, 1), s & 0xFFFFFFFF))
    dut = ColumnNormaliser(W, stages)

    def drive(ctx, v):
        ctx.set(dut.psum.as_value(), v[0])

    run_pipeline(dut, stages, vectors, drive, lambda ctx: ctx.get(dut.o), lambda v: v[1],
                 SEED + 10 + stages)


def test_fused_units_checked():
    with pytest.raises(ValueError, match=r"width must be an integer from 28 to 40, not 27"):
        FusedAdder(FUSED_F + 1)
    with pytest.raises(ValueError, match=r"stages must be an integer from 0 to 2, not 3"):
        ColumnNormaliser(31, 3)
    with pytest.raises(ValueError, match=r"exp_bias must be an integer from 0 to 127, not 128"):
        OperandDecoder([Format.BF16], exp_bias=128)


def fused_program(rng, formats, rows, cols, count):
    """Tiles of every format in ``formats`` in turn, in every operand mode."""
    prog = []
    fmts = sorted(formats)
    for i in range(count):
        fmt = fmts[i % len(fmts)]
        K, M, N = int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1)), \
            int(rng.integers(1, 9))
        if fmt == Format.INT8:
            st, mv = random_operands(rng, fmt, (K, M)), random_operands(rng, fmt, (K, N))
        else:
            mode = ["normal", "special", "wide", "spread", "cancel"][(i // len(fmts)) % 5]
            if mode == "spread":
                st, mv = spread_operands(rng, fmt, (K, M)), spread_operands(rng, fmt, (K, N))
            elif mode == "cancel":
                st, mv = cancelling_operands(rng, fmt, K, M, N)
            else:
                st, mv = (random_operands(rng, fmt, (K, M), mode),
                          random_operands(rng, fmt, (K, N), mode))
        prog.append((fmt, st, mv))
    return prog


@pytest.mark.parametrize("ms,as_,formats", [
    (0, 0, (Format.BF16, Format.INT8)),
    (1, 2, (Format.BF16, Format.FP8_E4M3, Format.FP8_E5M2)),
    (4, 3, (Format.BF16, Format.FP8_E4M3, Format.FP8_E5M2)),
    (2, 1, tuple(ENGINE_FORMATS)),
], ids=["m0a0-bf16-int8", "m1a2-core8c", "m4a3-core8c", "m2a1-all"])
def test_fused_engine_amaranth_sim(ms, as_, formats):
    """A 3x3 fused engine (small array, every format it has) bit-exact against the golden
    model with stalls and idles."""
    seed = SEED + 10 * ms + as_
    rng = np.random.default_rng(seed)
    dut = TensorEngine(3, 3, formats, mul_stages=ms, add_stages=as_, accumulate="fused")
    assert dut.norm_stages == min(as_, 2)
    assert dut.latency == ms + 3 * max(as_, 1) + min(as_, 2) + 3
    run_tensor_engine(dut, fused_program(rng, formats, 3, 3, 4 * len(formats)), seed,
                      accumulate="fused")


def edge_operands(rng, shape, exps):
    """BF16 bit patterns with a random sign and mantissa and an exponent field from
    ``exps``."""
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64) << 15
    exp = rng.choice(np.array(exps, dtype=np.uint64), size=shape)
    return sign | (exp << 7) | rng.integers(0, 128, size=shape, dtype=np.uint64)


@pytest.mark.parametrize("ms,as_", [(4, 3), (1, 0)], ids=["m4a3", "m1a0"])
def test_fused_engine_product_range_edges(ms, as_):
    """BF16 products at FP32's bounds (``2**-127 .. 2**-125``: a zero below ``2**-126``;
    ``2**127 .. 2**129``: an Inf from ``2**128``) in every row, the top row included, through
    a 3x3 fused engine, bit-exact against the golden model (whose bounds are
    ``sim.formats.mul_exact``'s)."""
    seed = SEED + 7 * ms + as_
    rng = np.random.default_rng(seed)
    prog = []
    for lo, hi in (((63, 64), (63, 64)), ((190, 191), (190, 191)), ((63, 191), (63, 64))):
        K, M, N = 3, 3, 6
        prog.append((Format.BF16, edge_operands(rng, (K, M), lo),
                     edge_operands(rng, (K, N), hi)))
    dut = TensorEngine(3, 3, (Format.BF16, Format.FP8_E4M3), mul_stages=ms, add_stages=as_,
                       accumulate="fused")
    run_tensor_engine(dut, prog, seed, accumulate="fused")


def test_fused_parameter_checked():
    with pytest.raises(ValueError, match=r"accumulate must be one of fp32, fused, not 'fp64'"):
        TensorEngine(2, 2, {Format.BF16}, accumulate="fp64")
    # INT8-only: fused changes nothing.
    e = TensorEngine(2, 2, {Format.INT8}, accumulate="fused")
    assert not e.fused and e.norm_stages == 0 and e.accumulate == "fused"


# -- the core's parameter: CoreConfig.tensor_accumulate, RefSim, NeuronCore ------------------


def test_core_config_field():
    assert CoreConfig().tensor_accumulate == "fp32"
    cfg = CoreConfig(rows=8, tensor_accumulate="fused")
    assert cfg.name == CoreConfig(rows=8).name + "-afused"
    assert CoreConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match=r"^tensor_accumulate must be one of fp32, fused, "
                                         r"not 'fp64'$"):
        CoreConfig(tensor_accumulate="fp64")


def test_neuron_core_takes_it():
    import gc
    import warnings
    from amaranth.hdl import UnusedElaboratable
    from rtl.core.top import NeuronCore
    cfg = CoreConfig(rows=4, tensor_accumulate="fused")
    with warnings.catch_warnings():          # (parameters only; never elaborated)
        warnings.simplefilter("ignore", UnusedElaboratable)
        core = NeuronCore.from_config(cfg)
        assert core.config()["tensor_accumulate"] == "fused"
        assert core.core_config() == cfg
        with pytest.raises(ValueError, match=r"^tensor_accumulate must be one of fp32, fused"):
            NeuronCore(tensor_accumulate="FP32")
        del core
        gc.collect()


@pytest.mark.parametrize("accumulate", ["fp32", "fused"])
def test_refsim_uses_it(accumulate):
    """A MATMUL then an accumulating one in the reference simulator: PSUM holds
    ``fp32_add(column_sums, column_sums)`` of the configured accumulation."""
    rng = np.random.default_rng(SEED + 13)
    K, M, N, P = 8, 6, 10, 8
    fmt = Format.BF16
    st, mv = spread_operands(rng, fmt, (K, M)), spread_operands(rng, fmt, (K, N))
    prog = f"""
        li r1, 0x10
        li r2, 0x40
        li r3, 0x5
        li r4, {N}
        matmul r3, r1, r2, r4, k={K}, m={M}, fmt=bf16
        matmul r3, r1, r2, r4, k={K}, m={M}, fmt=bf16, accumulate=1
        halt
    """
    cfg = CoreConfig(rows=P, tensor_accumulate=accumulate)
    s = cfg.refsim(assemble(prog), check=False, races=False)
    s.sbuf[:K, 0x10:0x10 + M] = st
    s.sbuf[:K, 0x40:0x40 + N] = mv
    s.run()
    col = column_sums(st, mv, fmt, rows=P, cols=P, accumulate=accumulate)[:M]
    want = formats.fp32_add(col, col)
    assert np.array_equal(s.psum[:M, 5:5 + N], want)
    other = column_sums(st, mv, fmt, rows=P, cols=P,
                        accumulate="fused" if accumulate == "fp32" else "fp32")[:M]
    assert not np.array_equal(col, other)        # the operands tell the two apart
