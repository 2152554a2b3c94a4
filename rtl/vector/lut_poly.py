"""Stages 3 to 6 of a LUT lane: the two multiply-adds, LOG's term and the finish
(``sim.vector.lut_eval`` steps 4 and 5)."""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.arith.fp32_add import FP32Adder
from rtl.vector.lut_arith import Mulz, int_to_f32, ldexp_ftz
from rtl.vector.lut_reduce import STAGE3, STAGES, lane_registers
from rtl.vector.mul import LaneMultiplier

__all__ = ["LutPoly"]


class LutPoly(wiring.Component):
    """Stages 3 to 6 of a lane: ``t2 = c1 + c2 * dx``, ``y = c0 + t2 * dx`` and LOG's
    ``e * POST``, and the finish by mode (the scaled value, LOG's sum, or the value itself;
    the special value where it applies). Latency: ``y`` holds the element ``2 * (MUL + ADD +
    1) + (ADD + 1)`` enabled cycles after stage 3 (``STAGES``). ``y`` resets to 0.

    Members
    -------
    en : In(1)
    post_q : In(32); fin_scaled, fin_recip, fin_log : In(1)
        The active bank's header (``LutHeader``).
    s3_dx, s3_k, s3_e, s3_flip, s3_special, s3_sval, row : In
        The element in stage 3 (``LutReduce``; ``row`` ``DX`` cycles before the others).
    y : Out(32)
    """

    def __init__(self, *, deep):
        self._deep = deep
        super().__init__(self.members())

    @staticmethod
    def members():
        """The signature's members."""
        sig = {"en": In(1), "post_q": In(32), "fin_scaled": In(1), "fin_recip": In(1),
               "fin_log": In(1), "s3_dx": In(32), "row": In(96), "y": Out(32)}
        sig.update({f"s3_{n}": In(shape) for n, shape in STAGE3.items()})
        return sig

    def elaborate(self, platform):
        m = Module()
        en = self.en
        _, MUL, ADD, _, DX, _ = STAGES[self._deep]
        fin_scaled, fin_recip, fin_log = self.fin_scaled, self.fin_recip, self.fin_log
        S, sub = lane_registers(m)

        def D(value, cycles, name, reset_less=True):
            return delay(m, en, value, cycles, name, reset_less=reset_less)

        s3_dx, row = self.s3_dx, self.row
        s3 = {n: getattr(self, f"s3_{n}") for n in STAGE3}
        # -- stage 3 -> 4: t2 = c1 + c2 * dx ------------------------------------------
        coefs = D(row, DX, "coefs")
        c0, c1, c2 = coefs[0:32], coefs[32:64], coefs[64:96]
        m1 = sub("m1", Mulz(MUL))
        a1 = sub("a1", FP32Adder(stages=ADD))
        m.d.comb += [m1.c.eq(c2), m1.d.eq(s3_dx), m1.en.eq(en),
                     a1.a.eq(D(c1, MUL, "c1")), a1.b.eq(m1.o), a1.en.eq(en)]
        s4 = {n_: S(sig.shape(), f"s4_{n_}") for n_, sig in s3.items() if n_ != "e"}
        s4_t2 = S(32, "s4_t2")
        s4_c0 = S(32, "s4_c0")
        s4_dx = S(32, "s4_dx")
        with m.If(en):
            m.d.sync += [s4_t2.eq(a1.o), s4_c0.eq(D(c0, MUL + ADD, "c0")),
                         s4_dx.eq(D(s3_dx, MUL + ADD, "s3_dx"))]
            m.d.sync += [s4[n_].eq(D(s3[n_], MUL + ADD, f"s3_{n_}")) for n_ in s3
                         if n_ != "e"]
        # ``e`` is converted to FP32 before its s4 register, not after it in front of the
        # log term's multiplier; when deep, its sign and magnitude are registered one cycle
        # before (in place of ``e``'s last delay register), so that the negation and the
        # normalisation are not in one cycle (``s3_e_d7`` -> ``s4_ef``).
        s4_ef = S(32, "s4_ef")
        wait = MUL + ADD
        with m.If(en):
            m.d.sync += s4_ef.eq(int_to_f32(
                m, D(s3["e"], max(wait - 1, 0), "s3_e"), 9,
                cut=(lambda x, nm: D(x, 1, f"ef_{nm}")) if wait else None))

        # -- stage 4 -> 5: y = c0 + t2 * dx; log term -----------------------------------
        m2 = sub("m2", Mulz(MUL))
        a2 = sub("a2", FP32Adder(stages=ADD))
        m.d.comb += [m2.c.eq(s4_t2), m2.d.eq(s4_dx), m2.en.eq(en),
                     a2.a.eq(D(s4_c0, MUL, "s4_c0")), a2.b.eq(m2.o), a2.en.eq(en)]
        # e * POST: e is in [-127, 128], so int_to_f32 (9 bits) leaves the low 15 bits of
        # the significand zero and the product is 9 x 24 bits: 9 x 18 in one MULT18X18D,
        # 9 x 6 in logic, not a nine-row adder tree between two registers.
        e_f = s4_ef
        lmul = sub("lmul", LaneMultiplier(a_bits=9, logic_bits=6, stages=MUL))
        m.d.comb += [lmul.a.eq(e_f), lmul.b.eq(self.post_q), lmul.en.eq(en)]
        s5 = {n_: S(sig.shape(), f"s5_{n_}") for n_, sig in s4.items()}
        s5_y = S(32, "s5_y")
        s5_lt = S(32, "s5_lt")
        with m.If(en):
            m.d.sync += [s5_y.eq(a2.o), s5_lt.eq(D(lmul.o, ADD, "lt"))]
            m.d.sync += [s5[n_].eq(D(s4[n_], MUL + ADD, f"s4_{n_}")) for n_ in s5]

        # -- stage 5 -> 6: finish -------------------------------------------------------
        ladd = sub("ladd", FP32Adder(stages=ADD))
        m.d.comb += [ladd.a.eq(s5_y), ladd.b.eq(s5_lt), ladd.en.eq(en)]
        scaled = ldexp_ftz(m, s5_y, s5["k"], en=en, cycles=ADD, name="scaled")
        y = D(s5_y, ADD, "s5_y")
        flip = D(s5["flip"], ADD, "s5_flip")
        fin = S(32, "fin")
        m.d.comb += fin.eq(Mux(fin_scaled, scaled ^ Cat(Const(0, 31), flip & fin_recip),
                               Mux(fin_log, ladd.o, y)))
        with m.If(en):
            m.d.sync += self.y.eq(Mux(D(s5["special"], ADD, "s5_special"),
                                     D(s5["sval"], ADD, "s5_sval"), fin))
        return m
