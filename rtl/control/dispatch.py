"""The sequencer's engine dispatch: each engine's record under construction and its queues."""

from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.config import check_int
from sim.isa import Engine

from .engine_queue import EngineQueue
from .layouts import record_layout
from .micro_decode import ENGINES, FLAGS, NAMES
from .record_builder import RecordBuilder

__all__ = ["EngineDispatch", "CHECKED_ENGINES", "engine_ports"]

#: The engines whose records the core checks (``*_slot_terms``, ``*_illegal``).
CHECKED_ENGINES = (Engine.TENSOR, Engine.VECTOR)


class EngineDispatch(wiring.Component):
    """Per engine, the record X's slot writes fill (:class:`RecordBuilder`) and the record and
    completion FIFOs its EMITs push into (:class:`EngineQueue`).

    X's slot write of an engine (flag ``slot_<engine>``) fills slot ``slot`` of its record;
    the value lands from ``res_q`` in the cycle after ``go`` (W). An EMIT that goes
    (``emit_<engine>`` with ``go``) starts a new record, and ``push`` (its queue space, check
    and verdict decided by :class:`rtl.control.advance.AdvanceControl`) writes the record into
    the engine's FIFO, which the engine reads through its stream a cycle later. Each pulse of
    ``<engine>_done`` completes the oldest outstanding record: ``inc_<engine>`` is then its
    semaphore (one-hot; 0 without ``sem_en`` or when nothing is outstanding). ``clear``
    (START) forgets the slots written; the queues keep running.

    Parameters
    ----------
    queue_depth : int
        Records buffered per engine, 1..16.
    max_outstanding : int
        Records per engine pushed and not yet completed at most, 1..64.
    check_terms : int
        Record-check terms per slot of a checked engine, 1..32.

    Members
    -------
    clear, x_live, go : In(1)
    flags : In(StructLayout({flag: 1 for flag in FLAGS}))
        X's decoded micro-word (:class:`rtl.control.micro_decode.MicroDecoder`'s ``x``).
    slot : In(3)
        The slot X's micro-word names.
    res_q : In(32)
        X's result registered.
    push : In(3)
        Per engine: push its record this cycle (only while ``can_emit``).
    dma, tensor, vector : Out(stream.Signature(record_layout(engine)))
        The engines' record streams.
    dma_done, tensor_done, vector_done : In(1)
        One pulse per completed record, in issue order.
    tensor_slot_terms, tensor_blank_terms, tensor_terms, tensor_illegal (and vector_*)
        The record check's ports, as the sequencer's (:class:`RecordBuilder`).
    outstanding, can_emit, chk_pend, ill : Out(3)
        Per engine: a record outstanding; a push is taken; a checked slot's write pending;
        the record check's registered verdict.
    inc_dma, inc_tensor, inc_vector : Out(NUM_SEMS)
        The semaphore this cycle's completion of that engine increments.
    """

    def __init__(self, *, queue_depth=2, max_outstanding=isa.MAX_OUTSTANDING, check_terms=1):
        self._queue_depth = check_int("queue_depth", queue_depth, 1, 16)
        self._max_outstanding = check_int("max_outstanding", max_outstanding, 1, 64)
        self._check_terms = check_int("check_terms", check_terms, 1, 32)
        sig = {"clear": In(1), "x_live": In(1), "go": In(1),
               "flags": In(data.StructLayout({f: 1 for f in FLAGS})),
               "slot": In(3), "res_q": In(32), "push": In(3),
               "outstanding": Out(3), "can_emit": Out(3), "chk_pend": Out(3), "ill": Out(3),
               **{"inc_" + NAMES[e]: Out(isa.NUM_SEMS) for e in ENGINES},
               **engine_ports(check_terms)}
        super().__init__(sig)

    queue_depth = property(lambda self: self._queue_depth)
    max_outstanding = property(lambda self: self._max_outstanding)
    check_terms = property(lambda self: self._check_terms)

    def elaborate(self, platform):
        m = Module()
        builders, queues = {}, {}
        for e in ENGINES:
            name = NAMES[e]
            bu = builders[e] = RecordBuilder(
                e, check_terms=self._check_terms if e in CHECKED_ENGINES else None)
            qu = queues[e] = EngineQueue(e, depth=self._queue_depth,
                                         max_outstanding=self._max_outstanding)
            m.submodules[f"record_{name}"], m.submodules[f"queue_{name}"] = bu, qu
            m.d.comb += [bu.clear.eq(self.clear), bu.x_live.eq(self.x_live), bu.go.eq(self.go),
                         bu.write.eq(self.flags["slot_" + name]),
                         bu.emit.eq(self.flags["emit_" + name]),
                         bu.slot.eq(self.slot), bu.res_q.eq(self.res_q)]
            if e in CHECKED_ENGINES:
                m.d.comb += [bu.write_chk.eq(self.flags["slot_chk_" + name]),
                             bu.slot_terms.eq(getattr(self, name + "_slot_terms")),
                             bu.blank_terms.eq(getattr(self, name + "_blank_terms")),
                             getattr(self, name + "_terms").eq(bu.terms),
                             bu.illegal.eq(getattr(self, name + "_illegal"))]
            wiring.connect(m, qu.o, wiring.flipped(getattr(self, name)))
            done = getattr(self, name + "_done")
            m.d.comb += [qu.record.eq(bu.record), qu.done.eq(done), qu.push.eq(self.push[e]),
                         self.outstanding[e].eq(qu.outstanding),
                         getattr(self, "inc_" + name).eq(
                             Mux(done & self.outstanding[e], qu.sem_head, 0))]
        m.d.comb += [self.can_emit.eq(Cat(*[queues[e].can_emit for e in ENGINES])),
                     self.chk_pend.eq(Cat(*[builders[e].chk_pend for e in ENGINES])),
                     self.ill.eq(Cat(*[builders[e].ill for e in ENGINES]))]
        return m


def engine_ports(check_terms):
    """The engine-side members of :class:`EngineDispatch`, which the sequencer has too: each
    engine's record stream and completion, each checked engine's record-check ports."""
    sig = {}
    for e in ENGINES:
        sig[NAMES[e]] = Out(stream.Signature(record_layout(e)))
        sig[NAMES[e] + "_done"] = In(1)
    for e in CHECKED_ENGINES:
        terms = data.ArrayLayout(check_terms, isa.RECORD_SLOTS[e])
        sig[NAMES[e] + "_slot_terms"] = In(terms)
        sig[NAMES[e] + "_blank_terms"] = In(terms)
        sig[NAMES[e] + "_terms"] = Out(terms)
        sig[NAMES[e] + "_illegal"] = In(1)
    return sig
