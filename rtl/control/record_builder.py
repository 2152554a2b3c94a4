"""The sequencer's record under construction for one engine: its slots, the slots written
since the last EMIT, and the record check's terms and verdict."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.config import check_int

__all__ = ["RecordBuilder"]


class RecordBuilder(wiring.Component):
    """The ``RECORD_SLOTS[engine]`` 32-bit slots X's slot writes fill and its EMIT pushes.

    ``record`` is the slots as written, masked by the slots written since the last EMIT to
    the engine (unwritten slots read as 0): an EMIT clears only the written-slot bits. A slot
    write (``write`` with ``x_live``) sets its bit while X holds it, stalled or not (no stall
    term: rewriting is idempotent, a trapping write is never seen as START clears the bits),
    and its value lands the cycle after ``go`` (W) from ``res_q``; ``record`` shows it in W
    already. An EMIT that goes (``emit`` with ``go``) clears the bits.

    With ``check_terms`` (a checked engine), each slot's check terms are registered beside it
    from ``slot_terms`` in W, ``terms`` is the record's terms as they will be in the next
    cycle unless an EMIT goes (written slots' terms, pending ones from ``slot_terms``, blank
    terms of the others), and the core's verdict ``illegal`` on ``terms`` is registered:
    ``ill`` is that verdict, or the verdict of a blank record (kept from a cycle without a
    checked slot written) right after an EMIT. ``ill`` is low while X writes a checked slot
    and in its W, where ``chk_pend`` (a checked slot's write pending) is high: an EMIT then
    holds and is not trapped. Without ``check_terms``, ``ill`` and ``chk_pend`` are 0.

    Parameters
    ----------
    engine : sim.isa.Engine
    check_terms : int or None
        Record-check terms per slot, 1..32, or None for an unchecked engine.

    Members
    -------
    clear : In(1)
        START: no slot written.
    x_live, go : In(1)
    write, emit : In(1)
        X's micro-instruction writes a slot of this engine; EMITs to it.
    write_chk : In(1)
        ``write`` of a slot in ``sim.isa.CHECKED_SLOTS[engine]``.
    slot : In(3)
        The slot X writes.
    res_q : In(32)
        X's result registered: the slot's value in W.
    record : Out(32 * slots)
    slot_terms, blank_terms : In(ArrayLayout(check_terms, slots))
        The core's terms of ``res_q`` for each slot; of a blank slot.
    terms : Out(ArrayLayout(check_terms, slots))
    illegal : In(1)
    ill, chk_pend : Out(1)
    """

    def __init__(self, engine, *, check_terms=None):
        if check_terms is not None:
            check_int("check_terms", check_terms, 1, 32)
        self._engine = isa.Engine(engine)
        self._check_terms = check_terms
        self._slots = slots = isa.RECORD_SLOTS[self._engine]
        sig = {"clear": In(1), "x_live": In(1), "go": In(1), "write": In(1), "emit": In(1),
               "write_chk": In(1), "slot": In(3), "res_q": In(32),
               "record": Out(32 * slots), "ill": Out(1), "chk_pend": Out(1)}
        if check_terms is not None:
            terms = data.ArrayLayout(check_terms, slots)
            sig.update(slot_terms=In(terms), blank_terms=In(terms), terms=Out(terms),
                       illegal=In(1))
        super().__init__(sig)

    engine = property(lambda self: self._engine)
    check_terms = property(lambda self: self._check_terms)

    def elaborate(self, platform):
        m = Module()
        name, n = self._engine.name.lower(), self._slots
        raw = [Signal(32, name=f"rec_{name}{s}") for s in range(n)]
        wr = Signal(n, name=f"rec_{name}_wr")
        rec_w = Signal(n, name=f"rec_{name}_pend")        # W: takes res_q
        rec = [Signal(32, name=f"rec_{name}{s}_v") for s in range(n)]
        m.d.comb += [rec[s].eq(Mux(wr[s], Mux(rec_w[s], self.res_q, raw[s]), 0))
                     for s in range(n)]
        m.d.comb += self.record.eq(Cat(*rec))
        m.d.sync += rec_w.eq(0)
        for s in range(n):
            with m.If(rec_w[s]):
                m.d.sync += raw[s].eq(self.res_q)
        with m.If(self.go & self.emit):
            m.d.sync += wr.eq(0)
        with m.If(self.go & self.write):
            for s in range(n):
                with m.If(self.slot == s):
                    m.d.sync += rec_w[s].eq(1)
        with m.If(self.x_live & self.write):
            for s in range(n):
                with m.If(self.slot == s):
                    m.d.sync += wr[s].eq(1)
        if self._check_terms is None:
            m.d.comb += [self.ill.eq(Const(0)), self.chk_pend.eq(0)]
        else:
            checked = isa.CHECKED_SLOTS[self._engine]
            m.d.comb += self.chk_pend.eq(Cat(*[rec_w[s] for s in checked]).any())
            # The check's terms registered beside each slot, so the check at EMIT starts from
            # flip-flops rather than from the slots through the field compares.
            rec_terms = [Signal(self._check_terms, name=f"rec_{name}{s}_terms")
                         for s in range(n)]
            m.d.comb += [self.terms[s].eq(Mux(wr[s], Mux(rec_w[s], self.slot_terms[s],
                                                         rec_terms[s]), self.blank_terms[s]))
                         for s in range(n)]
            for s in range(n):
                with m.If(rec_w[s]):
                    m.d.sync += rec_terms[s].eq(self.slot_terms[s])
            # ``blank_bad``: the verdict of a blank record (the blank terms are constants),
            # loaded while no checked slot is written; ``ill_q``: the verdict of ``terms``,
            # low if X writes a checked slot. ``ill`` picks one with a LUT of flip-flops, so
            # that ``go`` (the stall cone) is not in front of it.
            blank_bad = Signal(name=f"{name}_blank_bad")
            ill_q = Signal(name=f"{name}_ill_q")
            chk_wr = Cat(*[wr[s] for s in checked]).any()
            with m.If(~chk_wr):
                m.d.sync += blank_bad.eq(self.illegal)
            m.d.sync += ill_q.eq(~(self.x_live & self.write_chk) & self.illegal)
            m.d.comb += self.ill.eq(Mux(chk_wr, ill_q, blank_bad))
        with m.If(self.clear):
            m.d.sync += wr.eq(0)
        return m
