"""Stages 0 to 3 of a LUT lane: pre-scale, range reduction, segment, table read and ``dx``
(``sim.vector.lut_eval`` steps 1 to 3). The lanes' stage table ``STAGES`` lives here."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.vector.lut_arith import exp2_reduce, segment_offset
from rtl.vector.mul import LaneMultiplier
from rtl.vector.lut_header import MODE_FLAGS
from rtl.vector.lut_special import LutSpecial
from sim.vector import DESC_BASE_BITS, ENTRY_OVER, ENTRY_UNDER, RangeMode

__all__ = ["LutReduce", "STAGES", "STAGE3", "latency_of", "lane_registers"]

#: FP32 pipeline registers of (the pre-scale multiplier, a coefficient multiplier, an adder),
#: whether the table address is registered before the block RAM, whether the segment offset
#: ``dx`` (and with it the block RAM's output) has a register in its middle and whether the
#: binade (the segment descriptor's address) is registered before the descriptor read, per
#: ``deep``.
STAGES = {False: (0, 0, 0, 0, 0, 0), True: (4, 4, 3, 1, 1, 1)}


def latency_of(deep):
    """Enabled cycles from ``z`` to ``y`` of a lane (and of a ``Lut``) with ``deep``: the
    pre-scale, range reduction, table read, two multiply-adds and the finish."""
    pre, mul, add, idx, dx, bin_ = STAGES[deep]
    return (pre + 1) + 1 + (bin_ + idx + 1 + dx) + 2 * (mul + add + 1) + (add + 1)


#: The element's values in stage 3 besides ``dx`` and its row, and their shapes.
STAGE3 = {"k": signed(10), "e": signed(10), "flip": 1, "special": 1, "sval": 32}


def lane_registers(m):
    """The lane's helpers: ``S`` a data register without reset (the engine tracks validity,
    so neither the reset nor the core's soft reset fans out to them), ``sub`` a submodule,
    ``D`` a value delayed by enabled cycles."""
    def S(shape, name, init=0):
        return Signal(shape, name=name, init=init, reset_less=True)

    def sub(name, comp):
        m.submodules[name] = comp
        return comp

    return S, sub


class LutReduce(wiring.Component):
    """Stages 0 to 3 of a lane: ``w = z * PRE`` (``z`` itself when bypassed), the range
    reduction by mode (``v``, the exponent ``k``) and the special results, the binade and
    segment (the descriptor reads), the table index and the coefficient read, and the segment
    offset ``dx``. Latency: ``s3_*`` hold the element ``(PRE + 1) + 1 + (BIN + IDX + 1 + DX)``
    enabled cycles after ``z`` (``STAGES``), ``row`` (the block RAM's output register) ``DX``
    cycles before them; ``region`` a cycle after stage 2.

    Parameters
    ----------
    depth : int
    deep : bool

    Members
    -------
    z : In(32); bypass, en, bank, s2_count : In(1)
    s1_mode : In(3); s1_is : In(MODE_FLAGS); s1_sq : In(1); pre_q : In(32)
    s2_bank : In(1); s2_e_lo : In(8); s2_hi_neg, s2_hi_pos : In(9)
        The active bank's header (``LutHeader``).
    k_addr : Out(ArrayLayout(7, 2)); k_data : In(ArrayLayout(3, 2))
    desc_addr : Out(7); desc_base : In(DESC_BASE_BITS); desc_low : In(7)
    coef_addr : Out(log2(depth) + 1); coef_data : In(96)
        The shared memories' read ports (asynchronous).
    region : Out(2)
    s3_dx : Out(32); s3_k, s3_e : Out(signed(10)); s3_flip, s3_special : Out(1)
    s3_sval : Out(32); row : Out(96)
        The element in stage 3: ``dx``, the scale exponent ``k``, the unbiased exponent
        ``e`` (LOG), RECIP's sign flip, whether the result is the special value ``sval`` (or
        the bypassed input), and its coefficient row ``c0, c1, c2`` (``DX`` cycles early).
    """

    def __init__(self, depth, *, deep):
        self._depth, self._deep = depth, deep
        super().__init__(self.members(depth))

    @staticmethod
    def members(depth):
        """The signature's members for ``depth`` entries per bank."""
        sig = {"z": In(32), "bypass": In(1), "en": In(1), "bank": In(1), "s2_count": In(1),
               "s1_mode": In(3), "s1_is": In(MODE_FLAGS), "s1_sq": In(1), "pre_q": In(32),
               "s2_bank": In(1), "s2_e_lo": In(8), "s2_hi_neg": In(9), "s2_hi_pos": In(9),
               "k_addr": Out(data.ArrayLayout(7, 2)), "k_data": In(data.ArrayLayout(3, 2)),
               "desc_addr": Out(7), "desc_base": In(DESC_BASE_BITS), "desc_low": In(7),
               "coef_addr": Out(depth.bit_length()), "coef_data": In(96), "region": Out(2),
               "s3_dx": Out(32), "row": Out(96)}
        sig.update({f"s3_{n}": Out(shape) for n, shape in STAGE3.items()})
        return sig

    def elaborate(self, platform):
        m = Module()
        en = self.en
        abits = self._depth.bit_length() - 1
        PRE, MUL, ADD, IDX, DX, BIN = STAGES[self._deep]
        s1_mode, s1_sq = self.s1_mode, self.s1_sq
        s1_is = {r: getattr(self.s1_is, r.name.lower()) for r in RangeMode if r != RangeMode.NONE}
        s1_exp2 = s1_is[RangeMode.EXP2]
        s2_bank, s2_e_lo = self.s2_bank, self.s2_e_lo
        s2_hi_neg, s2_hi_pos = self.s2_hi_neg, self.s2_hi_pos
        S, sub = lane_registers(m)

        def D(value, cycles, name, reset_less=True):
            return delay(m, en, value, cycles, name, reset_less=reset_less)

        # -- stage 0 -> 1: w = z * PRE (or z when bypassed) -----------------------------
        z = self.z
        pre_mul = sub("pre_mul", LaneMultiplier(corner_logic=True, stages=PRE))
        m.d.comb += [pre_mul.a.eq(z), pre_mul.b.eq(self.pre_q), pre_mul.en.eq(en)]
        byp = D(self.bypass, PRE, "byp")
        s1_w = S(32, "s1_w")
        s1_byp = S(1, "s1_byp")
        w_pre = S(32, "w_pre")
        m.d.comb += w_pre.eq(Mux(byp, D(z, PRE, "z"), pre_mul.o))
        with m.If(en):
            m.d.sync += [s1_w.eq(w_pre), s1_byp.eq(byp)]
        # EXP2's range reduction starts before the s1_w register (its fixed-point shift and
        # negation; the pre-scale's output is a register when deep) and ends after it
        # (leading-zero count, normalising shift): no added latency.
        # It and the special tests below take the pre-scale's output itself, not ``w_pre``:
        # a bypassed element's ``v``, ``n`` and class are never used (it is special in
        # stage 2, with ``s1_w`` as its value), and for every other element the two are
        # equal, so ``s1_w`` is the register of ``pre_mul.o`` wherever it is read after
        # the cut, and the bypass multiplexer is not in front of the shift and negation
        # that lead to ``mag``.
        v_exp, n = exp2_reduce(m, pre_mul.o, "x2",
                               cut=lambda x, nm: s1_w if x is pre_mul.o else
                               delay(m, en, x, 1, nm, reset_less=True))

        # The special results by mode (NaN, Inf, zero and range-limit inputs): the pre-scaled
        # value's class is registered with ``s1_w`` and the choice by mode made in stage 1.
        sp = sub("special", LutSpecial())
        m.d.comb += [sp.w.eq(pre_mul.o), sp.en.eq(en), sp.s1_sign.eq(s1_w[31]),
                     sp.s1_is.eq(self.s1_is), sp.s1_sq.eq(s1_sq)]
        special, sval = sp.special, sp.sval

        # -- stage 1 -> 2: range reduction ----------------------------------------------
        w = s1_w
        s, E, M = w[31], w[23:31], w[0:23]
        e = S(signed(10), "e")
        m.d.comb += e.eq(E - 127)
        v = S(32, "v")
        v_oth = S(32, "v_oth")
        k = S(signed(10), "k")
        m.d.comb += [v_oth.eq(w), k.eq(0)]

        # EXP2: n = round half away from zero of w (|w| < 128), v = w - n (exact);
        # v_exp and n come from exp2_reduce above, split around s1_w. The other modes'
        # ``v`` (a few multiplexers of ``w``) is chosen beside it, and the two at the end.
        vexp = S(8, "vexp")
        m.d.comb += vexp.eq(127 + ~E[0])
        with m.Switch(s1_mode):
            with m.Case(int(RangeMode.EXP2)):
                m.d.comb += k.eq(n)
            # (``-e`` and ``-(e >> 1)`` as one subtraction of ``E`` each, beside ``e``:
            # 127 - E and (128 - E) >> 1, not a negation after ``E - 127`` in front of
            # ``s2_k``)
            with m.Case(int(RangeMode.RECIP)):
                m.d.comb += [v_oth.eq(Cat(M, Const(127, 8), Const(0, 1))),
                             k.eq(Const(127, signed(10)) - E)]
            with m.Case(int(RangeMode.RSQRT)):
                m.d.comb += [v_oth.eq(Cat(M, vexp, Const(0, 1))),
                             k.eq((Const(128, signed(10)) - E) >> 1)]
            with m.Case(int(RangeMode.SQRT)):
                m.d.comb += [v_oth.eq(Cat(M, vexp, Const(0, 1))), k.eq(e >> 1)]
            with m.Case(int(RangeMode.LOG)):
                m.d.comb += v_oth.eq(Cat(M, Const(127, 8), Const(0, 1)))
        m.d.comb += v.eq(Mux(s1_exp2, v_exp, v_oth))
        s2_v = S(32, "s2_v")
        s2_k = S(signed(10), "s2_k")
        s2_e = S(signed(10), "s2_e")
        s2_flip = S(1, "s2_flip")
        s2_special = S(1, "s2_special")
        s2_sval = S(32, "s2_sval")
        with m.If(en):
            m.d.sync += [s2_v.eq(v), s2_k.eq(k), s2_e.eq(e),
                         s2_flip.eq(s & s1_is[RangeMode.RECIP]),
                         s2_special.eq(special | s1_byp),
                         s2_sval.eq(Mux(s1_byp, w, sval))]

        # -- stage 2 -> 3: segment, entry read, dx --------------------------------------
        v = s2_v
        vs, vE = v[31], v[23:31]
        center = vE < s2_e_lo
        b = S(9, "b")
        m.d.comb += b.eq(vE - s2_e_lo)
        # b >= nb, i.e. vE >= e_lo + nb (for ``~center``, where b = vE - e_lo >= 0), both
        # signs' comparisons beside each other and the sign choosing.
        beyond = S(1, "beyond")
        m.d.comb += beyond.eq(~center & Mux(vs, vE >= s2_hi_neg, vE >= s2_hi_pos))
        in_range = ~center & ~beyond
        # With BIN the binade's descriptor address and the segment flags are registered
        # before the descriptor read: the subtraction ``vE - e_lo`` is then not in front
        # of the LUT-RAM and the shift by its ``K`` (``s2_v`` -> binade -> descriptor ->
        # ``mtop``). The element's counted region is taken before it.
        # The segment's K is read before that register, from its own LUT-RAM (``desc_k``):
        # the two binades ``b[4]`` may choose, with the subtraction's low four bits and
        # the registered sign and bank, each registered, and ``b[4]``'s register chooses
        # between them. The LUT-RAM's row multiplexer (eight rows of 16 entries) is then
        # not in front of the shift by K (the descriptor's address register -> LUT-RAM ->
        # row multiplexer -> shift -> ``mtop``), and the carry into ``b[4]`` is not in
        # front of the LUT-RAM's output.
        desc_addr = D(Cat(b[0:5], vs, s2_bank), BIN, "desc_addr")
        k_half = []
        for half in range(2):
            m.d.comb += self.k_addr[half].eq(Cat(b[0:4], half, vs, s2_bank))
            k_half.append(D(self.k_data[half], BIN, f"kk{half}"))
        kk = Mux(desc_addr[4], k_half[1], k_half[0])
        v_b = D(v, BIN, "v_bin")
        center_b, beyond_b, in_range_b = (D(x, BIN, n_) for x, n_ in (
            (center, "center_bin"), (beyond, "beyond_bin"), (in_range, "in_range_bin")))
        m.d.comb += self.desc_addr.eq(desc_addr)
        # With IDX the segment descriptor read (binade -> descriptor LUT-RAM: the base and
        # the mask of the mantissa bits below the segment start) and the segment's offset
        # ``mtop`` (the mantissa's top bits shifted by the K read above) are registered
        # first; the table index, the coefficient block RAM's address and dx are computed
        # from those registers, and the block RAM is read one cycle later.
        kinv = S(3, "kinv")
        m.d.comb += kinv.eq(~kk)                # 7 - kk
        mtop_p = S(7, "mtop_p")
        m.d.comb += mtop_p.eq(v_b[16:23] >> kinv)
        low7_p = S(7, "low7_p")
        m.d.comb += low7_p.eq(self.desc_low)    # ~(0x7F << kinv), read beside kk
        mtop = D(mtop_p, IDX, "mtop")
        low7 = D(low7_p, IDX, "low7")
        base = D(self.desc_base, IDX, "base")
        center_d = D(center_b, IDX, "center")
        beyond_d = D(beyond_b, IDX, "beyond")
        in_range_d = D(in_range_b, IDX, "in_range")
        v_d = D(v_b, IDX, "v")
        vs_d = v_d[31]
        idx = S(abits, "idx")
        with m.If(center_d):
            m.d.comb += idx.eq(0)
        with m.Elif(beyond_d):
            m.d.comb += idx.eq(Mux(vs_d, ENTRY_UNDER, ENTRY_OVER))
        with m.Else():
            m.d.comb += idx.eq(base + mtop)
        low_bits = S(23, "low_bits")   # mantissa bits below the segment start
        m.d.comb += low_bits.eq(Cat(Const(0xFFFF, 16), low7))
        # With DX the leading-zero count of dx is registered before its normalising shift,
        # and the block RAM's output waits beside it in a register.
        dx = segment_offset(m, v_d, in_range_d, low_bits, "dx",
                            cut=(lambda x, n: delay(m, en, x, DX, n, reset_less=True)) if DX
                            else None)
        # The coefficient row at ``idx`` of the active bank, registered after the read.
        row = Signal(96, name="row", reset_less=True)
        m.d.comb += self.coef_addr.eq(Cat(idx, self.bank))
        with m.If(en):
            m.d.sync += row.eq(self.coef_data)
        region = S(2, "region")    # 1 hit, 2 under, 3 over, 0 not counted
        # (A NaN ``v`` is not counted either, but needs no test of its own: ``v`` is NaN
        # only for a NaN ``w``, which is special (EXP2's ``v`` beyond its range limit is
        # not used; RECIP's, RSQRT's, SQRT's and LOG's have a finite exponent), so
        # ``s2_special`` covers it, and no 23-bit test of ``s2_v`` precedes ``region``.)
        m.d.comb += region.eq(Mux(s2_special | ~self.s2_count, 0,
                                  Mux(beyond, Mux(vs, 2, 3), 1)))
        # Registered before the counters' adders (one cycle late: a counter read or write
        # follows an instruction's last element by far more). This register resets: what
        # it holds is counted.
        m.d.comb += self.region.eq(D(region, 1, "region", reset_less=False))
        s3_dx = S(32, "s3_dx")
        s3 = {}
        for name, sig in (("k", s2_k), ("e", s2_e), ("flip", s2_flip),
                          ("special", s2_special), ("sval", s2_sval)):
            s3[name] = S(sig.shape(), f"s3_{name}")
        with m.If(en):
            m.d.sync += s3_dx.eq(dx)
            m.d.sync += [s3[n_].eq(D(sig, BIN + IDX + DX, n_)) for n_, sig in
                         (("k", s2_k), ("e", s2_e), ("flip", s2_flip),
                          ("special", s2_special), ("sval", s2_sval))]
        m.d.comb += [self.s3_dx.eq(s3_dx), self.row.eq(row)]
        m.d.comb += [getattr(self, f"s3_{n_}").eq(s3[n_]) for n_ in STAGE3]
        return m
