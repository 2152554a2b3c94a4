"""FP32 adder: round to nearest even, DAZ/FTZ, canonical NaN (the PSUM accumulator)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import CANONICAL_NAN_F32
from rtl.arith.common import Pipe, check_stages, leading_zeros

__all__ = ["FP32Adder"]


class FP32Adder(wiring.Component):
    """FP32 adder with round-to-nearest-even, as ``sim.formats.fp32_add``.

    Number rules (``docs/interfaces.md`` section 2): subnormal inputs are read as zeros of the
    same sign (DAZ) and subnormal results are flushed to zeros of the same sign (FTZ); a NaN
    input or Inf - Inf gives the canonical NaN ``0x7FC00000``; an exact zero sum is +0 except
    (-0) + (-0) = -0; overflow gives +-Inf.

    The datapath has four steps, with an optional register after each:

    1. unpack, DAZ, special cases, order the operands by magnitude, exponent difference;
    2. align the smaller significand (guard, round and sticky bits) and add or subtract;
    3. count leading zeros and normalise;
    4. round, check the exponent range, pack.

    ``stages`` picks the registers: 1: after step 4; 2: after steps 2 and 4; 3: after steps 1,
    2 and 4; 4: after every step. The cuts of 2 and 3 split the two longest paths (the
    compare-shift-add of steps 1-2 and the count-shift-round of steps 3-4).

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 to 4. 0 is purely combinational. Latency ``stages`` cycles,
        throughput one addition per cycle.

    Members
    -------
    a, b : In(32)
        FP32 operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low, the
        pipeline holds its contents and ``o`` keeps its value.
    o : Out(32)
        FP32 sum of the operands presented ``stages`` enabled cycles earlier. The registers
        reset to 0, so ``o`` reads +0 until the first operands reach it.
    """

    MAX_STAGES = 4
    _CUTS = {0: (), 1: (4,), 2: (2, 4), 3: (1, 2, 4), 4: (1, 2, 3, 4)}

    def __init__(self, stages=2):
        self._stages = check_stages(stages, self.MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1, init=1), "o": Out(32)})

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        """Cycles from operands to sum (equal to ``stages``)."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, self._CUTS[self._stages])

        # -- step 1: unpack, DAZ, specials, order by magnitude --------------------------------
        a, b = self.a, self.b
        ea, eb = a[23:31], b[23:31]
        za, zb = ea == 0, eb == 0                      # zero or subnormal: DAZ
        inf_a = (ea == 0xFF) & (a[0:23] == 0)
        inf_b = (eb == 0xFF) & (b[0:23] == 0)
        nan_a = (ea == 0xFF) & (a[0:23] != 0)
        nan_b = (eb == 0xFF) & (b[0:23] != 0)
        # Magnitudes after DAZ, compared as integers (exponent above mantissa).
        mag_a = Mux(za, 0, a[0:31])
        mag_b = Mux(zb, 0, b[0:31])
        swap = mag_a < mag_b
        big = Mux(swap, mag_b, mag_a)
        small = Mux(swap, mag_a, mag_b)
        s_big = Mux(swap, b[31], a[31])
        s_small = Mux(swap, a[31], b[31])
        e_big = big[23:31]
        e_small = small[23:31]
        diff = e_big - e_small                          # >= 0 since |big| >= |small|
        # Past 27 binades the smaller operand only contributes its sticky bit.
        shift = Signal(range(28))
        m.d.comb += shift.eq(Mux(diff > 27, 27, diff))
        sig_big = Cat(big[0:23], e_big != 0)            # hidden bit unless zero
        sig_small = Cat(small[0:23], e_small != 0)
        special = Signal(2)          # 0 none, 1 NaN, 2 Inf (result = the infinite operand)
        inf_sign = Signal()
        m.d.comb += [
            inf_sign.eq(Mux(inf_a, a[31], b[31])),
            special.eq(Mux(nan_a | nan_b | (inf_a & inf_b & (a[31] != b[31])), 1,
                           Mux(inf_a | inf_b, 2, 0))),
        ]
        zero_sign = a[31] & b[31] & za & zb    # both zero: -0 only for (-0) + (-0)

        regs = dict(sig_big=sig_big, sig_small=sig_small, shift=shift, e_big=e_big,
                    s_big=s_big, sub=s_big ^ s_small, special=special, inf_sign=inf_sign,
                    zero_sign=zero_sign)
        r = {k: pipe(1, v, k) for k, v in regs.items()}

        # -- step 2: align with guard/round/sticky, add or subtract -------------------------
        # The small significand sits 3 bits up (G, R, S) and is shifted right by `shift`
        # inside a 54-bit field whose low 27 bits collect what falls off (the sticky bit).
        wide = Signal(54)
        m.d.comb += wide.eq(Cat(Const(0, 30), r["sig_small"]) >> r["shift"])
        sticky = wide[0:27] != 0
        y = Cat(wide[27] | sticky, wide[28:54])          # 27 bits
        big3 = Cat(Const(0, 3), r["sig_big"])            # 27 bits
        total = Signal(28)
        m.d.comb += total.eq(Mux(r["sub"], big3 - y, big3 + y))

        regs = dict(total=total, e_big=r["e_big"], s_big=r["s_big"], special=r["special"],
                    inf_sign=r["inf_sign"], zero_sign=r["zero_sign"])
        r = {k: pipe(2, v, k) for k, v in regs.items()}

        # -- step 3: normalise so the leading one is at bit 27 --------------------------------
        lz, is_zero = leading_zeros(r["total"])
        norm = Signal(28)
        m.d.comb += norm.eq(r["total"] << lz)
        # The big operand's hidden bit sat at bit 26, so the exponent moves by 1 - lz.
        exp = Signal(signed(10))
        m.d.comb += exp.eq(r["e_big"] + 1 - lz)

        regs = dict(norm=norm, exp=exp, is_zero=is_zero, s_big=r["s_big"],
                    special=r["special"], inf_sign=r["inf_sign"], zero_sign=r["zero_sign"])
        r = {k: pipe(3, v, k) for k, v in regs.items()}

        # -- step 4: round to nearest even, range, pack ---------------------------------------
        norm = r["norm"]
        mant = norm[4:28]                      # 24 bits with the leading one
        guard = norm[3]
        sticky = norm[0:3] != 0
        round_up = guard & (sticky | mant[0])
        rounded = Signal(25)
        m.d.comb += rounded.eq(mant + round_up)
        exp_r = Signal(signed(11))
        m.d.comb += exp_r.eq(r["exp"] + rounded[24])
        frac = Mux(rounded[24], 0, rounded[0:23])   # a carry leaves 1.000... (mantissa 0)
        result = Signal(32)
        with m.If(r["special"] == 1):
            m.d.comb += result.eq(CANONICAL_NAN_F32)
        with m.Elif(r["special"] == 2):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), r["inf_sign"]))
        with m.Elif(r["is_zero"]):
            m.d.comb += result.eq(Cat(Const(0, 31), r["zero_sign"]))
        with m.Elif(exp_r >= 255):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), r["s_big"]))
        with m.Elif(exp_r <= 0):
            # Sums of normals below 2**-126 are exact subnormals: flushed (FTZ).
            m.d.comb += result.eq(Cat(Const(0, 31), r["s_big"]))
        with m.Else():
            m.d.comb += result.eq(Cat(frac, exp_r[0:8], r["s_big"]))

        m.d.comb += self.o.eq(pipe(4, result, "o"))
        return m
