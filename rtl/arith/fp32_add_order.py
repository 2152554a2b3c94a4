"""Step 1 of the FP32 adder: unpack, DAZ, the specials' terms per operand, order the
operands by magnitude, exponent difference, trailing zeros."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.fp32_add_lz import lz25
from rtl.arith.wide_mux import wide_mux
from sim.config import check_bool

__all__ = ["FP32AddOrder", "order_layout"]


def order_layout(near_early):
    """The fields :class:`FP32AddOrder` passes to step 2 (``near_diff`` with ``near_early``,
    ``d_one`` without)."""
    fields = {"sig_big": 24, "far_x": 24, "e_big": 8, "s_big": 1, "sub": 1, "shift": 5,
              "swap": 1, "nz_a": 1, "nz_b": 1, "tz_a": 5, "tz_b": 5, "d_le1": 1}
    if near_early:
        fields["near_diff"] = 25
    else:
        fields["d_one"] = 1
    fields.update(zero_sign=1, emax_a=1, emax_b=1)
    return data.StructLayout(fields)


class FP32AddOrder(wiring.Component):
    """Step 1 of :class:`rtl.arith.fp32_add.FP32Adder`, combinational (no register, no
    handshake: the adder places its pipeline registers around it).

    From the operands ``a`` and ``b``: the order by magnitude (``swap``: ``|a| < |b|``) and,
    selected by it, the big significand (``sig_big``, hidden bit set, not DAZ-masked), the
    small one inverted for a subtraction (``far_x``), the big exponent and sign; the
    alignment shift (``shift``, the exponent difference clamped to 27) and ``d_le1``
    (exponents at most one apart); per operand the DAZ flags (``nz_a``, ``nz_b``: nonzero
    exponent), the trailing zeros of the significand (``tz_a``, ``tz_b``) and the all-ones
    exponent (``emax_a``, ``emax_b``); ``zero_sign`` (both negative). With ``near_early``
    the near path's one-bit alignment and exact subtraction (``near_diff``, both orders
    selected by ``swap`` and the exponents' low bits), else their low bits' difference
    (``d_one``) for step 2 to do it.

    Parameters
    ----------
    near_early : bool
        Compute the near path's difference here.

    Members
    -------
    a, b : In(32)
        FP32 operands.
    o : Out(order_layout(near_early))
        The terms above.
    """

    def __init__(self, near_early):
        self._near_early = check_bool("near_early", near_early)
        super().__init__({"a": In(32), "b": In(32), "o": Out(order_layout(near_early))})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        ea, eb = a[23:31], b[23:31]
        za, zb = ea == 0, eb == 0                      # zero or subnormal: DAZ
        # Order by magnitude: the raw 31-bit patterns compare like the values (DAZ only
        # matters when both are zero or subnormal, which `both_zero` handles). Everything that
        # depends on the order is computed for both orders beside the comparison, then
        # selected by it, so the comparison's carry chain is followed by one mux level only.
        # ``swap`` (|a| < |b|) is the borrow of a 32-bit ``|a| - |b|``, a sum output of the
        # carry chain's last cell: as ``<`` yosys put a LUT after the chain, a level more in
        # front of every order select (the near path's below).
        ab32 = Signal(32)
        m.d.comb += ab32.eq(a[0:31] - b[0:31])
        swap = ab32[31]
        # The exponent difference's terms are selected by the exponents' own order (the
        # borrow of ``ea - eb``), not by ``swap``: the bigger magnitude never has the smaller
        # exponent, and with equal exponents both differences are 0. So the 31-bit compare's
        # carry chain is not in front of them.
        d_ab9 = Signal(9)
        d_ba = Signal(8)
        m.d.comb += [d_ab9.eq(ea - eb), d_ba.eq(eb - ea)]
        d_ab, e_lt = d_ab9[0:8], d_ab9[8]

        def clamp(d):          # beyond 27 binades only the sticky bit is left
            return Mux(d > 27, 27, d[0:5])
        shift = Mux(e_lt, clamp(d_ba), clamp(d_ab))
        d_le1 = Mux(e_lt, d_ba <= 1, d_ab <= 1)
        # The near path's one-bit alignment, "the exponents differ", only matters where the
        # near path is used, i.e. with ``|ea - eb| <= 1``: there the exponents differ iff
        # their low bits do, one XOR instead of ``d == 1`` after the exponent difference's
        # carry chain, so that chain is not in front of the near path's select.
        d_one = Signal()
        m.d.comb += d_one.eq(ea[0] ^ eb[0])
        full_a, full_b = Cat(a[0:23], 1), Cat(b[0:23], 1)
        sig_a = Mux(za, 0, full_a)                      # DAZ: no mantissa, no hidden bit
        sig_b = Mux(zb, 0, full_b)
        # For step 2's guard, round and sticky bits: the trailing zeros of each significand
        # (0 to 23, its lowest one; the hidden bit is not DAZ-masked), counted beside the
        # order compare from the operand's own bits, as the leading zeros of the reversed bits.
        # (The hidden bit at bit 1 of the reversed 25 bits keeps the count below 24.)
        tz = {}
        for x, v in (("a", a), ("b", b)):
            rev = Cat(Const(0, 1), Const(1, 1), *[v[22 - i] for i in range(23)])
            tz[x], _ = lz25(m, platform, rev, f"tz_{x}")
        sub = a[31] ^ b[31]
        s1 = dict(
            # Not DAZ-masked: the bigger magnitude is zero or subnormal only if both are, a
            # special case (``both_zero``) whatever the paths compute.
            sig_big=Mux(swap, full_b, full_a),
            # the small significand, inverted for a subtraction (``big + ~y + 1``) here in
            # the order select's LUTs, not after the alignment shift in front of the adder
            far_x=Mux(swap, sig_a, sig_b) ^ sub.replicate(24),
            e_big=Mux(swap, eb, ea),
            s_big=Mux(swap, b[31], a[31]),
            sub=sub,
            shift=shift,
            # per operand (not selected by the order compare here, whose carry chain is in
            # front of step 1's register): nonzero significand (not DAZ), trailing zeros
            swap=swap,
            nz_a=~za, nz_b=~zb,
            tz_a=tz["a"], tz_b=tz["b"],
            d_le1=d_le1,
            d_one=d_one,
            zero_sign=a[31] & b[31],                    # (-0) + (-0) = -0, otherwise +0
            # The specials from per-operand terms, combined in step 2: the exponent is all
            # ones, and the mantissa is zero iff ``tz`` is 23, so ``s1_nan`` / ``s1_inf`` are
            # not functions of both whole operands in step 1.
            emax_a=ea == 0xFF, emax_b=eb == 0xFF,
        )
        # Near path: one guard bit below the big significand; the small one is shifted by
        # the exponent difference (0 or 1), nothing is lost, and subtracted. Done here when
        # the adder has a register after this step but none between steps 2 and 3 (``stages``
        # 3), for both orders and selected by the compare like ``far_x``, so the small
        # operand's multiplexer is not in front of step 3's count; otherwise in step 2, where
        # it does not lengthen the exponent difference's path here.
        if self._near_early:
            # Every candidate difference (the big operand minus the other shifted by 0 or 1)
            # is computed beside the compare and chosen by ``d_one`` and ``swap`` in one slice
            # per bit (``wide_mux``: a LUT4 on ``d_one``, the PFUMX on ``swap``), so the
            # compare's chain is followed by the PFUMX's select only;
            # the candidates' own chains (25 bits at most) run beside the compare's (32). With
            # equal exponents the hidden bits cancel: ``|a| - |b|``'s low 23 bits (``ab32``)
            # are one of them, with a chain of its own only for ``|b| - |a|``. The significands
            # are not DAZ-masked here: the near path is not used with a zero or subnormal
            # operand (step 2's ``near_ok``), which keeps the exponents' zero tests out of
            # these bits.
            ba23 = Signal(23)
            dif_ab = Signal(25)
            dif_ba = Signal(25)
            m.d.comb += [ba23.eq(b[0:23] - a[0:23]),
                         dif_ab.eq(Cat(Const(0, 1), full_a) - full_b),
                         dif_ba.eq(Cat(Const(0, 1), full_b) - full_a)]
            s1["near_diff"] = wide_mux(m, platform, Cat(d_one, swap),
                                       [Cat(Const(0, 1), ab32[0:23]), dif_ab,
                                        Cat(Const(0, 1), ba23), dif_ba], "near_diff")
            del s1["d_one"]
        for k, v in s1.items():
            assert len(v) == len(self.o[k]), k
            m.d.comb += self.o[k].eq(v)
        return m
