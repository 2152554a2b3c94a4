"""The LUT table compiler: a Python function and a range in, a vector-engine LUT bank out.

A table (see ``sim.vector.lut_eval`` for the exact evaluation) covers the reduced input ``v``
with

* a *centre* entry for ``|v| < 2**center`` (one quadratic through 0),
* per side (negative, positive) the binades ``[2**e, 2**(e+1))`` for ``center <= e < top``,
  binade ``e`` cut into ``2**K_e`` equal segments, each one quadratic
  ``y = c0 + dx*(c1 + dx*c2)`` in the exact offset ``dx`` from the segment's start,
* one entry below the negative side (``under``) and one above the positive side (``over``),
  evaluated with ``dx = v`` (so ``(c0, c1, c2) = (0, 1, 0)`` is exactly ``y = v``): saturate,
  linear extrapolation or explicit coefficients.

``K_e`` is chosen per binade by a greedy allocator: it spends the entry budget where the
estimated relative error is largest until every binade meets ``target`` (or K reaches 7).
Exponent-indexed binades give wide-range functions constant *relative* resolution; range
reduction (``RangeMode``) handles exp, log, reciprocal, sqrt and rsqrt on the mantissa.

Adding a function::

    from sim.lut import TableSpec, compile_table
    spec = TableSpec("swish2", lambda v: v / (1 + np.exp(-2 * v)), center=-8, top_neg=4,
                     top_pos=4, under=0.0, over=(0.0, 1.0, 0.0))
    table = compile_table(spec, depth=512)
    writes = table.writes(bank=1)       # (cfg address, data) pairs for the cfg port

This module imports neither Amaranth nor cocotb.
"""

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from sim.vector import (DESC_BASE_BITS, ENTRY_CENTER, ENTRY_OVER, ENTRY_UNDER, MAX_BINADES,
                        MAX_K, Hdr, LutState, RangeMode, coef_addr, desc_addr, hdr_addr,
                        pack_desc)

__all__ = ["TableSpec", "CompiledTable", "compile_table", "f32", "f32_bits"]


def f32(x):
    """float64 -> nearest float32 value (as float), subnormals flushed to zero (DAZ)."""
    v = float(np.float32(x))
    return 0.0 * math.copysign(1.0, v) if abs(v) < 2.0 ** -126 else v


def f32_bits(x):
    return int(np.array([f32(x)], dtype=np.float32).view(np.uint32)[0])


@dataclass
class TableSpec:
    """What a table computes.

    Parameters
    ----------
    name : str
    fn : callable
        float64 numpy function of the *reduced* input ``v`` (for ``RangeMode.EXP2`` it is
        ``2**v``, for RECIP ``1/v``, ...); for ``RangeMode.NONE`` the function itself.
    mode : RangeMode
    center : int
        ``|v| < 2**center`` uses the centre entry.
    top_neg, top_pos : int or None
        The negative / positive side has binades up to ``2**top``; None: no binades.
    under, over : "linear", float (saturate to this value), "saturate" (to the function's
        value at the bound) or a tuple ``(c0, c1, c2)`` (evaluated with ``dx = v``).
    pre, post : float
        Header constants (``w = z * pre``; LOG adds ``e * post``).
    reference : callable
        float64 numpy function of the engine input ``z`` (for the accuracy benchmark); default
        ``fn``.
    domain : (lo, hi)
        Inputs ``z`` over which the benchmark measures accuracy (inclusive).
    target : float
        Relative error goal per binade for the allocator.
    floor : float
        Absolute error floor of the relative error measure (near zeros of the function).
    """
    name: str
    fn: object
    mode: RangeMode = RangeMode.NONE
    center: int = -8
    top_neg: object = None
    top_pos: object = None
    under: object = "linear"
    over: object = "linear"
    pre: float = 1.0
    post: float = 0.0
    reference: object = None
    domain: tuple = (-math.inf, math.inf)
    target: float = 2.0 ** -18
    floor: float = 1e-300
    doc: str = ""

    @property
    def e_lo(self):
        return 127 + self.center

    def nb(self, side):
        top = self.top_neg if side == 1 else self.top_pos
        return 0 if top is None else top - self.center


@dataclass
class CompiledTable:
    """A compiled table: header, descriptors and entries, plus the allocator's estimates."""
    spec: TableSpec
    depth: int
    mode: int
    e_lo: int
    nb_neg: int
    nb_pos: int
    pre: int
    post: int
    desc: list
    coef: np.ndarray
    used: int
    ks: dict = field(default_factory=dict)
    est_error: float = 0.0

    def writes(self, bank):
        """The ``(address, data)`` cfg writes that load this table into ``bank``."""
        w = [(hdr_addr(bank, Hdr.MODE), self.mode), (hdr_addr(bank, Hdr.E_LO), self.e_lo),
             (hdr_addr(bank, Hdr.NB_NEG), self.nb_neg), (hdr_addr(bank, Hdr.NB_POS), self.nb_pos),
             (hdr_addr(bank, Hdr.PRE), self.pre), (hdr_addr(bank, Hdr.POST), self.post)]
        for side in (0, 1):
            for b in range(self.nb_pos if side == 0 else self.nb_neg):
                w.append((desc_addr(bank, side, b), self.desc[side * MAX_BINADES + b]))
        for entry in range(self.used):
            for word in range(3):
                w.append((coef_addr(bank, entry, word), int(self.coef[entry, word])))
        return w

    def state(self):
        """The table as a ``sim.vector.LutState`` (what the writes produce in a clean bank)."""
        st = LutState(self.depth)
        st.mode, st.e_lo, st.nb_neg, st.nb_pos = self.mode, self.e_lo, self.nb_neg, self.nb_pos
        st.pre, st.post = self.pre, self.post
        st.desc[:] = self.desc
        st.coef[:] = self.coef
        return st


def _eval_fn(fn, x):
    with np.errstate(all="ignore"):
        return np.asarray(fn(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _fit(fn, a, lo, hi, floor, c0=None, snap=False):
    """Quadratic in dx = v - a over v in [lo, hi]: c0 = fn(a) (exact at the segment start),
    c1, c2 by relative-weighted least squares. Returns FP32-rounded (c0, c1, c2) and the
    estimated max relative error."""
    n = 40
    t = 0.5 - 0.5 * np.cos(np.linspace(0.0, math.pi, n))
    v = lo + (hi - lo) * t
    if lo < 0 < hi:           # centre: add points approaching 0 geometrically
        g = hi * 2.0 ** -np.arange(1, 30, dtype=np.float64)
        v = np.concatenate([v, g, -g])
    f = _eval_fn(fn, v)
    ok = np.isfinite(f)
    v, f = v[ok], f[ok]
    fa = _eval_fn(fn, np.array([a]))[0] if c0 is None else c0
    if not np.isfinite(fa):
        return (0.0, 0.0, 0.0), math.inf
    c0 = f32(fa)
    dx = v - a
    wgt = 1.0 / np.maximum(np.abs(f), floor)
    A = np.stack([dx, dx * dx], axis=1) * wgt[:, None]
    r = (f - c0) * wgt
    with np.errstate(all="ignore"):
        sol, *_ = np.linalg.lstsq(A, r, rcond=None)
    def err_of(c1, c2):
        y = c0 + dx * (c1 + dx * c2)
        return float(np.max(np.abs(y - f) * wgt)) if len(f) else 0.0

    c1, c2 = f32(sol[0]), f32(sol[1])
    err = err_of(c1, c2)
    # Centre: a short c1 (e.g. exactly 1 for tanh, sin near 0) keeps c1 * dx exact, so tiny
    # inputs do not fall below FP32's normal range by a rounding; take it when it costs little.
    if snap and c1 != 0.0:
        e = math.floor(math.log2(abs(c1)))
        short = round(c1 / 2.0 ** (e - 8)) * 2.0 ** (e - 8)
        if err_of(short, c2) <= max(2 * err, 2.0 ** -16):
            c1, err = short, max(err_of(short, c2), err)
    return (c0, c1, c2), err


def _segments(spec, side, b, k):
    """(seg_start, lo, hi) of the 2**k segments of binade b of a side."""
    e = spec.center + b
    h = 2.0 ** e / 2 ** k
    out = []
    for j in range(2 ** k):
        start = 2.0 ** e + j * h
        if side == 0:
            out.append((start, start, start + h))
        else:
            out.append((-start, -start - h, -start))
    return out


def _binade_fit(spec, side, b, k):
    coefs, worst = [], 0.0
    for a, lo, hi in _segments(spec, side, b, k):
        c, err = _fit(spec.fn, a, lo, hi, spec.floor)
        coefs.append(c)
        worst = max(worst, err)
    return coefs, worst


def _edge(spec, how, bound):
    if isinstance(how, tuple):
        return tuple(f32(c) for c in how)
    if isinstance(how, (int, float)):
        return (f32(how), 0.0, 0.0)
    fb = float(_eval_fn(spec.fn, np.array([bound]))[0])
    if how == "saturate":
        return (f32(fb), 0.0, 0.0)
    if how == "linear":
        d = abs(bound) * 1e-6
        fp = float((_eval_fn(spec.fn, np.array([bound + d]))[0] -
                    _eval_fn(spec.fn, np.array([bound - d]))[0]) / (2 * d))
        return (f32(fb - fp * bound), f32(fp), 0.0)
    raise ValueError(f"under/over must be 'linear', 'saturate', a number or a tuple, not {how!r}")


def compile_table(spec, depth=512, budget=None):
    """Compile ``spec`` into a table of at most ``budget`` (default ``depth``) entries."""
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TypeError(f"depth must be an integer, not {depth!r}")
    if depth < 4 or depth > (1 << DESC_BASE_BITS):
        raise ValueError(f"depth must be in 4..{1 << DESC_BASE_BITS}, not {depth}")
    budget = depth if budget is None else min(budget, depth)
    nb = {0: spec.nb(0), 1: spec.nb(1)}
    for side, n in nb.items():
        if not 0 <= n <= MAX_BINADES:
            raise ValueError(f"{spec.name}: a side can have 0..{MAX_BINADES} binades, not {n}")
    if not 1 <= spec.e_lo <= 254:
        raise ValueError(f"{spec.name}: center must give a biased exponent in 1..254")
    binades = [(s, b) for s in (0, 1) for b in range(nb[s])]
    if 3 + len(binades) > budget:
        raise ValueError(f"{spec.name}: {len(binades)} binades do not fit in {budget} entries")
    k = {key: 0 for key in binades}
    fits = {key: _binade_fit(spec, *key, 0) for key in binades}
    used = 3 + len(binades)
    heap = [(-fits[key][1], key) for key in binades]
    heapq.heapify(heap)
    while heap:
        negerr, key = heapq.heappop(heap)
        if -negerr <= spec.target:
            break
        if k[key] >= MAX_K:
            continue
        extra = 2 ** k[key]
        if used + extra > budget:
            continue
        k[key] += 1
        used += extra
        fits[key] = _binade_fit(spec, *key, k[key])
        heapq.heappush(heap, (-fits[key][1], key))
    coef = np.zeros((depth, 3), dtype=np.uint32)

    def put(entry, c):
        coef[entry] = [f32_bits(x) for x in c]

    c_center, err_c = _fit(spec.fn, 0.0, -2.0 ** spec.center, 2.0 ** spec.center, spec.floor,
                           snap=True)
    put(ENTRY_CENTER, c_center)
    lo_bound = -2.0 ** (spec.top_neg if spec.top_neg is not None else spec.center)
    hi_bound = 2.0 ** (spec.top_pos if spec.top_pos is not None else spec.center)
    put(ENTRY_UNDER, _edge(spec, spec.under, lo_bound))
    put(ENTRY_OVER, _edge(spec, spec.over, hi_bound))
    desc = [0] * (2 * MAX_BINADES)
    entry = 3
    worst = 0.0
    for key in binades:
        side, b = key
        desc[side * MAX_BINADES + b] = pack_desc(entry, k[key])
        for c in fits[key][0]:
            put(entry, c)
            entry += 1
        worst = max(worst, fits[key][1])
    return CompiledTable(spec=spec, depth=depth, mode=int(spec.mode), e_lo=spec.e_lo,
                         nb_neg=nb[1], nb_pos=nb[0], pre=f32_bits(spec.pre),
                         post=f32_bits(spec.post), desc=desc, coef=coef, used=entry,
                         ks={f"{'-+'[side == 0]}2^{spec.center + b}": k[(side, b)]
                             for side, b in binades},
                         est_error=max(worst, err_c if spec.mode == RangeMode.NONE else 0.0))
