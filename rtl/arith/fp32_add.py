"""FP32 adder: round to nearest even, DAZ/FTZ, canonical NaN (the PSUM accumulator)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import CANONICAL_NAN_F32
from rtl.arith.common import Pipe, check_stages, leading_zeros
from rtl.arith.wide_mux import wide_mux

__all__ = ["FP32Adder"]


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
       exponent difference (and with ``stages`` 3 the near path's one-bit alignment, for both
       orders);
    2. far path: alignment shift and sticky bit; near path: one-bit alignment (``stages`` other
       than 3); the special cases (NaN, Inf, two zeros) from step 1's terms;
    3. far path: add/subtract; near path: subtract and count leading zeros;
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
        # carry chain is not in front of them (``swap`` -> ``d_le1`` was 11.15 ns routed,
        # core2 b427694 seed 1).
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
        # carry chain (operands -> ``s1_e_big`` logic -> that chain (``s1_d_le1``) -> the near
        # path's select -> ``s1_near_y`` was 7 levels, 10.77 ns routed, 22 end points later
        # than 10 ns, in the vector LUT's ``l1_a2`` behind its multiplier ``l1_m2``, core2
        # 352ab1b seed 2).
        d_one = Signal()
        m.d.comb += d_one.eq(ea[0] ^ eb[0])
        full_a, full_b = Cat(a[0:23], 1), Cat(b[0:23], 1)
        sig_a = Mux(za, 0, full_a)                      # DAZ: no mantissa, no hidden bit
        sig_b = Mux(zb, 0, full_b)
        # For step 2's sticky bit: 3 + the trailing zeros of each significand (its lowest one
        # at bit ``tz3`` of the far path's 27-bit ``sig << 3``), counted beside the order
        # compare from the operand's own bits, as the leading zeros of the reversed bits.
        tz3 = {}
        for x, v in (("a", a), ("b", b)):
            bits = [Const(0, 1)] * 3 + [v[i] for i in range(23)] + [Const(1, 1)]
            tz3[x], _ = leading_zeros(m, Cat(*reversed(bits)), f"tz3_{x}")
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
            # front of step 1's register): nonzero significand (not DAZ), 3 + trailing zeros
            swap=swap,
            nz_a=~za, nz_b=~zb,
            tz3_a=tz3["a"], tz3_b=tz3["b"],
            d_le1=d_le1,
            d_one=d_one,
            zero_sign=a[31] & b[31],                    # (-0) + (-0) = -0, otherwise +0
            # The specials from per-operand terms, combined in step 2: the exponent is all
            # ones, and the mantissa is zero iff ``tz3`` is 26. NaN and Inf as functions of
            # both whole operands were 7-8 levels from the operands to ``s1_nan`` / ``s1_inf``
            # (``scripts.unit_fmax --preset vector1 --depth``).
            emax_a=ea == 0xFF, emax_b=eb == 0xFF,
        )
        # Near path: one guard bit below the big significand; the small one is shifted by
        # the exponent difference (0 or 1), nothing is lost. Without a register between steps
        # 2 and 3 (``stages`` 3, where cut 1 is registered) it is formed in step 1, for both
        # orders and selected by the compare like ``far_x``, so that step 3's subtraction
        # starts from a register (``s1_sig_small`` -> this multiplexer -> the subtraction ->
        # the leading-zero count was 11.28 ns routed, core2 68bfe14 seed 1); with that
        # register (``stages`` 4) in step 2, where it has a cycle to itself (in step 1 it
        # lengthened the exponent difference's path, 12.05 ns, core2 b0acae7 seed 1).
        near_early = 1 in pipe.cuts and 2 not in pipe.cuts
        if near_early:
            # Every candidate (each operand shifted by 0 or 1) is formed beside the compare
            # and chosen by ``d_one`` and ``swap`` in one slice per bit (``wide_mux``: a LUT4
            # on ``d_one``, the PFUMX on ``swap``), so the compare's chain is followed by the
            # PFUMX's select only (``s1_near_y`` behind the LUT's multipliers 7 -> 4 levels,
            # ``scripts.unit_fmax --preset vector1 --depth``). The significands are not
            # DAZ-masked here: the near path is not used with a zero or subnormal operand
            # (``near_ok`` below), which keeps the exponents' zero tests out of these bits.
            s1["near_y"] = wide_mux(m, platform, Cat(d_one, swap),
                                    [Cat(Const(0, 1), full_b), full_b,
                                     Cat(Const(0, 1), full_a), full_a], "near_y")
            del s1["d_one"]
        r = {k: pipe(1, v, k) for k, v in s1.items()}

        # -- step 2: alignment ----------------------------------------------------------------
        # Far path: the small significand, 3 bits up (guard, round, sticky), shifted right.
        # The shifter takes ``far_x`` (inverted for a subtraction) and shifts ``sub`` in, so
        # that its output is the addend itself, and is built as two multiplexers from the ECP5
        # slices' own (8:1 by the shift's bits 0..2, then 4:1 by bits 3..4), one LUT level
        # each: ``s1_shift`` -> shifter -> inversion -> the far-path adder was 7 levels,
        # 10.3-10.6 ns routed in core2 (the vector accumulators, the LUT's adders).
        sub = r["sub"]
        wide = Cat(sub.replicate(3), r["far_x"], sub.replicate(7))
        fine = wide_mux(m, platform, r["shift"][0:3], [wide[k:k + 27] for k in range(8)],
                        "far_fine")
        wide = Cat(fine, sub.replicate(24))
        aligned = wide_mux(m, platform, r["shift"][3:5],
                           [wide[k:k + 27] for k in (0, 8, 16, 24)], "far_aligned")
        # Bit 0, the sticky bit (anything shifted to bit 0 or below it), is set iff the small
        # significand's lowest one, at ``tz3`` (3 + its trailing zeros), is not above the
        # shift: one 5-bit compare per order beside the shifter instead of the shifter's bit 0
        # and a mask and a 24-bit OR after it.
        sticky_ab = [r[f"nz_{v}"] & (r["shift"] >= r[f"tz3_{v}"]) for v in "ab"]
        sticky = Mux(r["swap"], sticky_ab[0], sticky_ab[1])
        s2 = dict(r)
        for k in ("far_x", "shift", "swap", "nz_a", "nz_b", "tz3_a", "tz3_b"):
            del s2[k]
        s2.update(far_y=Cat(sticky ^ sub, aligned[1:27]))
        # The near path needs |ea - eb| <= 1 and no zero or subnormal operand (with one, the
        # far path is exact: it subtracts a DAZ zero; with both, the result is special). The
        # near path's operands above are not DAZ-masked, so this is what keeps them out.
        del s2["d_le1"]
        s2["near_ok"] = r["d_le1"] & r["nz_a"] & r["nz_b"]
        mz_a, mz_b = r["tz3_a"] == 26, r["tz3_b"] == 26
        inf_a, inf_b = r["emax_a"] & mz_a, r["emax_b"] & mz_b
        nan_a, nan_b = r["emax_a"] & ~mz_a, r["emax_b"] & ~mz_b
        s2["nan"] = nan_a | nan_b | (inf_a & inf_b & sub)
        s2["inf"] = inf_a | inf_b                   # its sign is ``s_big``: Inf is the bigger
        s2["both_zero"] = ~r["nz_a"] & ~r["nz_b"]
        del s2["emax_a"], s2["emax_b"]
        if not near_early:
            del s2["d_one"]
            small = r["far_x"] ^ sub.replicate(24)
            s2["near_y"] = Mux(r["d_one"], small, Cat(Const(0, 1), small))
        r = {k: pipe(2, v, k) for k, v in s2.items()}

        # -- step 3: add/subtract; near path: subtract and count leading zeros -----------------
        big3 = Cat(Const(0, 3), r["sig_big"])               # 27 bits, hidden bit at 26
        # One 28-bit carry chain for both: big + y, or big - y as big + ~y + 1 with ``~y``
        # (``far_y`` is already inverted) sign-extended, so that bit 27 is the sum's carry or
        # 0 (no borrow, as |big| >= |small|) straight out of the chain, with no gate after it.
        far_sum = Signal(28)
        m.d.comb += far_sum.eq(big3 + Cat(r["far_y"], r["sub"]) + r["sub"])
        near_big = Cat(Const(0, 1), r["sig_big"])
        near_diff = Signal(25)                               # hidden bit of big at 24
        m.d.comb += near_diff.eq(near_big - r["near_y"])
        near_lz, _ = leading_zeros(m, near_diff, "near_lz")
        # Exact cancellation: the operands compared, not the difference tested after the chain.
        near_zero = Signal()
        m.d.comb += near_zero.eq(near_big == r["near_y"])
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
        # priority chain (special, near: zero, FTZ, value; far: overflow, FTZ, value) after
        # the chains was 9 routed levels (vector2 alone, 6476d00: s3_e_big -> o).
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
