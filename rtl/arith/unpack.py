"""Unpacking of a floating-point bit pattern into sign, significand, exponent and class: the
front end shared by :class:`~rtl.arith.decoder.FormatDecoder` and
:class:`~rtl.arith.fp_mul.FPMultiplier`."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Value

from sim.dtypes import Format
from sim.formats import float_spec

__all__ = ["SIG_BITS", "Unpacked", "unpack_float"]

#: Significand bits (hidden bit included) each format brings to a multiplier; FP32 counts as
#: TF32 (10 mantissa bits kept).
SIG_BITS = {
    Format.FP32: 11, Format.BF16: 8, Format.FP16: 11, Format.FP8_E4M3: 4,
    Format.FP8_E5M2: 3, Format.FP8_E3M4: 5,
}


@dataclass
class Unpacked:
    """A finite value is ``(-1)**sign * sig * 2**(exp - (sig_w - 1))``: ``sig`` has ``sig_w``
    bits with the hidden bit of a normal at the top; subnormals have leading zeros. ``zero``,
    ``inf`` and ``nan`` classify the pattern (``sig``/``exp`` are meaningless for them).
    ``exp_raw`` is ``exp + bias`` (the exponent field, 1 for subnormals), for users that fold
    the format's constant bias into a later sum."""
    sign: Value
    sig: Value
    exp: Value
    zero: Value
    inf: Value
    nan: Value
    exp_raw: Value
    bias: int


def unpack_float(bits, fmt, sig_w, bias=None):
    """Unpack the low bits of ``bits`` as format ``fmt`` (a Python constant).

    FP32 is read as TF32 (low 13 mantissa bits ignored, except that they still make a NaN).
    FP32/TF32 and BF16 subnormals read as zeros (DAZ): they cannot be represented with the
    FP32 exponent range after a multiplication anyway, and the interface defines FP32
    arithmetic as DAZ. FP16 and FP8 subnormals are kept (leading zeros in ``sig``).
    """
    fmt = Format(fmt)
    bits = Value.cast(bits)
    if fmt == Format.FP32:
        exp_bits, man_bits, bias_, fn = 8, 10, 127, False
        man = bits[13:23]
        man_nonzero = bits[0:23] != 0
        e = bits[23:31]
        sign = bits[31]
        daz = True
    else:
        spec = float_spec(fmt, bias)
        exp_bits, man_bits, bias_, fn = spec.exp_bits, spec.man_bits, spec.bias, \
            spec.nan_style == "fn"
        man = bits[0:man_bits]
        man_nonzero = man != 0
        e = bits[man_bits:man_bits + exp_bits]
        sign = bits[man_bits + exp_bits]
        daz = fmt == Format.BF16
    if man_bits + 1 > sig_w:
        raise ValueError(f"sig_w must be at least {man_bits + 1} for {fmt.name}, not {sig_w}")
    e_max = (1 << exp_bits) - 1
    sig = Cat(Const(0, sig_w - man_bits - 1), man, e != 0)
    exp_raw = Mux(e == 0, 1, e)
    exp = exp_raw - bias_
    zero = (e == 0) if daz else ((e == 0) & ~man_nonzero)
    if fn:
        inf = Const(0, 1)
        nan = (e == e_max) & (man == (1 << man_bits) - 1)
    else:
        inf = (e == e_max) & ~man_nonzero
        nan = (e == e_max) & man_nonzero
    return Unpacked(sign=sign, sig=sig, exp=exp, zero=zero, inf=inf, nan=nan,
                    exp_raw=exp_raw, bias=bias_)
