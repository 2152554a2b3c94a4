"""The vector engine's adder-free and DSP-lean datapath pieces (``rtl/vector/mul.py``,
``rtl.vector.lut.exp2_reduce`` / ``segment_offset``) against the FP32 operations of
``sim.formats`` that the golden model ``sim.vector.lut_eval`` uses in their place, and the
pipelined lane multiplier and ALU against their golden functions under a random clock enable,
on the Amaranth simulator: edge cases plus seeded random operands."""

import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Signal, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from rtl.arith.common import delay
from rtl.vector.alu import VectorAlu
from rtl.vector.lane_acc import AccUnit
from rtl.vector.lut import exp2_reduce, int_to_f32, segment_offset
from rtl.vector.mul import LaneMultiplier
from sim.formats import fp32_add, fp32_mul
from sim.vector import AccOp, AluOp, _int_to_f32, acc_identity, acc_update, alu, mulz

SEED = 20261122
EDGES = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000,
         0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x40490FDB,
         0x3F7FFFFF, 0x3FFFFFFF, 0x00FFFFFF, 0x1F800000, 0x20000000, 0x5F800000, 0x3F000000]


def simulate(dut, inputs, outputs, vectors):
    """Drive ``inputs`` (port names) with each row of ``vectors``; collect ``outputs``."""
    got = []

    async def bench(ctx):
        for row in vectors:
            for name, value in zip(inputs, row):
                ctx.set(getattr(dut, name), int(value))
            got.append([ctx.get(getattr(dut, name)) for name in outputs])

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.uint64)


def simulate_pipelined(dut, inputs, vectors, latency, rng):
    """Clock ``dut`` with a random ``en`` (70 % high), presenting the next row of ``vectors``
    on each enabled cycle (random values on the others, which must not matter); returns ``o``
    after the enabled edge that completes each row, ``latency`` enabled edges after it was
    presented. Also checks that ``o`` holds while ``en`` is low."""
    vectors = [list(map(int, row)) for row in vectors]
    got = []

    async def bench(ctx):
        nxt = 0
        enabled = 0
        prev = ctx.get(dut.o)
        while len(got) < len(vectors):
            en = bool(rng.random() < 0.7)
            row = vectors[nxt] if en and nxt < len(vectors) else \
                [int(rng.integers(0, 2 ** 32)) for _ in inputs]
            ctx.set(dut.en, en)
            for name, value in zip(inputs, row):
                ctx.set(getattr(dut, name), value)
            await ctx.tick()
            o = ctx.get(dut.o)
            if en:
                nxt += 1
                enabled += 1
                if enabled >= latency:
                    got.append(o)
            else:
                assert o == prev, "o changed while en was low"
            prev = o

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.uint64)


def near_underflow(rng, n):
    """Operand pairs whose product lands around 2**-126 (FTZ and round-up boundary)."""
    ea = rng.integers(1, 127, n)
    eb = 127 + 127 - 1 - ea + rng.integers(-1, 2, n) - 126
    eb = np.clip(eb, 1, 254)
    ma = rng.integers(0, 1 << 23, n) | np.where(rng.random(n) < 0.3, 0x7FFFF0, 0)
    mb = rng.integers(0, 1 << 23, n) | np.where(rng.random(n) < 0.3, 0x7FFFF0, 0)
    a = (ea << 23) | (ma & 0x7FFFFF)
    b = (eb << 23) | (mb & 0x7FFFFF)
    return a, b


@pytest.mark.parametrize("logic_bits", [0, 6, 24])
def test_lane_multiplier_vs_fp32_mul(logic_bits):
    rng = np.random.default_rng(SEED + logic_bits)
    ea, eb = np.meshgrid(EDGES, EDGES)
    ra = rng.integers(0, 2 ** 32, 1500, dtype=np.uint64)
    rb = rng.integers(0, 2 ** 32, 1500, dtype=np.uint64)
    ua, ub = near_underflow(rng, 1000)
    a = np.concatenate([ea.ravel(), ra, ua]).astype(np.uint32)
    b = np.concatenate([eb.ravel(), rb, ub]).astype(np.uint32)
    got = simulate(LaneMultiplier(logic_bits=logic_bits), ["a", "b"], ["o"],
                   zip(a, b))[:, 0]
    exp = fp32_mul(a, b)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]


@pytest.mark.parametrize("stages", [0, 4])
def test_lane_multiplier_corner_logic(stages):
    """Three MULT18X18D pieces and the top 6 x 6 piece in logic: bit-exact with
    ``fp32_mul`` (edge pairs, random pairs, products near the underflow threshold and
    significands with every top-six-bit pattern)."""
    rng = np.random.default_rng(SEED + 40 + stages)
    ea, eb = np.meshgrid(EDGES, EDGES)
    ua, ub = near_underflow(rng, 300)
    top = np.arange(64, dtype=np.uint64)
    ta, tb = (v.ravel() for v in np.meshgrid(top, top))
    ta = (ta << 18 & 0x7FFFFF) | (rng.integers(100, 150, ta.size, dtype=np.uint64) << 23)
    tb = (tb << 18 & 0x7FFFFF) | (rng.integers(100, 150, tb.size, dtype=np.uint64) << 23)
    ta |= rng.integers(0, 1 << 18, ta.size, dtype=np.uint64)
    a = np.concatenate([ea.ravel(), rng.integers(0, 2 ** 32, 800), ua, ta]).astype(np.uint32)
    b = np.concatenate([eb.ravel(), rng.integers(0, 2 ** 32, 800), ub, tb]).astype(np.uint32)
    dut = LaneMultiplier(corner_logic=True, stages=stages)
    if stages:
        got = simulate_pipelined(dut, ["a", "b"], zip(a, b), stages, rng)
    else:
        got = simulate(dut, ["a", "b"], ["o"], zip(a, b))[:, 0]
    exp = fp32_mul(a, b)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]
    with pytest.raises(ValueError, match="corner_logic needs a_bits 24 and logic_bits 0"):
        LaneMultiplier(corner_logic=True, logic_bits=6)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_lane_multiplier_pipelined(stages):
    rng = np.random.default_rng(SEED + 10 + stages)
    ea, eb = np.meshgrid(EDGES, EDGES)
    ua, ub = near_underflow(rng, 200)
    a = np.concatenate([ea.ravel(), rng.integers(0, 2 ** 32, 300), ua]).astype(np.uint32)
    b = np.concatenate([eb.ravel(), rng.integers(0, 2 ** 32, 300), ub]).astype(np.uint32)
    got = simulate_pipelined(LaneMultiplier(logic_bits=6, stages=stages), ["a", "b"],
                             zip(a, b), stages, rng)
    exp = fp32_mul(a, b)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]


def annihilation_operands(rng):
    """Edge pairs, random pairs, and zero/subnormal ``a`` against every special ``b``."""
    ea, eb = np.meshgrid(EDGES, EDGES)
    small = np.concatenate([[0, 0x80000000, 0x00000001, 0x807FFFFF, 0x00400000],
                            rng.integers(0, 1 << 23, 60) | (rng.integers(0, 2, 60) << 31)])
    big = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7F7FFFFF,
                    0x3F800000, 0x80000000, 0])
    sa, sb = np.meshgrid(small, big)
    a = np.concatenate([ea.ravel(), sa.ravel(), rng.integers(0, 2 ** 32, 300)])
    b = np.concatenate([eb.ravel(), sb.ravel(), rng.integers(0, 2 ** 32, 300)])
    return a.astype(np.uint32), b.astype(np.uint32)


@pytest.mark.parametrize("stages", [0, 1, 4])
def test_lane_multiplier_zero_a_annihilates(stages):
    """``zero_a_annihilates=True`` is ``sim.vector.mulz`` (the LUT's products): a zero or
    subnormal ``a`` gives a zero of the XOR sign, also against Inf and NaN ``b``; everything
    else is ``fp32_mul``. The default stays IEEE (``0 x Inf`` is NaN)."""
    rng = np.random.default_rng(SEED + 30 + stages)
    a, b = annihilation_operands(rng)
    dut = LaneMultiplier(logic_bits=6, stages=stages, zero_a_annihilates=True)
    if stages:
        got = simulate_pipelined(dut, ["a", "b"], zip(a, b), stages, rng)
    else:
        got = simulate(dut, ["a", "b"], ["o"], zip(a, b))[:, 0]
    exp = mulz(a, b)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]
    assert (exp != fp32_mul(a, b)).sum() > 50       # the cases where the two rules differ
    ieee = simulate(LaneMultiplier(logic_bits=6), ["a", "b"], ["o"], zip(a, b))[:, 0]
    assert (ieee == fp32_mul(a, b)).all()


def test_lut_product_is_the_multiplier_register():
    """The LUT's products (``_Mulz``) come straight from the multiplier's output: the
    annihilation adds no logic after its last register (a multiplexer there was the
    multiply-add's latest path, ``rtl/vector/lut.py``)."""
    import re

    from amaranth.back import rtlil

    from rtl.vector.lut import _Mulz
    text = rtlil.convert(_Mulz(stages=4), ports=None)
    modules = {mod.split("\n", 1)[0]: re.findall(r"\n  cell (\S+) (\S+)", mod)
               for mod in re.split(r"\nmodule ", text)[1:]}
    assert modules["\\top"] == [("\\top.mul", "\\mul")], modules["\\top"]


@pytest.mark.parametrize("stages", [0, 1, 3, 4])
def test_vector_alu_vs_golden(stages):
    """Every op (13..15 included) on edge-case pairs and random operands, op changing every
    cycle, against ``sim.vector.alu``."""
    rng = np.random.default_rng(SEED + 20 + stages)
    ex, es = (v.ravel() for v in np.meshgrid(EDGES, EDGES))
    x = np.concatenate([ex, rng.integers(0, 2 ** 32, 500)]).astype(np.uint32)
    sv = np.concatenate([es, rng.integers(0, 2 ** 32, 500)]).astype(np.uint32)
    sv[-100:] = x[-100:]                                  # equal operands
    ops = rng.integers(0, 16, len(x))
    if stages:
        got = simulate_pipelined(VectorAlu(stages), ["op", "x", "s"], zip(ops, x, sv), stages,
                                 rng)
    else:
        got = simulate(VectorAlu(0), ["op", "x", "s"], ["o"], zip(ops, x, sv))[:, 0]
    exp = np.array([alu(op, xi, si) if op <= AluOp.GE else 0
                    for op, xi, si in zip(ops, x, sv)], dtype=np.uint64)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(int(ops[i]), hex(x[i]), hex(sv[i]), hex(got[i]), hex(exp[i]))
                           for i in bad[:5]]


def test_vector_alu_add_sub_rsub_every_edge_pair():
    """ADD, SUB and RSUB on every ordered pair of edge cases (NaNs, Infs, zeros of both signs,
    subnormals, extremes) and on random pairs, against ``sim.vector.alu``: the ALU gives the
    adder ``x`` and ``s`` with only their sign bits flipped by the op (RSUB is (-x) + s), so
    this checks that the adder's result does not depend on the order of its operands."""
    rng = np.random.default_rng(SEED + 31)
    ex, es = (v.ravel() for v in np.meshgrid(EDGES, EDGES))
    x = np.concatenate([ex, rng.integers(0, 2 ** 32, 300)]).astype(np.uint32)
    sv = np.concatenate([es, rng.integers(0, 2 ** 32, 300)]).astype(np.uint32)
    for op in (AluOp.ADD, AluOp.SUB, AluOp.RSUB):
        ops = np.full(len(x), int(op))
        got = simulate(VectorAlu(0), ["op", "x", "s"], ["o"], zip(ops, x, sv))[:, 0]
        exp = np.array([alu(op, xi, si) for xi, si in zip(x, sv)], dtype=np.uint64)
        bad = np.nonzero(got != exp)[0]
        assert len(bad) == 0, [(op.name, hex(x[i]), hex(sv[i]), hex(got[i]), hex(exp[i]))
                               for i in bad[:5]]


class _LogTerm(wiring.Component):
    e: In(10)
    post: In(32)
    o: Out(32)

    def __init__(self, logic_bits):
        self._logic_bits = logic_bits
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = LaneMultiplier(a_bits=9, logic_bits=self._logic_bits)
        e = Signal(range(-512, 512))
        m.d.comb += [e.eq(self.e.as_signed()), mul.a.eq(int_to_f32(m, e, 9)),
                     mul.b.eq(self.post), self.o.eq(mul.o)]
        return m


@pytest.mark.parametrize("logic_bits", [6, 24])
def test_log_term_vs_fp32_mul(logic_bits):
    """``float(e) * POST`` for every exponent the LUT's LOG mode produces (-127..128), with the
    9 x 24-bit significand product split as the LUT has it (``logic_bits=6``: 9 x 18 in a
    DSP block) and all in logic."""
    rng = np.random.default_rng(SEED)
    posts = np.concatenate([EDGES, [0x3F317218, 0xBF317218],
                            rng.integers(0, 2 ** 32, 14, dtype=np.uint64)]).astype(np.uint32)
    es = np.arange(-127, 129)
    e, post = (x.ravel() for x in np.meshgrid(es, posts))
    got = simulate(_LogTerm(logic_bits), ["e", "post"], ["o"], zip(e & 0x3FF, post))[:, 0]
    exp = fp32_mul(_int_to_f32(e), post)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(int(e[i]), hex(post[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]


class _Exp2(wiring.Component):
    w: In(32)
    v: Out(32)
    n: Out(10)

    def elaborate(self, platform):
        m = Module()
        v, n = exp2_reduce(m, self.w)
        m.d.comb += [self.v.eq(v), self.n.eq(n)]
        return m


class _Exp2Cut(wiring.Component):
    """``exp2_reduce`` with a register at its cut, as the LUT uses it: ``o = n << 32 | v``
    one enabled cycle after ``w``."""
    w: In(32)
    en: In(1)
    o: Out(42)

    def elaborate(self, platform):
        m = Module()
        v, n = exp2_reduce(m, self.w, cut=lambda x, nm: delay(m, self.en, x, 1, nm))
        m.d.comb += self.o.eq(Cat(v, n))
        return m


def _exp2_cases():
    """Every w with |w| < 128 that matters (biased exponent <= 133), NaN/Inf excluded, with
    the expected ``v`` and ``n`` (10 bits)."""
    rng = np.random.default_rng(SEED + 1)
    exps = rng.integers(0, 134, 4000)
    exps[:600] = rng.integers(120, 134, 600)
    man = rng.integers(0, 1 << 23, 4000)
    man[:200] = 0                                       # integers and halves
    man[200:400] &= ~((1 << 16) - 1)
    w = ((rng.integers(0, 2, 4000) << 31) | (exps << 23) | man).astype(np.uint32)
    w = np.concatenate([w, [0, 0x80000000, 0x3F000000, 0xBF000000, 0x3EFFFFFF, 0x42FF0000,
                            0xC2FF0000, 0x42FEFFFF, 0x00000001, 0x80000001,
                            # w - n = -2**-k (a power of two below a negative fraction)
                            0x3F400000, 0xBF400000, 0x3FE00000, 0x40700000, 0x3F7FFFFF,
                            0x42FDFFFF]]).astype(np.uint32)
    E = (w.astype(np.int64) >> 23) & 0xFF
    M = w.astype(np.int64) & 0x7FFFFF
    s = w.astype(np.int64) >> 31
    sh = np.clip(150 - E, 17, 24)
    n_abs = np.where(E <= 125, 0, ((M | (1 << 23)) + (1 << (sh - 1))) >> sh)
    n = np.where(s == 1, -n_abs, n_abs)
    v = fp32_add(w, _int_to_f32(n) ^ np.uint32(0x80000000))
    return w, v, n & 0x3FF


def test_exp2_reduce_vs_fp32_add():
    w, v, n = _exp2_cases()
    got = simulate(_Exp2(), ["w"], ["v", "n"], ([x] for x in w))
    bad = np.nonzero((got[:, 0] != v) | (got[:, 1] != n))[0]
    assert len(bad) == 0, [(hex(w[i]), hex(got[i, 0]), hex(v[i]), int(got[i, 1]), int(n[i]))
                           for i in bad[:5]]


def test_exp2_reduce_cut_vs_fp32_add():
    """The same with a register at the cut (``n``'s two candidates registered, the choice
    after), under a random clock enable."""
    w, v, n = _exp2_cases()
    rng = np.random.default_rng(SEED + 5)
    got = simulate_pipelined(_Exp2Cut(), ["w"], ([x] for x in w), 1, rng)
    exp = v.astype(np.uint64) | n.astype(np.uint64) << np.uint64(32)
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(w[i]), hex(got[i]), hex(exp[i])) for i in bad[:5]]


class _Seg(wiring.Component):
    v: In(32)
    in_range: In(1)
    kk: In(3)
    dx: Out(32)

    def elaborate(self, platform):
        m = Module()
        low = Signal(23)
        m.d.comb += low.eq((1 << 23) - 1 >> self.kk)
        m.d.comb += self.dx.eq(segment_offset(m, self.v, self.in_range, low))
        return m


def test_segment_offset_vs_fp32_add():
    rng = np.random.default_rng(SEED + 2)
    n = 4000
    v = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    small = rng.integers(0, 30, n)
    v[:800] = ((v[:800] & 0x807FFFFF) | (small[:800] << 23)).astype(np.uint32)   # FTZ region
    v = np.concatenate([v, np.repeat(EDGES, 4)]).astype(np.uint32)
    n = len(v)
    in_range = rng.integers(0, 2, n)
    kk = rng.integers(0, 8, n)
    got = simulate(_Seg(), ["v", "in_range", "kk"], ["dx"], zip(v, in_range, kk))[:, 0]
    low = (1 << (23 - kk)) - 1
    seg = np.where(in_range == 1, v.astype(np.int64) & ~low, 0).astype(np.uint32)
    exp = fp32_add(v, seg ^ np.uint32(0x80000000))
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, [(hex(v[i]), int(in_range[i]), int(kk[i]), hex(got[i]), hex(exp[i]))
                           for i in bad[:5]]


def test_lane_multiplier_params():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="a_bits must be an integer from 1 to 24, not 0"):
            LaneMultiplier(a_bits=0)
        with pytest.raises(ValueError, match="logic_bits must be an integer from 0 to 24, not 25"):
            LaneMultiplier(logic_bits=25)
        with pytest.raises(TypeError, match="logic_bits must be an integer"):
            LaneMultiplier(logic_bits=1.5)
        with pytest.raises(ValueError, match="stages must be an integer from 0 to 4, not 5"):
            LaneMultiplier(stages=5)
        with pytest.raises(TypeError, match="zero_a_annihilates"):
            LaneMultiplier(zero_a_annihilates=1)
        with pytest.raises(ValueError, match="stages must be an integer from 0 to 4, not -1"):
            VectorAlu(-1)
        gc.collect()


def _flags(v):
    """What the engine registers beside ``y_h`` for the accumulators: DAZ'd value, order key,
    DAZ flag, NaN flag."""
    ez = (v >> 23) & 0xFF == 0
    daz = v & 0x80000000 if ez else v
    key = 0x80000000 if ez else ((~v) & 0xFFFFFFFF if v >> 31 else v | 0x80000000)
    nan = (v >> 23) & 0xFF == 0xFF and v & 0x7FFFFF != 0
    return daz, key, int(ez), int(nan)


@pytest.mark.parametrize("op", [AccOp.MAX, AccOp.MIN])
def test_acc_unit_max_min_vs_golden(op):
    """The engine's accumulator unit (``rtl.vector.lane_acc.AccUnit``) under MAX and MIN, as the
    engine drives it: reset to the identity, a cycle for the keys to follow ``acc`` and one for
    the first look-ahead compare (``next_key`` shows each operand's key a cycle before it), then
    runs of elements one per cycle (``we``) with idle cycles between, against
    ``sim.vector.acc_update``. Operands: edge cases (zeros of both signs, subnormals, Inf,
    NaN), values equal to the accumulator and random ones."""
    rng = np.random.default_rng(SEED + 40 + int(op))
    pool = EDGES + [0x00000010, 0x80000010, 0x807FFFFF, 0x00400000]
    dut = AccUnit(0)
    log = []

    async def bench(ctx):
        acc = 0
        ctx.set(dut.op, op)
        ctx.set(dut.rst_value, acc_identity(op))
        for episode in range(150):
            # The episode's operands first: ``next_key`` shows each one's key a cycle ahead.
            ops = []
            for _ in range(int(rng.integers(1, 12))):
                r = rng.random()
                if r < 0.4:
                    y = int(rng.choice(pool))
                elif r < 0.55:
                    y = None                      # equal keys: the accumulator as it is then
                elif r < 0.6:
                    y = -1                        # equal magnitude, other sign
                elif r < 0.75:                    # zeros and subnormals (DAZ: equal keys)
                    y = int(rng.choice([0, 0x80000000, 0x00000010, 0x807FFFFF]))
                else:
                    y = int(rng.integers(0, 2 ** 32))
                if episode < 100 and y is not None and y != -1 and (y >> 23) & 0xFF == 0xFF \
                        and y & 0x7FFFFF:
                    y = int(rng.choice(pool[:10]))   # most episodes without NaN
                ops.append([y, rng.random() < 0.3])
            ctx.set(dut.rst, 1)
            ctx.set(dut.acc, acc)
            assert ctx.get(dut.o) == acc_identity(op)
            await ctx.tick()
            acc = acc_identity(op)
            ctx.set(dut.rst, 0)
            ctx.set(dut.acc, acc)
            await ctx.tick()                      # the keys follow acc

            def resolve(i):
                # An operand that copies the accumulator is fixed when it is looked ahead:
                # the accumulator then is the one of the element before it (or now).
                if ops[i][0] is None:
                    ops[i][0] = acc
                elif ops[i][0] == -1:
                    ops[i][0] = acc ^ 0x80000000
                return ops[i][0]

            ctx.set(dut.next_key, _flags(resolve(0))[1])
            await ctx.tick()                      # the compares of the first operand
            for i in range(len(ops)):
                y, idle = ops[i]
                daz, key, ez, nan = _flags(y)
                for name, v in (("y", y), ("y_daz", daz), ("y_key", key), ("y_ez", ez),
                                ("y_nan", nan), ("acc", acc)):
                    ctx.set(getattr(dut, name), v)
                ctx.set(dut.we, 0 if idle else 1)
                if not idle:
                    o = ctx.get(dut.o)
                    exp = int(acc_update(op, np.uint32(acc), np.uint32(y)))
                    if o != exp:
                        log.append((hex(acc), hex(y), hex(o), hex(exp)))
                    acc = o
                if i + 1 < len(ops):
                    ctx.set(dut.next_key, _flags(resolve(i + 1))[1])
                await ctx.tick()
                ctx.set(dut.we, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not log, log[:5]


@pytest.mark.parametrize("stages", [3, 4])
def test_lane_multiplier_corner_logic_ecp5_netlist(stages, tmp_path):
    """On an ECP5 the three DSP pieces take their operand registers inside MULT18X18D
    instances (``rtl.arith.dsp``): the netlist with the block model gives the fabric version's
    products and ``fp32_mul`` (the check of ``tests/test_dsp_regs.py``, three blocks)."""
    import importlib.util
    import pathlib
    import shutil
    if shutil.which("iverilog") is None:
        pytest.skip("needs Icarus Verilog")
    path = pathlib.Path(__file__).with_name("test_dsp_regs.py")
    spec = importlib.util.spec_from_file_location("_dsp_regs_check", path)
    dsp_regs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dsp_regs)
    dsp_regs.test_ecp5_netlist_matches(
        lambda s: LaneMultiplier(corner_logic=True, stages=s), stages, 3, tmp_path)
