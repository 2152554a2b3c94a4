"""The run-time programmable LUT of the vector engine: two banks of tables and one evaluation
pipeline per lane. Golden model: ``sim.vector.lut_eval`` and ``VectorEngineModel.cfg_*``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay, ge_const, leading_zeros
from rtl.arith.fp32_add import FP32Adder
from rtl.arith.fp32_mul import FP32Multiplier
from rtl.vector.lut_header import LutHeader
from rtl.vector.mul import LaneMultiplier
from sim.config import check_int, check_pow2
from sim.dtypes import CANONICAL_NAN_F32
from sim.vector import (CFG_ADDR_BITS, CFG_BANK_BIT, DESC_BASE_BITS, ENTRY_OVER, ENTRY_UNDER,
                        MAX_BINADES, ONE_F32, Hdr, RangeMode, Status)

__all__ = ["Lut", "CFG_LAYOUT", "check_lanes", "check_depth", "int_to_f32", "ldexp_ftz",
           "exp2_reduce", "segment_offset"]

#: The cfg stream payload: one 32-bit word written (``write=1``) or read (``write=0``).
CFG_LAYOUT = data.StructLayout({"addr": CFG_ADDR_BITS, "data": 32, "write": 1})


#: The most lanes of a ``Lut`` or a ``VectorEngine``.
MAX_LANES = 128


def check_lanes(lanes):
    """``sim.config.check_int("lanes", lanes, 1, MAX_LANES)``."""
    return check_int("lanes", lanes, 1, MAX_LANES)


def check_depth(depth):
    """``sim.config.check_pow2("depth", depth, 8, 1024)``: entries per LUT bank."""
    return check_pow2("depth", depth, 8, 1024)


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


class _Mulz(wiring.Component):
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


class Lut(wiring.Component):
    """Two banks of LUT tables, written and read through ``cfg``, and ``lanes`` evaluation
    pipelines (``sim.vector.lut_eval``) with hit/underflow/overflow counters.

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    depth : int
        Entries per bank (power of two, 8..1024). Each entry is three FP32 coefficients.
    deep : bool
        Pipeline the FP32 units (``latency`` 30 cycles) for clock speed; ``False`` keeps one
        cycle per step (``latency`` 6, each step a multiply-add in one cycle: about a fifth of
        the clock frequency). Results are identical.

    Members
    -------
    cfg : In(stream.Signature(CFG_LAYOUT))
        Word writes and reads of the map in ``sim.vector`` (``CFG_*``). A beat is taken into a
        register (``ready`` is its complement: one beat every two cycles at most) and carried
        out from it the next cycle at the earliest: a write lands in the cycle after it is
        taken (a coefficient, descriptor or header word one cycle later still, from registers
        of their own), a read's ``rdata`` beat is valid three cycles after it. A bad address
        sets ``error`` (a read then returns 0). A write to bank ``bank`` waits in the register
        while ``lock`` is high, so a running instruction never sees its table change; the
        other bank can be loaded meanwhile (double buffering).
    rdata : Out(stream.Signature(32))
        One beat per cfg read, in order; a beat waits in the register while a read result
        waits.
    error : Out(1)
        Sticky; cleared by a write to ``Status.ERROR``.
    z : In(ArrayLayout(32, lanes))
        FP32 inputs; ``bank`` selects the table, ``bypass`` passes ``z`` through unchanged.
        ``bank`` and the header of that bank must not change while an element that is not
        bypassed is in the pipeline (its stages take them as the element passes).
    count : In(1)
        The beat in ``z`` is an element to count in the hit/underflow/overflow counters.
    en : In(1)
        Advance the pipeline (stall when low).
    y : Out(ArrayLayout(32, lanes))
        Results, ``latency`` enabled cycles after ``z``.
    lock : In(1)
        Block cfg writes to bank ``bank`` (an instruction is using it). The coefficient RAM is
        synthesized without read/write collision logic (``no_rw_check``): a lane's read that
        matters never meets a write to its bank, as long as ``lock`` is high while the
        elements of a table instruction are in the pipeline.
    """

    #: FP32 pipeline registers of (the pre-scale multiplier, a coefficient multiplier, an
    #: adder), whether the table address is registered before the block RAM, whether the
    #: segment offset ``dx`` (and with it the block RAM's output) has a register in its middle
    #: and whether the binade (the segment descriptor's address) is registered before the
    #: descriptor read, per ``deep``.
    _STAGES = {False: (0, 0, 0, 0, 0, 0), True: (4, 4, 3, 1, 1, 1)}

    def __init__(self, lanes, depth=512, *, deep=True):
        self._lanes = check_lanes(lanes)
        self._depth = check_depth(depth)
        if not isinstance(deep, bool):
            raise TypeError(f"deep must be a bool, not {deep!r}")
        self._deep = deep
        super().__init__({
            "cfg": In(stream.Signature(CFG_LAYOUT)),
            "rdata": Out(stream.Signature(32)),
            "error": Out(1),
            "z": In(data.ArrayLayout(32, lanes)),
            "bank": In(1),
            "bypass": In(1),
            "count": In(1),
            "en": In(1),
            "lock": In(1),
            "y": Out(data.ArrayLayout(32, lanes)),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def depth(self):
        return self._depth

    @property
    def deep(self):
        return self._deep

    @classmethod
    def latency_of(cls, deep):
        """Enabled cycles from ``z`` to ``y`` of a ``Lut(..., deep=deep)``: the pre-scale,
        range reduction, table read, two multiply-adds and the finish."""
        pre, mul, add, idx, dx, bin_ = cls._STAGES[deep]
        return (pre + 1) + 1 + (bin_ + idx + 1 + dx) + 2 * (mul + add + 1) + (add + 1)

    @property
    def latency(self):
        """Enabled cycles from ``z`` to ``y``."""
        return self.latency_of(self._deep)

    def elaborate(self, platform):
        m = Module()
        lanes, depth = self._lanes, self._depth
        abits = depth.bit_length() - 1

        # -- configuration state ------------------------------------------------------------
        hdr = []
        for bank in range(2):
            hdr.append({
                Hdr.MODE: Signal(3, name=f"b{bank}_mode"),
                Hdr.E_LO: Signal(8, name=f"b{bank}_e_lo"),
                Hdr.NB_NEG: Signal(6, name=f"b{bank}_nb_neg"),
                Hdr.NB_POS: Signal(6, name=f"b{bank}_nb_pos"),
                Hdr.PRE: Signal(32, name=f"b{bank}_pre", init=ONE_F32),
                Hdr.POST: Signal(32, name=f"b{bank}_post"),
            })
        # The coefficient RAM is never read and written at one address in one cycle where the
        # read matters: a cfg read and a cfg write are different beats, and the lanes read
        # bank ``bank`` while a cfg write to it waits for ``lock`` to fall (a lane's read of
        # the other bank, or without ``lock``, is not used). ``no_rw_check`` tells yosys so,
        # for read ports it builds from an asynchronous read and the register after it
        # (``coef_read``; a synchronous Amaranth read port keeps its read-before-write
        # promise): otherwise it emulates read-before-write across the block RAM's two ports
        # with a delayed write and a bypass (a registered address compare and a multiplexer
        # after every read port's output), one more level after the block RAM's slow
        # clock-to-out on the cfg read (``coef`` -> ``rdata__payload``) and after the lanes'
        # address -> compare (``base_d1`` -> ``coef``).
        m.submodules.coef = coef = Memory(shape=96, depth=2 * depth, init=[],
                                          attrs={"no_rw_check": 1})

        def coef_read(addr, en, name):
            """The row at ``addr`` one cycle later, held while ``en`` is low (as a synchronous
            read port, read before a write)."""
            rp = coef.read_port(domain="comb")
            data = Signal(96, name=name, reset_less=True)
            m.d.comb += rp.addr.eq(addr)
            with m.If(en):
                m.d.sync += data.eq(rp.data)
            return data

        # A descriptor's base (``desc``) and its K (``desc_k``, written beside it): the lanes
        # read K one stage before the base (see ``desc_k`` below).
        m.submodules.desc = desc = Memory(shape=DESC_BASE_BITS, depth=4 * MAX_BINADES, init=[])
        m.submodules.desc_k = desc_k = Memory(shape=3, depth=4 * MAX_BINADES, init=[])
        coef_wp = coef.write_port(granularity=32)
        desc_wp = desc.write_port()
        desc_k_wp = desc_k.write_port()
        desc_cfg_rp = desc.read_port(domain="comb")
        desc_k_cfg_rp = desc_k.read_port(domain="comb")
        # Beside each descriptor, the mask of the mantissa's top seven bits below its segment
        # start (``0x7F >> K``; K = 0 before a write), computed as it is written: the lanes
        # read it instead of shifting by K after the descriptor read.
        m.submodules.desc_low = desc_low = Memory(shape=7, depth=4 * MAX_BINADES,
                                                  init=[0x7F] * (4 * MAX_BINADES))
        desc_low_wp = desc_low.write_port()
        hits = Signal(32)
        unders = Signal(32)
        overs = Signal(32)
        error = Signal()
        m.d.comb += self.error.eq(error)

        # -- cfg port ---------------------------------------------------------------------
        # A beat is taken into a register with its address decoded (``q_*``) and carried out
        # from there the next cycle: the bank-lock check, the RAM write enables, the header
        # and counter writes and the read multiplexer start from flip-flops, and ``cfg.ready``
        # is one (low while a beat waits): no path runs from the cfg port through the address
        # decode to the descriptor RAM's write enables.
        p = self.cfg.payload
        a = p.addr
        region = a[12:14]
        is_status = a[15]
        low_in = a[0:12]
        entry_in = low_in[2:12]
        st_in = a[0:15]
        coef_in = ~is_status & (region == 0) & (low_in[0:2] != 3) & (entry_in < depth)
        desc_in = ~is_status & (region == 1) & (low_in < 2 * MAX_BINADES)
        hdr_in = ~is_status & (region == 2) & (low_in <= Hdr.POST)
        status_in = is_status & (st_in <= Status.DEPTH)
        bad_in = ~(coef_in | desc_in | hdr_in | status_in) | \
            (is_status & p.write & (st_in == Status.DEPTH))
        q_valid = Signal()
        q = Signal(CFG_LAYOUT, name="q")
        coef_ok, desc_ok, bad, lockable = (
            Signal(name=f"q_{n}") for n in ("coef", "desc", "bad", "lockable"))
        # One-hot selects of the header register (per bank) and of the status register.
        hsel = [{reg: Signal(name=f"q_hsel_b{bank}_{reg.name.lower()}") for reg in Hdr}
                for bank in range(2)]
        ssel = {reg: Signal(name=f"q_ssel_{reg.name.lower()}") for reg in Status}
        m.d.comb += self.cfg.ready.eq(~q_valid)
        with m.If(self.cfg.valid & ~q_valid):
            m.d.sync += [q_valid.eq(1), q.eq(p),
                         coef_ok.eq(coef_in), desc_ok.eq(desc_in), bad.eq(bad_in),
                         lockable.eq(p.write & (coef_in | desc_in | hdr_in))]
            m.d.sync += [sig.eq(hdr_in & (a[CFG_BANK_BIT] == bank) & (low_in[0:3] == reg))
                         for bank in range(2) for reg, sig in hsel[bank].items()]
            m.d.sync += [sig.eq(status_in & (st_in == reg)) for reg, sig in ssel.items()]
        p = q
        bank_a = q.addr[CFG_BANK_BIT]
        low = q.addr[0:12]
        entry = low[2:12]
        word = low[0:2]
        blocked = lockable & self.lock & (bank_a == self.bank)
        rd_valid = Signal()
        rd_sel = Signal(2)          # the coefficient word 0..2 to return, 3: ``rd_value``
        rd_value = Signal(32)
        take = Signal()
        # The read's word is registered once more (``out``) before ``rdata``, so that the
        # coefficient RAM's block RAMs (a slow clock-to-out) -> their output multiplexer -> the
        # word select do not precede the core's window register. ``s1_free``: the read stage
        # may move on (``out`` empty or taken).
        # ``out`` is one 4-way multiplexer of the three words and ``rd_value`` on a registered
        # select (``rd_sel``: a LUT and a PFUMX after the block RAM), and has no reset
        # (``out_valid`` has), so its enable can only be the flip-flops' clock enable, not a
        # LUT in front of them.
        out_valid = Signal()
        out = Signal(32, reset_less=True)
        s1_free = Signal()
        # The register's beat may be carried out: it is there and no read result waits (a
        # read's stage is moving or empty); ``take`` adds the bank lock, the header writes'
        # ``hdr_we`` (below) their bank's lock.
        movable = q_valid & ~(rd_valid & ~s1_free)
        m.d.comb += [s1_free.eq(~out_valid | self.rdata.ready),
                     take.eq(movable & ~blocked)]
        with m.If(take):
            m.d.sync += q_valid.eq(0)
        m.d.comb += [
            desc_cfg_rp.addr.eq(Cat(low[0:6], bank_a)),
            desc_k_cfg_rp.addr.eq(Cat(low[0:6], bank_a)),
        ]
        # The cfg read's row, loaded whenever the read stage is free (like ``rd_value``): it is
        # the read's in the cycle a read is taken, and holds while its result waits.
        cfg_coef = coef_read(Cat(entry[0:abits], bank_a), ~rd_valid | s1_free, "cfg_coef")
        # A coefficient write reaches the block RAM one cycle after it is taken, from registers
        # (``wr_*``), so that the RAM's write enable does not wait for the bank-lock check and
        # the read stage's ``rdata.ready`` in front of the RAM's enable. Nothing
        # reads the word meanwhile: the next cfg beat is carried out two cycles after it at
        # the earliest, and a lane reads a written bank only once ``lock`` allows the write.
        wr_en = Signal(3)
        wr_addr = Signal(abits + 1, reset_less=True)
        wr_data = Signal(32, reset_less=True)
        m.d.sync += [wr_en.eq(Mux(take & p.write & coef_ok, 1 << word, 0)),
                     wr_addr.eq(Cat(entry[0:abits], bank_a)), wr_data.eq(p.data)]
        m.d.comb += [coef_wp.en.eq(wr_en), coef_wp.addr.eq(wr_addr),
                     coef_wp.data.eq(Cat(wr_data, wr_data, wr_data))]
        # A descriptor write likewise, from ``desc_we``, ``desc_wa`` and ``wr_data``, so that
        # ``take`` is not in front of the descriptor LUT-RAMs' 80 write enables.
        # The lanes read a descriptor later than the header (see the header's ``hdr_we``).
        desc_we = Signal()
        desc_wa = Signal(7, reset_less=True)
        m.d.sync += [desc_we.eq(take & p.write & desc_ok), desc_wa.eq(Cat(low[0:6], bank_a))]
        m.d.comb += [
            desc_wp.addr.eq(desc_wa), desc_wp.data.eq(wr_data[0:DESC_BASE_BITS]),
            desc_k_wp.addr.eq(desc_wa), desc_k_wp.data.eq(wr_data[16:19]),
            desc_low_wp.addr.eq(desc_wa), desc_low_wp.data.eq(Const(0x7F, 7) >> wr_data[16:19]),
            desc_wp.en.eq(desc_we), desc_k_wp.en.eq(desc_we), desc_low_wp.en.eq(desc_we),
        ]
        with m.If(s1_free):
            m.d.sync += [rd_valid.eq(0), out_valid.eq(rd_valid),
                         out.eq(Cat(cfg_coef, rd_value).word_select(rd_sel, 32))]
        m.d.comb += [self.rdata.valid.eq(out_valid), self.rdata.payload.eq(out)]
        # Counter increments; a cfg write to a counter in the same cycle wins.
        inc = {Status.HITS: Signal(range(lanes + 1), name="inc_hits"),
               Status.UNDERS: Signal(range(lanes + 1), name="inc_unders"),
               Status.OVERS: Signal(range(lanes + 1), name="inc_overs")}
        counters = {Status.HITS: hits, Status.UNDERS: unders, Status.OVERS: overs}
        for reg, ctr in counters.items():
            m.d.sync += ctr.eq(ctr + inc[reg])
        with m.If(take):
            m.d.sync += rd_valid.eq(~p.write)
            with m.If(bad):
                m.d.sync += error.eq(1)
            with m.Elif(p.write):
                with m.If(ssel[Status.ERROR]):
                    m.d.sync += error.eq(0)
        # A header write lands one cycle after it is taken, from registers like a coefficient
        # word (``hdr_we``, one per header register, and ``wr_data``): the header registers'
        # clock enables are flip-flops, not ``take`` (no ``c.lut`` -> ``lock`` -> ``take`` path
        # reaches the clock enables of ~150 header flip-flops). Nothing reads the register
        # meanwhile: the next cfg beat is carried out two cycles after it at the earliest, and the
        # lanes read a bank's header for an instruction's elements only, after ``lock`` has held
        # back writes to it: the engine raises ``lock`` the cycle after it takes an instruction, and
        # the header's copies (``pre_q``, ``s1_mode``, ...) take the first element's header two
        # cycles after it at the earliest (the short pipeline; 13 cycles later still when deep).
        # ``hdr_we`` is ``take`` of a header write, written per bank: ``hsel`` is set only for a
        # header address of that bank, so such a beat is never ``bad`` and is ``blocked`` exactly
        # when ``lock`` is high and ``bank`` is that bank (no compare with the beat's bank bit).
        hdr_we = [{reg: Signal(name=f"hdr_we_b{bank}_{reg.name.lower()}") for reg in Hdr}
                  for bank in range(2)]
        for bank in range(2):
            lock_b = self.lock & (self.bank == bank)
            for reg, sig in hdr[bank].items():
                m.d.sync += hdr_we[bank][reg].eq(movable & ~lock_b & p.write &
                                                 hsel[bank][reg])
                with m.If(hdr_we[bank][reg]):
                    m.d.sync += sig.eq(wr_data)
        # A counter's clear without the bank-lock check and the bad-address test of ``take``:
        # a status write is never blocked, and a write to a counter is never bad, so no lock
        # check precedes a counter's clear.
        for reg, ctr in counters.items():
            with m.If(q_valid & ~(rd_valid & ~s1_free) & p.write & ssel[reg]):
                m.d.sync += ctr.eq(0)
        # The read result register loads whenever it is free (``rdata`` empty or taken), not
        # only with ``take``: its enable then does not wait for the bank-lock check, and the
        # value loaded in the cycle a read is taken is the read's.
        rd_next = Signal(32)
        terms = [Mux(desc_ok, Cat(desc_cfg_rp.data, Const(0, 16 - DESC_BASE_BITS),
                                  desc_k_cfg_rp.data), 0)]
        terms += [Mux(sig, hdr[bank][reg], 0) for bank in range(2)
                  for reg, sig in hsel[bank].items()]
        values = {Status.ERROR: error, Status.DEPTH: depth, **counters}
        terms += [Mux(sig, values[reg], 0) for reg, sig in ssel.items()]
        # The selects are one-hot (or all low for a bad address: 0), so an OR of the terms.
        acc_or = terms[0]
        for t in terms[1:]:
            acc_or = acc_or | t
        m.d.comb += rd_next.eq(Mux(p.write, 0, acc_or))
        with m.If(~rd_valid | s1_free):
            m.d.sync += [rd_sel.eq(Mux(coef_ok, word, 3)), rd_value.eq(rd_next)]

        # -- the active bank's header -------------------------------------------------------
        # Registered beside stages 1 and 2 (``LutHeader``): the stages' choices by mode, the
        # multipliers' operands, the binade and the descriptor address start from registers.
        m.submodules.header = hs = LutHeader()
        for bank in range(2):
            for reg, field in ((Hdr.MODE, "mode"), (Hdr.E_LO, "e_lo"), (Hdr.NB_NEG, "nb_neg"),
                               (Hdr.NB_POS, "nb_pos"), (Hdr.PRE, "pre"), (Hdr.POST, "post")):
                m.d.comb += getattr(hs.banks[bank], field).eq(hdr[bank][reg])
        m.d.comb += [hs.bank.eq(self.bank), hs.en.eq(self.en)]
        s1_mode, s1_sq = hs.s1_mode, hs.s1_sq
        s1_is = {r: getattr(hs.s1_is, r.name.lower()) for r in RangeMode if r != RangeMode.NONE}
        s1_exp2 = s1_is[RangeMode.EXP2]
        fin_scaled, fin_recip, fin_log = hs.fin_scaled, hs.fin_recip, hs.fin_log
        pre_q, post_q = hs.pre_q, hs.post_q
        s2_bank, s2_e_lo, s2_hi_neg, s2_hi_pos = hs.s2_bank, hs.s2_e_lo, hs.s2_hi_neg, hs.s2_hi_pos

        en = self.en
        PRE, MUL, ADD, IDX, DX, BIN = self._STAGES[self._deep]
        # count flag down the pipeline (stage 1, 2)
        s1_count = Signal()
        s2_count = Signal()
        with m.If(en):
            m.d.sync += [s1_count.eq(delay(m, en, self.count & ~self.bypass, PRE, "count")),
                         s2_count.eq(s1_count)]
        regions = []

        for lane in range(lanes):
            # A lane's registers hold data only (the engine tracks validity), so they have
            # no reset: the reset and the core's soft reset then do not fan out to them.
            def S(shape, name, init=0):
                return Signal(shape, name=f"l{lane}_{name}", init=init, reset_less=True)

            def sub(name, comp):
                m.submodules[f"l{lane}_{name}"] = comp
                return comp

            # -- stage 0 -> 1: w = z * PRE (or z when bypassed) -----------------------------
            def D(value, cycles, name, reset_less=True):
                return delay(m, en, value, cycles, f"l{lane}_{name}", reset_less=reset_less)

            z = self.z[lane]
            pre_mul = sub("pre_mul", FP32Multiplier(stages=PRE))
            m.d.comb += [pre_mul.a.eq(z), pre_mul.b.eq(pre_q), pre_mul.en.eq(en)]
            byp = D(self.bypass, PRE, "byp")
            s1_w = S(32, "s1_w")
            s1_byp = S(1, "s1_byp")
            w_pre = S(32, "w_pre")
            m.d.comb += w_pre.eq(Mux(byp, D(z, PRE, "z"), pre_mul.o))
            with m.If(en):
                m.d.sync += [s1_w.eq(w_pre), s1_byp.eq(byp)]
            # EXP2's range reduction starts before the s1_w register (its fixed-point shift and
            # negation; the pre-scale's output is a register when deep) and ends after it
            # (leading-zero count, normalising shift): no added latency.
            # It and the special tests below take the pre-scale's output itself, not ``w_pre``:
            # a bypassed element's ``v``, ``n`` and class are never used (it is special in
            # stage 2, with ``s1_w`` as its value), and for every other element the two are
            # equal, so ``s1_w`` is the register of ``pre_mul.o`` wherever it is read after
            # the cut, and the bypass multiplexer is not in front of the shift and negation
            # that lead to ``mag``.
            v_exp, n = exp2_reduce(m, pre_mul.o, f"l{lane}_x2",
                                   cut=lambda x, nm: s1_w if x is pre_mul.o else
                                   delay(m, en, x, 1, nm, reset_less=True))

            # The special results by mode (NaN, Inf, zero and range-limit inputs): the pre-scaled
            # value's class is registered with ``s1_w`` (beside EXP2's fixed-point shift), and
            # the choice by mode is made in stage 1 from those flags and the registered mode,
            # for the s2 registers: the multiplier's output -> 23-bit compare -> choice by mode
            # is not one cycle.
            E, M = pre_mul.o[23:31], pre_mul.o[0:23]
            e_ones, m_nz = E == 0xFF, M != 0
            nan = D(e_ones & m_nz, 1, "pre_nan")
            inf = D(e_ones & ~m_nz, 1, "pre_inf")
            zero = D(E == 0, 1, "pre_zero")
            big = D(ge_const(E, 134), 1, "pre_big")
            s = s1_w[31]
            special = S(1, "special")
            sval = S(32, "sval")
            # By mode, in order (the first condition that holds; NaN before all):
            #   EXP2   inf | big: s ? +0 : +Inf
            #   RECIP  zero: Inf with w's sign; inf: zero with w's sign
            #   RSQRT  zero: Inf with w's sign; inf & ~s: +0; s: NaN
            #   SQRT   zero: zero with w's sign; inf & ~s: +Inf; s: NaN
            #   LOG    zero: -Inf; inf & ~s: +Inf; s: NaN
            # Every such value is a sign, an exponent of all ones or zeros and NaN's quiet bit
            # (the rest zero), and ``sval`` matters only where ``special`` holds, so each of the
            # three is an AND-OR of the mode flags and the class flags, not a choice by the
            # mode's code and then by the conditions (``s1_mode`` -> ``s2_sval``).
            m_exp2, m_recip, m_rsqrt, m_sqrt, m_log = (s1_is[r] for r in (
                RangeMode.EXP2, RangeMode.RECIP, RangeMode.RSQRT, RangeMode.SQRT,
                RangeMode.LOG))
            m.d.comb += special.eq(nan | m_exp2 & (inf | big) | m_recip & (zero | inf) |
                                   s1_sq & (zero | inf | s))
            sv_quiet = nan | s1_sq & s & ~zero
            sv_ones = (nan | m_log | m_exp2 & ~s | m_recip & zero | m_rsqrt & (zero | s) |
                       m_sqrt & ~zero)
            sv_sign = ~nan & (m_recip & s | m_log & zero | (m_rsqrt | m_sqrt) & zero & s)
            m.d.comb += sval.eq(Cat(Const(0, 22), sv_quiet, sv_ones.replicate(8), sv_sign))

            # -- stage 1 -> 2: range reduction ----------------------------------------------
            w = s1_w
            s, E, M = w[31], w[23:31], w[0:23]
            e = S(signed(10), "e")
            m.d.comb += e.eq(E - 127)
            v = S(32, "v")
            v_oth = S(32, "v_oth")
            k = S(signed(10), "k")
            m.d.comb += [v_oth.eq(w), k.eq(0)]

            # EXP2: n = round half away from zero of w (|w| < 128), v = w - n (exact);
            # v_exp and n come from exp2_reduce above, split around s1_w. The other modes'
            # ``v`` (a few multiplexers of ``w``) is chosen beside it, and the two at the end.
            vexp = S(8, "vexp")
            m.d.comb += vexp.eq(127 + ~E[0])
            with m.Switch(s1_mode):
                with m.Case(int(RangeMode.EXP2)):
                    m.d.comb += k.eq(n)
                # (``-e`` and ``-(e >> 1)`` as one subtraction of ``E`` each, beside ``e``:
                # 127 - E and (128 - E) >> 1, not a negation after ``E - 127`` in front of
                # ``s2_k``)
                with m.Case(int(RangeMode.RECIP)):
                    m.d.comb += [v_oth.eq(Cat(M, Const(127, 8), Const(0, 1))),
                                 k.eq(Const(127, signed(10)) - E)]
                with m.Case(int(RangeMode.RSQRT)):
                    m.d.comb += [v_oth.eq(Cat(M, vexp, Const(0, 1))),
                                 k.eq((Const(128, signed(10)) - E) >> 1)]
                with m.Case(int(RangeMode.SQRT)):
                    m.d.comb += [v_oth.eq(Cat(M, vexp, Const(0, 1))), k.eq(e >> 1)]
                with m.Case(int(RangeMode.LOG)):
                    m.d.comb += v_oth.eq(Cat(M, Const(127, 8), Const(0, 1)))
            m.d.comb += v.eq(Mux(s1_exp2, v_exp, v_oth))
            s2_v = S(32, "s2_v")
            s2_k = S(signed(10), "s2_k")
            s2_e = S(signed(10), "s2_e")
            s2_flip = S(1, "s2_flip")
            s2_special = S(1, "s2_special")
            s2_sval = S(32, "s2_sval")
            with m.If(en):
                m.d.sync += [s2_v.eq(v), s2_k.eq(k), s2_e.eq(e),
                             s2_flip.eq(s & s1_is[RangeMode.RECIP]),
                             s2_special.eq(special | s1_byp),
                             s2_sval.eq(Mux(s1_byp, w, sval))]

            # -- stage 2 -> 3: segment, entry read, dx --------------------------------------
            v = s2_v
            vs, vE = v[31], v[23:31]
            center = vE < s2_e_lo
            b = S(9, "b")
            m.d.comb += b.eq(vE - s2_e_lo)
            # b >= nb, i.e. vE >= e_lo + nb (for ``~center``, where b = vE - e_lo >= 0), both
            # signs' comparisons beside each other and the sign choosing.
            beyond = S(1, "beyond")
            m.d.comb += beyond.eq(~center & Mux(vs, vE >= s2_hi_neg, vE >= s2_hi_pos))
            in_range = ~center & ~beyond
            # With BIN the binade's descriptor address and the segment flags are registered
            # before the descriptor read: the subtraction ``vE - e_lo`` is then not in front
            # of the LUT-RAM and the shift by its ``K`` (``s2_v`` -> binade -> descriptor ->
            # ``mtop``). The element's counted region is taken before it.
            # The segment's K is read before that register, from its own LUT-RAM (``desc_k``):
            # the two binades ``b[4]`` may choose, with the subtraction's low four bits and
            # the registered sign and bank, each registered, and ``b[4]``'s register chooses
            # between them. The LUT-RAM's row multiplexer (eight rows of 16 entries) is then
            # not in front of the shift by K (the descriptor's address register -> LUT-RAM ->
            # row multiplexer -> shift -> ``mtop``), and the carry into ``b[4]`` is not in
            # front of the LUT-RAM's output.
            desc_addr = D(Cat(b[0:5], vs, s2_bank), BIN, "desc_addr")
            k_half = []
            for half in range(2):
                krp = desc_k.read_port(domain="comb")
                m.d.comb += krp.addr.eq(Cat(b[0:4], half, vs, s2_bank))
                k_half.append(D(krp.data, BIN, f"kk{half}"))
            kk = Mux(desc_addr[4], k_half[1], k_half[0])
            v_b = D(v, BIN, "v_bin")
            center_b, beyond_b, in_range_b = (D(x, BIN, n_) for x, n_ in (
                (center, "center_bin"), (beyond, "beyond_bin"), (in_range, "in_range_bin")))
            drp = desc.read_port(domain="comb")
            lrp = desc_low.read_port(domain="comb")
            m.d.comb += [drp.addr.eq(desc_addr), lrp.addr.eq(desc_addr)]
            # With IDX the segment descriptor read (binade -> descriptor LUT-RAM: the base and
            # the mask of the mantissa bits below the segment start) and the segment's offset
            # ``mtop`` (the mantissa's top bits shifted by the K read above) are registered
            # first; the table index, the coefficient block RAM's address and dx are computed
            # from those registers, and the block RAM is read one cycle later.
            kinv = S(3, "kinv")
            m.d.comb += kinv.eq(~kk)                # 7 - kk
            mtop_p = S(7, "mtop_p")
            m.d.comb += mtop_p.eq(v_b[16:23] >> kinv)
            low7_p = S(7, "low7_p")
            m.d.comb += low7_p.eq(lrp.data)         # ~(0x7F << kinv), read beside kk
            mtop = D(mtop_p, IDX, "mtop")
            low7 = D(low7_p, IDX, "low7")
            base = D(drp.data, IDX, "base")
            center_d = D(center_b, IDX, "center")
            beyond_d = D(beyond_b, IDX, "beyond")
            in_range_d = D(in_range_b, IDX, "in_range")
            v_d = D(v_b, IDX, "v")
            vs_d = v_d[31]
            idx = S(abits, "idx")
            with m.If(center_d):
                m.d.comb += idx.eq(0)
            with m.Elif(beyond_d):
                m.d.comb += idx.eq(Mux(vs_d, ENTRY_UNDER, ENTRY_OVER))
            with m.Else():
                m.d.comb += idx.eq(base + mtop)
            low_bits = S(23, "low_bits")   # mantissa bits below the segment start
            m.d.comb += low_bits.eq(Cat(Const(0xFFFF, 16), low7))
            # With DX the leading-zero count of dx is registered before its normalising shift,
            # and the block RAM's output waits beside it in a register.
            dx = segment_offset(m, v_d, in_range_d, low_bits, f"l{lane}_dx",
                                cut=(lambda x, n: delay(m, en, x, DX, n, reset_less=True)) if DX
                                else None)
            row = coef_read(Cat(idx, self.bank), en, f"l{lane}_row")
            region = S(2, "region")    # 1 hit, 2 under, 3 over, 0 not counted
            # (A NaN ``v`` is not counted either, but needs no test of its own: ``v`` is NaN
            # only for a NaN ``w``, which is special (EXP2's ``v`` beyond its range limit is
            # not used; RECIP's, RSQRT's, SQRT's and LOG's have a finite exponent), so
            # ``s2_special`` covers it, and no 23-bit test of ``s2_v`` precedes ``region``.)
            m.d.comb += region.eq(Mux(s2_special | ~s2_count, 0,
                                      Mux(beyond, Mux(vs, 2, 3), 1)))
            # Registered before the counters' adders (one cycle late: a counter read or write
            # follows an instruction's last element by far more). This register resets: what
            # it holds is counted.
            regions.append(D(region, 1, "region", reset_less=False))
            s3_dx = S(32, "s3_dx")
            s3 = {}
            for name, sig in (("k", s2_k), ("e", s2_e), ("flip", s2_flip),
                              ("special", s2_special), ("sval", s2_sval)):
                s3[name] = S(sig.shape(), f"s3_{name}")
            with m.If(en):
                m.d.sync += s3_dx.eq(dx)
                m.d.sync += [s3[n_].eq(D(sig, BIN + IDX + DX, n_)) for n_, sig in
                             (("k", s2_k), ("e", s2_e), ("flip", s2_flip),
                              ("special", s2_special), ("sval", s2_sval))]

            # -- stage 3 -> 4: t2 = c1 + c2 * dx ------------------------------------------
            coefs = D(row, DX, "coefs")
            c0, c1, c2 = coefs[0:32], coefs[32:64], coefs[64:96]
            m1 = sub("m1", _Mulz(MUL))
            a1 = sub("a1", FP32Adder(stages=ADD))
            m.d.comb += [m1.c.eq(c2), m1.d.eq(s3_dx), m1.en.eq(en),
                         a1.a.eq(D(c1, MUL, "c1")), a1.b.eq(m1.o), a1.en.eq(en)]
            s4 = {n_: S(sig.shape(), f"s4_{n_}") for n_, sig in s3.items() if n_ != "e"}
            s4_t2 = S(32, "s4_t2")
            s4_c0 = S(32, "s4_c0")
            s4_dx = S(32, "s4_dx")
            with m.If(en):
                m.d.sync += [s4_t2.eq(a1.o), s4_c0.eq(D(c0, MUL + ADD, "c0")),
                             s4_dx.eq(D(s3_dx, MUL + ADD, "s3_dx"))]
                m.d.sync += [s4[n_].eq(D(s3[n_], MUL + ADD, f"s3_{n_}")) for n_ in s3
                             if n_ != "e"]
            # ``e`` is converted to FP32 before its s4 register, not after it in front of the
            # log term's multiplier; when deep, its sign and magnitude are registered one cycle
            # before (in place of ``e``'s last delay register), so that the negation and the
            # normalisation are not in one cycle (``s3_e_d7`` -> ``s4_ef``).
            s4_ef = S(32, "s4_ef")
            wait = MUL + ADD
            with m.If(en):
                m.d.sync += s4_ef.eq(int_to_f32(
                    m, D(s3["e"], max(wait - 1, 0), "s3_e"), 9,
                    cut=(lambda x, nm: D(x, 1, f"ef_{nm}")) if wait else None))

            # -- stage 4 -> 5: y = c0 + t2 * dx; log term -----------------------------------
            m2 = sub("m2", _Mulz(MUL))
            a2 = sub("a2", FP32Adder(stages=ADD))
            m.d.comb += [m2.c.eq(s4_t2), m2.d.eq(s4_dx), m2.en.eq(en),
                         a2.a.eq(D(s4_c0, MUL, "s4_c0")), a2.b.eq(m2.o), a2.en.eq(en)]
            # e * POST: e is in [-127, 128], so int_to_f32 (9 bits) leaves the low 15 bits of
            # the significand zero and the product is 9 x 24 bits: 9 x 18 in one MULT18X18D,
            # 9 x 6 in logic, not a nine-row adder tree between two registers.
            e_f = s4_ef
            lmul = sub("lmul", LaneMultiplier(a_bits=9, logic_bits=6, stages=MUL))
            m.d.comb += [lmul.a.eq(e_f), lmul.b.eq(post_q), lmul.en.eq(en)]
            s5 = {n_: S(sig.shape(), f"s5_{n_}") for n_, sig in s4.items()}
            s5_y = S(32, "s5_y")
            s5_lt = S(32, "s5_lt")
            with m.If(en):
                m.d.sync += [s5_y.eq(a2.o), s5_lt.eq(D(lmul.o, ADD, "lt"))]
                m.d.sync += [s5[n_].eq(D(s4[n_], MUL + ADD, f"s4_{n_}")) for n_ in s5]

            # -- stage 5 -> 6: finish -------------------------------------------------------
            ladd = sub("ladd", FP32Adder(stages=ADD))
            m.d.comb += [ladd.a.eq(s5_y), ladd.b.eq(s5_lt), ladd.en.eq(en)]
            scaled = ldexp_ftz(m, s5_y, s5["k"], en=en, cycles=ADD, name=f"l{lane}_scaled")
            y = D(s5_y, ADD, "s5_y")
            flip = D(s5["flip"], ADD, "s5_flip")
            fin = S(32, "fin")
            m.d.comb += fin.eq(Mux(fin_scaled, scaled ^ Cat(Const(0, 31), flip & fin_recip),
                                   Mux(fin_log, ladd.o, y)))
            with m.If(en):
                m.d.sync += self.y[lane].eq(Mux(D(s5["special"], ADD, "s5_special"),
                                                D(s5["sval"], ADD, "s5_sval"), fin))

        # -- counters ---------------------------------------------------------------------
        with m.If(en):
            for code, reg in ((1, Status.HITS), (2, Status.UNDERS), (3, Status.OVERS)):
                m.d.comb += inc[reg].eq(sum((r == code).as_unsigned() for r in regions))
        return m
