"""The vector engine's output stage: the result FIFO, the rounding unit and the output skid
buffer."""

from amaranth.hdl import Module
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.pipeline_register import PipelineRegister
from rtl.bus.skid import SkidBuffer
from rtl.round.rounding_unit import RoundingUnit
from rtl.vector.lut import check_lanes, check_units
from rtl.vector.serial_round import SerialRounding
from sim.config import check_bool, check_int, check_pow2
from sim.rounding import MAX_N_RAND

__all__ = ["VectorOutput", "beat_layout"]


def beat_layout(lanes):
    """A result FIFO entry: the rounding unit's input beat (``data``: ``lanes`` FP32 words,
    ``fmt``: the output format, ``mode``: the rounding mode)."""
    return data.StructLayout({"data": data.ArrayLayout(32, lanes), "fmt": 3, "mode": 2})


class VectorOutput(wiring.Component):
    """Results of :class:`rtl.vector.engine.VectorEngine` from its free-running pipeline to
    ``o``: a FIFO of ``depth`` entries, a register, the rounding unit
    (``rtl.round.rounding_unit.RoundingUnit``, its input registered) and a skid buffer.

    The write side has no ``ready``: the user writes only when it holds a credit for the
    entry (``ret`` returns one when a beat leaves the FIFO). The register after the FIFO keeps
    the FIFO's block RAM output out of the rounding unit's generator enables (the beat's
    rounding mode decides whether they advance); the skid buffer keeps ``o.ready`` (a
    register to the consumer) out of the rounding unit. A beat keeps the format and rounding
    mode it was written with.

    With ``units`` below ``lanes`` the rounding unit is a
    :class:`rtl.vector.serial_round.SerialRounding` with ``units`` encoders, which encodes a
    beat in ``lanes // units`` sub-beats: one beat leaves every ``lanes // units`` cycles, the
    rate at which the compact engine's elements come. A register after the FIFO keeps the
    block RAM's output out of its sub-beat multiplexer and its generators' clock enables (an
    SR beat's last sub-beat pops a random word).

    Latency: a beat written with ``w_en`` is valid on ``o`` ``latency`` cycles later when
    nothing waits (FIFO 2, the register 1, the rounding unit ``2 + encoder_stages``; with
    fewer ``units``: FIFO 2, the register 1, the serial unit ``lanes // units + 1 +
    encoder_stages``).
    Back-pressure on ``o`` fills the skid buffer, the rounding unit, the register and the
    FIFO in turn.

    Parameters
    ----------
    lanes : int
        Words per beat (1..128).
    depth : int
        FIFO entries (a power of two, 1..4096).
    n_rand : int
        Random bits per SR decision.
    deep : bool
        The rounding unit's encoder pipelined (3 stages) or not.
    units : int or None
        Encoders (a divisor of ``lanes``; ``None``: one per lane).

    Members
    -------
    w_en : In(1)
        Write ``w_data`` into the FIFO (never while it is full).
    w_data : In(beat_layout(lanes))
    ret : Out(1)
        A beat leaves the FIFO this cycle.
    seed : In(32), seed_load : In(1)
        Re-seed the rounding unit's generators (a pulse).
    o : Out(stream.Signature(ArrayLayout(32, lanes)))
        Encoded results, low-aligned.
    """

    def __init__(self, lanes, depth, n_rand=16, *, deep=True, units=None):
        self._lanes = check_lanes(lanes)
        self._units = check_units(units, lanes)
        self._depth = check_pow2("depth", depth, 1, 4096)
        self._n_rand = check_int("n_rand", n_rand, 1, MAX_N_RAND)
        self._deep = check_bool("deep", deep)
        super().__init__({
            "w_en": In(1),
            "w_data": In(beat_layout(lanes)),
            "ret": Out(1),
            "seed": In(32),
            "seed_load": In(1),
            "o": Out(stream.Signature(data.ArrayLayout(32, lanes))),
        })

    @staticmethod
    def encoder_stages(deep):
        return 3 if deep else 0

    @staticmethod
    def latency_of(deep, subs=1):
        """:attr:`latency` of an output stage whose beats are encoded in ``subs`` sub-beats."""
        if subs == 1:
            return 2 + 1 + 2 + VectorOutput.encoder_stages(deep)
        return 2 + 1 + subs + 1 + VectorOutput.encoder_stages(deep)

    @property
    def latency(self):
        return self.latency_of(self._deep, self._lanes // self._units)

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        if self._units < lanes:
            return self._serial(m)
        # The rounding unit registers its input (stages=2): the FIFO's data is a block RAM's
        # output, which reaches a register, not the encoder's first stage.
        m.submodules.ru = ru = RoundingUnit(lanes=lanes, n_rand=self._n_rand, stages=2,
                                            encoder_stages=self.encoder_stages(self._deep))
        beat = ru.i.payload.shape()
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(width=beat.size, depth=self._depth)
        m.submodules.ru_in = ru_in = PipelineRegister(beat)
        m.submodules.o_skid = skid = SkidBuffer(data.ArrayLayout(32, lanes))
        m.d.comb += [ofifo.w_en.eq(self.w_en), ofifo.w_data.eq(self.w_data),
                     self.ret.eq(ofifo.r_en & ofifo.r_rdy),
                     ru.seed.eq(self.seed), ru.seed_load.eq(self.seed_load),
                     ru_in.i.valid.eq(ofifo.r_rdy), ofifo.r_en.eq(ru_in.i.ready),
                     ru_in.i.payload.eq(ofifo.r_data),
                     ru.i.valid.eq(ru_in.o.valid), ru_in.o.ready.eq(ru.i.ready),
                     ru.i.payload.eq(ru_in.o.payload),
                     skid.i.valid.eq(ru.o.valid), skid.i.payload.eq(ru.o.payload.data),
                     ru.o.ready.eq(skid.i.ready)]
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m

    def _serial(self, m):
        lanes = self._lanes
        m.submodules.ru = ru = SerialRounding(lanes, self._units, self._n_rand,
                                              self.encoder_stages(self._deep))
        beat = ru.i.payload.shape()
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(width=beat.size, depth=self._depth)
        m.submodules.ru_in = ru_in = PipelineRegister(beat)
        m.submodules.o_skid = skid = SkidBuffer(data.ArrayLayout(32, lanes))
        m.d.comb += [ofifo.w_en.eq(self.w_en), ofifo.w_data.eq(self.w_data),
                     self.ret.eq(ofifo.r_en & ofifo.r_rdy),
                     ru.seed.eq(self.seed), ru.seed_load.eq(self.seed_load),
                     ru_in.i.valid.eq(ofifo.r_rdy), ofifo.r_en.eq(ru_in.i.ready),
                     ru_in.i.payload.eq(ofifo.r_data),
                     ru.i.valid.eq(ru_in.o.valid), ru_in.o.ready.eq(ru.i.ready),
                     ru.i.payload.eq(ru_in.o.payload),
                     skid.i.valid.eq(ru.o.valid), skid.i.payload.eq(ru.o.payload.data),
                     ru.o.ready.eq(skid.i.ready)]
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m
