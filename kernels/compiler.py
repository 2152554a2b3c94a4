"""From a trace to a program: allocation, dependencies, scheduling, semaphores and assembly.

1. **Allocation.** DRAM buffers are laid out one after the other (inputs, constants, outputs,
   scratch; 64-byte aligned). SBUF and PSUM buffers live from the first to the last operation
   that touches them; each takes the free range released longest ago (fresh memory first), so
   that a tile allocated in a loop rotates through as many buffers as memory holds (double or
   deeper buffering without the kernel writing it).
2. **Dependencies.** Every pair of operations whose accesses overlap (read after write,
   write after read, write after write; SBUF/PSUM by partition and word, DRAM by byte range)
   is an edge. An edge needs a semaphore wait unless the engine's own order makes it safe:
   the tensor engine's records are applied to PSUM in order (accumulation chains), and the
   vector engine writes after it reads, so its write-after-read and write-after-write edges
   are ordered by its queue. Everything else (any edge between engines, a vector read of a
   vector result, any DMA edge) waits for the producer's completion.
3. **Scheduling.** The tensor and vector engines keep the trace's order; DMA records may move
   (not ahead of a record traced before a ``kernels.lang.dma_order`` point).
   A list scheduler picks, among the operations whose predecessors are placed, the one the
   sequencer can issue first, with a model of the engines measured on the RTL (the constants
   below): serial DMA and vector engines, a pipelined array, and engine queues of two records
   that stall the sequencer when full. Loads run ahead as far as their buffers and the DMA
   queue allow; ``Program.estimate`` is the modelled cycle count.
4. **Semaphores.** Semaphore ``e`` counts the completed records of engine ``e`` (DMA 0,
   TENSOR 1, VECTOR 2; every record has ``sem_en=1``). Engines complete in issue order, so
   "record ``i`` of engine ``e`` is done" is ``waiti e, i+1``; a wait is emitted before the
   first consumer that needs it and never repeated.
5. **Assembly.** Registers hold descriptor blocks, ACT scale/bias pairs and addresses, cached
   (least recently used) so repeated values cost no ``li``.
"""

import heapq

from kernels.lang import KernelError

__all__ = ["compile_trace", "Program", "ProgramTooLong", "SEM", "ENGINES"]

#: The semaphore that counts each engine's completed records.
SEM = {"dma": 0, "tensor": 1, "vector": 2}
ENGINES = ("dma", "tensor", "vector")
_ALIGN = 64
_DRAM_BASE = 0x1000
#: Records an engine holds issued and not completed before the sequencer stalls
#: (``sim.isa.MAX_OUTSTANDING``).
_MAX_OUTSTANDING = 8


class Program:
    """A compiled kernel: ``asm`` (assembly text), ``words``, ``order`` (scheduled
    operations), the DRAM layout (``buffers``), ``dram_bytes``, per-engine record counts and
    the scheduler's ``estimate`` of its cycles."""

    def __init__(self, asm, words, order, buffers, dram_bytes, counts, waits, estimate=None):
        self.asm, self.words, self.order, self.estimate = asm, words, order, estimate
        self.buffers, self.dram_bytes = buffers, dram_bytes
        self.counts, self.waits = counts, waits


# ---------------------------------------------------------------------------------------------
# 1. Allocation
# ---------------------------------------------------------------------------------------------

def _layout_dram(trace):
    addr = _DRAM_BASE
    order = {"input": 0, "constant": 1, "output": 2, "scratch": 3}
    for b in sorted((b for b in trace.buffers if b.space == "dram"),
                    key=lambda b: order[b.kind]):
        b.addr = addr
        addr += -(-b.size // _ALIGN) * _ALIGN
    return addr


class _Allocator:
    """Free ranges ``[lo, hi)`` with the time each was released; allocation takes the range
    released longest ago that fits (fresh memory has time -1), merging neighbours only when
    nothing fits."""

    def __init__(self, depth, space):
        self.free = [[0, depth, -1]]
        self.depth, self.space = depth, space

    def alloc(self, size, when, name):
        best = self._best(size)
        if best is None:
            self._merge()
            best = self._best(size)
        if best is None:
            largest = max((hi - lo for lo, hi, _ in self.free), default=0)
            raise KernelError(
                f"{self.space} is full: tile '{name}' needs {size} words per partition, the "
                f"largest free range has {largest} ({self.space}_depth = {self.depth}); use "
                f"smaller tiles or fewer live at once")
        lo, hi, t = self.free[best]
        if hi - lo == size:
            del self.free[best]
        else:
            self.free[best][0] = lo + size
        return lo

    def _best(self, size):
        best = None
        for i, (lo, hi, t) in enumerate(self.free):
            if hi - lo >= size and (best is None or t < self.free[best][2]):
                best = i
        return best

    def release(self, lo, size, when):
        # Ranges are merged only when an allocation does not fit otherwise: a merged range
        # would be as recent as its most recent part and hide the older memory.
        self.free.append([lo, lo + size, when])

    def _merge(self):
        self.free.sort()
        merged = []
        for r in self.free:
            if merged and merged[-1][1] == r[0]:
                merged[-1][1] = r[1]
                merged[-1][2] = max(merged[-1][2], r[2])
            else:
                merged.append(list(r))
        self.free = merged


def _allocate(trace):
    cfg = trace.config
    first, last = {}, {}
    for op in trace.ops:
        for acc in op.reads + op.writes:
            b = acc[0]
            if b.space != "dram":
                first.setdefault(b, op.index)
                last[b] = op.index
    for space, depth in (("sbuf", cfg.sbuf_depth), ("psum", cfg.psum_depth)):
        al = _Allocator(depth, space)
        bufs = [b for b in first if b.space == space]
        starts = sorted(bufs, key=lambda b: (first[b], b.name))
        ends = sorted(bufs, key=lambda b: last[b])
        j = 0
        for b in starts:
            while j < len(ends) and last[ends[j]] < first[b]:
                e = ends[j]
                al.release(e.addr, e.size, last[e])
                j += 1
            b.addr = al.alloc(b.size, first[b], b.name)
    for b in trace.buffers:
        if b.addr is None and b.space != "dram":
            b.addr = 0


# ---------------------------------------------------------------------------------------------
# 2. Dependencies
# ---------------------------------------------------------------------------------------------

def _absolute(acc):
    b, plo, phi, lo, hi = acc
    return b.space, plo, phi, b.addr + lo, b.addr + hi


def _needs_wait(p, s, hazard):
    if p.engine != s.engine:
        return True
    if p.engine == "tensor":
        return False
    if p.engine == "vector":
        return hazard == "raw"
    # The DMA takes a record only once the previous one is done (sim/races.py).
    return False


def _dependencies(ops):
    """``preds[i]``: list of ``(j, needs_wait)``."""
    live = {"sbuf": [], "psum": [], "dram": []}     # [space] -> [(plo, phi, lo, hi, op, write)]
    preds = [dict() for _ in ops]
    last_dma = fence = None
    for op in ops:
        # A TABLE_LD is fenced from the DMA: it waits for every earlier DMA record and every
        # later one waits for it (a DMA write during a TABLE read of SBUF stops the core).
        if op.kind == "table_ld" and last_dma is not None:
            preds[op.index][last_dma.index] = True
        if op.engine == "dma":
            if fence is not None:
                preds[op.index][fence.index] = True
            last_dma = op
        elif op.kind == "table_ld":
            fence = op
        accs = [(a, False) for a in op.reads] + [(a, True) for a in op.writes]
        found = preds[op.index]
        new = []
        for acc, write in accs:
            space, plo, phi, lo, hi = _absolute(acc)
            lst = live[space]
            for (qplo, qphi, qlo, qhi, q, qwrite) in lst:
                if q is op or not (qwrite or write):
                    continue
                if qlo < hi and lo < qhi and (space == "dram" or (qplo < phi and plo < qphi)):
                    hazard = "raw" if qwrite and not write else ("war" if write and not qwrite
                                                                 else "waw")
                    w = _needs_wait(q, op, hazard)
                    found[q.index] = found.get(q.index, False) or w
            new.append((space, (plo, phi, lo, hi, op, write)))
        for space, rec in new:
            plo, phi, lo, hi, _, write = rec
            if write:
                live[space] = [r for r in live[space]
                               if not (lo <= r[2] and r[3] <= hi and plo <= r[0] and
                                       r[1] <= phi and r[4] is not op)]
            live[space].append(rec)
    return [sorted(p.items()) for p in preds]


# ---------------------------------------------------------------------------------------------
# 3. Scheduling
# ---------------------------------------------------------------------------------------------

#: Costs of the engines as measured on the RTL (docs/kernels.md). The four DMA constants are
#: a per-element approximation of a 32-bit DMA (``kernels.bench.RtlCost`` without a
#: ``dma_config``); the scheduler charges a DMA record ``sim.dma_timing``'s cycles.
DMA_SETUP = 11              # cycles per DMA record
DMA_RUN = 1                 # cycles per contiguous run (a partition row of a 2-D/3-D view)
DMA_STRIDED = 2             # cycles per element when the innermost stride is not one element
DMA_STRIDED_SETUP = 18
TENSOR_LATENCY = 60         # cycles from a matmul taking the array to its PSUM write
VECTOR_PIPELINE = 57        # fill and drain of the vector pipeline around a record
VECTOR_ACC_WAIT = 3         # extra cycles per element of a summing record
#: Records an engine's queue holds emitted and not yet taken; one more stalls the sequencer.
_QUEUE = 2
#: Sequencer cycles before an engine instruction (its ``li`` set-up), after it, and per matmul
#: of a hardware loop.
_SETUP, _ISSUE, _LOOP_ISSUE = 20, 6, 8


#: Cycles from a read burst's address to its first beat on the memory the kernels' cycle
#: counts are measured with (the fast backend's, ``fastsim/harness.cpp``), for
#: ``sim.dma_timing``.
DMA_LATENCY = 3


def dma_record(a):
    """The ``sim.isa.DMA_RECORD`` fields ``sim.dma_timing`` reads, of DMA operation
    arguments ``a`` (DRAM addresses laid out)."""
    d = a["dram"]
    m = 0xFFFFFFFF
    return dict(fmt=int(d.dtype.fmt), part_count=a["p"], n0=a["n0"], n1=a["n1"],
                ext_stride0=a["stride0"] & m, ext_stride1=a["stride1"] & m,
                ext_part_stride=a["pstride"] & m, store=int(a["store"]),
                ext_addr=(d.buffer.addr + d.offset * d.dtype.nbytes) & m)


def _dma_cycles(a, cfg):
    """A DMA record's cycles alone, as the RTL takes them at every width
    (``sim.dma_timing.dma_record_cycles``)."""
    from sim.dma_timing import dma_record_cycles
    return dma_record_cycles(dma_record(a), data_width=getattr(cfg, "dma_data_width", 32),
                             sbuf_depth=cfg.sbuf_depth, max_burst=cfg.max_burst,
                             latency=DMA_LATENCY)


def _cost(op, cfg):
    """Cycles ``op`` keeps its engine busy (a matmul: the array; the next one follows it
    without a gap)."""
    a = op.args
    if op.kind == "block":
        return sum(_cost(m, cfg) for m in a["ops"])
    if op.engine == "dma":
        return _dma_cycles(a, cfg)
    if op.engine == "tensor":
        return a["n"]
    if op.kind in ("seed_ld",):
        return 1
    if op.kind == "acc_rd":
        return 1 + VECTOR_PIPELINE
    if op.kind == "table_ld":
        return a["n"] + VECTOR_PIPELINE
    n = a["a"].f
    summing = (op.kind == "act" and a.get("acc")) or (op.kind == "reduce" and
                                                      a["alu"] == "add")
    per = 1 + (VECTOR_ACC_WAIT if summing else 0) + (0.5 if op.kind == "tt" else 0)
    return int(n * per) + VECTOR_PIPELINE


class _Queue:
    """One engine as the sequencer sees it: records (emit, accept, free, done), taken in
    order; a record is taken when the engine is free (the DMA and vector engines when the
    previous record is done, the tensor engine when the array has taken the previous
    record's columns)."""

    def __init__(self, engine):
        self.engine = engine
        self.accept, self.done = [], []
        self.free = 0

    def can_emit(self):
        """Earliest emission of the next record: the queue must have room, and no more
        than ``MAX_OUTSTANDING`` records may be emitted and not done."""
        t = self.accept[-_QUEUE] if len(self.accept) >= _QUEUE else 0
        if len(self.done) >= _MAX_OUTSTANDING:
            t = max(t, self.done[-_MAX_OUTSTANDING])
        return t

    def emit(self, t, cost):
        acc = max(t + 1, self.free)
        if self.engine == "tensor":
            self.free = acc + cost
            done = acc + cost + TENSOR_LATENCY
        else:
            done = self.free = acc + cost
        self.accept.append(acc)
        self.done.append(done)
        return done


def _schedule(ops, preds, cfg):
    """List scheduling: at each step the operation that the sequencer can emit first (its
    waits satisfied, its engine's queue with room) is placed; ties go to the engine that is
    free first. Returns the order, the edges and the estimated cycles."""
    n = len(ops)
    succs = [[] for _ in ops]
    indeg = [0] * n
    edges = [list(p) for p in preds]
    prev = {}
    for op in ops:
        if op.engine in ("tensor", "vector"):
            if op.engine in prev and prev[op.engine] not in dict(edges[op.index]):
                edges[op.index].append((prev[op.engine], False))
            prev[op.engine] = op.index
        after = getattr(op, "after", None)
        if after is not None and after.index not in dict(edges[op.index]):
            edges[op.index].append((after.index, False))    # the DMA queue keeps the order
    for i, ps in enumerate(edges):
        indeg[i] = len(ps)
        for j, _ in ps:
            succs[j].append(i)
    done = [0] * n
    heaps = {e: [] for e in ENGINES}
    queues = {e: _Queue(e) for e in ENGINES}
    t = 0

    def ready_time(i):
        return max([done[j] for j, w in edges[i] if w], default=0)

    for i in range(n):
        if indeg[i] == 0:
            heapq.heappush(heaps[ops[i].engine], (0, i))
    order = []
    while len(order) < n:
        best = None
        for e in ENGINES:
            if heaps[e]:
                rt, i = heaps[e][0]
                q = queues[e]
                key = (max(rt, q.can_emit(), t + _SETUP), q.free, i)
                if best is None or key < best[0]:
                    best = (key, e)
        (start, _, i), e = best
        heapq.heappop(heaps[e])
        q = queues[e]
        op = ops[i]
        members = op.args["ops"] if op.kind == "block" else [op]
        t = start
        for k, m in enumerate(members):
            if k:
                t = max(t + _LOOP_ISSUE, q.can_emit())
            done[i] = q.emit(t, _cost(m, cfg))
        t += _ISSUE
        order.append(op)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heaps[ops[s].engine], (ready_time(s), s))
    return order, edges, max(done + [t])


# ---------------------------------------------------------------------------------------------
# 5. Registers and assembly
# ---------------------------------------------------------------------------------------------

class _Registers:
    """LRU caches of register contents: 4-register DMA descriptor blocks (r1, r5, r9, r13),
    2-register ACT pairs (r17, r19) and single values (r21..r55)."""

    def __init__(self, out):
        self.out = out
        self.blocks = {4: [[b, None, 0] for b in (1, 5, 9, 13)],
                       2: [[b, None, 0] for b in (17, 19)],
                       1: [[b, None, 0] for b in range(21, _RS)]}
        self.tick = 0
        self.pinned = set()

    def get(self, values):
        values = tuple(int(v) & 0xFFFFFFFF for v in values)
        pool = self.blocks[len(values)]
        self.tick += 1
        for ent in pool:
            if ent[1] == values:
                ent[2] = self.tick
                self.pinned.add(ent[0])
                return ent[0]
        ent = min((e for e in pool if e[0] not in self.pinned), key=lambda e: e[2])
        old = ent[1]
        for k, v in enumerate(values):
            if old is None or old[k] != v:
                self.out.append(f"li r{ent[0] + k}, {v:#x}")
        ent[1], ent[2] = values, self.tick
        self.pinned.add(ent[0])
        return ent[0]

    def done(self):
        self.pinned = set()


def _vec_opts(op, sem):
    a = op.args
    src = a["a"]
    opts = [f"in_fmt={src.dtype.asm}", f"out_fmt={a['dst'].dtype.asm}",
            f"rnd={a.get('rnd', 'rne')}"]
    if src.space == "psum":
        opts.insert(0, "a_space=psum")
    if "alu" in a:
        from kernels.lang import ALU_OPS
        opts.insert(0, f"alu={ALU_OPS[a['alu']]}")
    return ", ".join(opts + [f"sem={sem}, sem_en=1"])


def _emit(op, regs, out):
    a = op.args
    sem = SEM[op.engine]
    k = op.kind
    if k in ("dma_ld", "dma_st"):
        d, t = a["dram"], a["tile"]
        desc = regs.get((a["n0"] | a["n1"] << 16, a["stride0"], a["stride1"], a["pstride"]))
        ext = regs.get((d.buffer.addr + d.offset * d.dtype.nbytes,))
        sb = regs.get((t.buffer.addr + t.f0,))
        out.append(f"{k} r{desc}, r{ext}, r{sb}, part_start={t.p0}, part_count={a['p']}, "
                   f"fmt={d.dtype.asm}, sem={sem}, sem_en=1")
    elif k == "matmul":
        dst, st, mv = a["dst"], a["stat"], a["mov"]
        rp = regs.get((dst.buffer.addr + dst.f0,))
        rs = regs.get((st.buffer.addr + st.f0,))
        rm = regs.get((mv.buffer.addr + mv.f0,))
        rn = regs.get((a["n"],))
        out.append(f"matmul r{rp}, r{rs}, r{rm}, r{rn}, k={a['k']}, m={a['m']}, "
                   f"fmt={a['fmt'].asm}, accumulate={int(a['accumulate'])}, sem={sem}, "
                   f"sem_en=1")
    elif k in ("act", "tt", "ts", "reduce", "copy"):
        dst, src = a["dst"], a["a"]
        rd = regs.get((dst.buffer.addr + dst.f0,))
        r1 = regs.get((src.buffer.addr + src.f0,))
        rn = regs.get((src.f,))
        r2 = 0
        extra = ""
        if k == "act":
            r2 = regs.get((a["scale"], a["bias"]))
            extra = f"func={a['func']}, " + ("acc=1, " if a["acc"] else "")
        elif k == "tt":
            b = a["b"]
            r2 = regs.get((b.buffer.addr + b.f0,))
        elif k == "ts":
            r2 = regs.get((a["scalar"],))
        out.append(f"{k} r{rd}, r{r1}, r{r2}, r{rn}, {extra}{_vec_opts(op, sem)}")
    elif k == "acc_rd":
        dst = a["dst"]
        rd = regs.get((dst.buffer.addr + dst.f0,))
        out.append(f"acc_rd r{rd}, out_fmt={dst.dtype.asm}, rnd=rne, sem={sem}, sem_en=1")
    elif k == "table_ld":
        t = a["tile"]
        r1 = regs.get((t.buffer.addr + t.f0,))
        rn = regs.get((a["n"],))
        out.append(f"table_pair r{r1}, r{rn}, sem={sem}, sem_en=1")
    elif k == "seed_ld":
        r2 = regs.get((a["seed"],))
        out.append(f"seed_ld r{r2}, sem={sem}, sem_en=1")
    else:                                  # pragma: no cover - every kind is listed above
        raise AssertionError(k)
    regs.done()


# ---------------------------------------------------------------------------------------------
# Matmul blocks: runs of matmuls rolled into hardware loops
# ---------------------------------------------------------------------------------------------

#: Matmuls after which a run is cut into another block at its next overwrite (the scheduler
#: places a block as one operation and the sequencer is busy issuing it until its last
#: records are queued, so shorter blocks let DMA and vector work interleave more finely).
BLOCK_RECORDS = 144


def _group(ops):
    """Runs of consecutive matmul operations (in trace order) become one ``block`` operation
    with the union of their accesses; the tensor engine applies them in order. A run is cut
    at a matmul marked ``cut`` (``kernels.lang.new_block``) and, past ``BLOCK_RECORDS``, at
    its next overwrite."""
    out, run = [], []

    def flush():
        if len(run) == 1:
            out.append(run[0])
        elif run:
            reads = [a for m in run for a in m.reads]
            writes = [a for m in run for a in m.writes]
            from kernels.lang import Op
            out.append(Op("tensor", "block", dict(ops=list(run)), reads, writes))
        run.clear()
    for op in ops:
        if op.kind == "matmul":
            if op.args.get("cut") or (len(run) >= BLOCK_RECORDS and
                                      not op.args["accumulate"]):
                flush()
            run.append(op)
        else:
            flush()
            out.append(op)
    flush()
    for i, op in enumerate(out):
        op.index = i
    return out


def _fields(op):
    a = op.args
    return dict(p=a["dst"].buffer.addr + a["dst"].f0, s=a["stat"].buffer.addr + a["stat"].f0,
                m=a["mov"].buffer.addr + a["mov"].f0, n=a["n"], k=a["k"], mm=a["m"],
                fmt=a["fmt"].asm, acc=int(a["accumulate"]))


def _affine(recs, keys=("p", "s", "m")):
    """Constant strides of ``keys`` along ``recs`` (other fields equal), or None."""
    if not recs:
        return {k: 0 for k in keys}
    st = {k: (recs[1][k] - recs[0][k]) if len(recs) > 1 else 0 for k in keys}
    for i, r in enumerate(recs):
        for k in keys:
            if r[k] != recs[0][k] + i * st[k]:
                return None
        for k in ("n", "k", "mm", "fmt"):
            if r[k] != recs[0][k]:
                return None
    return st


def _roll(recs):
    """A two-level loop plan for matmul records ``recs``: rows that each start with an
    overwrite (``accumulate=0``) and continue with ``J-1`` accumulations, the rows' heads
    affine in the row, the accumulations affine in their position and at a constant offset
    from their head. None when the records do not have that shape."""
    L = len(recs)
    J = next((i for i in range(1, L) if recs[i]["acc"] == 0), L)
    if L % J or recs[0]["acc"] != 0:
        return None
    rows = [recs[i:i + J] for i in range(0, L, J)]
    if any(r[0]["acc"] != 0 or any(x["acc"] != 1 for x in r[1:]) for r in rows):
        return None
    heads = [r[0] for r in rows]
    outer = _affine(heads)
    if outer is None or any(x[k] != heads[0][k] for x in recs for k in ("n", "k", "mm", "fmt")):
        return None
    inner = None
    off = {"p": 0, "s": 0, "m": 0}
    if J > 1:
        inner = _affine(rows[0][1:])
        if inner is None:
            return None
        off = {k: rows[0][1][k] - rows[0][0][k] for k in ("p", "s", "m")}
        for r in rows:
            if _affine(r[1:]) != inner or any(r[1][k] - r[0][k] != off[k] for k in off):
                return None
        if inner["p"] != 0 or off["p"] != 0:
            return None
    ags = sum(1 for k in ("p", "s", "m") if outer[k] and len(rows) > 1)
    ags += sum(1 for k in ("s", "m") if inner and inner[k])
    if ags > 4:
        return None
    return dict(I=len(rows), J=J, head=heads[0], outer=outer, inner=inner, off=off)


#: Registers a rolled block owns (outside the cached pool): head stationary, moving and PSUM
#: addresses, the accumulations' stationary and moving addresses, N, the two trip counts.
_RS, _RM, _RP, _RSI, _RMI, _RN, _RI, _RJ = range(56, 64)


def _emit_block(op, regs, out, label):
    _emit_records(op.args["ops"], regs, out, label)


def _emit_records(members, regs, out, label):
    """Roll the longest run of whole rows that has the shape of :func:`_roll`, then the rest
    the same way; a record that starts no such run is emitted as one instruction."""
    recs = [_fields(m) for m in members]
    starts = [i for i, r in enumerate(recs) if r["acc"] == 0] + [len(recs)]
    i, part = 0, 0
    while i < len(recs):
        plan = None
        for cut in sorted((c for c in starts if c >= i + 3), reverse=True):
            plan = _roll(recs[i:cut])
            if plan is not None:
                break
        if plan is None:
            _emit(members[i], regs, out)
            i += 1
            continue
        _emit_plan(plan, regs, out, f"{label}_{part}")
        part += 1
        i = cut


def _emit_plan(plan, regs, out, label):
    h, o, i_, off = plan["head"], plan["outer"], plan["inner"], plan["off"]
    I, J = plan["I"], plan["J"]
    opts = f"k={h['k']}, m={h['mm']}, fmt={h['fmt']}"
    out += [f"li r{_RS}, {h['s']:#x}", f"li r{_RM}, {h['m']:#x}", f"li r{_RP}, {h['p']:#x}",
            f"li r{_RN}, {h['n']:#x}"]
    ags = []
    if I > 1:
        ags += [(r, o[k], 1) for r, k in ((_RS, "s"), (_RM, "m"), (_RP, "p")) if o[k]]
    if i_ is not None:
        ags += [(r, i_[k], 2 if I > 1 else 1) for r, k in ((_RSI, "s"), (_RMI, "m")) if i_[k]]
    for k in range(4):
        if k < len(ags):
            r, stride, level = ags[k]
            rs = regs.get((stride,))
            out.append(f"ag {k}, r{r}, r{rs}, {level}")
        else:
            out.append(f"ag {k}, r0, r0, 0")
    body = []
    if J > 1:
        ros, rom = regs.get((off["s"],)), regs.get((off["m"],))
        out.append(f"li r{_RJ}, {J - 1}")
        body += [f"add r{_RSI}, r{_RS}, r{ros}", f"add r{_RMI}, r{_RM}, r{rom}",
                 f"loop r{_RJ}, {label}i",
                 f"matmul r{_RP}, r{_RSI}, r{_RMI}, r{_RN}, {opts}, accumulate=1, sem=1, "
                 f"sem_en=1",
                 f"{label}i: endloop"]
    head = [f"matmul r{_RP}, r{_RS}, r{_RM}, r{_RN}, {opts}, accumulate=0, sem=1, sem_en=1"]
    if I > 1:
        out += [f"li r{_RI}, {I}", f"loop r{_RI}, {label}o"] + head + body + \
            [f"{label}o: endloop"]
    else:
        out += head + body
    regs.done()


class ProgramTooLong(KernelError):
    """A compiled program has more instructions than the core's program memory holds."""


def compile_trace(trace):
    """Compile a :class:`kernels.lang.Trace` into a :class:`Program`."""
    from sim.asm import assemble
    cfg = trace.config
    dram_bytes = _layout_dram(trace)
    _allocate(trace)
    ops = _group(trace.ops)
    preds = _dependencies(ops)
    order, edges, estimate = _schedule(ops, preds, cfg)
    out = []
    regs = _Registers(out)
    pos = {}
    count = {e: 0 for e in ENGINES}
    waited = {e: 0 for e in ENGINES}
    waits = 0
    for op in order:
        need = {}
        for j, w in edges[op.index]:
            if w:
                e = ops[j].engine
                need[e] = max(need.get(e, 0), pos[j] + 1)
        for e in ENGINES:
            if need.get(e, 0) > waited[e]:
                if need[e] > 0xFFFF:
                    raise KernelError(f"kernel has more than 65535 {e} records; semaphores "
                                      f"are 16 bits")
                out.append(f"waiti {SEM[e]}, {need[e]}")
                waited[e] = need[e]
                waits += 1
        if op.kind == "block":
            _emit_block(op, regs, out, f"B{op.index}")
            nrec = len(op.args["ops"])
        else:
            _emit(op, regs, out)
            nrec = 1
        count[op.engine] += nrec
        pos[op.index] = count[op.engine] - 1
    out.append("halt")
    asm = "\n".join(out) + "\n"
    words = assemble(asm)
    if len(words) > cfg.pmem_depth:
        raise ProgramTooLong(f"the program has {len(words)} instructions; the limit is "
                          f"pmem_depth = {cfg.pmem_depth} (use a core with a deeper program "
                          f"memory or a smaller problem per kernel call)")
    bufs = [b for b in trace.buffers if b.space == "dram"]
    return Program(asm, words, order, bufs, dram_bytes, count, waits, estimate)

