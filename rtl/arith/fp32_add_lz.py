"""The FP32 adder's leading-zero count of a 25-bit value, in three LUT levels on an ECP5."""

from amaranth.hdl import Cat, Const, Signal

from rtl.arith.wide_mux import lut4, pair_mux

__all__ = ["lz25"]


def lz25(m, platform, d, name):
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
