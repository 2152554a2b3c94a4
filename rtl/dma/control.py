"""The DMA's control: a record's states from the command to ``done`` or an error."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import DmaRecord

__all__ = ["DmaControl"]


class DmaControl(wiring.Component):
    """Takes a record and steps it through IDLE, SETUP, SUM, SPAN, CHECK and RUN, with the
    strobes that drive the engine's units.

    IDLE takes a record (``cmd.ready`` unless ``abort``) into ``rec``. SETUP, SUM and SPAN are
    the setup cycles (``RecordChecks``); at the end of SPAN an empty record completes
    (``done``), a misaligned or out-of-range one reports (``rec_error``), else CHECK follows;
    SPAN also starts the walkers and clears the data paths (``walk``). CHECK takes one row
    verdict per cycle (``ProtectionCheck``): a failing union goes back to SPAN (``retry``), a
    failing row reports, the last row passing starts RUN (``run``; ``load`` or ``st`` from
    the next cycle). RUN ends with ``done`` when the issuer has no segment left, the bus is
    quiet and the data paths are empty (``finished``). An error (``report``: the record's
    checks, a window verdict, or the data paths' AXI errors) or ``abort`` sets ``stopping``:
    no new bursts; in RUN the record ends when the bursts in flight have drained
    (``drained``), with no ``done``. ``done`` is registered (a pulse the cycle after).

    ``busy`` while not in IDLE, and in IDLE while ``pending`` (the load side's write stage
    drains after an error or abort).

    Members
    -------
    cmd : In(stream.Signature(DmaRecord))
    abort : In(1)
    rec : Out(DmaRecord)
    take, idle, setup, sum, span, walk, check, retry, run, halt : Out(1)
        ``take``: a record is taken this cycle; ``walk``: SPAN (start the walkers, clear the
        data paths); ``run``: the last row passed (RUN next); ``halt``: RUN while stopping.
    empty, misaligned, part_over : In(1)
        The record's checks (``RecordChecks``), valid in SPAN.
    row_v, row_ok, row_last, union : In(1)
        The protection check's verdict.
    r_error, b_error : In(1)
        AXI error responses of the data paths.
    drained, finished, pending : In(1)
    report : Out(1)
    load, st, err, stopping : Out(1)
    done, busy : Out(1)
    """

    cmd: In(stream.Signature(DmaRecord))
    abort: In(1)
    rec: Out(DmaRecord)
    take: Out(1)
    idle: Out(1)
    setup: Out(1)
    sum: Out(1)
    span: Out(1)
    walk: Out(1)
    check: Out(1)
    retry: Out(1)
    run: Out(1)
    halt: Out(1)
    empty: In(1)
    misaligned: In(1)
    part_over: In(1)
    row_v: In(1)
    row_ok: In(1)
    row_last: In(1)
    union: In(1)
    r_error: In(1)
    b_error: In(1)
    drained: In(1)
    finished: In(1)
    pending: In(1)
    report: Out(1)
    load: Out(1)
    st: Out(1)
    err: Out(1)
    stopping: Out(1)
    done: Out(1)
    busy: Out(1)

    def elaborate(self, platform):
        m = Module()
        aborting = Signal()
        m.d.sync += self.done.eq(0)
        m.d.comb += [self.stopping.eq(self.err | aborting | self.abort),
                     self.report.eq(self.r_error | self.b_error)]
        with m.If(self.abort & self.busy):
            m.d.sync += aborting.eq(1)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.idle.eq(1), self.cmd.ready.eq(~self.abort),
                             self.take.eq(self.cmd.valid & ~self.abort)]
                m.d.sync += [aborting.eq(0), self.err.eq(0)]
                with m.If(self.take):
                    m.d.sync += self.rec.eq(self.cmd.payload)
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.comb += [self.busy.eq(1), self.setup.eq(1)]
                with m.If(self.stopping):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "SUM"
            with m.State("SUM"):
                m.d.comb += [self.busy.eq(1), self.sum.eq(1)]
                with m.If(self.stopping):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "SPAN"
            with m.State("SPAN"):
                m.d.comb += [self.busy.eq(1), self.span.eq(1), self.walk.eq(1)]
                with m.If(self.stopping):
                    m.next = "IDLE"
                with m.Elif(self.empty):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif(self.misaligned | self.part_over):
                    m.d.comb += self.report.eq(1)         # DMA_ALIGN or SBUF_RANGE
                    m.next = "IDLE"
                with m.Else():
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [self.busy.eq(1), self.check.eq(1)]
                with m.If(self.stopping):
                    m.next = "IDLE"
                with m.Elif(self.row_v & ~self.row_ok & self.union):
                    m.d.comb += self.retry.eq(1)          # the rows one by one
                    m.next = "SPAN"
                with m.Elif(self.row_v & ~self.row_ok):
                    m.d.comb += self.report.eq(1)         # DMA_WINDOW
                    m.next = "IDLE"
                with m.Elif(self.row_v & self.row_last):
                    m.d.comb += self.run.eq(1)
                    m.d.sync += [self.load.eq(~self.rec.store), self.st.eq(self.rec.store)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(self.stopping):
                    # No new bursts (the issue waits for ~stopping); finish the ones in flight.
                    m.d.comb += self.halt.eq(1)
                    with m.If(self.drained):
                        m.d.sync += [self.load.eq(0), self.st.eq(0)]
                        m.next = "IDLE"
                with m.Elif(self.finished):
                    m.d.sync += [self.done.eq(1), self.load.eq(0), self.st.eq(0)]
                    m.next = "IDLE"
        with m.If(self.report):
            m.d.sync += self.err.eq(1)
        with m.If(self.pending):
            m.d.comb += self.busy.eq(1)
        return m
