"""The rounding unit: ``lanes`` FP32-to-narrow encoders with per-lane stochastic rounding.

The golden model is ``sim.rounding.RoundingUnitModel``; the algorithm and the generator are
described in ``docs/rounding.md``.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import check_stages, delay
from rtl.round.encoder import FPEncoder
from rtl.round.prng import MAX_LANES, LanePrngs
from sim.config import check_int
from sim.dtypes import FORMAT_BITS, RoundMode
from sim.rounding import MAX_N_RAND

__all__ = ["RoundingUnit"]


def rounding_ports(lanes):
    """The ports of a rounding unit of ``lanes`` lanes: the ``i`` stream (FP32 words, format,
    mode), the ``o`` stream (encoded words, low-aligned), ``seed`` and ``seed_load``."""
    return {
        "i": In(stream.Signature(data.StructLayout({
            "data": data.ArrayLayout(32, lanes),
            "fmt": FORMAT_BITS,
            "mode": 2,
        }))),
        "o": Out(stream.Signature(data.StructLayout({
            "data": data.ArrayLayout(32, lanes),
        }))),
        "seed": In(32),
        "seed_load": In(1),
    }


def random_word_buffer(m, prngs, n_rand, pop, clear):
    """Add to ``m`` the two-entry buffer of random words between a unit's generators and its
    encoders, and return ``(head, has_word)``.

    Every lane holds up to two ``n_rand``-bit words (``cnt`` words held, the same for every
    lane), the top bits of the generators' outputs in the order the generators give them.
    The generators ``prngs`` (a :class:`~rtl.round.prng.LanePrngs`) advance on ``fill``, a
    term of registers only (``~busy & cnt < 2``), so an SR beat's ``pop``, which comes late
    (after the output's back-pressure), reaches the buffer instead of the generators' clock
    enables.

    The buffer does not shift: each lane has two word registers, ``rb0`` and ``rb1``, and ``h``
    says which one is the head. A fill writes the word behind the words held, at position
    ``h ^ cnt[0]`` (``cnt`` is 0 or 1 when it fills), so the word registers' clock enables are
    ``fill`` and the position, terms of flip-flops only; a pop only toggles ``h`` and changes
    ``cnt``, so the back-pressure does not reach the clock enables of the head's bits (as a
    shifting head would). ``h`` need not be reset by ``clear``: the positions are relative
    to it.

    Parameters
    ----------
    m : Module
        The module the registers are added to.
    prngs : LanePrngs
        The lanes' generators (``out``, ``busy``, ``advance``); this drives ``advance``.
    n_rand : int
        Bits per random word.
    pop : Signal
        The head is taken at the end of this cycle (an SR beat accepted). Only with
        ``has_word``.
    clear : Signal
        The generators are re-seeded: the buffer empties at the end of this cycle (a beat
        accepted in the same cycle still takes the old head).

    Returns
    -------
    head : list of Signal
        Per lane, the word an SR beat accepted now takes.
    has_word : Signal
        ``cnt != 0`` as a flip-flop of its own: set by the first fill after reset or
        ``clear``, cleared only by ``clear`` (from one word, a pop always comes with a fill).
        It also implies ``~busy`` (``cnt`` is 0 from the seed load until the first fill).
        It is 0 for one cycle after reset and after ``clear``.
    """
    lanes = len(prngs.out)
    cnt = Signal(range(3))
    has_word = Signal()
    fill = Signal()
    h = Signal()                  # the head is rb1 (1) or rb0 (0)
    wpos = Signal()               # where a fill writes
    rb = [[Signal(n_rand, name=f"rb{k}_{j}") for j in range(lanes)] for k in range(2)]
    head = [Signal(n_rand, name=f"head{j}") for j in range(lanes)]
    new = [prngs.out[j][32 - n_rand:] for j in range(lanes)]
    m.d.comb += [
        fill.eq(~prngs.busy & (cnt != 2)),
        prngs.advance.eq(fill.replicate(lanes)),
        wpos.eq(h ^ cnt[0]),
    ]
    m.d.comb += [hd.eq(Mux(h, r1, r0)) for hd, r0, r1 in zip(head, rb[0], rb[1])]
    for k in range(2):
        with m.If(fill & (wpos == k)):
            m.d.sync += [r.eq(w) for r, w in zip(rb[k], new)]
    with m.If(pop):
        m.d.sync += h.eq(~h)
    # (From one word a pop comes with a fill: ``cnt`` stays 1.)
    with m.Switch(cnt):
        with m.Case(0):
            with m.If(fill):
                m.d.sync += [cnt.eq(1), has_word.eq(1)]
        with m.Case(1):
            with m.If(~pop):
                m.d.sync += cnt.eq(2)
        with m.Case(2):
            with m.If(pop):
                m.d.sync += cnt.eq(1)
    with m.If(clear):
        m.d.sync += [cnt.eq(0), has_word.eq(0)]
    return head, has_word


class RoundingUnit(wiring.Component):
    """Convert a vector of FP32 values to a narrow format with RNE, RTZ or SR.

    Parameters
    ----------
    lanes : int
        Number of lanes (positive).
    n_rand : int
        Random bits per SR decision (1..32): the top ``n_rand`` bits of the lane's XORWOW word.
    stages : int
        Pipeline registers (0..8). 0: combinational from ``i`` to ``o`` (``i.ready`` follows
        ``o.ready`` once the random-word buffer has filled). 1: one output register. 2 or
        more: an input register before the encoders and an output register after them, then
        ``stages - 2`` delay registers.
    encoder_stages : int
        Pipeline registers inside each encoder (``FPEncoder(stages=...)``, 0..3; needs
        ``stages >= 1``). Latency ``stages + encoder_stages`` cycles.

    Members
    -------
    i : In(stream.Signature({data: ArrayLayout(32, lanes), fmt: 3, mode: 2}))
        FP32 patterns, the target ``Format`` and the ``RoundMode`` of the beat.
    o : Out(stream.Signature({data: ArrayLayout(32, lanes)}))
        Encoded values, low-aligned. Latency ``stages + encoder_stages`` cycles, one beat per
        cycle.
    seed : In(32)
    seed_load : In(1)
        A pulse re-seeds every lane from ``seed`` (``sim.prng.lane_states``); this takes
        ``6 * lanes + 6`` cycles (``LanePrngs.seed_cycles``), then one more to fill the lanes'
        random-word buffer, during which ``i.ready`` is 0 (so is it in the first cycle after
        reset). After reset the lanes hold the streams of seed 0.

        When the load takes effect: every beat accepted on ``i`` up to and including the cycle
        of the pulse, and every beat offered on ``o`` in that cycle, uses the old streams;
        the beats after them use the new ones. With ``stages >= 1`` a beat on ``o`` was
        accepted earlier, so the load takes effect at the pulse. With ``stages = 0`` the beat
        on ``o`` is the beat on ``i``: a pulse while ``o`` waits for ``ready`` is held (with
        its ``seed``) and takes effect in the cycle that beat is taken, so the beat keeps its
        payload; a further pulse before then replaces the held seed.

    A lane draws one random word per element only for beats in mode SR, so the results depend
    only on the seed and the sequence of SR beats. Back-pressure: the pipeline advances when
    ``o`` is empty or accepted (``~o.valid | o.ready``); nothing is lost or duplicated.
    """

    def __init__(self, lanes=4, n_rand=16, stages=2, encoder_stages=0):
        check_int("lanes", lanes, 1, MAX_LANES)
        check_int("n_rand", n_rand, 1, MAX_N_RAND)
        check_int("stages", stages, 0, 8)
        check_stages(encoder_stages, FPEncoder.MAX_STAGES, "encoder_stages")
        if encoder_stages and not stages:
            raise ValueError("encoder_stages must be 0 when stages is 0 (a combinational unit), "
                             f"not {encoder_stages}")
        self._encoder_stages = encoder_stages
        self._lanes = lanes
        self._n_rand = n_rand
        self._stages = stages
        super().__init__(rounding_ports(lanes))

    @property
    def lanes(self):
        return self._lanes

    @property
    def n_rand(self):
        return self._n_rand

    @property
    def stages(self):
        return self._stages

    @property
    def encoder_stages(self):
        return self._encoder_stages

    @property
    def latency(self):
        """Cycles from a beat accepted on ``i`` to its beat valid on ``o``."""
        return self._stages + self._encoder_stages

    def elaborate(self, platform):
        m = Module()
        lanes, n, stages = self._lanes, self._n_rand, self._stages
        prngs = m.submodules.prngs = LanePrngs(lanes)
        # ``load``: the re-seed takes effect (at the end of this cycle).
        if stages == 0:
            # A combinational unit offers ``o`` only while a random word is held, and a load
            # empties the buffer: a load while ``o`` waits for ``ready`` waits in ``load_held``
            # (the seed in ``held_seed``) until that beat is taken, so the beat is not withdrawn.
            o_wait = Signal()
            load = Signal()
            load_held = Signal()
            held_seed = Signal(32)
            m.d.comb += [
                o_wait.eq(self.o.valid & ~self.o.ready),
                load.eq((self.seed_load | load_held) & ~o_wait),
                prngs.seed.eq(Mux(self.seed_load, self.seed, held_seed)),
            ]
            with m.If(o_wait):
                with m.If(self.seed_load):
                    m.d.sync += [load_held.eq(1), held_seed.eq(self.seed)]
            with m.Else():
                m.d.sync += load_held.eq(0)
        else:
            load = self.seed_load
            m.d.comb += prngs.seed.eq(self.seed)
        m.d.comb += prngs.seed_load.eq(load)

        en = Signal()                 # the whole pipeline moves
        accept = Signal()
        pop = Signal()                # an SR beat takes the head
        head, has_word = random_word_buffer(m, prngs, n, pop, load)
        m.d.comb += [
            # stages=0 has no registers: the input is ready exactly when the output is.
            en.eq(self.o.ready if stages == 0 else (~self.o.valid | self.o.ready)),
            self.i.ready.eq(en & has_word),
            accept.eq(self.i.valid & self.i.ready),
            pop.eq(accept & (self.i.p.mode == RoundMode.SR)),
        ]

        # Stage 0: the beat as accepted, with its random bits.
        s0_data = self.i.p.data
        s0_fmt = self.i.p.fmt
        s0_mode = self.i.p.mode
        s0_rand = head
        s0_valid = self.i.valid & has_word

        if stages >= 2:
            s1_data = Signal.like(self.i.p.data, name="s1_data")
            s1_fmt = Signal(FORMAT_BITS, name="s1_fmt")
            s1_mode = Signal(2, name="s1_mode")
            s1_rand = [Signal(n, name=f"s1_rand{j}") for j in range(lanes)]
            s1_valid = Signal(name="s1_valid")
            with m.If(en):
                m.d.sync += [s1_data.eq(s0_data), s1_fmt.eq(s0_fmt), s1_mode.eq(s0_mode),
                             s1_valid.eq(accept)]
                m.d.sync += [r1.eq(r0) for r1, r0 in zip(s1_rand, s0_rand)]
            e_data, e_fmt, e_mode, e_rand, e_valid = s1_data, s1_fmt, s1_mode, s1_rand, s1_valid
        else:
            e_data, e_fmt, e_mode, e_rand, e_valid = s0_data, s0_fmt, s0_mode, s0_rand, s0_valid

        enc_out = Signal(data.ArrayLayout(32, lanes))
        for j in range(lanes):
            enc = m.submodules[f"enc{j}"] = FPEncoder(n, self._encoder_stages)
            m.d.comb += [enc.a.eq(e_data[j]), enc.fmt.eq(e_fmt), enc.mode.eq(e_mode),
                         enc.rand.eq(e_rand[j]), enc.en.eq(en), enc_out[j].eq(enc.o)]

        if stages == 0:
            m.d.comb += [self.o.p.data.eq(enc_out), self.o.valid.eq(e_valid)]
            return m

        # Output register(s) after the encoders.
        data_q = enc_out
        valid_q = delay(m, en, e_valid if stages >= 2 else accept, self._encoder_stages,
                        "enc_valid")
        for k in range(stages - 1 if stages >= 2 else 1):
            d_reg = Signal(data.ArrayLayout(32, lanes), name=f"s{k + 2 if stages >= 2 else 1}_o")
            v_reg = Signal(name=f"s{k + 2 if stages >= 2 else 1}_valid")
            with m.If(en):
                m.d.sync += [d_reg.eq(data_q), v_reg.eq(valid_q)]
            data_q, valid_q = d_reg, v_reg
        m.d.comb += [self.o.p.data.eq(data_q), self.o.valid.eq(valid_q)]
        return m
