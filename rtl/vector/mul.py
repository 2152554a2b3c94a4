"""An FP32 multiplier for the vector engine's lanes that chooses how much of the significand
product goes to DSP blocks (``sim.formats.fp32_mul``, bit-exact)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import Pipe, check_stages
from sim.dtypes import CANONICAL_NAN_F32

__all__ = ["LaneMultiplier", "shift_add"]


def shift_add(m, x, y, name):
    """Unsigned product ``x * y`` as a tree of shifted partial products (adders in logic, never a
    DSP block): one row per bit of the narrower operand."""
    if len(x) < len(y):
        x, y = y, x
    width = len(x) + len(y)
    rows = []
    for i in range(len(y)):
        row = Signal(width, name=f"{name}_pp{i}")
        m.d.comb += row.eq(Mux(y[i], x << i, 0))
        rows.append(row)
    level = 0
    while len(rows) > 1:
        nxt = []
        for j in range(0, len(rows) - 1, 2):
            s = Signal(width, name=f"{name}_s{level}_{j // 2}")
            m.d.comb += s.eq(rows[j] + rows[j + 1])
            nxt.append(s)
        if len(rows) % 2:
            nxt.append(rows[-1])
        rows = nxt
        level += 1
    return rows[0] if rows else Const(0, width)


class LaneMultiplier(wiring.Component):
    """FP32 x FP32 product, bit-exact with ``sim.formats.fp32_mul`` and with
    ``rtl.arith.fp32_mul.FP32Multiplier`` (RNE, DAZ/FTZ, canonical NaN on NaN or 0 x Inf,
    sign XOR, overflow to Inf, a product in [2**-126 - 2**-150, 2**-126) rounds up to 2**-126).

    The vector engine has six multipliers per lane; at four MULT18X18D each for a 24 x 24
    significand product, eight lanes do not fit an ECP5-85F (156). This unit splits the product:
    ``b``'s significand bits ``[logic_bits:24]`` go through ``*`` (DSP blocks), the low
    ``logic_bits`` bits through :func:`shift_add` (LUTs and carry chains). With
    ``logic_bits=6`` the DSP part is 24 x 18 bits (two MULT18X18D).

    The steps and their optional registers are those of ``FP32Multiplier``: 1. unpack and
    classify; 2. the significand product (DSP and logic parts and their sum); 3. normalise,
    round, range check, pack. ``stages`` 1 registers after step 3, 2 after steps 2 and 3, 3
    after every step.

    Parameters
    ----------
    a_bits : int
        1..24. Only the top ``a_bits`` of ``a``'s 24-bit significand (hidden one included) may
        be nonzero: the caller guarantees that ``a[0:24-a_bits]`` is zero whenever ``a`` is
        normal (for example ``a`` is a small integer converted to FP32). The product is then
        ``a_bits x 24`` bits.
    logic_bits : int
        0..24. Low bits of ``b``'s significand multiplied in logic instead of DSP blocks.
    stages : int
        Pipeline registers, 0 to 3; 0 is purely combinational. Latency ``stages`` cycles,
        throughput one product per cycle.

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

    MAX_STAGES = 3
    _CUTS = {0: (), 1: (3,), 2: (2, 3), 3: (1, 2, 3)}

    def __init__(self, *, a_bits=24, logic_bits=0, stages=0):
        for name, value in (("a_bits", a_bits), ("logic_bits", logic_bits)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, not {value!r}")
        if not 1 <= a_bits <= 24:
            raise ValueError(f"a_bits must be an integer from 1 to 24, not {a_bits}")
        if not 0 <= logic_bits <= 24:
            raise ValueError(f"logic_bits must be an integer from 0 to 24, not {logic_bits}")
        self._a_bits = a_bits
        self._logic_bits = logic_bits
        self._stages = check_stages(stages, self.MAX_STAGES)
        super().__init__({"a": In(32), "b": In(32), "en": In(1, init=1), "o": Out(32)})

    @property
    def a_bits(self):
        return self._a_bits

    @property
    def logic_bits(self):
        return self._logic_bits

    @property
    def latency(self):
        """Cycles from operands to product (equal to ``stages``)."""
        return self._stages

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
        exp_sum = Signal(signed(10))
        m.d.comb += exp_sum.eq(ea + eb - 127)
        na, nl = self._a_bits, self._logic_bits
        regs = dict(sig_a=Cat(a[0:23], 1)[24 - na:24], sig_b=Cat(b[0:23], 1), exp_sum=exp_sum,
                    sign=a[31] ^ b[31], special=special)
        r = {k: pipe(1, v, k) for k, v in regs.items()}

        # -- step 2: significand product (na x 24), placed at the top of a 48-bit product ------
        sig_a, sig_b = r["sig_a"], r["sig_b"]
        part = Signal(na + 24)
        terms = []
        if nl < 24:
            hi = Signal(na + 24 - nl, name="dsp_prod")
            m.d.comb += hi.eq(sig_a * sig_b[nl:24])
            terms.append(hi << nl)
        if nl > 0:
            terms.append(shift_add(m, sig_a, sig_b[0:nl], "lo"))
        m.d.comb += part.eq(sum(terms) if len(terms) > 1 else terms[0])
        prod = Signal(48)
        m.d.comb += prod.eq(part << (24 - na))
        r2 = {k: pipe(2, r[k], k) for k in ("exp_sum", "sign", "special")}
        prod = pipe(2, prod, "prod")

        # -- step 3: normalise, round, range, pack ---------------------------------------------
        hi = prod[47]                                 # product in [2, 4): one more binade
        mant = Mux(hi, prod[24:48], prod[23:47])      # 24 bits with the leading one
        guard = Mux(hi, prod[23], prod[22])
        sticky = Mux(hi, prod[0:23] != 0, prod[0:22] != 0)
        exp = Signal(signed(11))
        m.d.comb += exp.eq(r2["exp_sum"] + hi)        # biased exponent before rounding
        rounded = Signal(25)
        m.d.comb += rounded.eq(mant + (guard & (sticky | mant[0])))
        exp_r = Signal(signed(11))
        m.d.comb += exp_r.eq(exp + rounded[24])
        frac = Mux(rounded[24], 0, rounded[0:23])
        sign = r2["sign"]
        inf_out = Cat(Const(0, 23), Const(0xFF, 8), sign)
        o = Signal(32)
        with m.Switch(r2["special"]):
            with m.Case(1):
                m.d.comb += o.eq(CANONICAL_NAN_F32)
            with m.Case(2):
                m.d.comb += o.eq(inf_out)
            with m.Case(3):
                m.d.comb += o.eq(Cat(Const(0, 31), sign))
            with m.Default():
                with m.If(exp_r >= 255):
                    m.d.comb += o.eq(inf_out)
                with m.Elif((exp == 0) & (mant[0:23] == 0x7FFFFF)):
                    # In [2**-126 - 2**-150, 2**-126): IEEE rounds this up to the smallest
                    # normal.
                    m.d.comb += o.eq(Cat(Const(0, 23), Const(1, 8), sign))
                with m.Elif(exp_r <= 0):
                    m.d.comb += o.eq(Cat(Const(0, 31), sign))          # FTZ
                with m.Else():
                    m.d.comb += o.eq(Cat(frac, exp_r[0:8], sign))
        m.d.comb += self.o.eq(pipe(3, o, "o"))
        return m
