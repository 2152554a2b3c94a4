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

   *Across partitions* (``ext_part_stride`` equal to the element size, at every width,
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

Records back to back (``DmaControl``, ``docs/dma.md``): the front (the setup, the checks and
the issue above, on the control's ``rec``) takes the next record once the current one's bursts
are issued and the data side (the element walk and the data paths, on a copy of the record
taken when it starts) holds it; records of one direction overlap on the bus, the data side
takes them one at a time and in order, and a record of the other direction issues only when
every earlier one is done. A load's data side takes no R beat after its record's last
(``r_hold``), so the next record's beats wait on R until it starts.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import AXI4Signature, BURST_INCR
from rtl.bus.mem_ports import PartitionReadSignature, PartitionWriteSignature
from sim.config import check_int, check_pow2
from sim.errors import ERROR_CODE_BITS

from .burst_issuer import BurstIssuer
from .control import DmaControl
from .element_walk import ElementWalk
from .error_report import ErrorReport
from .layouts import DmaRecord
from .load_path import LoadPath
from .protection import ProtectionCheck
from .record_checks import RecordChecks
from .store_path import StorePath
from .window_check import WindowLayout

__all__ = ["DmaRecord", "WindowLayout", "DMA"]


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

    The units in ``rtl/dma/`` take these parameters with the meanings and ranges given here;
    each unit documents only what is its own.

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
        The DMA's SBUF ports (``rtl/bus/mem_ports.py``); one word per cycle, or across
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
        P, depth, dw = self._partitions, self._sbuf_depth, self._data_width
        axi = self.axi

        m.submodules.control = ctl = DmaControl()
        m.submodules.checks = chk = RecordChecks(partitions=P, sbuf_depth=depth, data_width=dw)
        m.submodules.protection = prot = ProtectionCheck(windows=self._windows, data_width=dw)
        m.submodules.issuer = iss = BurstIssuer(data_width=dw, max_burst=self.burst_beats,
                                                max_outstanding=self._max_outstanding)
        m.submodules.elements = elw = ElementWalk(partitions=P, sbuf_depth=depth,
                                                  data_width=dw)
        m.submodules.load_path = ld = LoadPath(partitions=P, sbuf_depth=depth, data_width=dw)
        m.submodules.store_path = sto = StorePath(partitions=P, sbuf_depth=depth,
                                                  data_width=dw,
                                                  max_outstanding=self._max_outstanding)
        m.submodules.errors = erp = ErrorReport(data_width=dw)
        c = ctl.rec

        # The data side's record and derived values: a copy that follows the front's while the
        # data side is free and holds while it works on a record (``d_follow``), so that the
        # data side's walk and paths read registers, not a choice between the copy and the
        # front's record. It equals the front's at ``dstart``, when the walk starts on it.
        dr = Signal(DmaRecord)
        dr_esh = Signal(2)
        dr_esize = Signal(3)
        dr_contig = Signal()
        dr_ilv = Signal()
        dr_rows = Signal()
        with m.If(ctl.d_follow):
            m.d.sync += [dr.eq(c), dr_esh.eq(chk.esh), dr_esize.eq(chk.esize),
                         dr_contig.eq(chk.contiguous), dr_ilv.eq(chk.ilv),
                         dr_rows.eq(chk.rows_contig)]

        # Control: the command, the states' strobes, the records' ends.
        wiring.connect(m, wiring.flipped(self.cmd), ctl.cmd)
        m.d.comb += [
            ctl.abort.eq(self.abort), self.busy.eq(ctl.busy), self.done.eq(ctl.done),
            ctl.empty.eq(chk.empty), ctl.misaligned.eq(chk.misaligned),
            ctl.part_over.eq(chk.part_over),
            ctl.row_v.eq(prot.row_v), ctl.row_ok.eq(prot.row_ok),
            ctl.row_last.eq(prot.row_last), ctl.union.eq(prot.union),
            ctl.r_error.eq(ld.r_error), ctl.b_error.eq(iss.b_error),
            ctl.drained.eq(iss.quiet & ~sto.w_valid), ctl.running.eq(iss.running | iss.a_valid),
            ctl.ld_fin.eq(elw.done & ~ld.buffered & ~ld.pending),
            ctl.st_fin.eq(elw.done & ~sto.busy),
            ctl.r_rec_last.eq(ld.r_last & iss.data.last), ctl.b_rec.eq(iss.b_rec),
            ctl.pending.eq(ld.pending),
        ]
        # The record's derived values and its protection check.
        m.d.comb += [
            chk.cmd.eq(self.cmd.payload), chk.idle.eq(ctl.idle), chk.rec.eq(c),
            chk.setup.eq(ctl.setup), chk.sum.eq(ctl.sum), chk.span.eq(ctl.span),
            prot.rec.eq(c), prot.windows.eq(self.windows), prot.union_tail.eq(chk.part_tail),
            prot.esize.eq(chk.esize), prot.row_span.eq(chk.row_span), prot.ilv.eq(chk.ilv),
            prot.idle.eq(ctl.idle), prot.take.eq(ctl.take), prot.setup.eq(ctl.setup),
            prot.span.eq(ctl.span), prot.check.eq(ctl.check), prot.retry.eq(ctl.retry),
        ]
        # The burst issuer on AR (loads) or AW (stores), and the write responses.
        m.d.comb += [
            iss.rec.eq(c), iss.contiguous.eq(chk.contiguous), iss.ilv.eq(chk.ilv),
            iss.rows_contig.eq(chk.rows_contig), iss.seg_bytes.eq(chk.seg_bytes),
            iss.walk.eq(ctl.walk), iss.run.eq(ctl.run), iss.halt.eq(ctl.halt),
            iss.stopping.eq(ctl.stopping), iss.st.eq(ctl.st | ctl.b_wait), iss.err.eq(ctl.err),
            iss.a_ready.eq(Mux(c.store, axi.awready, axi.arready)),
            iss.data_pop.eq(ld.r_last | sto.data_pop), iss.r_last.eq(ld.r_last),
            iss.bvalid.eq(axi.bvalid), iss.bresp.eq(axi.bresp), axi.bready.eq(iss.bready),
            axi.arid.eq(0), axi.awid.eq(0),
            axi.araddr.eq(iss.a_addr), axi.awaddr.eq(iss.a_addr),
            axi.arlen.eq(iss.a_len), axi.awlen.eq(iss.a_len),
            axi.arsize.eq((dw // 8 - 1).bit_length()),
            axi.awsize.eq((dw // 8 - 1).bit_length()),
            axi.arburst.eq(BURST_INCR), axi.awburst.eq(BURST_INCR),
            axi.arcache.eq(0b0011), axi.awcache.eq(0b0011),
            axi.arprot.eq(0), axi.awprot.eq(0), axi.arlock.eq(0), axi.awlock.eq(0),
            axi.arvalid.eq(iss.a_valid & ~c.store), axi.awvalid.eq(iss.a_valid & c.store),
        ]
        # The SBUF side's walk, stepped by the data path in use.
        m.d.comb += [
            elw.rec.eq(dr), elw.esh.eq(dr_esh), elw.esize.eq(dr_esize),
            elw.contiguous.eq(dr_contig), elw.ilv.eq(dr_ilv),
            elw.rows_contig.eq(dr_rows), elw.start.eq(ctl.dstart),
            elw.step.eq(ld.step | sto.step),
        ]
        # The load side (R beats to SBUF writes) and the store side (SBUF reads to W beats).
        for path in (ld, sto):
            m.d.comb += [
                path.clear.eq(ctl.dstart), path.ilv.eq(dr_ilv), path.esh.eq(dr_esh),
                path.off.eq(elw.off), path.beat_end.eq(elw.beat_end), path.part.eq(elw.part),
                path.addr.eq(elw.addr), path.chunk_base.eq(elw.chunk_base),
                path.chunk_n.eq(elw.chunk_n), path.clear_counters.eq(self.clear_counters),
            ]
        wiring.connect(m, ld.sbuf_w, wiring.flipped(self.sbuf_w))
        wiring.connect(m, sto.sbuf_r, wiring.flipped(self.sbuf_r))
        m.d.comb += [
            ld.load.eq(ctl.load), ld.r_hold.eq(ctl.r_hold & ~ctl.err), ld.err.eq(ctl.err),
            ld.nbytes.eq(elw.nbytes),
            ld.rvalid.eq(axi.rvalid), ld.rlast.eq(axi.rlast), ld.rdata.eq(axi.rdata),
            ld.rresp.eq(axi.rresp), axi.rready.eq(ld.rready), self.rd_bytes.eq(ld.rd_bytes),
            sto.st.eq(ctl.st), sto.done.eq(elw.done), sto.esize.eq(dr_esize),
            sto.chunk_off.eq(elw.chunk_off),
            sto.data_len.eq(iss.data.len), sto.data_single.eq(iss.data.single),
            sto.data_level.eq(iss.data_level), sto.data_push.eq(iss.data_push),
            axi.wvalid.eq(sto.w_valid), axi.wdata.eq(sto.w_data), axi.wstrb.eq(sto.w_strb),
            axi.wlast.eq(sto.w_last), sto.w_ready.eq(axi.wready),
            self.wr_bytes.eq(sto.wr_bytes),
        ]
        # The error report.
        m.d.comb += [
            erp.report.eq(ctl.report), erp.hold.eq(ctl.hold), erp.release.eq(ctl.release),
            erp.load.eq(ctl.load), erp.st.eq(ctl.st | ctl.b_wait),
            erp.row_v.eq(prot.row_v), erp.misaligned.eq(chk.misaligned),
            erp.r_burst.eq(iss.data.addr), erp.r_beat.eq(ld.r_beat), erp.rresp.eq(axi.rresp),
            erp.bresp.eq(axi.bresp), erp.b_addr.eq(iss.b_addr),
            erp.row_addr.eq(prot.row_addr), erp.ext_addr.eq(c.ext_addr),
            erp.store.eq(c.store), erp.sbuf_addr.eq(c.sbuf_addr), erp.part_end.eq(chk.part_end),
            self.err_valid.eq(erp.err_valid), self.err_code.eq(erp.err_code),
            self.err_addr.eq(erp.err_addr), self.err_info.eq(erp.err_info),
        ]
        return m
