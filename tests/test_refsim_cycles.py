"""The cycle model ``sim/cycles.py`` runs the shipped microcode; the reference simulator
``sim/refsim.py`` implements the ISA document directly. Equal architectural state and record
traces over many programs validate the microcode without the RTL; a few timing properties
check the cycle model itself."""

import os
import random

import pytest

from cocotb_tests.test_sequencer_progs import DIRECTED, random_program
from sim import isa, microcode
from sim.asm import assemble
from sim.cycles import EngineCost, MicroSim, RecordTiming
from sim.isa import Engine
from sim.refsim import RefSim


def small_cost(engine, r):
    return 1 + (r.get("n", r.get("n0", 0)) & 31)


def _compare(words, label, extensions=None, **kw):
    r = RefSim(words, execute=False, pmem_depth=256, extensions=extensions).run(100_000)
    m = MicroSim(words, pmem_depth=256, cost=small_cost, **kw).run()
    for k in ("regs", "sems", "error", "err_pc", "pc", "retired", "flags"):
        assert getattr(r, k) == getattr(m, k), (label, k)
    for e in Engine:
        assert r.trace[e] == m.trace[e], (label, e)
    return r, m


def test_directed():
    for name, src in DIRECTED.items():
        _compare(assemble(src), name)


N_RANDOM = int(os.environ.get("REFSIM_RANDOM_N", "60"))


def test_random_programs():
    for seed in range(N_RANDOM):
        _compare(assemble(random_program(10_000 + seed)), seed)


@pytest.mark.long
def test_random_programs_long():
    for seed in range(2000):
        _compare(assemble(random_program(20_000 + seed)), seed)


def test_runtime_microcode_fused():
    words_uc, base = microcode.fused_matmul_act()
    store = microcode.control_store()
    store[base:base + len(words_uc)] = words_uc
    omap = microcode.opcode_map()
    omap[microcode.FUSED_OPCODE] = microcode.map_entry(base)

    imm = isa.pack(isa.MATMUL_IMM, k=4, m=4, fmt=1, sem=1, sem_en=1) | (3 << 28)
    words = assemble("li r1, 7\nli r2, 9\nli r3, 11\nli r4, 0x50\nli r5, 16")
    words += [isa.encode(microcode.FUSED_OPCODE, rd=3, rs1=1, rs2=2, rs3=5, imm=imm)]
    words += assemble("waiti 1, 1\nhalt")
    _compare(words, "fused", {microcode.FUSED_OPCODE: microcode.fused_matmul_act_ref},
             control_store=store,
             opcode_map=omap)


def test_cycles_without_stalls():
    """Scalar code: each instruction costs 3 (fetch, decode, map) + 2 (micro-pipeline fill:
    fetch, operand read) + its microroutine's length (docs/isa.md, timing)."""
    words = assemble("li r1, 1\nadd r2, r1, r1\nnop\nhalt")
    m = MicroSim(words).run()
    assert m.cycle == (5 + 1) * 3 + (5 + 2)     # HALT = barrier + halt micro-instructions
    assert all(p["idle"] == m.cycle for p in m.perf.values())


def _rep_seminc_cycles(n):
    """Cycles of ``li r1, n`` + the run-time REP_SEMINC instruction + ``halt``."""
    base = 400
    store = microcode.control_store()
    uc = microcode.rep_seminc(base)
    store[base:base + len(uc)] = uc
    omap = microcode.opcode_map()
    op = microcode.FUSED_OPCODE
    omap[op] = microcode.map_entry(base)
    words = assemble(f"li r1, {n}") + [isa.encode(op, rs1=1, imm=3)] + assemble("halt")
    m = MicroSim(words, control_store=store, opcode_map=omap).run()
    assert m.sems[3] == n
    return m.cycle


def test_pipeline_bubbles():
    """A taken BRANCH or ULOOP costs two bubbles, a BRANCH on Z two hold cycles, a ULOOP right
    after the UCTR write one (docs/isa.md, timing). REP_SEMINC with r1 = n: fill 2, BRANCH Z 3
    (taken iff n = 0), set UCTR = n - 1, the first SEMINC + ULOOP's hold, SEMINC + ULOOP n times
    (taken n - 1 times), END: 3 + 2 + 3 + 1 + 1 + n + 2 (n - 1) + 1 = 3n + 9 cycles for n > 0,
    3 + 2 + 3 + 2 + 1 = 11 for n = 0 (BRANCH taken, no UCTR)."""
    rest = _rep_seminc_cycles(0) - 11
    for n in (1, 2, 5):
        assert _rep_seminc_cycles(n) - rest == 3 * n + 9, n


def test_wait_timing():
    """WAIT registers its value, compares in the next cycle and decides in the one after
    (docs/isa.md, timing): a satisfied WAIT costs 3 micro-cycles, a WAIT on a completion goes
    on 2 cycles after the done pulse (visible at done + 1, compared then, proceeds at
    done + 2), and a deadlock traps the cycle after its compare."""
    nop = MicroSim(assemble("nop\nhalt")).run()
    wait = MicroSim(assemble("waiti 0, 0\nhalt")).run()
    assert wait.cycle == nop.cycle + 2 and wait.error == 0
    words = assemble("""
        li r2, 8
        matmul r0, r0, r0, r2, k=1, m=1, sem=1, sem_en=1
        waiti 1, 1
        halt
    """)
    m = MicroSim(words, cost=lambda e, r: 100).run()
    (t,) = m.timeline[Engine.TENSOR]
    assert m.error == 0 and m.sems[1] == 1
    assert m.cycle == t.done + 2 + 1 + (3 + 2 + 2)   # WAIT ends at done + 2, then HALT
    dead = MicroSim(assemble("waiti 1, 1\nhalt")).run()
    assert dead.error == 1 << isa.ErrorBit.DEADLOCK and dead.err_pc == 0
    assert dead.cycle == 3 + 2 + 3                  # fetch/decode/map, fill, value, compare, trap
    assert all(p["semwait"] == 1 for p in dead.perf.values())


def test_engine_timeline_serial_and_concurrent():
    words = assemble("""
        li r2, 8
        matmul r0, r0, r0, r2, k=1, m=1, sem=1, sem_en=1
        matmul r0, r0, r0, r2, k=1, m=1, sem=1, sem_en=1
        ts r0, r0, r0, r2, sem=2, sem_en=1
        waiti 1, 2
        waiti 2, 1
        halt
    """)
    m = MicroSim(words, cost=lambda e, r: 100).run()
    t0, t1 = m.timeline[Engine.TENSOR]
    (v,) = m.timeline[Engine.VECTOR]
    assert t1.accept == t0.done                      # serial within an engine
    assert v.accept < t0.done                        # concurrent across engines
    assert m.perf[Engine.TENSOR]["busy"] >= 200
    assert m.cycle > t1.done


class _Columns(EngineCost):
    """A matmul keeps the array ``n`` cycles; other records one cycle."""

    def __call__(self, engine, r):
        return r["n"] if engine == Engine.TENSOR else 1


def test_tensor_latency_overlaps_the_next_record():
    """With a latency the tensor engine takes the next matmul after ``cost`` (its moving
    columns) while the done pulse, and so the semaphore a WAIT sees, comes ``m + latency``
    later; without one the records are serial."""
    words = assemble("""
        li r2, 64
        matmul r0, r0, r0, r2, k=1, m=4, sem=1, sem_en=1
        matmul r0, r0, r0, r2, k=1, m=4, sem=1, sem_en=1
        waiti 1, 2
        halt
    """)
    cycles = {}
    for lat in (0, 30):
        m = MicroSim(words, cost=_Columns(tensor_latency=lat)).run()
        t0, t1 = m.timeline[Engine.TENSOR]
        extra = 4 + lat if lat else 0
        assert t0.done == t0.accept + 64 + extra
        assert t1.accept == t0.accept + 64              # the array is free after n columns
        assert t1.done == t1.accept + 64 + extra
        cycles[lat] = m.cycle
    assert cycles[30] == cycles[0] + 34                 # the WAIT sees the later done


def test_illegal_opcode_timing():
    """The opcode map's output is registered: an illegal opcode traps in EXEC's first cycle,
    one cycle after MAP (fetch, decode, map, trap)."""
    m = MicroSim(assemble(".word 0xF5\nhalt")).run()
    assert m.error == 1 << isa.ErrorBit.ILLEGAL_OPCODE and m.err_pc == 0
    assert m.cycle == 3 + 1
    nop_cost = MicroSim(assemble("nop\nhalt")).run().cycle - \
        MicroSim(assemble("halt")).run().cycle
    m = MicroSim(assemble("nop\n.word 0xF5\nhalt")).run()
    assert m.error == 1 << isa.ErrorBit.ILLEGAL_OPCODE and m.err_pc == 1
    assert m.cycle == nop_cost + 3 + 1


def _vector_engine_cycles(units, cmds, lanes=4):
    """Cycles from a command's valid to its last ``o`` beat on ``rtl.vector.engine.
    VectorEngine(lanes, units=units)`` (deep), for each ``(fields, n)`` of ``cmds`` in turn,
    ``a`` always valid, ``o`` always ready (Amaranth's simulator)."""
    from amaranth.sim import Simulator

    from rtl.vector.engine import VectorEngine
    from sim.vector import pack_cmd
    dut = VectorEngine(lanes=lanes, depth=64, deep=True, units=units)
    out = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.a.payload.as_value(), 0x3F800000)
        for fields, n in cmds:
            await ctx.tick().repeat(4)
            beats = n * fields.get("emit", 0) + fields.get("emit_acc", 0)
            ctx.set(dut.cmd.payload.as_value(), pack_cmd(count=n, **fields))
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.a.valid, n > 0)
            sent = got = cycles = 0
            while got < beats:
                took_cmd = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
                took_a = ctx.get(dut.a.valid) and ctx.get(dut.a.ready)
                got += ctx.get(dut.o.valid)
                await ctx.tick()
                cycles += 1
                if took_cmd:
                    ctx.set(dut.cmd.valid, 0)
                if took_a:
                    sent += 1
                    ctx.set(dut.a.valid, sent < n)
            out.append(cycles)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_compact_vector_cost_follows_the_engine():
    """``EngineCost(vector_subs=G)`` charges a record what the engine with ``G`` sub-beats
    per element takes beyond the one-unit-per-lane engine (4 lanes, one unit: ``G`` = 4),
    measured on the RTL: elements ``element_cycles`` apart, the last one's sub-beats, the
    read-out's wait for the last accumulator update and the serial rounding unit's
    latency."""
    from sim.vector import AccOp
    VecOp, VecAlu = isa.VecOp, isa.VecAlu
    n = 5
    cases = [  # (record fields, engine command of the core's vector_record.py)
        (dict(op=VecOp.COPY, acc=0, alu=0, n=n), dict(emit=1)),
        (dict(op=VecOp.ACT, acc=1, alu=0, n=n), dict(emit=1, acc_op=AccOp.SUM, acc_reset=1)),
        (dict(op=VecOp.REDUCE, acc=0, alu=VecAlu.ADD, n=n),
         dict(emit_acc=1, acc_op=AccOp.SUM, acc_reset=1)),
        (dict(op=VecOp.REDUCE, acc=0, alu=VecAlu.MAX, n=n),
         dict(emit_acc=1, acc_op=AccOp.MAX, acc_reset=1)),
        (dict(op=VecOp.ACC_RD, acc=0, alu=0, n=0), dict(emit_acc=1)),
    ]
    cmds = [(c, r["n"]) for r, c in cases]
    one, compact = _vector_engine_cycles(None, cmds), _vector_engine_cycles(1, cmds)
    base, four = EngineCost(), EngineCost(vector_subs=4)
    for (rec, _), a, b in zip(cases, one, compact):
        got = four(Engine.VECTOR, rec) - base(Engine.VECTOR, rec)
        assert got == b - a, (rec, got, b - a)


def test_vector_overlap_takes_the_next_record():
    """With ``vector_overlap`` the vector engine takes the next record that many cycles before
    the one ahead is done, and each record is done its full cost after its take; a TABLE
    record keeps the engine to its done pulse."""
    words = assemble("""
        li r2, 8
        ts r0, r0, r0, r2, sem=2, sem_en=1
        ts r0, r0, r0, r2, sem=2, sem_en=1
        waiti 2, 2
        halt
    """)
    cycles = {}
    for ov in (0, 10):
        cost = EngineCost(vector_overlap=ov)
        m = MicroSim(words, cost=cost).run()
        v0, v1 = m.timeline[Engine.VECTOR]
        full = cost.vector_cost(v0.fields)
        assert v0.done == v0.accept + full and v1.done == v1.accept + full
        assert v1.accept == v0.done - ov
        cycles[ov] = m.cycle
    assert cycles[10] == cycles[0] - 10
    table = dict(op=isa.VecOp.TABLE, n=8)
    assert EngineCost(vector_overlap=10).latency(Engine.VECTOR, table) == 0


def test_sbuf_write_port_delays_loads_and_vector_records():
    """On the 8x8 core at 128 bits (softmax, 16 x 64): where a vector record's outputs meet a
    DMA load's SBUF writes, the load (and the DMA records behind it) is late, and so is the
    vector record (two writers requesting every cycle alternate); a store, which writes no
    SBUF, is never late, nor a vector record that meets no load."""
    from kernels import bench as kb
    w = kb.workloads(["softmax"], dma_data_width=128)[0]
    cost = kb.RtlCost.for_config(w.config)
    runs = {port: MicroSim(w.image.program, pmem_depth=w.config.pmem_depth, cost=cost,
                           sbuf_port=port).run() for port in (False, True)}
    free, shared = runs[False], runs[True]
    assert shared.cycle > free.cycle
    late = {}
    for e in (Engine.DMA, Engine.VECTOR):
        late[e] = [b.done - b.accept - (a.done - a.accept)
                   for a, b in zip(free.timeline[e], shared.timeline[e])]
    dma = free.timeline[Engine.DMA]
    loads = [i for i, r in enumerate(dma) if not r.fields["store"]]
    assert any(late[Engine.DMA][i] > 0 for i in loads)
    assert all(late[Engine.DMA][i] == 0 for i, r in enumerate(dma) if r.fields["store"])
    vec = shared.timeline[Engine.VECTOR]
    for i, v in enumerate(vec):
        meets = [d for d in shared.timeline[Engine.DMA] if not d.fields["store"] and
                 d.accept < v.done and v.accept < d.done]
        if late[Engine.VECTOR][i]:
            assert meets, i
    assert any(late[Engine.VECTOR]), "no vector record met a load"


def test_dma_delay_spends_the_next_records_slack():
    """A DMA load late by ``n`` cycles (its SBUF writes lost the shared port) delays the
    load whose data follow its data by ``n``, but not one taken after a wait for the first
    ones' semaphore: that one's data side did not follow the data before it (its slack)."""
    from sim.config import CoreConfig
    cfg = CoreConfig(rows=16, sbuf_depth=1024, dma_data_width=128, max_burst=256)
    prog = assemble("li r1, 0x10040\nli r5, 0\nli r6, 0x1000\nli r9, 0x2000\n"
                    "li r7, 0\nli r8, 64\nli r10, 128\n"
                    "dma_ld r1, r5, r7, part_start=0, part_count=16, fmt=fp32\n"
                    "dma_ld r1, r6, r8, part_start=0, part_count=16, fmt=fp32, sem=1, "
                    "sem_en=1\nwaiti 1, 1\n"
                    "dma_ld r1, r9, r10, part_start=0, part_count=16, fmt=fp32\nhalt\n")
    ms = MicroSim(prog, cost=EngineCost(dma_config=cfg)).run()
    a, b, c = ms.timeline[Engine.DMA]
    slack = b.slack
    assert slack < 10 < c.slack
    done = [x.done for x in (a, b, c)]
    ms._delay(Engine.DMA, a, 10, 0)
    assert [x.done - d for x, d in zip((a, b, c), done)] == [10, 10 - slack, 0]


def _port_schedule(rng, start):
    """Cycles a writer's writes would take alone: runs of writes one, two or three cycles
    apart with random pauses between runs, from ``start``."""
    out, c = [], start
    for _ in range(rng.randrange(1, 4)):
        step = rng.choice([1, 1, 2, 3])
        for _ in range(rng.randrange(1, 24)):
            out.append(c)
            c += step
        c += rng.randrange(0, 12)
    return out


def _arbiter_lateness(dma, vec):
    """``rtl.core.sbuf.SBUF`` with two writers on the Amaranth simulator: each writer's write
    ``k`` is requested from cycle ``max(schedule[k], grant[k - 1] + 1)`` until it is taken.
    Returns each writer's last grant minus its last scheduled cycle."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth_tb import simulate
    from rtl.core.sbuf import SBUF

    class Harness(wiring.Component):
        def __init__(self):
            self.sbuf = SBUF(2, 4, read_ports=(), write_ports=("dma", "vector"))
            super().__init__({})

        def elaborate(self, platform):
            m = Module()
            m.submodules.sbuf = self.sbuf
            return m

    dut = Harness()
    ports = [dut.sbuf.w_dma, dut.sbuf.w_vector]
    seqs = [dma, vec]
    last = [None, None]

    async def bench(ctx):
        idx, ready = [0, 0], [dma[0], vec[0]]
        cycle = 0
        while idx[0] < len(dma) or idx[1] < len(vec):
            req = [idx[i] < len(seqs[i]) and ready[i] <= cycle for i in (0, 1)]
            for i, port in enumerate(ports):
                ctx.set(port.mask, 3 if req[i] else 0)
            sampled = await ctx.tick().sample(*[port.ready for port in ports])
            for i in (0, 1):
                if req[i] and sampled[2 + i]:
                    last[i] = cycle
                    idx[i] += 1
                    if idx[i] < len(seqs[i]):
                        ready[i] = max(seqs[i][idx[i]], cycle + 1)
            cycle += 1

    simulate(dut, bench)
    return last[0] - dma[-1], last[1] - vec[-1]


@pytest.mark.parametrize("seed", range(6))
def test_share_port_follows_the_sbuf_arbiter(seed):
    """``sim.cycles.share_port`` (the cycle model's shared SBUF write port) against the
    arbiter itself: random write schedules of a DMA-like and a vector-like writer (dense runs,
    sparse runs, pauses, either one first or both at once), each writer late by the same
    cycles in both."""
    from sim.cycles import share_port
    rng = random.Random(seed)
    for trial in range(8):
        d0 = rng.randrange(0, 20)
        v0 = rng.choice([d0, rng.randrange(0, 40)])
        dma, vec = _port_schedule(rng, d0), _port_schedule(rng, v0)
        got = share_port(dma, vec)
        want = _arbiter_lateness(dma, vec)
        assert got == want, (seed, trial, dma, vec, got, want)


def test_share_port_alternates_dense_writers():
    """Two writers requesting every cycle alternate: each is late by the other's writes in
    their overlap; a writer every other cycle beside a dense one wins every conflict."""
    from sim.cycles import share_port
    dense, vec = list(range(100)), list(range(40, 72))
    assert share_port(dense, vec) == (32, 31)
    sparse = list(range(40, 104, 2))
    assert share_port(dense, sparse) == (32, 0)
    assert share_port(list(range(0, 40)), vec) == (0, 0)


def test_vector_delay_holds_only_the_outputs_behind():
    """A vector record whose writes lost the shared SBUF port is done later, and so is a
    record whose outputs follow its outputs; neither the engine's take of the next record nor
    a record without element outputs (a REDUCE) moves (the pipeline never stalls)."""
    from sim.config import CoreConfig
    words = assemble("""
        li r2, 64
        ts r0, r0, r0, r2
        ts r0, r0, r0, r2
        halt
    """)
    cost = EngineCost(dma_config=CoreConfig(rows=8, sbuf_depth=1024), vector_overlap=10)
    ms = MicroSim(words, cost=cost).run()
    v0, v1 = ms.timeline[Engine.VECTOR]
    slack = v1.slack
    assert 0 < slack < 60
    before = [(v.accept, v.free, v.done) for v in (v0, v1)]
    ms._delay(Engine.VECTOR, v0, 60, 0)
    after = [(v.accept, v.free, v.done) for v in (v0, v1)]
    assert [a[:2] for a in after] == [b[:2] for b in before]
    assert [a[2] - b[2] for a, b in zip(after, before)] == [60, 60 - slack]
    reduce_ = dict(op=isa.VecOp.REDUCE, n=64, acc=0, alu=isa.VecAlu.ADD)
    assert ms._writes(Engine.VECTOR, RecordTiming(Engine.VECTOR, 0, 0, 0, 100,
                                                  dict(reduce_, sem_en=0))) is None


def test_ideal_is_checked():
    """``EngineCost(ideal=...)`` takes a collection of names from ``IDEAL_ENGINES``; anything
    else is refused, naming the parameter and what it may hold."""
    from kernels.bench import RtlCost
    from sim.config import CoreConfig
    from sim.cycles import IDEAL_ENGINES
    assert EngineCost().ideal == frozenset()
    assert EngineCost(ideal=["vector", "dma"]).ideal == {"dma", "vector"}
    assert RtlCost.for_config(CoreConfig(), ideal=IDEAL_ENGINES).ideal == set(IDEAL_ENGINES)
    with pytest.raises(ValueError, match="ideal must name engines among dma, vector, tensor, "
                                         "not 'sequencer'"):
        EngineCost(ideal=("dma", "sequencer"))
    with pytest.raises(ValueError, match="ideal must name engines .* not 'DMA'"):
        RtlCost.for_config(CoreConfig(), ideal=("DMA",))
    for bad in ("dma", 3, None):
        with pytest.raises(TypeError, match="ideal must be a collection of engine names"):
            EngineCost(ideal=bad)


def test_ideal_record_costs():
    """Each idealized engine's record costs its fixed part alone, as ``EngineCost`` defines
    it: a vector record its pipeline, a TABLE its set-up, a matmul its stationary tile and
    the array's skew, a DMA record without a configuration its set-up; the other engines
    keep their costs."""
    from sim.cycles import TABLE_SETUP
    from sim.dtypes import Format
    VecOp = isa.VecOp
    act = dict(op=VecOp.ACT, acc=1, alu=0, n=64)
    table = dict(op=VecOp.TABLE, func=0, n=100)
    mm = dict(m=4, n=64)
    dma = dict(fmt=int(Format.FP32), part_count=8, n0=64, n1=2)
    base = EngineCost()
    vec = EngineCost(ideal={"vector"})
    assert vec.vector_cost(act) == base.vector_pipeline
    assert base.vector_cost(act) == 64 * (1 + base.vector_acc_wait) + base.vector_pipeline
    assert vec(Engine.VECTOR, table) == TABLE_SETUP < base(Engine.VECTOR, table)
    assert vec(Engine.TENSOR, mm) == base(Engine.TENSOR, mm) == 4 + 64 + 8 + 8
    assert EngineCost(ideal={"tensor"})(Engine.TENSOR, mm) == 4 + 8 + 8
    assert EngineCost(ideal={"dma"})(Engine.DMA, dma) == base.dma_setup
    assert base(Engine.DMA, dma) == base.dma_setup + 8 * 64 * 2 * 4 // base.dma_bus_bytes


def test_ideal_dma_leaves_its_fixed_latencies():
    """A program of one 4 KiB load (16 FP32 partitions x 64 columns, across partitions, one
    contiguous segment in two bursts of 128 beats at 128 bits) and a WAIT for it: with the
    DMA's bandwidth removed the load takes exactly its fixed costs (``sim.dma_timing``:
    set-up, one window-checked row and one, then the memory's latency and the segment's two
    issue cycles, or the two bursts' round trips four at a time, whichever is longer, and the
    load's tail), and the program is shorter by what the transfer took."""
    from sim.config import CoreConfig
    from sim.dma_timing import LOAD_TAIL, ROUND_TRIP, SETUP
    cfg = CoreConfig(rows=16, sbuf_depth=1024, dma_data_width=128, max_burst=256)
    # r1: n0 = 64, n1 = 1; r2-r4: strides 64, 0 and 4 bytes (a partition's column apart)
    prog = assemble("li r1, 0x10040\nli r2, 64\nli r3, 0\nli r4, 4\nli r5, 0\nli r7, 0\n"
                    "dma_ld r1, r5, r7, part_start=0, part_count=16, fmt=fp32, sem=1, "
                    "sem_en=1\nwaiti 1, 1\nhalt\n")
    real = MicroSim(prog, cost=EngineCost(dma_config=cfg)).run()
    ideal = MicroSim(prog, cost=EngineCost(dma_config=cfg, ideal={"dma"})).run()
    (r,), (i,) = real.timeline[Engine.DMA], ideal.timeline[Engine.DMA]
    lat, outstanding, bursts, segments, rows = 16, 4, 2, 1, 1
    trips = bursts * (lat + ROUND_TRIP) / outstanding
    fixed = SETUP + rows + 1 + max(lat + 2 * segments, trips + ROUND_TRIP + 1) + LOAD_TAIL
    assert i.done - i.accept == fixed == 30
    # with its data: the memory's latency, then 256 beats of 16 bytes
    assert r.done - r.accept == SETUP + rows + 1 + lat + 256 + LOAD_TAIL
    assert real.cycle - ideal.cycle == (r.done - r.accept) - fixed


def test_bounds_every_workload():
    """On every benchmark workload with its own (small) core but the streaming GEMM (the same
    matmul records as ``gemm``, but 450,000 cycles long, too long for the default suite under
    five cost models): each bound of
    ``sim.cycles.BOUNDS`` takes at most the model's cycles, the floor at most any other bound
    and at least what a program of one HALT takes; the floor is shorter than the model."""
    from kernels import bench as kb
    from sim.cycles import BOUNDS
    halt = MicroSim(assemble("halt")).run().cycle
    names = [n for n, *_ in kb._specs() if n != "gemm_stream"]
    assert len(names) >= 12
    for w in kb.workloads(names):
        model = kb.simulate(w).cycle
        got = {k: kb.simulate(w, v).cycle for k, v in BOUNDS.items()}
        assert all(c <= model for c in got.values()), (w.name, model, got)
        assert got["floor"] <= min(got.values()), (w.name, got)
        assert halt <= got["floor"] < model, (w.name, got)
