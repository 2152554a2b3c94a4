"""An FP32 multiplier for the vector engine's lanes that chooses how much of the significand
product goes to DSP blocks (``sim.formats.fp32_mul``, bit-exact)."""

from amaranth.hdl import Mux, Signal

from rtl.arith.fp32_mul import FP32Multiplier, split_products, sum_shifted
from sim.config import check_bool, check_int

__all__ = ["LaneMultiplier", "shift_add"]

#: Where ``corner_logic`` splits each 24-bit significand: bits 18..23 (six, the hidden one
#: included) form the piece multiplied in logic.
CORNER = 18


def shift_add(m, x, y, name):
    """Unsigned product ``x * y`` as a sum of shifted partial products (adders in logic, never a
    DSP block): one row per bit of the narrower operand, summed by
    :func:`rtl.arith.fp32_mul.sum_shifted` (rows that do not overlap share an adder input, and
    each adder spans only its rows' bits)."""
    if len(x) < len(y):
        x, y = y, x
    width = len(x) + len(y)
    rows = []
    for i in range(len(y)):
        row = Signal(len(x), name=f"{name}_pp{i}")
        m.d.comb += row.eq(Mux(y[i], x, 0))
        rows.append((row, i))
    return sum_shifted(m, rows, width, name)


class LaneMultiplier(FP32Multiplier):
    """FP32 x FP32 product, bit-exact with ``sim.formats.fp32_mul`` and with
    ``rtl.arith.fp32_mul.FP32Multiplier`` (RNE, DAZ/FTZ, canonical NaN on NaN or 0 x Inf,
    sign XOR, overflow to Inf, a product in [2**-126 - 2**-150, 2**-126) rounds up to 2**-126).

    The vector engine has six multipliers per lane; at four MULT18X18D each for a 24 x 24
    significand product, eight lanes do not fit an ECP5-85F (156). This unit splits the product:
    ``b``'s significand bits ``[logic_bits:24]`` go through ``*`` (DSP blocks), the low
    ``logic_bits`` bits through :func:`shift_add` (LUTs and carry chains). With
    ``logic_bits=6`` the DSP part is 24 x 18 bits (two MULT18X18D).

    ``corner_logic=True`` (with ``a_bits=24`` and ``logic_bits=0``) keeps the 24 x 24 product
    in three MULT18X18D (18 x 18, 18 x 6, 6 x 18) and computes the fourth piece, the top 6 x 6
    bits of both significands, by :func:`shift_add` in step 1 (a 12-bit sum of six short rows
    beside the unpacking, registered with it): one MULT18X18D less for a few dozen LUTs.

    Everything but the partial products (step 2: DSP pieces and the logic part) is
    ``FP32Multiplier``'s, with the same optional registers (``stages`` 0 to 4).

    Parameters
    ----------
    a_bits : int
        1..24. Only the top ``a_bits`` of ``a``'s 24-bit significand (hidden one included) may
        be nonzero: the caller guarantees that ``a[0:24-a_bits]`` is zero whenever ``a`` is
        normal (for example ``a`` is a small integer converted to FP32). The product is then
        ``a_bits x 24`` bits.
    logic_bits : int
        0..24. Low bits of ``b``'s significand multiplied in logic instead of DSP blocks.
    corner_logic : bool
        The top 6 x 6 piece of a full 24 x 24 product in logic (``a_bits`` 24 and
        ``logic_bits`` 0 only).
    stages : int
        Pipeline registers, 0 to 4; 0 is purely combinational (see ``FP32Multiplier``).
        Latency ``stages`` cycles, throughput one product per cycle.
    zero_a_annihilates : bool
        A zero or subnormal ``a`` gives a signed zero whatever ``b`` is (``sim.vector.mulz``;
        see ``FP32Multiplier``).

    Members
    -------
    a, b : In(32)
        FP32 operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low the
        pipeline holds and ``o`` keeps its value.
    o : Out(32)
        FP32 product of the operands presented ``stages`` enabled cycles earlier.
    """

    def __init__(self, *, a_bits=24, logic_bits=0, corner_logic=False, stages=0,
                 zero_a_annihilates=False):
        check_int("a_bits", a_bits, 1, 24)
        check_int("logic_bits", logic_bits, 0, 24)
        check_bool("corner_logic", corner_logic)
        if corner_logic and (a_bits, logic_bits) != (24, 0):
            raise ValueError("corner_logic needs a_bits 24 and logic_bits 0, not "
                             f"{a_bits} and {logic_bits}")
        self._a_bits = a_bits
        self._logic_bits = logic_bits
        self._corner = corner_logic
        super().__init__(stages, zero_a_annihilates=zero_a_annihilates)

    @property
    def a_bits(self):
        return self._a_bits

    @property
    def logic_bits(self):
        return self._logic_bits

    def _pre_partials(self, m, sig_a, sig_b):
        """The logic part's rows summed in pairs in step 1 (``lo{g}``: rows ``2g`` and ``2g +
        1``, at shift ``2g``), so that step 2 adds three partial sums instead of six rows:
        two levels of carry chains per step instead of three in step 2, so that no six-row sum
        precedes the partial-product register. Step 1's unpacking is a few gates beside them."""
        if self._corner:
            return {"corner": shift_add(m, sig_a[CORNER:24], sig_b[CORNER:24], "corner")}
        na, nl = self._a_bits, self._logic_bits
        x, y = sig_a[24 - na:24], sig_b[0:nl]
        return {f"lo{g}": shift_add(m, x, y[2 * g:2 * g + 2], f"lo_pair{g}")
                for g in range((nl + 1) // 2)}

    def _partials(self, m, sig_a, sig_b, dsp_regs=None, pre=None):
        """The ``a_bits x 24`` product's parts at the top of 48 bits: the DSP part in pieces of
        at most 18 x 18 bits (their operand registers inside the blocks with ``dsp_regs``),
        the logic part as one sum of step 1's pair sums (``pre``)."""
        if self._corner:
            # 18 x 24 (two pieces) and 6 x 18 in DSP blocks, 6 x 6 from step 1.
            regs_lo = regs_hi = None
            if dsp_regs is not None:
                a_d, b_d, en = dsp_regs
                regs_lo, regs_hi = (a_d[0:CORNER], b_d, en), (a_d[CORNER:24], b_d[0:CORNER], en)
            terms = split_products(m, sig_a[0:CORNER], sig_b, "dsp_lo", dsp_regs=regs_lo)
            terms += [(v, sh + CORNER) for v, sh in
                      split_products(m, sig_a[CORNER:24], sig_b[0:CORNER], "dsp_hi",
                                     dsp_regs=regs_hi)]
            return terms + [(pre["corner"], 2 * CORNER)]
        na, nl = self._a_bits, self._logic_bits
        sig_a = sig_a[24 - na:24]
        if dsp_regs is not None:
            a_d, b_d, en = dsp_regs
            dsp_regs = (a_d[24 - na:24], b_d[nl:24], en)
        terms = []
        if nl < 24:
            terms += [(v, sh + nl + 24 - na)
                      for v, sh in split_products(m, sig_a, sig_b[nl:24], "dsp",
                                                  dsp_regs=dsp_regs)]
        if nl > 0:
            lo = sum_shifted(m, [(pre[f"lo{g}"], 2 * g) for g in range(len(pre))],
                             na + nl, "lo")
            terms.append((lo, 24 - na))
        return terms
