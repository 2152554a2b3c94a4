"""The DMA's control: records from the command to ``done`` or an error, two at a time."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import DmaRecord

__all__ = ["DmaControl"]


class DmaControl(wiring.Component):
    """Steps records through two stages: the *front* (the record's setup, its checks and the
    issue of its bursts, on ``rec``) and the *data side* (the SBUF side's walk and the data
    paths, on the record handed to it), so that a record's checks and bursts overlap the
    previous record's data.

    Front: IDLE takes a record (``cmd.ready`` unless ``abort``) into ``rec``. SETUP, SUM and
    SPAN are the setup cycles (``RecordChecks``); SPAN also starts the issuer's segment walk
    (``walk``). CHECK takes one row verdict per cycle (``ProtectionCheck``): a failing union
    goes back to SPAN (``retry``). A record that completes or fails before any bus transaction
    (empty at SPAN; misaligned or out of range at SPAN; a failing row in CHECK) does so only
    once every earlier record is done (``d_idle``): at once if so, else from HOLD, the error
    registered at detection (``hold``) and reported then (``release``). The last row passing
    (``run``) starts the issue when the bursts in flight go the same direction or none are
    in flight, else from WAIT once they are. RUN issues; it hands the record to the data side
    (``dstart``) when that is free and returns to IDLE when the record's bursts are issued and
    it is handed.

    Data side: ``dstart`` starts the element walk and clears the data paths; ``load`` or
    ``st`` is set from the next cycle. A load is done when its walk is over and its last
    element written (``ld_fin``), with ``done`` the cycle after; a store's data side is free
    once its walk is over and its last beat packed (``st_fin``), and the store is done when
    the write response of its last burst is taken (``b_rec``), ``done`` two cycles after.
    Records therefore complete in order, one ``done`` each; a store's SBUF reads follow a
    load's SBUF writes (different directions never overlap on the bus, and the data side
    takes one record at a time).

    An error of the data paths (``r_error``, ``b_error``: reported at once) or ``abort`` sets
    ``stopping``: no new bursts, no ``done``; the record in the front is dropped (no
    ``done``, no error), the bursts in flight drain (the data side still takes a record whose
    bursts were issued, so that its write data are sent or its read data taken) and DRAIN
    returns to IDLE when the bus is quiet (``drained``).

    ``busy`` while not in IDLE, while the data side holds a record or a store waits for its
    write response, and while ``pending`` (the load side's write stage drains after an error
    or abort).

    Members
    -------
    cmd : In(stream.Signature(DmaRecord))
    abort : In(1)
    rec : Out(DmaRecord)
        The front's record.
    take, idle, setup, sum, span, walk, check, retry, run, halt : Out(1)
        ``take``: a record is taken this cycle; ``walk``: SPAN (start the issuer's walk);
        ``run``: the issue starts (RUN next); ``halt``: no further bursts (DRAIN).
    empty, misaligned, part_over : In(1)
        The record's checks (``RecordChecks``), valid in SPAN.
    row_v, row_ok, row_last, union : In(1)
        The protection check's verdict.
    r_error, b_error : In(1)
        AXI error responses of the data paths.
    drained, running, pending : In(1)
        ``drained``: no burst in flight or requested and no W beat waiting; ``running``: the
        issuer has bursts to issue or a request not yet taken (the request's direction is
        the front record's).
    ld_fin, st_fin : In(1)
        The data side's load is complete / store's beats are packed (valid with ``load`` /
        ``st``).
    r_rec_last : In(1)
        The last R beat of the data side's record's last burst is taken.
    b_rec : In(1)
        The write response of a store record's last burst is taken.
    report, hold, release : Out(1)
        Report an error of the data paths or of the checks now; register a check error;
        report the registered one.
    dstart : Out(1)
        The front's record goes to the data side (the data side's copy takes ``rec``).
    d_act : Out(1)
        The data side holds a record (its copy of the record is the one in use).
    d_follow : Out(1)
        The data side's copy of the record may take the front's at this edge: the data side
        is free or frees at this edge. The copy then equals ``rec`` at every ``dstart``
        (``rec`` is taken at least three cycles before one), so the data side reads the copy
        alone, not a choice between it and ``rec``.
    d_store : Out(1)
        The data side's record is (or the last was) a store.
    r_hold : Out(1)
        Take no R beat: the data side's record has all its beats.
    b_wait : Out(1)
        Stores wait for their last write response.
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
    running: In(1)
    pending: In(1)
    ld_fin: In(1)
    st_fin: In(1)
    r_rec_last: In(1)
    b_rec: In(1)
    report: Out(1)
    hold: Out(1)
    release: Out(1)
    dstart: Out(1)
    d_act: Out(1)
    d_follow: Out(1)
    d_store: Out(1)
    r_hold: Out(1)
    b_wait: Out(1)
    load: Out(1)
    st: Out(1)
    err: Out(1)
    stopping: Out(1)
    done: Out(1)
    busy: Out(1)

    def elaborate(self, platform):
        m = Module()
        aborting = Signal()
        stopping = self.stopping
        m.d.sync += self.done.eq(0)
        f_report = Signal()                      # a check error reported now
        m.d.comb += [stopping.eq(self.err | aborting | self.abort),
                     self.report.eq(self.r_error | self.b_error | f_report | self.release)]
        with m.If(self.abort & self.busy):
            m.d.sync += aborting.eq(1)

        # Data side. ``b_count``: store records whose beats are packed and whose last write
        # response is not yet taken (records complete in order, B in order).
        b_count = Signal(5)
        b_done = Signal()                        # a store's last B was taken (done next)
        d_fin = Signal()
        handed = Signal()                        # the front's record is on the data side
        f_run = Signal()                         # the front's record has issued bursts
        reset_all = Signal()                     # DRAIN's end: the engine returns to idle
        m.d.comb += [
            self.b_wait.eq(b_count != 0),
            d_fin.eq(self.d_act & ((self.load & self.ld_fin) | (self.st & self.st_fin))),
            self.d_follow.eq(~self.d_act | d_fin),
        ]
        d_idle = Signal()                        # every earlier record is done
        m.d.comb += d_idle.eq(~self.d_act & ~self.b_wait & ~b_done)
        m.d.sync += b_done.eq(self.b_rec)
        with m.If(b_done & ~stopping):
            m.d.sync += self.done.eq(1)
        m.d.sync += b_count.eq(b_count + (d_fin & self.st) - self.b_rec)
        with m.If(self.r_rec_last & self.load):
            m.d.sync += self.r_hold.eq(1)
        with m.If(d_fin):
            m.d.sync += [self.d_act.eq(0), self.load.eq(0), self.st.eq(0)]
            with m.If(self.load & ~stopping):
                m.d.sync += self.done.eq(1)
        with m.If(self.run):
            m.d.sync += f_run.eq(1)
        with m.If(self.dstart):
            m.d.sync += [self.d_act.eq(1), self.d_store.eq(self.rec.store), handed.eq(1),
                         self.load.eq(~self.rec.store), self.st.eq(self.rec.store),
                         self.r_hold.eq(0)]
        # The issue may start: no bursts in flight of another direction.
        go = Signal()
        m.d.comb += go.eq(d_idle | (self.d_store == self.rec.store))
        # The data side takes the front's record: it is free (its copy is then ``rec``).
        can_hand = Signal()
        m.d.comb += can_hand.eq(~self.d_act & ~handed)
        active = Signal()
        m.d.comb += active.eq(~d_idle | ~self.drained)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(1)
                with m.If(stopping & active):
                    m.next = "DRAIN"
                with m.Else():
                    m.d.comb += [self.cmd.ready.eq(~self.abort),
                                 self.take.eq(self.cmd.valid & ~self.abort)]
                    m.d.sync += [aborting.eq(0), self.err.eq(0), handed.eq(0), f_run.eq(0)]
                    with m.If(self.take):
                        m.d.sync += self.rec.eq(self.cmd.payload)
                        m.next = "SETUP"
            with m.State("SETUP"):
                m.d.comb += [self.busy.eq(1), self.setup.eq(1)]
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Else():
                    m.next = "SUM"
            with m.State("SUM"):
                m.d.comb += [self.busy.eq(1), self.sum.eq(1)]
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Else():
                    m.next = "SPAN"
            with m.State("SPAN"):
                m.d.comb += [self.busy.eq(1), self.span.eq(1), self.walk.eq(1)]
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Elif(self.empty):
                    with m.If(d_idle):
                        m.d.sync += self.done.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "HOLD_DONE"
                with m.Elif(self.misaligned | self.part_over):
                    with m.If(d_idle):
                        m.d.comb += f_report.eq(1)        # DMA_ALIGN or SBUF_RANGE
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.hold.eq(1)
                        m.next = "HOLD_ERR"
                with m.Else():
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [self.busy.eq(1), self.check.eq(1)]
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Elif(self.row_v & ~self.row_ok & self.union):
                    m.d.comb += self.retry.eq(1)          # the rows one by one
                    m.next = "SPAN"
                with m.Elif(self.row_v & ~self.row_ok):
                    with m.If(d_idle):
                        m.d.comb += f_report.eq(1)        # DMA_WINDOW
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.hold.eq(1)
                        m.next = "HOLD_ERR"
                with m.Elif(self.row_v & self.row_last):
                    with m.If(go):
                        m.d.comb += [self.run.eq(1), self.dstart.eq(can_hand)]
                        m.next = "RUN"
                    with m.Else():
                        m.next = "WAIT"
            with m.State("HOLD_DONE"):
                m.d.comb += self.busy.eq(1)
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Elif(d_idle):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
            with m.State("HOLD_ERR"):
                m.d.comb += self.busy.eq(1)
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Elif(d_idle):
                    m.d.comb += self.release.eq(1)
                    m.next = "IDLE"
            with m.State("WAIT"):
                m.d.comb += self.busy.eq(1)
                with m.If(stopping):
                    m.next = "DRAIN"
                with m.Elif(go):
                    m.d.comb += [self.run.eq(1), self.dstart.eq(can_hand)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), self.dstart.eq(can_hand)]
                with m.If(stopping):
                    m.d.comb += self.halt.eq(1)
                    with m.If(self.drained):
                        m.d.comb += reset_all.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "DRAIN"
                with m.Elif(~self.running & (handed | can_hand)):
                    m.d.sync += [handed.eq(0), f_run.eq(0)]
                    m.next = "IDLE"
            with m.State("DRAIN"):
                # No new bursts; the ones in flight finish (a record whose bursts were issued
                # goes to the data side, which sends their write data or takes their read
                # data); then everything returns to idle, with no ``done``.
                m.d.comb += [self.busy.eq(1), self.halt.eq(1), self.dstart.eq(f_run & can_hand)]
                with m.If(self.drained):
                    m.d.comb += reset_all.eq(1)
                    m.next = "IDLE"
        with m.If(reset_all):
            m.d.sync += [self.d_act.eq(0), self.load.eq(0), self.st.eq(0), b_count.eq(0),
                         handed.eq(0), f_run.eq(0), self.r_hold.eq(0)]
        with m.If(self.report):
            m.d.sync += self.err.eq(1)
        with m.If(self.pending | self.d_act | self.b_wait | b_done):
            m.d.comb += self.busy.eq(1)
        return m
