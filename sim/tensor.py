"""Golden model of the tensor engine and of PSUM, bit-exact, in the hardware's order.

``matmul(stationary, moving, fmt)`` computes ``stationary.T @ moving`` exactly as the
weight-stationary array does (``rtl/tensor/array.py``): for output ``result[m, n]`` the products
``p[k] = stationary[k, m] * moving[k, n]`` (exact, :func:`sim.formats.mul_exact`) are summed
down the column, row 0 first::

    s = p[0]
    s = fp32_add(s, p[k])      for k = 1 .. K-1       (FP32, RNE, DAZ/FTZ, canonical NaN)

or with wrapping INT32 additions for INT8. The hardware always runs all ``rows`` rows; rows
beyond K hold zeros and add ``+0`` products. Pass ``rows=`` to reproduce that too (it only turns
a ``-0`` sum into ``+0``).

PSUM (:class:`PsumModel`) then does ``psum = column_sum`` (overwrite) or
``psum = fp32_add(psum, column_sum)`` / ``int32_add`` (accumulate).

Everything works on bit patterns in numpy unsigned-integer arrays; this module imports neither
Amaranth nor cocotb.

:func:`matmul` is the specification, one integer-arithmetic step per row. :func:`matmul_fast`
(and ``column_sums(..., fast=True)``, :func:`add_fast`) give the same bits through numpy float32
arithmetic, which is IEEE 754 binary32 with RNE and gradual underflow: operands are decoded
through a table, products are exact (at most 11 x 11 significand bits) and rounded once into
the FP32 range by the float32 multiply, and the column sums are float32 running sums in row
order. DAZ/FTZ is applied to every product and, where a running sum is subnormal, after every
addition; every NaN becomes the canonical NaN at the end (a NaN sum stays NaN). INT8 sums are
exact in float64 (``|sum| < 2**53``) and wrapped to INT32. ``tests/test_refsim_tensor.py``
compares the two bit for bit over every format and its special values.
"""

import numpy as np

from sim import config, formats
from sim.dtypes import CANONICAL_NAN_F32, STORAGE_BITS, Format

__all__ = ["ENGINE_FORMATS", "ACCUMULATE", "FUSED_F", "check_accumulate", "fused_width",
           "fused_split", "fused_empty", "fused_step", "fused_normalise", "matmul",
           "matmul_fast", "add_fast", "column_sums", "PsumModel", "error_bound",
           "fused_error_bound", "random_operands"]

#: Input formats the tensor engine accepts (defined in ``sim.config``).
ENGINE_FORMATS = config.ENGINE_FORMATS
#: Column accumulation modes (``docs/tensor.md``): one FP32 addition per row, or fused.
ACCUMULATE = config.ACCUMULATE
#: Fused accumulation: fraction bits of the partial sum below a product's leading one.
FUSED_F = 26


def check_accumulate(accumulate):
    """``accumulate`` checked: one of :data:`ACCUMULATE`."""
    return config.check_choice("accumulate", accumulate, ACCUMULATE)


def fused_width(rows):
    """Bits ``W`` of the fused partial sum ``S`` of a ``rows``-row column: ``FUSED_F + 2 +
    ceil(log2(rows))``, enough for ``rows`` products of magnitude below ``2**(FUSED_F + 1)``."""
    return FUSED_F + 2 + max(int(rows) - 1, 0).bit_length()


# -- fused column accumulation (docs/tensor.md, "Fused column accumulation") ----------------

def fused_split(p):
    """FP32 product bits ``p`` (uint32 array) -> ``(e, m, nan, pinf, ninf)``: the biased exponent
    and signed significand ``m = +-(2**23 + mantissa) << (FUSED_F - 23)`` (int64) of finite
    nonzero products (``e = 0``, ``m = 0`` for zeros and specials), and the class flags."""
    p = np.asarray(p, dtype=np.uint32).astype(np.int64)
    exp = (p >> 23) & 0xFF
    man = p & 0x7FFFFF
    neg = (p >> 31) & 1
    special = exp == 0xFF
    nan = special & (man != 0)
    inf = special & (man == 0)
    finite = (exp != 0) & ~special
    mag = (man | (1 << 23)) << (FUSED_F - 23)
    m = np.where(finite, np.where(neg == 1, -mag, mag), 0)
    e = np.where(finite, exp, 0)
    return e, m, nan, inf & (neg == 0), inf & (neg == 1)


def _floor_shift(x, n):
    """``floor(x / 2**n)`` of int64 arrays, ``n >= 0`` (a shift past 62 bits gives 0 or -1)."""
    return np.right_shift(x, np.minimum(n, 62))


def fused_step(state, p):
    """One row of fused accumulation: ``state = (E, S, nan, pinf, ninf)`` (arrays of one shape)
    plus the FP32 products ``p`` -> the next state. ``E' = max(E, e_p)``, ``S' = (S >> (E' - E))
    + (m_p >> (E' - e_p))`` with floor shifts, for finite nonzero products only."""
    E, S, nan, pinf, ninf = state
    e, m, p_nan, p_pinf, p_ninf = fused_split(p)
    live = m != 0
    E2 = np.where(live, np.maximum(E, e), E)
    S2 = np.where(live, _floor_shift(S, E2 - E) + _floor_shift(m, E2 - e), S)
    return E2, S2, nan | p_nan, pinf | p_pinf, ninf | p_ninf


def fused_empty(shape):
    """The empty partial sum a column starts from: ``E = 0, S = 0``, no flags."""
    z = np.zeros(shape, dtype=np.int64)
    f = np.zeros(shape, dtype=bool)
    return z, z.copy(), f, f.copy(), f.copy()


def fused_normalise(state):
    """The column normaliser: ``(E, S, nan, pinf, ninf)`` -> FP32 bits (uint32): canonical NaN
    for ``nan`` or both Infs, else the Inf, else ``+0`` for ``S == 0``, else ``|S|`` rounded to
    24 bits at its leading one (RNE), exponent ``E + L - FUSED_F``, Inf at 255 and above, a
    zero of ``S``'s sign at 0 and below (FTZ after rounding)."""
    E, S, nan, pinf, ninf = (np.asarray(v) for v in state)
    E = E.astype(np.int64)
    S = S.astype(np.int64)
    neg = S < 0
    mag = np.abs(S)
    L = np.zeros(S.shape, dtype=np.int64)          # position of the leading one of |S|
    for k in range(1, 63):
        L += mag >= (np.int64(1) << k)
    shift = np.maximum(L - 23, 0)
    q = np.right_shift(mag, shift)
    rem = mag - np.left_shift(q, shift)
    half = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    up = (shift > 0) & ((rem > half) | ((rem == half) & (q & 1 == 1)))
    q = np.where(L < 23, np.left_shift(mag, np.maximum(23 - L, 0)), q + up)
    carry = q >> 24
    q = np.right_shift(q, carry)
    exp = E + L - FUSED_F + carry
    sign = neg.astype(np.int64) << 31
    bits = sign | (np.clip(exp, 0, 255) << 23) | (q & 0x7FFFFF)
    bits = np.where(exp >= 255, sign | 0x7F800000, bits)
    bits = np.where(exp <= 0, sign, bits)
    bits = np.where(S == 0, 0, bits)
    bits = np.where(pinf, 0x7F800000, bits)
    bits = np.where(ninf, 0xFF800000, bits)
    bits = np.where(nan | (pinf & ninf), int(CANONICAL_NAN_F32), bits)
    return bits.astype(np.uint32)


def _add(a, b, fmt):
    if fmt in (Format.INT8, Format.INT32):
        return formats.int32_add(a, b)
    return formats.fp32_add(a, b)


def _matmul_args(stationary, moving, fmt):
    """``(fmt, stationary, moving)`` checked: an engine format, two 2-D uint64 arrays with
    the same K."""
    fmt = Format(fmt)
    if fmt not in ENGINE_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(f.name for f in ENGINE_FORMATS)}, "
                         f"not {fmt.name}")
    st = np.asarray(stationary, dtype=np.uint64)
    mv = np.asarray(moving, dtype=np.uint64)
    if st.ndim != 2 or mv.ndim != 2 or st.shape[0] != mv.shape[0]:
        raise ValueError(f"stationary (K, M) and moving (K, N) must share K, not "
                         f"{st.shape} and {mv.shape}")
    return fmt, st, mv


def matmul(stationary, moving, fmt, *, rows=None, accumulate="fp32"):
    """Bit-exact ``stationary.T @ moving`` of the tensor engine.

    Parameters
    ----------
    stationary : array of unsigned int, shape (K, M)
        Element bit patterns (low-aligned).
    moving : array of unsigned int, shape (K, N)
    fmt : Format
        INT8 (INT32 result, wrapping) or a narrow floating-point format (FP32 result).
    rows : int, optional
        Array rows (>= K): continue the column with ``rows - K`` zero rows as the hardware does.
    accumulate : {"fp32", "fused"}
        ``"fp32"``: one FP32 addition per row (above). ``"fused"``: the fused column
        accumulation of ``docs/tensor.md`` (:func:`fused_step` per row, then
        :func:`fused_normalise`) for floating-point formats; INT8 is the same in both.

    Returns
    -------
    numpy.ndarray of uint32, shape (M, N)
    """
    check_accumulate(accumulate)
    fmt, st, mv = _matmul_args(stationary, moving, fmt)
    K = st.shape[0]
    if K < 1:
        raise ValueError("K must be at least 1")
    if rows is not None:
        if rows < K:
            raise ValueError(f"rows must be at least K = {K}, not {rows}")
        pad = rows - K
        st = np.concatenate([st, np.zeros((pad, st.shape[1]), np.uint64)])
        mv = np.concatenate([mv, np.zeros((pad, mv.shape[1]), np.uint64)])
        K = rows
    if accumulate == "fused" and fmt != Format.INT8:
        state = fused_empty((st.shape[1], mv.shape[1]))
        for k in range(K):
            state = fused_step(state, formats.mul_exact(st[k][:, None], mv[k][None, :], fmt))
        return fused_normalise(state)
    s = None
    for k in range(K):
        # p[m, n] = st[k, m] * mv[k, n]
        p = formats.mul_exact(st[k][:, None], mv[k][None, :], fmt)
        s = p if s is None else _add(s, p, fmt)
    return np.asarray(s, dtype=np.uint32)


def column_sums(stationary, moving, fmt, *, rows, cols, fast=False, accumulate="fp32"):
    """The full ``cols``-lane result of the hardware (lanes >= M see zero weights): shape
    (cols, N). ``fast`` computes it with :func:`matmul_fast` (the same bits); ``accumulate``
    as :func:`matmul`'s."""
    st = np.asarray(stationary, dtype=np.uint64)
    if st.shape[1] > cols:
        raise ValueError(f"M must be at most cols = {cols}, not {st.shape[1]}")
    st = np.concatenate([st, np.zeros((st.shape[0], cols - st.shape[1]), np.uint64)], axis=1)
    return (matmul_fast if fast else matmul)(st, moving, fmt, rows=rows, accumulate=accumulate)


# -- the same results through numpy float32 arithmetic -------------------------------------

_F32_EXP = np.uint32(0x7F800000)
_F32_SIGN = np.uint32(0x80000000)
_F32_MAG = np.uint32(0x7FFFFFFF)
#: Products per block of rows x lanes x beats held at once by matmul_fast.
_BLOCK = 1 << 21
_DECODE_TABLES = {}


def _decode_table(fmt):
    """float32 values of every pattern of ``fmt`` after decode and DAZ (the multiplier's
    inputs), indexed by the pattern."""
    table = _DECODE_TABLES.get(fmt)
    if table is None:
        codes = np.arange(1 << STORAGE_BITS[fmt], dtype=np.uint64)
        table = formats.daz(formats.decode(codes, fmt)).view(np.float32)
        _DECODE_TABLES[fmt] = table
    return table


def _ftz(u):
    """Flush subnormal FP32 patterns of the uint32 array ``u`` to zeros of their sign, in
    place."""
    np.bitwise_and(u, _F32_SIGN, out=u, where=(u & _F32_EXP) == 0)


def _is_subnormal(u):
    return ((u & _F32_EXP) == 0) & ((u & _F32_MAG) != 0)


def _canonical_nan(u):
    """``u`` (uint32 FP32 patterns) with every NaN replaced by the canonical NaN, in place."""
    u[(u & _F32_MAG) > np.uint32(0x7F800000)] = np.uint32(CANONICAL_NAN_F32)
    return u


def add_fast(a, b, fmt):
    """``_add(a, b, fmt)`` (FP32 with DAZ/FTZ and canonical NaN, or wrapping INT32 for INT8 and
    INT32) on uint32 patterns of one shape, through numpy float32 addition."""
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    if Format(fmt) in (Format.INT8, Format.INT32):
        return formats.int32_add(a, b)
    a = a.copy()
    b = b.copy()
    _ftz(a)
    _ftz(b)
    with np.errstate(all="ignore"):
        s = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
    _ftz(s)
    return _canonical_nan(s)


def _column_sums_f32(p, rows):
    """Bits of the column sums of ``p`` (float32 products, DAZ applied, shape (K, M, N)) in
    row order, with FTZ after every addition and ``rows - K`` trailing ``+0`` rows."""
    with np.errstate(all="ignore"):
        run = np.add.accumulate(p, axis=0, dtype=np.float32)
        u = run.view(np.uint32)
        if p.shape[0] > 1 and _is_subnormal(u[1:]).any():
            # A running sum went subnormal: FTZ it before the next addition.
            s = p[0].copy()
            for k in range(1, p.shape[0]):
                s += p[k]
                _ftz(s.view(np.uint32))
        else:
            s = run[-1].copy()
        if rows > p.shape[0]:
            s += np.float32(0.0)      # a -0 sum plus the +0 products is +0
    return s.view(np.uint32)


def matmul_fast(stationary, moving, fmt, *, rows=None, accumulate="fp32"):
    """:func:`matmul` (same arguments, same bits) through numpy float32 arithmetic.
    ``accumulate="fused"`` is :func:`matmul`'s own integer computation (already one numpy step
    per row)."""
    if check_accumulate(accumulate) == "fused":
        return matmul(stationary, moving, fmt, rows=rows, accumulate=accumulate)
    fmt, st, mv = _matmul_args(stationary, moving, fmt)
    K, M = st.shape
    N = mv.shape[1]
    if K < 1:
        raise ValueError("K must be at least 1")
    if rows is None:
        rows = K
    elif rows < K:
        raise ValueError(f"rows must be at least K = {K}, not {rows}")
    mask = np.uint64((1 << STORAGE_BITS[fmt]) - 1)
    if fmt == Format.INT8:
        def s8(v):
            v = (v & mask).astype(np.int64)
            return np.where(v >= 128, v - 256, v).astype(np.float64)
        total = (s8(st).T @ s8(mv)).astype(np.int64)          # exact: |total| < 2**53
        return (total & 0xFFFFFFFF).astype(np.uint32)
    table = _decode_table(fmt)
    a = table[st & mask]                                        # (K, M) float32
    b = table[mv & mask]                                        # (K, N) float32
    out = np.empty((M, N), dtype=np.uint32)
    step = max(1, _BLOCK // max(1, K * M))
    for n0 in range(0, N, step):
        with np.errstate(all="ignore"):
            p = a[:, :, None] * b[:, None, n0:n0 + step]       # exact or rounded once
        _ftz(p.view(np.uint32))
        out[:, n0:n0 + step] = _column_sums_f32(p, rows)
    return _canonical_nan(out)


class PsumModel:
    """PSUM: ``partitions`` lanes x ``depth`` words of FP32/INT32 bits, all zero at start.

    ``write(addr, values, accumulate, fmt)`` stores the N beats ``values[:, n]`` (shape
    (partitions, N)) at words ``addr + n`` (modulo depth), overwriting or accumulating: INT32
    wrapping when ``fmt`` is INT8 or INT32 (the engine's input format or the sum's), else FP32.
    """

    def __init__(self, partitions, depth):
        self.partitions = partitions
        self.depth = depth
        self.mem = np.zeros((depth, partitions), dtype=np.uint32)

    def write(self, addr, values, accumulate, fmt):
        values = np.asarray(values, dtype=np.uint32)
        if values.shape[0] != self.partitions:
            raise ValueError(f"values must have {self.partitions} lanes, not {values.shape[0]}")
        for n in range(values.shape[1]):
            a = (addr + n) % self.depth
            if accumulate:
                self.mem[a] = _add(self.mem[a], values[:, n], Format(fmt))
            else:
                self.mem[a] = values[:, n]

    def read(self, addr, count=1):
        """Words ``addr .. addr+count-1``: shape (partitions, count)."""
        idx = [(addr + i) % self.depth for i in range(count)]
        return self.mem[idx].T.copy()


def error_bound(abs_products_sum, K):
    """A bound on ``|golden - exact|`` for a sum of K exact products computed with K - 1 RNE
    FP32 additions and FTZ: ``gamma(K-1) * sum|p| + K * 2**-126`` with ``gamma(n) = n u /
    (1 - n u)``, ``u = 2**-24`` (Higham, Accuracy and Stability, eq. 4.4)."""
    n = max(K - 1, 0)
    u = 2.0 ** -24
    gamma = n * u / (1 - n * u)
    return gamma * np.asarray(abs_products_sum, dtype=np.float64) + K * 2.0 ** -126


def fused_error_bound(result_bits, max_exp, K):
    """A bound on ``|fused result - exact sum|`` (``docs/tensor.md``): ``K * 2**(max_exp - 127 -
    FUSED_F) + ulp(result) / 2``, plus ``2**-126`` where the result is a flushed zero;
    ``max_exp`` the largest biased exponent of the finite nonzero products (float64 arrays)."""
    r = np.asarray(result_bits, dtype=np.uint32)
    exp = ((r >> 23) & 0xFF).astype(np.int64)
    ulp = np.ldexp(1.0, np.maximum(exp, 1) - 127 - 23)
    trunc = K * np.ldexp(1.0, np.asarray(max_exp, dtype=np.int64) - 127 - FUSED_F)
    return trunc + ulp / 2 + np.where(exp == 0, 2.0 ** -126, 0.0)


def random_operands(rng, fmt, shape, mode="normal"):
    """Random element bit patterns of ``fmt`` for tests and benchmarks.

    ``rng`` is a ``numpy.random.Generator``. Modes: ``"normal"``: random sign and mantissa,
    exponent within +-3 binades of 1.0 (sums stay finite and exercise rounding); ``"wide"``:
    every bit pattern equally likely (NaN, Inf, subnormals, overflowing products);
    ``"special"``: normal values with a quarter replaced by zeros, subnormals, Inf and NaN.
    INT8 ignores the mode (uniform bytes).
    """
    fmt = Format(fmt)
    if fmt == Format.INT8:
        return rng.integers(0, 256, size=shape, dtype=np.uint64)
    spec = formats.float_spec(fmt)
    bits = spec.bits
    if mode == "wide":
        return rng.integers(0, 1 << bits, size=shape, dtype=np.uint64)
    top = (1 << spec.exp_bits) - 1
    lo = max(1, spec.bias - 3)
    hi = min(top - 1, spec.bias + 3)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    exp = rng.integers(lo, hi + 1, size=shape, dtype=np.uint64)
    man = rng.integers(0, 1 << spec.man_bits, size=shape, dtype=np.uint64)
    out = (sign << np.uint64(bits - 1)) | (exp << np.uint64(spec.man_bits)) | man
    if mode == "special":
        specials = [0, 1 << (bits - 1), 1, (1 << spec.man_bits) - 1,
                    int(formats.canonical_nan(fmt)), int(formats.max_finite_bits(fmt))]
        if spec.has_inf:
            specials.append(int(formats.inf_bits(fmt)))
        pick = rng.random(size=shape) < 0.25
        choice = rng.choice(np.array(specials, dtype=np.uint64), size=shape)
        out = np.where(pick, choice, out)
    elif mode != "normal":
        raise ValueError(f"mode must be 'normal', 'wide' or 'special', not {mode!r}")
    return out.astype(np.uint64)
