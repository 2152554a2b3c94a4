"""FP32 multiplier: round to nearest even, DAZ/FTZ, canonical NaN."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_bool
from sim.dtypes import CANONICAL_NAN_F32
from rtl.arith.common import Pipe, Pipelined, check_stages
from rtl.arith.dsp import is_ecp5, mult18x18d

__all__ = ["FP32Multiplier", "split_products", "sum_shifted"]


def split_products(m, x, y, name, piece=18, *, dsp_regs=None):
    """Unsigned ``x * y`` as partial products of at most ``piece`` x ``piece`` bits (one DSP
    multiplier each): a list of ``(value, shift)`` pairs whose shifted sum is the product.

    ``dsp_regs = (x_d, y_d, en)``: ``x`` and ``y`` are registers loaded from ``x_d`` and
    ``y_d`` on every edge with ``en`` high; each piece is then a MULT18X18D whose own input
    registers take the slices of ``x_d`` and ``y_d`` instead (``rtl.arith.dsp``; the same
    values, and ``x``/``y`` are left to whatever else reads them)."""
    out = []
    for i in range(0, len(x), piece):
        for j in range(0, len(y), piece):
            xs, ys = x[i:i + piece], y[j:j + piece]
            pp = Signal(len(xs) + len(ys), name=f"{name}_{i}_{j}")
            if dsp_regs is None:
                m.d.comb += pp.eq(xs * ys)
            else:
                x_d, y_d, en = dsp_regs
                m.d.comb += pp.eq(mult18x18d(m, x_d[i:i + piece], y_d[j:j + piece], en,
                                             f"{name}_dsp_{i}_{j}"))
            out.append((pp, i + j))
    return out


def sum_shifted(m, terms, width, name):
    """The sum of ``(value, shift)`` terms modulo ``2**width`` with short carry chains: terms
    whose bit ranges do not overlap share one row (concatenated, no adder), and each adder
    spans only the bits where its two rows overlap or carry (below the higher row's lowest
    bit the lower row's bits pass straight through). The narrowest rows are added first.

    For the 24 x 24 significand product in four 18 x 18 pieces (shifts 0, 18, 18, 36) this is
    a 25-bit adder then a 30-bit one, where a balanced tree of the shifted pieces builds two
    levels of 48-bit carry chains."""
    rows = []                   # [lo, hi, [(value, shift), ...]] with disjoint bit ranges
    for value, shift in sorted(terms, key=lambda t: t[1]):
        lo, hi = shift, min(shift + len(value), width)
        if lo >= width:
            continue
        for row in rows:
            if all(hi <= s or lo >= s + len(v) for v, s in row[2]):
                row[0], row[1] = min(row[0], lo), max(row[1], hi)
                row[2].append((value[:hi - lo], lo))
                break
        else:
            rows.append([lo, hi, [(value[:hi - lo], lo)]])
    parts = []                  # (signal holding bits lo..hi-1, lo, hi)
    for j, (lo, hi, items) in enumerate(rows):
        sig = Signal(hi - lo, name=f"{name}_row{j}")
        bits, pos = [], lo
        for v, sh in sorted(items, key=lambda t: t[1]):
            if sh > pos:
                bits.append(Const(0, sh - pos))
            bits.append(v)
            pos = sh + len(v)
        m.d.comb += sig.eq(Cat(*bits))
        parts.append((sig, lo, hi))
    if not parts:
        return Const(0, width)
    level = 0
    while len(parts) > 1:
        parts.sort(key=lambda p: p[2] - p[1])
        (x, xl, xh), (y, yl, yh) = parts[0], parts[1]
        if xl > yl:
            (x, xl, xh), (y, yl, yh) = (y, yl, yh), (x, xl, xh)
        # y starts at or above x: bits xl..yl-1 are x's alone; the adder starts at yl.
        if yl > xh:             # (x padded with zeros up to y)
            x, xh = Cat(x, Const(0, yl - xh)), yl
        hi = min(max(xh, yh) + 1, width)
        s = Signal(hi - xl, name=f"{name}_{level}")
        upper = x[yl - xl:] if xh > yl else Const(0, 1)
        m.d.comb += s.eq(Cat(x[:yl - xl], upper + y))
        parts = parts[2:] + [(s, xl, hi)]
        level += 1
    sig, lo, hi = parts[0]
    return Cat(Const(0, lo), sig)[:width] if lo else sig[:width]


class FP32Multiplier(Pipelined, wiring.Component):
    """Full FP32 x FP32 multiplier with round-to-nearest-even, as ``sim.formats.fp32_mul``.

    Number rules (``docs/interfaces.md`` section 2): DAZ on the inputs; a NaN input or 0 x Inf
    gives the canonical NaN ``0x7FC00000``; the sign is the XOR of the signs (also for zeros and
    Infs); overflow gives +-Inf. The result is the IEEE 754 result with any subnormal flushed to
    a zero of the same sign (FTZ). In particular a product just below 2**-126 that IEEE rounding
    at subnormal precision carries up to 2**-126 stays 2**-126, as numpy float32 with FTZ gives.

    The datapath has four steps with an optional register after each: 1. unpack and
    classify; 2. the significand's partial products, each at most 18 x 18 bits (four
    MULT18X18D on ECP5); 3. their sum, beside it both candidate exponents and their range
    flags; 4. normalise, round (one carry chain through fraction and exponent), select the
    range case, pack. ``stages`` 1 registers after step 4, 2 after steps 3 and 4, 3 after
    steps 1, 3 and 4, 4 after every step (the partial products leave the DSP blocks straight
    into registers).

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 to 4; 0 is purely combinational. Latency ``stages`` cycles,
        throughput one product per cycle.
    zero_a_annihilates : bool
        A zero or subnormal ``a`` gives a zero of the product's sign whatever ``b`` is (``0 x
        Inf`` and ``0 x NaN`` included: ``sim.vector.mulz``, the vector LUT's products whose
        zero coefficients saturate a table). Decided in step 1 with the other special cases,
        so it costs no logic after the product's last register. Default ``False`` (IEEE).

    Members
    -------
    a, b : In(32)
        FP32 operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low the
        pipeline holds and ``o`` keeps its value.
    o : Out(32)
        FP32 product of the operands presented ``stages`` enabled cycles earlier (+0 after
        reset until the first operands arrive).
    """

    MAX_STAGES = 4
    _CUTS = {0: (), 1: (4,), 2: (3, 4), 3: (1, 3, 4), 4: (1, 2, 3, 4)}

    def __init__(self, stages=2, *, zero_a_annihilates=False):
        self._stages = check_stages(stages, self.MAX_STAGES)
        check_bool("zero_a_annihilates", zero_a_annihilates)
        self._annihilate = zero_a_annihilates
        super().__init__({"a": In(32), "b": In(32), "en": In(1, init=1), "o": Out(32)})

    def _pre_partials(self, m, sig_a, sig_b):
        """Step 1's share of the partial products, from the unregistered significands: named
        values registered with step 1's outputs and handed to :meth:`_partials` as ``pre``
        (none here)."""
        return {}

    def _partials(self, m, sig_a, sig_b, dsp_regs=None, pre=None):
        """Step 2: partial products of the 24-bit significands (hidden ones included), as
        ``(value, shift)`` pairs whose shifted sum is the 48-bit product; each is at most
        18 x 18 bits, one MULT18X18D, so a register after it takes the DSP's output directly.
        ``dsp_regs``: see :func:`split_products` (step 1's significand registers taken into
        the DSP blocks, on an ECP5). ``pre``: :meth:`_pre_partials`'s values, registered."""
        return split_products(m, sig_a, sig_b, "pp", dsp_regs=dsp_regs)

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, self._CUTS[self._stages])

        # -- step 1: unpack and classify ------------------------------------------------------
        a, b = self.a, self.b
        ea, eb = a[23:31], b[23:31]
        za, zb = ea == 0, eb == 0                    # zero or subnormal (DAZ)
        inf_a = (ea == 0xFF) & (a[0:23] == 0)
        inf_b = (eb == 0xFF) & (b[0:23] == 0)
        nan_a = (ea == 0xFF) & (a[0:23] != 0)
        nan_b = (eb == 0xFF) & (b[0:23] != 0)
        special = Signal(2)          # 0 none, 1 NaN, 2 Inf, 3 zero
        m.d.comb += special.eq(Mux(nan_a | nan_b | ((inf_a | inf_b) & (za | zb)), 1,
                                   Mux(inf_a | inf_b, 2, Mux(za | zb, 3, 0))))
        if self._annihilate:
            special_ieee, special = special, Signal(2, name="special_z")
            m.d.comb += special.eq(Mux(za, 3, special_ieee))
        exp_sum = Signal(signed(10))
        m.d.comb += exp_sum.eq(ea + eb - 127)
        regs = dict(sig_a=Cat(a[0:23], 1), sig_b=Cat(b[0:23], 1), exp_sum=exp_sum,
                    sign=a[31] ^ b[31], special=special)
        pre = self._pre_partials(m, regs["sig_a"], regs["sig_b"])
        regs.update(pre)
        r = {k: pipe(1, v, k) for k, v in regs.items()}

        # -- step 2: partial products ---------------------------------------------------------
        # On an ECP5 with step 1 registered, the significand registers are the DSP blocks'
        # own input registers (``rtl.arith.dsp``): the product then starts inside the block.
        dsp_regs = ((regs["sig_a"], regs["sig_b"], self.en)
                    if 1 in pipe.cuts and is_ecp5(platform) else None)
        parts = self._partials(m, r["sig_a"], r["sig_b"], dsp_regs,
                               {k: r[k] for k in pre})
        regs = dict(exp_sum=r["exp_sum"], sign=r["sign"], special=r["special"])
        regs.update({f"pp{i}": v for i, (v, _) in enumerate(parts)})
        r = {k: pipe(2, v, k) for k, v in regs.items()}

        # -- step 3: significand product ---------------------------------------------------------
        # Beside the product, the exponent's two candidates (product in [1, 2) or [2, 4)) and
        # their range flags, so that step 4 only selects them with the product's top bit.
        prod = Signal(48)
        m.d.comb += prod.eq(sum_shifted(m, [(r[f"pp{i}"], sh) for i, (_, sh) in
                                            enumerate(parts)], 48, "psum"))
        es = r["exp_sum"]
        es1 = Signal(signed(11))
        m.d.comb += es1.eq(es + 1)
        regs = dict(prod=prod, sign=r["sign"], special=r["special"],
                    e0=es[0:8], e1=es1[0:8],
                    ovf0=es >= 255, ovf1=es >= 254,           # biased exponent >= 255
                    low0=es <= 0, low1=es <= -1,              # <= 0: below the normal range
                    ez0=es == 0, ez1=es == -1,                # == 0: just below it
                    # The wide reductions of the product's low bits, beside its register.
                    st0=prod[0:22] != 0, ones0=prod[23:46] == 0x7FFFFF,
                    ones1=prod[24:47] == 0x7FFFFF)
        r = {k: pipe(3, v, k) for k, v in regs.items()}

        # -- step 4: normalise, round, range, pack -----------------------------------------------
        # The round-up carries from the fraction into the exponent field in one addition: an
        # all-ones fraction rounds to the next binade (fraction 0, exponent + 1), and an
        # exponent of 254 carries to 255 with fraction 0, which is Inf.
        prod = r["prod"]
        hi = prod[47]                                 # product in [2, 4): one more binade
        mant = Mux(hi, prod[24:48], prod[23:47])      # 24 bits with the leading one
        guard = Mux(hi, prod[23], prod[22])
        sticky = r["st0"] | (hi & prod[22])
        inc = guard & (sticky | mant[0])
        packed = Signal(31)
        m.d.comb += packed.eq(Cat(mant[0:23], Mux(hi, r["e1"], r["e0"])) + inc)
        ovf = Mux(hi, r["ovf1"], r["ovf0"])
        low = Mux(hi, r["low1"], r["low0"])
        ez = Mux(hi, r["ez1"], r["ez0"])
        sign = r["sign"]
        result = Signal(32)
        with m.If(r["special"] == 1):
            m.d.comb += result.eq(CANONICAL_NAN_F32)
        with m.Elif(r["special"] == 2):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Elif(r["special"] == 3):
            m.d.comb += result.eq(Cat(Const(0, 31), sign))
        with m.Elif(ovf):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Elif(ez & Mux(hi, r["ones1"], r["ones0"])):      # mant[0:23] all ones
            # In [2**-126 - 2**-150, 2**-126): IEEE rounds this up to the smallest normal.
            m.d.comb += result.eq(Cat(Const(0, 23), Const(1, 8), sign))
        with m.Elif(low):
            m.d.comb += result.eq(Cat(Const(0, 31), sign))          # FTZ
        with m.Else():
            m.d.comb += result.eq(Cat(packed, sign))

        m.d.comb += self.o.eq(pipe(4, result, "o"))
        return m
