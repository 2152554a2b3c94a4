"""The DMA's record setup: a record's element size, checks, row span and segment size."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.dsp import registered_product
from sim.config import check_int, check_pow2
from sim.dtypes import STORAGE_BITS

from .layouts import DmaRecord

__all__ = ["RecordChecks", "seg_bits_of"]


def seg_bits_of(data_width):
    """Bits of a segment's byte count: a row across partitions holds up to ``n0 * 255 * 4``
    bytes (at every ``data_width``)."""
    return 27


class RecordChecks(wiring.Component):
    """The values the DMA derives from a record before it moves data, registered in the three
    setup cycles so that no decode, compare or multiply of the record is in front of the
    engine's decisions.

    Timing (the DMA's states): ``take`` is the cycle the record is taken (``cmd`` holds it,
    ``rec`` takes it at the edge); in ``setup`` (the next cycle) the element size, the
    checks and ``contiguous``/``rows_contig`` are registered (valid from the cycle after); in
    ``sum`` the row span (``(n0 - 1) * ext_stride0``) and ``ilv``; in ``span`` the segment
    size. Between ``take`` and ``setup`` the span's two partial products, ``part_count * n0``
    (the segment size of a row across partitions) and the products ``ilv`` compares
    (``n0 * n1``, ``n0 * ext_stride0``) are formed in multipliers with registered
    operands and products (``rtl.arith.dsp``: one MULT18X18D each on an ECP5), fed every
    cycle with ``cmd``'s values while ``idle`` (the record taken is the one offered at the
    take) and ``rec``'s after, so the products are the record's from ``sum`` on. The
    operands are selected by ``idle``, a state register, not by ``take``, which depends on
    the command's ``valid``. Outputs hold between the strobes.

    Parameters
    ----------
    partitions, sbuf_depth, data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    cmd : In(DmaRecord)
        The record offered (read while ``idle``).
    idle : In(1)
        The DMA's IDLE state: a record taken leaves it at the next edge (``rec`` then holds
        ``cmd``'s last value).
    rec : In(DmaRecord)
        The record being executed (from the cycle after ``take``).
    setup, sum, span : In(1)
        The strobes of the three setup cycles.
    esh : Out(2)
        log2 of the element size in bytes (``STORAGE_BITS[fmt]``).
    esize : Out(3)
    contiguous : Out(1)
        ``ext_stride0`` is the element size: a row is one segment.
    empty : Out(1)
        ``n0``, ``n1`` or ``part_count`` is 0.
    misaligned : Out(1)
        ``ext_addr`` or a stride is not a multiple of the element size.
    part_end : Out(9)
        ``part_start + part_count``.
    part_over : Out(1)
        ``part_end > P``.
    part_tail : Out(10)
        ``part_count * esize - 1``: a column's bytes after its first (the protection check's
        union of the rows of one ``i``), from the cycle after ``setup``.
    ilv : Out(1)
        (From the cycle after ``sum``.) Across partitions: ``ext_part_stride`` is the element size and no two elements share
        a destination (loads ``n0*n1 <= sbuf_depth``; stores: columns and rows ascend, strides
        below 2**16).
    rows_contig : Out(1)
        Across partitions, a row's columns abut (``ext_stride0 = part_count * esize``).
    row_span : Out(signed(50))
        ``(n0 - 1) * ext_stride0`` (from the cycle after ``sum``).
    seg_bytes : Out(seg_bits_of(data_width))
        Bytes per segment (from the cycle after ``span``): a row if ``contiguous``, else an
        element; across partitions a row if ``rows_contig``, else a column.
    """

    def __init__(self, *, partitions, sbuf_depth, data_width=32):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._sbuf_depth = check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 16)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        super().__init__({
            "cmd": In(DmaRecord), "idle": In(1), "rec": In(DmaRecord),
            "setup": In(1), "sum": In(1), "span": In(1),
            "esh": Out(2), "esize": Out(3), "contiguous": Out(1), "empty": Out(1),
            "misaligned": Out(1), "part_end": Out(9), "part_over": Out(1),
            "part_tail": Out(10), "ilv": Out(1),
            "rows_contig": Out(1), "row_span": Out(signed(50)),
            "seg_bytes": Out(seg_bits_of(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.rec
        esh = self.esh
        fmt_esh = Signal(2)                      # log2(element bytes), decoded from c.fmt
        with m.Switch(c.fmt):
            for fmt, bits in STORAGE_BITS.items():
                with m.Case(int(fmt)):
                    m.d.comb += fmt_esh.eq({8: 0, 16: 1, 32: 2}[bits])
        m.d.comb += self.esize.eq(1 << esh)

        # The span's partial products take ``n0``, not ``n0 - 1``, so that no subtractor sits
        # between the offered record and the multipliers' operand registers:
        # ``(n0 - 1) * ext_stride0 = n0 * ext_stride0 - ext_stride0``, the stride subtracted in
        # ``sum`` (below). Two 17 x 17-bit signed partial products (``n0`` zero-extended times
        # the stride's low half, zero-extended, and times its high half), registered at the
        # inputs and the outputs.
        n0_next = Mux(self.idle, self.cmd.n0, c.n0)
        stride_next = Signal(32)
        m.d.comb += stride_next.eq(Mux(self.idle, self.cmd.ext_stride0, c.ext_stride0))
        span_lo = registered_product(m, platform, Cat(n0_next, 0), Cat(stride_next[:16], 0),
                                     Const(1), "span_lo", out_reg=True, signed=True)
        span_hi = registered_product(m, platform, Cat(n0_next, 0), stride_next[16:32],
                                     Const(1), "span_hi", out_reg=True, signed=True)
        count_next = Mux(self.idle, self.cmd.part_count, c.part_count)
        row_elems = registered_product(m, platform, count_next, n0_next, Const(1),
                                       "row_elems", out_reg=True)
        n1_next = Mux(self.idle, self.cmd.n1, c.n1)
        elems = registered_product(m, platform, n0_next, n1_next, Const(1), "elems",
                                   out_reg=True)
        row_stride = registered_product(m, platform, n0_next, stride_next[:16], Const(1),
                                        "row_stride", out_reg=True)

        # ``(span_hi << 16) + span_lo - ext_stride0`` (mod 2**50, where it fits), the row span
        # registered in ``sum``: the three terms reduced to two by one carry-save layer
        # (``-s = ~s + 1``, the 1 as the carry word's bit 0), so a single carry chain follows
        # the products.
        w = len(self.row_span)
        x, y, z = Signal(w), Signal(w), Signal(w)
        m.d.comb += [x.eq(span_hi << 16), y.eq(span_lo), z.eq(~c.ext_stride0.as_signed())]
        carry = Cat(Const(1, 1), ((x & y) | (x & z) | (y & z))[:w - 1])

        with m.If(self.setup):
            align_mask = Signal(2)
            m.d.comb += align_mask.eq((1 << fmt_esh) - 1)
            m.d.sync += [
                esh.eq(fmt_esh),
                self.contiguous.eq(c.ext_stride0 == (1 << fmt_esh)),
                self.empty.eq((c.n0 == 0) | (c.n1 == 0) | (c.part_count == 0)),
                self.misaligned.eq((
                    (c.ext_addr | c.ext_stride0 | c.ext_stride1 | c.ext_part_stride)[:2] &
                    align_mask).any()),
                self.part_end.eq(c.part_start + c.part_count),
                self.part_over.eq(c.part_start + c.part_count > self._partitions),
                self.part_tail.eq((c.part_count << fmt_esh) - 1),
            ]
            m.d.sync += self.rows_contig.eq(c.ext_stride0 == (c.part_count << fmt_esh))
        with m.If(self.sum):
            # Across partitions the elements move in another order (columns): only where
            # no two of them share a destination (the order is then unseen).
            col = c.part_count << esh
            s0, s1 = c.ext_stride0, c.ext_stride1
            st_ok = ((s0[16:] == 0) & (s0 >= col) &
                     ((c.n1 == 1) | ((s1[16:] == 0) & (s1 >= row_stride))))
            ld_ok = elems <= self._sbuf_depth
            m.d.sync += [self.ilv.eq((c.ext_part_stride == self.esize) &
                                     Mux(c.store, st_ok, ld_ok)),
                         self.row_span.eq((x ^ y ^ z) + carry)]
        with m.If(self.span):
            m.d.sync += self.seg_bytes.eq(Mux(self.contiguous, c.n0 << esh, self.esize))
            with m.If(self.ilv):
                m.d.sync += self.seg_bytes.eq(Mux(self.rows_contig, row_elems << esh,
                                                  c.part_count << esh))
        return m
