"""One lane of the vector engine's ALU: ``o = x OP s`` (``sim.vector.alu``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import check_stages, delay
from rtl.arith.fp32_add import FP32Adder
from rtl.vector.mul import LaneMultiplier
from sim.config import check_bool
from sim.dtypes import CANONICAL_NAN_F32
from sim.vector import ONE_F32, AluOp

__all__ = ["VectorAlu", "order_key"]


def order_key(m, x, name):
    """Monotonic unsigned key of a DAZ'd FP32 pattern (-0 and +0 equal)."""
    xz = Signal(32, name=f"{name}_z")
    m.d.comb += xz.eq(Mux(x[0:31] == 0, 0, x))
    key = Signal(32, name=f"{name}_key")
    m.d.comb += key.eq(Mux(xz[31], ~xz, xz | 0x80000000))
    return key


class VectorAlu(wiring.Component):
    """``o = x OP s`` on FP32 patterns, ``stages`` enabled cycles after the operands.

    ADD/SUB/RSUB/MUL are ``FP32Adder``/``LaneMultiplier(corner_logic=True)`` (RNE, DAZ/FTZ,
    canonical NaN).
    MAX/MIN/comparisons read subnormals as zeros; MAX/MIN give the canonical NaN if either
    operand is NaN and, for equal zeros, +0 (MAX) / -0 (MIN) unless both have the other sign;
    comparisons give 1.0 or 0.0 and are false on NaN except NE. BYPASS passes ``x`` unchanged.
    Op codes 13..15 give +0.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 4: those of the adder and the multiplier; the
        other operations' results wait beside them. Throughput one operation per cycle.
    mul : bool
        Build the multiplier (3 MULT18X18D). Without it MUL gives +0, as codes 13..15 do: for
        users that never issue MUL (an accumulator: ADD, MAX, MIN, BYPASS).

    Members
    -------
    op : In(4)
        :class:`sim.vector.AluOp`.
    x, s : In(32)
        FP32 operands.
    en : In(1), default 1
        Clock enable of every pipeline register: while low the pipeline holds.
    o : Out(32)
        FP32 result.
    """

    MAX_STAGES = 4

    def __init__(self, stages=0, *, mul=True):
        self._stages = check_stages(stages, self.MAX_STAGES)
        self._mul = check_bool("mul", mul)
        super().__init__({"op": In(4), "x": In(32), "s": In(32), "en": In(1, init=1),
                          "o": Out(32)})

    @property
    def latency(self):
        """Cycles from operands to result (equal to ``stages``)."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        op, x, s = self.op, self.x, self.s
        n = self._stages
        m.submodules.add = add = FP32Adder(stages=n)
        m.d.comb += add.en.eq(self.en)
        if self._mul:
            # Three MULT18X18D and the significands' top 6 x 6 bits in logic.
            m.submodules.mul = mul = LaneMultiplier(corner_logic=True, stages=n)
            m.d.comb += [mul.en.eq(self.en), mul.a.eq(x), mul.b.eq(s)]
        sign = Const(0x80000000, 32)
        # SUB is x + (-s) and RSUB (-x) + s: the adder is commutative (``sim.formats.fp32_add``
        # sums exactly and rounds once), so the op flips only the sign bits and the operands
        # reach the adder without a 32-bit multiplexer in front of its compare and swap.
        m.d.comb += [
            add.a.eq(Cat(x[:31], x[31] ^ (op == AluOp.RSUB))),
            add.b.eq(Cat(s[:31], s[31] ^ (op == AluOp.SUB))),
        ]
        # With a pipeline, the other operations' operands (with their DAZ and NaN flags, and
        # the op as flags) take the first of its registers and the rest follows it, so that
        # DAZ, order key, compare, select and the op switch are not one cycle's logic.
        x_ez, s_ez = x[23:31] == 0, s[23:31] == 0        # zero or subnormal: DAZ
        nan = ((x[23:31] == 0xFF) & (x[0:23] != 0)) | ((s[23:31] == 0xFF) & (s[0:23] != 0))
        # The op as flags: which result, and which of >, <, == make a comparison true (its
        # value on NaN).
        f_byp, f_max, f_min = op == AluOp.BYPASS, op == AluOp.MAX, op == AluOp.MIN
        cmps = {AluOp.EQ: (0, 0, 1, 0), AluOp.NE: (1, 1, 0, 1), AluOp.LT: (0, 1, 0, 0),
                AluOp.LE: (0, 1, 1, 0), AluOp.GT: (1, 0, 0, 0), AluOp.GE: (1, 0, 1, 0)}
        f_cmp = Signal()
        w_gt, w_lt, w_eq, on_nan = (Signal(name=f"want_{k}") for k in ("gt", "lt", "eq", "nan"))
        with m.Switch(op):
            for code, flags in cmps.items():
                with m.Case(int(code)):
                    m.d.comb += [f_cmp.eq(1)] + [
                        f.eq(v) for f, v in zip((w_gt, w_lt, w_eq, on_nan), flags)]
        # The DAZ'd operands and their order keys are formed before the register, so that
        # after it the two compare carry chains start from flip-flops.
        xd = Signal(32)
        sd = Signal(32)
        m.d.comb += [xd.eq(Mux(x_ez, x & sign, x)), sd.eq(Mux(s_ez, s & sign, s))]
        # ``order_key`` of the DAZ'd values, from the DAZ flags: a DAZ'd value is a zero
        # exactly when its exponent is 0.
        kx = Signal(32)
        ks = Signal(32)
        m.d.comb += [kx.eq(Mux(x_ez, sign, Mux(x[31], ~x, x | sign))),
                     ks.eq(Mux(s_ez, sign, Mux(s[31], ~s, s | sign)))]
        if n:
            (x, xd, sd, kx, ks, x_ez, nan, f_byp, f_max, f_min, f_cmp, w_gt, w_lt, w_eq,
             on_nan) = (delay(m, self.en, v, 1, f"pre_{k}", reset_less=True) for k, v in (
                ("x", x), ("xd", xd), ("sd", sd), ("kx", kx), ("ks", ks), ("x_ez", x_ez),
                ("nan", nan), ("byp", f_byp), ("max", f_max), ("min", f_min), ("cmp", f_cmp),
                ("w_gt", w_gt), ("w_lt", w_lt), ("w_eq", w_eq), ("on_nan", on_nan)))
        gt, lt = kx > ks, kx < ks
        if n >= 3:
            # With a third register to spare, the two compare carry chains end in it and the
            # selection follows in the next cycle: no compare and select share a cycle.
            (gt, lt, x, xd, sd, x_ez, nan, f_byp, f_max, f_min, f_cmp, w_gt, w_lt, w_eq,
             on_nan) = (delay(m, self.en, v, 1, f"cmp_{k}", reset_less=True) for k, v in (
                ("gt", gt), ("lt", lt), ("x", x), ("xd", xd), ("sd", sd), ("x_ez", x_ez),
                ("nan", nan), ("byp", f_byp), ("max", f_max), ("min", f_min), ("cmp", f_cmp),
                ("w_gt", w_gt), ("w_lt", w_lt), ("w_eq", w_eq), ("on_nan", on_nan)))
        eq = ~gt & ~lt               # beside the two carry chains, not a 32-bit compare
        nz = ~x_ez
        both = Cat(Const(0, 31), xd[31] & sd[31])
        either = Cat(Const(0, 31), xd[31] | sd[31])
        mx = Mux(gt, xd, Mux(lt, sd, Mux(nz, xd, both)))
        mn = Mux(lt, xd, Mux(gt, sd, Mux(nz, xd, either)))

        cond = (w_gt & gt) | (w_lt & lt) | (w_eq & eq)
        # The result of every operation but the adder's and the multiplier's, which waits beside
        # them, and the choice among the three.
        other = Signal(32)
        with m.If(f_byp):
            m.d.comb += other.eq(x)
        with m.Elif((f_max | f_min) & nan):
            m.d.comb += other.eq(CANONICAL_NAN_F32)
        with m.Elif(f_max):
            m.d.comb += other.eq(mx)
        with m.Elif(f_min):
            m.d.comb += other.eq(mn)
        with m.Elif(f_cmp):
            m.d.comb += other.eq(Mux(Mux(nan, on_nan, cond), ONE_F32, 0))
        with m.Else():
            m.d.comb += other.eq(0)
        unit = Signal(2)           # 0 other, 1 adder, 2 multiplier
        is_mul = (op == AluOp.MUL) if self._mul else Const(0, 1)
        m.d.comb += unit.eq(Mux((op == AluOp.ADD) | (op == AluOp.SUB) | (op == AluOp.RSUB), 1,
                                Mux(is_mul, 2, 0)))
        unit = delay(m, self.en, unit, n, "unit", reset_less=True)
        other = delay(m, self.en, other, max(n - 1 - (n >= 3), 0), "other", reset_less=True)
        mul_o = mul.o if self._mul else Const(0, 32)
        m.d.comb += self.o.eq(Mux(unit == 1, add.o, Mux(unit == 2, mul_o, other)))
        return m
