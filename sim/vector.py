"""The vector/activation engine: command layout, LUT configuration map and bit-exact golden model.

This module is the one plain-Python description that the RTL (``rtl/vector/``), the golden
model (below), the sequencer's ISA (``sim/isa.py``) and the tests share. It imports neither
Amaranth nor cocotb. Arithmetic is ``sim.formats`` (FP32 add/mul, RNE, DAZ/FTZ, canonical NaN,
decode) and ``sim.rounding`` (encode); see ``docs/vector.md`` for the prose.

Per element ``x`` of lane ``l`` (decoded from ``fmt_a`` to FP32)::

    y0 = ALU(op0, x,  s0)          s0: imm0 | per-lane register 0 | b element (tensor-tensor)
    y1 = ALU(op1, y0, s1)          s1: imm1 | per-lane register 1 | b element
    y2 = LUT[bank](y1) if lut else y1
    acc[l] = ACC(acc_op, acc[l], y2)
    o      = encode(y2, fmt_o, rmode)   (if emit)

After the last element, if ``emit_acc``, one more ``o`` beat carries ``encode(acc)``.
Activation ``f(in * scale + bias)`` is ``op0=MUL, op1=ADD, lut=1``; tensor-scalar with two
chained ops is ``op0, op1`` with immediate or per-lane scalars; tensor-tensor is ``src0=TENSOR``;
a reduction along the free axis is ``acc_op`` with ``acc_reset=1, emit=0, emit_acc=1``;
copy/cast is ``op0=op1=BYPASS``.

Exact INT32 copy (:func:`raw_copy`): a command with ``fmt_a = fmt_o = INT32``, ``op0 = op1 =
BYPASS`` and ``lut = 0`` does not convert: ``x`` is the raw 32-bit word (decoded as FP32, which
passes it unchanged) and each element's ``o`` is that word again (the rounding unit's
``sim.rounding.RAW_MODE``), so every INT32 value is copied exactly. The accumulators see
the same ``y2`` (the raw word read as FP32) and an ``emit_acc`` beat is encoded as usual.
Requantization ``sat(round(x * scale + bias))`` of INT32 ``x`` to INT8 is ``op0=MUL,
op1=ADD, lut=0, fmt_a=INT32, fmt_o=INT8`` with ``rmode`` RNE or SR (docs/isa.md).
"""

import enum

import numpy as np

from sim.dtypes import CANONICAL_NAN_F32
from sim.dtypes import Format
from sim.formats import daz, decode, fp32_add, fp32_mul, round_to_fp32
from sim.rounding import RAW_MODE

__all__ = [
    "AluOp", "Src", "AccOp", "RangeMode", "Region", "CMD_FIELDS", "CMD_BITS", "pack_cmd",
    "unpack_cmd", "make_cmd", "CFG_ADDR_BITS", "CFG_BANK_BIT", "CFG_COEF", "CFG_DESC",
    "CFG_HDR", "CFG_STATUS", "Hdr", "Status", "MAX_BINADES", "DESC_BASE_BITS", "DESC_K_BITS",
    "MAX_K", "ENTRY_CENTER", "ENTRY_UNDER", "ENTRY_OVER", "coef_addr", "desc_addr", "hdr_addr",
    "status_addr", "pack_desc", "alu", "acc_update", "acc_identity", "mulz", "ldexp_ftz",
    "LutState", "lut_eval", "VectorEngineModel", "ONE_F32", "raw_copy", "element_cycles",
]

ONE_F32 = 0x3F800000


class AluOp(enum.IntEnum):
    """ALU operation (4 bits) of ``op0``/``op1``: ``y = x OP s``."""
    BYPASS = 0   # y = x (bits unchanged, no DAZ): copy/cast
    ADD = 1      # x + s
    SUB = 2      # x - s
    RSUB = 3     # s - x
    MUL = 4      # x * s
    MAX = 5
    MIN = 6
    EQ = 7       # comparisons give 1.0 or 0.0 (FP32)
    NE = 8
    LT = 9       # x < s
    LE = 10
    GT = 11
    GE = 12


class Src(enum.IntEnum):
    """Where the scalar operand of an ALU slot comes from (2 bits)."""
    IMM = 0      # imm0 / imm1 of the command (FP32 bits), the same for every lane
    LANE = 1     # per-lane register, loaded from one ``b`` beat before the elements
    TENSOR = 2   # the ``b`` element that arrives with each ``a`` element


class AccOp(enum.IntEnum):
    """Accumulate of ``y2`` into the per-lane accumulator (2 bits)."""
    NONE = 0
    SUM = 1      # acc = fp32_add(acc, y2), in element order
    MAX = 2
    MIN = 3


class RangeMode(enum.IntEnum):
    """Range reduction of a LUT table (3 bits, header register MODE)."""
    NONE = 0     # v = w
    EXP2 = 1     # w = n + v, n = round-half-away(w), v in [-0.5, 0.5]; out = y * 2**n
    RECIP = 2    # w = +-m * 2**e, v = m in [1, 2); out = +-y * 2**-e
    RSQRT = 3    # v = m * 2**(e & 1) in [1, 4); out = y * 2**-(e >> 1)
    SQRT = 4     # as RSQRT; out = y * 2**(e >> 1)
    LOG = 5      # v = m in [1, 2); out = y + float(e) * POST


class Region(enum.IntEnum):
    """Where a LUT input fell (for the hit/underflow/overflow counters)."""
    HIT = 0      # the centre entry or a binade entry
    UNDER = 1    # below the lowest binade of the negative side (entry 1)
    OVER = 2     # above the highest binade of the positive side (entry 2)
    NAN = 3      # NaN input: counted nowhere


#: The command word, field 0 in the least significant bits: (name, width).
CMD_FIELDS = (
    ("op0", 4),        # AluOp
    ("op1", 4),        # AluOp
    ("src0", 2),       # Src of s0
    ("src1", 2),       # Src of s1
    ("lut", 1),        # 1: y2 = LUT(y1)
    ("bank", 1),       # LUT bank (double buffering)
    ("acc_op", 2),     # AccOp
    ("acc_reset", 1),  # reset the accumulators to acc_identity(acc_op) before the elements
    ("emit", 1),       # one o beat per element
    ("emit_acc", 1),   # one o beat with the accumulators after the last element
    ("fmt_a", 3),      # Format of a
    ("fmt_b", 3),      # Format of b (per-lane registers and tensor operand)
    ("fmt_o", 3),      # Format of o
    ("rmode", 2),      # RoundMode of o
    ("count", 16),     # elements per lane (a beats); 0 is allowed
    ("imm0", 32),      # FP32 scalar of slot 0
    ("imm1", 32),      # FP32 scalar of slot 1
)
CMD_BITS = sum(w for _, w in CMD_FIELDS)


def pack_cmd(**fields):
    """Pack command fields (missing ones are 0) into one integer, field 0 in the LSBs."""
    unknown = set(fields) - {n for n, _ in CMD_FIELDS}
    if unknown:
        raise ValueError(f"unknown command fields: {', '.join(sorted(unknown))}")
    word, pos = 0, 0
    for name, width in CMD_FIELDS:
        value = int(fields.get(name, 0))
        if not 0 <= value < (1 << width):
            raise ValueError(f"command field {name} must be in 0..{(1 << width) - 1}, "
                             f"not {value}")
        word |= value << pos
        pos += width
    return word


def unpack_cmd(word):
    """Inverse of :func:`pack_cmd`: a dict of every field."""
    out, pos = {}, 0
    for name, width in CMD_FIELDS:
        out[name] = (int(word) >> pos) & ((1 << width) - 1)
        pos += width
    return out


def make_cmd(**fields):
    """A full command dict (every field present, defaults 0)."""
    return unpack_cmd(pack_cmd(**fields))


def raw_copy(cmd):
    """Whether command dict ``cmd`` is an exact INT32 copy: ``fmt_a = fmt_o = INT32``, ``op0 =
    op1 = BYPASS``, ``lut = 0``. Its elements pass through unconverted (module docstring)."""
    return (cmd["fmt_a"] == Format.INT32 and cmd["fmt_o"] == Format.INT32 and
            cmd["op0"] == AluOp.BYPASS and cmd["op1"] == AluOp.BYPASS and not cmd["lut"])


# -- LUT configuration map (cfg port word addresses) ----------------------------------------

CFG_ADDR_BITS = 16
#: Address bit selecting the LUT bank for the COEF, DESC and HDR regions.
CFG_BANK_BIT = 14
#: Region bases (addr[13:12] when addr[15] == 0; STATUS is addr[15] == 1).
CFG_COEF = 0x0000    # entry * 4 + word (word 0: c0, 1: c1, 2: c2; 3 is invalid)
CFG_DESC = 0x1000    # side * 32 + binade (side 0: positive, 1: negative)
CFG_HDR = 0x2000     # Hdr register index
CFG_STATUS = 0x8000  # Status register index (not banked)

#: Binades per side a table can describe.
MAX_BINADES = 32
DESC_BASE_BITS = 12
DESC_K_BITS = 3
#: Mantissa bits that index inside a binade: 2**K segments per binade.
MAX_K = 7
ENTRY_CENTER, ENTRY_UNDER, ENTRY_OVER = 0, 1, 2


class Hdr(enum.IntEnum):
    """Per-bank header registers."""
    MODE = 0     # RangeMode in bits [2:0]
    E_LO = 1     # biased FP32 exponent of the lowest binade; |v| < 2**(E_LO-127) is the centre
    NB_NEG = 2   # binades on the negative side (0..32)
    NB_POS = 3   # binades on the positive side (0..32)
    PRE = 4      # FP32 multiplier applied first: w = z * PRE
    POST = 5     # FP32 constant of RangeMode.LOG


class Status(enum.IntEnum):
    """Status registers (reads; a write to ERROR or a counter clears it)."""
    ERROR = 0    # bit 0: a cfg access had a bad address (sticky)
    HITS = 1
    UNDERS = 2
    OVERS = 3
    DEPTH = 4    # read-only: entries per bank


def coef_addr(bank, entry, word):
    return CFG_COEF | (bank << CFG_BANK_BIT) | (entry << 2) | word


def desc_addr(bank, side, binade):
    return CFG_DESC | (bank << CFG_BANK_BIT) | (side << 5) | binade


def hdr_addr(bank, reg):
    return CFG_HDR | (bank << CFG_BANK_BIT) | int(reg)


def status_addr(reg):
    return CFG_STATUS | int(reg)


def pack_desc(base, k):
    """A descriptor word: entry index of the binade's first segment and its K."""
    return (base & ((1 << DESC_BASE_BITS) - 1)) | ((k & 7) << 16)


# -- ALU and accumulator --------------------------------------------------------------------

def _u32(x):
    return np.asarray(x, dtype=np.uint32)


def _is_nan(x):
    return ((x & 0x7F800000) == 0x7F800000) & ((x & 0x7FFFFF) != 0)


def _order_key(x):
    """Monotonic unsigned key of DAZ'd, non-NaN FP32 patterns with -0 == +0."""
    x = x.astype(np.int64)
    x = np.where((x & 0x7FFFFFFF) == 0, 0, x)
    return np.where(x >> 31 == 1, 0xFFFFFFFF - x, x | 0x80000000)


def alu(op, x, s):
    """``x OP s`` on FP32 patterns (vectorised). DAZ on inputs, canonical NaN; comparisons
    give 1.0/0.0 and are false on NaN (NE true). MAX/MIN of equal values (+-0) pick +0 for
    MAX unless both are -0, and -0 for MIN unless both are +0."""
    op = AluOp(int(op))
    x = _u32(x)
    s = _u32(s)
    x, s = np.broadcast_arrays(x, s)
    if op == AluOp.BYPASS:
        return x.copy()
    if op == AluOp.ADD:
        return fp32_add(x, s)
    if op == AluOp.SUB:
        return fp32_add(x, s ^ np.uint32(0x80000000))
    if op == AluOp.RSUB:
        return fp32_add(s, x ^ np.uint32(0x80000000))
    if op == AluOp.MUL:
        return fp32_mul(x, s)
    xd, sd = daz(x), daz(s)
    nan = _is_nan(xd) | _is_nan(sd)
    kx, ks = _order_key(xd), _order_key(sd)
    if op in (AluOp.MAX, AluOp.MIN):
        both = (xd & sd) & np.uint32(0x80000000)
        either = (xd | sd) & np.uint32(0x80000000)
        if op == AluOp.MAX:
            out = np.where(kx > ks, xd, np.where(ks > kx, sd, both))
        else:
            out = np.where(kx < ks, xd, np.where(ks < kx, sd, either))
        # equal non-zero values: either operand (same bits)
        eq_nz = (kx == ks) & ((xd & 0x7FFFFFFF) != 0)
        out = np.where(eq_nz, xd, out)
        return np.where(nan, np.uint32(CANONICAL_NAN_F32), out).astype(np.uint32)
    res = {AluOp.EQ: kx == ks, AluOp.NE: kx != ks, AluOp.LT: kx < ks, AluOp.LE: kx <= ks,
           AluOp.GT: kx > ks, AluOp.GE: kx >= ks}[op]
    res = np.where(nan, op == AluOp.NE, res)
    return np.where(res, np.uint32(ONE_F32), np.uint32(0)).astype(np.uint32)


def acc_identity(acc_op):
    """Value the accumulators reset to: +0 (SUM, NONE), -Inf (MAX), +Inf (MIN)."""
    return {AccOp.NONE: 0, AccOp.SUM: 0, AccOp.MAX: 0xFF800000,
            AccOp.MIN: 0x7F800000}[AccOp(int(acc_op))]


def acc_update(acc_op, acc, y):
    acc_op = AccOp(int(acc_op))
    if acc_op == AccOp.NONE:
        return _u32(acc).copy()
    if acc_op == AccOp.SUM:
        return fp32_add(acc, y)
    return alu(AluOp.MAX if acc_op == AccOp.MAX else AluOp.MIN, acc, y)


# -- LUT --------------------------------------------------------------------------------------

def mulz(c, d):
    """FP32 product where a zero (or subnormal) ``c`` annihilates: ``0 * Inf = 0``. This lets a
    table saturate (c1 = c2 = 0) for infinite inputs; otherwise it is ``fp32_mul``."""
    c, d = np.broadcast_arrays(_u32(c), _u32(d))
    zero = (c & np.uint32(0x7F800000)) == 0
    sign = (c ^ d) & np.uint32(0x80000000)
    return np.where(zero, sign, fp32_mul(c, d)).astype(np.uint32)


def ldexp_ftz(y, k):
    """``y * 2**k`` by exponent arithmetic: zero/subnormal y gives a signed zero, Inf/NaN stay,
    an exponent <= 0 flushes to a signed zero, >= 255 gives a signed Inf."""
    y = _u32(y).astype(np.int64)
    k = np.asarray(k, dtype=np.int64)
    sign = y & 0x80000000
    e = (y >> 23) & 0xFF
    e2 = e + k
    out = (y & ~0x7F800000) | ((np.clip(e2, 0, 255) & 0xFF) << 23)
    out = np.where(e2 <= 0, sign, out)
    out = np.where(e2 >= 255, sign | 0x7F800000, out)
    out = np.where(e == 0, sign, out)
    out = np.where(e == 255, y, out)
    return out.astype(np.uint32)


def _int_to_f32(n):
    n = np.asarray(n, dtype=np.int64)
    return round_to_fp32((n < 0).astype(np.uint64), np.abs(n).astype(np.uint64), 0)


class LutState:
    """The contents of one LUT bank: header, descriptors and coefficient entries."""

    def __init__(self, depth):
        self.depth = depth
        self.mode = 0
        self.e_lo = 0
        self.nb_neg = 0
        self.nb_pos = 0
        self.pre = ONE_F32
        self.post = 0
        self.desc = np.zeros(2 * MAX_BINADES, dtype=np.int64)      # pack_desc words
        self.coef = np.zeros((depth, 3), dtype=np.uint32)

    def header_word(self, reg):
        return {Hdr.MODE: self.mode, Hdr.E_LO: self.e_lo, Hdr.NB_NEG: self.nb_neg,
                Hdr.NB_POS: self.nb_pos, Hdr.PRE: self.pre, Hdr.POST: self.post}[Hdr(reg)]

    def set_header(self, reg, value):
        reg = Hdr(reg)
        masks = {Hdr.MODE: 0x7, Hdr.E_LO: 0xFF, Hdr.NB_NEG: 0x3F, Hdr.NB_POS: 0x3F,
                 Hdr.PRE: 0xFFFFFFFF, Hdr.POST: 0xFFFFFFFF}
        setattr(self, reg.name.lower(), int(value) & masks[reg])


def lut_eval(z, st):
    """Evaluate LUT bank ``st`` on FP32 patterns ``z``. Returns ``(out, region)``.

    Steps (each one FP32 operation of ``sim.formats`` or bit manipulation, as in the RTL):

    1. ``w = z * PRE``.
    2. Range reduction (``RangeMode``) gives ``v`` and how to finish (special values first).
    3. Segment of ``v``: ``E < E_LO`` is the centre (entry 0, ``dx = v``); a binade
       ``b = E - E_LO`` below ``NB_POS``/``NB_NEG`` uses descriptor ``side*32 + b`` = (base, K):
       entry ``(base + (mantissa >> (23-K))) mod depth``, ``dx = v - seg_start`` where
       ``seg_start`` is ``v`` with the low ``23-K`` mantissa bits cleared (exact); beyond the
       last binade entry 1 (negative side, also -Inf) or 2 (positive, also +Inf) with ``dx = v``.
    4. ``y = c0 + dx * (c1 + dx * c2)`` with zero-annihilating products (:func:`mulz`).
    5. Finish: ``ldexp_ftz`` for EXP2/RECIP/RSQRT/SQRT, ``y + float(e) * POST`` for LOG.
    """
    z = _u32(z)
    w = fp32_mul(z, np.uint32(st.pre)).astype(np.int64)
    s = w >> 31
    E = (w >> 23) & 0xFF
    M = w & 0x7FFFFF
    nan = (E == 255) & (M != 0)
    inf = (E == 255) & (M == 0)
    zero = E == 0                        # DAZ
    e = E - 127
    mode = RangeMode(st.mode)
    special = nan.copy()
    sval = np.full(w.shape, CANONICAL_NAN_F32, dtype=np.int64)
    k = np.zeros(w.shape, dtype=np.int64)
    v = w.copy()

    def spec(cond, value):
        nonlocal special, sval
        new = cond & ~special
        sval = np.where(new, value, sval)
        special = special | cond

    if mode == RangeMode.EXP2:
        spec(inf | (E >= 134), np.where(s == 1, 0, 0x7F800000))
        sh = np.clip(150 - E, 17, 24)
        n_abs = ((M | (1 << 23)) + (1 << (sh - 1))) >> sh
        n_abs = np.where(E <= 125, 0, n_abs)
        n = np.where(s == 1, -n_abs, n_abs)
        v = fp32_add(w, _int_to_f32(n) ^ np.uint32(0x80000000)).astype(np.int64)
        k = n
    elif mode == RangeMode.RECIP:
        spec(zero, (s << 31) | 0x7F800000)
        spec(inf, s << 31)
        v = (127 << 23) | M
        k = -e
    elif mode in (RangeMode.RSQRT, RangeMode.SQRT):
        if mode == RangeMode.RSQRT:
            spec(zero, (s << 31) | 0x7F800000)
            spec(inf & (s == 0), 0)
        else:
            spec(zero, s << 31)
            spec(inf & (s == 0), 0x7F800000)
        spec(s == 1, CANONICAL_NAN_F32)
        p = e & 1
        v = ((127 + p) << 23) | M
        k = -(e >> 1) if mode == RangeMode.RSQRT else (e >> 1)
    elif mode == RangeMode.LOG:
        spec(zero, 0xFF800000)
        spec(inf & (s == 0), 0x7F800000)
        spec(s == 1, CANONICAL_NAN_F32)
        v = (127 << 23) | M
    elif mode != RangeMode.NONE:
        # Codes 6 and 7 behave as NONE.
        pass

    v = v.astype(np.int64)
    vs = v >> 31
    vE = (v >> 23) & 0xFF
    vM = v & 0x7FFFFF
    vnan = (vE == 255) & (vM != 0)
    b = vE - st.e_lo
    center = vE < st.e_lo
    nb = np.where(vs == 1, st.nb_neg, st.nb_pos)
    beyond = ~center & (b >= nb)
    in_range = ~center & ~beyond
    # Descriptor address {side, b[4:0]}: more than 32 binades per side wrap around.
    d = st.desc[np.where(vs == 1, MAX_BINADES, 0) + (b & (MAX_BINADES - 1))]
    kk = (d >> 16) & 7
    base = d & ((1 << DESC_BASE_BITS) - 1)
    low = 23 - kk
    idx_in = (base + (vM >> low)) % st.depth
    idx = np.where(center, ENTRY_CENTER,
                   np.where(beyond, np.where(vs == 1, ENTRY_UNDER, ENTRY_OVER), idx_in))
    seg = np.where(in_range, v & ~((1 << low) - 1), 0)
    # v + (-seg_start); seg_start = +0 outside the binades gives v + (-0) = v exactly.
    dx = fp32_add(v.astype(np.uint32), seg.astype(np.uint32) ^ np.uint32(0x80000000))
    c = st.coef[idx % st.depth]
    t1 = mulz(c[..., 2], dx)
    t2 = fp32_add(c[..., 1], t1)
    t3 = mulz(t2, dx)
    y = fp32_add(c[..., 0], t3)
    if mode in (RangeMode.EXP2, RangeMode.RECIP, RangeMode.RSQRT, RangeMode.SQRT):
        y = ldexp_ftz(y, k)
        if mode == RangeMode.RECIP:
            y = (y ^ (s << 31).astype(np.uint32)).astype(np.uint32)
    elif mode == RangeMode.LOG:
        y = fp32_add(y, fp32_mul(_int_to_f32(e), np.uint32(st.post)))
    out = np.where(special, sval, y).astype(np.uint32)
    region = np.where(beyond, np.where(vs == 1, Region.UNDER, Region.OVER), Region.HIT)
    region = np.where(special | vnan, Region.NAN, region)
    # Specials are not table lookups, but count an infinity of RangeMode.NONE as out of range.
    return out, region.astype(np.int64)


# -- the engine ---------------------------------------------------------------------------

def element_cycles(subs, acc_wait, acc_op):
    """Cycles per element beat of a vector instruction when nothing stalls.

    ``subs`` is ``lanes // units`` of ``rtl.vector.engine.VectorEngine`` (1: a unit per
    lane), ``acc_wait`` its accumulate adder's stages (3 deep, 0 short). With a unit per lane
    an element enters every cycle, a summed one every ``1 + acc_wait`` (the adder's loop);
    with fewer units a beat takes ``subs`` cycles, and an accumulating one (SUM, MAX, MIN: the
    shared unit's loop) at least ``1 + acc_wait``."""
    acc_op = AccOp(int(acc_op))
    if subs == 1:
        return 1 + acc_wait if acc_op == AccOp.SUM else 1
    return subs if acc_op == AccOp.NONE else max(subs, 1 + acc_wait)


class VectorEngineModel:
    """Golden model of ``rtl.vector.engine.VectorEngine``.

    Parameters
    ----------
    lanes : int
        Lanes (partitions).
    depth : int
        LUT entries per bank.
    n_rand, seed :
        Of the rounding unit (``sim.rounding.RoundingUnitModel``).
    """

    def __init__(self, lanes, depth=512, n_rand=16, seed=0):
        from sim.rounding import RoundingUnitModel
        self.lanes = lanes
        self.depth = depth
        self.banks = [LutState(depth), LutState(depth)]
        self.acc = np.zeros(lanes, dtype=np.uint32)
        self.lane_reg = [np.zeros(lanes, dtype=np.uint32), np.zeros(lanes, dtype=np.uint32)]
        self.error = 0
        self.counters = {Status.HITS: 0, Status.UNDERS: 0, Status.OVERS: 0}
        self.ru = RoundingUnitModel(lanes, n_rand, seed)

    # cfg port
    def _decode_addr(self, addr):
        """(kind, bank, index...) or None for a bad address."""
        addr = int(addr)
        if addr & 0x8000:
            reg = addr & 0x7FFF
            return ("status", reg) if reg <= Status.DEPTH else None
        bank = (addr >> CFG_BANK_BIT) & 1
        region = (addr >> 12) & 3
        low = addr & 0xFFF
        if region == 0:
            entry, word = low >> 2, low & 3
            if entry >= self.depth or word == 3:
                return None
            return ("coef", bank, entry, word)
        if region == 1:
            return ("desc", bank, low) if low < 2 * MAX_BINADES else None
        if region == 2:
            return ("hdr", bank, low) if low <= Hdr.POST else None
        return None

    def cfg_write(self, addr, data):
        a = self._decode_addr(addr)
        data = int(data) & 0xFFFFFFFF
        if a is None:
            self.error = 1
            return
        if a[0] == "coef":
            self.banks[a[1]].coef[a[2], a[3]] = data
        elif a[0] == "desc":
            self.banks[a[1]].desc[a[2]] = data & ((1 << DESC_BASE_BITS) - 1 | (7 << 16))
        elif a[0] == "hdr":
            self.banks[a[1]].set_header(a[2], data)
        else:
            reg = Status(a[1])
            if reg == Status.ERROR:
                self.error = 0
            elif reg in self.counters:
                self.counters[reg] = 0
            else:
                self.error = 1      # DEPTH is read-only

    def cfg_read(self, addr):
        a = self._decode_addr(addr)
        if a is None:
            self.error = 1
            return 0
        if a[0] == "coef":
            return int(self.banks[a[1]].coef[a[2], a[3]])
        if a[0] == "desc":
            return int(self.banks[a[1]].desc[a[2]])
        if a[0] == "hdr":
            return int(self.banks[a[1]].header_word(a[2]))
        reg = Status(a[1])
        if reg == Status.ERROR:
            return self.error
        if reg == Status.DEPTH:
            return self.depth
        return self.counters[reg] & 0xFFFFFFFF

    def load_table(self, bank, writes):
        for addr, data in writes:
            self.cfg_write(addr, data)

    # instructions
    def b_beats_needed(self, cmd):
        """(prologue beats, b beats per element) of a command dict."""
        pro = int(cmd["src0"] == Src.LANE) + int(cmd["src1"] == Src.LANE)
        per = int(cmd["src0"] == Src.TENSOR or cmd["src1"] == Src.TENSOR)
        return pro, per

    def execute(self, cmd, a=(), b=()):
        """Run one command. ``a``: ``count`` beats of ``lanes`` raw words; ``b``: the prologue
        beats then (for tensor operands) ``count`` beats. Returns the list of ``o`` beats."""
        if isinstance(cmd, int):
            cmd = unpack_cmd(cmd)
        lanes = self.lanes
        a = np.asarray(a, dtype=np.uint32).reshape(-1, lanes) if len(a) else \
            np.zeros((0, lanes), dtype=np.uint32)
        b = np.asarray(b, dtype=np.uint32).reshape(-1, lanes) if len(b) else \
            np.zeros((0, lanes), dtype=np.uint32)
        n = cmd["count"]
        pro, per = self.b_beats_needed(cmd)
        assert a.shape[0] == n, "a must hold count beats"
        assert b.shape[0] == pro + per * n, "b must hold the prologue and tensor beats"
        fmt_b = cmd["fmt_b"]
        bi = 0
        for slot in (0, 1):
            if cmd[f"src{slot}"] == Src.LANE:
                self.lane_reg[slot] = decode(b[bi], fmt_b)
                bi += 1
        if cmd["acc_reset"]:
            self.acc[:] = acc_identity(cmd["acc_op"])
        outs = []
        st = self.banks[cmd["bank"]]
        raw = raw_copy(cmd)
        fmt_a = Format.FP32 if raw else cmd["fmt_a"]
        for i in range(n):
            x = decode(a[i], fmt_a)
            tb = decode(b[bi + i], fmt_b) if per else None
            s = []
            for slot in (0, 1):
                src = cmd[f"src{slot}"]
                if src == Src.IMM:
                    s.append(np.full(lanes, cmd[f"imm{slot}"], dtype=np.uint32))
                elif src == Src.LANE:
                    s.append(self.lane_reg[slot])
                else:
                    s.append(tb)
            y0 = alu(cmd["op0"], x, s[0])
            y1 = alu(cmd["op1"], y0, s[1])
            if cmd["lut"]:
                y2, region = lut_eval(y1, st)
                self.counters[Status.HITS] += int(np.sum(region == Region.HIT))
                self.counters[Status.UNDERS] += int(np.sum(region == Region.UNDER))
                self.counters[Status.OVERS] += int(np.sum(region == Region.OVER))
            else:
                y2 = y1
            self.acc = acc_update(cmd["acc_op"], self.acc, y2)
            if cmd["emit"]:
                outs.append(self.ru.convert(y2, Format.FP32, RAW_MODE) if raw else
                            self.ru.convert(y2, cmd["fmt_o"], cmd["rmode"]))
        if cmd["emit_acc"]:
            outs.append(self.ru.convert(self.acc, cmd["fmt_o"], cmd["rmode"]))
        return outs
