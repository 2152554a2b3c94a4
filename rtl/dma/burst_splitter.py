"""Splits the DMA's contiguous segments into AXI4 bursts."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int, check_pow2

__all__ = ["BurstSplitter"]


class BurstSplitter(wiring.Component):
    """The bursts of one contiguous segment of external memory, one per ``issue``.

    A segment (``seg_bytes`` bytes from ``seg_addr``) is covered by INCR bursts of whole
    beats, from the beat holding its first byte to the beat holding its last: each burst is
    ``min(beats left, max_burst, beats to the next 4 KiB boundary)`` beats, so no burst
    crosses a 4 KiB boundary (AXI4's rule). ``load`` takes the segment; ``cur``, ``length``
    and ``single`` then describe its first burst, ``end`` says it is the segment's last, and
    each ``issue`` moves to the next burst in the following cycle.

    Every output is a flip-flop or one multiplexer of flip-flops: the next burst's case (to
    the boundary, the segment's end, or ``max_burst`` beats) is kept in flags updated a burst
    ahead, so no compare of the counts is in front of the issue. The segment's counts are
    registered from ``seg_addr`` and ``seg_bytes`` every cycle, so ``load`` takes registers:
    both inputs must hold the segment's values in the cycle before ``load`` and in its cycle.

    Parameters
    ----------
    data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).
    max_burst : int
        The ``DMA``'s ``burst_beats``: a power of two from 1 to ``min(256, 16384 //
        data_width)``.
    seg_bits : int
        Width of ``seg_bytes``, 19 to 32.

    Members
    -------
    seg_addr : In(32)
        The segment's first byte address.
    seg_bytes : In(seg_bits)
        The segment's length in bytes, at least 1.
    seg_last : In(1)
        The segment is the record's last (copied to ``last`` by ``load``).
    load : In(1)
        Take the segment.
    issue : In(1)
        The current burst is issued; the next one follows (ignored after the last).
    cur : Out(32)
        The burst's beat-aligned address.
    length : Out(8)
        The burst's length in beats, minus one (AXI4 ``AxLEN``).
    single : Out(1)
        The burst is one beat.
    end : Out(1)
        The burst is the segment's last.
    last : Out(1)
        The loaded segment is the record's last.
    """

    def __init__(self, *, data_width=32, max_burst=16, seg_bits=19):
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        self._max_burst = check_pow2("max_burst", max_burst, 1, min(256, 16384 // data_width))
        self._seg_bits = check_int("seg_bits", seg_bits, 19, 32)
        super().__init__({
            "seg_addr": In(32), "seg_bytes": In(seg_bits), "seg_last": In(1),
            "load": In(1), "issue": In(1),
            "cur": Out(32), "length": Out(8), "single": Out(1), "end": Out(1), "last": Out(1),
        })

    data_width = property(lambda self: self._data_width)
    max_burst = property(lambda self: self._max_burst)

    def elaborate(self, platform):
        m = Module()
        bw = self._data_width // 8               # bytes per beat
        bsh = (bw - 1).bit_length()              # log2(bw)
        MB = self._max_burst
        kb = MB.bit_length() - 1                 # log2(max_burst)
        K = 4096 >> bsh                          # beats in a 4 KiB page (> max_burst)
        # Segment state: the next beat-aligned byte address, the beats left in the segment L
        # (kept as L - 1), the beats to the next 4 KiB boundary T (1 .. K), L - T - 1.
        iss_cur = Signal(32)
        sb = self._seg_bits
        iss_left1 = Signal(sb + 1 - bsh)         # L - 1
        iss_to4k = Signal(14 - bsh)              # T
        iss_diff1 = Signal(signed(sb + 2 - bsh))  # L - T - 1: its sign is L <= T
        # The next burst is min(L, max_burst, T) beats, one of three cases, kept in flags
        # beside the counts and updated a burst ahead (lookahead), so that the issue reads
        # flip-flops instead of compares: ``iss_by4k`` (T < L and T < max_burst: T beats, to
        # the boundary), ``iss_end`` (L <= max_burst and L <= T: L beats, the segment's last
        # burst), else max_burst beats; ``iss_page``: the burst ends at the boundary (with
        # iss_by4k, or max_burst beats where T == max_burst). The counts move by constants or
        # by a register (L - T is ``iss_diff1 + 1``), and the next burst's flags are zero
        # tests and sign bits of the counts, as derived for each case below, so that no
        # compare of iss_to4k with iss_left is in front of the selection among three lengths,
        # the 32-bit adder and every count.
        iss_by4k = Signal()
        iss_end = Signal()
        iss_page = Signal()
        iss_tlt = Signal()                       # T < L
        m.d.comb += iss_tlt.eq(~iss_diff1[-1])
        # A segment's counts from its address, registered every cycle, so that a load takes
        # registers, not adders. L - 1 = (offset + bytes - 1) >> bsh, L - T - 1 = (page offset
        # + bytes - 1 - 4096) >> bsh (floor), T = K - the beat offset in the page.
        pre_left1 = Signal(len(iss_left1))
        pre_to4k = Signal(len(iss_to4k))
        pre_diff1 = Signal(len(iss_diff1))
        addr, nbytes = self.seg_addr, self.seg_bytes
        m.d.sync += [
            pre_left1.eq((addr[:bsh] + nbytes - 1) >> bsh),
            pre_to4k.eq(K - addr[bsh:12]),
            pre_diff1.eq((addr[:12] + nbytes - 4097).as_signed() >> bsh),
        ]

        # The burst's length - 1 and whether it is one beat (T < max_burst with iss_by4k, L
        # <= max_burst with iss_end: their low bits suffice).
        m.d.comb += [
            self.cur.eq(iss_cur), self.end.eq(iss_end),
            self.length.eq(Mux(iss_by4k, iss_to4k[:kb + 1] - 1,
                               Mux(iss_end, iss_left1[:kb + 1], MB - 1))),
            self.single.eq(Mux(iss_by4k, iss_to4k[:kb + 1] == 1,
                               Mux(iss_end, iss_left1[:kb + 1] == 0, MB == 1))),
        ]

        with m.If(self.load):
            m.d.sync += [
                iss_cur.eq(Cat(Const(0, bsh), addr[bsh:32])),
                iss_left1.eq(pre_left1), iss_to4k.eq(pre_to4k), iss_diff1.eq(pre_diff1),
                # T < L and T < max_burst; L <= max_burst and L <= T; that or T == max_burst.
                iss_by4k.eq(~pre_diff1[-1] & ((pre_to4k >> kb) == 0)),
                iss_end.eq(((pre_left1 >> kb) == 0) & pre_diff1[-1]),
                iss_page.eq((~pre_diff1[-1] & ((pre_to4k >> kb) == 0)) | (pre_to4k == MB)),
                self.last.eq(self.seg_last),
            ]
        # The next burst's counts and flags, for the two cases after which the segment goes
        # on (after its last burst the next segment is loaded; the values are not used):
        # iss_by4k: L' = L - T, T' = K (> max_burst), so only L' <= max_burst can hold;
        # else (max_burst beats, L > max_burst, T >= max_burst): L' = L - max_burst, T' = K
        # if iss_page (L' <= T' then follows from L' <= max_burst), else T - max_burst (T' <
        # L' is T < L, and T' == max_burst is T == 2 * max_burst). ``iss_page`` is a flag of
        # its own, not iss_by4k | (T == max_burst), so that the issue meets one flip-flop
        # in front of the counts' multiplexers.
        with m.If(self.issue):
            m.d.sync += [
                iss_cur.eq(Mux(iss_by4k, Cat(Const(0, 12), iss_cur[12:] + 1),
                               iss_cur + (MB << bsh))),
                iss_left1.eq(Mux(iss_by4k, iss_diff1, iss_left1 - MB)),
                iss_to4k.eq(Mux(iss_page, K, iss_to4k - MB)),
                iss_diff1.eq(Mux(iss_page, iss_diff1 - K, iss_diff1)),
                iss_by4k.eq(~iss_page & iss_tlt & ((iss_to4k >> (kb + 1)) == 0)),
                iss_end.eq(Mux(iss_by4k, (iss_diff1 >> kb) == 0,
                               ((iss_left1 >> (kb + 1)) == 0) & (iss_page | ~iss_tlt))),
                iss_page.eq(~iss_page & ((iss_tlt & ((iss_to4k >> (kb + 1)) == 0)) |
                                         (iss_to4k == 2 * MB))),
            ]
        return m
