"""FP32 adder: round to nearest even, DAZ/FTZ, canonical NaN (the PSUM accumulator)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import CANONICAL_NAN_F32
from rtl.arith.common import Pipe, check_stages
from rtl.arith.wide_mux import lut4, lut6, pair_mux, wide_mux

__all__ = ["FP32Adder"]


def _lz25(m, platform, d, name):
    """Leading zeros of a 25-bit ``d`` (5 bits; 25 if it is 0) and ``d == 0``, in three LUT
    levels on an ECP5 (:func:`rtl.arith.wide_mux.lut4` and ``pair_mux`` cells, which synthesis
    keeps as they are; plain expressions elsewhere). For the near path's difference and, on
    the reversed significands, step 1's trailing-zero counts.

    ``d`` is cut into 4-bit groups from the top (``g0 = d[21:25]`` ... ``g5 = d[1:5]``, and
    ``g6`` is ``d[0]`` over three ones, never zero) and the count is ``4 k + lz(g_k)`` for the
    first nonzero group ``k``. Level 1: each group's zero flag ``z`` and its 2-bit count;
    level 2: the flags of groups 0-2 (``za``) and 3-5 (``zb``) and the count within each of
    those halves; level 3: the count's bits, each a pair of 2:1 multiplexers and the one on
    ``za`` (one slice). As a tree of 2:1 multiplexers (``rtl.arith.common.leading_zeros``)
    synthesis mapped the near path's count to five LUTs in series and the trailing-zero counts
    to 6-7 levels from the operands (``scripts.unit_fmax rtl.arith.fp32_add:FP32Adder
    --depth``, ``stages`` 3)."""
    bits = [Const(1, 1)] * 3 + [d[i] for i in range(25)]          # LSB first, 28 bits
    groups = [Cat(*bits[24 - 4 * i:28 - 4 * i]) for i in range(7)]   # g[3] is the group's MSB
    z, c0, c1 = [], [], []
    for i, g in enumerate(groups[:6]):
        z.append(lut4(m, platform, lambda a, b, c, e: ~(a | b | c | e),
                      (g[0], g[1], g[2], g[3]), f"{name}_z{i}"))
    for i, g in enumerate(groups):
        # the group's leading zeros: 0 (bit 3 set), 1, 2, 3 (bit 0 set, or none)
        c1.append(lut4(m, platform, lambda a, b, c, e: ~e & ~c,
                       (g[0], g[1], g[2], g[3]), f"{name}_g{i}c1"))
        c0.append(lut4(m, platform, lambda a, b, c, e: ~e & (c | ~b),
                       (g[0], g[1], g[2], g[3]), f"{name}_g{i}c0"))
    one, zero = Const(1, 1), Const(0, 1)
    za = lut4(m, platform, lambda a, b, c, e: a & b & c, (z[0], z[1], z[2], zero),
              f"{name}_za")
    zb = lut4(m, platform, lambda a, b, c, e: a & b & c, (z[3], z[4], z[5], zero),
              f"{name}_zb")
    lz4 = lut4(m, platform, lambda a, b, c, e: a & b & c & e, (z[0], z[1], z[2], z[3]),
               f"{name}_c4")
    z4n5 = lut4(m, platform, lambda a, b, c, e: a & ~b, (z[4], z[5], zero, zero),
                f"{name}_z4n5")
    # the count's two low bits within groups 0-2 and within groups 3-5
    halves = [[pair_mux(m, platform, z[k], (z[k], c[k], c[k]), (z[k + 1], c[k + 1], c[k + 2]),
                        f"{name}_h{k}c{j}")
               for j, c in enumerate((c0, c1))] for k in (0, 3)]
    # the count's bits 4..2 are k's: k >= 4 iff z0..z3; for k = 0..2 (``za`` low) k is 2 iff
    # z0 z1 and odd iff z0 ~z1; for k = 3..6, k is 3 or 6 iff ~z3 or zb, odd iff ~z3 or z4 ~z5
    lz3 = pair_mux(m, platform, za, (z[0], zero, z[1]), (z[3], one, zb), f"{name}_c3")
    lz2 = pair_mux(m, platform, za, (z[1], z[0], zero), (z[3], one, z4n5), f"{name}_c2")
    lz1, lz0 = [pair_mux(m, platform, za, (zero, halves[0][j], halves[0][j]),
                         (zb, halves[1][j], (c0, c1)[j][6]), f"{name}_c{j}")
                for j in (1, 0)]
    is_zero = Signal(name=f"{name}_zero")
    m.d.comb += is_zero.eq(za & zb & ~d[0])
    return Cat(lz0, lz1, lz2, lz3, lz4), is_zero


class FP32Adder(wiring.Component):
    """FP32 adder with round-to-nearest-even, as ``sim.formats.fp32_add``.

    Number rules (``docs/interfaces.md`` section 2): subnormal inputs are read as zeros of the
    same sign (DAZ) and subnormal results are flushed to zeros of the same sign (FTZ); a NaN
    input or Inf - Inf gives the canonical NaN ``0x7FC00000``; an exact zero sum is +0 except
    (-0) + (-0) = -0; overflow gives +-Inf.

    Two-path design, so that no cycle holds both a full alignment shift and a full
    normalisation (the long paths of a textbook adder; ``docs/formats.md`` has the figures):

    * far path (an addition, or a subtraction of operands more than one binade apart): align
      the smaller significand with guard/round/sticky bits, add or subtract, then normalise by
      at most one bit either way and round;
    * near path (a subtraction with exponents at most one apart, which may cancel many bits):
      align by at most one bit, subtract exactly, count leading zeros, normalise; the result is
      exact, no rounding. It is used when it cancelled at least one bit, the far path otherwise.

    Rounding adds the round bit to the packed exponent-and-mantissa, so a mantissa carry moves
    into the exponent and a carry out of the largest binade produces exactly the Inf pattern.

    Steps and the registers ``stages`` puts between them:

    1. unpack, DAZ, the specials' terms per operand, order the operands by magnitude,
       exponent difference, each significand's trailing zeros (and with ``stages`` 3 the near
       path's one-bit alignment and subtraction, for both orders);
    2. far path: alignment shift, the guard, round and sticky bits (from the trailing zeros);
       near path: one-bit alignment and subtraction (``stages`` other than 3); the special
       cases (NaN, Inf, two zeros) from step 1's terms;
    3. far path: add/subtract (above the guard bit: the bits below add nothing to the big
       significand but a carry, which the adder's chain decides from the trailing zeros and
       the shift); near path: count leading zeros;
    4. normalise, round, select the path and the special cases, pack.

    ``stages`` 1: a register after step 4; 2: after steps 3 and 4; 3: after steps 1, 3 and 4;
    4: after every step.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 to 4. 0 is purely combinational. Latency ``stages`` cycles,
        throughput one addition per cycle.

    Members
    -------
    a, b : In(32)
        FP32 operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low, the
        pipeline holds its contents and ``o`` keeps its value.
    o : Out(32)
        FP32 sum of the operands presented ``stages`` enabled cycles earlier. The registers
        start at 0 and have no reset (:class:`rtl.arith.common.Pipe`), so ``o`` reads +0 at
        power-up until the first operands reach it.
    """

    MAX_STAGES = 4
    _CUTS = {0: (), 1: (4,), 2: (3, 4), 3: (1, 3, 4), 4: (1, 2, 3, 4)}

    def __init__(self, stages=3):
        self._stages = check_stages(stages, self.MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1, init=1), "o": Out(32)})

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        """Cycles from operands to sum (equal to ``stages``)."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, self._CUTS[self._stages])

        # -- step 1: unpack, DAZ, specials, order by magnitude --------------------------------
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
            tz[x], _ = _lz25(m, platform, rev, f"tz_{x}")
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
        # the exponent difference (0 or 1), nothing is lost, and subtracted. Without a
        # register between steps 2 and 3 (``stages`` 3, where cut 1 is registered) this is
        # done in step 1, for both orders and selected by the compare like ``far_x``, so the
        # small operand's multiplexer is not in front of step 3's count; with that register
        # (``stages`` 4) in step 2, where it has a cycle to itself and does not lengthen the
        # exponent difference's path in step 1. Either way step 3 counts the leading zeros of
        # a registered difference (4 levels with ``_lz25``:
        # ``scripts.unit_fmax rtl.arith.fp32_add:FP32Adder --depth``, ``stages`` 3).
        near_early = 1 in pipe.cuts and 2 not in pipe.cuts
        if near_early:
            # Every candidate difference (the big operand minus the other shifted by 0 or 1)
            # is computed beside the compare and chosen by ``d_one`` and ``swap`` in one slice
            # per bit (``wide_mux``: a LUT4 on ``d_one``, the PFUMX on ``swap``), so the
            # compare's chain is followed by the PFUMX's select only;
            # the candidates' own chains (25 bits at most) run beside the compare's (32). With
            # equal exponents the hidden bits cancel: ``|a| - |b|``'s low 23 bits (``ab32``)
            # are one of them, with a chain of its own only for ``|b| - |a|``. The significands
            # are not DAZ-masked here: the near path is not used with a zero or subnormal
            # operand (``near_ok`` below), which keeps the exponents' zero tests out of these
            # bits.
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
        r = {k: pipe(1, v, k) for k, v in s1.items()}

        # -- step 2: alignment ----------------------------------------------------------------
        # Far path: the small significand, 3 bits up (guard, round, sticky), shifted right.
        # The shifter takes ``far_x`` (inverted for a subtraction) and shifts ``sub`` in, so
        # that its output is the addend itself, and is built as two multiplexers from the ECP5
        # slices' own (8:1 by the shift's bits 0..2, then 4:1 by bits 3..4), one LUT level
        # each, so the shifter and the inversion are two levels in front of the far-path adder.
        sub = r["sub"]
        wide = Cat(sub.replicate(3), r["far_x"], sub.replicate(7))
        fine = wide_mux(m, platform, r["shift"][0:3], [wide[k:k + 27] for k in range(8)],
                        "far_fine")
        wide = Cat(fine, sub.replicate(24))
        aligned = wide_mux(m, platform, r["shift"][3:5],
                           [wide[k:k + 27] for k in (0, 8, 16, 24)], "far_aligned")
        # Bit 0, the sticky bit (anything shifted to bit 0 or below it), is set iff the small
        # significand's lowest one, at its trailing-zero count ``tz`` (at ``tz + 3`` in
        # ``sig << 3``), is not above the shift: one 5-bit compare per order beside the shifter
        # instead of the shifter's bit 0 and a mask and a 24-bit OR after it (a DAZ zero, with
        # a 1 above ``tz + 3`` in the compare, is never below the shift).
        sticky_ab = [Cat(r["shift"], Const(0, 1)) >= Cat((r[f"tz_{v}"] + 3)[0:5], ~r[f"nz_{v}"])
                     for v in "ab"]
        # The sum's three low bits (guard, round, sticky) are those of ``y`` alone, as the big
        # significand has zeros there: ``y``'s for an addition, ``-y``'s (``~y + 1``) for a
        # subtraction. Only their carry into bit 3 enters step 3's adder, and it is decided
        # without them: a subtraction's ``~y + 1`` carries out of them iff guard, round and
        # sticky are all 0, i.e. the small significand has no one below the shift, i.e.
        # ``tz >= shift`` (or it is a DAZ zero). That compare is the bottom of the adder's own
        # carry chain (step 3), so the late sticky bit is not at its bottom: the shifter's 2
        # levels are in front of the chain, 4 in all (``scripts.unit_fmax
        # rtl.arith.fp32_add:FP32Adder --depth``, ``stages`` 3).
        # The low bits themselves, ``s``, ``rb ^ (sub & ~s)`` and ``g ^ (sub & rb & ~s)``,
        # have the order's select folded in, each one slice (``lut6``: the compares on its
        # multiplexers), so that the compares and the shifter are one cell from the register.
        g, rb = aligned[2], aligned[1]              # inverted for a subtraction, as ``far_x``
        swap = r["swap"]
        s2 = dict(r)
        for k in ("far_x", "shift", "swap", "nz_a", "nz_b", "tz_a", "tz_b"):
            del s2[k]
        low0 = lut4(m, platform, lambda w, sa, sb, _: (w & sa) | (~w & sb),
                    (swap, sticky_ab[0], sticky_ab[1], Const(0, 1)), "far_low0")
        low1 = lut6(m, platform,
                    lambda rb_, sub_, w, sa, sb: rb_ ^ (sub_ & ~((w & sa) | (~w & sb))),
                    (rb, sub, swap, sticky_ab[0], sticky_ab[1]), "far_low1")
        low2 = lut6(m, platform,
                    lambda g_, rb_, sub_, w, sa, sb:
                        g_ ^ (sub_ & rb_ & ~((w & sa) | (~w & sb))),
                    (g, rb, sub, swap, sticky_ab[0], sticky_ab[1]), "far_low2")
        s2.update(far_low=Cat(low0, low1, low2), far_y=aligned[3:27])
        # The carry's compare as the low 6 bits of the adder: ``x + ~shift + 1`` carries out
        # of them iff ``x >= shift``, with ``x`` the small operand's ``tz`` and, above it, 1
        # for a DAZ zero (no one at all); both 0 for an addition (no carry). One LUT4 per bit
        # (the order's select and ``sub``) in front of the chain.
        lo_x = Mux(r["swap"], Cat(r["tz_a"], ~r["nz_a"]), Cat(r["tz_b"], ~r["nz_b"]))
        s2["far_cx"] = lo_x & sub.replicate(6)
        s2["far_cy"] = Cat(~r["shift"], Const(1, 1)) & sub.replicate(6)
        # The near path needs |ea - eb| <= 1 and no zero or subnormal operand (with one, the
        # far path is exact: it subtracts a DAZ zero; with both, the result is special). The
        # near path's operands above are not DAZ-masked, so this is what keeps them out.
        del s2["d_le1"]
        s2["near_ok"] = r["d_le1"] & r["nz_a"] & r["nz_b"]
        mz_a, mz_b = r["tz_a"] == 23, r["tz_b"] == 23
        inf_a, inf_b = r["emax_a"] & mz_a, r["emax_b"] & mz_b
        nan_a, nan_b = r["emax_a"] & ~mz_a, r["emax_b"] & ~mz_b
        s2["nan"] = nan_a | nan_b | (inf_a & inf_b & sub)
        s2["inf"] = inf_a | inf_b                   # its sign is ``s_big``: Inf is the bigger
        s2["both_zero"] = ~r["nz_a"] & ~r["nz_b"]
        del s2["emax_a"], s2["emax_b"]
        if not near_early:
            del s2["d_one"]
            small = r["far_x"] ^ sub.replicate(24)
            near_y = Mux(r["d_one"], small, Cat(Const(0, 1), small))
            s2["near_diff"] = Signal(25, name="near_diff")
            m.d.comb += s2["near_diff"].eq(Cat(Const(0, 1), r["sig_big"]) - near_y)
        r = {k: pipe(2, v, k) for k, v in s2.items()}

        # -- step 3: add/subtract; near path: count leading zeros ------------------------------
        # One carry chain for both: big + y, or big - y as big + ~y + 1 with ``~y`` (``far_y``
        # is already inverted) sign-extended, so that the sum's bit 27 is its carry or 0 (no
        # borrow, as |big| >= |small|) straight out of the chain, with no gate after it. Its
        # low 6 bits are the compare that makes the carry into bit 3 (step 2); bits 0..2 of
        # the sum are ``far_low``.
        chain = Signal(31)
        m.d.comb += chain.eq(Cat(r["far_cx"], r["sig_big"], Const(0, 1)) +
                             Cat(r["far_cy"], r["far_y"], r["sub"]) + 1)
        far_sum = Cat(r["far_low"], chain[6:31])            # 28 bits, hidden bit of big at 26
        near_diff = r["near_diff"]                           # hidden bit of big at 24
        # the count, and exact cancellation (``near_diff`` is 0), from the registered difference
        near_lz, near_zero = _lz25(m, platform, near_diff, "near_lz")
        # Everything step 4 needs that does not depend on its own arithmetic is decided here,
        # beside the adder and the count, so that after the cut only the normalisation, the
        # rounding carry and one choice remain: the special result (NaN, Inf, a zero sum of
        # zeros), the choice of the near path, and the far path's overflow and FTZ bounds for
        # each of its three normalisations, and the exponent of each.
        special = r["nan"] | r["inf"] | r["both_zero"]
        # (Expressions, not a process: as a process, with ``stages=3``, Icarus left it X at the
        # start of the edge-case test; a process whose inputs have not changed yet is not run.)
        special_val = Mux(r["nan"], CANONICAL_NAN_F32,
                          Mux(r["inf"], Cat(Const(0, 23), Const(0xFF, 8), r["s_big"]),
                              Cat(Const(0, 31), r["zero_sign"])))
        e = r["e_big"]
        s3 = {k: r[k] for k in ("e_big", "s_big")}
        s3.update(far_sum=far_sum, near_diff=near_diff, near_lz=near_lz,
                  near_zero=near_zero, special=special, special_val=special_val,
                  use_near=r["sub"] & r["near_ok"] & ~near_diff[24],
                  e_ge254=e >= 254, e_ge255=e == 255, e_eq0=e == 0, e_le1=e <= 1,
                  e_p1=(e + 1)[0:8], e_m1=(e - 1)[0:8])
        r = {k: pipe(3, v, k) for k, v in s3.items()}

        # -- step 4: normalise, round, select, pack -------------------------------------------
        # Far path: the sum has its leading one at bit 27 (carry), 26, or 25 (a subtraction
        # with exponents at least 2 apart loses at most one bit).
        fs = r["far_sum"]
        far_m = Signal(23)
        far_g = Signal()
        far_s = Signal()
        far_e = Signal(8)
        far_ovf = Signal()            # the exponent reaches 255
        far_ftz = Signal()            # the exponent is 0 or below
        with m.If(fs[27]):
            m.d.comb += [far_m.eq(fs[4:27]), far_g.eq(fs[3]), far_s.eq(fs[0:3] != 0),
                         far_e.eq(r["e_p1"]), far_ovf.eq(r["e_ge254"]), far_ftz.eq(0)]
        with m.Elif(fs[26]):
            m.d.comb += [far_m.eq(fs[3:26]), far_g.eq(fs[2]), far_s.eq(fs[0:2] != 0),
                         far_e.eq(r["e_big"]), far_ovf.eq(r["e_ge255"]),
                         far_ftz.eq(r["e_eq0"])]
        with m.Else():
            m.d.comb += [far_m.eq(fs[2:25]), far_g.eq(fs[1]), far_s.eq(fs[0]),
                         far_e.eq(r["e_m1"]), far_ovf.eq(0), far_ftz.eq(r["e_le1"])]
        round_up = far_g & (far_s | far_m[0])
        # Exponent and mantissa as one number: the round carry propagates into the exponent,
        # and out of exponent 254 it yields exactly the Inf pattern 0x7F800000.
        far_mag = Signal(31)
        m.d.comb += far_mag.eq(Cat(far_m, far_e) + round_up)
        # Near path: exact; the leading one moves from bit 24 - lz to bit 24.
        near_n = Signal(25)
        m.d.comb += near_n.eq(r["near_diff"] << r["near_lz"])
        near_e = Signal(signed(10))
        m.d.comb += near_e.eq(r["e_big"] - r["near_lz"])
        s = r["s_big"]
        # The near path's FTZ test ``e_big <= near_lz`` as the carry out of ``e_big +
        # ~near_lz`` (``e_big > near_lz``): as a compare, yosys (alumacc) shared the chain of
        # ``near_e`` and tested its result after it, two chains in a row.
        e_gt_lz = Signal(9)
        m.d.comb += e_gt_lz.eq(r["e_big"] + ~Cat(r["near_lz"], Const(0, 8 - len(r["near_lz"]))))
        near_ftz = ~e_gt_lz[8]
        # The result as an AND-OR of the candidates under one-hot selects, which come from
        # registered flags but for the near path's FTZ test and the far path's bounds: the
        # priority chain (special, near: zero, FTZ, value; far: overflow, FTZ, value) is not
        # after the chains.
        special = r["special"]
        use_near = ~special & r["use_near"]
        use_far = ~special & ~r["use_near"]
        sel_near = Signal()
        sel_inf = Signal()
        sel_far = Signal()
        m.d.comb += [sel_near.eq(use_near & ~r["near_zero"] & ~near_ftz),
                     sel_inf.eq(use_far & far_ovf),
                     sel_far.eq(use_far & ~far_ovf & ~far_ftz)]
        result = Signal(32)
        m.d.comb += [
            result[0:31].eq((special.replicate(31) & r["special_val"][0:31]) |
                            (sel_near.replicate(31) & Cat(near_n[1:24], near_e[0:8])) |
                            (sel_inf.replicate(31) & Const(0x7F800000, 31)) |
                            (sel_far.replicate(31) & far_mag)),
            # every non-special result has the sign s, but for an exact cancellation's +0
            result[31].eq(Mux(special, r["special_val"][31],
                              s & ~(r["use_near"] & r["near_zero"]))),
        ]

        m.d.comb += self.o.eq(pipe(4, result, "o"))
        return m
