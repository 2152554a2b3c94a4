"""One lane of the LUT's evaluation pipeline (``sim.vector.lut_eval``): ``LutReduce`` then
``LutPoly``."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.vector.lut_poly import LutPoly
from rtl.vector.lut_reduce import STAGE3, STAGES, LutReduce, latency_of

__all__ = ["LutLane", "STAGES", "latency_of"]

_HEADER_1 = ("s1_mode", "s1_is", "s1_sq", "pre_q")
_HEADER_2 = ("s2_bank", "s2_e_lo", "s2_hi_neg", "s2_hi_pos")
_FINISH = ("fin_scaled", "fin_recip", "fin_log", "post_q")


class LutLane(wiring.Component):
    """One element per enabled cycle through the table of the active bank, ``latency_of(deep)``
    enabled cycles from ``z`` to ``y``; every register advances on ``en`` (a stall holds the
    whole lane): ``LutReduce`` (stages 0 to 3) then ``LutPoly`` (stages 3 to 6). A bypassed
    element leaves as it entered.

    The lane reads the LUT's shared memories through ports: the segment descriptors' K of the
    two binades the binade's bit 4 may choose (``k_addr``/``k_data``), the descriptor's base
    and low-bit mask (``desc_addr``; ``desc_base``, ``desc_low``), and the coefficient row
    (``coef_addr``, ``coef_data``), all asynchronous reads registered in the lane. Its
    registers hold data only (no reset) but ``region`` and ``y``.

    Parameters
    ----------
    depth : int
        Entries per bank (``rtl.vector.lut.check_depth``).
    deep : bool
        Pipeline the FP32 units (``STAGES``).

    Members
    -------
    z : In(32)
        The FP32 input.
    bypass, en, bank : In(1)
        Pass ``z`` through; advance; the active bank (for the coefficient address).
    s2_count : In(1)
        The element in stage 2 is to be counted (``region``).
    s1_mode, s1_is, s1_sq, pre_q, s2_bank, s2_e_lo, s2_hi_neg, s2_hi_pos, fin_scaled,
    fin_recip, fin_log, post_q : In
        The active bank's header (``rtl.vector.lut_header.LutHeader``).
    k_addr, k_data, desc_addr, desc_base, desc_low, coef_addr, coef_data
        The shared memories' read ports (``LutReduce``).
    region : Out(2)
        The element's counted region, a cycle after stage 2: 1 hit, 2 under, 3 over, 0 not
        counted.
    y : Out(32)
        The result.
    """

    def __init__(self, depth, *, deep):
        self._depth, self._deep = depth, deep
        front = LutReduce.members(depth)
        sig = {n: front[n] for n in ("z", "bypass", "en", "bank", "s2_count", "k_addr",
                                     "k_data", "desc_addr", "desc_base", "desc_low",
                                     "coef_addr", "coef_data", "region") + _HEADER_1 + _HEADER_2}
        back = LutPoly.members()
        sig.update({n: back[n] for n in _FINISH + ("y",)})
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        m.submodules.reduce = red = LutReduce(self._depth, deep=self._deep)
        m.submodules.poly = poly = LutPoly(deep=self._deep)
        for name, member in self.signature.members.items():
            inner = red if name in red.signature.members else poly
            if member.flow == In:
                m.d.comb += getattr(inner, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(inner, name))
        m.d.comb += poly.en.eq(self.en)
        m.d.comb += [getattr(poly, n).eq(getattr(red, n)) for n in ("s3_dx", "row") +
                     tuple(f"s3_{n}" for n in STAGE3)]
        return m
