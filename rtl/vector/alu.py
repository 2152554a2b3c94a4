"""One lane of the vector engine's ALU: ``o = x OP s`` (``sim.vector.alu``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import check_stages, delay
from rtl.arith.fp32_add import FP32Adder
from rtl.arith.fp32_mul import FP32Multiplier
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

    ADD/SUB/RSUB/MUL are ``FP32Adder``/``FP32Multiplier`` (RNE, DAZ/FTZ, canonical NaN).
    MAX/MIN/comparisons read subnormals as zeros; MAX/MIN give the canonical NaN if either
    operand is NaN and, for equal zeros, +0 (MAX) / -0 (MIN) unless both have the other sign;
    comparisons give 1.0 or 0.0 and are false on NaN except NE. BYPASS passes ``x`` unchanged.
    Op codes 13..15 give +0.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 4: those of the adder and the multiplier; the
        other operations' results wait beside them. Throughput one operation per cycle.

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

    def __init__(self, stages=0):
        self._stages = check_stages(stages, self.MAX_STAGES)
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
        m.submodules.mul = mul = FP32Multiplier(stages=n)
        m.d.comb += [add.en.eq(self.en), mul.en.eq(self.en)]
        sign = Const(0x80000000, 32)
        m.d.comb += [
            add.a.eq(Mux(op == AluOp.RSUB, s, x)),
            add.b.eq(Mux(op == AluOp.RSUB, x ^ sign, Mux(op == AluOp.SUB, s ^ sign, s))),
            mul.a.eq(x),
            mul.b.eq(s),
        ]
        xd = Signal(32)
        sd = Signal(32)
        m.d.comb += [xd.eq(Mux(x[23:31] == 0, x & sign, x)), sd.eq(Mux(s[23:31] == 0, s & sign, s))]
        nan = ((xd[23:31] == 0xFF) & (xd[0:23] != 0)) | ((sd[23:31] == 0xFF) & (sd[0:23] != 0))
        kx = order_key(m, xd, "x")
        ks = order_key(m, sd, "s")
        gt, lt, eq = kx > ks, kx < ks, kx == ks
        nz = xd[0:31] != 0
        both = Cat(Const(0, 31), xd[31] & sd[31])
        either = Cat(Const(0, 31), xd[31] | sd[31])
        mx = Mux(gt, xd, Mux(lt, sd, Mux(nz, xd, both)))
        mn = Mux(lt, xd, Mux(gt, sd, Mux(nz, xd, either)))

        def cmp(cond, on_nan=0):
            return Mux(nan, on_nan, cond)

        # The result of every operation but the adder's and the multiplier's, which waits beside
        # them, and the choice among the three.
        other = Signal(32)
        with m.Switch(op):
            with m.Case(int(AluOp.BYPASS)):
                m.d.comb += other.eq(x)
            with m.Case(int(AluOp.MAX)):
                m.d.comb += other.eq(Mux(nan, CANONICAL_NAN_F32, mx))
            with m.Case(int(AluOp.MIN)):
                m.d.comb += other.eq(Mux(nan, CANONICAL_NAN_F32, mn))
            for code, cond, on_nan in ((AluOp.EQ, eq, 0), (AluOp.NE, ~eq, 1), (AluOp.LT, lt, 0),
                                       (AluOp.LE, lt | eq, 0), (AluOp.GT, gt, 0),
                                       (AluOp.GE, gt | eq, 0)):
                with m.Case(int(code)):
                    m.d.comb += other.eq(Mux(cmp(cond, on_nan), ONE_F32, 0))
            with m.Default():
                m.d.comb += other.eq(0)
        unit = Signal(2)           # 0 other, 1 adder, 2 multiplier
        m.d.comb += unit.eq(Mux((op == AluOp.ADD) | (op == AluOp.SUB) | (op == AluOp.RSUB), 1,
                                Mux(op == AluOp.MUL, 2, 0)))
        unit = delay(m, self.en, unit, n, "unit")
        other = delay(m, self.en, other, n, "other")
        m.d.comb += self.o.eq(Mux(unit == 1, add.o, Mux(unit == 2, mul.o, other)))
        return m
