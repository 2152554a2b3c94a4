"""FP32 to narrow-format encoder with RNE, RTZ and stochastic rounding.

The bit-exact golden model is ``sim.rounding.encode``; the number rules are
``docs/interfaces.md`` section 2 and the SR algorithm is described in ``docs/rounding.md``.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import Pipe, Pipelined, check_stages, ge_const
from rtl.round.encoder_compose import FLOATS as _FLOATS, EncoderCompose
from sim.config import check_int
from sim.dtypes import FORMAT_BITS, Format, RoundMode
from sim.rounding import MAX_N_RAND, RAW_MODE, encode_params, max_finite_bits

__all__ = ["FPEncoder"]


class FPEncoder(Pipelined, wiring.Component):
    """Encode an FP32 value into the format ``fmt`` with rounding mode ``mode``.

    Combinational, or pipelined by ``stages``. Supports every ``Format``: the narrow floats
    (subnormals produced, overflow to Inf or max finite, E4M3 saturating to +-448, canonical
    NaN), INT8/INT32 (rounded with the mode, saturating, NaN gives 0) and FP32 (passed through
    with DAZ and canonical NaN). FP32 subnormal inputs are treated as zero (DAZ).

    Stochastic rounding: the discarded fraction of the target ULP is rounded to ``n_rand`` bits
    (round-to-nearest-even), ``rand`` is added to it and the carry out decides the direction;
    see ``docs/rounding.md``. ``rand`` is ignored in RNE and RTZ.

    Parameters
    ----------
    n_rand : int
        Random bits per SR decision, 1..32.
    stages : int
        Pipeline registers, 0 (combinational) to 3: 1 registers after the alignment shift, 2
        also after the rounding increment, 3 also before the alignment shift (the shift amount
        and the sticky mask, from the exponent and the format). Latency ``stages`` cycles, one
        value per cycle.

    Members
    -------
    a : In(32)
        FP32 bit pattern.
    fmt : In(3)
        Target ``Format``.
    mode : In(2)
        ``RoundMode`` (RNE=0, RTZ=1, SR=2).
    rand : In(n_rand)
        Uniform random bits for SR.
    en : In(1), default 1
        Clock enable of the pipeline registers (unused when ``stages == 0``).
    o : Out(32)
        The encoded value, low-aligned, upper bits zero (INT8 two's complement in [7:0]).

    Mode code 3 is not a ``RoundMode``: with ``fmt`` FP32 it passes ``a`` unchanged
    (``sim.rounding.RAW_MODE``, the vector engine's exact INT32 copy); with any other format
    the encoder rounds it like RNE (the golden model rejects it).

    The last stage, the word per format from the rounded significand and the class and range
    flags, is :class:`rtl.round.encoder_compose.EncoderCompose`.
    """

    MAX_STAGES = 3
    _CUTS = {0: (), 1: (1,), 2: (1, 2), 3: (0, 1, 2)}

    def __init__(self, n_rand=16, stages=0):
        check_int("n_rand", n_rand, 1, MAX_N_RAND)
        self._n_rand = n_rand
        self._stages = check_stages(stages, self.MAX_STAGES)
        super().__init__({
            "a": In(32),
            "fmt": In(FORMAT_BITS),
            "mode": In(2),
            "rand": In(n_rand),
            "en": In(1, init=1),
            "o": Out(32),
        })

    @property
    def n_rand(self):
        return self._n_rand

    def elaborate(self, platform):
        m = Module()
        n = self._n_rand
        width = 24 + n + 2            # significand, n fraction bits, guard, sticky slot
        cap = width                   # every shift >= width drops the whole significand
        pipe = Pipe(m, self.en, self._CUTS[self._stages])

        def fields(a):
            e, man = a[23:31], a[0:23]
            return (a[31], e, man, (e == 0xFF) & (man != 0), (e == 0xFF) & (man == 0), e == 0,
                    Cat(man, Const(1, 1)))

        a, fmt, mode, rand = self.a, self.fmt, self.mode, self.rand
        sign, e, man, is_nan, is_inf, is_zero, sig = fields(a)

        # Per-format right shift from the FP32 LSB to the target LSB, clamped to ``cap``: a
        # constant table of the exponent per format (logic of 8 inputs, no carry chains:
        # compare, subtract and clamp were three chains in front of the barrel shifter).
        def shift_table(f):
            if f in (Format.INT8, Format.INT32):
                raw = [max(0, 150 - ev) for ev in range(256)]
            else:
                man_bits, bias, _, _ = encode_params(f)
                raw = [(23 - man_bits) + max(0, (128 - bias) - ev) for ev in range(256)]
            return Array(Const(min(cap, r), range(cap + 1)) for r in raw)

        shift = Signal(range(cap + 1))
        with m.Switch(fmt):
            for f in _FLOATS:
                with m.Case(f):
                    m.d.comb += shift.eq(shift_table(f)[e])
            with m.Case(Format.INT8, Format.INT32):
                m.d.comb += shift.eq(shift_table(Format.INT8)[e])
            with m.Default():
                m.d.comb += shift.eq(0)

        # sig bit i is shifted out below the sticky slot iff shift > i + n + 2. The thermometer
        # is compared on the exponent directly (unclamped shift > c <=> e below a per-format
        # constant), in parallel with the shift amount, not after it (and after a clamp).
        def shift_gt(c):
            """Unclamped shift > c (hence ``shift > c`` for c < cap) as a compare of ``e``."""
            gt = Signal(name=f"shift_gt{c}")
            with m.Switch(fmt):
                for f in _FLOATS:
                    man_bits, bias, _, _ = encode_params(f)
                    # (23 - man_bits) + max(0, (128 - bias) - e) > c
                    d = c - (23 - man_bits)
                    with m.Case(f):
                        m.d.comb += gt.eq(1 if d < 0 else below(128 - bias - d))
                with m.Case(Format.INT8, Format.INT32):
                    m.d.comb += gt.eq(below(150 - c))        # max(0, 150 - e) > c, c >= 0
            return gt

        def below(k):
            """``e < k`` for a constant ``k`` of any range (LUT logic, not a carry chain)."""
            return ~ge_const(e, k)

        therm = Cat(shift_gt(i + n + 2) for i in range(24))

        # -- cut 0: before the alignment shift -------------------------------------------------
        # The shift amount and the mask are look-ups of the exponent and the format; after
        # them, the shifter and the sticky OR fill a cycle of their own.
        shift, therm = pipe(0, shift, "shift"), pipe(0, therm, "therm")
        a, fmt, mode, rand = (pipe(0, v, k) for k, v in
                              (("a", a), ("fmt", fmt), ("mode", mode), ("rand", rand)))
        sign, e, man, is_nan, is_inf, is_zero, sig = fields(a)
        # Right shift with sticky: y holds the integer part q, n fraction bits, a guard bit and
        # a sticky slot; sig bits shifted below y are ORed into the sticky.
        x = Cat(Const(0, n + 2), sig)
        y = Signal(width)
        m.d.comb += y.eq(x >> shift)
        sticky = (sig & therm).any() | y[0]

        # -- cut 1: after the alignment shift ---------------------------------------------------
        y, sticky = pipe(1, y, "y"), pipe(1, sticky, "sticky")
        a, fmt, mode, rand = (pipe(1, v, k) for k, v in
                              (("a", a), ("fmt", fmt), ("mode", mode), ("rand", rand)))
        q = y[n + 2:]
        frac = y[2:n + 2]
        guard = y[1]

        # Round-up decision.
        up_rne = frac[n - 1] & ((frac[:n - 1] != 0) | guard | sticky | q[0]) if n > 1 else \
            frac[0] & (guard | sticky | q[0])
        f_sr = Signal(n + 1)
        m.d.comb += f_sr.eq(frac + (guard & (sticky | frac[0])))
        sr_sum = Signal(n + 2)
        m.d.comb += sr_sum.eq(f_sr + rand)
        up_sr = sr_sum[n:].any()
        up = Signal()
        with m.Switch(mode):
            with m.Case(RoundMode.RTZ):
                m.d.comb += up.eq(0)
            with m.Case(RoundMode.SR):
                m.d.comb += up.eq(up_sr)
            with m.Default():
                m.d.comb += up.eq(up_rne)
        k = Signal(25)
        m.d.comb += k.eq(q + up)

        # The result's exponent field (floats, placed above the mantissa) and INT32's exact
        # left shift depend on ``a`` alone: computed beside the rounding increment, before cut
        # 2, so that after it only the add of ``k`` and the range checks remain.
        _, e1, _, nan1, inf1, zero1, sig1 = fields(a)
        ebase = Signal(18)
        with m.Switch(fmt):
            for f in _FLOATS:
                man_bits, bias, _, _ = encode_params(f)
                with m.Case(f):
                    m.d.comb += ebase.eq(Mux(e1 + bias > 127, e1 + bias - 128, 0) << man_bits)
        int_big = Signal(32)          # INT32, e in 150..157: sig << (e - 150), exact
        m.d.comb += int_big.eq(sig1 << (e1 - 150)[:3])

        # The range check of the result, ``ebase + k`` against the largest code, decided on
        # the exponent before the cut: ``ebase`` has zero low ``man_bits`` bits and ``k`` (the
        # rounded significand, hidden bit at ``man_bits``) is at most ``2 << man_bits``, so
        # the result's exponent field is ``X + h`` with ``X = ebase >> man_bits`` and ``h =
        # k >> man_bits`` in 0..2. Flags of ``X`` against each threshold minus ``h`` are
        # registered; after the cut ``h`` picks one (no compare after the add).
        def x_ge(f, c):
            """``X >= c`` for ``fmt == f``: ``X = max(0, e + bias - 128)``."""
            _, bias, _, _ = encode_params(f)
            return Const(1, 1) if c <= 0 else ge_const(e1, c + 128 - bias)

        def x_eq(f, c):
            """``X == c`` for ``fmt == f``."""
            _, bias, _, _ = encode_params(f)
            if c < 0:
                return Const(0, 1)
            if c == 0:
                return ~ge_const(e1, 129 - bias)
            return ge_const(e1, c + 128 - bias) & ~ge_const(e1, c + 129 - bias)

        big_flags = {}                # per format: ((flag for h=0), (h=1), (h=2)), each a tuple
        for f in _FLOATS:
            man_bits, bias, exp_bits, has_inf = encode_params(f)
            if has_inf:
                inf_e = (1 << exp_bits) - 1          # mag >= inf_code <=> X + h >= inf_e
                big_flags[f] = tuple((x_ge(f, inf_e - h),) for h in range(3))
            else:
                maxf = max_finite_bits(f)            # mag > maxf: above its exponent field,
                top_e = maxf >> man_bits             # or equal to it with a larger mantissa
                big_flags[f] = tuple((x_ge(f, top_e + 1 - h), x_eq(f, top_e - h))
                                     for h in range(3))

        # -- cut 2: after the rounding increment ------------------------------------------------
        # The input's class and range flags too, so that the composition starts from them.
        k = pipe(2, k, "k")
        ebase, int_big = pipe(2, ebase, "ebase"), pipe(2, int_big, "int_big")
        a, fmt = pipe(2, a, "a"), pipe(2, fmt, "fmt")
        is_nan, is_inf, is_zero = (pipe(2, v, n_) for n_, v in (
            ("is_nan", nan1), ("is_inf", inf1), ("is_zero", zero1)))
        e_ge150 = pipe(2, ge_const(e1, 150), "e_ge150")
        e_ge158 = pipe(2, ge_const(e1, 158), "e_ge158")
        big_flags = {f: tuple(tuple(pipe(2, v, f"big_{f.name.lower()}_{h}_{i}")
                                    for i, v in enumerate(fl)) for h, fl in enumerate(fls))
                     for f, fls in big_flags.items()}
        rtz = pipe(2, mode == RoundMode.RTZ, "rtz")
        raw = pipe(2, mode == RAW_MODE, "raw")

        # The composition per format: a combinational sub-component (encoder_compose.py).
        m.submodules.compose = compose = EncoderCompose()
        m.d.comb += [
            compose.a.eq(a), compose.fmt.eq(fmt), compose.k.eq(k), compose.ebase.eq(ebase),
            compose.int_big.eq(int_big), compose.is_nan.eq(is_nan), compose.is_inf.eq(is_inf),
            compose.is_zero.eq(is_zero), compose.e_ge150.eq(e_ge150),
            compose.e_ge158.eq(e_ge158), compose.rtz.eq(rtz), compose.raw.eq(raw),
            self.o.eq(compose.o),
        ]
        for f, fls in big_flags.items():
            name = f.name.lower()
            m.d.comb += getattr(compose, f"ge_{name}").eq(Cat(fl[0] for fl in fls))
            if len(fls[0]) > 1:
                m.d.comb += getattr(compose, f"eq_{name}").eq(Cat(fl[1] for fl in fls))
        return m
