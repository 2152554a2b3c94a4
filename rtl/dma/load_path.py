"""The DMA's load data side: R beats to SBUF writes."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import RESP_OKAY
from rtl.bus.mem_ports import PartitionWriteSignature
from sim.config import check_int, check_pow2

from .lanes import BeatUnpack
from .sbuf_write_stage import SbufWriteStage

__all__ = ["LoadPath"]


class LoadPath(wiring.Component):
    """Takes R beats into a beat buffer and gives their elements (or, across partitions,
    chunks) in walk order to the SBUF write port, one per cycle.

    An R beat is taken (``rready``) while ``load`` and the beat buffer is empty or gives its
    last element (``beat_end``) to the write stage this cycle. The element at ``off`` of the
    buffered beat is entered into a two-entry write stage (``SbufWriteStage``) when it has
    room (``step``: the walk moves on); the stage's head is the request on ``sbuf_w``, one
    cycle after the element left the buffer, and is held while the shared port's ``ready``
    is 0: the stage fills, ``step`` and ``rready`` stop, nothing is lost or repeated.
    ``rready`` and ``step`` are gates of flip-flops (the stage's ``full`` is one).

    An R beat with a response other than OKAY raises ``r_error`` (unless ``err``) and is not
    buffered; while ``err`` no beat is buffered, so the bursts in flight drain. ``clear``
    empties the buffer (between records). The beat count restarts on each burst's last beat
    only: every burst's R beats are taken to its last (a record's bursts drain after an
    error or an abort), so it is 0 whenever a record starts, and ``clear`` (the control's
    ``dstart``, a deep decode) stays out of its reset. ``pending``: the
    write stage holds an element (the DMA is busy until it is written).

    Parameters
    ----------
    partitions, sbuf_depth, data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    load, err, clear, ilv : In(1)
    r_hold : In(1)
        Take no R beat (the record has all its beats; the next record's follow on R).
    esh, off, beat_end, part, addr, chunk_base, chunk_n, nbytes : In
        The element (chunk) from the element walk: ``ElementWalk``'s members of these names
        and shapes (``esh`` the record's element-size shift).
    step : Out(1)
        The element enters the write stage.
    rvalid, rlast : In(1)
    rdata : In(data_width)
    rresp : In(2)
    rready : Out(1)
    r_last : Out(1)
        A burst's last R beat is taken.
    r_error : Out(1)
    r_beat : Out(8)
        The beat's index in its burst.
    buffered : Out(1)
        The beat buffer holds a beat.
    pending : Out(1)
    sbuf_w : Out(PartitionWriteSignature(partitions, sbuf_depth))
    clear_counters : In(1)
    rd_bytes : Out(32)
        Bytes written to SBUF since reset or ``clear_counters``.
    """

    def __init__(self, *, partitions, sbuf_depth, data_width=32):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._sbuf_depth = check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 16)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        bw = data_width // 8
        pbits = max(1, (partitions - 1).bit_length())
        super().__init__({
            "load": In(1), "r_hold": In(1), "err": In(1), "clear": In(1), "ilv": In(1),
            "esh": In(2),
            "off": In(range(bw)), "beat_end": In(1), "part": In(pbits),
            "addr": In(range(sbuf_depth)), "chunk_base": In(pbits),
            "chunk_n": In(range(bw + 1)), "nbytes": In(range(bw + 1)), "step": Out(1),
            "rvalid": In(1), "rlast": In(1), "rdata": In(data_width), "rresp": In(2),
            "rready": Out(1), "r_last": Out(1), "r_error": Out(1), "r_beat": Out(8),
            "buffered": Out(1), "pending": Out(1),
            "sbuf_w": Out(PartitionWriteSignature(partitions, sbuf_depth)),
            "clear_counters": In(1), "rd_bytes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        P = self._partitions
        bw = self._data_width // 8
        buf = Signal(8 * bw)
        buf_valid = self.buffered
        m.submodules.unpack = unpack = BeatUnpack(data_width=self._data_width,
                                                  lanes=min(P, bw))
        m.d.comb += [unpack.beat.eq(buf), unpack.off.eq(self.off), unpack.esh.eq(self.esh)]

        m.submodules.w_stage = wstage = SbufWriteStage(partitions=P, depth=self._sbuf_depth)
        wiring.connect(m, wstage.sbuf_w, wiring.flipped(self.sbuf_w))
        consume = self.step
        m.d.comb += [consume.eq(self.load & buf_valid & ~self.err & ~wstage.full),
                     wstage.put.eq(consume), wstage.addr.eq(self.addr),
                     self.pending.eq(wstage.nonempty)]
        # After an R error no element is written and ``buf_valid`` stays 0 (the error clears
        # it, a beat taken with ``err`` set does not set it), so ``~buf_valid`` lets the
        # bursts in flight drain without an ``err`` term, and ``rready`` is one gate of four
        # flip-flops.
        r_take = Signal()
        m.d.comb += [
            self.rready.eq(self.load & ~self.r_hold &
                           (~buf_valid | (~wstage.full & self.beat_end))),
            r_take.eq(self.rvalid & self.rready),
            self.r_last.eq(r_take & self.rlast),
            self.r_error.eq(r_take & (self.rresp != RESP_OKAY) & ~self.err),
        ]
        # A chunk's elements to the partitions from ``chunk_base`` on.
        base = self.chunk_base
        m.d.comb += [
            wstage.mask.eq(Mux(self.ilv, ((Const(1) << self.chunk_n) - 1) << base,
                               Cat(*[self.part == p for p in range(P)]))),
            wstage.data.as_value().eq(Mux(self.ilv, unpack.lanes << Cat(Const(0, 5), base),
                                          unpack.elem.replicate(P))),
        ]
        with m.If(consume):
            m.d.sync += self.rd_bytes.eq(self.rd_bytes + self.nbytes)
            with m.If(self.beat_end):
                m.d.sync += buf_valid.eq(0)
        with m.If(r_take):
            m.d.sync += [buf.eq(self.rdata), buf_valid.eq(~self.err)]
            with m.If(self.rlast):
                m.d.sync += self.r_beat.eq(0)
            with m.Else():
                m.d.sync += self.r_beat.eq(self.r_beat + 1)
        with m.If(self.r_error):
            m.d.sync += buf_valid.eq(0)
        with m.If(self.clear_counters):
            m.d.sync += self.rd_bytes.eq(0)
        with m.If(self.clear):
            m.d.sync += buf_valid.eq(0)
        return m
