"""The special results of a LUT lane's range reduction (NaN, Inf, zero and range-limit inputs,
by mode), stage 0 -> 1 of ``rtl.vector.lut_reduce.LutReduce``."""

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay, ge_const
from rtl.vector.lut_header import MODE_FLAGS

__all__ = ["LutSpecial"]


class LutSpecial(wiring.Component):
    """Whether an element's result is a special value, and that value, by range mode.

    The class of the pre-scaled value ``w`` (NaN, Inf, zero or subnormal, ``|w| >= 2^7``) is
    registered (one enabled cycle, with the lane's ``s1_w``); ``special`` and ``sval`` are then
    combinational from those flags, ``s1_sign`` (``w``'s sign, registered by the user) and the
    registered mode flags. By mode, the first condition that holds (NaN before all):

    ======  =============================================================
    EXP2    inf or big: +0 if negative, else +Inf
    RECIP   zero: Inf with w's sign; inf: zero with w's sign
    RSQRT   zero: Inf with w's sign; inf and positive: +0; negative: NaN
    SQRT    zero: zero with w's sign; inf and positive: +Inf; negative: NaN
    LOG     zero: -Inf; inf and positive: +Inf; negative: NaN
    ======  =============================================================

    Every such value is a sign, an exponent of all ones or zeros and NaN's quiet bit (the
    rest zero), and ``sval`` matters only where ``special`` holds, so each of the three is an
    AND-OR of the mode flags and the class flags, not a choice by the mode's code and then by
    the conditions: the multiplier's output -> 23-bit compare -> choice by mode is not one
    cycle.

    Members
    -------
    w : In(32)
        The pre-scaled value (FP32), registered here into its class flags.
    en : In(1)
        Clock enable of the class registers (no reset: the lane tracks validity).
    s1_sign : In(1)
        The sign of the ``w`` registered a cycle earlier.
    s1_is : In(MODE_FLAGS); s1_sq : In(1)
        The mode (one-hot) and RSQRT, SQRT or LOG, registered (``LutHeader``).
    special : Out(1); sval : Out(32)
        Combinational, for the element of the registered flags.
    """

    w: In(32)
    en: In(1)
    s1_sign: In(1)
    s1_is: In(MODE_FLAGS)
    s1_sq: In(1)
    special: Out(1)
    sval: Out(32)

    def elaborate(self, platform):
        m = Module()
        E, M = self.w[23:31], self.w[0:23]
        e_ones, m_nz = E == 0xFF, M != 0

        def D(value, name):
            return delay(m, self.en, value, 1, name, reset_less=True)
        nan = D(e_ones & m_nz, "pre_nan")
        inf = D(e_ones & ~m_nz, "pre_inf")
        zero = D(E == 0, "pre_zero")
        big = D(ge_const(E, 134), "pre_big")
        s, sq, mode = self.s1_sign, self.s1_sq, self.s1_is
        m_exp2, m_recip, m_rsqrt, m_sqrt, m_log = (mode.exp2, mode.recip, mode.rsqrt,
                                                   mode.sqrt, mode.log)
        m.d.comb += self.special.eq(nan | m_exp2 & (inf | big) | m_recip & (zero | inf) |
                                    sq & (zero | inf | s))
        sv_quiet = nan | sq & s & ~zero
        sv_ones = (nan | m_log | m_exp2 & ~s | m_recip & zero | m_rsqrt & (zero | s) |
                   m_sqrt & ~zero)
        sv_sign = ~nan & (m_recip & s | m_log & zero | (m_rsqrt | m_sqrt) & zero & s)
        m.d.comb += self.sval.eq(Cat(Const(0, 22), sv_quiet, sv_ones.replicate(8), sv_sign))
        return m
