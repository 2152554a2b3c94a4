"""The LUT's arithmetic building blocks: small exact conversions and shifts of its evaluation
pipeline (``rtl.vector.lut_lane.LutLane``), each bit-identical to its ``sim.vector`` step."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay, ge_const, leading_zeros
from rtl.vector.mul import LaneMultiplier
from sim.dtypes import CANONICAL_NAN_F32

__all__ = ["int_to_f32", "ldexp_ftz", "exp2_reduce", "segment_offset", "Mulz"]


def int_to_f32(m, value, width, cut=None):
    """FP32 bits of a small signed integer ``value`` (``width`` bits incl. sign); exact.

    ``cut(value, name)``, if given, is applied to the sign and the magnitude (e.g. a pipeline
    register): the negation precedes it, the normalisation follows it."""
    neg = value < 0
    mag = Signal(width, name=f"{value.name}_mag" if hasattr(value, "name") else None)
    m.d.comb += mag.eq(Mux(neg, -value, value))
    if cut is not None:
        neg, mag = cut(neg, "neg"), cut(mag, "mag")
    out = Signal(32)
    # Priority from the MSB: the last assignment wins, so iterate upwards.
    m.d.comb += out.eq(0)
    for pos in range(width):
        with m.If(mag[pos]):
            man = (mag << (23 - pos))[0:23] if pos <= 23 else (mag >> (pos - 23))[0:23]
            m.d.comb += out.eq(Cat(man, Const(127 + pos, 8), neg))
    return out


def ldexp_ftz(m, y, k, *, en=None, cycles=0, name=None):
    """``y * 2**k`` by exponent arithmetic (see ``sim.vector.ldexp_ftz``); ``k`` signed.

    ``cycles`` > 0: the result ``cycles`` enabled cycles later (registers ``{name}_*``, no
    reset), with the exponent sum and the input's special tests registered after the first,
    so that the adder's carry chain is not in front of the range tests and the multiplexer
    (``s5_y`` -> sum -> tests -> select -> register)."""
    e = y[23:31]
    e2 = Signal(signed(12), name=f"{name}_e2" if name else None)
    out = Signal(32, name=f"{name}_out" if name else None)
    m.d.comb += e2.eq(e + k)
    e_inf, e_zero = e == 0xFF, e == 0
    if cycles:
        y, e2, e_inf, e_zero = (delay(m, en, v, 1, f"{name}_{n}", reset_less=True)
                                for n, v in (("y", y), ("e2", e2), ("inf", e_inf),
                                             ("zero", e_zero)))
    with m.If(e_inf):
        m.d.comb += out.eq(y)
    with m.Elif(e_zero | (e2 <= 0)):
        m.d.comb += out.eq(Cat(Const(0, 31), y[31]))
    with m.Elif(e2 >= 255):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), y[31]))
    with m.Else():
        m.d.comb += out.eq(Cat(y[0:23], e2[0:8], y[31]))
    return delay(m, en, out, max(cycles - 1, 0), name, reset_less=True) if cycles else out


def exp2_reduce(m, w, name="x2", cut=None):
    """EXP2 range reduction without an adder: ``(v, n)`` with ``n`` = ``w`` rounded half away
    from zero and ``v = fp32_add(w, -float(n))`` (``sim.vector.lut_eval``), for every ``w`` with
    a biased exponent up to 133 (``|w| < 128``; larger ``w`` and NaN are specials there).

    For ``|w| >= 0.5`` the fixed-point value ``X = |w| * 2**24`` (31 bits) splits into
    ``n = X[24:] + X[23]`` and ``w - n = sign * X[0:24]`` read as a signed 24-bit number:
    exact, so normalising it (leading-zero count, shift) is what the adder would return; an
    exact zero is +0 as in IEEE RNE. Below 0.5, ``n = 0`` and ``w + (-0)`` is ``w`` with DAZ.

    ``cut(value, name)``, if given, is applied to ``w``, ``n``'s two signed candidates, the
    signed difference's magnitude and sign and the leading-zero counts and run flags of its
    three 8-bit groups (e.g. a pipeline register): the normalising shift and the choice of
    ``n`` then follow it, and ``n`` is returned after it.
    """
    s, E, M = w[31], w[23:31], w[0:23]
    sig = Cat(M, Const(1, 1))
    # The fixed-point shift by ``t = E - 126`` (0..7 where it matters) is a multiplexer of
    # shifted copies on ``E``'s low three bits, not a subtraction in front of a shifter: ``t =
    # E[0] + 2 * u`` with ``u = E[1:3] + 1`` (mod 4), the even shift a 4-way multiplexer
    # (``half``) and the last step by ``E[0]`` merged into what follows (the sign ``neg`` and
    # ``frac``'s XOR with it are each a choice between two bits of ``half``). The difference's
    # magnitude ``-frac`` is the shifted copy of ``-sig`` (``-(sig << t) = (-sig) << t``
    # modulo 2**24), the negation beside the shift, not a 24-bit negation after it, so that
    # no ``w`` -> ``t`` -> shift -> negation chain precedes ``mag`` (with the bypass
    # multiplexer in front: see ``Lut``). ``half``, ``ones`` (below) and the low mantissa bits' zero
    # test are kept (``keep``): else yosys merges them into what follows and shares the result with
    # other tests as long chains of LUTs to the registers.
    def half_shifted(value, name_):
        out = Signal(31, name=f"{name}_{name_}", attrs={"keep": 1})
        m.d.comb += out.eq(Cat(*((Cat(value, Const(0, 7)) << 2 * ((e + 1) % 4))[0:31]
                                 for e in range(4))).word_select(E[1:3], 31))
        return out

    def last_step(half):
        return Mux(E[0], Cat(Const(0, 1), half[0:30]), half)
    half = half_shifted(sig, "half")
    x = Signal(31, name=f"{name}_fix")
    m.d.comb += x.eq(last_step(half))
    nsig = Signal(24, name=f"{name}_nsig")
    m.d.comb += nsig.eq(-sig)
    frac = x[0:24]
    small = ~ge_const(E, 126)
    # n and -n side by side (-(h + r) = ~h + (1 - r) in 10 bits), not a negation after the
    # rounding add. The choice between them (by the sign, and 0 for ``small``) follows the
    # cut, so that ``w`` -> shift -> rounding add -> choice is not one cycle.
    x_hi = Cat(x[24:31], Const(0, 3))
    n_pos = Signal(10, name=f"{name}_n_pos")
    n_neg = Signal(10, name=f"{name}_n_neg")
    m.d.comb += [n_pos.eq(x_hi + x[23]), n_neg.eq(~x_hi + ~x[23])]
    mag = Signal(24, name=f"{name}_mag")          # |w - n| * 2**24, at most 2**23
    neg = Signal(name=f"{name}_neg")              # frac[23]
    m.d.comb += neg.eq(Mux(E[0], half[22], half[23]))
    m.d.comb += mag.eq(Mux(neg, last_step(half_shifted(nsig, "nhalf"))[0:24], frac))
    # The leading zeros are those of ``frac`` or ``~frac`` (``mag - 1`` when negative), counted
    # beside the negation and not after it: they are those of ``mag`` except for ``mag`` a
    # power of two, which they overstate by one. ``norm`` then loses its leading one (and is
    # zero, the exact mantissa), and the exponent is one more.
    # The count is taken per 8-bit group before the cut (a count and an all-zero flag each,
    # from the top); after it the groups' flags shift ``mag`` by 8, 16 or 24 directly while
    # they pick the group's count, which shifts the rest (0..7), and the exponent is a table
    # of the count, both exponents (``norm[23]`` set or not) beside the shift: never one count
    # through a leading-zero tree, then a 0..23 shift, then ``126 - lz + ~norm[23]`` in front
    # of ``s2_v``.
    ones = Signal(24, name=f"{name}_ones", attrs={"keep": 1})
    m.d.comb += ones.eq(Mux(E[0], Cat(Const(0, 1), half[0:23]) ^ half[22].replicate(24),
                            half[0:24] ^ half[23].replicate(24)))
    # Beside each group's count, whether the group is a run of ones at its bottom (or zero,
    # ``gq``) and whether it is all ones (``ga``): ``mag`` is a power of two when negative
    # exactly if ``ones`` (``mag - 1``) is such a run, i.e. its first non-zero group is one
    # and the groups below it are all ones. That flag, from the registers, chooses the
    # exponent instead of ``norm[23]`` after the shift (no gz -> shift -> norm[23] ->
    # exponent chain in front of ``s2_v``).
    gz, gc, gq, ga = [], [], [], []
    for i, lo in enumerate((16, 8, 0)):
        grp = ones[lo:lo + 8]
        c, z = leading_zeros(m, grp, f"{name}_lz{i}")
        gc.append(c)
        gz.append(z)
        q = Signal(name=f"{name}_run{i}")
        a = Signal(name=f"{name}_all{i}")
        m.d.comb += [q.eq(~(grp[1:8] & ~grp[0:7]).any()), a.eq(grp.all())]
        gq.append(q)
        ga.append(a)
    is_zero = Signal(name=f"{name}_frac_zero")
    # ``frac`` is zero when the significand's low ``24 - t`` bits are (for t = 0 the hidden
    # bit is there): tests of the mantissa's low bits beside the shift, picked by ``t``'s
    # three bits (``E[0:3]``), not a 24-bit test after the shifter. The low 17 bits are
    # common to every ``t`` > 0: one test of them beside the choice among the tests of the six
    # above, not 23-bit tests in front of the choice.
    low17_zero = Signal(name=f"{name}_low17_zero", attrs={"keep": 1})
    m.d.comb += low17_zero.eq(M[0:17] == 0)
    top_zero = [Const(0, 1)] + [M[17:24 - k] == 0 for k in range(1, 7)] + [Const(1, 1)]
    m.d.comb += is_zero.eq(low17_zero &
                           Cat(*(top_zero[(e + 2) % 8] for e in range(8))).bit_select(E[0:3], 1))
    w_zero = E == 0
    # (|n| <= 128: eight bits of ``n_pos`` and nine of ``n_neg`` are the whole of them.)
    n_pos, n_neg = n_pos[0:8], n_neg[0:9]
    if cut is not None:
        w, n_pos, n_neg, mag, neg, is_zero, small, w_zero = (cut(v, f"{name}_{nm}") for v, nm in (
            (w, "w"), (n_pos, "n_pos"), (n_neg, "n_neg"), (mag, "mag"), (neg, "neg"),
            (is_zero, "zero"), (small, "small"), (w_zero, "w_zero")))
        gz = [cut(z, f"{name}_gz{i}") for i, z in enumerate(gz)]
        gc = [cut(c, f"{name}_gc{i}") for i, c in enumerate(gc)]
        gq = [cut(q, f"{name}_gq{i}") for i, q in enumerate(gq)]
        ga = [ga[0]] + [cut(a, f"{name}_ga{i}") for i, a in enumerate(ga) if i]  # not ga[0]
        s = w[31]
    n = Signal(signed(10), name=f"{name}_n")
    m.d.comb += n.eq(Mux(small, 0, Mux(s, n_neg.as_signed(), n_pos)))
    coarse = Signal(24, name=f"{name}_coarse")
    m.d.comb += coarse.eq(Mux(~gz[0], mag, Mux(~gz[1], mag << 8, Mux(~gz[2], mag << 16, 0))))
    fine = Signal(3, name=f"{name}_fine")
    m.d.comb += fine.eq(Mux(~gz[0], gc[0], Mux(~gz[1], gc[1], gc[2])))
    norm = Signal(24, name=f"{name}_norm")
    m.d.comb += norm.eq(coarse << fine)

    # The exponent, 126 - lz (``norm[23]`` set) or 127 - lz (clear: a power of two), for lz =
    # 8 * group + the group's count (24 when ``ones`` is zero): per group a table of its
    # count, from the registers, and the groups' flags choose.
    def exponent(base):
        def table(i):
            t = Signal(8, name=f"{name}_e{base}_{i}")
            m.d.comb += t.eq(Cat(*(Const(base - 8 * i - c, 8) for c in range(8)))
                             .word_select(gc[i], 8))
            return t
        e = Signal(8, name=f"{name}_e{base}")
        m.d.comb += e.eq(Mux(~gz[0], table(0), Mux(~gz[1], table(1),
                                                   Mux(~gz[2], table(2), base - 24))))
        return e
    e_lead, e_next = exponent(126), exponent(127)
    # ``norm[23]`` is clear (and ``norm`` zero) exactly when ``mag`` is a power of two and
    # ``neg`` (``ones`` all zero included: ``mag`` = 1).
    pow2 = Signal(name=f"{name}_pow2")
    m.d.comb += pow2.eq(neg & Mux(~gz[0], gq[0] & ga[1] & ga[2],
                                  Mux(~gz[1], gq[1] & ga[2], gq[2])))
    v = Signal(32, name=f"{name}_v")
    with m.If(small):
        m.d.comb += v.eq(Mux(w_zero, Cat(Const(0, 31), s), w))
    with m.Elif(is_zero):
        m.d.comb += v.eq(0)
    with m.Else():
        m.d.comb += v.eq(Cat(norm[0:23], Mux(pow2, e_next, e_lead), s ^ neg))
    return v, n


def segment_offset(m, v, in_range, low_bits, name="dx", cut=None):
    """``dx = fp32_add(v, -seg_start)`` (``sim.vector.lut_eval``) without an adder.

    ``seg_start`` is ``v`` with the low mantissa bits selected by ``low_bits`` (23 bits, a mask)
    cleared when ``in_range``, else +0. In range the difference of two numbers of the same
    sign and exponent is exact: the masked bits, normalised (FTZ below 2**-126, +0 when they are
    zero). Out of range ``v + (-0)`` is ``v`` with DAZ. Inf/NaN/zero ``v`` follow IEEE: in range
    Inf - Inf is NaN and a zero (DAZ) gives +0.

    ``cut(value, name)``, if given, is applied to ``v``, ``in_range``, the masked bits, their
    leading-zero count and the NaN and zero tests of ``v`` (e.g. a pipeline register): the
    normalising shift and the exponent then follow it.
    """
    r = Signal(24, name=f"{name}_r")
    m.d.comb += r.eq(v[0:23] & low_bits)
    lz, is_zero = leading_zeros(m, r, f"{name}_lz")
    # The tests of ``v`` alone are taken beside the count, and the flush test is a comparison
    # of the registers beside ``e2``, not a test of ``e2`` after its subtraction (v -> e2 ->
    # e2 <= 0 -> dx).
    nan = Signal(name=f"{name}_nan")
    m.d.comb += nan.eq((v[23:31] == 0xFF) & ((v[0:23] != 0) | in_range))
    v_zero = Signal(name=f"{name}_v_zero")
    m.d.comb += v_zero.eq(v[23:31] == 0)
    if cut is not None:
        v, in_range, r, lz, is_zero, nan, v_zero = (cut(x, f"{name}_{n}") for x, n in (
            (v, "v"), (in_range, "in_range"), (r, "r"), (lz, "lz"), (is_zero, "is_zero"),
            (nan, "nan"), (v_zero, "v_zero")))
    vs, vE = v[31], v[23:31]
    norm = Signal(24, name=f"{name}_norm")
    m.d.comb += norm.eq(r << lz)
    e2 = Signal(signed(10), name=f"{name}_e")
    m.d.comb += e2.eq(vE - lz)
    flush = Signal(name=f"{name}_flush")        # e2 <= 0
    m.d.comb += flush.eq(vE <= lz)
    dx = Signal(32, name=name)
    with m.If(nan):
        m.d.comb += dx.eq(CANONICAL_NAN_F32)
    with m.Elif(v_zero):
        m.d.comb += dx.eq(Cat(Const(0, 31), vs & ~in_range))
    with m.Elif(~in_range):
        m.d.comb += dx.eq(v)
    with m.Elif(is_zero):
        m.d.comb += dx.eq(0)
    with m.Elif(flush):
        m.d.comb += dx.eq(Cat(Const(0, 31), vs))
    with m.Else():
        m.d.comb += dx.eq(Cat(norm[0:23], e2[0:8], vs))
    return dx


class Mulz(wiring.Component):
    """FP32 product where a zero/subnormal ``c`` annihilates (``sim.vector.mulz``); two
    MULT18X18D (``LaneMultiplier(logic_bits=6)``). Latency ``stages`` enabled cycles."""

    def __init__(self, stages=0):
        self._stages = stages
        super().__init__({"c": In(32), "d": In(32), "en": In(1, init=1), "o": Out(32)})

    def elaborate(self, platform):
        # The annihilation is one of the multiplier's step-1 special cases, so ``o`` is the
        # multiplier's output register itself, not a multiplexer after it: no zero flag is a
        # level in front of the FP32 adder that takes the product (its alignment shift).
        m = Module()
        m.submodules.mul = mul = LaneMultiplier(logic_bits=6, stages=self._stages,
                                                zero_a_annihilates=True)
        m.d.comb += [mul.a.eq(self.c), mul.b.eq(self.d), mul.en.eq(self.en),
                     self.o.eq(mul.o)]
        return m
