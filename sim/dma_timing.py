"""Cycles the DMA (``rtl/dma/dma.py``) takes for one record, from the command's handshake to
its ``done`` pulse (``docs/dma.md``, "Cost per beat"), for the cycle model (``sim/cycles.py``).

The model follows the RTL's structure: three setup cycles, one window-check cycle per row
(``part_count * n1`` rows, or ``n1`` for an across-partitions record with ``ext_stride0 >= 0``)
plus one, then the transfer. The transfer takes the longest of its bounds: one SBUF cycle per
element (per chunk across partitions: a column's elements in one beat), one cycle per beat,
two cycles per segment (a segment's first burst is issued the cycle after it is loaded), and
the bursts' round trips shared by ``max_outstanding`` slots. A load adds the memory's latency
to the first beat. Exact for records on a memory that never stalls (``scripts/bench_dma.py``:
within 2 % of the RTL for its records of 4 KiB and more, every width).

:class:`DmaTimeline` places records offered one after another the way the DMA overlaps them
(a record's front, its setup, checks and bursts, beside the data of the one before); the
cycle model (``sim.cycles.MicroSim``) takes the DMA's records from it.
"""

from sim.dtypes import STORAGE_BITS, Format

__all__ = ["dma_record_cycles", "dma_stream_cycles", "across_partitions", "DmaTimeline"]

M32 = (1 << 32) - 1
#: Cycles of a record before its window check, and after it until the first burst's issue.
SETUP = 3
#: Cycles from the last data beat to ``done``: a load's (after the first beat's latency) and a
#: store's (the B response one cycle after the last W beat).
LOAD_TAIL, STORE_TAIL = 7, 6
#: Cycles a burst holds an outstanding slot beyond its beats and the memory's latency.
ROUND_TRIP = 2
#: In a stream of records: cycles between one record's last element and the next one's first
#: on the data side.
GAP = 4


def _signed(x):
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def across_partitions(r, *, data_width, sbuf_depth):
    """Whether the DMA moves record ``r`` across partitions (``docs/dma.md``), at every
    ``data_width``: ``ext_part_stride`` the element size, and no two elements with one
    destination (loads: ``n0 * n1 <= sbuf_depth``; stores: strides below 2**16, columns and
    rows apart)."""
    es = STORAGE_BITS[Format(r["fmt"])] // 8
    if r["ext_part_stride"] != es:
        return False
    if not r["store"]:
        return r["n0"] * r["n1"] <= sbuf_depth
    s0, s1, col = r["ext_stride0"], r["ext_stride1"], r["part_count"] * es
    return (s0 < 1 << 16 and s0 >= col and
            (r["n1"] == 1 or (s1 < 1 << 16 and s1 >= r["n0"] * s0)))


def _bursts(addr, nbytes, bw, max_burst):
    """Beats of each burst covering ``[addr, addr + nbytes)`` (``BurstSplitter``)."""
    out = []
    cur = addr - addr % bw
    left = -(-(addr % bw + nbytes) // bw)
    while left:
        n = min(left, max_burst, (0x1000 - cur % 0x1000) // bw)
        out.append(n)
        cur, left = cur + n * bw, left - n
    return out


def _parts(r, *, data_width, sbuf_depth, max_burst, transfer=True):
    """``(rows, bursts, units, segments)`` of a non-empty record: its window-check rows, the
    beats of each burst, its SBUF cycles and its number of segments. ``transfer=False``: the
    data move in no time (an unbounded bus and SBUF port): every burst of no beats, no SBUF
    cycles; the rows, the bursts and the segments as they are."""
    es = STORAGE_BITS[Format(r["fmt"])] // 8
    n0, n1, pc = r["n0"], r["n1"], r["part_count"]
    bw = data_width // 8
    mb = min(max_burst, 16384 // data_width)
    s0 = _signed(r["ext_stride0"])
    s1 = _signed(r["ext_stride1"])
    ps = _signed(r["ext_part_stride"])
    base = r["ext_addr"]
    ilv = across_partitions(r, data_width=data_width, sbuf_depth=sbuf_depth)
    rows = n1 if ilv and (n0 - 1) * s0 >= 0 else pc * n1
    segs = []                                    # (address, bytes)
    units = 0                                    # SBUF cycles
    if ilv:
        col = pc * es
        rows_contig = s0 == col
        for i in range(n1):
            row = base + i * s1
            if rows_contig:
                segs.append((row, n0 * col))
            else:
                segs += [(row + j * s0, col) for j in range(n0)]
            for j in range(n0):
                a, left = row + j * s0, pc
                while left:
                    n = min(left, (bw - a % bw) // es)
                    units += 1
                    a, left = a + n * es, left - n
    else:
        units = pc * n1 * n0
        for p in range(pc):
            for i in range(n1):
                row = base + p * ps + i * s1
                if s0 == es:
                    segs.append((row, n0 * es))
                else:
                    segs += [(row + j * s0, es) for j in range(n0)]
    bursts = [b for a, nb in segs for b in _bursts(a & M32, nb, bw, mb)]
    if not transfer:
        return rows, [0] * len(bursts), 0, len(segs)
    return rows, bursts, units, len(segs)


def dma_record_cycles(r, *, data_width=32, sbuf_depth=256, max_burst=16, max_outstanding=4,
                      latency=16, transfer=True):
    """Cycles of DMA record ``r`` (a dict of ``sim.isa.DMA_RECORD`` fields) alone, from its
    command's handshake to its ``done``.

    Parameters
    ----------
    r : dict
    data_width : int
        The DMA's AXI data width in bits.
    sbuf_depth : int
        Words per SBUF partition.
    max_burst, max_outstanding : int
        As the DMA's parameters (bursts are at most 2 KiB).
    latency : int
        Cycles from a read burst's address to its first beat.
    transfer : bool
        False: the beats and the SBUF cycles take no time (``_parts``); what is left are the
        record's fixed costs: set-up, window checks, two issue cycles per segment, each
        burst's memory latency and round trip (``max_outstanding`` at a time) and the tail.
    """
    if not r["n0"] or not r["n1"] or not r["part_count"]:
        return SETUP
    rows, bursts, units, segs = _parts(r, data_width=data_width, sbuf_depth=sbuf_depth,
                                       max_burst=max_burst, transfer=transfer)
    stream = max(units, sum(bursts), 2 * segs)
    if r["store"]:
        body = max(stream, sum(b + ROUND_TRIP for b in bursts) / max_outstanding) + STORE_TAIL
    else:
        trips = sum(b + latency + ROUND_TRIP for b in bursts) / max_outstanding
        body = max(latency + stream, trips + ROUND_TRIP + 1) + LOAD_TAIL
    return int(round(SETUP + rows + 1 + body))


def dma_stream_cycles(r, count, *, data_width=32, sbuf_depth=256, max_burst=16,
                      max_outstanding=4, latency=16):
    """Cycles of ``count`` copies of record ``r`` offered back to back, from the first one's
    handshake to the last one's ``done`` (the DMA overlaps a record's front with the data of
    the one before: :class:`DmaTimeline`). Parameters as :func:`dma_record_cycles`."""
    tl = DmaTimeline(data_width=data_width, sbuf_depth=sbuf_depth, max_burst=max_burst,
                     max_outstanding=max_outstanding, latency=latency)
    valid = done = 0
    for _ in range(count):
        take, done = tl.add(r, valid)
        valid = take + 1
    return done


#: Cycles from the last burst issued (or the front's record handed) to the next take.
FRONT_GAP = 3
#: Cycles from a data side's ``ld_fin``/``st_fin`` to the record's ``done``.
LOAD_FIN, STORE_FIN = 1, 3
#: Cycles the last burst's issue follows the completion of the burst ``max_outstanding``
#: before it, as estimated from the data side's pace (a store's slot is freed by its B).
SLOT_LOAD, SLOT_STORE = -5, 5


class DmaTimeline:
    """The DMA's records back to back (``rtl/dma/control.py``, ``docs/dma.md``): when each
    record is taken and when it is done, for records offered in order.

    A record passes the *front* (its setup and window check, ``SETUP + rows + 1`` cycles from
    the take, then the issue of its bursts) and the *data side* (the element walk and the
    data path). The model keeps, per record, the take ``a``, the issue start ``s``, the data
    side's end ``fin`` (``done`` is ``LOAD_FIN``/``STORE_FIN`` later) and follows the RTL's
    rules:

    * the issue starts at ``a + SETUP + rows + 1``; a record of the other direction than the
      one before starts it only once that one is done;
    * alone, a record ends where :func:`dma_record_cycles` says; behind another one its data
      side ends no earlier than ``GAP`` cycles plus its own data (SBUF cycles, beats, the
      bursts' round trips) after the previous one's; one bound by the issue of more than
      ``max_outstanding`` bursts (whose further bursts wait for slots only its own data
      free) ends no earlier than its data alone, less the first bursts' issue, after the
      previous one's, and its front is late by as much;
    * the front takes the next record once the current one's bursts are issued
      (``FRONT_GAP`` cycles after two cycles per segment and one per further burst, and, with
      more than ``max_outstanding`` bursts, no earlier than the completion of the one
      ``max_outstanding`` before its last) and the data side holds it (two cycles after the
      previous record's data side is free).

    Parameters as :func:`dma_record_cycles`.
    """

    def __init__(self, *, data_width=32, sbuf_depth=256, max_burst=16, max_outstanding=4,
                 latency=16, transfer=True):
        self._kw = dict(data_width=data_width, sbuf_depth=sbuf_depth, max_burst=max_burst,
                        transfer=transfer)
        self._mo = max_outstanding
        self._latency = latency
        self._last = None           # (store, done, fin) of the record before
        self.free = 0               # the first cycle the front may take a record

    def add(self, r, valid):
        """Offers record ``r`` (a dict of ``sim.isa.DMA_RECORD`` fields) from cycle ``valid``
        (the record's handshake is at the earliest then); returns ``(take, done)``."""
        a = max(valid, self.free)
        mo, lat = self._mo, self._latency
        alone = dma_record_cycles(r, max_outstanding=mo, latency=lat, **self._kw)
        last = self._last
        if not r["n0"] or not r["n1"] or not r["part_count"]:
            done = a + alone if last is None else max(a + alone, last[1] + 1)
            self.free = done + 1
            self._last = (last[0] if last else r["store"], done, done - 1)
            return a, done
        rows, bursts, units, segs = _parts(r, **self._kw)
        store = r["store"]
        pre = SETUP + rows + 1
        tail = STORE_FIN if store else LOAD_FIN
        s = a + pre
        if last is not None and last[0] != store:
            s = max(s, last[1])
        fin = s + alone - pre - tail
        trips = sum(b + (0 if store else lat) + ROUND_TRIP for b in bursts) / mo
        data = max(units, sum(bursts), trips)
        issue = 2 * segs + len(bursts) - segs
        paced = len(bursts) > mo and issue > data
        if last is not None:
            fin = max(fin, last[2] + GAP + data)
            if paced:
                # Its bursts beyond the first ``mo`` wait for slots that only its own data
                # free: an issue-bound record runs as alone from the data before it.
                fin = max(fin, last[2] + alone - pre - tail - 2 * mo)
        fin = int(round(fin))
        free = s + issue + FRONT_GAP
        if paced:                           # its issue is late by as much as its data
            free += fin - (s + alone - pre - tail)
        if len(bursts) > mo:
            after = sum(bursts[-mo:])       # beats behind the burst whose slot the last takes
            free = max(free, int(round(fin - data * after / max(sum(bursts), 1))) +
                       (SLOT_STORE if store else SLOT_LOAD))
        if last is not None:
            free = max(free, last[2] + 2)
        self.free = free
        done = fin + tail
        self._last = (store, done, fin)
        return a, done

    def delay(self, n):
        """The last record offered completes ``n`` cycles later (its data side was held up,
        for example by a write port it shares): its ``done`` and the end of its data side
        move by ``n``, and the front takes the next record no earlier than two cycles after
        that end (the data side holds it as :meth:`add` says). Nothing changes before the
        first record."""
        if self._last is None:
            return
        store, done, fin = self._last
        self._last = (store, done + n, fin + n)
        self.free = max(self.free, fin + n + 2)
