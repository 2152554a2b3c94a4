"""One engine's record queue in the sequencer, with the semaphores its completions increment."""

from amaranth.hdl import Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.config import check_int
from sim.isa import Engine

from .layouts import record_layout

__all__ = ["EngineQueue"]


class _SlotFIFO(Elaboratable):
    """A first-word-fall-through FIFO of ``depth`` words of ``width`` bits whose storage is
    written at the write pointer in every cycle it is not full, whether or not ``w_en`` is
    high: that slot holds no queued word, and a write (``w_en``) only advances the pointer.
    So ``w_en`` reaches the pointers' and the level's registers, not the write enables of the
    storage (a record is a few hundred bits), and ``full`` comes from the level register.

    The ports are those of ``amaranth.lib.fifo.SyncFIFO`` that the queue uses, cycle for
    cycle, but for ``w_en``, which must be low while the FIFO is full (no ``w_rdy``): ``w_data``,
    ``w_en``, ``r_rdy``, ``r_data``, ``r_en`` (taken only while ``r_rdy``), ``level``.
    """

    def __init__(self, *, width, depth):
        self.width, self.depth = width, depth
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.r_rdy = Signal()
        self.r_data = Signal(width)
        self.r_en = Signal()
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = mem = Memory(shape=self.width, depth=self.depth, init=[])
        w_ptr, r_ptr = Signal(range(self.depth)), Signal(range(self.depth))
        wp, rp = mem.write_port(), mem.read_port(domain="comb")
        pop = Signal()
        m.d.comb += [wp.addr.eq(w_ptr), wp.data.eq(self.w_data),
                     wp.en.eq(self.level != self.depth),
                     rp.addr.eq(r_ptr), self.r_data.eq(rp.data),
                     self.r_rdy.eq(self.level != 0), pop.eq(self.r_en & self.r_rdy)]

        def step(ptr):
            return Mux(ptr == self.depth - 1, 0, ptr + 1)

        with m.If(self.w_en):
            m.d.sync += w_ptr.eq(step(w_ptr))
        with m.If(pop):
            m.d.sync += r_ptr.eq(step(r_ptr))
        m.d.sync += self.level.eq(self.level + self.w_en - pop)
        return m


class EngineQueue(wiring.Component):
    """The records an engine has been sent and not yet taken, and those it has not completed.

    A push (``push``, only while ``can_emit``) writes ``record`` into the record FIFO, which
    the engine reads through ``o``, and the record's semaphore (one-hot, zero without
    ``sem_en``) into the completion FIFO, whose head ``sem_head`` is the semaphore the engine's
    next ``done`` increments. ``outstanding`` is high while a pushed record is not completed.

    ``can_emit`` (neither FIFO full in the next cycle) and ``outstanding`` come from
    flip-flops loaded from the FIFOs' next levels (lookahead), so that the sequencer's stall
    cone starts from flip-flops, not from level compares. Both FIFOs are written in the same
    cycle; a push and a ``done`` in one cycle both take effect. Their storage takes ``record``
    at the write pointer in every cycle it has room and a push only advances the pointer
    (:class:`_SlotFIFO`), so the push, the end of the sequencer's issue logic, drives a few
    pointer and level flip-flops, not the write enables of the record storage.

    Parameters
    ----------
    engine : Engine
        The engine whose record layout (``sim.isa.RECORDS``) the queue carries.
    depth : int
        Record FIFO entries, 1 to 16.
    max_outstanding : int
        Records pushed and not completed at most, 1 to 64.

    Members
    -------
    record : In(record width)
        The record a push writes, slot 0 in the least significant bits.
    push : In(1)
        Write ``record``; must be low while ``can_emit`` is low.
    o : Out(stream.Signature(record_layout(engine)))
        The engine's record stream (latency 1 from a push).
    done : In(1)
        The engine completed its oldest outstanding record (a pulse; only while
        ``outstanding``).
    can_emit : Out(1)
        A push this cycle is taken (reset 1).
    outstanding : Out(1)
        A pushed record is not completed (reset 0).
    sem_head : Out(NUM_SEMS)
        The oldest outstanding record's semaphore, one-hot (0 if it increments none).
    """

    def __init__(self, engine, *, depth=2, max_outstanding=isa.MAX_OUTSTANDING):
        self._engine = Engine(engine)
        self._depth = check_int("depth", depth, 1, 16)
        self._max_outstanding = check_int("max_outstanding", max_outstanding, 1, 64)
        layout = record_layout(self._engine)
        super().__init__({
            "record": In(isa.layout_width(isa.RECORDS[self._engine])),
            "push": In(1),
            "o": Out(stream.Signature(layout)),
            "done": In(1),
            "can_emit": Out(1, init=1),
            "outstanding": Out(1),
            "sem_head": Out(isa.NUM_SEMS),
        })

    engine = property(lambda self: self._engine)
    depth = property(lambda self: self._depth)
    max_outstanding = property(lambda self: self._max_outstanding)

    def elaborate(self, platform):
        m = Module()
        lay = isa.RECORDS[self._engine]
        m.submodules.records = q = _SlotFIFO(width=isa.layout_width(lay), depth=self._depth)
        # (the semaphore one-hot, zero without sem_en: no decoder behind the read)
        m.submodules.sems = sq = _SlotFIFO(width=isa.NUM_SEMS, depth=self._max_outstanding)
        m.d.comb += [self.o.valid.eq(q.r_rdy), self.o.payload.eq(q.r_data),
                     q.r_en.eq(self.o.ready), q.w_data.eq(self.record),
                     q.w_en.eq(self.push), sq.w_en.eq(self.push),
                     sq.r_en.eq(self.done), self.sem_head.eq(sq.r_data)]

        def moves(f):
            return f.r_en & f.r_rdy, f.w_en

        def full_next(f):
            rd_, wr_ = moves(f)
            return ~rd_ & ((f.level == f.depth) | (f.level == f.depth - 1) & wr_)

        sq_empty = Signal(init=1)
        rd_, wr_ = moves(sq)
        m.d.sync += sq_empty.eq(~wr_ & ((sq.level == 0) | (sq.level == 1) & rd_))
        m.d.sync += self.can_emit.eq(~full_next(q) & ~full_next(sq))
        m.d.comb += self.outstanding.eq(~sq_empty)
        offs = isa.field_offsets(lay)
        rec_sem = self.record[offs["sem"][0]:offs["sem"][0] + 4]
        m.d.comb += sq.w_data.eq(Mux(self.record[offs["sem_en"][0]],
                                     Const(1, isa.NUM_SEMS) << rec_sem, 0))
        return m
