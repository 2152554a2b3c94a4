"""Number formats: the format table and bit-exact golden models of decode and FP32 arithmetic.

Everything here works on bit patterns held in numpy unsigned-integer arrays and uses integer
arithmetic only, so that it can be read against ``docs/interfaces.md`` section 2 and compared
bit for bit with the RTL in ``rtl/arith/``:

* :func:`decode` narrow (or INT8/INT32) to FP32 bits; exact except INT32, which rounds RNE.
* :func:`mul_exact` the exact FP32 product of two narrow values (FP32 operands used as TF32);
  INT8 operands give the INT32 product.
* :func:`fp32_add`, :func:`fp32_mul` FP32 with RNE, DAZ/FTZ and the canonical NaN.
* :func:`int32_add` wrap-around INT32 accumulation.

The FP32 results are defined as "the IEEE 754 result (gradual underflow, RNE), then any
subnormal result flushed to a zero of the same sign"; subnormal inputs are read as zeros of the
same sign. This is numpy's float32 result with DAZ/FTZ applied, which is how ``tests/`` checks it.

Encode (FP32 to narrow, RNE/RTZ/SR) lives in ``sim/rounding.py`` and uses the table below.
This module imports neither Amaranth nor cocotb.
"""

from dataclasses import dataclass

import numpy as np

from sim.dtypes import CANONICAL_NAN_F32, FLOAT_SPECS, STORAGE_BITS, Format

__all__ = [
    "FP8_FORMATS", "FLOAT_FORMATS", "NARROW_FLOAT_FORMATS", "CANONICAL_NAN", "FormatInfo",
    "FORMAT_INFO", "bias_range", "float_spec", "max_finite_bits", "min_normal_bits",
    "inf_bits", "canonical_nan", "max_finite", "min_normal", "min_subnormal", "fields",
    "is_nan", "is_inf", "is_zero", "is_subnormal", "daz", "ftz", "round_to_fp32", "decode",
    "tf32_truncate", "mul_exact", "fp32_add", "fp32_mul", "int32_add", "f32_bits", "f32_value",
    "F32_SIGN", "F32_EXP_MASK", "F32_MAN_MASK", "F32_INF",
]

#: The configurable FP8 ("cFP8") formats; only these accept a ``bias=`` override.
FP8_FORMATS = (Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4)
#: Every binary floating-point format (FP32 included).
FLOAT_FORMATS = tuple(FLOAT_SPECS)
#: The floating-point formats narrower than FP32.
NARROW_FLOAT_FORMATS = (Format.BF16, Format.FP16) + FP8_FORMATS

#: Canonical (positive, quiet) NaN of each floating-point format, as in docs/interfaces.md.
#: Every conversion to a format produces this NaN for any NaN input.
CANONICAL_NAN = {
    Format.FP32: CANONICAL_NAN_F32,
    Format.BF16: 0x7FC0,
    Format.FP16: 0x7E00,
    Format.FP8_E4M3: 0x7F,
    Format.FP8_E5M2: 0x7E,
    Format.FP8_E3M4: 0x7C,
}

F32_SIGN = 0x80000000
F32_EXP_MASK = 0x7F800000
F32_MAN_MASK = 0x007FFFFF
F32_INF = 0x7F800000


def _as_format(fmt):
    try:
        return Format(fmt)
    except ValueError:
        raise ValueError(f"fmt must be a Format code 0..7, not {fmt!r}") from None


def bias_range(fmt):
    """The exponent biases allowed for ``fmt``: those for which every finite value decodes to
    an FP32 normal (or zero). For non-FP8 formats only the standard bias."""
    fmt = _as_format(fmt)
    spec = FLOAT_SPECS.get(fmt)
    if spec is None:
        raise ValueError(f"fmt must be a floating-point format, not {fmt.name}")
    if fmt not in FP8_FORMATS:
        return range(spec.bias, spec.bias + 1)
    top_field = (1 << spec.exp_bits) - (1 if spec.nan_style == "fn" else 2)
    lo = top_field - 127                      # largest exponent must be <= 127
    hi = 1 - spec.man_bits + 126              # smallest subnormal must be >= 2**-126
    return range(lo, hi + 1)


def float_spec(fmt, bias=None):
    """The :class:`sim.dtypes.FloatSpec` of ``fmt`` with the exponent bias ``bias`` (FP8 only).

    Raises
    ------
    ValueError
        If ``fmt`` is not a floating-point format, or ``bias`` is given for a non-FP8 format or
        is outside :func:`bias_range`.
    """
    fmt = _as_format(fmt)
    if fmt not in FLOAT_SPECS:
        raise ValueError(f"fmt must be a floating-point format, not {fmt.name}")
    spec = FLOAT_SPECS[fmt]
    if bias is None or bias == spec.bias:
        return spec
    if fmt not in FP8_FORMATS:
        raise ValueError(f"bias can only be set for the FP8 formats, not for {fmt.name}")
    if not isinstance(bias, (int, np.integer)) or isinstance(bias, bool):
        raise TypeError(f"bias must be an integer, not {bias!r}")
    r = bias_range(fmt)
    if int(bias) not in r:
        raise ValueError(f"bias of {fmt.name} must be in {r.start}..{r.stop - 1}, not {bias}")
    return type(spec)(spec.name, spec.exp_bits, spec.man_bits, int(bias), spec.has_inf,
                      spec.nan_style)


# -- per-format constants (bit patterns do not depend on the bias; values do) ---------------

def _top_exp_field(spec):
    """Largest exponent field that holds finite numbers."""
    return (1 << spec.exp_bits) - (1 if spec.nan_style == "fn" else 2)


def max_finite_bits(fmt):
    """Bit pattern of the largest positive finite value."""
    spec = float_spec(fmt)
    man = (1 << spec.man_bits) - (2 if spec.nan_style == "fn" else 1)
    return (_top_exp_field(spec) << spec.man_bits) | man


def min_normal_bits(fmt):
    """Bit pattern of the smallest positive normal value."""
    return 1 << float_spec(fmt).man_bits


def inf_bits(fmt):
    """Bit pattern of +Inf, or ``None`` for a format without Inf (E4M3)."""
    spec = float_spec(fmt)
    if not spec.has_inf:
        return None
    return ((1 << spec.exp_bits) - 1) << spec.man_bits


def canonical_nan(fmt):
    """The canonical NaN bit pattern of a floating-point format."""
    return CANONICAL_NAN[_as_format(fmt)]


def max_finite(fmt, bias=None):
    """Largest finite value (a Python float, exact)."""
    spec = float_spec(fmt, bias)
    man = (1 << spec.man_bits) - (2 if spec.nan_style == "fn" else 1)
    return float((1 << spec.man_bits) + man) * 2.0 ** (_top_exp_field(spec) - spec.bias
                                                        - spec.man_bits)


def min_normal(fmt, bias=None):
    """Smallest positive normal value."""
    return 2.0 ** (1 - float_spec(fmt, bias).bias)


def min_subnormal(fmt, bias=None):
    """Smallest positive subnormal value."""
    spec = float_spec(fmt, bias)
    return 2.0 ** (1 - spec.bias - spec.man_bits)


@dataclass(frozen=True)
class FormatInfo:
    """Everything about one floating-point format at its standard bias (see the module docs)."""
    fmt: Format
    name: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool
    nan_style: str
    max_finite_bits: int
    min_normal_bits: int
    inf_bits: "int | None"
    nan_bits: int
    max_finite: float
    min_normal: float
    min_subnormal: float
    #: What encode does on overflow under RNE: "inf" (IEEE-like) or "saturate" (E4M3).
    overflow: str


FORMAT_INFO = {
    f: FormatInfo(
        fmt=f, name=s.name, bits=s.bits, exp_bits=s.exp_bits, man_bits=s.man_bits, bias=s.bias,
        has_inf=s.has_inf, nan_style=s.nan_style, max_finite_bits=max_finite_bits(f),
        min_normal_bits=min_normal_bits(f), inf_bits=inf_bits(f), nan_bits=CANONICAL_NAN[f],
        max_finite=max_finite(f), min_normal=min_normal(f), min_subnormal=min_subnormal(f),
        overflow="inf" if s.has_inf else "saturate")
    for f, s in FLOAT_SPECS.items()
}


# -- classification on bit patterns --------------------------------------------------------

def _u64(bits):
    return np.asarray(bits).astype(np.uint64)


def fields(bits, fmt):
    """Split bit patterns of a floating-point format into (sign, exponent field, mantissa
    field), each a uint64 array. Bits above the format's width are ignored."""
    spec = float_spec(fmt)
    x = _u64(bits)
    man = x & np.uint64((1 << spec.man_bits) - 1)
    exp = (x >> np.uint64(spec.man_bits)) & np.uint64((1 << spec.exp_bits) - 1)
    sign = (x >> np.uint64(spec.exp_bits + spec.man_bits)) & np.uint64(1)
    return sign, exp, man


def is_nan(bits, fmt):
    """True where the pattern is a NaN (any sign or payload)."""
    spec = float_spec(fmt)
    _, exp, man = fields(bits, fmt)
    all_ones = np.uint64((1 << spec.exp_bits) - 1)
    if spec.nan_style == "fn":
        return (exp == all_ones) & (man == np.uint64((1 << spec.man_bits) - 1))
    return (exp == all_ones) & (man != 0)


def is_inf(bits, fmt):
    """True where the pattern is +-Inf (always False for E4M3, which has none)."""
    spec = float_spec(fmt)
    _, exp, man = fields(bits, fmt)
    if not spec.has_inf:
        return np.zeros(np.shape(exp), dtype=bool)
    return (exp == np.uint64((1 << spec.exp_bits) - 1)) & (man == 0)


def is_zero(bits, fmt):
    """True where the pattern is +-0."""
    _, exp, man = fields(bits, fmt)
    return (exp == 0) & (man == 0)


def is_subnormal(bits, fmt):
    """True where the pattern is a nonzero subnormal."""
    _, exp, man = fields(bits, fmt)
    return (exp == 0) & (man != 0)


def daz(bits):
    """FP32 denormals-are-zero: subnormal patterns become a zero of the same sign."""
    x = np.asarray(bits).astype(np.uint32)
    sub = ((x & np.uint32(F32_EXP_MASK)) == 0)
    return np.where(sub, x & np.uint32(F32_SIGN), x).astype(np.uint32)


#: FTZ on a result is the same operation as DAZ on an input.
ftz = daz


# -- exact rounding of an integer significand to FP32 --------------------------------------

def _bit_length(mag):
    """Number of significant bits of each element of a uint64 array (0 for 0)."""
    x = mag.copy()
    n = np.zeros(x.shape, dtype=np.int64)
    for k in (32, 16, 8, 4, 2, 1):
        big = (x >> np.uint64(k)) != 0
        x = np.where(big, x >> np.uint64(k), x)
        n += np.where(big, k, 0)
    return n + (x != 0)


def round_to_fp32(sign, mag, exp2):
    """FP32 bits of ``(-1)**sign * mag * 2**exp2`` rounded to nearest, ties to even, exactly as
    IEEE 754 does: gradual underflow (subnormal results are produced here; callers apply FTZ)
    and overflow to Inf.

    ``mag`` holds non-negative integers below 2**60; ``sign`` is 0/1; ``exp2`` any integers.
    """
    sign = np.asarray(sign).astype(np.uint64)
    mag = np.asarray(mag).astype(np.uint64)
    exp2 = np.asarray(exp2).astype(np.int64)
    sign, mag, exp2 = np.broadcast_arrays(sign, mag, exp2)
    assert not np.any(mag >> np.uint64(60)), "significand too wide"
    n = _bit_length(mag)
    # Weight of the last significand bit kept: 24 significant bits, but never below 2**-149.
    lsb = np.maximum(exp2 + n - 24, -149)
    shift = lsb - exp2
    # shift <= 0: exact, move the significand up.
    up = np.clip(-shift, 0, 63).astype(np.uint64)
    q_exact = mag << up
    # shift > 0: drop `shift` bits, round to nearest, ties to even.
    s = np.clip(shift, 1, 62).astype(np.uint64)
    q = mag >> s
    rem = mag & ((np.uint64(1) << s) - np.uint64(1))
    half = np.uint64(1) << (s - np.uint64(1))
    round_up = (rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1))
    q_round = q + round_up.astype(np.uint64)
    q = np.where(shift <= 0, q_exact, q_round)
    # A carry out of the significand (q == 2**24) moves to the next binade; q is even then.
    carry = q >> np.uint64(24) != 0
    q = np.where(carry, q >> np.uint64(1), q)
    lsb = lsb + carry
    # A significand q in [2**23, 2**24) with last-bit weight 2**lsb has biased exponent
    # lsb + 150; below 2**23 only with lsb = -149 (a subnormal, exponent field 0). Both are
    # ((lsb + 149) << 23) + q.
    out = ((lsb + 149).astype(np.uint64) << np.uint64(23)) + q
    out = np.where(lsb + 150 >= 255, np.uint64(F32_INF), out)
    out = np.where(mag == 0, np.uint64(0), out)
    return ((sign << np.uint64(31)) | out).astype(np.uint32)


def _f32_parts(bits):
    """(sign, significand, exponent) of FP32 patterns with value (-1)**s * sig * 2**exp;
    meaningful for finite values (zero gives sig 0, subnormal sig without hidden bit)."""
    x = _u64(bits) & np.uint64(0xFFFFFFFF)
    sign = x >> np.uint64(31)
    exp_field = ((x >> np.uint64(23)) & np.uint64(0xFF)).astype(np.int64)
    man = x & np.uint64(F32_MAN_MASK)
    sig = np.where(exp_field == 0, man, man | np.uint64(1 << 23))
    exp = np.maximum(exp_field, 1) - 150
    return sign, sig, exp


def _f32_is_nan(x):
    return ((x & np.uint32(F32_EXP_MASK)) == np.uint32(F32_EXP_MASK)) & \
        ((x & np.uint32(F32_MAN_MASK)) != 0)


def _f32_is_inf(x):
    return (x & np.uint32(0x7FFFFFFF)) == np.uint32(F32_INF)


def _f32_is_zero(x):
    return (x & np.uint32(0x7FFFFFFF)) == 0


# -- decode -------------------------------------------------------------------------------

def decode(bits, fmt, bias=None):
    """Decode patterns of format ``fmt`` (low-aligned; higher bits ignored) to FP32 bits.

    * Floating-point formats: exact for every pattern; narrow subnormals become FP32 normals
      (BF16 subnormals stay FP32 subnormals); +-0 and +-Inf keep their sign; every NaN becomes
      the canonical FP32 NaN ``0x7FC00000``. FP32 passes through unchanged.
    * INT8: the exact FP32 value of the signed byte. INT32: rounded RNE (numpy's int->float32).
    * ``bias`` overrides the exponent bias of an FP8 format (cFP8).
    """
    fmt = _as_format(fmt)
    x = _u64(bits) & np.uint64((1 << STORAGE_BITS[fmt]) - 1)
    if fmt == Format.FP32:
        return x.astype(np.uint32)
    if fmt in (Format.INT8, Format.INT32):
        width = STORAGE_BITS[fmt]
        negative = (x >> np.uint64(width - 1)) & np.uint64(1)
        mag = np.where(negative == 1, (np.uint64(1) << np.uint64(width)) - x, x)
        return round_to_fp32(negative, mag, 0)
    spec = float_spec(fmt, bias)
    sign, exp, man = fields(x, fmt)
    exp = exp.astype(np.int64)
    # value = sig * 2**(e - bias - man_bits), with the hidden bit for normals and e = 1 for
    # subnormals.
    sig = np.where(exp == 0, man, man | np.uint64(1 << spec.man_bits))
    exp2 = np.maximum(exp, 1) - spec.bias - spec.man_bits
    out = round_to_fp32(sign, sig, exp2)      # exact: bias_range keeps values in FP32 range
    out = np.where(is_inf(x, fmt), (sign << np.uint64(31)) | np.uint64(F32_INF), out)
    out = np.where(is_nan(x, fmt), np.uint64(CANONICAL_NAN_F32), out)
    return out.astype(np.uint32)


def tf32_truncate(bits):
    """FP32 bits truncated to TF32 (the low 13 mantissa bits cleared, round toward zero);
    NaNs become the canonical NaN (truncation could otherwise turn a NaN into Inf)."""
    x = np.asarray(bits).astype(np.uint32)
    return np.where(_f32_is_nan(x), np.uint32(CANONICAL_NAN_F32),
                    x & np.uint32(0xFFFFE000)).astype(np.uint32)


# -- arithmetic ---------------------------------------------------------------------------

def fp32_mul(a, b):
    """FP32 product, RNE, DAZ/FTZ, canonical NaN (NaN input, or 0 x Inf), sign = sa ^ sb."""
    a = daz(a)
    b = daz(b)
    a, b = np.broadcast_arrays(a, b)
    sa, ma, ea = _f32_parts(a)
    sb, mb, eb = _f32_parts(b)
    sign = sa ^ sb
    out = ftz(round_to_fp32(sign, ma * mb, ea + eb))   # 24 x 24 bits: exact in uint64
    zero = _f32_is_zero(a) | _f32_is_zero(b)
    inf = _f32_is_inf(a) | _f32_is_inf(b)
    out = np.where(zero, (sign << np.uint64(31)).astype(np.uint32), out)
    out = np.where(inf, ((sign << np.uint64(31)) | np.uint64(F32_INF)).astype(np.uint32), out)
    invalid = _f32_is_nan(a) | _f32_is_nan(b) | (zero & inf)
    return np.where(invalid, np.uint32(CANONICAL_NAN_F32), out).astype(np.uint32)


def fp32_add(a, b):
    """FP32 sum, RNE, DAZ/FTZ, canonical NaN (NaN input, or Inf - Inf).

    An exact zero sum is +0, except (-0) + (-0) = -0 (IEEE 754 under RNE); Inf + finite = Inf.
    """
    a = daz(a)
    b = daz(b)
    a, b = np.broadcast_arrays(a, b)
    sa, ma, ea = _f32_parts(a)
    sb, mb, eb = _f32_parts(b)
    va = np.where(sa == 1, -ma.astype(np.int64), ma.astype(np.int64))
    vb = np.where(sb == 1, -mb.astype(np.int64), mb.astype(np.int64))
    # Align on the operand with the larger exponent. If the other one is more than 32 binades
    # below, it is smaller than 2**-8 of the larger one's last bit: only its sign and that it is
    # nonzero can affect RNE (a "sticky" bit), so it is replaced by +-1 at 2**-32 of that bit.
    swap = ea < eb
    e_hi = np.where(swap, eb, ea)
    e_lo = np.where(swap, ea, eb)
    v_hi = np.where(swap, vb, va)
    v_lo = np.where(swap, va, vb)
    d = e_hi - e_lo
    v_lo = np.where(d > 32, np.sign(v_lo), v_lo)
    d = np.minimum(d, 32)
    total = (v_hi << d) + v_lo                  # exact, scale 2**(e_hi - d), |total| < 2**58
    sign = np.where(total == 0, sa & sb, total < 0).astype(np.uint64)
    out = ftz(round_to_fp32(sign, np.abs(total), e_hi - d))
    inf_a = _f32_is_inf(a)
    inf_b = _f32_is_inf(b)
    out = np.where(inf_b, b, out)
    out = np.where(inf_a, a, out)
    invalid = _f32_is_nan(a) | _f32_is_nan(b) | (inf_a & inf_b & (sa != sb))
    return np.where(invalid, np.uint32(CANONICAL_NAN_F32), out).astype(np.uint32)


def mul_exact(a, b, fmt, bias=None):
    """Exact product of two values of format ``fmt``, as FP32 bits (INT8: INT32 bits).

    Floating-point formats: both operands are decoded (:func:`decode`; FP32 operands are
    truncated to TF32 first) and multiplied with :func:`fp32_mul`. The significands have at
    most 11 bits each, so the product never rounds; only the exponent range can be left: a
    product below 2**-126 (or with a BF16/TF32 subnormal operand, DAZ) is a signed zero, one at
    or above 2**128 is Inf (only BF16/TF32 can get there at the standard biases).
    NaN operands or 0 x Inf give the canonical NaN 0x7FC00000.

    INT8: the signed bytes' product as INT32 two's-complement bits (uint32).
    """
    fmt = _as_format(fmt)
    if fmt == Format.INT8:
        def s8(v):
            v = (_u64(v) & np.uint64(0xFF)).astype(np.int64)
            return np.where(v >= 128, v - 256, v)
        return (s8(a) * s8(b)).astype(np.uint32)
    if fmt == Format.INT32:
        raise ValueError("mul_exact does not take INT32 operands (there is no INT32 multiply)")
    if fmt == Format.FP32:
        da = tf32_truncate(a)
        db = tf32_truncate(b)
    else:
        da = decode(a, fmt, bias)
        db = decode(b, fmt, bias)
    return fp32_mul(da, db)


def int32_add(a, b):
    """INT32 sum with wrap-around, on uint32 bit patterns."""
    return ((_u64(a) + _u64(b)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


# -- conveniences for tests --------------------------------------------------------------

def f32_bits(values):
    """FP32 bit patterns (uint32) of float values (rounded to float32 by numpy)."""
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def f32_value(bits):
    """float32 values of FP32 bit patterns."""
    return np.asarray(bits).astype(np.uint32).view(np.float32)
