"""Step 4 of the FP32 adder: normalise, round, select the path and the special cases, pack."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP32AddRound", "ROUND_LAYOUT"]

#: What step 3 decides for step 4 (``FP32AddRound.i``).
ROUND_LAYOUT = data.StructLayout({
    "e_big": 8, "s_big": 1, "far_sum": 28, "near_diff": 25, "near_lz": 5, "near_zero": 1,
    "special": 1, "special_val": 32, "use_near": 1, "e_ge254": 1, "e_ge255": 1, "e_eq0": 1,
    "e_le1": 1, "e_p1": 8, "e_m1": 8})


class FP32AddRound(wiring.Component):
    """Step 4 of :class:`rtl.arith.fp32_add.FP32Adder`, combinational (no register, no
    handshake).

    Far path: ``far_sum`` (28 bits, the big operand's hidden bit at bit 26, guard, round and
    sticky bits below bit 3) has its leading one at bit 27, 26 or 25; normalised by that one
    bit, rounded to nearest even (the round carry propagates into the exponent, and out of
    exponent 254 yields exactly Inf), with the overflow and FTZ bounds and the exponents
    ``e_p1``, ``e_big``, ``e_m1`` decided in step 3. Near path: ``near_diff`` (hidden bit of
    the big operand at bit 24) shifted up by its leading zeros ``near_lz``, exact, flushed to
    zero when its exponent ``e_big - near_lz`` is 0 or below. ``special`` selects
    ``special_val`` (NaN, Inf, a zero sum of zeros), else ``use_near`` the near path.

    Members
    -------
    i : In(ROUND_LAYOUT)
        Step 3's terms.
    o : Out(32)
        The FP32 sum.
    """

    i: In(ROUND_LAYOUT)
    o: Out(32)

    def elaborate(self, platform):
        m = Module()
        r = self.i
        # Far path: the sum has its leading one at bit 27 (carry), 26, or 25 (a subtraction
        # with exponents at least 2 apart loses at most one bit).
        fs = r.far_sum
        far_m = Signal(23)
        far_g = Signal()
        far_s = Signal()
        far_e = Signal(8)
        far_ovf = Signal()            # the exponent reaches 255
        far_ftz = Signal()            # the exponent is 0 or below
        with m.If(fs[27]):
            m.d.comb += [far_m.eq(fs[4:27]), far_g.eq(fs[3]), far_s.eq(fs[0:3] != 0),
                         far_e.eq(r.e_p1), far_ovf.eq(r.e_ge254), far_ftz.eq(0)]
        with m.Elif(fs[26]):
            m.d.comb += [far_m.eq(fs[3:26]), far_g.eq(fs[2]), far_s.eq(fs[0:2] != 0),
                         far_e.eq(r.e_big), far_ovf.eq(r.e_ge255), far_ftz.eq(r.e_eq0)]
        with m.Else():
            m.d.comb += [far_m.eq(fs[2:25]), far_g.eq(fs[1]), far_s.eq(fs[0]),
                         far_e.eq(r.e_m1), far_ovf.eq(0), far_ftz.eq(r.e_le1)]
        round_up = far_g & (far_s | far_m[0])
        # Exponent and mantissa as one number: the round carry propagates into the exponent,
        # and out of exponent 254 it yields exactly the Inf pattern 0x7F800000.
        far_mag = Signal(31)
        m.d.comb += far_mag.eq(Cat(far_m, far_e) + round_up)
        # Near path: exact; the leading one moves from bit 24 - lz to bit 24.
        near_n = Signal(25)
        m.d.comb += near_n.eq(r.near_diff << r.near_lz)
        near_e = Signal(signed(10))
        m.d.comb += near_e.eq(r.e_big - r.near_lz)
        s = r.s_big
        # The near path's FTZ test ``e_big <= near_lz`` as the carry out of ``e_big +
        # ~near_lz`` (``e_big > near_lz``): as a compare, yosys (alumacc) shared the chain of
        # ``near_e`` and tested its result after it, two chains in a row.
        e_gt_lz = Signal(9)
        m.d.comb += e_gt_lz.eq(r.e_big + ~Cat(r.near_lz, Const(0, 8 - len(r.near_lz))))
        near_ftz = ~e_gt_lz[8]
        # The result as an AND-OR of the candidates under one-hot selects, which come from
        # registered flags but for the near path's FTZ test and the far path's bounds: the
        # priority chain (special, near: zero, FTZ, value; far: overflow, FTZ, value) is not
        # after the chains.
        special = r.special
        use_near = ~special & r.use_near
        use_far = ~special & ~r.use_near
        sel_near = Signal()
        sel_inf = Signal()
        sel_far = Signal()
        m.d.comb += [sel_near.eq(use_near & ~r.near_zero & ~near_ftz),
                     sel_inf.eq(use_far & far_ovf),
                     sel_far.eq(use_far & ~far_ovf & ~far_ftz)]
        m.d.comb += [
            self.o[0:31].eq((special.replicate(31) & r.special_val[0:31]) |
                            (sel_near.replicate(31) & Cat(near_n[1:24], near_e[0:8])) |
                            (sel_inf.replicate(31) & Const(0x7F800000, 31)) |
                            (sel_far.replicate(31) & far_mag)),
            # every non-special result has the sign s, but for an exact cancellation's +0
            self.o[31].eq(Mux(special, r.special_val[31], s & ~(r.use_near & r.near_zero))),
        ]
        return m
