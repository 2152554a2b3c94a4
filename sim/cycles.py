"""Cycle model of the sequencer and the engine timeline.

:class:`MicroSim` executes a program the way ``rtl/control/sequencer.py`` does: fetch, decode
and map (3 cycles), two cycles to fill the three-stage micro-pipeline (fetch, operand read,
execute), then one cycle per micro-instruction read from the control store
(``sim/microcode.py`` or any words loaded at run time) plus two bubbles after a taken BRANCH
or ULOOP or a RET, and one after an AG_SET/AG_SNAP whose successor reads the generator
state it writes (``sim.isa.AG_SET_READS``/``AG_SNAP_READS``; none if it ends the
instruction), with the same stall rules (EMIT waits for queue space, WAIT for a semaphore,
BARRIER for completions). A WAIT compares the semaphore in one cycle and decides in
the next, so it takes at least 2 cycles and goes on the cycle after the semaphore reaches its
value; a deadlock is trapped the cycle after the compare that found it. A BRANCH on Z/NZ holds
its first two cycles in X (the ALU result and its zero test are registered); a ULOOP right
after a micro-instruction that writes UCTR, and a BRANCH on LOOP_MORE right after a LOOP_PUSH,
hold one cycle (the count's zero tests are made on the registered result), as do a BRANCH on
LOOP_MORE and a LOOP_STEP right after a LOOP_STEP or LOOP_POP (the new top count lands in the
cycle after), a BRANCH on a flag right after a FLAGS write (the flags land in the cycle after),
and an EMIT
right after a write of a slot its engine's record check reads (``sim.isa.CHECKED_SLOTS``: the
slot's check terms are registered in the cycle after the write); a SEMRD holds its
first two cycles and writes the semaphore as it was in the second (a SEMINC reaches the
semaphore two cycles after X). The tensor and vector engines are modelled as serial servers:
record ``i`` of an engine is accepted at ``max(valid_i, free_{i-1})`` and frees the engine
``cost(record)`` cycles later; it completes then, or ``cost.latency(engine, record)`` cycles
after that (``EngineCost.tensor_latency``: the tensor engine's pipeline). With a core
configuration in the cost (``EngineCost.dma_config``) the DMA's records overlap as in the RTL
(``sim.dma_timing.DmaTimeline``: a record is taken once the one before has issued its bursts
and started its data, and its data follow the data before it; a record of the other direction
waits for every earlier one), and its loads share SBUF's write port with the vector
engine's outputs (``MicroSim._contend``); without one they are serial servers too. The vector
engine takes a record ``EngineCost.vector_overlap`` cycles before the one ahead is done. The
result is the timeline of every record (emit, accept, done cycles), the sequencer's cycle
count, per-engine busy / semaphore-wait / idle cycles and the sequencer's stalls (``perf``
``blocked`` at an EMIT, ``wait_spans``, ``barrier_stall``). ``EngineCost.ideal`` runs the
same program with engines idealized (``BOUNDS``: their data in no time, every fixed latency
kept), bounds on what faster engines or a wider bus could give.

Being a second, independent executor of the microcode, it is also checked against the
instruction-level ``sim/refsim.py`` (architectural state and record traces) in
``tests/test_refsim_cycles.py``, and its cycle counts against the RTL's performance counters in
``cocotb_tests/test_sequencer_timing.py``.

Timing convention (cycle ``c`` = the cycle that ends with rising edge ``c + 1``):
a record emitted in cycle ``e`` is valid on the stream from ``e + 1``; accepted in cycle ``a``
(valid and ready), it completes in cycle ``a + cost`` (the done pulse is sampled at the end of
that cycle; its semaphore increment is visible from ``a + cost + 1``).
"""

import copy
from dataclasses import dataclass, field

from sim import isa, microcode
from sim.dtypes import STORAGE_BITS, Format
from sim.isa import (AG_SET_READS, AG_SNAP_READS, Engine, ErrorBit, UAlu, UCond, UDst, USeq,
                     USpecial, USrc)
from sim.vector import AccOp, element_cycles

__all__ = ["BOUNDS", "IDEAL_ENGINES", "EngineCost", "MicroSim", "RecordTiming", "share_port",
           "table_cycles"]

#: Cycles from a vector record's last SBUF write to its done pulse (``VectorController``:
#: the done pulse follows the last output beat's write).
VECTOR_WRITE_TO_DONE = 1
#: Cycles of a TABLE record on the RTL beyond its operand streamer's beats (one LUT write per
#: beat of a paired TABLE, per two beats of an unpaired one): measured on the 8x8 core with
#: one to three tables of 49 to 128 pairs, both layouts.
TABLE_SETUP = 6


def table_cycles(r, partitions=2):
    """Cycles from a TABLE record's take to its done pulse on a core of ``partitions``
    (every core has at least two): one per (address, data) pair of the paired layout
    (``isa.TABLE_FUNC_PAIRED``), two per pair of the unpaired one, plus ``TABLE_SETUP``."""
    paired = r["func"] & isa.TABLE_FUNC_PAIRED and partitions > 1
    return (1 if paired else 2) * r["n"] + TABLE_SETUP

#: The engines whose data-proportional time ``EngineCost.ideal`` can leave out.
IDEAL_ENGINES = ("dma", "vector", "tensor")
#: Bounds on a program's cycles, each the engines ``EngineCost.ideal`` idealizes: ``no_dma``
#: an unbounded bus, ``no_vector`` an unbounded vector engine, ``no_dma_vector`` both (the
#: tensor engine as it is), ``floor`` all three engines' data in no time (the program's fixed
#: latencies alone: the sequencer's issue, the DMA's per-record and per-burst costs, the
#: vector pipeline, TABLE set-up, the tensor engine's latency to PSUM, and the dependencies
#: between them).
BOUNDS = {"no_dma": ("dma",), "no_vector": ("vector",), "no_dma_vector": ("dma", "vector"),
          "floor": IDEAL_ENGINES}

MASK32 = 0xFFFFFFFF
#: A shift far beyond any record's length (``MicroSim._dma_slack``).
_FAR = 1 << 40
_UNPACKED = {}


def _s32(x):
    return x - (1 << 32) if x & 0x80000000 else x


def _spread(first, end, count):
    """The cycles of ``count`` writes spread evenly over ``[first, end)``."""
    span = max(end - first, count, 1)
    return [first + k * span // max(count, 1) for k in range(count)]


def share_port(dma, vec):
    """Cycles by which the last write of each of two writers of ``rtl.core.sbuf.SBUF``'s write
    port ends late when they share it (``dma``, ``vec``: the cycles each writer's writes
    would take alone, ascending). The arbiter grants one write per cycle; when both request,
    the writer the turn pointer names wins, and the pointer moves to the writer after the
    one granted whenever anyone requests, so two writers requesting every cycle alternate.
    A refused write stays requested (the DMA's write stage and the vector engine's output
    stream hold it) and the writes behind it follow one cycle apart at the earliest. The
    pointer starts at the DMA (its reset value; a writer alone moves it to the other, so
    the writer that starts later wins the first conflict). Returns ``(dma_late,
    vec_late)``."""
    seqs = (dma, vec)
    if not dma or not vec:
        return 0, 0
    idx = [0, 0]
    ready = [dma[0], vec[0]]
    last = [None, None]
    turn = 0
    c = min(ready)
    while idx[0] < len(dma) or idx[1] < len(vec):
        req = [idx[i] < len(seqs[i]) and ready[i] <= c for i in (0, 1)]
        if not (req[0] or req[1]):
            c = min(ready[i] for i in (0, 1) if idx[i] < len(seqs[i]))
            continue
        g = turn if req[0] and req[1] else (0 if req[0] else 1)
        last[g] = c
        idx[g] += 1
        if idx[g] < len(seqs[g]):
            ready[g] = max(seqs[g][idx[g]], c + 1)
        turn = 1 - g
        c += 1
    return last[0] - dma[-1], last[1] - vec[-1]


@dataclass
class EngineCost:
    """Cycles an engine spends on one record (estimates of the engines' throughput; the core's
    engines document their own). ``rows``/``cols`` are the tensor array size."""
    rows: int = 8
    cols: int = 8
    dma_bus_bytes: int = 8       # bytes per cycle
    dma_setup: int = 6
    #: The DMA's cost from the RTL's timing (``sim.dma_timing``) for a core of this
    #: ``sim.config.CoreConfig`` and a memory of ``dma_latency`` cycles to the first read
    #: beat; None: ``dma_setup`` plus the bytes over ``dma_bus_bytes``.
    dma_config: object = None
    dma_latency: int = 16
    #: Vector engine (``deep=True``, ``rtl.vector.engine``): the pipeline's fill and drain
    #: around a record (``VectorEngine.latency`` 52 + 2: an instruction takes ``count * (1 +
    #: acc_wait) + latency + 2`` cycles), and the extra cycles per element of a summing record
    #: (ACT with ``acc=1``, REDUCE ADD), which wait for the pipelined accumulate adder.
    vector_pipeline: int = 54
    vector_acc_wait: int = 3
    #: Cycles an element beat takes to enter the vector engine's evaluation units (``lanes //
    #: units`` of ``VectorEngine``; 1: a unit per lane): a record costs what it costs with one
    #: unit per lane plus the difference of the engine's spans (:meth:`_vector_span`: per
    #: element ``sim.vector.element_cycles``, the last beat taken ``vector_subs - 1`` cycles
    #: after its first sub-beat, ``vector_subs - 1`` cycles more latency).
    vector_subs: int = 1
    #: Tensor engine: cycles from the array taking a record's moving stream to its done pulse
    #: beyond the ``cost`` it keeps the array (:meth:`latency`): the stationary tile's load
    #: (``m`` beats) plus this many (SBUF read, the array's fill and drain, PSUM's write). The
    #: array takes the next record after ``cost``; 0: done after ``cost``.
    tensor_latency: int = 0
    #: Vector engine: cycles of a record's drain during which the engine already takes the
    #: next record (its done pulse comes that much after the engine is free; 0: serial). A
    #: TABLE or SEED record has none.
    vector_overlap: int = 0
    #: Engines (names from ``IDEAL_ENGINES``) whose data-proportional time the cost leaves
    #: out, every fixed latency kept (``BOUNDS``): ``"dma"`` a record's beats and SBUF cycles
    #: (``sim.dma_timing``'s ``transfer=False``: set-up, window checks, issue and each burst's
    #: round trip kept; without ``dma_config``, the bytes over ``dma_bus_bytes``),
    #: ``"vector"`` a record's elements and a TABLE's pairs (the pipeline, ``TABLE_SETUP``, an
    #: ACC_RD and a SEED kept), ``"tensor"`` a matmul's moving columns (its stationary tile's
    #: load, the array's skew and ``tensor_latency`` kept). An idealized engine's SBUF writes
    #: take no cycles, so they never contend for SBUF's write port. Empty: the engines as
    #: they are.
    ideal: frozenset = frozenset()

    def __post_init__(self):
        if isinstance(self.ideal, str) or not hasattr(self.ideal, "__iter__"):
            raise TypeError(f"ideal must be a collection of engine names, not {self.ideal!r}")
        for name in self.ideal:
            if name not in IDEAL_ENGINES:
                raise ValueError(f"ideal must name engines among {', '.join(IDEAL_ENGINES)}, "
                                 f"not {name!r}")
        self.ideal = frozenset(self.ideal)

    def timed(self, engine):
        """Whether ``engine`` (a name from ``IDEAL_ENGINES``) takes time for its data."""
        return engine not in self.ideal

    @classmethod
    def of_config(cls, config, **kwargs):
        """The cost of a core of ``config`` (a ``sim.config.CoreConfig``): its array size and its
        vector engine's sub-beats (``rows // vector_units``); ``kwargs`` set the other
        fields."""
        units = getattr(config, "vector_units", None) or config.rows
        return cls(rows=config.rows, cols=config.cols, vector_subs=config.rows // units, **kwargs)

    def dma_timeline(self):
        """A fresh ``sim.dma_timing.DmaTimeline`` for the DMA records of one run (they overlap
        as in the RTL), or None where a DMA record is charged :meth:`__call__`'s cycles one
        after another (no ``dma_config``)."""
        if self.dma_config is None:
            return None
        from sim.dma_timing import DmaTimeline
        c = self.dma_config
        return DmaTimeline(data_width=c.dma_data_width, sbuf_depth=c.sbuf_depth,
                           max_burst=c.max_burst, latency=self.dma_latency,
                           transfer=self.timed("dma"))

    def latency(self, engine, r):
        """Cycles from the end of a record's ``cost`` to its done pulse, during which its
        engine already takes the next record (the tensor engine's pipeline; 0 otherwise)."""
        if engine == Engine.TENSOR and self.tensor_latency:
            return max(r["m"], 1) + self.tensor_latency
        if engine == Engine.VECTOR:
            return self._vector_overlap(r)
        return 0

    def _vector_overlap(self, r):
        if r["op"] in (isa.VecOp.TABLE, isa.VecOp.SEED):
            return 0
        return self.vector_overlap

    def __call__(self, engine, r):
        if engine == Engine.DMA and self.dma_config is not None:
            from sim.dma_timing import dma_record_cycles
            c = self.dma_config
            return dma_record_cycles(r, data_width=c.dma_data_width, sbuf_depth=c.sbuf_depth,
                                     max_burst=c.max_burst, latency=self.dma_latency,
                                     transfer=self.timed("dma"))
        if engine == Engine.DMA:
            nbytes = STORAGE_BITS[Format(r["fmt"])] // 8
            total = r["part_count"] * r["n0"] * r["n1"] * nbytes * self.timed("dma")
            return self.dma_setup + -(-total // self.dma_bus_bytes)
        if engine == Engine.TENSOR:
            # Stationary load overlaps the previous tile; the moving stream and the array's
            # skew (rows + cols) dominate.
            return max(r["m"], 1) + self.columns(r) + self.rows + self.cols
        return self.vector_cost(r) - self._vector_overlap(r)

    def columns(self, r):
        """Cycles the array takes a matmul's moving stream: one per column (at least one);
        none with the tensor engine idealized."""
        return max(r["n"], 1) if self.timed("tensor") else 0

    def table_cost(self, r, partitions=2):
        """Cycles of a TABLE record (:func:`table_cycles`); ``TABLE_SETUP`` alone with the
        vector engine idealized."""
        return table_cycles(r, partitions) if self.timed("vector") else TABLE_SETUP

    def _elements(self, r):
        return r["n"] if self.timed("vector") else 0

    def vector_cost(self, r):
        """Cycles from a vector record's take to its done pulse, alone."""
        n = self._elements(r)
        if r["op"] in (isa.VecOp.SEED,):
            return 1
        if r["op"] == isa.VecOp.TABLE:
            return self.table_cost(r)
        extra = self._vector_span(r, self.vector_subs) - self._vector_span(r, 1)
        if r["op"] == isa.VecOp.ACC_RD:
            return 1 + self.vector_pipeline + extra
        summing = (r["op"] == isa.VecOp.ACT and r["acc"]) or \
            (r["op"] == isa.VecOp.REDUCE and r["alu"] == isa.VecAlu.ADD)
        return n * (1 + (self.vector_acc_wait if summing else 0)) + self.vector_pipeline + extra

    def _vector_span(self, r, subs):
        """Cycles from a vector record's first element entering ``rtl.vector.engine.
        VectorEngine`` with ``subs`` sub-beats per element to its last ``o`` beat, beyond a
        one-beat engine's ``latency``: the elements (``sim.vector.element_cycles`` apart), the
        last one's sub-beats (its ``a`` beat is taken with the last) or, for a REDUCE (it
        emits only its accumulators), the read-out's wait for the last update (``max(subs +
        1, 1 + acc_wait, subs + acc_wait - 1)``; 2, or ``1 + acc_wait`` after a sum, with one
        unit per lane), and the serial output's ``subs - 1`` cycles of latency from two
        sub-beats on (``VectorOutput.latency_of``; all an ACC_RD, which has no elements,
        adds)."""
        op, w = r["op"], self.vector_acc_wait
        more = subs - 1 if subs > 1 else 0
        if op == isa.VecOp.ACC_RD:
            return more
        reduce = op == isa.VecOp.REDUCE
        summing = (op == isa.VecOp.ACT and r["acc"]) or \
            (op == isa.VecOp.REDUCE and r["alu"] == isa.VecAlu.ADD)
        accumulating = (op == isa.VecOp.ACT and r["acc"]) or op == isa.VecOp.REDUCE
        n = self._elements(r)
        if subs == 1:
            per = element_cycles(1, w, AccOp.SUM if summing else AccOp.NONE)
            tail = (max(2, 1 + w) if summing else 2) if reduce else 0
        else:
            per = element_cycles(subs, w, AccOp.SUM if accumulating else AccOp.NONE)
            tail = max(subs + 1, 1 + w, subs + w - 1) if reduce else subs - 1
        return max(n - 1, 0) * per + tail + more


@dataclass
class RecordTiming:
    engine: Engine
    word: int
    emit: int
    accept: int = 0
    done: int = 0
    fields: dict = field(default_factory=dict)
    #: The cycle the engine may take the next record (``done`` unless the cost has a latency).
    free: int = None
    #: A DMA record's slack (``MicroSim._dma_slack``): cycles the record before it may be late
    #: before this one is.
    slack: int = 0

    def __post_init__(self):
        if self.free is None:
            self.free = self.done



class MicroSim:
    """Micro-level, cycle-level model of the sequencer.

    Parameters
    ----------
    program : list of int
    pmem_depth, queue_depth, max_outstanding :
        As the RTL's parameters.
    control_store, opcode_map : list of int, optional
        Default: the shipped ``sim.microcode`` contents.
    cost : callable ``(engine, record_fields) -> cycles``
        Default :class:`EngineCost`.
    sbuf_port : bool
        Whether the DMA's loads and the vector engine's outputs share SBUF's write port
        (:meth:`_contend`); only with a cost that times the DMA as the RTL does
        (``EngineCost.dma_config``).
    """

    def __init__(self, program, *, pmem_depth=1024, queue_depth=2,
                 max_outstanding=isa.MAX_OUTSTANDING, control_store=None, opcode_map=None,
                 cost=None, sbuf_port=True):
        self.program = [int(w) for w in program]
        self.pmem_depth = pmem_depth
        self.queue_depth = queue_depth
        self.max_outstanding = max_outstanding
        self.ucode = list(control_store or microcode.control_store())
        self.omap = list(opcode_map or microcode.opcode_map())
        self.cost = cost or EngineCost()
        timeline = getattr(self.cost, "dma_timeline", None)
        self._dma = timeline() if timeline is not None else None
        self._port = bool(sbuf_port) and self._dma is not None
        self.regs = [0] * isa.NUM_REGS
        self.flags = {"EQ": 0, "LT": 0, "LTU": 0}
        self.sems = [0] * isa.NUM_SEMS
        self.loops, self.calls, self.ustack = [], [], []
        self.ags = [dict(level=0, reg=0, stride=0, base=0) for _ in range(isa.NUM_AG)]
        self.t = [0, 0]
        self.uctr = 0
        self._uctr_w = self._push_w = -2     # the cycle X last wrote UCTR, pushed a loop
        self._step_w = -2                    # ... and last stepped or popped a loop
        self._flags_w = -2                   # ... and last wrote the flags
        # the cycle X last wrote a slot the EMIT check reads (``isa.CHECKED_SLOTS``), per engine
        self._slot_w = {e: -2 for e in isa.CHECKED_SLOTS}
        self._semrd_last = 0                 # the semaphore a SEMRD in X saw last cycle
        self.rec = {e: [0] * isa.RECORD_SLOTS[e] for e in Engine}
        self.pc = 0
        self.error = 0
        self.err_pc = 0
        self.retired = 0
        self.cycle = 0
        self.timeline = {e: [] for e in Engine}
        self.trace = {e: [] for e in Engine}
        self.perf = {e: {"busy": 0, "semwait": 0, "idle": 0, "blocked": 0} for e in Engine}
        #: ``(first, end, sem)`` of each WAIT that held beyond its two fixed cycles: the
        #: sequencer stalled in cycles ``[first, end)`` for semaphore ``sem``.
        self.wait_spans = []
        #: Cycles the sequencer stalled at a BARRIER (or an EMIT to no engine).
        self.barrier_stall = 0
        self._pending_incs = []        # (done_cycle, sem)

    # -- engine queue state at cycle c ---------------------------------------------------------
    def _queued(self, e, c):
        """Records in the output queue (emitted before c, not yet accepted before c)."""
        tail = self.timeline[e][-(self.max_outstanding + self.queue_depth + 1):]
        return sum(1 for r in tail if r.emit < c and not r.accept < c)

    def _outstanding(self, e, c):
        tail = self.timeline[e][-(self.max_outstanding + self.queue_depth + 1):]
        return sum(1 for r in tail if r.emit < c and not r.done < c)

    def _apply_incs(self, c, dropped=None):
        """Apply the semaphore increments of done pulses sampled at the end of cycle c - 1."""
        keep = []
        for t, s in self._pending_incs:
            if t < c:
                if dropped is None or (t, s) not in dropped:
                    self.sems[s] = (self.sems[s] + 1) & 0xFFFF
            else:
                keep.append((t, s))
        self._pending_incs = keep

    def _emit(self, e, c):
        word = 0
        for i, v in enumerate(self.rec[e]):
            word |= (v & MASK32) << (32 * i)
        f = isa.unpack(isa.RECORDS[e], word)
        tl = self.timeline[e]
        prev = tl[-1] if tl else None
        accept = c + 1
        if e == Engine.DMA and self._dma is not None:
            if prev is not None:
                accept = max(accept, prev.accept + 1)
            before = copy.copy(self._dma)
            accept, done = self._dma.add(f, accept)
            slack = self._dma_slack(before, f, accept, done)
            r = RecordTiming(e, word, c, accept, max(done, accept + 1), f, slack=slack)
        else:
            if prev is not None:
                accept = max(accept, prev.accept + 1, prev.free)
            free = accept + max(int(self.cost(e, f)), 1)
            latency = getattr(self.cost, "latency", None)
            done = max(free + (int(latency(e, f)) if latency is not None else 0), prev.done + 1
                       if prev is not None else 0)
            r = RecordTiming(e, word, c, accept, done, f, free)
            if e == Engine.VECTOR and self._port:
                self._queue_outputs(r)
        tl.append(r)
        self.trace[e].append(word)
        if f["sem_en"]:
            self._pending_incs.append((r.done, f["sem"]))
        if self._port and e in (Engine.DMA, Engine.VECTOR):
            self._contend(e, r, c)
        self.rec[e] = [0] * isa.RECORD_SLOTS[e]

    def _queue_outputs(self, r):
        """Vector record ``r``, about to be scheduled: its output beats leave the engine in
        order, after those of the records before it (``VectorOutput``'s FIFO), so where the
        last record with outputs still writes when ``r``'s first write is due (its writes
        lost the shared port), ``r`` is done as much later; ``r.slack`` is how much later
        that record's writes may end before ``r``'s move (a record without element outputs
        does not wait for them: no slack bound)."""
        mine = self._writes(Engine.VECTOR, r)
        if mine is None:
            r.slack = _FAR
            return
        for p in reversed(self.timeline[Engine.VECTOR]):
            theirs = self._writes(Engine.VECTOR, p)
            if theirs is not None:
                r.done += max(theirs[1] - mine[0], 0)
                r.slack = max(mine[0] - theirs[1], 0)
                return

    @staticmethod
    def _dma_slack(before, f, accept, done):
        """Cycles by which DMA record ``f``, taken at ``accept`` and done at ``done`` by the
        ``DmaTimeline`` ``before`` its offer, ends after the bound the record before it sets
        (its data ``GAP`` cycles after that record's, or its issue after that record's
        ``done``): how late that record may become before this one moves."""
        last = before._last
        if last is None:
            return 0
        before._last = (last[0], last[1] + _FAR, last[2] + _FAR)
        _, bound = before.add(f, accept)
        return max(done - (bound - _FAR), 0)

    # -- the shared SBUF write port --------------------------------------------------------------
    def _writes(self, e, r):
        """``(first, end, writes)``: the cycles in which record ``r`` of engine ``e`` writes
        SBUF (its writes spread evenly over ``[first, end)``), or None if it writes none. A
        DMA load writes its SBUF cycles (``sim.dma_timing``: an element along a partition, a
        beat's elements across partitions) before its data side ends; a vector record with
        element outputs writes one beat per element, ``sim.vector.element_cycles`` apart,
        before its done pulse (a REDUCE or ACC_RD writes its accumulators once, a TABLE or
        SEED nothing). An engine the cost idealizes (``EngineCost.ideal``) writes in no
        cycles: None."""
        f = r.fields
        ideal = getattr(self.cost, "ideal", ())
        if ("dma" if e == Engine.DMA else "vector") in ideal:
            return None
        if e == Engine.DMA:
            if f["store"] or not (f["n0"] and f["n1"] and f["part_count"]):
                return None
            from sim.dma_timing import LOAD_FIN, _parts
            c = self.cost.dma_config
            _, bursts, units, _ = _parts(f, data_width=c.dma_data_width,
                                         sbuf_depth=c.sbuf_depth, max_burst=c.max_burst)
            end = r.done - LOAD_FIN
            return end - max(units, sum(bursts)), end, units
        op = f["op"]
        if op in (isa.VecOp.TABLE, isa.VecOp.SEED, isa.VecOp.REDUCE, isa.VecOp.ACC_RD) \
                or not f["n"]:
            return None
        acc = getattr(self.cost, "vector_acc_wait", 3)
        per = element_cycles(1, acc, AccOp.SUM if op == isa.VecOp.ACT and f["acc"]
                             else AccOp.NONE)
        end = r.done - VECTOR_WRITE_TO_DONE
        return end - f["n"] * per, end, f["n"]

    def _contend(self, e, r, now):
        """Record ``r`` of engine ``e`` (the DMA or the vector engine) just scheduled: where
        its SBUF writes overlap those of the other writer's records, the two share the write
        port as ``rtl.core.sbuf.SBUF``'s round-robin arbiter serves them (:func:`share_port`),
        and each record (with the records of its engine after it) is late by the cycles its
        last write lost."""
        mine = self._writes(e, r)
        if mine is None:
            return
        other = Engine.VECTOR if e == Engine.DMA else Engine.DMA
        for q in self.timeline[other][-(self.max_outstanding + self.queue_depth + 1):]:
            if q.done < now:
                continue
            theirs = self._writes(other, q)
            if theirs is None or min(mine[1], theirs[1]) <= max(mine[0], theirs[0]):
                continue
            dma, vec = (r, q) if e == Engine.DMA else (q, r)
            dw, vw = (mine, theirs) if e == Engine.DMA else (theirs, mine)
            late_dma, late_vec = share_port(_spread(*dw), _spread(*vw))
            if late_dma:
                self._delay(Engine.DMA, dma, late_dma, now)
            if late_vec:
                self._delay(Engine.VECTOR, vec, late_vec, now)

    def _delay(self, e, q, n, now):
        """Record ``q`` of engine ``e`` completes ``n`` cycles later; a record of ``e`` after
        it moves only by what its slack (``RecordTiming.slack``) does not absorb. A late
        DMA load holds the DMA (its data side: the next record's data follow its data); a
        late vector record holds only the output beats behind it (the engine's pipeline
        never stalls: its inputs are taken and the next record starts as if on time).
        Semaphore increments move with the records."""
        tl = self.timeline[e]
        start = next(i for i in range(len(tl) - 1, -1, -1) if tl[i] is q)
        shift = n
        for k, x in enumerate(tl[start:]):
            if k:
                shift, x.slack = max(shift - x.slack, 0), max(x.slack - shift, 0)
            if x.done < now or not shift:
                continue
            old = (x.done, x.fields["sem"])
            if e == Engine.DMA:
                x.free += shift
            x.done += shift
            if x.fields["sem_en"] and old in self._pending_incs:
                self._pending_incs[self._pending_incs.index(old)] = (x.done, old[1])
        if e == Engine.DMA and shift:
            # The data side of the DMA's last record ends later: the next record's data
            # follow it (``DmaTimeline`` keeps ``(store, done, fin)`` of that record).
            self._dma.delay(shift)

    # -- micro-instruction execution ------------------------------------------------------------
    def _reg(self, i):
        return self.regs[i & 63]

    def _src(self, sel, f, k):
        rd, rs1, rs2, rs3 = f["rd"], f["rs1"], f["rs2"], f["rs3"]
        table = {USrc.RD: rd, USrc.RS1: rs1, USrc.RS2: rs2, USrc.RS3: rs3, USrc.RD1: rd + 1,
                 USrc.RD2: rd + 2, USrc.RD3: rd + 3, USrc.RS2P1: rs2 + 1,
                 USrc.AGREG: self.ags[k]["reg"]}
        if sel in table:
            return self._reg(table[sel])
        return {USrc.ZERO: 0, USrc.IMM: f["imm"], USrc.T0: self.t[0], USrc.T1: self.t[1],
                USrc.AGSTRIDE: self.ags[k]["stride"], USrc.AGBASE: self.ags[k]["base"]
                }.get(sel, None)

    @staticmethod
    def _alu(op, a, b):
        sh = b & 31
        return {
            UAlu.ADD: (a + b) & MASK32, UAlu.SUB: (a - b) & MASK32, UAlu.AND: a & b,
            UAlu.OR: a | b, UAlu.XOR: a ^ b, UAlu.SHL: (a << sh) & MASK32, UAlu.SHR: a >> sh,
            UAlu.SRA: (_s32(a) >> sh) & MASK32, UAlu.SLT: int(_s32(a) < _s32(b)),
            UAlu.SLTU: int(a < b), UAlu.PASSA: a, UAlu.PASSB: b,
        }.get(op, 0)

    def run(self, max_cycles=1 << 60):
        """Run to HALT or an error; returns self. ``cycle`` then equals the RTL's ``cycles``
        performance counter."""
        c = 0
        while True:
            # FETCH
            self._account(c, wait=False)
            if self.pc >= self.pmem_depth:
                # trapped in DECODE, on the compare registered in FETCH
                self._account(c + 1, wait=False)
                return self._fail(ErrorBit.PC_RANGE, c + 2)
            word = self.program[self.pc] if self.pc < len(self.program) else 0
            f = isa.decode(word)
            self._account(c + 1, wait=False)        # DECODE
            self._account(c + 2, wait=False)        # MAP
            c += 3
            entry = self.omap[f["op"]]
            if not entry >> isa.UADDR_BITS:
                self._account(c, wait=False)        # trapped in EXEC's first cycle
                return self._fail(ErrorBit.ILLEGAL_OPCODE, c + 1)
            upc = entry & ((1 << isa.UADDR_BITS) - 1)
            npc = self.pc + 1
            self._account(c, wait=False)            # micro-pipeline fill: fetch
            self._account(c + 1, wait=False)        # and operand read
            c += 2
            self.ustack = []
            armed = False           # a WAIT in X past its first cycle
            held = 0                # cycles X's micro-instruction has held so far
            while True:
                if c > max_cycles:
                    raise RuntimeError(f"no HALT within {max_cycles} cycles")
                self._apply_incs(c - 1 if armed else c)
                out = self._micro(self.ucode[upc], f, c, upc, npc,
                                  wait_at=c - 1 if armed else None, held=held)
                kind = out[0]
                if kind == "wait_first":
                    # The value and the compare are registered: the first two cycles of a
                    # WAIT always hold; the third decides on the compare of the second.
                    self._account(c, wait=False)
                    self._account(c + 1, wait=False)
                    c += 2
                    held += 2
                    armed = True
                    continue
                if kind == "hold":
                    # A registered test or value not yet made (a Z/NZ BRANCH's first two
                    # cycles; a ULOOP or a LOOP_MORE right after the write of its count; a
                    # SEMRD's first two cycles): holds a cycle.
                    self._account(c, wait=False)
                    c += 1
                    held += 1
                    continue
                if kind == "stall" and out[1]:
                    # WAIT short at c - 1: holds until the cycle after the next change.
                    nxt = self._next_event(c - 1)
                    self._account(c, wait=True, count=nxt - c)
                    self._account(nxt, wait=True)
                    held += nxt + 1 - c
                    c = nxt + 1
                    continue
                was_wait, armed = armed, False
                if kind == "stall":
                    # Nothing changes until the next engine event: skip to it.
                    nxt = self._next_event(c)
                    self._account(c, wait=out[1], count=nxt - c)
                    if out[2] is not None:
                        self.perf[out[2]]["blocked"] += nxt - c
                    else:
                        self.barrier_stall += nxt - c
                    held += nxt - c
                    c = nxt
                    continue
                if was_wait and kind == "ok" and held > 2:
                    self.wait_spans.append((c - held + 2, c, f["imm"] & 15))
                held = 0
                self._account(c, wait=kind == "error" and out[1] == ErrorBit.DEADLOCK)
                c += 1
                if kind == "error":
                    return self._fail(out[1], c)
                _, upc, npc, end, halt, bubble = out
                if not end:
                    for _ in range(bubble):             # the pipeline refills
                        self._account(c, wait=False)
                        c += 1
                if end:
                    self.retired += 1
                    self.pc = npc & MASK32
                    if halt:
                        self.cycle = c
                        self._finish(c)
                        return self
                    break

    def _finish(self, c):
        self._apply_incs(1 << 62)

    def _fail(self, bit, c):
        self.error |= 1 << bit
        self.err_pc = self.pc
        self.cycle = c
        self._finish(c)
        return self

    def _next_event(self, c):
        """The first cycle after c at which a queue level or a semaphore changes."""
        times = [t + 1 for tl in self.timeline.values() for r in tl[-(self.max_outstanding
                                                                     + self.queue_depth + 1):]
                 for t in (r.accept, r.done) if t + 1 > c]
        return min(times) if times else c + 1

    def _account(self, c, wait, count=1):
        for e in Engine:
            p = self.perf[e]
            if self._outstanding(e, c):
                p["busy"] += count
            elif wait:
                p["semwait"] += count
            else:
                p["idle"] += count

    def _micro(self, w, f, c, upc, npc, wait_at=None, held=0):
        """One micro-instruction in X at cycle ``c``, where it has held ``held`` cycles. A WAIT
        decides on the compare of cycle ``wait_at`` (the cycle before; ``self.sems`` as of
        then); ``None``: its first cycle, which always holds. A BRANCH on Z/NZ holds its first
        two cycles in X, a ULOOP the cycle after a UCTR write went, a BRANCH on LOOP_MORE the
        cycle after a LOOP_PUSH went and a SEMRD its first two cycles, stalls and errors aside."""
        u = _UNPACKED.get(w)
        if u is None:
            u = _UNPACKED[w] = isa.unpack(isa.MICRO_FIELDS, w)
        k = u["const"] & 3
        a = self._src(u["a"], f, k)
        b = self._src(u["b"], f, k)
        a = u["const"] if a is None else a
        b = u["const"] if b is None else b
        res = self._alu(u["alu"], a, b)
        special, seq, dst, eng = u["special"], u["seq"], u["dst"], u["eng"]
        sem_idx = f["imm"] & 15
        if special == USpecial.SEMRD:
            # SEMRD writes the semaphore as it was in its previous cycle in X (the RTL
            # registers it) and holds its first two cycles.
            semrd_val = self._semrd_last
            self._semrd_last = self.sems[sem_idx]
        depth = len(self.loops)
        # stalls
        if special == USpecial.EMIT:
            e = Engine(eng) if eng < 3 else None
            if e is None or self._queued(e, c) >= self.queue_depth or \
                    self._outstanding(e, c) >= self.max_outstanding:
                return ("stall", False, e)
        if special == USpecial.WAIT:
            if wait_at is None:
                return ("wait_first",)
            if self.sems[sem_idx] < (res & 0xFFFF):
                if not any(self._outstanding(e, wait_at) for e in Engine):
                    return ("error", ErrorBit.DEADLOCK)
                return ("stall", True, None)
        if special == USpecial.BARRIER and any(self._outstanding(e, c) for e in Engine):
            return ("stall", False, None)
        # errors
        if special == USpecial.LOOP_PUSH and depth == isa.LOOP_DEPTH:
            return ("error", ErrorBit.LOOP_OVERFLOW)
        if special in (USpecial.LOOP_STEP, USpecial.LOOP_POP) and depth == 0:
            return ("error", ErrorBit.LOOP_UNDERFLOW)
        if special == USpecial.CALL_PUSH and len(self.calls) == isa.CALL_DEPTH:
            return ("error", ErrorBit.CALL_OVERFLOW)
        if special == USpecial.CALL_POP and not self.calls:
            return ("error", ErrorBit.CALL_UNDERFLOW)
        if seq == USeq.CALL and len(self.ustack) == isa.UCALL_DEPTH:
            return ("error", ErrorBit.UCALL_OVERFLOW)
        if seq == USeq.RET and not self.ustack:
            return ("error", ErrorBit.UCALL_UNDERFLOW)
        if seq == USeq.TRAP:
            return ("error", ErrorBit.MICRO_TRAP)
        if seq == USeq.BRANCH and u["cond"] in (UCond.Z, UCond.NZ) and held < 2:
            return ("hold",)
        if seq == USeq.ULOOP and self._uctr_w == c - 1:
            return ("hold",)
        if seq == USeq.BRANCH and u["cond"] == UCond.LOOP_MORE and \
                c - 1 in (self._push_w, self._step_w):
            return ("hold",)
        if special == USpecial.LOOP_STEP and self._step_w == c - 1:
            return ("hold",)
        if seq == USeq.BRANCH and u["cond"] in isa.FLAG_CONDS and self._flags_w == c - 1:
            return ("hold",)
        if special == USpecial.EMIT and self._slot_w.get(eng) == c - 1:
            return ("hold",)
        if special == USpecial.SEMRD and held < 2:
            return ("hold",)
        # condition (before any state changes)
        top = self.loops[-1] if self.loops else None
        cond = {UCond.ALWAYS: 1, UCond.Z: res == 0, UCond.NZ: res != 0,
                UCond.EQ: self.flags["EQ"], UCond.NE: not self.flags["EQ"],
                UCond.LT: self.flags["LT"], UCond.GE: not self.flags["LT"],
                UCond.LTU: self.flags["LTU"], UCond.GEU: not self.flags["LTU"],
                UCond.LOOP_MORE: top is not None and top[1] > 1}.get(u["cond"], 0)
        ag = self.ags[k]
        ag_match = ag["level"] != 0 and ag["level"] == depth
        # next macro PC
        new_npc = npc
        if dst == UDst.NPC:
            new_npc = res
        if special == USpecial.LOOP_STEP:
            new_npc = top[0]
        elif special == USpecial.CALL_PUSH:
            new_npc = res
        elif special == USpecial.CALL_POP:
            new_npc = self.calls[-1]
        # register file (one write port, RTL priority)
        if dst == UDst.RD:
            if f["rd"]:
                self.regs[f["rd"]] = res
        elif dst == UDst.AGREG:
            if ag_match and ag["reg"]:
                self.regs[ag["reg"]] = res
        elif special == USpecial.SEMRD:
            if f["rd"]:
                self.regs[f["rd"]] = semrd_val
        if dst == UDst.T0:
            self.t[0] = res
        elif dst == UDst.T1:
            self.t[1] = res
        elif dst == UDst.FLAGS:
            self.flags = {"EQ": int(a == b), "LT": int(_s32(a) < _s32(b)), "LTU": int(a < b)}
        elif dst == UDst.UCTR:
            self.uctr = res & 0xFFFF
        elif dst == UDst.SLOT and eng < 3 and u["slot"] < isa.RECORD_SLOTS[Engine(eng)]:
            self.rec[Engine(eng)][u["slot"]] = res
        # specials
        if special == USpecial.EMIT:
            self._emit(Engine(eng), c)
        elif special == USpecial.SEMINC:
            self.sems[sem_idx] = (self.sems[sem_idx] + 1) & 0xFFFF
        elif special == USpecial.SEMSET:
            # The RTL's SEMSET wins over completions sampled in the same cycle.
            self._pending_incs = [(t, s) for t, s in self._pending_incs
                                  if not (t == c and s == sem_idx)]
            self.sems[sem_idx] = res & 0xFFFF
        elif special == USpecial.LOOP_PUSH:
            self.loops.append([self.pc + 1, res])
        elif special == USpecial.LOOP_STEP:
            top[1] = (top[1] - 1) & MASK32
        elif special == USpecial.LOOP_POP:
            self.loops.pop()
        elif special == USpecial.CALL_PUSH:
            self.calls.append((self.pc + 1) & MASK32)
        elif special == USpecial.CALL_POP:
            self.calls.pop()
        elif special == USpecial.AG_SET:
            g = self.ags[f["imm"] & 3]
            g.update(level=(f["imm"] >> 8) & 7, reg=f["rd"], stride=res)
        elif special == USpecial.AG_SNAP:
            if ag_match:
                ag["base"] = res
        # sequencing
        unext = upc + 1
        # a redirect refills R and F (2 bubbles); an AG_SET/AG_SNAP re-reads R (1) if R's
        # micro-instruction (the successor) reads generator state it writes: AG_SET the
        # register index and stride (sources AGREG, AGSTRIDE), AG_SNAP the base (AGBASE)
        redirect = seq == USeq.RET or (seq == USeq.BRANCH and cond) or \
            (seq == USeq.ULOOP and self.uctr != 0)
        if seq in (USeq.JUMP, USeq.CALL):
            unext = u["target"]
        bubble = 2 if redirect else 0
        if not redirect and special in (USpecial.AG_SET, USpecial.AG_SNAP):
            succ = self.ucode[unext & ((1 << isa.UADDR_BITS) - 1)]
            nu = _UNPACKED.get(succ)
            if nu is None:
                nu = _UNPACKED[succ] = isa.unpack(isa.MICRO_FIELDS, succ)
            written = AG_SET_READS if special == USpecial.AG_SET else AG_SNAP_READS
            bubble = int(nu["a"] in written or nu["b"] in written)
        if seq == USeq.CALL:
            self.ustack.append(upc + 1)
        elif seq == USeq.RET:
            unext = self.ustack.pop()
        elif seq == USeq.BRANCH and cond:
            unext = u["target"]
        elif seq == USeq.ULOOP and self.uctr != 0:
            self.uctr -= 1
            unext = u["target"]
        unext &= (1 << isa.UADDR_BITS) - 1
        # (the RTL's ``uctr_fix``, which a ULOOP's own decrement cancels, and ``push_w``)
        if dst == UDst.UCTR and not (seq == USeq.ULOOP and redirect):
            self._uctr_w = c
        if special == USpecial.LOOP_PUSH:
            self._push_w = c
        if special in (USpecial.LOOP_STEP, USpecial.LOOP_POP):
            self._step_w = c
        if dst == UDst.FLAGS:
            self._flags_w = c
        if dst == UDst.SLOT and u["slot"] in isa.CHECKED_SLOTS.get(eng, ()):
            self._slot_w[eng] = c
        return ("ok", unext, new_npc, seq == USeq.END, seq == USeq.END and
                special == USpecial.HALT, bubble)
