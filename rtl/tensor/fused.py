"""Fused column accumulation (``docs/tensor.md``, "Fused column accumulation"): the PE's
align-and-add (:class:`FusedAdder`) and the column's normaliser (:class:`ColumnNormaliser`).

The partial sum a column passes down (:func:`fused_psum_layout`) is ``(S, E, nan, pinf, ninf,
int)``: ``S`` a ``W``-bit two's-complement integer, ``E`` an FP32-biased exponent (0 = empty),
value ``S * 2**(E - 127 - F)`` with ``F = sim.tensor.FUSED_F``; the NaN / +Inf / -Inf flags;
``int`` marks an INT8 tile, whose wrapping INT32 sum rides in ``S`` (``|sum| < 2**(W - 1)``).
``sim.tensor.fused_step`` and ``fused_normalise`` are the golden model.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.arith.common import Pipe, ge_const, leading_zeros
from sim import config
from sim.tensor import FUSED_F

__all__ = ["fused_psum_layout", "FusedAdder", "ColumnNormaliser", "norm_stages"]


def fused_psum_layout(width):
    """The partial sum passed down a fused column, ``S`` of ``width`` bits."""
    return data.StructLayout({"s": signed(width), "e": 8, "nan": 1, "pinf": 1, "ninf": 1,
                              "int": 1})


def norm_stages(add_stages):
    """Registers of the column normaliser of an array with ``add_stages``: ``min(add_stages,
    2)``."""
    return min(add_stages, 2)


class FusedAdder(wiring.Component):
    """``psum_out = psum_in + product`` for fused accumulation, ``stages`` cycles later.

    For a finite nonzero FP32 product ``p = m_p * 2**(e_p - 127 - F)``: ``E' = max(E, e_p)``,
    ``S' = (S >> (E' - E)) + (m_p >> (E' - e_p))`` (arithmetic shifts; only one is nonzero, so
    one shifter serves both after a swap). Zero products change nothing; NaN and Inf products
    set their flag. With ``is_int`` the product is INT32 bits and ``S' = S + p``.

    Datapath: 1. split the product, compare exponents, swap; 2. shift the smaller term;
    3. add. ``stages`` registers: 1 after step 3, 2 after steps 2 and 3, 3 after every step,
    4 also on the inputs.

    Parameters
    ----------
    width : int
        ``W``, bits of ``S`` (``FUSED_F + 2`` to 40).
    stages : int
        Pipeline registers, 0 to 4.
    split : bool
        The product arrives split (``e_p``, ``m_p``, ``p_flags``, as ``sim.tensor.fused_split``
        gives it) instead of as FP32 bits; default False.

    Members
    -------
    en : In(1)
        Clock enable of every register.
    psum_in : In(fused_psum_layout(width))
    product : In(32)
        FP32 product bits (INT32 with ``is_int``); without ``split`` only.
    e_p, m_p, p_flags : In(8), In(signed(width)), In(3)
        With ``split``: the product's biased exponent and signed significand (0 and 0 for a
        zero; ``m_p`` the INT32 product with ``is_int``), and its NaN, +Inf, -Inf flags.
    is_int : In(1)
    psum_out : Out(fused_psum_layout(width))
    """

    MAX_STAGES = 4
    _CUTS = {0: (), 1: (3,), 2: (2, 3), 3: (1, 2, 3), 4: (0, 1, 2, 3)}

    def __init__(self, width, stages=1, *, split=False):
        self._width = config.check_int("width", width, FUSED_F + 2, 40)
        self._stages = config.check_int("stages", stages, 0, self.MAX_STAGES)
        self._split = config.check_bool("split", split)
        layout = fused_psum_layout(width)
        sig = {"en": In(1, init=1), "psum_in": In(layout), "is_int": In(1),
               "psum_out": Out(layout)}
        if split:
            sig.update(e_p=In(8), m_p=In(signed(width)), p_flags=In(3))
        else:
            sig["product"] = In(32)
        super().__init__(sig)

    width = property(lambda self: self._width)
    stages = property(lambda self: self._stages)

    def elaborate(self, platform):
        m = Module()
        W = self._width
        pipe = Pipe(m, self.en, self._CUTS[self._stages])
        ins = dict(s=self.psum_in.s, e=self.psum_in.e, nan=self.psum_in.nan,
                   pinf=self.psum_in.pinf, ninf=self.psum_in.ninf, is_int=self.is_int)
        if self._split:
            ins.update(e_p=self.e_p, m_p=self.m_p, p_flags=self.p_flags)
        else:
            ins.update(p=self.product)
        r = {k: pipe(0, v, k) for k, v in ins.items()}

        # -- step 1: the product's class and signed significand; compare and swap ----------
        is_int = r["is_int"]
        if self._split:
            m_p, e_p, p_flags = r["m_p"], r["e_p"], r["p_flags"]
        else:
            p = r["p"]
            p_exp = p[23:31]
            special = p_exp == 0xFF
            man_nz = p[0:23].any()
            finite = ~is_int & (p_exp != 0) & ~special
            mag = Cat(Const(0, FUSED_F - 23), p[0:23], Const(1, 1))        # F + 1 bits
            m_p = Signal(signed(W))
            m.d.comb += m_p.eq(Mux(is_int, p.as_signed(),
                                   Mux(finite, Mux(p[31], -mag, mag), 0)))
            e_p = Signal(8)
            m.d.comb += e_p.eq(Mux(finite, p_exp, 0))
            p_flags = Cat(~is_int & special & man_nz, ~is_int & special & ~man_nz & ~p[31],
                          ~is_int & special & ~man_nz & p[31])
        E = r["e"]
        # E >= e_p (also for every zero, special or INT product, whose e_p is 0): S is the
        # larger term and the product is shifted, else the other way round.
        diff = Signal(signed(9))
        m.d.comb += diff.eq(E - e_p)
        keep = ~diff[8]
        d = Signal(8)
        m.d.comb += d.eq(Mux(keep, diff[0:8], -diff))
        big = Signal(signed(W))
        small = Signal(signed(W))
        e_max = Signal(8)
        m.d.comb += [big.eq(Mux(keep, r["s"], m_p)), small.eq(Mux(keep, m_p, r["s"])),
                     e_max.eq(Mux(keep, E, e_p))]
        # A shift of W - 1 or more leaves only sign bits.
        sw = ceil_log2(W)
        sh = Signal(sw)
        m.d.comb += sh.eq(Mux(ge_const(d, W - 1), W - 1, d[0:sw]))
        flags = Cat(r["nan"] | p_flags[0], r["pinf"] | p_flags[1], r["ninf"] | p_flags[2])
        r = {k: pipe(1, v, k) for k, v in dict(big=big, small=small, sh=sh, e=e_max,
                                                 flags=flags, is_int=is_int).items()}

        # -- step 2: align the smaller term (floor) ----------------------------------------
        aligned = Signal(signed(W))
        m.d.comb += aligned.eq(r["small"] >> r["sh"])
        r = dict(r, aligned=aligned)
        r = {k: pipe(2, v, k) for k, v in r.items() if k not in ("small", "sh")}

        # -- step 3: add ---------------------------------------------------------------------
        total = Signal(signed(W))
        m.d.comb += total.eq(r["big"] + r["aligned"])
        out = Signal(fused_psum_layout(W))
        m.d.comb += [out.s.eq(total), out.e.eq(r["e"]), out.nan.eq(r["flags"][0]),
                     out.pinf.eq(r["flags"][1]), out.ninf.eq(r["flags"][2]),
                     out.int.eq(r["is_int"])]
        m.d.comb += self.psum_out.eq(pipe(3, out.as_value(), "sum"))
        return m


class ColumnNormaliser(wiring.Component):
    """A fused column's partial sum -> FP32 bits (``sim.tensor.fused_normalise``), or the
    INT32 sum of an INT8 tile, ``stages`` cycles later.

    Canonical NaN for ``nan`` or both Infs, else the Inf; else ``+0`` for ``S == 0``; else
    ``|S|`` shifted so that its leading one (position ``L``) is on top, rounded to 24 bits
    (RNE), exponent ``E + L - F`` plus the rounding's carry; Inf at 255 and above, a zero of
    ``S``'s sign at 0 and below. Steps: 1. magnitude, leading-zero count, left shift; 2. round,
    range, pack. ``stages`` registers: 1 after step 2, 2 after both.

    Parameters
    ----------
    width : int
        ``W``, bits of ``S``.
    stages : int
        Pipeline registers, 0 to 2.

    Members
    -------
    en : In(1)
    psum : In(fused_psum_layout(width))
    o : Out(32)
        FP32 (or INT32) bits.
    """

    MAX_STAGES = 2
    _CUTS = {0: (), 1: (2,), 2: (1, 2)}

    def __init__(self, width, stages=1):
        self._width = config.check_int("width", width, FUSED_F + 2, 40)
        self._stages = config.check_int("stages", stages, 0, self.MAX_STAGES)
        super().__init__({"en": In(1, init=1), "psum": In(fused_psum_layout(width)),
                          "o": Out(32)})

    width = property(lambda self: self._width)
    stages = property(lambda self: self._stages)

    def elaborate(self, platform):
        m = Module()
        W = self._width
        pipe = Pipe(m, self.en, self._CUTS[self._stages])
        s = self.psum.s
        neg = s[W - 1]
        mag = Signal(W)
        m.d.comb += mag.eq(Mux(neg, -s, s))
        lz, zero = leading_zeros(m, mag, "norm_lz")
        norm = Signal(W)
        m.d.comb += norm.eq(mag << lz)
        # Biased exponent of the leading one: E + (W - 1 - lz) - F.
        exp = Signal(signed(11))
        m.d.comb += exp.eq(self.psum.e + (W - 1 - FUSED_F) - lz)
        p = self.psum
        special = Signal(3)
        m.d.comb += special.eq(Cat(p.nan | (p.pinf & p.ninf), p.pinf, p.ninf))
        r = {k: pipe(1, v, k) for k, v in dict(norm=norm, exp=exp, neg=neg, zero=zero,
                                                 special=special, int=p.int, s=s).items()}

        # -- step 2: RNE on the bits below the 24 kept, range, pack --------------------------
        norm = r["norm"]
        sig = norm[W - 24:W]
        guard = norm[W - 25]
        sticky = norm[0:W - 25].any()
        rounded = Signal(25)
        m.d.comb += rounded.eq(sig + (guard & (sticky | sig[0])))
        carry = rounded[24]
        exp2 = Signal(signed(12))
        m.d.comb += exp2.eq(r["exp"] + carry)
        mant = Mux(carry, 0, rounded[0:23])
        sign = r["neg"]
        fp = Signal(32)
        with m.If(r["special"][0]):
            m.d.comb += fp.eq(0x7FC00000)
        with m.Elif(r["special"][1]):
            m.d.comb += fp.eq(0x7F800000)
        with m.Elif(r["special"][2]):
            m.d.comb += fp.eq(0xFF800000)
        with m.Elif(r["zero"]):
            m.d.comb += fp.eq(0)
        # (``exp2 >= 255`` and ``exp2 <= 0`` as logic of the bits, not carry chains)
        with m.Elif(~exp2[11] & ge_const(exp2[0:11], 255)):
            m.d.comb += fp.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Elif(exp2[11] | ~exp2[0:11].any()):
            m.d.comb += fp.eq(Cat(Const(0, 31), sign))
        with m.Else():
            m.d.comb += fp.eq(Cat(mant, exp2[0:8], sign))
        out = Mux(r["int"], r["s"].as_signed(), fp)
        m.d.comb += self.o.eq(pipe(2, out, "o"))
        return m
