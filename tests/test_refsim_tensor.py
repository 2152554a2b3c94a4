"""The reference simulator's tensor-engine path (``sim.tensor.matmul_fast``, ``add_fast``,
``column_sums(fast=True)``) against the specification model (``sim.tensor.matmul``,
``sim.formats.fp32_add``), bit for bit, over every engine format with random, every-pattern and
special operands (zeros, subnormals, NaN, Inf, the largest finite value, overflowing products)
and running sums that go subnormal."""

import numpy as np
import pytest

from sim import formats
from sim.dtypes import Format
from sim.tensor import (ENGINE_FORMATS, add_fast, column_sums, matmul, matmul_fast,
                        random_operands)

SEED = 20261128

SHAPES = [(1, 1, 1, None), (1, 3, 4, 8), (8, 8, 40, 8), (5, 3, 17, 8), (128, 4, 9, None),
          (3, 8, 300, None), (16, 2, 3, 128)]


def _check(st, mv, fmt, rows, what):
    exp = matmul(st, mv, fmt, rows=rows)
    got = matmul_fast(st, mv, fmt, rows=rows)
    bad = np.argwhere(exp != got)
    assert bad.size == 0, (
        f"{what} {fmt.name} K={st.shape[0]} rows={rows}: {len(bad)} words differ, first at "
        f"(m, n) = {tuple(bad[0])}: spec {exp[tuple(bad[0])]:#010x}, "
        f"fast {got[tuple(bad[0])]:#010x}")


@pytest.mark.parametrize("fmt", ENGINE_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", ["normal", "wide", "special"])
def test_matmul_fast_is_the_spec(fmt, mode):
    rng = np.random.default_rng([SEED, int(fmt), len(mode)])
    for K, M, N, rows in SHAPES:
        st = random_operands(rng, fmt, (K, M), mode)
        mv = random_operands(rng, fmt, (K, N), mode)
        _check(st, mv, fmt, rows, mode)


def _bf16_near_min_normal(rng, shape):
    """BF16 values of random sign within a few binades of 2**-63 (products near 2**-126)."""
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    exp = rng.integers(127 - 64, 127 - 61, size=shape, dtype=np.uint64)
    man = rng.integers(0, 128, size=shape, dtype=np.uint64)
    return (sign << np.uint64(15)) | (exp << np.uint64(7)) | man


def test_running_sums_that_go_subnormal_are_flushed():
    """Products around 2**-126 with random signs: running sums become subnormal and are
    flushed after each addition (plain float32 sums differ from the spec here)."""
    rng = np.random.default_rng(SEED)
    K, M, N = 12, 8, 400
    st = _bf16_near_min_normal(rng, (K, M))
    mv = _bf16_near_min_normal(rng, (K, N))
    _check(st, mv, Format.BF16, 16, "near 2**-126")
    a = formats.decode(st, Format.BF16).view(np.float32).astype(np.float32)
    b = formats.decode(mv, Format.BF16).view(np.float32).astype(np.float32)
    with np.errstate(all="ignore"):
        plain = np.add.accumulate(a[:, :, None] * b[:, None, :], axis=0)[-1]
    assert np.any(plain.view(np.uint32) != matmul(st, mv, Format.BF16, rows=16)), \
        "the operands must exercise FTZ of the running sums"


@pytest.mark.parametrize("fmt", ENGINE_FORMATS, ids=lambda f: f.name)
def test_column_sums_fast(fmt):
    rng = np.random.default_rng([SEED, 7, int(fmt)])
    st = random_operands(rng, fmt, (6, 5), "special")
    mv = random_operands(rng, fmt, (6, 33), "special")
    exp = column_sums(st, mv, fmt, rows=8, cols=8)
    assert np.array_equal(exp, column_sums(st, mv, fmt, rows=8, cols=8, fast=True))


def test_add_fast_is_fp32_add():
    """Every class of FP32 pattern: random bits, plus zeros, subnormals, Inf, NaN and values
    whose sums overflow or cancel."""
    rng = np.random.default_rng(SEED)
    n = 200_000
    a = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF,
                        0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                        0x7F800001, 0x3F800000, 0xBF800000], dtype=np.uint32)
    pick = rng.random(n) < 0.3
    a = np.where(pick, rng.choice(special, n), a).astype(np.uint32)
    b = np.where(rng.random(n) < 0.3, rng.choice(special, n), b).astype(np.uint32)
    near = rng.random(n) < 0.2      # b close to -a: cancellation, subnormal differences
    b = np.where(near, (a ^ np.uint32(0x80000000)) + rng.integers(-3, 4, n).astype(np.uint32),
                 b).astype(np.uint32)
    exp = formats.fp32_add(a, b)
    got = add_fast(a, b, Format.BF16)
    bad = np.flatnonzero(exp != got)
    assert bad.size == 0, (f"{bad.size} sums differ, first {a[bad[0]]:#010x} + "
                           f"{b[bad[0]]:#010x}: spec {exp[bad[0]]:#010x}, fast {got[bad[0]]:#010x}")
    assert np.array_equal(add_fast(a, b, Format.INT8), formats.int32_add(a, b))


def _spec_record(sim, r, fmt):
    """A MATMUL record on the specification models, word by word: SBUF gathers, the column
    sums of ``sim.tensor.matmul``, then PSUM beat after beat."""
    from sim.dtypes import STORAGE_BITS
    mask = (1 << STORAGE_BITS[fmt]) - 1
    K, M, N = r["k"], r["m"], r["n"]
    st = np.array([[int(sim.sbuf[k, (r["stat_addr"] + m * r["stat_stride"]) % sim.sbuf_depth])
                    & mask for m in range(M)] for k in range(K)], dtype=np.uint64)
    mv = np.array([[int(sim.sbuf[k, (r["mov_addr"] + n * r["mov_stride"]) % sim.sbuf_depth])
                    & mask for n in range(N)] for k in range(K)], dtype=np.uint64)
    res = column_sums(st, mv, fmt, rows=sim.P, cols=sim.cols)
    psum = sim.psum.copy()
    add = formats.int32_add if fmt == Format.INT8 else formats.fp32_add
    for n in range(N):
        a = (r["psum_addr"] + n) % sim.psum_depth
        psum[:, a] = add(psum[:, a], res[:, n]) if r["accumulate"] else res[:, n]
    return psum


@pytest.mark.parametrize("fmt", ENGINE_FORMATS, ids=lambda f: f.name)
def test_refsim_matmul_record(fmt):
    """RefSim's MATMUL execution on random SBUF/PSUM contents (special values, strided and
    wrapping operands, PSUM writes that wrap and, with N > depth, overwrite themselves)."""
    from sim.refsim import RefSim
    rng = np.random.default_rng([SEED, 3, int(fmt)])
    sim = RefSim([0], partitions=4, cols=4, sbuf_depth=64, psum_depth=16)
    for trial in range(12):
        sim.sbuf[:] = random_operands(rng, Format.FP32 if fmt != Format.INT8 else fmt,
                                      sim.sbuf.shape, "special").astype(np.uint32)
        sim.sbuf[:] |= random_operands(rng, fmt, sim.sbuf.shape, "special").astype(np.uint32)
        sim.psum[:] = rng.integers(0, 1 << 32, sim.psum.shape, dtype=np.uint64)
        r = {"fmt": int(fmt), "k": int(rng.integers(1, 5)), "m": int(rng.integers(1, 5)),
             "n": int(rng.choice([1, 7, 16, 23])), "stat_addr": int(rng.integers(0, 64)),
             "stat_stride": int(rng.integers(0, 5)), "mov_addr": int(rng.integers(0, 64)),
             "mov_stride": int(rng.integers(1, 3)), "psum_addr": int(rng.integers(0, 16)),
             "accumulate": trial % 2}
        exp = _spec_record(sim, r, fmt)
        sim._matmul(r)
        assert np.array_equal(sim.psum, exp), (trial, r)
