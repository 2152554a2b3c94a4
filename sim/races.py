"""Race checker beside the reference simulator: two engines touching the same SBUF/PSUM words
with nothing ordering them.

The reference simulator runs every record completely at its issue (``docs/isa.md`` section 1,
sequential semantics), so a program that forgets a ``WAIT`` still computes the right result
there, and garbage on the core, whose three engine queues run concurrently. This module
records, for every record the program issues, the SBUF and PSUM words it reads and writes, and
the happens-before order the hardware guarantees:

* records of one engine are ordered by its queue (each engine runs its records one after
  another in issue order and completes them in that order; the DMA takes a record only when
  the previous one is done: its several outstanding AXI bursts belong to one record);
* a record is ordered after every record the sequencer *knows* to be complete when it issues
  it: everything before a ``BARRIER`` (or ``HALT``), and the records a ``WAIT``/``WAITI``
  proves complete. A wait on ``sem[s] >= v`` proves a record complete only if the semaphore
  cannot reach ``v`` without it: with the increments of ``s`` still in flight, the hardware
  may complete them in any order across engines (in order within one engine), so record ``j``
  of engine ``e`` among them is proven complete iff ``j <= need - (in-flight increments of
  other engines)``, where ``need`` is what the semaphore lacks without the in-flight ones.
  Counting a semaphore to N therefore orders every record that incremented it before the
  wait; waiting for 1 of two in-flight increments of different engines orders neither.
  ``SEMSET`` with increments still in flight leaves them able to land after it; they are
  counted as possibly landing.

Two records of different engines whose accesses overlap in one space (partition and word), at
least one of them writing, and neither ordered before the other, are a :class:`Race`.

Accesses (``docs/isa.md`` section 4): DMA load writes SBUF, store reads it; MATMUL reads the
stationary and moving SBUF words of partitions ``0..k-1``, writes PSUM words ``psum_addr +
n`` of every PSUM partition (and reads them when accumulating); vector ops read ``a`` (SBUF
or PSUM) and ``b`` (SBUF) and write SBUF at ``dst_addr`` (REDUCE and ACC_RD write one word per
lane); TABLE reads SBUF partition 0 (``2n`` words), a paired one partitions 0 and 1 (``n``
words; ``sim.isa.TABLE_FUNC_PAIRED``); SEED touches no memory.

    sim = RefSim(words, races=True, ...).run()
    sim.races                  # [Race, ...]
    err = sim.races_error()    # RaceError naming both instructions, or None
    check_program(CoreConfig(), words)   # the same for a program alone

This module imports neither Amaranth nor cocotb.
"""

import dataclasses

from sim import isa
from sim.isa import TABLE_FUNC_PAIRED, Engine, Space, VecOp

__all__ = ["Access", "Instr", "Race", "RaceError", "RaceChecker", "record_accesses",
           "check_program"]

#: Races kept per run (a racy loop would otherwise list the same pair thousands of times).
MAX_RACES = 100


def _intervals(start, count, size):
    """``start + i`` modulo ``size`` for ``i < count`` as sorted ``(lo, hi)`` inclusive runs."""
    if count <= 0:
        return ()
    if count >= size:
        return ((0, size - 1),)
    start %= size
    end = start + count - 1
    if end < size:
        return ((start, end),)
    return ((0, end - size), (start, size - 1))


def _strided(start, stride, count, size):
    """``start + i*stride`` modulo ``size`` for ``i < count`` as ``(lo, hi)`` runs."""
    if stride == 1 or count <= 1:
        return _intervals(start, count, size)
    words = sorted({(start + i * stride) % size for i in range(min(count, size * 2))})
    return tuple((w, w) for w in words)


def _overlap(a, b):
    """The first ``(lo, hi)`` where two run lists intersect, or None."""
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo <= hi:
                return lo, hi
    return None


@dataclasses.dataclass(frozen=True)
class Access:
    """Words of one space a record reads or writes: ``parts`` and ``words`` are ``(lo, hi)``
    inclusive runs of partitions and word addresses (every listed partition at every listed
    word)."""
    space: Space
    parts: tuple
    words: tuple
    write: bool


def record_accesses(engine, rec, *, partitions, cols, sbuf_depth, psum_depth):
    """The :class:`Access` list of one record (field dict of ``sim.isa.RECORDS[engine]``)."""
    P = partitions
    out = []

    def sbuf(parts, words, write):
        if parts and words:
            out.append(Access(Space.SBUF, parts, words, write))

    def psum(words, write):
        if words:
            out.append(Access(Space.PSUM, ((0, cols - 1),), words, write))

    if engine == Engine.DMA:
        parts = _intervals(rec["part_start"], rec["part_count"], P)
        sbuf(parts, _intervals(rec["sbuf_addr"], rec["n0"] * rec["n1"], sbuf_depth),
             write=not rec["store"])
    elif engine == Engine.TENSOR:
        k, m, n = rec["k"], rec["m"], rec["n"]
        if k < 1 or m < 1 or n < 1:
            return out
        parts = _intervals(0, min(k, P), P)
        sbuf(parts, _strided(rec["stat_addr"], rec["stat_stride"], m, sbuf_depth), False)
        sbuf(parts, _strided(rec["mov_addr"], rec["mov_stride"], n, sbuf_depth), False)
        words = _intervals(rec["psum_addr"], n, psum_depth)
        if rec["accumulate"]:
            psum(words, False)
        psum(words, True)
    else:
        op, n = rec["op"], rec["n"]
        lanes = _intervals(0, P, P)
        if op == VecOp.SEED:
            return out
        if op == VecOp.TABLE:
            if rec["func"] & TABLE_FUNC_PAIRED and P > 1:
                sbuf(_intervals(0, 2, P), _intervals(rec["a_addr"], n, sbuf_depth), False)
            else:
                sbuf(_intervals(0, 1, P), _intervals(rec["a_addr"], 2 * n, sbuf_depth), False)
            return out
        if op != VecOp.ACC_RD:
            if rec["a_space"] == Space.PSUM:
                psum(_intervals(rec["a_addr"], n, psum_depth), False)
            else:
                sbuf(lanes, _intervals(rec["a_addr"], n, sbuf_depth), False)
        if op == VecOp.TT:
            sbuf(lanes, _intervals(rec["b_addr"], n, sbuf_depth), False)
        outputs = 1 if op in (VecOp.REDUCE, VecOp.ACC_RD) else n
        sbuf(lanes, _intervals(rec["dst_addr"], outputs, sbuf_depth), True)
    return out


@dataclasses.dataclass(frozen=True)
class Instr:
    """One issued record: the instruction that issued it (``pc``, disassembled ``text``), its
    ``engine`` and its position ``index`` in that engine's queue."""
    pc: int
    engine: Engine
    index: int
    text: str

    def __str__(self):
        return f"pc {self.pc} {self.engine.name} #{self.index} '{self.text}'"


@dataclasses.dataclass(frozen=True)
class Race:
    """Two records of different engines, unordered, touching the same words, one writing.

    Members
    -------
    first, second : Instr
        The two records (``first`` issued first).
    space : Space
        SBUF or PSUM.
    parts, words : (int, int)
        The first overlapping run of partitions and of word addresses (inclusive).
    kinds : (str, str)
        What each record does there: ``"reads"`` or ``"writes"``.
    """
    first: Instr
    second: Instr
    space: Space
    parts: tuple
    words: tuple
    kinds: tuple

    def __str__(self):
        (p0, p1), (w0, w1) = self.parts, self.words
        return (f"{self.space.name} partitions {p0}..{p1} words {w0:#x}..{w1:#x}: "
                f"{self.first} {self.kinds[0]}, {self.second} {self.kinds[1]}, and no "
                f"semaphore wait or barrier orders them")


class RaceError(Exception):
    """A program whose engines race (``races``: the :class:`Race` list); the message names
    the two instructions of the first race."""

    def __init__(self, races):
        self.races = list(races)
        more = f" (and {len(self.races) - 1} more)" if len(self.races) > 1 else ""
        super().__init__(f"race: {self.races[0]}{more}")


class RaceChecker:
    """Happens-before bookkeeping for one run, fed by ``sim.refsim.RefSim`` in issue order.

    Parameters
    ----------
    partitions, cols, sbuf_depth, psum_depth : int
        The memories' geometry.
    text : callable
        ``text(pc)``: the disassembled instruction at ``pc`` (for the reports).

    Members
    -------
    races : list of Race
        At most :data:`MAX_RACES` (``dropped`` counts the rest).
    known : dict
        Per engine, how many of its records the sequencer knows to be complete now.
    frontier : dict
        Per engine, one entry per issued record: ``known`` (per engine) at its issue; record
        ``i`` of engine ``f`` is ordered after record ``j`` of engine ``e`` iff
        ``frontier[f][i][e] > j``.
    """

    def __init__(self, *, partitions, cols, sbuf_depth, psum_depth, text=str):
        self.geometry = dict(partitions=partitions, cols=cols, sbuf_depth=sbuf_depth,
                             psum_depth=psum_depth)
        self.text = text
        self.records = {e: [] for e in Engine}     # (Instr, [Access])
        self.frontier = {e: [] for e in Engine}
        self.known = {e: 0 for e in Engine}
        # Per semaphore: in-flight increments [(engine, index, epoch)]; epoch = SEMSETs seen.
        self.pending = {s: [] for s in range(isa.NUM_SEMS)}
        self.epoch = {s: 0 for s in range(isa.NUM_SEMS)}
        self.races = []
        self.dropped = 0
        self.checked_pairs = 0

    # -- events -----------------------------------------------------------------------------
    def issue(self, engine, rec, pc):
        """Record ``rec`` (field dict) issued on ``engine`` by the instruction at ``pc``."""
        engine = Engine(engine)
        me = Instr(pc, engine, len(self.records[engine]), self.text(pc))
        acc = record_accesses(engine, rec, **self.geometry)
        for other in Engine:
            if other == engine:
                continue
            for j in range(self.known[other], len(self.records[other])):
                them, tacc = self.records[other][j]
                self.checked_pairs += 1
                self._compare(them, tacc, me, acc)
        self.records[engine].append((me, acc))
        self.frontier[engine].append(dict(self.known))
        if rec.get("sem_en"):
            s = rec["sem"]
            self.pending[s].append((engine, me.index, self.epoch[s]))

    def barrier(self):
        """Every issued record is complete (``BARRIER``, ``HALT``)."""
        for e in Engine:
            self.known[e] = len(self.records[e])
        for s in self.pending:
            self.pending[s] = []

    def semset(self, sem):
        """``SEMSET``: increments in flight may still land on the new value."""
        self._prune(sem)
        self.epoch[sem] += 1

    def wait(self, sem, value, current):
        """A ``WAIT``/``WAITI`` passed with ``sem[sem] >= value``; ``current`` is the
        semaphore in the sequential semantics (every issued increment counted)."""
        self._prune(sem)
        inflight = self.pending[sem]
        now = self.epoch[sem]
        new = [x for x in inflight if x[2] == now]
        old = [x for x in inflight if x[2] != now]
        # Without the current epoch's in-flight increments the semaphore holds at least
        # ``current - len(new)``; earlier epochs' increments (before a SEMSET) may land too.
        need = value - (current - len(new))
        free = sum(1 for e, i, _ in old if i < self.known[e])
        need -= free
        if need <= 0:
            return
        cand = {e: [i for f, i, _ in new + old if f == e and i >= self.known[e]]
                for e in Engine}
        for e in Engine:
            others = sum(len(v) for f, v in cand.items() if f != e)
            k = min(need - others, len(cand[e]))
            if k >= 1:
                mine = sorted(cand[e])
                self.known[e] = max(self.known[e], mine[k - 1] + 1)
        self._prune(sem)

    # -- helpers ----------------------------------------------------------------------------
    def _prune(self, sem):
        """Drop the current epoch's increments known to have landed (they are in the
        sequential count). An earlier epoch's increment stays: it was in flight at a SEMSET,
        so it may have landed after it (``wait`` counts it as possibly landed)."""
        now = self.epoch[sem]
        self.pending[sem] = [(e, i, ep) for e, i, ep in self.pending[sem]
                             if i >= self.known[e] or ep != now]

    def _compare(self, a, aacc, b, bacc):
        for x in aacc:
            for y in bacc:
                if x.space != y.space or not (x.write or y.write):
                    continue
                parts = _overlap(x.parts, y.parts)
                words = parts and _overlap(x.words, y.words)
                if parts and words:
                    if len(self.races) < MAX_RACES:
                        kinds = tuple("writes" if z.write else "reads" for z in (x, y))
                        self.races.append(Race(a, b, x.space, parts, words, kinds))
                    else:
                        self.dropped += 1
                    return

    def ordered(self, a, b):
        """True if record ``a`` = (engine, index) is ordered before ``b`` = (engine, index)."""
        (ea, ia), (eb, ib) = a, b
        if ea == eb:
            return ia < ib
        return self.frontier[eb][ib][ea] > ia


def check_program(config, words, **kwargs):
    """Run ``words`` on the reference simulator of ``config`` (a ``sim.config.CoreConfig``)
    with the race check; return its :class:`Race` list. ``kwargs`` go to ``RefSim``
    (``execute=False`` by default: the order does not depend on data)."""
    kwargs.setdefault("execute", False)
    kwargs["races"] = True
    sim = config.refsim(words, **kwargs)
    sim.run()
    return sim.races
