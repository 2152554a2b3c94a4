"""The DMA's element walk: the order in which the SBUF side moves a record's data."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int, check_pow2

from .column_walker import ColumnWalker
from .layouts import DmaRecord
from .walker import AddressWalker

__all__ = ["ElementWalk"]


class ElementWalk(wiring.Component):
    """The element (or, across partitions, the chunk) the SBUF side moves next: its SBUF word
    address and partition, its byte offset in the bus beat, and whether it is the last taken
    from its beat.

    Elements go ``p`` outermost, then ``i``, then ``j`` (``AddressWalker``); across
    partitions (``ilv``) chunks go column by column (``ColumnWalker``), a chunk being a
    column's elements in one beat. ``start`` loads the first element, ``step`` moves to the
    next (a stalled data path does not step); ``done`` is set by the step at the last one.
    All outputs are registers or a few gates of them and the record: ``beat_end`` of an
    element is registered from the walker's next position (lookahead), as it is in front of
    the data paths' beat decisions.

    Parameters
    ----------
    partitions, sbuf_depth, data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    rec : In(DmaRecord)
    esh : In(2)
    esize : In(3)
    contiguous, ilv, rows_contig : In(1)
    start, step : In(1)
    done : Out(1)
    off : Out(range(data_width // 8))
        The element's (chunk's) first byte in the beat.
    beat_end : Out(1)
        The element (chunk) is the last taken from its beat: the segment ends there or the
        next one starts a new beat.
    part : Out(pbits)
        The element's partition (``part_start + p``; below P once the record's checks passed).
    addr : Out(range(sbuf_depth))
        The element's (chunk's) SBUF word address.
    chunk_base : Out(pbits)
        The chunk's first partition.
    chunk_n : Out(range(data_width // 8 + 1))
        Elements in the chunk.
    chunk_off : Out(range(data_width // 8))
        The chunk's first byte in the beat.
    nbytes : Out(range(data_width // 8 + 1))
        Bytes of the element (chunk).
    """

    def __init__(self, *, partitions, sbuf_depth, data_width=32):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._sbuf_depth = check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 16)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        bw = data_width // 8
        pbits = max(1, (partitions - 1).bit_length())
        super().__init__({
            "rec": In(DmaRecord), "esh": In(2), "esize": In(3),
            "contiguous": In(1), "ilv": In(1), "rows_contig": In(1),
            "start": In(1), "step": In(1), "done": Out(1),
            "off": Out(range(bw)), "beat_end": Out(1), "part": Out(pbits),
            "addr": Out(range(sbuf_depth)), "chunk_base": Out(pbits),
            "chunk_n": Out(range(bw + 1)), "chunk_off": Out(range(bw)),
            "nbytes": Out(range(bw + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.rec
        bw = self._data_width // 8
        bsh = (bw - 1).bit_length()
        pbits = len(self.part)
        depth_bits = (self._sbuf_depth - 1).bit_length()
        m.submodules.elems = elw = AddressWalker()
        m.d.comb += [
            elw.base.eq(c.ext_addr), elw.ps.eq(c.ext_part_stride), elw.si.eq(c.ext_stride1),
            elw.ni.eq(c.n1), elw.np.eq(c.part_count), elw.nj.eq(c.n0),
            elw.sj.eq(c.ext_stride0), elw.start.eq(self.start),
            elw.step.eq(self.step & ~self.ilv),
        ]
        last_in_beat = Signal()
        with m.If(elw.update):
            m.d.sync += last_in_beat.eq(((elw.next_addr[:bsh] + self.esize)[:bsh] == 0) |
                                        ~self.contiguous | elw.next_last_j)
        # The partition, below P (the record's checks passed before the walk moves), so
        # only its low bits are kept: the partition selects decode few bits.
        m.d.comb += self.part.eq((c.part_start + elw.p)[:pbits])
        m.submodules.cols = cw = ColumnWalker(data_width=self._data_width)
        m.d.comb += [cw.base.eq(c.ext_addr), cw.s0.eq(c.ext_stride0),
                     cw.s1.eq(c.ext_stride1), cw.n0.eq(c.n0), cw.n1.eq(c.n1),
                     cw.count.eq(c.part_count), cw.esh.eq(self.esh),
                     cw.rows_contig.eq(self.rows_contig),
                     cw.start.eq(self.start), cw.step.eq(self.step & self.ilv)]
        m.d.comb += [
            self.done.eq(Mux(self.ilv, cw.done, elw.done)),
            self.off.eq(Mux(self.ilv, cw.off, elw.addr[:bsh])),
            self.beat_end.eq(Mux(self.ilv, cw.beat_end, last_in_beat)),
            self.addr.eq((c.sbuf_addr + Mux(self.ilv, cw.sidx, elw.sidx))[:depth_bits]),
            self.chunk_base.eq((c.part_start + cw.p_off)[:pbits]),
            self.chunk_n.eq(cw.n), self.chunk_off.eq(cw.off),
            self.nbytes.eq(Mux(self.ilv, cw.n << self.esh, self.esize)),
        ]
        return m
