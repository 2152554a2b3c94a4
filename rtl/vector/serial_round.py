"""The compact vector engine's rounding unit: ``lanes`` generators, ``units`` encoders."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring

from rtl.arith.common import check_stages, delay
from rtl.arith.dsp import registered_product
from rtl.arith.fp32_mul import sum_shifted
from rtl.round.encoder import FPEncoder
from rtl.round.prng import LanePrngs
from rtl.round.rounding_unit import random_word_buffer, rounding_ports
from rtl.vector.lut import check_lanes, check_units
from sim.config import check_int
from sim.dtypes import FORMAT_BITS, RoundMode
from sim.rounding import MAX_N_RAND

__all__ = ["SerialRounding", "CompactSeedPrngs"]


class CompactSeedPrngs(LanePrngs):
    """``rtl.round.prng.LanePrngs`` whose seeding hash takes two MULT18X18D instead of six:
    same words, same cycles (``seed_cycles``).

    Each ``(a * const) mod 2**32`` of the MurmurHash3 finaliser keeps its low partial product
    ``a_lo * c_lo`` in a MULT18X18D (operand and output registers inside the block, as in
    ``LanePrngs``); the two cross terms, of which only the low 16 bits count
    (``a_lo * c_hi + a_hi * c_lo`` mod 2**16), are sums of shifted copies of ``a``'s halves,
    one per set bit of the constant's halves, in carry chains: in stage 1 four groups of
    them summed from the operand, in stage 2 the four group sums, in stage 3 the result as in
    ``LanePrngs``. The seeder runs only while re-seeding; its words are checked against
    ``LanePrngs`` through the SR streams of :class:`SerialRounding`.
    """

    #: Groups of cross terms summed in stage 1 (at most five terms each).
    CROSS_GROUPS = 4

    @staticmethod
    def _mul_lo32(m, platform, name, a, const):
        a_lo, a_hi = a[:16], a[16:32]
        c_lo, c_hi = const & 0xFFFF, const >> 16
        p_ll = registered_product(m, platform, a_lo, Const(c_lo, 16), Const(1),
                                  f"{name}_p_ll", out_reg=True)
        terms = ([(a_lo, i) for i in range(16) if c_hi >> i & 1] +
                 [(a_hi, i) for i in range(16) if c_lo >> i & 1])
        groups = []
        k = CompactSeedPrngs.CROSS_GROUPS
        for g in range(k):
            reg = Signal(16, name=f"{name}_x{g}", reset_less=True)
            m.d.sync += reg.eq(sum_shifted(m, terms[g::k], 16, f"{name}_xs{g}"))
            groups.append((reg, 0))
        cross = Signal(16, name=f"{name}_x", reset_less=True)
        m.d.sync += cross.eq(sum_shifted(m, groups, 16, f"{name}_xsum"))
        res = Signal(32, name=name)
        m.d.sync += res.eq(p_ll + (cross << 16))
        return res


class SerialRounding(wiring.Component):
    """``rtl.round.rounding_unit.RoundingUnit(lanes, n_rand, stages=2, encoder_stages)`` with
    ``units`` encoders instead of one per lane: a beat is encoded in ``lanes // units``
    sub-beats in consecutive cycles (sub-beat ``j``: lanes ``j * units .. j * units + units -
    1``) and leaves whole. Same streams, same results (``sim.rounding.RoundingUnitModel``).

    Each lane keeps its own XORWOW generator (:class:`CompactSeedPrngs`) and its two-word
    buffer, exactly as in ``RoundingUnit``; an SR beat takes the head word of every lane, each
    lane's in its sub-beat, and the heads move on with the beat's last sub-beat, so the
    streams are those of a unit per lane. A ``seed_load`` while a beat is partly encoded gives
    its remaining lanes words of the new seed (a user re-seeds while no beat waits on ``i``).

    ``i`` is taken with the beat's last sub-beat, so its payload must hold until then, as the
    stream rules require; it may come straight from a FIFO's read port (no register in front:
    the sub-beat multiplexer is followed by the encoders' input register).

    Latency: a beat offered on ``i`` while the unit is idle is valid on ``o`` ``lanes // units
    + 1 + encoder_stages`` cycles later (its sub-beats, their input register, the encoders,
    the output register). Throughput: one beat every ``lanes // units`` cycles. While ``o``
    is stalled every register holds.

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    units : int
        Encoders (a divisor of ``lanes``).
    n_rand : int
        Random bits per SR decision (1..32).
    encoder_stages : int
        Pipeline registers inside each encoder (0..3).

    Members
    -------
    i : In(stream.Signature({data: ArrayLayout(32, lanes), fmt: 3, mode: 2}))
        FP32 patterns, the target ``Format`` and the ``RoundMode`` of the beat.
    o : Out(stream.Signature({data: ArrayLayout(32, lanes)}))
        Encoded values, low-aligned.
    seed : In(32), seed_load : In(1)
        Re-seed every lane's generator (``sim.prng.lane_states``), as ``RoundingUnit``.
    """

    def __init__(self, lanes, units, n_rand=16, encoder_stages=3):
        self._lanes = check_lanes(lanes)
        self._units = check_units(units, lanes)
        self._n_rand = check_int("n_rand", n_rand, 1, MAX_N_RAND)
        self._encoder_stages = check_stages(encoder_stages, FPEncoder.MAX_STAGES,
                                            "encoder_stages")
        super().__init__(rounding_ports(lanes))

    @property
    def subs(self):
        """Sub-beats per beat (``lanes // units``)."""
        return self._lanes // self._units

    @property
    def latency(self):
        """Cycles from a beat offered on ``i`` (the unit idle) to its beat valid on ``o``."""
        return self.subs + 1 + self._encoder_stages

    def elaborate(self, platform):
        m = Module()
        lanes, units, n, G = self._lanes, self._units, self._n_rand, self.subs
        prngs = m.submodules.prngs = CompactSeedPrngs(lanes)
        m.d.comb += [prngs.seed.eq(self.seed), prngs.seed_load.eq(self.seed_load)]

        en = Signal()                 # the whole pipeline moves
        pop = Signal()                # an SR beat's last sub-beat takes the head
        head, has_word = random_word_buffer(m, prngs, n, pop, self.seed_load)
        m.d.comb += en.eq(~self.o.valid | self.o.ready)

        # Sub-beats: ``sub`` counts the sub-beats of the beat on ``i`` already encoded.
        sub = Signal(range(G), name="sub")
        last = sub == G - 1
        step = Signal()               # a sub-beat enters the encoders' input register
        m.d.comb += [
            step.eq(en & self.i.valid & has_word),
            self.i.ready.eq(step & last),
            pop.eq(step & last & (self.i.p.mode == RoundMode.SR)),
        ]
        if G > 1:
            with m.If(step):
                m.d.sync += sub.eq(Mux(last, 0, sub + 1))

        def group(words, width):
            """The words of the lanes of sub-beat ``sub``, one per unit."""
            if G == 1:
                return list(words)
            return [Cat(*(words[j * units + u] for j in range(G))).word_select(sub, width)
                    for u in range(units)]

        s1_data = [Signal(32, name=f"s1_data{u}") for u in range(units)]
        s1_rand = [Signal(n, name=f"s1_rand{u}") for u in range(units)]
        s1_fmt = Signal(FORMAT_BITS, name="s1_fmt")
        s1_mode = Signal(2, name="s1_mode")
        s1_valid = Signal(name="s1_valid")
        s1_sub = Signal(range(G), name="s1_sub")
        with m.If(en):
            m.d.sync += [s1_fmt.eq(self.i.p.fmt), s1_mode.eq(self.i.p.mode),
                         s1_valid.eq(step), s1_sub.eq(sub)]
            m.d.sync += [r.eq(v) for r, v in zip(s1_data, group(self.i.p.data, 32))]
            m.d.sync += [r.eq(v) for r, v in zip(s1_rand, group(head, n))]

        enc_out = []
        for u in range(units):
            enc = m.submodules[f"enc{u}"] = FPEncoder(n, self._encoder_stages)
            m.d.comb += [enc.a.eq(s1_data[u]), enc.fmt.eq(s1_fmt), enc.mode.eq(s1_mode),
                         enc.rand.eq(s1_rand[u]), enc.en.eq(en)]
            enc_out.append(enc.o)
        e_valid = delay(m, en, s1_valid, self._encoder_stages, "enc_valid")
        e_sub = delay(m, en, s1_sub, self._encoder_stages, "enc_sub", reset_less=True)

        # The first ``G - 1`` sub-beats wait in ``col``; the last completes the output beat.
        col = [[Signal(32, name=f"col{j}_{u}") for u in range(units)] for j in range(G - 1)]
        for j in range(G - 1):
            with m.If(en & e_valid & (e_sub == j)):
                m.d.sync += [r.eq(v) for r, v in zip(col[j], enc_out)]
        o_data = Signal(data.ArrayLayout(32, lanes), name="o_data")
        o_valid = Signal(name="o_valid")
        e_last = e_sub == G - 1
        with m.If(en):
            m.d.sync += o_valid.eq(e_valid & e_last)
            with m.If(e_valid & e_last):
                m.d.sync += o_data.eq(Cat(*(w for row in col for w in row), *enc_out))
        m.d.comb += [self.o.p.data.eq(o_data), self.o.valid.eq(o_valid)]
        return m
