"""The DMA engine: an AXI4 manager moving tensors between external memory and SBUF.

It executes ``DMA_RECORD``s (``sim/isa.py``, ``docs/isa.md``): for every ``p < part_count,
i < n1, j < n0`` (p outermost)::

    ext byte address  e = ext_addr + p*ext_part_stride + i*ext_stride1 + j*ext_stride0
    SBUF word         SBUF[part_start + p][sbuf_addr + i*n0 + j]

Loads (``store=0``) copy the ``STORAGE_BITS[fmt]``-bit little-endian element at ``e``
zero-extended into the SBUF word; stores write the low bits of the SBUF word to ``e``.

Order of work for one record
----------------------------
1. *Setup* (3 cycles: the checks and the row span's partial products are registered in the
   first, the span is summed in the second, the checks are decided in the third):
   zero-size records (``n0``, ``n1`` or ``part_count`` 0) complete (``done`` at the end of
   setup, no bus activity); a record whose ``ext_addr`` or strides are not multiples of the
   element size reports ``DMA_ALIGN``; partitions beyond ``P`` report ``SBUF_RANGE``.
2. *Window check* (one cycle per row ``(p, i)`` plus one, no bus activity): the row's byte range
   ``[min_j e, max_j e + size - 1]`` (strides are two's complement) must lie inside one window
   with the needed permission (read for loads, write for stores) and must not wrap around
   ``2**32``. The first failing row reports ``DMA_WINDOW`` with the row's first element address.
   Only if every row passes does the first bus transaction start. (A row's first address is
   compared with per-window thresholds formed from the span before the rows, the verdict is
   taken from registers the next cycle.)
3. *Transfer*: a row whose inner stride equals the element size is one contiguous segment,
   fetched/written in INCR bursts of up to ``max_burst`` beats that never cross a 4 KiB
   boundary; otherwise every element is its own single-beat transaction (strobes select its
   bytes). Up to ``max_outstanding`` bursts are in flight. The issuer issues at most one burst
   per cycle, a segment's first one the cycle after the segment is loaded, from registers:
   the next burst's case (to the boundary, the segment's last, ``max_burst``) is kept in
   flags updated a burst ahead, and whether another burst may go in a flip-flop registered
   from the next segment state and outstanding count. SBUF sees at most one element per
   cycle (a load waits while the shared SBUF write port serves another writer:
   ``sbuf_w.ready``). Loaded elements pass a two-entry write stage (one cycle of latency),
   so the SBUF write request comes from registers; ``done`` waits until it is empty. Stored
   elements are registered once after the SBUF read (two cycles from the read to the beat
   accumulator, one element per cycle), so the block RAM's output reaches only a register.

   *Across partitions* (``data_width > 32``, ``ext_part_stride`` equal to the element size,
   and no two elements with one destination: loads ``n0*n1 <= sbuf_depth``, stores with
   ascending columns and rows, strides below 2**16; ``docs/dma.md``) the elements move column
   by column (``i`` outer, ``j`` inner; a column is the ``part_count`` partitions at one SBUF
   address), a *chunk* (a column's elements in one beat, ``ColumnWalker``) per cycle: one SBUF
   write of several partitions for a load, one SBUF read packed into the beat for a store. A
   row is one segment when its columns abut (``ext_stride0 = part_count * esize``), else each
   column is one. The window check then first takes the rows of one ``i`` as one range when
   ``ext_stride0 >= 0`` (a cycle per ``i``) and checks them one by one only if a range fails,
   so the verdict and the error are those of the row check.
4. An AXI error response (RRESP/BRESP not OKAY) reports ``DMA_AXI_READ``/``DMA_AXI_WRITE`` at
   once; the engine stops issuing bursts, drains the ones in flight (read data is discarded,
   write bursts already issued are completed, as AXI requires) and returns to idle.

Write ordering: W beats are produced in AW order; a W beat is only sent for a burst whose AW has
been issued.
"""

from amaranth.hdl import Module, Signal, Cat, Const, Mux, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import STORAGE_BITS
from sim.errors import ErrorCode, ERROR_CODE_BITS
from sim.isa import DMA_RECORD
from rtl.bus.axi import AXI4Signature, BURST_INCR, RESP_OKAY
from rtl.bus.mem_ports import PartitionReadSignature, PartitionWriteSignature
from sim.config import check_int, check_pow2
from rtl.arith.dsp import registered_product

from .burst_queue import BurstQueue
from .burst_splitter import BurstSplitter
from .column_walker import ColumnWalker
from .sbuf_write_stage import SbufWriteStage
from .walker import AddressWalker
from .window_check import WindowCheck, WindowLayout

__all__ = ["DmaRecord", "WindowLayout", "DMA"]

#: The record the sequencer issues (flat, slot 0 in the least significant bits).
DmaRecord = data.StructLayout({name: width for name, width in DMA_RECORD})



def _lanes(beat, esh, n):
    """The first ``n`` elements of ``beat`` (bytes, element size ``1 << esh``), each
    zero-extended to a 32-bit word, as one ``32 * n``-bit value."""
    cands = []
    for sh in range(3):
        e = 8 << sh
        cands.append(Cat(*[Cat(beat[e * k:e * k + e], Const(0, 32 - e)) if e * (k + 1) <= len(beat)
                           else Const(0, 32) for k in range(n)]))
    return Mux(esh == 0, cands[0], Mux(esh == 1, cands[1], cands[2]))


def _pack(words, esh, nbytes):
    """The 32-bit ``words`` truncated to the element size ``1 << esh`` and packed, as an
    ``8 * nbytes``-bit value (the inverse of :func:`_lanes`)."""
    n = len(words) // 32
    cands = []
    for sh in range(3):
        e = 8 << sh
        cands.append(Cat(*[words[32 * k:32 * k + e] for k in range(min(n, 8 * nbytes // e))]))
    return Mux(esh == 0, cands[0], Mux(esh == 1, cands[1], cands[2]))[:8 * nbytes]


class DMA(wiring.Component):
    """AXI4 DMA between external memory and SBUF with address-window protection.

    Parameters
    ----------
    partitions : int
        SBUF partitions P, 1 to 256.
    sbuf_depth : int
        Words per SBUF partition (power of two, 2 to 65536).
    data_width : int
        AXI data width in bits, a power of two from 32 to 512.
    max_burst : int
        Longest burst in beats, a power of two from 1 to 256. Bursts are at most
        ``burst_beats = min(max_burst, 16384 // data_width)`` beats (2 KiB at 128 bits and
        wider), so that a 4 KiB page holds more beats than a burst.
    max_outstanding : int
        Bursts in flight at most, 1 to 16.
    windows : int
        Number of address windows, 1 to 8.

    Members
    -------
    cmd : In(stream.Signature(DmaRecord))
        One record per transfer; ``ready`` while idle.
    done : Out(1)
        One-cycle pulse when a record completed without error (none for a record that ended
        in an error or was aborted).
    err_valid : Out(1)
        One-cycle pulse when an error is detected; ``err_code``/``err_addr``/``err_info``
        (``sim/errors.py``) hold it until the next error. ``busy`` stays high until the
        bursts in flight have drained.
    err_code : Out(ERROR_CODE_BITS)
    err_addr : Out(32)
    err_info : Out(32)
    abort : In(1)
        Stop issuing, drain what is in flight, go idle (no ``done`` pulse). Held or pulsed.
    busy : Out(1)
    windows : In(ArrayLayout(WindowLayout, windows))
        ``perm`` bit 0 allows reads (loads), bit 1 writes (stores); ``limit`` is inclusive.
        Static while ``busy`` (the core's configuration lock): a record's window thresholds
        are registered from them before its rows are checked.
    axi : Out(AXI4Signature(addr_width=32, data_width=data_width, id_width=1))
        ID 0, INCR bursts, full-width beats (``axsize = log2(data_width/8)``).
    sbuf_r : Out(PartitionReadSignature(partitions, sbuf_depth))
    sbuf_w : Out(PartitionWriteSignature(partitions, sbuf_depth))
        The DMA's SBUF ports (``rtl/core/sbuf.py``); one word per cycle, or across
        partitions one address in as many partitions as a chunk holds. The write port is
        shared with other writers: while ``sbuf_w.ready`` is 0 the write is held (same
        address, partition and data), the write stage fills and then no R beat is taken,
        so nothing is lost or repeated. ``busy`` covers the write stage.
    rd_bytes, wr_bytes : Out(32)
        Bytes moved from / to external memory since reset or ``clear_counters``.
    clear_counters : In(1)
    """

    def __init__(self, *, partitions, sbuf_depth, data_width=32, max_burst=16,
                 max_outstanding=4, windows=4):
        check_int("partitions", partitions, 1, 256)
        check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 16)
        check_pow2("data_width", data_width, 32, 512)
        check_pow2("max_burst", max_burst, 1, 256)
        check_int("max_outstanding", max_outstanding, 1, 16)
        check_int("windows", windows, 1, 8)
        self._partitions = partitions
        self._sbuf_depth = sbuf_depth
        self._data_width = data_width
        self._max_burst = max_burst
        self._max_outstanding = max_outstanding
        self._windows = windows
        super().__init__({
            "cmd": In(stream.Signature(DmaRecord)),
            "done": Out(1),
            "err_valid": Out(1),
            "err_code": Out(ERROR_CODE_BITS),
            "err_addr": Out(32),
            "err_info": Out(32),
            "abort": In(1),
            "busy": Out(1),
            "windows": In(data.ArrayLayout(WindowLayout, windows)),
            "axi": Out(AXI4Signature(addr_width=32, data_width=data_width, id_width=1)),
            "sbuf_r": Out(PartitionReadSignature(partitions, sbuf_depth)),
            "sbuf_w": Out(PartitionWriteSignature(partitions, sbuf_depth)),
            "rd_bytes": Out(32),
            "wr_bytes": Out(32),
            "clear_counters": In(1),
        })

    partitions = property(lambda self: self._partitions)
    sbuf_depth = property(lambda self: self._sbuf_depth)
    data_width = property(lambda self: self._data_width)
    max_burst = property(lambda self: self._max_burst)
    burst_beats = property(lambda self: min(self._max_burst, 16384 // self._data_width))
    max_outstanding = property(lambda self: self._max_outstanding)
    n_windows = property(lambda self: self._windows)

    def elaborate(self, platform):
        m = Module()
        P = self._partitions
        bw = self._data_width // 8               # bytes per beat
        bsh = (bw - 1).bit_length()              # log2(bw)
        axi = self.axi
        depth_bits = (self._sbuf_depth - 1).bit_length()
        pbits = max(1, (P - 1).bit_length())     # a partition number

        c = Signal(DmaRecord)                    # the record being executed
        # The element size and whether a row is one contiguous segment are registered in
        # SETUP (valid from SPAN on): they feed the walkers' counts and the data paths' step
        # decisions, which must not start with a decode and a 32-bit compare of the record.
        fmt_esh = Signal(2)                      # log2(element bytes), decoded from c.fmt
        esh = Signal(2)                          # ... registered in SETUP
        esize = Signal(3)
        contiguous = Signal()                    # registered in SETUP
        # The across-partitions path (``docs/dma.md``), built for buses wider than 32 bits:
        # ``ilv``: the record's partitions are consecutive in external memory (registered in
        # SETUP; a constant 0 in a 32-bit build); ``rows_contig``: so are its columns.
        wide = self._data_width > 32
        ilv = Signal()
        rows_contig = Signal()
        span = Signal(signed(50))                # (n0-1)*ext_stride0, signed
        # ``c.n0 - 1`` (17 bits: -1 for n0 = 0), registered with the record, so that SETUP's
        # multiply does not start behind a subtractor's carry chain.
        n0_m1 = Signal(len(c.n0) + 1)
        # The multiply in two steps: SETUP forms its two 17 x 17-bit signed partial products
        # (one MULT18X18D each: ``n0_m1`` times the stride's low half, zero-extended, and times
        # its high half) and registers them, SUM adds them, so no 50-bit adder follows a
        # DSP block in one cycle. On an
        # ECP5 the blocks' own input and output registers hold the operands and the products
        # (``rtl.arith.dsp``): the inputs take the record's next value every cycle (the
        # command's as it is taken, else the record's), so the products are those of the
        # record from SUM on.
        take = Signal()                          # IDLE takes a record this cycle
        n0_m1_next = Signal(len(c.n0) + 1)
        stride_next = Signal(32)
        m.d.comb += [n0_m1_next.eq(Mux(take, self.cmd.payload.n0 - 1, n0_m1)),
                     stride_next.eq(Mux(take, self.cmd.payload.ext_stride0, c.ext_stride0))]
        span_lo = registered_product(m, platform, n0_m1_next, Cat(stride_next[:16], 0),
                                     Const(1), "span_lo", out_reg=True, signed=True)
        span_hi = registered_product(m, platform, n0_m1_next, stride_next[16:32], Const(1),
                                     "span_hi", out_reg=True, signed=True)
        s_empty = Signal()                       # SETUP's checks, registered for SPAN
        s_misaligned = Signal()
        s_part_end = Signal(9)                   # part_start + part_count
        s_part_over = Signal()                   # ... > P

        # Element size per format from sim.dtypes (never hard-coded here).
        with m.Switch(c.fmt):
            for fmt, bits in STORAGE_BITS.items():
                with m.Case(int(fmt)):
                    m.d.comb += fmt_esh.eq({8: 0, 16: 1, 32: 2}[bits])
        m.d.comb += esize.eq(1 << esh)

        # Error reporting (first error of a record wins; host-visible latching is status.py's).
        err = Signal()                           # this record has failed: stop and drain
        stopping = Signal()                      # error or abort: no new bursts
        aborting = Signal()
        m.d.sync += self.err_valid.eq(0)
        m.d.sync += self.done.eq(0)

        # An error is reported by raising ``report``; its code, address and information are
        # selected by registers alone (the running data path, the record's checks, ``row_v``;
        # see the end), so the error registers wait only for the flag, not for a priority chain
        # of the conditions.
        report = Signal()

        m.d.comb += stopping.eq(err | aborting | self.abort)
        with m.If(self.abort & self.busy):
            m.d.sync += aborting.eq(1)

        chk = AddressWalker()      # rows (p, i) for the window check
        # The window check's walker is held at its first row by a flip-flop (``chk_hold``:
        # set when a record is taken, cleared in SPAN) and steps in every cycle it is not
        # held (a step past the last row does nothing), so no state decode is in front of its
        # clock enables.
        chk_hold = Signal()
        iss = AddressWalker()      # segments for the burst issuer
        elw = AddressWalker()      # elements for the SBUF side
        m.submodules.chk = chk
        m.submodules.iss = iss
        m.submodules.elw = elw
        for w in (chk, iss, elw):
            m.d.comb += [w.base.eq(c.ext_addr), w.ps.eq(c.ext_part_stride),
                         w.si.eq(c.ext_stride1), w.ni.eq(c.n1)]
        # Across partitions, a segment is a row (``rows_contig``) or a column.
        # Across partitions with ``ext_stride0 >= 0`` the rows of one ``i`` (one per
        # partition, each ``esize`` after the last) first pass the window check as one range
        # (``union``): if every union lies in a window so does every row, and the transfer
        # starts after ``n1`` checks instead of ``part_count * n1``; if one does not, the rows
        # are checked one by one (``union_off``), so the verdict and the error reported are
        # those of the row check.
        union = Signal()
        union_off = Signal()
        if wide:
            m.d.comb += union.eq(ilv & ~span[-1] & ~union_off)
        m.d.comb += [
            chk.np.eq(Mux(union, 1, c.part_count)), elw.np.eq(c.part_count),
            iss.np.eq(Mux(ilv, 1, c.part_count)),
            chk.nj.eq(1), chk.sj.eq(0), chk.start.eq(chk_hold), chk.step.eq(1),
            iss.nj.eq(Mux(Mux(ilv, rows_contig, contiguous), 1, c.n0)),
            iss.sj.eq(c.ext_stride0),
            elw.nj.eq(c.n0), elw.sj.eq(c.ext_stride0),
        ]
        # The chunks of an across-partitions record (a column's elements in one beat).
        if wide:
            m.submodules.cols = cw = ColumnWalker(data_width=self._data_width)
            m.d.comb += [cw.base.eq(c.ext_addr), cw.s0.eq(c.ext_stride0),
                         cw.s1.eq(c.ext_stride1), cw.n0.eq(c.n0), cw.n1.eq(c.n1),
                         cw.count.eq(c.part_count), cw.esh.eq(esh),
                         cw.rows_contig.eq(rows_contig)]
        # Whether the walk is over, and the step of the walker in use.
        el_done = Signal()
        el_step = Signal()
        m.d.comb += [el_done.eq(Mux(ilv, cw.done, elw.done) if wide else elw.done),
                     elw.step.eq(el_step & ~ilv)]
        if wide:
            m.d.comb += cw.step.eq(el_step & ilv)

        # ---- burst issuer (AR for loads, AW for stores) --------------------------------
        outstanding = Signal(range(self._max_outstanding + 1))
        a_valid = Signal()
        a_addr = Signal(32)
        a_len = Signal(8)
        a_hs = Signal()
        iss_run = Signal()                       # segments remain
        iss_load = Signal()                      # load the walker's segment this cycle
        # The segment's bursts (``BurstSplitter``): the walker is stepped as its segment is
        # loaded (it runs one segment ahead), and the splitter registers the segment's counts
        # from the walker's address every cycle: the walker moves only when a segment is
        # loaded, two loads are at least two cycles apart (the segment's first burst is issued
        # between) and the first comes at least three cycles after the walker's start in
        # SPAN, so at a load they are the walker's segment's.
        MB = self.burst_beats
        seg_bits = 27 if wide else 19            # a row across partitions: n0 * 255 * 4 bytes
        seg_bytes = Signal(seg_bits)             # bytes per segment (registered in SPAN)
        m.submodules.bursts = bursts = BurstSplitter(data_width=self._data_width,
                                                     max_burst=MB, seg_bits=seg_bits)
        m.d.comb += [bursts.seg_addr.eq(iss.addr), bursts.seg_bytes.eq(seg_bytes),
                     bursts.seg_last.eq(iss.last), bursts.load.eq(iss_load)]

        m.d.comb += [
            axi.arid.eq(0), axi.awid.eq(0),
            axi.araddr.eq(a_addr), axi.awaddr.eq(a_addr),
            axi.arlen.eq(a_len), axi.awlen.eq(a_len),
            axi.arsize.eq(bsh), axi.awsize.eq(bsh),
            axi.arburst.eq(BURST_INCR), axi.awburst.eq(BURST_INCR),
            axi.arcache.eq(0b0011), axi.awcache.eq(0b0011),
            axi.arprot.eq(0), axi.awprot.eq(0), axi.arlock.eq(0), axi.awlock.eq(0),
            axi.arvalid.eq(a_valid & ~c.store), axi.awvalid.eq(a_valid & c.store),
            a_hs.eq(Mux(c.store, axi.awvalid & axi.awready, axi.arvalid & axi.arready)),
        ]
        with m.If(a_hs):
            m.d.sync += a_valid.eq(0)

        # Per-burst bookkeeping for the data side (``BurstQueue``): ``b_fifo`` holds a store
        # burst's address until its B (the BRESP error address), ``d_fifo`` (below) the
        # bursts' addresses and lengths for the data side. Both hold only bursts counted in
        # ``outstanding``, so they are never pushed full nor popped empty and take the issue
        # (and the pop) through their pointers' enables alone, with no ready test.
        MO = self._max_outstanding
        m.submodules.b_fifo = b_fifo = BurstQueue(32, MO)
        b_pop = Signal()                         # a B response is taken
        m.d.comb += b_fifo.pop.eq(b_pop)
        # ``d_fifo`` (address, length, one beat) holds the bursts issued whose data side has
        # not finished (a load's last R beat, a store's last W beat packed): at most
        # ``outstanding`` of them, so it is never pushed full nor popped empty, and push and
        # pop need no ready test. Its level and pointers take the pop (``r_take & rlast`` or
        # the packer's last beat) through one gate each, not a FIFO's ready-gated read in
        # front of a level counter's enable (the end of the ``rready`` path below).
        d_word = data.StructLayout({"addr": 32, "len": 8, "single": 1})
        m.submodules.d_fifo = d_fifo = BurstQueue(d_word, MO)
        d_level = d_fifo.level
        d_push = Signal()                        # a burst is issued
        d_pop = Signal()                         # the head burst's data side is done
        m.d.comb += [d_fifo.push.eq(d_push), d_fifo.pop.eq(d_pop)]

        # A burst is issued when ``iss_ok`` (segments remain, none is being loaded and fewer
        # than max_outstanding bursts are in flight: a flip-flop, registered from the next
        # values of the three below) and nothing stops the record, and AR/AW is free. The
        # issue reaches every register of the issuer, so it is two gates of flip-flops and
        # the subordinate's ready (``iss_run``, ``iss_load`` and ``outstanding``'s compare in
        # front of it was one more level on every path to the issuer's registers).
        iss_ok = Signal()
        issue = Signal()
        m.d.comb += [issue.eq(iss_ok & ~stopping & (~a_valid | a_hs)), bursts.issue.eq(issue)]
        with m.If(iss_load):
            m.d.comb += iss.step.eq(1)
            m.d.sync += iss_load.eq(0)
        with m.If(issue):
            m.d.sync += [a_valid.eq(1), a_addr.eq(bursts.cur), a_len.eq(bursts.length)]
            m.d.comb += [
                d_push.eq(1), d_fifo.w_data.addr.eq(bursts.cur),
                d_fifo.w_data.len.eq(bursts.length), d_fifo.w_data.single.eq(bursts.single),
                b_fifo.push.eq(c.store), b_fifo.w_data.eq(bursts.cur),
            ]
            with m.If(bursts.end):
                with m.If(bursts.last):
                    m.d.sync += iss_run.eq(0)
                with m.Else():
                    m.d.sync += iss_load.eq(1)

        # ---- load data side: R beats to SBUF words ------------------------------------
        buf = Signal(8 * bw)
        buf_valid = Signal()
        r_beat = Signal(8)
        e_off = Signal(bsh)
        # Whether the element walker's element is the last one taken from its beat: the
        # segment ends there or the next element starts a new beat. Registered from the
        # walker's next position (lookahead), as it is in front of rready and the R/W beat
        # decisions.
        last_in_beat = Signal()
        with m.If(elw.update):
            m.d.sync += last_in_beat.eq(((elw.next_addr[:bsh] + esize)[:bsh] == 0) |
                                        ~contiguous | elw.next_last_j)
        # ``lib``: the element (or chunk) is the last taken from its beat.
        lib = Signal()
        if wide:
            m.d.comb += [e_off.eq(Mux(ilv, cw.off, elw.addr[:bsh])),
                         lib.eq(Mux(ilv, cw.beat_end, last_in_beat))]
        else:
            m.d.comb += [e_off.eq(elw.addr[:bsh]), lib.eq(last_in_beat)]
        shifted = Signal(8 * bw)
        elem = Signal(32)
        m.d.comb += shifted.eq(buf >> (e_off << 3))
        with m.Switch(esh):
            with m.Case(0):
                m.d.comb += elem.eq(shifted[:8])
            with m.Case(1):
                m.d.comb += elem.eq(shifted[:16])
            with m.Default():
                m.d.comb += elem.eq(shifted[:32])

        load = Signal()           # the load data path is active (registered: RUN of a load)
        consume = Signal()        # an element is ready and the SBUF write stage takes it
        # The SBUF write stage (``SbufWriteStage``): a two-entry FIFO between the element
        # extractor and the shared SBUF write port, so that the write request comes from
        # registers and ``sbuf_w.ready`` only reaches the stage's pointers and level flags;
        # its ``full`` in front of ``consume`` and ``rready`` is a flip-flop.
        m.submodules.w_stage = wstage = SbufWriteStage(partitions=P,
                                                       depth=self._sbuf_depth, lanes=wide)
        wiring.connect(m, wstage.sbuf_w, wiring.flipped(self.sbuf_w))
        wq_ne, wq_full = wstage.nonempty, wstage.full
        m.d.comb += [consume.eq(load & buf_valid & ~err & ~wq_full), wstage.put.eq(consume)]
        # An R beat is taken while the beat buffer is empty or gives its last element to the
        # write stage this cycle. After an R error no element is written and ``buf_valid``
        # stays 0 (the error clears it, a beat taken with ``err`` set does not set it), so
        # ``~buf_valid`` lets the bursts in flight drain without an ``err`` term, and
        # ``rready`` is one gate of four flip-flops, not of ``consume`` and a level compare
        # (``rready`` -> ``r_take & rlast`` -> ``d_fifo``'s read is then the whole path to
        # its level's enables, whatever the subordinate's ``rvalid``/``rlast`` timing).
        r_take = Signal()
        m.d.comb += [
            axi.rready.eq(load & (~buf_valid | (~wq_full & lib))),
            r_take.eq(axi.rvalid & axi.rready),
        ]
        # The element's partition, below P (SETUP checked part_start + part_count <= P), so
        # only its low bits are kept: the partition selects decode few bits.
        part = Signal(pbits)
        m.d.comb += part.eq((c.part_start + elw.p)[:pbits])
        sbuf_addr = Signal(depth_bits)
        sidx = Mux(ilv, cw.sidx, elw.sidx) if wide else elw.sidx
        m.d.comb += sbuf_addr.eq((c.sbuf_addr + sidx)[:depth_bits])
        # Bytes of the element or chunk.
        nbytes = Mux(ilv, cw.n << esh, esize) if wide else esize
        # A write the SBUF refuses stays at the stage's head and the stage fills (consume
        # stops, the element stays in buf and R is not taken: rready stays 0).
        m.d.comb += wstage.addr.eq(sbuf_addr)
        if wide:
            # A chunk's elements to the partitions from ``part_start + p_off`` on.
            pbase = Signal(pbits)
            m.d.comb += pbase.eq((c.part_start + cw.p_off)[:pbits])
            lanes = _lanes(shifted, esh, min(P, bw))
            m.d.comb += [
                wstage.mask.eq(Mux(ilv, ((Const(1) << cw.n) - 1) << pbase,
                                   Cat(*[part == p for p in range(P)]))),
                wstage.data.as_value().eq(Mux(ilv, lanes << Cat(Const(0, 5), pbase),
                                              elem.replicate(P))),
            ]
        else:
            m.d.comb += [wstage.part.eq(part), wstage.elem.eq(elem)]
        with m.If(consume):
            m.d.comb += el_step.eq(1)
            m.d.sync += self.rd_bytes.eq(self.rd_bytes + nbytes)
            with m.If(lib):
                m.d.sync += buf_valid.eq(0)
        with m.If(r_take):
            m.d.sync += [buf.eq(axi.rdata), buf_valid.eq(~err)]
            with m.If(axi.rlast):
                m.d.sync += r_beat.eq(0)
                m.d.comb += d_pop.eq(1)
            with m.Else():
                m.d.sync += r_beat.eq(r_beat + 1)
            with m.If((axi.rresp != RESP_OKAY) & ~err):
                m.d.sync += buf_valid.eq(0)
                m.d.comb += report.eq(1)          # DMA_AXI_READ

        # ---- store data side: SBUF words to W beats -----------------------------------
        st = Signal()             # the store data path is active (registered: RUN of a store)
        s1_valid = Signal()
        s1_part = Signal(pbits)
        s1_beat_end = Signal()
        acc = Signal(8 * bw)
        acc_strb = Signal(bw)
        # Where the packer is in the head burst of ``d_fifo`` (the oldest AW without all its W
        # beats), kept so that whether the next beat is the burst's last comes from flip-flops
        # and the FIFO's stored ``len == 0`` bit, not from an 8-bit compare of a beat count
        # with the FIFO's (LUT RAM) output in front of its read enable. ``w_first``: the next beat
        # is a burst's first; otherwise
        # ``w_rem`` beats follow it in the burst and ``w_rem_zero`` is ``w_rem == 0``.
        w_first = Signal(init=1)
        w_rem = Signal(8)
        w_rem_zero = Signal()
        # The W beats wait in a two-entry FIFO: the beat packer asks for room from its
        # registered level, so ``wready`` only reaches the FIFO's read side, not the packer,
        # the SBUF read and the element walker's clock enables. A beat is offered the cycle after it
        # is packed,
        # as from the register, and a full FIFO still moves a beat every cycle.
        w_beat_layout = data.StructLayout({"data": 8 * bw, "strb": bw, "last": 1})
        m.submodules.w_out = w_out = fifo.SyncFIFO(width=w_beat_layout.size, depth=2)
        w_head, w_new = data.View(w_beat_layout, w_out.r_data), Signal(w_beat_layout)
        w_valid = Signal()
        m.d.comb += [
            w_valid.eq(w_out.r_rdy), w_out.w_data.eq(w_new), w_out.r_en.eq(axi.wready),
            axi.wvalid.eq(w_valid), axi.wdata.eq(w_head.data), axi.wstrb.eq(w_head.strb),
            axi.wlast.eq(w_head.last),
        ]

        # Whether a beat can be packed (its burst's AW was issued: ``d_fifo`` not empty, and
        # ``w_out`` not full), registered from the FIFOs' next levels (lookahead): equal to
        # ``(d_level != 0) & w_out.w_rdy`` every cycle, but one flip-flop, so the packer's take,
        # and behind it the SBUF read and the element walker's clock enables, start from
        # registers, not from level compares.
        def moves(f):
            return f.r_en & f.r_rdy, f.w_en & f.w_rdy

        rd_w, wr_w = moves(w_out)
        w_go = Signal()                          # == (d_level != 0) & w_out.w_rdy
        m.d.sync += w_go.eq((d_push | ~((d_level == 0) | (d_level == 1) & d_pop)) &
                            (rd_w | ~((w_out.level == 2) | (w_out.level == 1) & wr_w)))
        s1_word = Signal(32)
        m.d.comb += s1_word.eq(self.sbuf_r.data[s1_part])
        # Stage 2: the element registered (the word after the partition multiplexer, with its
        # byte selects), so that a block RAM's output (late in the cycle on the ECP5) reaches
        # only this register, not the beat accumulator. Stage 1 moves into it whenever it is empty
        # or taken.
        s2_valid = Signal()
        s2_word = Signal(32, reset_less=True)
        s2_beat_end = Signal()
        # Where the element's bytes land in the beat, decided as the read is issued and
        # registered with it: ``s1_sel[j]`` bit ``i`` says byte ``i`` of the SBUF word is byte
        # ``j`` of the beat (``i`` below the element size, ``j = offset + i``), and
        # ``s1_strb`` is the element's byte strobe (both move to stage 2 with the word). The
        # registered word then only passes one AND-OR per beat byte before the beat
        # accumulator, instead of the element-size multiplexer and a byte shifter.
        s1_sel = [Signal(4, name=f"s1_sel{j}") for j in range(bw)]
        s1_strb = Signal(bw)
        s2_sel = [Signal(4, name=f"s2_sel{j}") for j in range(bw)]
        s2_strb = Signal(bw)
        s2_data = Signal(8 * bw)
        for j in range(bw):
            byte = Const(0, 8)
            for i in range(min(4, j + 1)):
                byte = byte | Mux(s2_sel[j][i], s2_word[8 * i:8 * i + 8], 0)
            m.d.comb += s2_data[8 * j:8 * j + 8].eq(byte)
        pk_take = Signal()
        m.d.comb += pk_take.eq(st & s2_valid & (~s2_beat_end | w_go))
        d_len, d_single = d_fifo.head.len, d_fifo.head.single
        w_last = Signal()
        m.d.comb += w_last.eq(Mux(w_first, d_single, w_rem_zero))
        if wide:
            # A chunk of the column read: the words of partitions ``s2_base`` on, packed at
            # the element size from byte ``s2_off`` of the beat.
            s1_base, s2_base = Signal(pbits), Signal(pbits)
            s1_n, s2_n = Signal.like(cw.n), Signal.like(cw.n)
            s1_off, s2_off = Signal(bsh), Signal(bsh)
            s2_words = Signal(32 * P, reset_less=True)
            words = (s2_words >> Cat(Const(0, 5), s2_base))[:32 * min(P, bw)]
            bmask = Signal(bw)
            m.d.comb += bmask.eq((Const(1) << (s2_n << esh)) - 1)
            packed = _pack(words, esh, bw) & Cat(*[b.replicate(8) for b in bmask])
            ilv_data = (packed << Cat(Const(0, 3), s2_off))[:8 * bw]
            ilv_strb = (bmask << s2_off)[:bw]
            pk_data, pk_strb = Mux(ilv, ilv_data, s2_data), Mux(ilv, ilv_strb, s2_strb)
            pk_bytes = Mux(ilv, s2_n << esh, esize)
        else:
            pk_data, pk_strb, pk_bytes = s2_data, s2_strb, esize
        with m.If(pk_take):
            m.d.sync += self.wr_bytes.eq(self.wr_bytes + pk_bytes)
            with m.If(s2_beat_end):
                m.d.comb += [w_out.w_en.eq(1), w_new.data.eq(acc | pk_data),
                             w_new.strb.eq(acc_strb | pk_strb), w_new.last.eq(w_last)]
                m.d.sync += [acc.eq(0), acc_strb.eq(0)]
                with m.If(w_last):
                    m.d.sync += w_first.eq(1)
                    m.d.comb += d_pop.eq(1)
                with m.Else():
                    m.d.sync += [w_first.eq(0),
                                 w_rem.eq(Mux(w_first, d_len, w_rem) - 1),
                                 w_rem_zero.eq(Mux(w_first, d_len, w_rem) == 1)]
            with m.Else():
                m.d.sync += [acc.eq(acc | pk_data), acc_strb.eq(acc_strb | pk_strb)]
        adv2 = Signal()
        m.d.comb += adv2.eq(~s2_valid | pk_take)
        rd_go = Signal()
        m.d.comb += rd_go.eq(st & ~el_done & (~s1_valid | adv2))
        m.d.comb += [self.sbuf_r.en.eq(rd_go), self.sbuf_r.addr.eq(sbuf_addr)]
        with m.If(adv2):
            m.d.sync += [s2_valid.eq(s1_valid), s2_word.eq(s1_word),
                         s2_beat_end.eq(s1_beat_end), s2_strb.eq(s1_strb), s1_valid.eq(0)]
            m.d.sync += [s2_sel[j].eq(s1_sel[j]) for j in range(bw)]
            if wide:
                m.d.sync += [s2_base.eq(s1_base), s2_n.eq(s1_n), s2_off.eq(s1_off),
                             s2_words.eq(self.sbuf_r.data.as_value())]
        with m.If(rd_go):
            m.d.comb += el_step.eq(1)
            m.d.sync += [s1_valid.eq(1), s1_part.eq(part), s1_beat_end.eq(lib)]
            if wide:
                m.d.sync += [s1_base.eq(pbase), s1_n.eq(cw.n), s1_off.eq(cw.off)]
            sel_next = [Cat(*[(e_off == j - i) & (i < esize) for i in range(min(4, j + 1))])
                        for j in range(bw)]
            m.d.sync += [s1_sel[j].eq(sel_next[j]) for j in range(bw)]
            m.d.sync += s1_strb.eq(Cat(*[sel.any() for sel in sel_next]))

        # B responses.
        m.d.comb += axi.bready.eq(st)
        b_take = Signal()
        m.d.comb += b_take.eq(axi.bvalid & axi.bready)
        with m.If(b_take):
            m.d.comb += b_pop.eq(1)
            with m.If((axi.bresp != RESP_OKAY) & ~err):
                m.d.comb += report.eq(1)          # DMA_AXI_WRITE

        # Outstanding bursts: +1 per issue, -1 per last R beat (loads) or B (stores).
        retire = Signal()
        m.d.comb += retire.eq(Mux(c.store, b_take, r_take & axi.rlast))
        m.d.sync += outstanding.eq(outstanding + issue - retire)
        # ``iss_ok`` == iss_run & ~iss_load & (outstanding < max_outstanding), a cycle ahead:
        # the segment's last burst clears iss_run or sets iss_load (iss_run is 0 outside RUN,
        # and a load follows the issue that sets iss_load), and outstanding moves by the issue
        # and the retirement. (A stop clears iss_run too, and iss_ok may stay 1 for a cycle
        # more; but ``stopping`` lasts until the end of IDLE's first cycle, where err and
        # aborting are cleared, and iss_ok follows iss_run = 0 by then.)
        m.d.sync += iss_ok.eq(iss_run & ~(issue & bursts.end) &
                              Mux(issue, Mux(retire, outstanding < MO, outstanding < MO - 1),
                                  retire | (outstanding < MO)))

        # Counters.
        with m.If(self.clear_counters):
            m.d.sync += [self.rd_bytes.eq(0), self.wr_bytes.eq(0)]

        # ---- control ---------------------------------------------------------------------
        # The window check (``WindowCheck``): thresholds per window registered from the
        # record and the windows, a row compared with registers only, the per-window verdicts
        # registered (``row_hit``). ``esize`` is valid from SUM and ``span`` from SPAN, so
        # all are the record's in CHECK; the windows must not change while ``busy`` (the
        # core's configuration lock), the thresholds following them one to two cycles late.
        # The verdict (a few gates) is taken the cycle after the row's compare (``row_v``: the
        # registers hold a row; ``row_addr``/``row_last``: its first element address and
        # whether it is the record's last row), so neither the compares nor the thresholds
        # are in front of the error report or the state change. It is registered every
        # cycle (no state decode or hold behind the compares) and only taken with ``row_v``,
        # in CHECK from its second cycle on, where the previous cycle was CHECK too.
        m.submodules.win_check = wchk = WindowCheck(self._windows)
        m.d.comb += [wchk.windows.eq(self.windows), wchk.need.eq(Mux(c.store, 0b10, 0b01)),
                     wchk.esize.eq(esize), wchk.addr.eq(chk.addr),
                     wchk.span.eq(Mux(union, span + ((c.part_count - 1) << esh), span))]
        row_hit = wchk.hit
        row_addr = Signal(32)
        row_last = Signal()
        row_v = Signal()
        row_ok = Signal()
        m.d.comb += row_ok.eq(row_hit.any())

        drained = Signal()
        m.d.comb += drained.eq(~a_valid & (outstanding == 0) & ~w_valid)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(~self.abort)
                m.d.sync += [aborting.eq(0), err.eq(0)]
                m.d.comb += take.eq(self.cmd.valid & ~self.abort)
                m.d.sync += chk_hold.eq(take)
                with m.If(take):
                    m.d.sync += [c.eq(self.cmd.payload), n0_m1.eq(self.cmd.payload.n0 - 1)]
                    m.next = "SETUP"
            with m.State("SETUP"):
                # The record's checks are registered here and decided in SPAN, so that no
                # compare of the record is in front of the error report or the state change.
                m.d.comb += self.busy.eq(1)
                align_mask = Signal(2)
                m.d.comb += align_mask.eq((1 << fmt_esh) - 1)
                m.d.sync += [
                    esh.eq(fmt_esh),
                    contiguous.eq(c.ext_stride0 == (1 << fmt_esh)),
                    s_empty.eq((c.n0 == 0) | (c.n1 == 0) | (c.part_count == 0)),
                    s_misaligned.eq((
                        (c.ext_addr | c.ext_stride0 | c.ext_stride1 | c.ext_part_stride)[:2] &
                        align_mask).any()),
                    s_part_end.eq(c.part_start + c.part_count),
                    s_part_over.eq(c.part_start + c.part_count > P),
                    row_v.eq(0), union_off.eq(0),
                ]
                if wide:
                    # Across partitions the elements move in another order (columns): only
                    # where no two of them share a destination (the order is then unseen).
                    # Loads: the SBUF words differ (n0*n1 <= depth). Stores: columns and
                    # rows ascend without overlap (strides below 2**16, so no wrap).
                    col = c.part_count << fmt_esh
                    s0, s1 = c.ext_stride0, c.ext_stride1
                    st_ok = ((s0[16:] == 0) & (s0 >= col) &
                             ((c.n1 == 1) | ((s1[16:] == 0) & (s1 >= c.n0 * s0[:16]))))
                    ld_ok = c.n0 * c.n1 <= self._sbuf_depth
                    m.d.sync += [ilv.eq((c.ext_part_stride == (1 << fmt_esh)) &
                                        Mux(c.store, st_ok, ld_ok)),
                                 rows_contig.eq(s0 == col)]
                # The window check's walker is loaded here to SPAN (``chk_hold``), whether or
                # not the record goes on, so that no verdict is in front of its clock enables.
                with m.If(stopping):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "SUM"
            with m.State("SUM"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += span.eq((span_hi << 16) + span_lo)
                with m.If(stopping):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "SPAN"
            with m.State("SPAN"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [
                    seg_bytes.eq(Mux(contiguous, c.n0 << esh, esize)),
                    chk_hold.eq(0),
                ]
                if wide:
                    col_bytes = c.part_count << esh
                    with m.If(ilv):
                        m.d.sync += seg_bytes.eq(Mux(rows_contig, col_bytes * c.n0, col_bytes))
                with m.If(stopping):
                    m.next = "IDLE"
                with m.Elif(s_empty):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif(s_misaligned | s_part_over):
                    m.d.comb += report.eq(1)      # DMA_ALIGN or SBUF_RANGE
                    m.next = "IDLE"
                with m.Else():
                    m.next = "CHECK"
                # The transfer's walkers and data-path state are set up here, where no verdict
                # decides it (they do not move before RUN: no load/store data path is active
                # and iss_load is 0 outside RUN, an earlier record's stale one being cleared in
                # IDLE).
                m.d.comb += [iss.start.eq(1), elw.start.eq(1)]
                if wide:
                    m.d.comb += cw.start.eq(1)
                m.d.sync += [buf_valid.eq(0), s1_valid.eq(0), s2_valid.eq(0), acc.eq(0),
                             acc_strb.eq(0),
                             w_first.eq(1), r_beat.eq(0)]
            with m.State("CHECK"):
                # The walker steps every cycle (from the first CHECK cycle on) and the
                # next row's verdicts are registered every cycle, so no verdict is in front of
                # the walker's clock enables; the verdict is on the registered row.
                m.d.comb += self.busy.eq(1)
                m.d.sync += [
                    row_addr.eq(chk.addr), row_last.eq(chk.last), row_v.eq(1),
                ]
                with m.If(stopping):
                    m.next = "IDLE"
                with m.Elif(row_v & ~row_ok & union):
                    # Back to SPAN with the walker held: the rows one by one.
                    m.d.sync += [union_off.eq(1), chk_hold.eq(1), row_v.eq(0)]
                    m.next = "SPAN"
                with m.Elif(row_v & ~row_ok):
                    m.d.comb += report.eq(1)      # DMA_WINDOW
                    m.next = "IDLE"
                with m.Elif(row_v & row_last):
                    m.d.sync += [iss_run.eq(1), iss_load.eq(1), load.eq(~c.store),
                                 st.eq(c.store)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                finished = Signal()
                m.d.comb += finished.eq(~iss_run & drained & el_done &
                                        Mux(c.store, ~s1_valid & ~s2_valid,
                                            ~buf_valid & ~wq_ne))
                with m.If(stopping):
                    # No new bursts (issue is gated by stopping); finish the ones in flight.
                    m.d.sync += iss_run.eq(0)
                    with m.If(drained):
                        m.d.sync += [load.eq(0), st.eq(0)]
                        m.next = "IDLE"
                with m.Elif(finished):
                    m.d.sync += [self.done.eq(1), load.eq(0), st.eq(0)]
                    m.next = "IDLE"
        # The error report (one source at a time: AXI responses only in RUN, the record's
        # checks only in SPAN, the window check only in CHECK, where ``row_v`` is 1; it is 0
        # in SPAN). The first error of a record wins (AXI reports wait for ~err).
        with m.If(report):
            m.d.sync += [err.eq(1), self.err_valid.eq(1)]
            with m.If(load):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_AXI_READ),
                             self.err_addr.eq(d_fifo.head.addr + (r_beat << bsh)),
                             self.err_info.eq(axi.rresp)]
            with m.Elif(st):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_AXI_WRITE),
                             self.err_addr.eq(b_fifo.head), self.err_info.eq(axi.bresp)]
            with m.Elif(row_v):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_WINDOW),
                             self.err_addr.eq(row_addr), self.err_info.eq(c.store)]
            with m.Elif(s_misaligned):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_ALIGN),
                             self.err_addr.eq(c.ext_addr), self.err_info.eq(0)]
            with m.Else():
                m.d.sync += [self.err_code.eq(ErrorCode.SBUF_RANGE),
                             self.err_addr.eq(c.sbuf_addr), self.err_info.eq(s_part_end)]
        # After an error or abort the write stage drains in IDLE (its elements were good).
        with m.If(wq_ne):
            m.d.comb += self.busy.eq(1)
        return m

