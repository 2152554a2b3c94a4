"""The last stage of :class:`rtl.round.encoder.FPEncoder`: the encoded word, from the rounded
significand, the input's class and the range flags decided on its exponent."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import ge_const
from sim.dtypes import FORMAT_BITS, Format
from sim.rounding import canonical_nan, encode_params, max_finite_bits, target_bits

__all__ = ["FLOATS", "EncoderCompose"]


FLOATS = (Format.BF16, Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4)


class EncoderCompose(wiring.Component):
    """Compose the encoded value per format (combinational).

    Floats: NaN gives ``canonical_nan``; Inf gives Inf (max finite in formats without Inf);
    zero keeps its sign; a magnitude at or past the largest code gives Inf (max finite with
    ``rtz``; max finite in formats without Inf); otherwise ``sign | (ebase + k)``. INT8/INT32:
    NaN and zero give 0, Inf and out-of-range magnitudes saturate, otherwise ``+-mag`` with
    ``mag = k`` (INT32 with ``e_ge150``: ``int_big``). FP32: ``a`` with ``raw``, else ``a``
    with a canonical NaN and a DAZ zero.

    Members
    -------
    a : In(32)
        The FP32 input (its sign, and the FP32 pass-through).
    fmt : In(3)
        Target ``Format``.
    k : In(25)
        The rounded significand (integer part plus the rounding increment).
    ebase : In(18)
        Floats: the result's biased exponent field, ``X = max(0, e + bias - 128)``, shifted
        above the target's mantissa.
    int_big : In(32)
        INT32 with exponent 150..157: the exact significand shifted left by ``e - 150``.
    is_nan, is_inf, is_zero : In(1)
        The class of ``a`` (zero includes FP32 subnormals).
    e_ge150, e_ge158 : In(1)
        The exponent of ``a`` is at least 150 / 158 (INT8 / INT32 overflow).
    rtz, raw : In(1)
        The mode is RTZ / ``RAW_MODE``.
    ge_<fmt> : In(3)
        Per float format, bit ``h``: the exponent field reaches the overflow threshold minus
        ``h`` (the Inf exponent, or one past the largest finite exponent without Inf).
    eq_<fmt> : In(3)
        Formats without Inf: bit ``h``: the exponent field equals the largest finite one
        minus ``h`` (overflow then depends on the mantissa of ``k``).
    o : Out(32)
        The encoded value, low-aligned, upper bits zero.
    """

    def __init__(self):
        members = {
            "a": In(32), "fmt": In(FORMAT_BITS), "k": In(25), "ebase": In(18),
            "int_big": In(32), "is_nan": In(1), "is_inf": In(1), "is_zero": In(1),
            "e_ge150": In(1), "e_ge158": In(1), "rtz": In(1), "raw": In(1), "o": Out(32),
        }
        for f in FLOATS:
            members[f"ge_{f.name.lower()}"] = In(3)
            if not encode_params(f)[3]:
                members[f"eq_{f.name.lower()}"] = In(3)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        a, k, ebase = self.a, self.k, self.ebase
        is_nan, is_inf, is_zero = self.is_nan, self.is_inf, self.is_zero
        sign = a[31]
        o = self.o
        with m.Switch(self.fmt):
            for f in FLOATS:
                man_bits, bias, exp_bits, has_inf = encode_params(f)
                bits = target_bits(f)
                ge = getattr(self, f"ge_{f.name.lower()}")
                with m.Case(f):
                    mag = Signal(8 + man_bits + 2, name=f"mag_{f.name.lower()}")
                    m.d.comb += mag.eq(ebase + k)
                    s = sign << (bits - 1)
                    # h = k >> man_bits: 2 (bit man_bits + 1, the rest zero), 1 or 0
                    h_is = (~k[man_bits] & ~k[man_bits + 1], k[man_bits], k[man_bits + 1])
                    big = Signal(name=f"ovf_{f.name.lower()}")
                    if has_inf:
                        m.d.comb += big.eq((h_is[0] & ge[0]) | (h_is[1] & ge[1]) |
                                           (h_is[2] & ge[2]))
                        inf_code = ((1 << exp_bits) - 1) << man_bits
                        with m.If(is_nan):
                            m.d.comb += o.eq(canonical_nan(f))
                        with m.Elif(is_inf):
                            m.d.comb += o.eq(s | inf_code)
                        with m.Elif(is_zero):
                            m.d.comb += o.eq(s)
                        with m.Elif(big):                   # mag >= inf_code
                            m.d.comb += o.eq(s | Mux(self.rtz, inf_code - 1, inf_code))
                        with m.Else():
                            m.d.comb += o.eq(s | mag)
                    else:
                        eq = getattr(self, f"eq_{f.name.lower()}")
                        maxf = max_finite_bits(f)
                        man_gt = ge_const(k[:man_bits], (maxf & ((1 << man_bits) - 1)) + 1)
                        m.d.comb += big.eq(
                            (h_is[0] & (ge[0] | (eq[0] & man_gt))) |
                            (h_is[1] & (ge[1] | (eq[1] & man_gt))) |
                            (h_is[2] & ge[2]))     # h = 2: the mantissa bits are zero
                        with m.If(is_nan):
                            m.d.comb += o.eq(canonical_nan(f))
                        with m.Elif(is_zero):
                            m.d.comb += o.eq(s)
                        with m.Elif(is_inf | big):          # mag > maxf
                            m.d.comb += o.eq(s | maxf)
                        with m.Else():
                            m.d.comb += o.eq(s | mag)
            for f, bits, lo_mag, hi in ((Format.INT8, 8, 128, 127),
                                        (Format.INT32, 32, 1 << 31, (1 << 31) - 1)):
                with m.Case(f):
                    mag = Signal(32, name=f"mag_{f.name.lower()}")
                    if f == Format.INT32:
                        # e in 150..157: exact, shifted left by e - 150 (no rounding)
                        m.d.comb += mag.eq(Mux(self.e_ge150, self.int_big, k))
                        ovf = self.e_ge158 | is_inf
                    else:
                        m.d.comb += mag.eq(k)
                        ovf = self.e_ge150 | is_inf
                    neg = Signal(32, name=f"neg_{f.name.lower()}")
                    m.d.comb += neg.eq(-mag)
                    mask = (1 << bits) - 1
                    with m.If(is_nan | is_zero):
                        m.d.comb += o.eq(0)
                    # The range checks as logic against constants (ge_const), beside the
                    # negation's carry chain rather than as two more chains.
                    with m.Elif(sign):
                        with m.If(ovf | ge_const(mag, lo_mag + 1)):
                            m.d.comb += o.eq((-lo_mag) & mask)
                        with m.Else():
                            m.d.comb += o.eq(neg[:bits])
                    with m.Else():
                        with m.If(ovf | ge_const(mag, hi + 1)):
                            m.d.comb += o.eq(hi)
                        with m.Else():
                            m.d.comb += o.eq(mag)
            with m.Case(Format.FP32):
                with m.If(self.raw):
                    m.d.comb += o.eq(a)
                with m.Elif(is_nan):
                    m.d.comb += o.eq(0x7FC00000)
                with m.Elif(is_zero):
                    m.d.comb += o.eq(sign << 31)
                with m.Else():
                    m.d.comb += o.eq(a)
        return m
