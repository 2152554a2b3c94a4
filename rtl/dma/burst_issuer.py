"""The DMA's burst issuer: a record's segments as AXI4 read or write bursts."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import RESP_OKAY
from sim.config import check_int, check_pow2

from .burst_queue import BurstQueue
from .burst_splitter import BurstSplitter
from .layouts import DmaRecord
from .record_checks import seg_bits_of
from .walker import AddressWalker

__all__ = ["BurstIssuer", "DataBurst", "WriteBurst"]

#: A burst as the data side sees it: first beat's address, AXI length, one beat only, the
#: record's last burst.
DataBurst = data.StructLayout({"addr": 32, "len": 8, "single": 1, "last": 1})
#: A write burst waiting for its response: its address, the record's last burst.
WriteBurst = data.StructLayout({"addr": 32, "last": 1})


class BurstIssuer(wiring.Component):
    """Issues a record's segments as INCR bursts of up to ``max_burst`` beats that never
    cross a 4 KiB boundary (``BurstSplitter``), at most one per cycle and at most
    ``max_outstanding`` in flight, and keeps the bursts in flight for the data side
    (``data``: address and length until the data side pops it) and for write responses
    (``b_addr``: a write burst's address until its B).

    A segment is a row when ``contiguous`` (across partitions, ``ilv``: a row if
    ``rows_contig``, else a column), otherwise an element. The segment walker is started by
    ``walk`` and stepped as its segment is loaded (it runs one segment ahead); ``run`` loads
    the first segment and lets the bursts go, a segment's first burst the cycle after it is
    loaded. The burst request (``a_valid``, ``a_addr``, ``a_len``) is registered and held
    until ``a_ready``; the next burst may be issued in the cycle the request is taken.
    Whether a burst may go is a flip-flop (``iss_ok``) registered from the next segment
    state and outstanding count, so the issue is two gates of flip-flops and ``a_ready``.
    ``stopping`` holds the issue; ``halt`` ends the record's issue (an error or an abort);
    the bursts in flight retire by the last R beat (loads, ``r_last``) or by B (stores).

    Write responses are taken whenever ``st`` (a store's data side is active or waits for its
    responses): a response other than OKAY raises ``b_error`` (unless ``err``: the record has
    already failed); ``b_rec``: the response of a record's last burst is taken. A record's
    bursts may be issued while an earlier record's (of the same direction) are in flight:
    ``outstanding`` counts them all, and the data side tells a record's end by ``last``.

    Parameters
    ----------
    data_width, max_outstanding : int
        The ``DMA``'s (``rtl/dma/dma.py``).
    max_burst : int
        The ``DMA``'s ``burst_beats``.

    Members
    -------
    rec : In(DmaRecord)
    contiguous, ilv, rows_contig : In(1)
    seg_bytes : In(seg_bits_of(data_width))
    walk, run, halt, stopping : In(1)
    a_valid : Out(1)
    a_addr : Out(32)
    a_len : Out(8)
    a_ready : In(1)
        The AR (load) or AW (store) channel's ready.
    running : Out(1)
        Segments remain to be issued.
    quiet : Out(1)
        No request is held and no burst is in flight.
    data : Out(DataBurst)
        The oldest burst whose data side has not finished (valid while ``data_level``).
    data_level : Out(range(max_outstanding + 1))
    data_push : Out(1)
        A burst is issued this cycle (it enters ``data``).
    data_pop : In(1)
        The data side finished ``data``.
    r_last : In(1)
        A load burst's last R beat is taken.
    st, err : In(1)
    bvalid : In(1)
    bresp : In(2)
    bready : Out(1)
    b_addr : Out(32)
        The address of the oldest write burst without its B.
    b_error : Out(1)
        A B response other than OKAY is taken.
    b_rec : Out(1)
        The B response of a record's last burst is taken.
    """

    def __init__(self, *, data_width=32, max_burst=16, max_outstanding=4):
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        self._max_burst = check_pow2("max_burst", max_burst, 1, 256)
        self._max_outstanding = check_int("max_outstanding", max_outstanding, 1, 16)
        mo = max_outstanding
        super().__init__({
            "rec": In(DmaRecord), "contiguous": In(1), "ilv": In(1), "rows_contig": In(1),
            "seg_bytes": In(seg_bits_of(data_width)),
            "walk": In(1), "run": In(1), "halt": In(1), "stopping": In(1),
            "a_valid": Out(1), "a_addr": Out(32), "a_len": Out(8), "a_ready": In(1),
            "running": Out(1), "quiet": Out(1),
            "data": Out(DataBurst), "data_level": Out(range(mo + 1)), "data_push": Out(1),
            "data_pop": In(1), "r_last": In(1),
            "st": In(1), "err": In(1), "bvalid": In(1), "bresp": In(2), "bready": Out(1),
            "b_addr": Out(32), "b_error": Out(1), "b_rec": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.rec
        MO = self._max_outstanding
        m.submodules.segs = iss = AddressWalker()
        m.d.comb += [
            iss.base.eq(c.ext_addr), iss.ps.eq(c.ext_part_stride), iss.si.eq(c.ext_stride1),
            iss.ni.eq(c.n1), iss.np.eq(Mux(self.ilv, 1, c.part_count)),
            iss.nj.eq(Mux(Mux(self.ilv, self.rows_contig, self.contiguous), 1, c.n0)),
            iss.sj.eq(c.ext_stride0), iss.start.eq(self.walk),
        ]
        outstanding = Signal(range(MO + 1))
        iss_run = self.running                   # segments remain
        iss_load = Signal()                      # load the walker's segment this cycle
        a_hs = Signal()
        m.d.comb += [a_hs.eq(self.a_valid & self.a_ready),
                     self.quiet.eq(~self.a_valid & (outstanding == 0))]
        with m.If(a_hs):
            m.d.sync += self.a_valid.eq(0)
        # The segment's bursts: the splitter registers the segment's counts from the walker's
        # address every cycle; the walker moves only when a segment is loaded, two loads are
        # at least two cycles apart (the segment's first burst is issued between) and the
        # first comes at least three cycles after ``walk``, so at a load they are the walker's
        # segment's.
        m.submodules.bursts = bursts = BurstSplitter(
            data_width=self._data_width, max_burst=self._max_burst,
            seg_bits=seg_bits_of(self._data_width))
        m.d.comb += [bursts.seg_addr.eq(iss.addr), bursts.seg_bytes.eq(self.seg_bytes),
                     bursts.seg_last.eq(iss.last), bursts.load.eq(iss_load)]

        # The bursts in flight (``BurstQueue``): both queues hold only bursts counted in
        # ``outstanding``, so they are never pushed full nor popped empty and take the issue
        # and the pop through their pointers' enables alone, with no ready test.
        m.submodules.b_fifo = b_fifo = BurstQueue(WriteBurst, MO)
        m.submodules.d_fifo = d_fifo = BurstQueue(DataBurst, MO)
        m.d.comb += [self.data.eq(d_fifo.head), self.data_level.eq(d_fifo.level),
                     d_fifo.pop.eq(self.data_pop), self.b_addr.eq(b_fifo.head.addr)]

        iss_ok = Signal()
        issue = Signal()
        m.d.comb += [issue.eq(iss_ok & ~self.stopping & (~self.a_valid | a_hs)),
                     bursts.issue.eq(issue), self.data_push.eq(issue)]
        with m.If(iss_load):
            m.d.comb += iss.step.eq(1)
            m.d.sync += iss_load.eq(0)
        with m.If(issue):
            m.d.sync += [self.a_valid.eq(1), self.a_addr.eq(bursts.cur),
                         self.a_len.eq(bursts.length)]
            m.d.comb += [
                d_fifo.push.eq(1), d_fifo.w_data.addr.eq(bursts.cur),
                d_fifo.w_data.len.eq(bursts.length), d_fifo.w_data.single.eq(bursts.single),
                d_fifo.w_data.last.eq(bursts.end & bursts.last),
                b_fifo.push.eq(c.store), b_fifo.w_data.addr.eq(bursts.cur),
                b_fifo.w_data.last.eq(bursts.end & bursts.last),
            ]
            with m.If(bursts.end):
                with m.If(bursts.last):
                    m.d.sync += iss_run.eq(0)
                with m.Else():
                    m.d.sync += iss_load.eq(1)
        with m.If(self.run):
            m.d.sync += [iss_run.eq(1), iss_load.eq(1)]
        with m.If(self.halt):
            m.d.sync += iss_run.eq(0)

        # Write responses.
        b_take = Signal()
        m.d.comb += [self.bready.eq(self.st), b_take.eq(self.bvalid & self.bready),
                     b_fifo.pop.eq(b_take), self.b_rec.eq(b_take & b_fifo.head.last),
                     self.b_error.eq(b_take & (self.bresp != RESP_OKAY) & ~self.err)]

        # Outstanding bursts: +1 per issue, -1 per last R beat (loads) or B (stores); the bursts
        # in flight go one direction (the control issues another only once none are in flight),
        # so at most one of the two comes in a cycle.
        retire = Signal()
        m.d.comb += retire.eq(b_take | self.r_last)
        m.d.sync += outstanding.eq(outstanding + issue - retire)
        # ``iss_ok`` == iss_run & ~iss_load & (outstanding < max_outstanding), a cycle ahead:
        # the segment's last burst clears iss_run or sets iss_load (iss_run is 0 outside a
        # run, and a load follows the issue that sets iss_load), and outstanding moves by the
        # issue and the retirement. (``halt`` clears iss_run too, and iss_ok may stay 1 for a
        # cycle more, while ``stopping`` still holds the issue.)
        m.d.sync += iss_ok.eq(iss_run & ~(issue & bursts.end) &
                              Mux(issue, Mux(retire, outstanding < MO, outstanding < MO - 1),
                                  retire | (outstanding < MO)))
        return m
