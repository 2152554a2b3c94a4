"""FP32 adder: round to nearest even, DAZ/FTZ, canonical NaN (the PSUM accumulator)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import Pipe, check_stages
from rtl.arith.fp32_add_lz import lz25
from rtl.arith.fp32_add_order import FP32AddOrder, order_layout
from rtl.arith.fp32_add_round import FP32AddRound
from rtl.arith.wide_mux import lut4, lut6, wide_mux
from sim.dtypes import CANONICAL_NAN_F32

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
        # The near path's subtraction is in step 1 with a register after it and none between
        # steps 2 and 3 (``stages`` 3), so that step 3 counts the leading zeros of a
        # registered difference; otherwise in step 2.
        near_early = 1 in pipe.cuts and 2 not in pipe.cuts
        m.submodules.order = order = FP32AddOrder(near_early)
        m.d.comb += [order.a.eq(self.a), order.b.eq(self.b)]
        r = {k: pipe(1, order.o[k], k) for k in order_layout(near_early).members}

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
        near_lz, near_zero = lz25(m, platform, near_diff, "near_lz")
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
        m.submodules.round = rnd = FP32AddRound()
        m.d.comb += [rnd.i[k].eq(v) for k, v in r.items()]
        result = rnd.o

        m.d.comb += self.o.eq(pipe(4, result, "o"))
        return m
