"""The sequencer's sub-components alone, in the Amaranth simulator: its memories, an engine's
record queue and the performance counters (the whole sequencer: cocotb_tests/test_sequencer*)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.control.engine_queue import EngineQueue
from rtl.control.memories import SequencerMemories, jump_bit
from rtl.control.perf_counters import ENGINE_COUNTERS, PerfCounters
from sim import isa, microcode
from sim.isa import Engine, USeq


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _micro_word(seq, other=0x1234_5678_9ABC_DEF0):
    """A micro-word with ``seq`` in its field and ``other``'s bits elsewhere."""
    lo, width = isa.field_offsets(isa.MICRO_FIELDS)["seq"]
    mask = ((1 << width) - 1) << lo
    return other & ~mask | (int(seq) << lo & mask)


def test_memories_read_latency_and_busy_writes():
    dut = SequencerMemories(pmem_depth=16)
    store = microcode.control_store()
    omap = microcode.opcode_map()

    async def bench(ctx):
        # The control store and opcode map start with the shipped microcode.
        ctx.set(dut.ucode_addr, 5)
        await ctx.tick()
        assert ctx.get(dut.ucode_data) == store[5] | jump_bit(store[5]) << 64
        # Host writes land while idle; the read shows the word the cycle after its address.
        for seq, want in ((USeq.JUMP, 1), (USeq.CALL, 1), (USeq.END, 0)):
            word = _micro_word(seq)
            ctx.set(dut.ucode_wr_addr, 7)
            ctx.set(dut.ucode_wr_data, word)
            ctx.set(dut.ucode_wr_en, 1)
            await ctx.tick()
            ctx.set(dut.ucode_wr_en, 0)
            ctx.set(dut.ucode_addr, 7)
            await ctx.tick()
            assert ctx.get(dut.ucode_data) == word | want << 64
        op = 0x42
        ctx.set(dut.pmem_wr_addr, 3)
        ctx.set(dut.pmem_wr_data, 0xABCD_0000_0000_0000 | op)
        ctx.set(dut.pmem_wr_en, 1)
        await ctx.tick()
        # A write while busy is dropped.
        ctx.set(dut.busy, 1)
        ctx.set(dut.pmem_wr_data, 0x55)
        await ctx.tick()
        ctx.set(dut.pmem_wr_en, 0)
        ctx.set(dut.pmem_addr, 3)
        await ctx.tick()
        assert ctx.get(dut.pmem_data) == 0xABCD_0000_0000_0000 | op
        # The opcode map's entry for that opcode follows a cycle later.
        await ctx.tick()
        assert ctx.get(dut.map_data) == omap[op]
        # The register file: a synchronous write, asynchronous reads on three ports.
        ctx.set(dut.busy, 0)
        ctx.set(dut.rf_wr_addr, 9)
        ctx.set(dut.rf_wr_data, 0xDEADBEEF)
        ctx.set(dut.rf_wr_en, 1)
        await ctx.tick()
        ctx.set(dut.rf_wr_en, 0)
        for port in ("a", "b", "d"):
            ctx.set(getattr(dut, f"rf_{port}_addr"), 9)
        await ctx.delay(1e-9)
        assert [ctx.get(getattr(dut, f"rf_{p}_data")) for p in "abd"] == [0xDEADBEEF] * 3

    _run(dut, bench)


def _sem_field(engine, sem, sem_en):
    offs = isa.field_offsets(isa.RECORDS[engine])
    return (sem << offs["sem"][0]) | (int(sem_en) << offs["sem_en"][0])


@pytest.mark.parametrize("depth, max_outstanding", [(1, 1), (2, 4), (4, 2), (3, 8), (2, 5)])
def test_engine_queue_model(depth, max_outstanding):
    """Random pushes, reads and completions against a model of the two FIFOs: the stream
    carries the records in order, ``can_emit`` is low exactly when a FIFO is full, and
    ``sem_head`` / ``outstanding`` describe the oldest record not completed."""
    engine = Engine.TENSOR
    dut = EngineQueue(engine, depth=depth, max_outstanding=max_outstanding)
    rng = random.Random(1)
    width = isa.layout_width(isa.RECORDS[engine])

    async def bench(ctx):
        records, sems = [], []           # not yet taken by the engine; not yet completed
        for cycle in range(400):
            assert ctx.get(dut.can_emit) == (len(records) < depth and
                                             len(sems) < max_outstanding), cycle
            assert ctx.get(dut.outstanding) == bool(sems), cycle
            if sems:
                assert ctx.get(dut.sem_head) == sems[0], cycle
            assert ctx.get(dut.o.valid) == bool(records), cycle
            if records:
                assert ctx.get(dut.o.payload.as_value()) == records[0], cycle
            push = ctx.get(dut.can_emit) and rng.random() < 0.5
            sem, sem_en = rng.randrange(16), rng.random() < 0.7
            rec = rng.getrandbits(width) & ~_sem_field(engine, 0xF, 1) | \
                _sem_field(engine, sem, sem_en)
            take = bool(records) and rng.random() < 0.5
            # The engine completes only records it has taken.
            done = len(sems) > len(records) and rng.random() < 0.4
            ctx.set(dut.record, rec)
            ctx.set(dut.push, push)
            ctx.set(dut.o.ready, take)
            ctx.set(dut.done, done)
            await ctx.tick()
            if take:
                records.pop(0)
            if done:
                sems.pop(0)
            if push:
                records.append(rec)
                sems.append(1 << sem if sem_en else 0)

    _run(dut, bench)


def test_engine_queue_parameters():
    with pytest.raises(ValueError, match="depth must be an integer from 1 to 16, not 0"):
        EngineQueue(Engine.DMA, depth=0)
    with pytest.raises(TypeError, match="max_outstanding must be an integer, not 2.0"):
        EngineQueue(Engine.DMA, max_outstanding=2.0)


def test_perf_counters():
    dut = PerfCounters()

    async def bench(ctx):
        want = {(e, n): 0 for e in range(3) for n in ENGINE_COUNTERS}
        cycles = retired = 0
        rng = random.Random(2)
        pending = 0
        for cycle in range(200):
            clear = cycle in (50, 51, 120)
            running = not clear and rng.random() < 0.8
            outstanding, blocked = rng.getrandbits(3), rng.getrandbits(3)
            semwait, retire = rng.random() < 0.3, rng.random() < 0.3
            for name, v in (("clear", clear), ("running", running), ("retire", retire),
                            ("outstanding", outstanding), ("blocked", blocked),
                            ("semwait", semwait)):
                ctx.set(getattr(dut, name), v)
            await ctx.tick()
            if running:
                cycles += 1
                for e in range(3):
                    n = ("busy" if outstanding >> e & 1 else "semwait" if semwait else "idle")
                    want[e, n] += 1
                    want[e, "blocked"] += blocked >> e & 1
            retired += pending
            pending = retire
            if clear:
                want = {k: 0 for k in want}
                cycles = retired = pending = 0
            assert ctx.get(dut.cycles) == cycles, cycle
            assert ctx.get(dut.retired) == retired + pending, cycle
            for e in range(3):
                assert [ctx.get(c) for c in dut.counters(e)] == \
                    [want[e, n] for n in ENGINE_COUNTERS], cycle

    _run(dut, bench)


def test_semaphore_bank_model():
    """Random engine completions, SEMINCs, SEMSETs and clears against a model: a SEMINC shows
    two cycles later, a SEMSET's value (given the cycle after) one cycle later with that
    cycle's increments added, ``now`` shows a pending SEMSET, ``clear`` wins."""
    from rtl.control.semaphores import SemaphoreBank
    dut = SemaphoreBank()
    n, mask = isa.NUM_SEMS, (1 << isa.SEM_VALUE_BITS) - 1
    rng = random.Random(4)

    async def bench(ctx):
        value = [0] * n
        inc_q = 0                 # SEMINC mask registered last cycle
        set_w = 0                 # SEMSET mask pending this cycle
        for cycle in range(500):
            set_value = rng.getrandbits(isa.SEM_VALUE_BITS)
            now = [set_value if set_w >> i & 1 else value[i] for i in range(n)]
            ctx.set(dut.set_value, set_value)
            await ctx.delay(1e-9)
            assert [ctx.get(dut.value[i]) for i in range(n)] == value, cycle
            assert [ctx.get(dut.now[i]) for i in range(n)] == now, cycle
            sel = 1 << rng.randrange(n)
            inc, set_ = rng.random() < 0.3, rng.random() < 0.2
            clear = rng.random() < 0.03
            eng = [(1 << rng.randrange(n)) if rng.random() < 0.5 else 0 for _ in range(3)]
            for name, v in (("sel", sel), ("inc", inc), ("set", set_), ("clear", clear),
                            ("inc_dma", eng[0]), ("inc_tensor", eng[1]),
                            ("inc_vector", eng[2])):
                ctx.set(getattr(dut, name), v)
            await ctx.tick()
            value = [0] * n if clear else [
                (now[i] + sum(e >> i & 1 for e in eng) + (inc_q >> i & 1)) & mask
                for i in range(n)]
            inc_q = sel if inc else 0
            set_w = sel if set_ else 0

    _run(dut, bench)


def test_call_stack_model():
    """Random CALLs, RETs and clears against a list, a CALL's ``write`` raised for 0-2 cycles
    before its push (as while a CALL_PUSH holds in X), each op followed by 0-2 idle cycles:
    ``ret`` is the top entry, ``empty``/``full`` the depth's tests."""
    from rtl.control.call_stack import CallStack
    dut = CallStack()
    rng = random.Random(5)

    async def bench(ctx):
        stack = []
        for step in range(400):
            assert ctx.get(dut.depth) == len(stack), step
            assert ctx.get(dut.empty) == (not stack), step
            assert ctx.get(dut.full) == (len(stack) == isa.CALL_DEPTH), step
            if stack:
                assert ctx.get(dut.ret) == stack[-1], step
            op = rng.choice(["call", "ret", "clear", "none"])
            if op == "call" and len(stack) == isa.CALL_DEPTH or op == "ret" and not stack:
                op = "none"
            value = rng.getrandbits(32)
            ctx.set(dut.value, value)
            ctx.set(dut.clear, op == "clear")
            for held in range(rng.randrange(3) if op == "call" else 0, -1, -1):
                ctx.set(dut.write, op == "call")
                ctx.set(dut.push, op == "call" and held == 0)
                ctx.set(dut.pop, op == "ret")
                await ctx.tick()
                ctx.set(dut.clear, 0)
            for name in ("write", "push", "pop"):
                ctx.set(getattr(dut, name), 0)
            for _ in range(rng.randrange(3)):
                await ctx.tick()
            if op == "call":
                stack.append(value)
            elif op == "ret":
                stack.pop()
            elif op == "clear":
                stack = []

    _run(dut, bench)


def test_micro_call_stack_model():
    """Random micro-CALLs, RETs, ENDs and clears against a list."""
    from rtl.control.micro_stack import MicroCallStack
    dut = MicroCallStack()
    rng = random.Random(6)
    mask = (1 << isa.UADDR_BITS) - 1

    async def bench(ctx):
        stack = []
        for cycle in range(600):
            assert ctx.get(dut.empty) == (not stack), cycle
            assert ctx.get(dut.full) == (len(stack) == isa.UCALL_DEPTH), cycle
            if stack:
                assert ctx.get(dut.top) == stack[-1], cycle
            op = rng.choice(["push", "pop", "none", "none", "reset", "clear"] if
                            rng.random() < 0.1 else ["push", "pop", "none"])
            if op == "push" and len(stack) == isa.UCALL_DEPTH or op == "pop" and not stack:
                op = "none"
            value = rng.getrandbits(isa.UADDR_BITS)
            for name in ("push", "pop", "reset", "clear"):
                ctx.set(getattr(dut, name), op == name)
            ctx.set(dut.value, value)
            await ctx.tick()
            if op == "push":
                stack.append(value & mask)
            elif op == "pop":
                stack.pop()
            elif op in ("reset", "clear"):
                stack = []

    _run(dut, bench)


def test_debug_port_reads_every_address():
    """Every address of ``DBG`` reads its input, a register reads W's pending write to it
    instead of the file's word, and an address outside the map reads 0."""
    from rtl.control.debug_port import DBG, DebugPort
    rng = random.Random(5)
    dut = DebugPort()

    async def bench(ctx):
        vals = {n: rng.getrandbits(len(getattr(dut, n))) for n in (
            "flags", "err_status", "err_pc", "pc", "retired", "cycles", "status")}
        vals["loop_depth"], vals["call_depth"] = 3, 2
        for n, v in vals.items():
            ctx.set(getattr(dut, n), v)
        sems = [rng.getrandbits(16) for _ in range(isa.NUM_SEMS)]
        counters = [rng.getrandbits(32) for _ in range(12)]
        for i, v in enumerate(sems):
            ctx.set(dut.sems[i], v)
        for i, v in enumerate(counters):
            ctx.set(dut.counters[i], v)
        want = {DBG[n]: v for n, v in vals.items()}
        want.update({DBG["sem"] + i: v for i, v in enumerate(sems)})
        for e in range(3):
            for j in range(3):
                want[DBG["busy"] + 3 * e + j] = counters[4 * e + j]
            want[DBG["blocked"] + e] = counters[4 * e + 3]
        ctx.set(dut.rf_data, 0x1234)
        ctx.set(dut.w_rf_addr, 7)
        ctx.set(dut.w_rf_data, 0x5678)
        for addr in range(256):
            ctx.set(dut.addr, addr)
            ctx.set(dut.w_rf_en, addr & 1)
            if addr < isa.NUM_REGS:
                assert ctx.get(dut.rf_addr) == addr
                expect = 0x5678 if addr == 7 else 0x1234
            else:
                expect = want.get(addr, 0)
            assert ctx.get(dut.data) == expect, f"address {addr}"

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
