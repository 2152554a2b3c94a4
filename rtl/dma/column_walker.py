"""The DMA's walk of a record across partitions: a beat's elements to SBUF columns."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_pow2

__all__ = ["ColumnWalker"]


class ColumnWalker(wiring.Component):
    """Walks a record whose partitions are consecutive in external memory (``ext_part_stride``
    equal to the element size) in chunks: a chunk is the elements of one column ``(i, j)``
    (``c = part_count`` elements at one SBUF address, partitions ``part_start + p_off`` on)
    that lie in one bus beat.

    Column ``(i, j)`` starts at external byte ``base + i*s1 + j*s0``; its elements follow at the
    element size. Columns are visited ``i`` outer, ``j`` inner; ``sidx = i*n0 + j`` is the
    column's SBUF word offset. The current chunk starts at ``addr`` (``off``: its byte offset
    in the beat) and holds ``n = min(elements left in the beat, c - p_off)`` elements.

    ``start`` loads the first chunk (it wins over ``step``); ``step`` moves to the next; a
    step at the last chunk sets ``done``. The counts and strides must not change between
    ``start`` and the last step; the counts are at least 1.

    Parameters
    ----------
    data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    start, step : In(1)
    base, s0, s1 : In(32)
        The record's ``ext_addr``, ``ext_stride0`` and ``ext_stride1``.
    n0, n1 : In(16)
    count : In(8)
        ``part_count``, elements per column.
    esh : In(2)
        log2 of the element size in bytes.
    addr : Out(32)
        External byte address of the chunk's first element.
    off : Out(range(data_width // 8))
        Its byte offset in the beat.
    p_off : Out(8)
        Its partition offset in the column.
    n : Out(range(data_width // 8 + 1))
        Elements in the chunk.
    sidx : Out(32)
        The column's SBUF word offset.
    beat_end : Out(1)
        The chunk ends the beat: it reaches the beat's end, or it ends its column and the next
        column starts a new segment (``rows_contig`` 0, or the row's last column), or it is the
        record's last.
    rows_contig : In(1)
        The columns of a row abut (``s0 == count * esize``): a row is one segment, else a
        column is one.
    last : Out(1)
        The chunk is the record's last.
    done : Out(1)
    """

    def __init__(self, *, data_width):
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        bw = data_width // 8
        super().__init__({
            "start": In(1), "step": In(1),
            "base": In(32), "s0": In(32), "s1": In(32), "n0": In(16), "n1": In(16),
            "count": In(8), "esh": In(2), "rows_contig": In(1),
            "addr": Out(32), "off": Out(range(bw)), "p_off": Out(8), "n": Out(range(bw + 1)),
            "sidx": Out(32), "beat_end": Out(1), "last": Out(1), "done": Out(1),
        })

    data_width = property(lambda self: self._data_width)

    def elaborate(self, platform):
        m = Module()
        bw = self._data_width // 8
        bsh = (bw - 1).bit_length()
        col_addr = Signal(32)                    # the column's first byte
        row_addr = Signal(32)                    # the row's first column
        j_left = Signal(16)                      # columns after this one in the row
        i_left = Signal(16)                      # rows after this one
        room = Signal(range(bw + 1))             # elements from the chunk to the beat's end
        rem = Signal(9)                          # elements left in the column
        col_end = Signal()                       # rem <= room
        fit = Signal()                           # rem == room
        last_j, last_i = Signal(), Signal()      # this column is its row's last, the last row
        # The chunk's position (``off``, ``rem``), its size's terms (``room``, ``col_end``,
        # ``fit``) and the "last" flags are registers updated a step ahead, so that the
        # chunk's size, ``beat_end`` (in front of ``rready``) and the step's decisions are a
        # gate or two of registers, not an adder and a compare.
        m.d.comb += [
            self.addr.eq(col_addr + (self.p_off << self.esh)),
            self.n.eq(Mux(col_end, rem, room)),
            self.last.eq(col_end & last_j & last_i),
            self.beat_end.eq(~col_end | fit | ~self.rows_contig | last_j),
        ]
        next_row = row_addr + self.s1
        next_col = col_addr + self.s0
        # The next chunk's position, in two sets computed from registers alone (the record's
        # copy and the walk's state), so that ``start`` and ``step`` only select and enable
        # them: the record's first chunk, and the chunk after this one (the next beat's start
        # when the chunk reaches the beat's end, else the next column's first element).
        s_off = Signal(bsh)
        s_room = Signal(range(bw + 1))
        k_off = Signal(bsh)
        k_rem = Signal(9)
        k_room = Signal(range(bw + 1))
        m.d.comb += [
            s_off.eq(self.base[:bsh]),
            s_room.eq((bw - s_off) >> self.esh),
            k_off.eq(Mux(~col_end, 0, Mux(last_j, next_row[:bsh], next_col[:bsh]))),
            k_rem.eq(Mux(col_end, self.count, rem - room)),
            k_room.eq((bw - k_off) >> self.esh),
        ]
        with m.If(self.start):
            m.d.sync += [self.off.eq(s_off), rem.eq(self.count), room.eq(s_room),
                         col_end.eq(self.count <= s_room), fit.eq(self.count == s_room)]
        with m.Elif(self.step & ~self.done & ~self.last):
            m.d.sync += [self.off.eq(k_off), rem.eq(k_rem), room.eq(k_room),
                         col_end.eq(k_rem <= k_room), fit.eq(k_rem == k_room)]
        with m.If(self.start):
            m.d.sync += [col_addr.eq(self.base), row_addr.eq(self.base), self.p_off.eq(0),
                         self.sidx.eq(0), j_left.eq(self.n0 - 1), i_left.eq(self.n1 - 1),
                         last_j.eq(self.n0 == 1), last_i.eq(self.n1 == 1), self.done.eq(0)]
        with m.Elif(self.step & ~self.done):
            with m.If(~col_end):
                m.d.sync += self.p_off.eq(self.p_off + self.n)
            with m.Elif(self.last):
                m.d.sync += self.done.eq(1)
            with m.Else():
                m.d.sync += [self.p_off.eq(0), self.sidx.eq(self.sidx + 1)]
                with m.If(last_j):
                    m.d.sync += [row_addr.eq(next_row), col_addr.eq(next_row),
                                 j_left.eq(self.n0 - 1), last_j.eq(self.n0 == 1),
                                 i_left.eq(i_left - 1), last_i.eq(i_left == 1)]
                with m.Else():
                    m.d.sync += [col_addr.eq(next_col), j_left.eq(j_left - 1),
                                 last_j.eq(j_left == 1)]
        return m
