"""The DMA's beat lanes: elements out of a bus beat (loads) and into one (stores)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int, check_pow2

__all__ = ["BeatUnpack", "ChunkPack"]


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


class BeatUnpack(wiring.Component):
    """The elements of a beat from byte ``off`` on, zero-extended to 32-bit words.

    Combinational. ``elem`` is the element at ``off``; ``lanes`` word ``k`` is the ``k``-th
    element from ``off`` (0 where the beat ends first). Element size ``1 << esh`` bytes
    (``esh`` 3 reads as 2).

    Parameters
    ----------
    data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).
    lanes : int
        Words of ``lanes``, 1 to 256.

    Members
    -------
    beat : In(data_width)
    off : In(range(data_width // 8))
    esh : In(2)
    elem : Out(32)
    lanes : Out(32 * lanes)
    """

    def __init__(self, *, data_width, lanes=1):
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        self._lanes = check_int("lanes", lanes, 1, 256)
        super().__init__({
            "beat": In(data_width), "off": In(range(data_width // 8)), "esh": In(2),
            "elem": Out(32), "lanes": Out(32 * lanes),
        })

    def elaborate(self, platform):
        m = Module()
        shifted = Signal(self._data_width)
        m.d.comb += shifted.eq(self.beat >> (self.off << 3))
        with m.Switch(self.esh):
            with m.Case(0):
                m.d.comb += self.elem.eq(shifted[:8])
            with m.Case(1):
                m.d.comb += self.elem.eq(shifted[:16])
            with m.Default():
                m.d.comb += self.elem.eq(shifted[:32])
        m.d.comb += self.lanes.eq(_lanes(shifted, self.esh, self._lanes))
        return m


class ChunkPack(wiring.Component):
    """A chunk of a column read into a beat: ``n`` words from word ``base`` of ``words``,
    each truncated to the element size and packed from byte ``off`` of the beat.

    Combinational. ``strb`` marks the chunk's bytes (``n << esh`` of them from ``off``);
    ``data`` is 0 elsewhere. The chunk must fit the beat (``off + (n << esh) <= bytes``).

    Parameters
    ----------
    partitions : int
        Words of ``words``, 1 to 256.
    data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    words : In(32 * partitions)
    base : In(max(1, ceil(log2(partitions))))
    n : In(range(data_width // 8 + 1))
    off : In(range(data_width // 8))
    esh : In(2)
    data : Out(data_width)
    strb : Out(data_width // 8)
    """

    def __init__(self, *, partitions, data_width):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        bw = data_width // 8
        super().__init__({
            "words": In(32 * partitions), "base": In(max(1, (partitions - 1).bit_length())),
            "n": In(range(bw + 1)), "off": In(range(bw)), "esh": In(2),
            "data": Out(data_width), "strb": Out(bw),
        })

    def elaborate(self, platform):
        m = Module()
        P, bw = self._partitions, self._data_width // 8
        words = (self.words >> Cat(Const(0, 5), self.base))[:32 * min(P, bw)]
        bmask = Signal(bw)
        m.d.comb += bmask.eq((Const(1) << (self.n << self.esh)) - 1)
        packed = _pack(words, self.esh, bw) & Cat(*[b.replicate(8) for b in bmask])
        m.d.comb += [self.data.eq((packed << Cat(Const(0, 3), self.off))[:8 * bw]),
                     self.strb.eq((bmask << self.off)[:bw])]
        return m
