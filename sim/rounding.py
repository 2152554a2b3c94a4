"""Golden model of the FP32-to-narrow encoder and of the stochastic-rounding unit.

Integer numpy on bit patterns, written from ``docs/interfaces.md`` section 2 and
``docs/rounding.md``; it imports neither Amaranth nor cocotb. The RTL (``rtl/round/``) must
agree with it bit for bit; ``tests/test_rounding_*.py`` check it against ml_dtypes and a float64
reference.

Rules (``encode``)
------------------
* FP32 input is DAZ: a subnormal input is a zero of the same sign.
* Any NaN becomes the target's canonical NaN (positive); INT targets give 0.
* Narrow subnormals are produced (not flushed).
* Overflow: formats with Inf go to Inf under RNE and SR (when the stochastic choice carries
  past max finite, or the truncated value is already past it) and to max finite under RTZ;
  E4M3 (no Inf) saturates to +-448 in every mode and maps +-Inf to +-448.
* INT8/INT32 targets round with the mode and saturate; +-Inf saturate.
* FP32 target: passes through, except that subnormals are flushed (DAZ) and NaN is canonical.
* SR with ``n_rand`` random bits ``r`` (uniform on [0, 2**n_rand)): the discarded part of the
  significand, as a fraction ``d`` of the target ULP, is first rounded to ``n_rand`` bits with
  round-to-nearest-even (``f = RNE(d * 2**n_rand)``, 0..2**n_rand); the result rounds away from
  zero iff ``f + r >= 2**n_rand``. This is the bit-level "add N random bits below the LSB and
  truncate", with the extra RNE step on the fraction (Fitzgibbon & Felix, ARITH 2025) that
  removes the -2**-(N+1) ULP mean bias of plain truncation. ``sr_variant="trunc"`` gives the plain
  truncating variant (``f = floor(d * 2**n_rand)``) for comparison; the RTL implements "rne".
"""

import numpy as np

from sim import formats as _formats
from sim.dtypes import FLOAT_SPECS, Format, RoundMode

__all__ = ["DEFAULT_N_RAND", "MAX_N_RAND", "RAW_MODE", "encode", "canonical_nan", "max_finite_bits",
           "target_bits", "encode_params", "RoundingUnitModel", "SR_VARIANTS"]

#: Default number of random bits: 16 makes SR exact (no bias at all) for FP32->BF16 (16
#: discarded bits) and FP32->FP16 (13) normals, and one 32-bit generator word covers it.
DEFAULT_N_RAND = 16
#: The generator produces 32-bit words.
MAX_N_RAND = 32
SR_VARIANTS = ("rne", "trunc")
#: Mode code 3 (not a ``RoundMode``, never in an instruction): with target FP32 the encoder
#: passes the 32 bits unchanged (no DAZ, no NaN canonicalisation). The vector engine uses it
#: for its exact INT32 copy (``sim.vector.raw_copy``).
RAW_MODE = 3

_INT_RANGE = {Format.INT8: (-128, 127), Format.INT32: (-(1 << 31), (1 << 31) - 1)}


def target_bits(fmt):
    """Width in bits of the encoded value of ``fmt`` (low-aligned in the 32-bit output)."""
    fmt = Format(fmt)
    if fmt in _INT_RANGE:
        return 8 if fmt == Format.INT8 else 32
    return FLOAT_SPECS[fmt].bits


def canonical_nan(fmt):
    """Canonical (positive) NaN of a float format, from the format table ``sim.formats``."""
    return int(_formats.canonical_nan(Format(fmt)))


def max_finite_bits(fmt):
    """Bit pattern of the largest finite positive value of a float format."""
    return int(_formats.max_finite_bits(Format(fmt)))


def encode_params(fmt, bias=None):
    """The per-format constants the datapath uses: (man_bits, bias, exp_bits, has_inf).
    ``bias`` overrides the exponent bias of an FP8 format (cFP8, golden model only)."""
    spec = _formats.float_spec(Format(fmt), bias)
    return spec.man_bits, spec.bias, spec.exp_bits, spec.has_inf


def _check_n_rand(n_rand):
    if isinstance(n_rand, bool) or not isinstance(n_rand, (int, np.integer)):
        raise TypeError(f"n_rand must be an integer, not {n_rand!r}")
    if not 1 <= n_rand <= MAX_N_RAND:
        raise ValueError(f"n_rand must be an integer in 1..{MAX_N_RAND}, not {n_rand}")


def _round_up(q, d, shift, mode, rand, n_rand, sr_variant):
    """Decide, per element, whether the magnitude ``q`` (integer part, in target ULPs) is
    incremented, given the discarded part ``d`` (``shift`` bits, ``shift >= 1``)."""
    one = np.int64(1)
    if mode == RoundMode.RTZ:
        return np.zeros_like(q)
    if mode == RoundMode.RNE:
        half = one << (shift - 1)
        return ((d > half) | ((d == half) & ((q & 1) == 1))).astype(np.int64)
    # SR: f = d as a fraction of the ULP, on a grid of 2**n_rand (exact if shift <= n_rand).
    f_exact = d << np.maximum(n_rand - shift, 0)
    drop = np.maximum(shift - n_rand, 0)
    ftr = d >> drop
    rem = d - (ftr << drop)
    if sr_variant == "rne":
        half = np.where(drop > 0, one << np.maximum(drop - 1, 0), 0)
        inc = (drop > 0) & ((rem > half) | ((rem == half) & ((ftr & 1) == 1)))
        f_round = ftr + inc.astype(np.int64)
    else:
        f_round = ftr
    f = np.where(shift <= n_rand, f_exact, f_round)
    return ((f + rand) >> n_rand).astype(np.int64)


def encode(f32_bits, fmt, mode, rand=None, n_rand=DEFAULT_N_RAND, sr_variant="rne", bias=None):
    """Encode FP32 bit patterns into ``fmt`` with rounding ``mode``.

    Parameters
    ----------
    f32_bits : array_like of uint32
        FP32 bit patterns.
    fmt : Format
        Target format (any ``Format``; FP32 passes through with DAZ and canonical NaN).
    mode : RoundMode or RAW_MODE
        RNE, RTZ or SR; ``RAW_MODE`` (with ``fmt`` FP32 only) returns the bits unchanged.
    rand : array_like of int, optional
        For SR: one ``n_rand``-bit random integer per element (broadcast against ``f32_bits``).
    n_rand : int
        Random bits per SR decision, 1..32.
    sr_variant : {"rne", "trunc"}
        How the discarded fraction is reduced to ``n_rand`` bits (see the module docstring).
    bias : int, optional
        Exponent bias of an FP8 target (cFP8); the RTL supports only the standard biases.

    Returns
    -------
    numpy.ndarray of uint32
        The encoded values, low-aligned (INT8 as two's complement in bits [7:0]).
    """
    _check_n_rand(n_rand)
    fmt = Format(fmt)
    if mode == RAW_MODE:
        if fmt != Format.FP32:
            raise ValueError(f"mode RAW_MODE needs fmt FP32, not {fmt.name}")
        return np.asarray(f32_bits, dtype=np.uint32).copy()
    mode = RoundMode(mode)
    if sr_variant not in SR_VARIANTS:
        raise ValueError(f"sr_variant must be one of {', '.join(SR_VARIANTS)}, not {sr_variant!r}")
    x = np.asarray(f32_bits, dtype=np.uint32).astype(np.int64)
    if mode == RoundMode.SR:
        if rand is None:
            raise ValueError("rand is required for mode SR")
        r = np.asarray(rand).astype(np.int64)
        if np.any((r < 0) | (r >= (1 << n_rand))):
            raise ValueError(f"rand must hold {n_rand}-bit unsigned integers")
        r = np.broadcast_to(r, x.shape)
    else:
        r = np.zeros_like(x)

    sign = x >> 31
    e = (x >> 23) & 0xFF
    m = x & 0x7FFFFF
    is_nan = (e == 255) & (m != 0)
    is_inf = (e == 255) & (m == 0)
    is_zero = e == 0                      # zero or subnormal: DAZ
    sig = m | (1 << 23)
    E = e - 127                           # unbiased exponent of a normal input

    if fmt == Format.FP32:
        out = np.where(is_zero, sign << 31, x)
        out = np.where(is_nan, 0x7FC00000, out)
        return out.astype(np.uint32)

    if fmt in _INT_RANGE:
        lo, hi = _INT_RANGE[fmt]
        width = target_bits(fmt)
        # value = sig * 2**(E-23); the integer grid has its LSB at 2**0.
        shift = 23 - E
        exact = shift <= 0
        sh = np.clip(shift, 1, 62)        # beyond 62 every decision is the same (sig < 2**24)
        q = sig >> sh
        d = sig - (q << sh)
        k = q + _round_up(q, d, sh, mode, r, n_rand, sr_variant)
        # Values >= 2**40 saturate anyway; cap the left shift to stay inside int64.
        k = np.where(exact, sig << np.clip(-shift, 0, 16), k)
        val = np.where(sign == 1, -k, k)
        val = np.clip(val, lo, hi)
        val = np.where(is_inf, np.where(sign == 1, lo, hi), val)
        val = np.where(is_zero | is_nan, 0, val)
        return (val & ((1 << width) - 1)).astype(np.uint32)

    man_bits, bias, exp_bits, has_inf = encode_params(fmt, bias)
    width = target_bits(fmt)
    eb = E + bias                         # target biased exponent if the result is normal
    shift = 23 - man_bits + np.maximum(0, 1 - eb)
    # sig < 2**24, so for shift >= n_rand + 26 every mode already decides "down" and q = 0:
    # capping keeps the arithmetic inside int64 without changing any result.
    shift = np.minimum(shift, 62)
    q = sig >> shift
    d = sig - (q << shift)
    k = q + _round_up(q, d, shift, mode, r, n_rand, sr_variant)
    # Normal: ((eb-1) << M) + k with k in [2**M, 2**(M+1)]: a carry out of the mantissa
    # increments the exponent. Subnormal (eb <= 0): the pattern is k itself, and k == 2**M is
    # the smallest normal.
    mag = ((np.maximum(eb, 1) - 1) << man_bits) + k
    if has_inf:
        inf_code = ((1 << exp_bits) - 1) << man_bits
        ovf_code = inf_code - 1 if mode == RoundMode.RTZ else inf_code
        mag = np.where(mag >= inf_code, ovf_code, mag)
        mag = np.where(is_inf, inf_code, mag)
    else:
        maxf = max_finite_bits(fmt)
        mag = np.where(is_inf | (mag > maxf), maxf, mag)
    mag = np.where(is_zero, 0, mag)
    out = (sign << (width - 1)) | mag
    out = np.where(is_nan, canonical_nan(fmt), out)
    return out.astype(np.uint32)


class RoundingUnitModel:
    """Golden model of ``rtl.round.rounding_unit.RoundingUnit``.

    Parameters
    ----------
    lanes : int
        Number of lanes.
    n_rand : int
        Random bits per SR decision: the top ``n_rand`` bits of the lane's 32-bit word.
    seed : int
        32-bit seed; lanes are seeded as ``sim.prng.lane_states`` defines.

    A lane draws one generator word per element it converts in mode SR only.
    """

    def __init__(self, lanes, n_rand=DEFAULT_N_RAND, seed=0):
        from sim.prng import LaneGenerators
        _check_n_rand(n_rand)
        self.lanes = lanes
        self.n_rand = n_rand
        self.gen = LaneGenerators(lanes, seed)

    def reseed(self, seed):
        self.gen.reseed(seed)

    def rand_bits(self):
        """Draw one word per lane and return its top ``n_rand`` bits."""
        return self.gen.next() >> np.uint32(32 - self.n_rand)

    def convert(self, data, fmt, mode):
        """Convert one beat (``lanes`` FP32 patterns) and advance the generators if SR."""
        data = np.asarray(data, dtype=np.uint32)
        rand = self.rand_bits() if int(mode) == RoundMode.SR else None
        return encode(data, fmt, mode, rand=rand, n_rand=self.n_rand)


def edge_patterns(fmt):
    """FP32 bit patterns that exercise the edges of encoding into ``fmt``: every target
    exponent (normal and subnormal) with values at, just below and just above the rounding
    ties, mantissa all-ones (carry into the exponent), max finite and the overflow threshold,
    zeros, FP32 subnormals (DAZ), infinities and NaNs, both signs. Sorted and unique (uint32)."""
    fmt = Format(fmt)
    pats = {0x00000000, 0x00000001, 0x007FFFFF, 0x00400000, 0x7F800000, 0x7FC00000,
            0x7F800001, 0x7FFFFFFF, 0x7F7FFFFF, 0x00800000, 0x3F800000}
    if fmt == Format.FP32:
        exps = range(-126, 128, 7)
        shift_of = lambda E: 1  # noqa: E731
    elif fmt in _INT_RANGE:
        exps = range(-4, 34)
        shift_of = lambda E: 23 - E  # noqa: E731
    else:
        man_bits, bias, exp_bits, has_inf = encode_params(fmt)
        emax = ((1 << exp_bits) - 2 if has_inf else (1 << exp_bits) - 1) - bias
        emin = 1 - bias
        exps = range(max(-126, emin - man_bits - 3), min(127, emax + 2) + 1)
        shift_of = lambda E: 23 - man_bits + max(0, emin - E)  # noqa: E731
    for E in exps:
        e = E + 127
        s = shift_of(E)
        mans = {0, 1, 0x7FFFFF, 0x400000}
        if 1 <= s <= 24:
            tie = 1 << (s - 1)
            low = (1 << s) - 1
            top = 0x7FFFFF & ~low
            for base in (0, 1 << s, top, top & ~(1 << s) if s < 23 else 0):
                for off in (tie - 1, tie, tie + 1, low, 1):
                    mans.add((base | (off & low)) & 0x7FFFFF)
        for mm in mans:
            pats.add((e << 23) | mm)
    pats = np.array(sorted(pats), dtype=np.uint32)
    return np.unique(np.concatenate([pats, pats | np.uint32(0x80000000)]))


def encode_one(f32_bits, fmt, mode, rand=0, n_rand=DEFAULT_N_RAND):
    """Scalar ``encode`` for float targets in plain Python integers (about 100x faster than the
    numpy version on one value; used for long sequential sums). Same rules, same results:
    ``tests/test_rounding_encode.py`` checks it against ``encode``. INT targets: use ``encode``.
    """
    fmt = Format(fmt)
    if fmt not in (Format.BF16, Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2,
                   Format.FP8_E3M4):
        raise ValueError(f"fmt must be a narrow float format, not {fmt!r}")
    man_bits, bias, exp_bits, has_inf = _PARAMS_CACHE.get(fmt) or _cache_params(fmt)
    x = int(f32_bits)
    sign = x >> 31
    e = (x >> 23) & 0xFF
    m = x & 0x7FFFFF
    width = 1 + exp_bits + man_bits
    if e == 0xFF and m:
        return canonical_nan(fmt)
    if e == 0:
        return sign << (width - 1)
    if e == 0xFF:
        mag = (((1 << exp_bits) - 1) << man_bits) if has_inf else max_finite_bits(fmt)
        return (sign << (width - 1)) | mag
    sig = m | (1 << 23)
    eb = e - 127 + bias
    shift = min(23 - man_bits + max(0, 1 - eb), 62)
    q = sig >> shift
    d = sig - (q << shift)
    if mode == RoundMode.RTZ:
        up = 0
    elif mode == RoundMode.RNE:
        half = 1 << (shift - 1)
        up = int(d > half or (d == half and q & 1))
    else:
        if shift <= n_rand:
            f = d << (n_rand - shift)
        else:
            drop = shift - n_rand
            f = d >> drop
            rem = d - (f << drop)
            half = 1 << (drop - 1)
            f += int(rem > half or (rem == half and f & 1))
        up = (f + int(rand)) >> n_rand
    mag = ((max(eb, 1) - 1) << man_bits) + q + up
    if has_inf:
        inf_code = ((1 << exp_bits) - 1) << man_bits
        if mag >= inf_code:
            mag = inf_code - 1 if mode == RoundMode.RTZ else inf_code
    elif mag > max_finite_bits(fmt):
        mag = max_finite_bits(fmt)
    return (sign << (width - 1)) | mag


_PARAMS_CACHE = {}


def _cache_params(fmt):
    _PARAMS_CACHE[fmt] = encode_params(fmt)
    return _PARAMS_CACHE[fmt]
