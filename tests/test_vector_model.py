"""The vector engine's golden model (sim/vector.py) against references nobody here wrote:
numpy float32 (with DAZ/FTZ applied) for the ALU, numpy float64 for the LUT functions and
range reductions; plus the command layout and the cfg map."""

import math

import numpy as np
import pytest

from sim.dtypes import Format, RoundMode
from sim.lut import compile_table
from sim.tables import SHIPPED, table
from sim.vector import (CMD_BITS, CMD_FIELDS, AccOp, AluOp, Hdr, Src, Status,
                        VectorEngineModel, acc_identity, alu, coef_addr, desc_addr, hdr_addr,
                        ldexp_ftz, lut_eval, make_cmd, mulz, pack_cmd, status_addr, unpack_cmd)

RNG = np.random.default_rng(20261122)


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def daz(x):
    x = np.asarray(x, dtype=np.uint32)
    return np.where((x & 0x7F800000) == 0, x & 0x80000000, x).astype(np.uint32)


def ftz_ref(values):
    b = bits(values)
    return daz(b)


EDGES = np.array([0, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x00800000,
                  0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                  0x40490FDB, 0x3A83126F, 0x42C80000], dtype=np.uint32)


def operands(n=4000):
    a = RNG.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    ea, eb = np.meshgrid(EDGES, EDGES)
    return np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])


def same(got, exp):
    """Bitwise equal, any NaN matching the canonical NaN."""
    exp = np.asarray(exp, dtype=np.uint32)
    nan = np.isnan(f32(exp))
    return np.where(nan, got == 0x7FC00000, got == exp)


@pytest.mark.parametrize("op", [AluOp.ADD, AluOp.SUB, AluOp.RSUB, AluOp.MUL])
def test_alu_arith_vs_numpy(op):
    a, b = operands()
    x, y = f32(daz(a)), f32(daz(b))
    with np.errstate(all="ignore"):
        ref = {AluOp.ADD: x + y, AluOp.SUB: x - y, AluOp.RSUB: y - x, AluOp.MUL: x * y}[op]
    exp = ftz_ref(ref)
    got = alu(op, a, b)
    assert np.all(same(got, exp)), [hex(v) for v in a[~same(got, exp)][:4]]


@pytest.mark.parametrize("op", [AluOp.MAX, AluOp.MIN, AluOp.EQ, AluOp.NE, AluOp.LT, AluOp.LE,
                                AluOp.GT, AluOp.GE])
def test_alu_compare_vs_numpy(op):
    a, b = operands()
    x, y = f32(daz(a)), f32(daz(b))
    with np.errstate(all="ignore"):
        if op in (AluOp.MAX, AluOp.MIN):
            ref = np.maximum(x, y) if op == AluOp.MAX else np.minimum(x, y)
            got = alu(op, a, b)
            ok = same(got, bits(ref))
            # numpy's choice for equal zeros differs; ours: +0 wins MAX, -0 wins MIN
            z = (f32(got) == 0) & (x == 0) & (y == 0)
            want = np.where(op == AluOp.MAX, (daz(a) & daz(b)) >> 31, (daz(a) | daz(b)) >> 31)
            assert np.all(ok | z)
            assert np.all(np.where(z, (got >> 31) == want, True))
            return
        ref = {AluOp.EQ: x == y, AluOp.NE: x != y, AluOp.LT: x < y, AluOp.LE: x <= y,
               AluOp.GT: x > y, AluOp.GE: x >= y}[op]
    got = alu(op, a, b)
    assert np.array_equal(got, np.where(ref, 0x3F800000, 0).astype(np.uint32))


def test_bypass_keeps_bits():
    a, b = operands(100)
    assert np.array_equal(alu(AluOp.BYPASS, a, b), a)


def test_mulz_and_ldexp():
    inf = np.uint32(0x7F800000)
    assert mulz(0, inf) == 0 and mulz(0x80000000, inf) == 0x80000000
    assert mulz(0x3F800000, inf) == inf
    x = RNG.uniform(-4, 4, 1000).astype(np.float32)
    k = RNG.integers(-140, 140, 1000)
    got = f32(ldexp_ftz(bits(x), k)).astype(np.float64)
    ref = np.ldexp(x.astype(np.float64), k)
    ref = np.where(np.abs(ref) < 2.0 ** -126, 0.0, ref)
    ref = np.where(np.abs(ref) > 3.4028234663852886e38, np.copysign(np.inf, ref), ref)
    assert np.array_equal(got, ref)


def test_cmd_layout():
    assert CMD_BITS == sum(w for _, w in CMD_FIELDS) == 110
    fields = dict(op0=AluOp.GE, op1=AluOp.MIN, src0=Src.TENSOR, src1=Src.LANE, lut=1, bank=1,
                  acc_op=AccOp.MIN, acc_reset=1, emit=1, emit_acc=1, fmt_a=Format.INT32,
                  fmt_b=Format.FP8_E3M4, fmt_o=Format.FP16, rmode=RoundMode.SR, count=65535,
                  imm0=0xDEADBEEF, imm1=0x12345678)
    assert unpack_cmd(pack_cmd(**fields)) == {k: int(v) for k, v in fields.items()}
    assert pack_cmd(op0=1) == 1 and pack_cmd(op1=1) == 16
    assert make_cmd()["count"] == 0
    with pytest.raises(ValueError, match="command field count must be in 0..65535, not 65536"):
        pack_cmd(count=65536)
    with pytest.raises(ValueError, match="unknown command fields: bogus"):
        pack_cmd(bogus=1)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_tables_vs_float64(name):
    """Every shipped table (512 entries) against its float64 reference on random FP32 inputs in
    its domain: relative error below 2**-12 where the result is a normal number."""
    spec = SHIPPED[name]
    lo, hi = spec.domain
    lo, hi = max(lo, -1e30), min(hi, 1e30)
    if lo > 0:
        x = np.exp(RNG.uniform(math.log(max(lo, 1e-30)), math.log(hi), 3000))
    else:
        x = np.concatenate([RNG.uniform(lo, hi, 1500), RNG.uniform(-8, 8, 1500)])
        x = x[(x >= lo) & (x <= hi)]
    x = x.astype(np.float32)
    out, _ = lut_eval(bits(x), table(name).state())
    ref = (spec.reference or spec.fn)(x.astype(np.float64))
    got = f32(out).astype(np.float64)
    ok = np.abs(ref) > 1e-30
    rel = np.abs(got - ref)[ok] / np.abs(ref)[ok]
    assert rel.max() < 2.0 ** -12, (name, float(rel.max()), float(x[ok][np.argmax(rel)]))


def test_range_reduction_specials():
    specials = bits(np.array([0.0, -0.0, np.inf, -np.inf, -1.0, np.nan], dtype=np.float32))
    out = {n: lut_eval(specials, table(n).state())[0] for n in
           ("reciprocal", "rsqrt", "sqrt", "log", "exp")}
    inf, ninf, nan = 0x7F800000, 0xFF800000, 0x7FC00000
    assert list(out["reciprocal"][:4]) == [inf, ninf, 0, 0x80000000]
    assert list(out["rsqrt"]) == [inf, ninf, 0, nan, nan, nan]
    assert list(out["sqrt"]) == [0, 0x80000000, inf, nan, nan, nan]
    assert list(out["log"]) == [ninf, ninf, inf, nan, nan, nan]
    assert list(out["exp"][:4]) == [0x3F800000, 0x3F800000, inf, 0]
    assert out["exp"][5] == nan
    # exp over/underflow: |w| >= 128 binades
    big = bits(np.array([89.0, -104.0, 88.0, -87.0], dtype=np.float32))
    e = f32(lut_eval(big, table("exp").state())[0])
    assert e[0] == np.inf and e[1] == 0.0
    assert np.isclose(e[2], math.exp(88.0), rtol=1e-5) and np.isclose(e[3], math.exp(-87.0),
                                                                         rtol=1e-5)


def test_saturation_and_extrapolation():
    x = bits(np.array([1e30, -1e30, 100.0, -100.0, np.inf, -np.inf], dtype=np.float32))
    assert list(f32(lut_eval(x, table("tanh").state())[0])) == [1, -1, 1, -1, 1, -1]
    relu = f32(lut_eval(x, table("relu").state())[0])
    assert list(relu) == [np.float32(1e30), 0, 100, 0, np.inf, 0]
    gelu = f32(lut_eval(x, table("gelu").state())[0])
    assert gelu[2] == 100 and gelu[4] == np.inf and gelu[5] == 0


def test_identity_is_exact():
    x = RNG.integers(0, 2 ** 32, 5000, dtype=np.uint64).astype(np.uint32)
    x = x[~np.isnan(f32(x))]
    out, _ = lut_eval(x, table("identity").state())
    want = daz(x)
    want = np.where(want == 0x80000000, 0, want)      # -0 -> +0 (0 + -0)
    assert np.array_equal(out, want)


def test_cfg_map_model():
    m = VectorEngineModel(4, depth=64)
    tab = compile_table(SHIPPED["sigmoid"], depth=64, budget=48)
    for a, d in tab.writes(1):
        m.cfg_write(a, d)
    assert m.error == 0
    for a, d in tab.writes(1):
        assert m.cfg_read(a) == d
    st = tab.state()
    assert np.array_equal(m.banks[1].coef[:tab.used], st.coef[:tab.used])
    assert m.cfg_read(status_addr(Status.DEPTH)) == 64
    for bad in (coef_addr(0, 64, 0), coef_addr(0, 1, 3), desc_addr(0, 1, 31) + 1,
                hdr_addr(0, Hdr.POST) + 1, 0x3000, status_addr(5)):
        m.error = 0
        m.cfg_write(bad, 1)
        assert m.error == 1, hex(bad)
        m.cfg_write(status_addr(Status.ERROR), 0)
        assert m.error == 0
        assert m.cfg_read(bad) == 0 and m.error == 1


def test_engine_model_reduction_and_acc():
    m = VectorEngineModel(4, depth=64)
    x = RNG.uniform(-10, 10, (16, 4)).astype(np.float32)
    out = m.execute(make_cmd(acc_op=AccOp.SUM, acc_reset=1, emit_acc=1, count=16), bits(x))
    ref = np.zeros(4, dtype=np.float32)
    for row in x:
        ref = ref + row                      # float32 sequential sum, RNE
    assert np.array_equal(out[0], bits(ref))
    out = m.execute(make_cmd(acc_op=AccOp.MAX, acc_reset=1, emit_acc=1, count=16), bits(x))
    assert np.array_equal(out[0], bits(x.max(axis=0)))
    assert acc_identity(AccOp.MIN) == 0x7F800000
    # accumulate across instructions without reset
    m.execute(make_cmd(acc_op=AccOp.SUM, acc_reset=1, count=16), bits(x))
    out = m.execute(make_cmd(acc_op=AccOp.SUM, emit_acc=1, count=16), bits(x))
    ref = np.zeros(4, dtype=np.float32)
    for row in np.concatenate([x, x]):
        ref = ref + row
    assert np.array_equal(out[0], bits(ref))


def test_engine_model_activation_matches_lut():
    m = VectorEngineModel(4, depth=512)
    tab = table("silu")
    m.load_table(0, tab.writes(0))
    x = RNG.uniform(-6, 6, (8, 4)).astype(np.float32)
    out = m.execute(make_cmd(op0=AluOp.MUL, op1=AluOp.ADD, imm0=bits(np.float32(2.0)),
                             imm1=bits(np.float32(-1.0)), lut=1, emit=1, count=8), bits(x))
    z = (x * np.float32(2.0)) - np.float32(1.0)
    ref = z / (1 + np.exp(-z.astype(np.float64)))
    assert np.allclose(f32(np.array(out)), ref, rtol=1e-5, atol=1e-6)
    assert m.counters[Status.HITS] == 32
