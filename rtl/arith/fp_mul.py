"""Exact multiplier of narrow formats (FP8, FP16, BF16, TF32, INT8) with an FP32/INT32 product:
the multiplier of a tensor-engine PE."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import CANONICAL_NAN_F32, FORMAT_BITS, Format
from rtl.arith.common import Pipe, check_formats, check_fp8_bias, check_stages, leading_zeros
from rtl.arith.unpack import SIG_BITS, unpack_float

__all__ = ["FPMultiplier"]

#: Formats a multiplier can take (INT32 has no multiply).
MUL_FORMATS = frozenset(Format) - {Format.INT32}


class FPMultiplier(wiring.Component):
    """Exact product of two values of a run-time selected format, as ``sim.formats.mul_exact``.

    Every floating-point format's significand has at most 11 bits (FP32 operands are truncated
    to TF32: the low 13 mantissa bits are dropped, round toward zero), so the at most 22-bit
    significand product is exact in FP32 and never rounds. The result leaves FP32's normal
    range only through the exponent: below 2**-126 it is a signed zero (FTZ), at or above
    2**128 it is Inf; with the standard biases only BF16 and TF32 get there. BF16 and TF32
    subnormal operands read as zero (DAZ), FP16/FP8 subnormals are exact. A NaN operand or
    0 x Inf gives ``0x7FC00000``; E4M3 has no Inf (its only NaN is S.1111.111).
    ``fmt == INT8`` multiplies the signed low bytes and gives the INT32 product.

    One multiplier serves every format in ``formats``: ``w x w`` bits unsigned, with ``w`` the
    widest significand among them (11 with FP16 or FP32, 8 with BF16, 5 for FP8 only), or
    ``max(w + 1, 8)`` bits signed when INT8 is included. That is at most 12 x 12, one
    MULT18X18D on ECP5. Unpacking logic is generated only for the formats in ``formats``.

    The datapath has three steps, each optionally followed by a register: 1. unpack the
    selected format, count the leading zeros of both significands (FP16/FP8 subnormals; the
    product has their sum or one more) and form the exponent sums; 2. multiply the
    significands (the DSP); 3. shift by the known count, normalise by at most one bit, check
    the exponent range, pack. ``stages`` 1 registers after step 3, 2 after steps 2 and 3 (the
    DSP's output register), 3 after every step (also the DSP's inputs).

    Parameters
    ----------
    formats : collection of Format
        Formats the instance multiplies (any but INT32). Selecting another code gives ``p == 0``.
    stages : int
        Pipeline registers, 0 to 3; 0 is purely combinational. Latency ``stages`` cycles,
        throughput one product per cycle.
    fp8_bias : mapping of FP8 Format to int, optional
        Exponent bias of each cFP8 format, fixed at elaboration (defaults 7, 15, 3).

    Members
    -------
    a, b : In(32)
        Operands of format ``fmt``, low-aligned; bits above the format's width are ignored.
    fmt : In(3)
        :class:`sim.dtypes.Format` code of both operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low the
        pipeline holds and ``p`` keeps its value.
    p : Out(32)
        FP32 product (INT32 for INT8) of the operands presented ``stages`` enabled cycles
        earlier; 0 after reset until the first operands arrive.
    """

    MAX_STAGES = 3
    _CUTS = {0: (), 1: (3,), 2: (2, 3), 3: (1, 2, 3)}

    def __init__(self, formats=tuple(MUL_FORMATS), stages=1, *, fp8_bias=None):
        self._formats = check_formats(formats, MUL_FORMATS)
        self._stages = check_stages(stages, self.MAX_STAGES)
        self._fp8_bias = check_fp8_bias(fp8_bias)
        super().__init__({"a": In(32), "b": In(32), "fmt": In(FORMAT_BITS),
                          "en": In(1, init=1), "p": Out(32)})

    @property
    def formats(self):
        return self._formats

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        """Cycles from operands to product (equal to ``stages``)."""
        return self._stages

    @property
    def fp8_bias(self):
        return dict(self._fp8_bias)

    @property
    def multiplier_width(self):
        """Operand width of the one hardware multiplier (signed if INT8 is supported)."""
        floats = [SIG_BITS[f] for f in self._formats if f != Format.INT8]
        w = max(floats, default=0)
        return max(w + 1, 8) if Format.INT8 in self._formats else w

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, self._CUTS[self._stages])
        floats = sorted(f for f in self._formats if f != Format.INT8)
        has_int = Format.INT8 in self._formats
        has_sub = any(f in self._formats for f in (Format.FP16, Format.FP8_E4M3,
                                                   Format.FP8_E5M2, Format.FP8_E3M4))
        sig_w = max((SIG_BITS[f] for f in floats), default=1)
        mw = self.multiplier_width
        pw = 2 * sig_w                                  # float product width

        # -- step 1: unpack both operands of the selected format ---------------------------
        sig_a = Signal(sig_w)
        sig_b = Signal(sig_w)
        exp_a = Signal(signed(10))    # a = sig_a * 2**(exp_a - (sig_w - 1))
        exp_b = Signal(signed(10))
        sign = Signal()
        special = Signal(2)           # 0 finite nonzero, 1 NaN, 2 Inf, 3 zero
        is_int = Signal()
        supported = Signal()
        with m.Switch(self.fmt):
            for f in floats:
                with m.Case(f):
                    ua = unpack_float(self.a, f, sig_w, self._fp8_bias.get(f))
                    ub = unpack_float(self.b, f, sig_w, self._fp8_bias.get(f))
                    zero = ua.zero | ub.zero
                    inf = ua.inf | ub.inf
                    m.d.comb += [
                        sig_a.eq(ua.sig), sig_b.eq(ub.sig),
                        exp_a.eq(ua.exp), exp_b.eq(ub.exp),
                        sign.eq(ua.sign ^ ub.sign),
                        special.eq(Mux(ua.nan | ub.nan | (zero & inf), 1,
                                       Mux(inf, 2, Mux(zero, 3, 0)))),
                        supported.eq(1),
                    ]
            if has_int:
                with m.Case(Format.INT8):
                    m.d.comb += [is_int.eq(1), supported.eq(1)]
        # The multiplier's operands: the significands, or the signed bytes for INT8.
        op_a = Signal(signed(mw) if has_int else mw)
        op_b = Signal(signed(mw) if has_int else mw)
        if has_int:
            m.d.comb += [op_a.eq(Mux(is_int, self.a[0:8].as_signed(), sig_a)),
                         op_b.eq(Mux(is_int, self.b[0:8].as_signed(), sig_b))]
        else:
            m.d.comb += [op_a.eq(sig_a), op_b.eq(sig_b)]
        # Subnormal FP16/FP8 operands have leading zeros; the product then has lz_a + lz_b or
        # one more. Counting them here, beside the multiplier, leaves step 3 a known shift
        # and a one-bit normalisation instead of a count of the product's leading zeros.
        if has_sub:
            lz_a, _ = leading_zeros(m, sig_a, "lz_a")
            lz_b, _ = leading_zeros(m, sig_b, "lz_b")
            lz = Signal(range(2 * sig_w))
            m.d.comb += lz.eq(lz_a + lz_b)
        else:
            lz = Const(0, 1)
        # The biased FP32 exponent is exp_a + exp_b + 128 - lz if the normalised product's
        # leading one is its top bit, one less otherwise. The subtraction of lz and the range
        # checks wait for step 3; here, beside the multiplier, only lz-free sums are formed:
        # the exponent and the thresholds it is compared with (e <= 0, e <= 1, e >= 255,
        # e >= 256 become comparisons of these sums with lz).
        xsum = exp_a + exp_b
        sums = {}
        for name, k in (("x128", 128), ("x127", 127), ("xm127", 128 - 255), ("xm128", 128 - 256)):
            sums[name] = Signal(signed(12), name=name)
            m.d.comb += sums[name].eq(xsum + k)
        regs = dict(op_a=op_a, op_b=op_b, lz=lz, sign=sign, special=special, is_int=is_int,
                    supported=supported, **sums)
        r = {k: pipe(1, v, k) for k, v in regs.items()}

        # -- step 2: the one hardware multiplier --------------------------------------------
        prod = Signal(signed(2 * mw) if has_int else 2 * mw)
        m.d.comb += prod.eq(r["op_a"] * r["op_b"])
        regs = dict(r)
        del regs["op_a"], regs["op_b"]
        regs["prod"] = prod
        r = {k: pipe(2, v, k) for k, v in regs.items()}

        # -- step 3: normalise and pack -------------------------------------------------------
        norm = Signal(pw)
        m.d.comb += norm.eq(r["prod"][0:pw] << r["lz"])
        top = norm[pw - 1]                              # else the leading one is at pw - 2
        lz = r["lz"]
        e_top = Signal(8)
        e_low = Signal(8)
        m.d.comb += [e_top.eq(r["x128"] - lz), e_low.eq(r["x127"] - lz)]   # packed bits only
        exp = Mux(top, e_top, e_low)
        underflow = Mux(top, r["x128"] <= lz, r["x127"] <= lz)       # e <= 0
        overflow = Mux(top, r["xm127"] >= lz, r["xm128"] >= lz)      # e >= 255
        mant = Mux(top, norm[0:pw - 1], Cat(Const(0, 1), norm[0:pw - 2]))
        s = r["sign"]
        fp_out = Signal(32)
        with m.If(r["special"] == 1):
            m.d.comb += fp_out.eq(CANONICAL_NAN_F32)
        with m.Elif(r["special"] == 2):
            m.d.comb += fp_out.eq(Cat(Const(0, 23), Const(0xFF, 8), s))
        with m.Elif((r["special"] == 3) | underflow):
            m.d.comb += fp_out.eq(Cat(Const(0, 31), s))              # zero, or FTZ
        with m.Elif(overflow):
            m.d.comb += fp_out.eq(Cat(Const(0, 23), Const(0xFF, 8), s))
        with m.Else():
            m.d.comb += fp_out.eq(Cat(Const(0, 23 - (pw - 1)), mant, exp[0:8], s))
        out = Signal(32)
        if has_int:
            m.d.comb += out.eq(Mux(r["is_int"], r["prod"].as_signed(), fp_out))
        else:
            m.d.comb += out.eq(fp_out)
        m.d.comb += self.p.eq(pipe(3, Mux(r["supported"], out, 0), "p"))
        return m
