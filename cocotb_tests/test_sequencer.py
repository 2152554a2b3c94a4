"""cocotb tests of the microcoded sequencer (``rtl/control/sequencer.py``) against the reference
simulator (``sim/refsim.py``).

The three engine queues are consumed by models that accept records with random back-pressure
and return one completion pulse per record after a random latency, in order. After each program
the test compares, with the reference simulator: registers, semaphores, flags, error status,
error PC, PC, retired count and the record trace of every engine.

Environment: ``SEQ_RANDOM_N`` random programs (default 25), ``SEQ_PROGRAM_SEED`` (comma-separated
program seeds: run only these in ``test_random_programs``), ``COCOTB_RANDOM_SEED``.
"""

import os
import random

import cocotb
from cocotb.triggers import FallingEdge, Timer

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import StreamMonitor, StreamSink, seeded_rng
from cocotb_tests.test_sequencer_progs import DIRECTED, HANG_REGRESSIONS, random_program
from sim import isa, microcode
from sim.asm import assemble
from sim.isa import Engine, ErrorBit, Opcode, UAlu, UCond, UDst, USeq, USpecial, USrc
from sim.refsim import RefSim

_NAMES = {Engine.DMA: "dma", Engine.TENSOR: "tensor", Engine.VECTOR: "vector"}
DBG = {"sem": 64, "flags": 80, "err_status": 81, "err_pc": 82, "pc": 83, "retired": 84,
       "cycles": 85, "busy": 86, "blocked": 95, "loop_depth": 98, "call_depth": 99,
       "status": 100}


class Harness:
    """Drives the sequencer's ports and models the three engines.

    Each engine's record stream is taken by a ``StreamSink`` (``ready`` at random with
    probability ``ready_p``, every ``ready_period``-th cycle, or, with ``cost``, only when
    the engine is idle) and checked by a ``StreamMonitor``; the engine pulses ``<engine>_done``
    once per record, in order, ``latency`` (lo, hi) cycles after acceptance (random) or
    ``cost`` cycles after it, driven by the sink's ``ready`` decision at the start of each
    cycle, so that both count the same cycles (from the harness's creation).
    """

    def __init__(self, dut, rng, latency=(1, 12), ready_p=0.6, cost=None):
        self.dut = dut
        #: ``cost(engine, record_fields) -> cycles``: serial engines (ready only when idle,
        #: completion ``cost`` cycles after acceptance), as ``sim.cycles.MicroSim`` models them.
        self.cost = cost
        self.rng = rng
        self.latency = {e: latency for e in Engine}
        self.ready_p = {e: ready_p for e in Engine}
        #: ``ready`` only every ``n``-th cycle (a slow engine) where set; overrides ``ready_p``.
        self.ready_period = {e: None for e in Engine}
        #: The cycle at which the last program's ``done`` was seen.
        self.done_cycle = None
        self.cycle = 0
        self.clear_log()
        self.monitors = {e: StreamMonitor(dut, _NAMES[e]) for e in Engine}
        for e in Engine:
            sink = StreamSink(dut, _NAMES[e], rng=rng)
            cocotb.start_soon(sink.serve(lambda word, cycle, e=e: self._accept(e, word, cycle),
                                         ready=lambda cycle, e=e: self._tick(e, cycle)))

    def clear_log(self):
        self.log = {e: [] for e in Engine}
        self.accepted_at = {e: [] for e in Engine}
        self.done_at = {e: [] for e in Engine}
        self.due = {e: [] for e in Engine}

    def pending(self):
        """Records accepted by the engine models and not yet completed."""
        return sum(len(d) for d in self.due.values())

    def queued(self):
        """Engines whose record stream offers a record (``valid``) not yet accepted."""
        return sum(getattr(self.dut, _NAMES[e] + "__valid").value == 1 for e in Engine)

    def _tick(self, e, cycle):
        """Engine ``e``'s cycle ``cycle`` (its sink's count, from the harness's creation): its
        ``done`` pulse and its ``ready``."""
        self.cycle = cycle
        due = self.due[e]
        fire = bool(due) and due[0] <= cycle
        if fire:
            due.pop(0)
            self.done_at[e].append(cycle)
        getattr(self.dut, _NAMES[e] + "_done").value = int(fire)
        if self.ready_period[e]:
            return cycle % self.ready_period[e] == 0
        if self.cost is None:
            return self.rng.random() < self.ready_p[e]
        return not due or due[-1] <= cycle

    def _accept(self, e, word, cycle):
        self.log[e].append(word)
        self.accepted_at[e].append(cycle)
        if self.cost is None:
            t = cycle + self.rng.randint(*self.latency[e])
        else:
            t = cycle + max(1, int(self.cost(e, isa.unpack(isa.RECORDS[e], word))))
        due = self.due[e]
        due.append(max(t, due[-1] + 1) if due else t)

    def check_streams(self, label):
        """The engines' record streams obeyed the stream rules so far."""
        for e in Engine:
            try:
                self.monitors[e].check()
            except AssertionError as exc:
                raise AssertionError(f"{label}: {exc}") from None

    async def idle_inputs(self):
        d = self.dut
        # tensor_illegal / vector_illegal: the core's record check; a bare sequencer accepts
        # every record (undriven, they would be X in the simulation). With the core's check
        # inside (``_checked_dut``) these ports are not the DUT's.
        for sig in ("start", "pmem_wr_en", "ucode_wr_en", "map_wr_en", "tensor_illegal",
                    "vector_illegal", "tensor_slot_terms", "vector_slot_terms",
                    "tensor_blank_terms", "vector_blank_terms"):
            if sig in ("start", "pmem_wr_en", "ucode_wr_en", "map_wr_en") or \
                    not dut_config().get("check_rows"):
                getattr(d, sig).value = 0
        d.start_pc.value = 0
        d.dbg_addr.value = 0

    async def _write(self, port, base, words):
        """Write ``words`` from address ``base`` through the write port ``<port>_wr_*``, one a
        cycle (set after a falling edge)."""
        addr, data, en = (getattr(self.dut, f"{port}_wr_{n}") for n in ("addr", "data", "en"))
        await FallingEdge(self.dut.clk)
        for i, w in enumerate(words):
            addr.value = base + i
            data.value = w
            en.value = 1
            await FallingEdge(self.dut.clk)
        en.value = 0

    async def load_program(self, words):
        await self._write("pmem", 0, words)

    async def load_microcode(self, base, words):
        await self._write("ucode", base, words)

    async def write_map(self, opcode, value):
        await self._write("map", opcode, [value])

    async def run(self, words, max_cycles=200_000):
        """Load and run a program until done, then let every completion arrive."""
        d = self.dut
        # A completion still due would be lost by clear_log() and the sequencer would wait for
        # it forever (the hang of program seeds 274751540 and 1027915099).
        assert not self.pending() and not self.queued(), "records of the last program in flight"
        self.clear_log()
        await self.load_program(words)
        await FallingEdge(d.clk)
        d.start.value = 1
        await FallingEdge(d.clk)
        d.start.value = 0
        start = self.cycle
        while d.done.value != 1:
            await FallingEdge(d.clk)
            if self.cycle - start >= max_cycles:
                pc = await self.dbg(DBG["pc"])
                word = words[pc] if pc < len(words) else None
                sems = [await self.dbg(DBG["sem"] + i) for i in range(isa.NUM_SEMS)]
                raise AssertionError(
                    f"sequencer did not finish (hang) after {max_cycles} cycles at pc {pc} "
                    f"({isa.decode(word) if word is not None else 'out of program'}); "
                    f"semaphores {sems}; completions pending "
                    f"{ {e.name: len(self.due[e]) for e in Engine} }; records accepted "
                    f"{ {e.name: len(self.log[e]) for e in Engine} }")
        self.done_cycle = self.cycle
        # The error outputs and the retired count as they are in the first cycle of DONE
        # (``compare`` checks them against the debug port's, read later).
        self.err_at_done = {"err_status": d.err_status.value.to_unsigned(),
                            "err_pc": d.err_pc.value.to_unsigned(),
                            "retired": await self.dbg(DBG["retired"])}
        # A trap stops the sequencer with records still in its queues (HALT drains them first,
        # by its BARRIER): the engines still take and complete them, as the core waits for
        # them before DONE. Wait for both, so that no completion is lost to the next program.
        while self.pending() or self.queued():
            await FallingEdge(d.clk)
        for _ in range(3):
            await FallingEdge(d.clk)

    async def dbg(self, addr):
        self.dut.dbg_addr.value = addr
        await Timer(1, unit="ns")
        return self.dut.dbg_data.value.to_unsigned()

    async def state(self):
        s = {"regs": [await self.dbg(i) for i in range(isa.NUM_REGS)],
             "sems": [await self.dbg(DBG["sem"] + i) for i in range(isa.NUM_SEMS)]}
        for name in ("flags", "err_status", "err_pc", "pc", "retired", "cycles",
                     "loop_depth", "call_depth", "status"):
            s[name] = await self.dbg(DBG[name])
        s["perf"] = {e: [await self.dbg(DBG["busy"] + 3 * e + j) for j in range(3)]
                     + [await self.dbg(DBG["blocked"] + e)] for e in Engine}
        return s


def _ref(words, extensions=None):
    cfg = dut_config()
    return RefSim(words, pmem_depth=cfg["pmem_depth"], execute=False, races=True,
                  extensions=extensions).run(max_steps=200_000)


def check_order(h, ref, label):
    """The race checker's happens-before claims (``sim/races.py``) hold on the hardware: a
    record it orders after a record of another engine was accepted after that record's
    completion. Returns the number of claims checked (the engine models here have no memory,
    so a race cannot change a result; what is tested is the checker's ordering)."""
    rc = ref.race_checker
    claims = 0
    for f in Engine:
        for i, known in enumerate(rc.frontier[f][:len(h.accepted_at[f])]):
            for e in Engine:
                if e != f and known[e] > 0:
                    done, acc = h.done_at[e][known[e] - 1], h.accepted_at[f][i]
                    assert done < acc, (
                        f"{label}: sim.races orders {f.name} record {i} after {e.name} record "
                        f"{known[e] - 1}, but the hardware accepted it in cycle {acc}, before "
                        f"that completed in cycle {done}")
                    claims += 1
    return claims


def compare(h, hw, ref, label):
    """Assert architectural equality; returns nothing, raises with the first difference."""
    flags = ref.flags["EQ"] | ref.flags["LT"] << 1 | ref.flags["LTU"] << 2
    exp = {"regs": ref.regs, "sems": ref.sems, "flags": flags, "err_status": ref.error,
           "err_pc": ref.err_pc, "pc": ref.pc, "retired": ref.retired}
    for k, v in exp.items():
        assert hw[k] == v, f"{label}: {k} differs: hardware {hw[k]} reference {v}"
    for k, v in h.err_at_done.items():
        assert v == hw[k], f"{label}: {k} in DONE's first cycle {v}, later {hw[k]}"
    for e in Engine:
        got, want = h.log[e], ref.trace[e]
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        assert got == want, (f"{label}: {e.name} trace differs (hardware {len(got)} records, "
                             f"reference {len(want)}); first difference at {first}")
    # Counter invariants: each engine's cycles are busy, semaphore-wait or idle.
    for e in Engine:
        busy, semw, idle, _ = hw["perf"][e]
        assert busy + semw + idle == hw["cycles"], f"{label}: {e.name} counters do not add up"
    assert hw["status"] & 2, f"{label}: done not set"
    assert bool(hw["status"] & 4) == bool(ref.error), f"{label}: error flag"


async def _setup(dut, seed_offset=0):
    rng = seeded_rng(dut, seed_offset)
    start_clock(dut)
    h = Harness(dut, rng)
    await h.idle_inputs()
    await reset(dut)
    return h, rng


async def _check(h, words, label, extensions=None):
    ref = _ref(words, extensions)
    await h.run(words)
    hw = await h.state()
    compare(h, hw, ref, label)
    h.check_streams(label)
    ref.order_claims = check_order(h, ref, label)
    return hw, ref


@cocotb.test()
async def test_directed(dut):
    """Every instruction (scalar, branches, calls, loops with AGs, all engine opcodes)."""
    h, _ = await _setup(dut)
    for name, src in DIRECTED.items():
        hw, ref = await _check(h, assemble(src), name)
        assert ref.error == 0
        dut._log.info("%s: %d instructions, %d cycles, records %s", name, hw["retired"],
                      hw["cycles"], {e.name: len(h.log[e]) for e in Engine})
    # Independent expectations (not from the reference simulator).
    hw, _ = await _check(h, assemble(DIRECTED["loops"]), "loops")
    assert hw["regs"][21] == sum(1000 + 10 * i + j for i in range(3) for j in range(4))
    assert hw["regs"][23] == 1000 and hw["regs"][24] == 16 and hw["regs"][30] == 0
    hw, _ = await _check(h, assemble(DIRECTED["ag_shared"]), "ag_shared")
    assert hw["regs"][21] == 100 + 111 + 122 and hw["regs"][23] == 100
    hw, _ = await _check(h, assemble(DIRECTED["branches"]), "branches")
    assert hw["regs"][10] == 103 and hw["regs"][11] == 0
    covered = set()
    for src in DIRECTED.values():
        covered |= {isa.decode(w)["op"] for w in assemble(src)}
    missing = {op.name for op in Opcode} - {Opcode(o).name for o in covered if o in
                                            [int(x) for x in Opcode]}
    assert not missing, f"opcodes not covered: {missing}"


@cocotb.test()
async def test_loops_and_calls(dut):
    """Zero-trip and nested loops, call depth to the limit and beyond, stack underflows."""
    h, _ = await _setup(dut, 1)
    rec = """
        li   r1, {depth}
        call f
        halt
    f:  addi r1, r1, -1
        addi r2, r2, 1
        cmpi r1, 0
        beq  base
        call f
    base:
        ret
    """
    hw, _ = await _check(h, assemble(rec.format(depth=isa.CALL_DEPTH)), "call depth 8")
    assert hw["err_status"] == 0 and hw["regs"][2] == isa.CALL_DEPTH
    words = assemble(rec.format(depth=isa.CALL_DEPTH + 1))
    hw, _ = await _check(h, words, "call depth 9")
    assert hw["err_status"] == 1 << ErrorBit.CALL_OVERFLOW
    assert isa.decode(words[hw["err_pc"]])["op"] == Opcode.CALL
    # (a trapping push or pop leaves the stack's depth as it was)
    assert hw["call_depth"] == isa.CALL_DEPTH, f"call depth {hw['call_depth']} after overflow"
    hw, _ = await _check(h, assemble("nop\nret\nhalt"), "ret on empty")
    assert hw["err_status"] == 1 << ErrorBit.CALL_UNDERFLOW and hw["err_pc"] == 1
    assert hw["call_depth"] == 0, f"call depth {hw['call_depth']} after underflow"
    nest = "li r1, 1\n" + "".join(f"loop r1, e{i}\n" for i in range(5)) + \
        "".join(f"e{i}: endloop\n" for i in reversed(range(5))) + "halt\n"
    hw, _ = await _check(h, assemble(nest), "loop depth 5")
    assert hw["err_status"] == 1 << ErrorBit.LOOP_OVERFLOW and hw["err_pc"] == 5
    assert hw["loop_depth"] == isa.LOOP_DEPTH, f"loop depth {hw['loop_depth']} after overflow"
    hw, _ = await _check(h, assemble("endloop\nhalt"), "endloop on empty")
    assert hw["err_status"] == 1 << ErrorBit.LOOP_UNDERFLOW
    assert hw["loop_depth"] == 0, f"loop depth {hw['loop_depth']} after underflow"
    zero = """
        li r1, 0
        loop r1, e
          li r2, 0xBAD
    e:  endloop
        li r3, 7
        halt
    """
    hw, _ = await _check(h, assemble(zero), "zero-trip")
    assert hw["regs"][2] == 0 and hw["regs"][3] == 7 and hw["retired"] == 4


@cocotb.test()
async def test_errors(dut):
    """Illegal opcodes, PC out of range, deadlock, an opcode disabled at run time: the
    sequencer stops with the right error bit and PC, and starts again afterwards."""
    h, _ = await _setup(dut, 2)
    cfg = dut_config()
    for bad in (0xF5, 0x7F, 0x23, 0xFF):
        words = assemble(f"li r1, 3\nnop\n.word {bad:#x}\nli r2, 4\nhalt")
        hw, _ = await _check(h, words, f"illegal {bad:#x}")
        assert hw["err_status"] == 1 << ErrorBit.ILLEGAL_OPCODE and hw["err_pc"] == 2
        assert hw["regs"][1] == 3 and hw["regs"][2] == 0
    hw, _ = await _check(h, assemble(f"jmp {cfg['pmem_depth'] + 5}"), "pc range")
    assert hw["err_status"] == 1 << ErrorBit.PC_RANGE and hw["err_pc"] == cfg["pmem_depth"] + 5
    words = assemble("li r1, 0x10001\ndma_ld r1, r0, r0, sem=3, sem_en=1\nwaiti 3, 2\nhalt")
    h.latency[Engine.DMA] = (30, 40)
    hw, _ = await _check(h, words, "deadlock")
    h.latency[Engine.DMA] = (1, 12)
    assert hw["err_status"] == 1 << ErrorBit.DEADLOCK and hw["err_pc"] == 2
    assert hw["sems"][3] == 1 and len(h.log[Engine.DMA]) == 1
    # Disable ADD through the map write port, then restore it.
    await h.write_map(Opcode.ADD, 0)
    hw, ref = await _check(h, assemble("li r1, 1\nadd r2, r1, r1\nhalt"), "disabled add",
                           {Opcode.ADD: lambda sim, f: sim._trap(ErrorBit.ILLEGAL_OPCODE)})
    assert hw["err_status"] == 1 << ErrorBit.ILLEGAL_OPCODE and hw["err_pc"] == 1
    await h.write_map(Opcode.ADD, microcode.opcode_map()[Opcode.ADD])
    hw, _ = await _check(h, assemble("li r1, 1\nadd r2, r1, r1\nhalt"), "restored add")
    assert hw["regs"][2] == 2 and hw["err_status"] == 0


@cocotb.test()
async def test_semaphore_ordering(dut):
    """WAIT orders engines: a record that follows a WAIT is issued only after the completion
    that satisfies it; without WAIT the three engines run concurrently."""
    h, _ = await _setup(dut, 3)
    for e in Engine:
        h.latency[e] = (40, 60)
        h.ready_p[e] = 0.8
    chain = """
        li r1, 0x10001
        li r2, 8
        dma_ld r1, r0, r0, sem=1, sem_en=1
        waiti 1, 1
        matmul r0, r0, r0, r2, k=1, m=1, sem=2, sem_en=1
        waiti 2, 1
        ts r0, r0, r0, r2, sem=3, sem_en=1
        waiti 3, 1
        halt
    """
    hw, _ = await _check(h, assemble(chain), "chain")
    dma_done = h.done_at[Engine.DMA][0]
    assert h.accepted_at[Engine.TENSOR][0] > dma_done
    assert h.accepted_at[Engine.VECTOR][0] > h.done_at[Engine.TENSOR][0]
    assert hw["perf"][Engine.TENSOR][1] > 30, "tensor engine should have waited on a semaphore"
    parallel = """
        li r1, 0x10001
        li r2, 8
        dma_ld r1, r0, r0, sem=1, sem_en=1
        matmul r0, r0, r0, r2, k=1, m=1, sem=2, sem_en=1
        ts r0, r0, r0, r2, sem=3, sem_en=1
        waiti 1, 1
        waiti 2, 1
        waiti 3, 1
        halt
    """
    hw, _ = await _check(h, assemble(parallel), "parallel")
    first_done = min(h.done_at[e][0] for e in Engine)
    assert all(h.accepted_at[e][0] < first_done for e in Engine), "engines did not overlap"
    # Queue full: more records than max_outstanding on one engine stall EMIT, none are lost.
    many = "li r2, 8\n" + "matmul r0, r0, r0, r2, k=1, m=1, sem=4, sem_en=1\n" * 20 + \
        "waiti 4, 20\nhalt\n"
    h.ready_p[Engine.TENSOR] = 0.3
    h.latency[Engine.TENSOR] = (200, 300)
    hw, _ = await _check(h, assemble(many), "back-pressure")
    assert hw["sems"][4] == 20 and hw["perf"][Engine.TENSOR][3] > 0
    # The record queue full with few records outstanding (a slow acceptor, quick
    # completions): EMIT stalls on the record queue, not on the semaphore queue.
    h.ready_p[Engine.TENSOR] = 0.03
    h.latency[Engine.TENSOR] = (1, 3)
    hw, _ = await _check(h, assemble(many), "record queue full")
    assert hw["sems"][4] == 20 and hw["perf"][Engine.TENSOR][3] > 0


@cocotb.test()
async def test_runtime_microcode(dut):
    """New macro-instructions loaded into the control store at run time (no new Verilog):
    a fused matmul + activation, a micro-looped semaphore increment, and a recursive
    microroutine that must trip the micro call-stack overflow."""
    h, _ = await _setup(dut, 4)
    fused, base = microcode.fused_matmul_act()
    await h.load_microcode(base, fused)
    await h.write_map(microcode.FUSED_OPCODE, microcode.map_entry(base))
    rep_base = base + len(fused)
    rep = microcode.rep_seminc(rep_base)
    await h.load_microcode(rep_base, rep)
    await h.write_map(0xF1, microcode.map_entry(rep_base))
    rec_base = rep_base + len(rep)
    await h.load_microcode(rec_base, microcode.recursive_ucall(rec_base))
    await h.write_map(0xF2, microcode.map_entry(rec_base))

    def rep_ref(sim, f):
        s = f["imm"] & 15
        sim.sems[s] = (sim.sems[s] + (sim.r(f["rs1"]) & 0xFFFF)) & 0xFFFF

    imm = isa.pack(isa.MATMUL_IMM, k=8, m=4, fmt=1, sem=2, sem_en=1) | (7 << 28)
    words = assemble("li r3, 0x40\nli r4, 0x200\nli r5, 0x10\nli r6, 0x300\nli r7, 32\n"
                     "li r9, 5")[:6]
    words += [isa.encode(microcode.FUSED_OPCODE, rd=5, rs1=3, rs2=4, rs3=7, imm=imm),
              isa.encode(0xF1, rs1=9, imm=6), isa.encode(0xF1, rs1=0, imm=7)]
    words += assemble("waiti 2, 1\nwaiti 6, 5\nhalt")
    ext = {microcode.FUSED_OPCODE: microcode.fused_matmul_act_ref, 0xF1: rep_ref}
    # A slow tensor engine (the MATMUL completes long after the ACT record is built): the
    # routine's BARRIER holds the ACT, which reads the MATMUL's PSUM tile, until the MATMUL
    # completed, and the race check sees the two ordered.
    saved = dict(h.latency)
    h.latency[Engine.TENSOR] = (100, 120)
    hw, ref = await _check(h, words, "fused", ext)
    h.latency = saved
    assert hw["err_status"] == 0 and hw["sems"][6] == 5 and hw["sems"][7] == 0
    assert h.accepted_at[Engine.VECTOR][0] > h.done_at[Engine.TENSOR][0], \
        (h.accepted_at, h.done_at)
    assert not ref.races, ref.races_error()
    t = isa.unpack(isa.TENSOR_RECORD, h.log[Engine.TENSOR][0])
    v = isa.unpack(isa.VECTOR_RECORD, h.log[Engine.VECTOR][0])
    assert (t["k"], t["m"], t["n"], t["psum_addr"], t["stat_addr"]) == (8, 4, 32, 0x10, 0x40)
    assert (v["op"], v["a_space"], v["a_addr"], v["dst_addr"], v["func"]) == \
        (isa.VecOp.ACT, 1, 0x10, 0x300, 7)
    words = [isa.encode(0xF2)] + assemble("halt")
    hw, _ = await _check(h, words, "recursive", {0xF2: lambda sim, f: sim._trap(
        ErrorBit.UCALL_OVERFLOW)})
    assert hw["err_status"] == 1 << ErrorBit.UCALL_OVERFLOW
    # Back-to-back dependent micro-instructions: a SEMRD's register write (not the ALU's
    # result) and a T0 write, each read by the very next micro-instruction (forwarding).
    fwd_base = rec_base + len(microcode.recursive_ucall(rec_base))
    fwd, _ = microcode.link([
        microcode.u(special=USpecial.SEMRD),
        microcode.u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.T0),
        microcode.u(a=USrc.T0, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, **microcode.END),
    ], base=fwd_base, labels=microcode.LABELS)
    await h.load_microcode(fwd_base, fwd)
    await h.write_map(0xF3, microcode.map_entry(fwd_base))

    def fwd_ref(sim, f):
        sim.w(f["rd"], 3 * sim.sems[f["imm"] & 15])

    words = assemble("semset 3, 1234\nli r2, 99") + \
        [isa.encode(0xF3, rd=2, imm=3)] + assemble("halt")
    hw, _ = await _check(h, words, "forward", {0xF3: fwd_ref})
    assert hw["err_status"] == 0
    # Program-memory, control-store and opcode-map writes while the sequencer is busy are
    # ignored (their read ports need no collision logic, rtl/control/sequencer.py YOSYS_HINTS):
    # overwriting the 0xF1 routine with the recursive one (which traps), the HALT with an 0xF2
    # (the same trap) and 0xF1's map entry with 0 (illegal) while a program runs changes
    # nothing.
    d = h.dut
    bad = microcode.recursive_ucall(rep_base)
    words = assemble("li r9, 3") + [isa.encode(0xF1, rs1=9, imm=6)] * 4 + assemble("halt")
    writes = []

    async def write_while_busy():
        while d.busy.value != 1:
            await FallingEdge(d.clk)
        for i, w in enumerate(bad):
            writes.append(int(d.busy.value))
            d.ucode_wr_addr.value = rep_base + i
            d.ucode_wr_data.value = w
            d.ucode_wr_en.value = 1
            await FallingEdge(d.clk)
        d.ucode_wr_en.value = 0
        writes.append(int(d.busy.value))
        d.pmem_wr_addr.value = len(words) - 1
        d.pmem_wr_data.value = isa.encode(0xF2)
        d.pmem_wr_en.value = 1
        d.map_wr_addr.value = 0xF1
        d.map_wr_data.value = 0
        d.map_wr_en.value = 1
        await FallingEdge(d.clk)
        d.pmem_wr_en.value = 0
        d.map_wr_en.value = 0

    writer = cocotb.start_soon(write_while_busy())
    hw, _ = await _check(h, words, "write while busy", {0xF1: rep_ref})
    await writer
    assert writes == [1] * (len(bad) + 1), f"the writes did not all land while busy: {writes}"
    assert hw["err_status"] == 0 and hw["sems"][6] == 12
    for op in (microcode.FUSED_OPCODE, 0xF1, 0xF2, 0xF3):
        await h.write_map(op, 0)


async def _load_routines(h, routines):
    """Link each ``{opcode: micro-code items}`` routine behind the built-in microcode, load it
    into the control store and map its opcode to it."""
    base = microcode.fused_matmul_act()[1]
    for op, items in routines.items():
        words, _ = microcode.link(items, base=base, labels=microcode.LABELS)
        await h.load_microcode(base, words)
        await h.write_map(op, microcode.map_entry(base))
        base += len(words)


@cocotb.test()
async def test_micro_word_combinations(dut):
    """Micro-words that combine a semaphore operation or a register write with a ``seq`` field
    that holds or traps them (run-time microcode): the sequencer decides their ``adv`` from
    flags decoded for them alone (``seminc_*``/``semset_*``, ``wk_*``). A BRANCH on Z/NZ holds
    one cycle and then takes effect once; a CALL past the micro-stack, a RET at its bottom, a
    TRAP and a LOOP_POP at depth 0 trap and leave the semaphore and the register unchanged.
    EMIT the same way (``emit_*``): one record per micro-instruction that goes, none from one
    that traps."""
    h, _ = await _setup(dut, 7)
    u = microcode.u
    end = microcode.END
    routines = {
        # sem += 1, rd = rs1; rd += 1 unless rs1 was 0
        0xF4: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.SEMINC, seq=USeq.BRANCH,
                 cond=UCond.Z, target="cw_a_done"),
               u(a=USrc.RD, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD, **end),
               "cw_a_done:", u(**end)],
        # sem = rs1; rd = rs1 + 2 if rs1 was 0
        0xF5: [u(a=USrc.RS1, special=USpecial.SEMSET, seq=USeq.BRANCH, cond=UCond.NZ,
                 target="cw_b_done"),
               u(a=USrc.RS1, b=USrc.CONST, const=2, alu=UAlu.ADD, dst=UDst.RD, **end),
               "cw_b_done:", u(**end)],
        # sem += 1 and rd += 1 per micro call, until the micro call stack overflows
        0xF6: ["cw_c:", u(a=USrc.RD, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD,
                          special=USpecial.SEMINC, seq=USeq.CALL, target="cw_c")],
        0xF7: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.SEMSET, seq=USeq.RET)],
        0xF8: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.SEMINC, seq=USeq.RET)],
        0xF9: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.SEMINC, seq=USeq.TRAP)],
        0xFA: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.LOOP_POP, **end)],
        # EMIT (an empty DMA record) with the same ``seq`` fields (``emit_*`` flags): once
        # after a BRANCH on Z holds, once from a micro subroutine's RET, never from a RET at
        # the stack's bottom, once per micro call until the stack overflows
        0xFB: [u(a=USrc.RS1, special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.BRANCH,
                 cond=UCond.Z, target="cw_e_done"),
               u(**end),
               "cw_e_done:", u(**end)],
        0xFC: [u(seq=USeq.CALL, target="cw_f_sub"),
               u(**end),
               "cw_f_sub:", u(special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.RET)],
        0xFD: [u(special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.RET)],
        0xFE: ["cw_g:", u(special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.CALL,
                          target="cw_g")],
    }
    await _load_routines(h, routines)

    def emit_dma(sim, f, n=1):
        for _ in range(n):
            sim.issue(Engine.DMA, {})

    def sem_add(sim, f, n):
        s = f["imm"] & 15
        sim.sems[s] = (sim.sems[s] + n) & 0xFFFF

    def ref_a(sim, f):
        sem_add(sim, f, 1)
        v = sim.r(f["rs1"])
        sim.w(f["rd"], v and (v + 1) & 0xFFFFFFFF)

    def ref_b(sim, f):
        v = sim.r(f["rs1"])
        sim.sems[f["imm"] & 15] = v & 0xFFFF
        if v == 0:
            sim.w(f["rd"], 2)

    def ref_c(sim, f):
        sem_add(sim, f, isa.UCALL_DEPTH)
        sim.w(f["rd"], (sim.r(f["rd"]) + isa.UCALL_DEPTH) & 0xFFFFFFFF)
        sim._trap(ErrorBit.UCALL_OVERFLOW)

    ext = {0xF4: ref_a, 0xF5: ref_b, 0xF6: ref_c,
           0xF7: lambda sim, f: sim._trap(ErrorBit.UCALL_UNDERFLOW),
           0xF8: lambda sim, f: sim._trap(ErrorBit.UCALL_UNDERFLOW),
           0xF9: lambda sim, f: sim._trap(ErrorBit.MICRO_TRAP),
           0xFA: lambda sim, f: sim._trap(ErrorBit.LOOP_UNDERFLOW),
           0xFB: emit_dma, 0xFC: emit_dma,
           0xFD: lambda sim, f: sim._trap(ErrorBit.UCALL_UNDERFLOW),
           0xFE: lambda sim, f: (emit_dma(sim, f, isa.UCALL_DEPTH),
                                 sim._trap(ErrorBit.UCALL_OVERFLOW))}
    prologue = assemble("li r1, 7\nli r2, 0\nli r3, 40\nsemset 5, 3\nsemset 6, 9")[:5]
    runs = [[isa.encode(0xF4, rd=3, rs1=1, imm=5), isa.encode(0xF4, rd=4, rs1=2, imm=5),
             isa.encode(0xF5, rd=7, rs1=1, imm=6), isa.encode(0xF5, rd=8, rs1=2, imm=5)]]
    runs += [[isa.encode(op, rd=3, rs1=1, imm=5)] for op in range(0xF6, 0xFB)]
    runs += [[isa.encode(0xFB, rs1=1), isa.encode(0xFB, rs1=2), isa.encode(0xFC)]]
    runs += [[isa.encode(op)] for op in (0xFD, 0xFE)]
    for i, run in enumerate(runs):
        if run == [isa.encode(0xFE)]:
            # (a DMA that always takes its record: the queue has room as the overflowing
            # CALL traps, so an EMIT that pushed anyway would show)
            h.ready_p[Engine.DMA] = 1.0
        hw, _ = await _check(h, prologue + run + assemble("halt"), f"combination {i}", ext)
        dut._log.info("combination %d: sems 5/6 = %d/%d, r3 = %d, errors %#x", i,
                      hw["sems"][5], hw["sems"][6], hw["regs"][3], hw["err_status"])
    for op in routines:
        await h.write_map(op, 0)


@cocotb.test()
async def test_late_writes(dut):
    """X's writes that land a cycle late (the W stage: generators' stride and base, a pushed
    loop count, the register file, a SEMSET), each read by the very next micro-instruction
    (run-time microcode), which must see the new value through the bypass: an AG_SET's stride
    read back (AGSTRIDE), an AG_SNAP's base read back (AGBASE), a LOOP_PUSH stepped at once
    (LOOP_STEP, then counted down with LOOP_MORE), a SEMSET read back (SEMRD) and a register
    written and read by the next two micro-instructions, and one read two micro-instructions
    later through a generator (AGREG, both operands), and through a generator set by the
    previous micro-instruction or the one before; a result forwarded as the subtrahend of a
    SUB and an SLTU; RS1, RS2, RS3 and RS2P1 operands that are the instruction's rd, written
    by the previous micro-instruction; and a register written by the halting
    micro-instruction, read on the debug port as the sequencer stops."""
    h, _ = await _setup(dut, 8)
    u = microcode.u
    end = microcode.END
    routines = {
        # generator 1 := (rd, level 1, stride rs1); rd = generator 1's stride
        0xF4: [u(a=USrc.RS1, special=USpecial.AG_SET),
               u(a=USrc.AGSTRIDE, const=1, dst=UDst.RD, **end)],
        # generator 1 at level 1; push a loop (level 1); snap base = rs2; rd = base + rs1
        0xF5: [u(a=USrc.ZERO, special=USpecial.AG_SET),
               u(a=USrc.CONST, const=3, special=USpecial.LOOP_PUSH),
               u(a=USrc.RS2, const=1, special=USpecial.AG_SNAP),
               u(a=USrc.AGBASE, b=USrc.RS1, const=1, alu=UAlu.ADD, dst=UDst.RD),
               u(special=USpecial.LOOP_POP, **end)],
        # push rs1, step at once, then rd += 1 per step while LOOP_MORE: rd += rs1 - 1
        0xF6: [u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
               u(special=USpecial.LOOP_STEP),
               "lw_more:", u(a=USrc.RD, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD,
                             special=USpecial.LOOP_STEP, seq=USeq.BRANCH, cond=UCond.LOOP_MORE,
                             target="lw_more"),
               u(special=USpecial.LOOP_POP, **end)],
        # sem = rs1; rd = sem (SEMRD); rd = rd + rd; rd = rd + rs1
        0xF7: [u(a=USrc.RS1, special=USpecial.SEMSET),
               u(special=USpecial.SEMRD),
               u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD),
               u(a=USrc.RD, b=USrc.RS1, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # generator 1 := (rd, level 1); rd = rs1 + 5; a filler; rd = AGREG + AGREG (the
        # generator's register read while rd's write is still in W)
        0xF9: [u(a=USrc.ZERO, special=USpecial.AG_SET),
               u(a=USrc.RS1, b=USrc.CONST, const=5, alu=UAlu.ADD, dst=UDst.RD),
               u(),
               u(a=USrc.AGREG, b=USrc.AGREG, const=1, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # generator 1 := (rd, level 1); rd = AGREG + rs1 at once (R holds the read until the
        # AG_SET has gone), and the same a micro-instruction later (the read enters R as
        # the AG_SET goes)
        0xFA: [u(a=USrc.ZERO, special=USpecial.AG_SET),
               u(a=USrc.AGREG, b=USrc.RS1, const=1, alu=UAlu.ADD, dst=UDst.RD, **end)],
        0xFB: [u(a=USrc.ZERO, special=USpecial.AG_SET),
               u(),
               u(a=USrc.AGREG, b=USrc.RS1, const=1, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # rd = rs1 + 5; rd = rs2 - rd; t0 = rs1 <u rd; rd = rd + t0: the subtrahend and the
        # compared value are the previous micro-instruction's result (forwarded as ``b``)
        0xFC: [u(a=USrc.RS1, b=USrc.CONST, const=5, alu=UAlu.ADD, dst=UDst.RD),
               u(a=USrc.RS2, b=USrc.RD, alu=UAlu.SUB, dst=UDst.RD),
               u(a=USrc.RS1, b=USrc.RD, alu=UAlu.SLTU, dst=UDst.T0),
               u(a=USrc.RD, b=USrc.T0, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # rd = rs1 + 1; rd = rs1 + rs2, run with rs1 = rd and with rs2 = rd: the second
        # micro-instruction's RS1 / RS2 operand is the first one's result (forwarded by the
        # registered index compares ``src_eq_rd``)
        0xFD: [u(a=USrc.RS1, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD),
               u(a=USrc.RS1, b=USrc.RS2, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # the same with RS3 and RS2P1 (r[rs2 + 1]), run with rs3 = rd and with rs2 + 1 = rd
        0xFE: [u(a=USrc.RS1, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD),
               u(a=USrc.RS3, b=USrc.RS2P1, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # rd = sem (SEMRD, its ALU fields set: they must not reach rd); rd = rd + rd at once
        # (forwarded), or after a filler (from the register file's write)
        0xF8: [u(a=USrc.RS1, b=USrc.CONST, const=5, alu=UAlu.ADD, special=USpecial.SEMRD),
               u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, **end)],
        0xF3: [u(a=USrc.RS1, b=USrc.CONST, const=0x50, alu=UAlu.OR, special=USpecial.SEMRD),
               u(),
               u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, **end)],
        0xF1: [u(a=USrc.ZERO, b=USrc.RS1, alu=UAlu.SLTU, special=USpecial.SEMRD),
               u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, **end)],
        # sem += 1 (SEMINC) then rd = sem at once (SEMRD), and the same after two SEMINCs:
        # the increment, registered, reaches the semaphore while SEMRD holds
        0xEF: [u(special=USpecial.SEMINC),
               u(special=USpecial.SEMRD),
               u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, **end)],
        0xEE: [u(special=USpecial.SEMINC),
               u(special=USpecial.SEMINC),
               u(special=USpecial.SEMRD, **end)],
        # rd = (rs1 + rs2 != 0) by a BRANCH on Z of the sum: sums whose halves carry into
        # each other (0x8000 + 0x8000 = 0x10000, 0x80000000 + 0x80000000 = 0)
        0xF0: [u(a=USrc.RS1, b=USrc.RS2, alu=UAlu.ADD, dst=UDst.T0, seq=USeq.BRANCH,
                 cond=UCond.Z, target="zt_zero"),
               u(a=USrc.CONST, const=1, alu=UAlu.PASSA, dst=UDst.RD, **end),
               "zt_zero:", u(a=USrc.ZERO, alu=UAlu.PASSA, dst=UDst.RD, **end)],
        # t0 = rs1 <s rs2; rd = t0 + t0 + (rs2 <s rs1): signed compares whose difference
        # overflows (the sign of a - b is not the answer)
        0xF2: [u(a=USrc.RS1, b=USrc.RS2, alu=UAlu.SLT, dst=UDst.T0),
               u(a=USrc.RS2, b=USrc.RS1, alu=UAlu.SLT, dst=UDst.T1),
               u(a=USrc.T0, b=USrc.T0, alu=UAlu.ADD, dst=UDst.T0),
               u(a=USrc.T0, b=USrc.T1, alu=UAlu.ADD, dst=UDst.RD, **end)],
    }
    await _load_routines(h, routines)
    mask = 0xFFFFFFFF

    def ref_stride(sim, f):
        sim.ags[1].update(level=f["imm"] >> 8 & 7, reg=f["rd"], stride=sim.r(f["rs1"]))
        sim.w(f["rd"], sim.r(f["rs1"]))

    def ref_base(sim, f):
        sim.ags[1].update(level=1, reg=f["rd"], stride=0, base=sim.r(f["rs2"]))
        sim.w(f["rd"], (sim.r(f["rs2"]) + sim.r(f["rs1"])) & mask)

    def ref_loop(sim, f):
        sim.w(f["rd"], (sim.r(f["rd"]) + sim.r(f["rs1"]) - 1) & mask)

    def ref_sem(sim, f):
        v = sim.r(f["rs1"])
        sim.sems[f["imm"] & 15] = v & 0xFFFF
        sim.w(f["rd"], (2 * (v & 0xFFFF) + v) & mask)

    def ref_agreg(sim, f):
        sim.ags[1].update(level=f["imm"] >> 8 & 7, reg=f["rd"], stride=0)
        sim.w(f["rd"], 2 * (sim.r(f["rs1"]) + 5) & mask)

    def ref_agreg_rd(sim, f):
        sim.ags[1].update(level=f["imm"] >> 8 & 7, reg=f["rd"], stride=0)
        sim.w(f["rd"], (sim.r(f["rd"]) + sim.r(f["rs1"])) & mask)

    def ref_sub_fwd(sim, f):
        v = (sim.r(f["rs2"]) - (sim.r(f["rs1"]) + 5)) & mask
        sim.w(f["rd"], (v + (sim.r(f["rs1"]) < v)) & mask)

    def ref_fwd_rs(sim, f):
        sim.w(f["rd"], (sim.r(f["rs1"]) + 1) & mask)
        sim.w(f["rd"], (sim.r(f["rs1"]) + sim.r(f["rs2"])) & mask)

    def ref_fwd_rs3(sim, f):
        sim.w(f["rd"], (sim.r(f["rs1"]) + 1) & mask)
        sim.w(f["rd"], (sim.r(f["rs3"]) + sim.r((f["rs2"] + 1) & 63)) & mask)

    def ref_semrd2(sim, f):
        sim.w(f["rd"], 2 * sim.sems[f["imm"] & 15] & mask)

    def ref_inc_rd(sim, f):
        sim.sems[f["imm"] & 15] = sim.sems[f["imm"] & 15] + 1 & 0xFFFF
        sim.w(f["rd"], 2 * sim.sems[f["imm"] & 15])

    def ref_inc2_rd(sim, f):
        sim.sems[f["imm"] & 15] = sim.sems[f["imm"] & 15] + 2 & 0xFFFF
        sim.w(f["rd"], sim.sems[f["imm"] & 15])

    def ref_slt(sim, f):
        def s32(v):
            return v - (1 << 32) if v >> 31 else v
        a, b = s32(sim.r(f["rs1"])), s32(sim.r(f["rs2"]))
        sim.w(f["rd"], 2 * int(a < b) + int(b < a))

    def ref_zt(sim, f):
        sim.w(f["rd"], int((sim.r(f["rs1"]) + sim.r(f["rs2"])) & mask != 0))

    ext = {0xF0: ref_zt, 0xF4: ref_stride, 0xF5: ref_base, 0xF6: ref_loop, 0xF7: ref_sem,
           0xF9: ref_agreg,
           0xFA: ref_agreg_rd, 0xFB: ref_agreg_rd, 0xFC: ref_sub_fwd, 0xFD: ref_fwd_rs,
           0xFE: ref_fwd_rs3, 0xF8: ref_semrd2, 0xF3: ref_semrd2, 0xF1: ref_semrd2, 0xF2: ref_slt,
           0xEF: ref_inc_rd, 0xEE: ref_inc2_rd}
    prologue = assemble("li r1, 7\nli r2, 0x1234\nli r3, 40\nli r4, 5\nli r12, 100\n"
                        "li r13, 200\nli r16, 100\nli r17, 200\nli r18, 300\n"
                        "li r19, 400")[:10]
    run = [isa.encode(0xF4, rd=3, rs1=2, imm=1 | 1 << 8),
           isa.encode(0xF4, rd=5, rs1=1, imm=1 | 1 << 8),
           isa.encode(0xF5, rd=6, rs1=1, rs2=2, imm=1 | 1 << 8),
           isa.encode(0xF6, rd=4, rs1=1),
           isa.encode(0xF6, rd=7, rs1=3),
           isa.encode(0xF7, rd=8, rs1=2, imm=9),
           isa.encode(0xF7, rd=9, rs1=4, imm=9),
           isa.encode(0xF9, rd=11, rs1=1, imm=1 | 1 << 8),
           isa.encode(0xFA, rd=12, rs1=1, imm=1 | 1 << 8),
           isa.encode(0xFB, rd=13, rs1=2, imm=1 | 1 << 8),
           isa.encode(0xFC, rd=14, rs1=1, rs2=2),
           isa.encode(0xFC, rd=15, rs1=2, rs2=1),
           isa.encode(0xFD, rd=16, rs1=16, rs2=1),
           isa.encode(0xFD, rd=17, rs1=1, rs2=17),
           isa.encode(0xFE, rd=18, rs1=1, rs2=0, rs3=18),
           isa.encode(0xFE, rd=19, rs1=1, rs2=18, rs3=2),
           isa.encode(0xF8, rd=22, rs1=2, imm=9),
           isa.encode(0xF3, rd=23, rs1=2, imm=9),
           isa.encode(0xF1, rd=28, rs1=2, imm=3),
           isa.encode(0xEF, rd=29, imm=9),
           isa.encode(0xEE, rd=30, imm=9),
           isa.encode(0xEF, rd=31, imm=9),
           isa.encode(0xF2, rd=24, rs1=20, rs2=21),
           isa.encode(0xF2, rd=25, rs1=21, rs2=20),
           isa.encode(0xF2, rd=26, rs1=1, rs2=21),
           isa.encode(0xF2, rd=27, rs1=21, rs2=1),
           isa.encode(0xF0, rd=40, rs1=42, rs2=42),
           isa.encode(0xF0, rd=41, rs1=21, rs2=21),
           isa.encode(0xF0, rd=43, rs1=42, rs2=44),
           isa.encode(0xF0, rd=45, rs1=42, rs2=46)]
    prologue += assemble("li r20, 0x7FFFFFFF\nli r21, 0x80000000\nli r42, 0x8000\n"
                         "li r44, 0xFFFF8000\nli r46, 0xFFFF0000")
    hw, _ = await _check(h, prologue + run + assemble("halt"), "late writes", ext)
    assert hw["err_status"] == 0
    # (r3 = 0x1234 by the first AG_SET routine, r4 = 5 + 6 by the first loop, before the
    # routines that read them)
    assert hw["regs"][3:10] == [0x1234, 5 + 6, 7, 0x1234 + 7, 0x1234 - 1, 3 * 0x1234,
                                3 * 11], \
        f"late writes: registers r3..r9 {hw['regs'][3:10]}"
    assert hw["regs"][11] == 2 * (7 + 5), f"late writes: AGREG read of r11 {hw['regs'][11]}"
    # (the generator's register before each AG_SET is r11, r12: a stale read adds 24, 107;
    # another generator's, r0)
    assert hw["regs"][12:14] == [107, 200 + 0x1234], \
        f"late writes: AGREG reads after AG_SET {hw['regs'][12:14]}"
    assert hw["regs"][14:16] == [0x1234 - 12 + 1, (7 - (0x1234 + 5) + 1) & mask], \
        f"late writes: forwarded subtrahends {hw['regs'][14:16]}"
    # (a stale read gives 107 and 207)
    assert hw["regs"][16:18] == [100 + 1 + 7, 7 + 8], \
        f"late writes: RS1 / RS2 forwarded as rd {hw['regs'][16:18]}"
    # (a stale read gives 307 and 0x1234 + 400)
    assert hw["regs"][18:20] == [8 + 7, 0x1234 + 8], \
        f"late writes: RS3 / RS2P1 forwarded as rd {hw['regs'][18:20]}"
    # (sem 9 is r4 = 11, set by the last 0xF7 run; an ALU result leaking into SEMRD's
    # value gives 2 * (0x1234 + 5 | 11) or 2 * (0x1234 | 0x50 | 11); r28 reads sem 3, 0,
    # beside an SLTU whose result is 1)
    assert hw["regs"][22:24] == [22, 22] and hw["regs"][28] == 0, \
        f"late writes: SEMRD read back {hw['regs'][22:24]}, {hw['regs'][28]}"
    # (sem 9 = 11, then + 1, + 2, + 1; a SEMRD that misses the SEMINC right before it reads
    # one or two less)
    assert hw["regs"][29:32] == [24, 14, 30], \
        f"late writes: SEMRD right after SEMINC {hw['regs'][29:32]}"
    # (0x7FFFFFFF <s 0x80000000 is false: the sign of the wrapped difference says true)
    assert hw["regs"][24:28] == [1, 2, 1, 2], f"late writes: SLT {hw['regs'][24:28]}"
    # (0x10000, 0, 0, 0xFFFF8000: the zero test of a sum whose halves carry)
    assert [hw["regs"][i] for i in (40, 41, 43, 45)] == [1, 0, 0, 1], \
        f"late writes: zero tests {[hw['regs'][i] for i in (40, 41, 43, 45)]}"
    # A register written by the halting micro-instruction, read on the debug port in the
    # first cycle of DONE, while its write is still in W (the debug read port's bypass).
    halt_base = microcode.fused_matmul_act()[1] + 16
    words, _ = microcode.link([u(a=USrc.RS1, b=USrc.CONST, const=100, alu=UAlu.ADD,
                                 dst=UDst.RD, special=USpecial.HALT, **end)], base=halt_base)
    await h.load_microcode(halt_base, words)
    await h.write_map(0xF8, microcode.map_entry(halt_base))
    await h.load_program(prologue + [isa.encode(0xF8, rd=10, rs1=1)])
    await FallingEdge(dut.clk)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    for _ in range(1000):
        if dut.done.value == 1:
            break
        await FallingEdge(dut.clk)
    assert dut.done.value == 1, "the halting routine did not stop the sequencer"
    got = await h.dbg(10)
    assert got == 7 + 100, f"debug read of r10 in DONE's first cycle: {got}, not 107"
    for op in list(routines) + [0xF8]:
        await h.write_map(op, 0)


@cocotb.test()
async def test_micro_word_write_traps(dut):
    """Micro-words that write a register (``dst=RD``) and, in the same word, EMIT a record the
    core finds illegal (``tensor_illegal``/``vector_illegal`` driven high: ``ILLEGAL_FIELD``,
    nothing pushed) or WAIT on a semaphore that nothing outstanding can raise (held two
    cycles, then ``DEADLOCK``): the register write is killed by the ``wk_*`` terms in every
    cycle, so the register keeps its value."""
    h, _ = await _setup(dut, 8)
    u = microcode.u
    end = microcode.END
    routines = {
        0xF4: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.EMIT, eng=Engine.TENSOR, **end)],
        0xF5: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.EMIT, eng=Engine.VECTOR, **end)],
        # waits for sem[imm] >= rs1 and writes rs1 to rd
        0xF6: [u(a=USrc.RS1, dst=UDst.RD, special=USpecial.WAIT, **end)],
    }
    await _load_routines(h, routines)
    ext = {0xF4: lambda sim, f: sim._trap(ErrorBit.ILLEGAL_FIELD),
           0xF5: lambda sim, f: sim._trap(ErrorBit.ILLEGAL_FIELD),
           0xF6: lambda sim, f: sim._trap(ErrorBit.DEADLOCK)}
    prologue = assemble("li r1, 7\nli r3, 40\nsemset 5, 3")[:3]
    for op, illegal, what in ((0xF4, "tensor_illegal", "illegal tensor record"),
                              (0xF5, "vector_illegal", "illegal vector record"),
                              (0xF6, None, "deadlocked wait")):
        if illegal:
            getattr(dut, illegal).value = 1
        words = prologue + [isa.encode(op, rd=3, rs1=1, imm=5)] + assemble("halt")
        hw, _ = await _check(h, words, what, ext)
        if illegal:
            getattr(dut, illegal).value = 0
        bit = ErrorBit.DEADLOCK if illegal is None else ErrorBit.ILLEGAL_FIELD
        assert hw["err_status"] == 1 << bit and hw["err_pc"] == len(prologue), \
            f"{what}: errors {hw['err_status']:#x} at pc {hw['err_pc']}"
        assert hw["regs"][3] == 40, f"{what}: r3 written ({hw['regs'][3]}) by a trapping word"
        assert not any(h.log[e] for e in Engine), f"{what}: a record was pushed"
        dut._log.info("%s: errors %#x, r3 = %d", what, hw["err_status"], hw["regs"][3])
    for op in routines:
        await h.write_map(op, 0)


@cocotb.test()
async def test_loop_more_counts(dut):
    """LOOP_MORE (``rem > 1`` at the loop stack's top) for counts at the edges of its registered
    flags (``rem_more``/``ls_more``: the count's bits 1..15 and 16..31 tested apart): 0, 1, 2,
    3, 2**16 and neighbours, 2**31, 2**32 - 1 and random counts; read by the micro-word right
    after the LOOP_PUSH, after each of two LOOP_STEPs (0 wraps to 2**32 - 1), and after a
    LOOP_POP that uncovers an outer level (as pushed, and stepped before the inner push).
    Pushes and steps held a cycle in X (a BRANCH on Z in the same micro-word) check that the
    loop stack's entries, written while X holds, end as the micro-instruction left them.
    Run-time microcode: each LOOP_MORE answer is shifted into ``rd``."""
    h, rng = await _setup(dut, 9)
    u = microcode.u
    end = microcode.END

    def probe(n):        # rd = 2 * rd + LOOP_MORE
        return [u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target=f"lm_y{n}"),
                u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD, seq=USeq.JUMP,
                  target=f"lm_n{n}"),
                f"lm_y{n}:",
                u(a=USrc.RD, b=USrc.RD, alu=UAlu.ADD, dst=UDst.RD),
                u(a=USrc.RD, b=USrc.CONST, const=1, alu=UAlu.ADD, dst=UDst.RD),
                f"lm_n{n}:"]

    def held(n, **kw):   # a micro-word that holds one cycle in X: a BRANCH on Z to its successor
        return [u(seq=USeq.BRANCH, cond=UCond.Z, target=f"lm_h{n}", **kw), f"lm_h{n}:"]

    # (a LOOP_STEP's new PC is the instruction after the LOOP_PUSH's: this one's successor)
    routines = {
        # push rs1; probe; step; probe; step; probe; pop (the push and the second step held)
        0xF4: [*held(0, a=USrc.RS1, special=USpecial.LOOP_PUSH), *probe(0),
               u(special=USpecial.LOOP_STEP), *probe(1),
               *held(1, special=USpecial.LOOP_STEP), *probe(2),
               u(special=USpecial.LOOP_POP, **end)],
        # push rs1; push rs2; pop; probe (the outer level); step; push rs2; probe; pop;
        # probe (the stepped outer level); pop
        0xF5: [u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
               *held(2, a=USrc.RS2, special=USpecial.LOOP_PUSH), u(special=USpecial.LOOP_POP),
               *probe(5), *held(3, special=USpecial.LOOP_STEP),
               u(a=USrc.RS2, special=USpecial.LOOP_PUSH), *probe(3),
               u(special=USpecial.LOOP_POP), *probe(4),
               u(special=USpecial.LOOP_POP, **end)],
    }
    await _load_routines(h, routines)

    def more(rem):
        return int(rem > 1)

    def ref_steps(sim, f):
        c, v = sim.r(f["rs1"]), sim.r(f["rd"])
        for k in range(3):
            v = (2 * v + more((c - k) & 0xFFFFFFFF)) & 0xFFFFFFFF
        sim.w(f["rd"], v)

    def ref_nested(sim, f):
        v = sim.r(f["rd"])
        for c in (sim.r(f["rs1"]), sim.r(f["rs2"]), (sim.r(f["rs1"]) - 1) & 0xFFFFFFFF):
            v = (2 * v + more(c)) & 0xFFFFFFFF
        sim.w(f["rd"], v)

    ext = {0xF4: ref_steps, 0xF5: ref_nested}
    edges = [0, 1, 2, 3, 4, 0xFFFF, 0x10000, 0x10001, 0x10002, 0x10003, 0x8000_0000,
             0x8000_0001, 0xFFFF_FFFF, 0xFFFF_FFFE]
    counts = edges + [rng.getrandbits(rng.choice([2, 17, 32])) for _ in range(6)]
    words = []
    for i, c in enumerate(counts):
        outer = counts[(i + 1) % len(counts)]
        words += assemble(f"li r1, {c}\nli r3, 0\nli r4, {outer}\nli r5, 0")
        words += [isa.encode(0xF4, rd=3, rs1=1), isa.encode(0xF5, rd=5, rs1=4, rs2=1)]
        # every answer kept: r10.. and r40..
        words += assemble(f"add r{10 + i}, r3, r0\nadd r{40 + i}, r5, r0")
    hw, _ = await _check(h, words + assemble("halt"), "loop_more counts", ext)
    assert hw["err_status"] == 0, f"errors {hw['err_status']:#x}"
    dut._log.info("LOOP_MORE over %d counts: r3 = %#x, r5 = %#x", len(counts),
                  hw["regs"][3], hw["regs"][5])
    for op in routines:
        await h.write_map(op, 0)


@cocotb.test()
async def test_trap_with_records_queued(dut):
    """Regression of the random-program hang (``HANG_REGRESSIONS``): the predecessor traps
    while a slow VECTOR engine still has records queued; the engines take them after ``done``
    and their completions must reach the sequencer before the next program starts, or its
    first BARRIER waits forever. Then the hung program itself, hardware vs reference."""
    h, rng = await _setup(dut, 6)
    for seed in HANG_REGRESSIONS:
        h.ready_p = {e: rng.choice([0.2, 0.6, 1.0]) for e in Engine}
        h.latency = {e: rng.choice([(1, 3), (1, 20), (10, 60)]) for e in Engine}
        # A slow VECTOR engine: records wait in the queue, and one taken after ``done`` completes
        # only after the next program has started (where the old harness lost it).
        h.ready_period[Engine.VECTOR] = 64
        h.latency[Engine.VECTOR] = (30, 40)
        _, ref = await _check(h, assemble(random_program(seed - 1)), f"program seed {seed - 1}")
        assert ref.error and ref.trace[Engine.VECTOR], "the predecessor must trap after VECTOR"
        assert h.accepted_at[Engine.VECTOR][-1] > h.done_cycle, \
            "no VECTOR record was taken after the predecessor trapped"
        h.ready_period[Engine.VECTOR] = None
        h.latency[Engine.VECTOR] = rng.choice([(1, 3), (1, 20), (10, 60)])
        hw, ref = await _check(h, assemble(random_program(seed)), f"program seed {seed}")
        assert ref.error == 0 and hw["err_status"] == 0
        dut._log.info("program seed %d: %d instructions, %d cycles", seed, hw["retired"],
                      hw["cycles"])


@cocotb.test(skip=not dut_config().get("check_rows"))
async def test_record_check_timing(dut):
    """The core's record check (``NeuronCore._record_check``, inside the DUT: ``_checked_dut``)
    on records whose checked slots are written right before the EMIT (run-time microcode):
    the sequencer registers the check's verdict, on the record as it will be in the next
    cycle, so an EMIT right after a slot write (held one cycle) and one a micro-instruction
    later are checked on the value just written (the slot's terms still in W); a second EMIT
    right after the first is checked on the blank record (``blank_bad``: a blank TENSOR record
    is illegal, n = 0), one held two cycles in X (a BRANCH on Z) on its own record in each;
    a slot written illegal and then legal before the EMIT is legal, and the reverse illegal.
    Hardware against ``RefSim(check=True)``, trap or records."""
    from rtl.core.top import NeuronCore
    h, rng = await _setup(dut, 10)
    rows = dut_config()["check_rows"]
    core = NeuronCore(rows=rows)
    u = microcode.u
    end = microcode.END
    T, V = Engine.TENSOR, Engine.VECTOR

    def slot(src, eng, s):
        return u(a=src, dst=UDst.SLOT, eng=eng, slot=s)

    def emit(eng, **kw):
        return u(special=USpecial.EMIT, eng=eng, **kw)

    nop = u()
    # TENSOR slot 3: k, m, fmt (rs1); slot 2: psum_addr, n (rs2); rs3 a second slot-3 value
    routines = {
        0xF4: [slot(USrc.RS1, T, 3), slot(USrc.RS2, T, 2), emit(T, **end)],
        0xF5: [slot(USrc.RS2, T, 2), slot(USrc.RS1, T, 3), nop, emit(T, **end)],
        0xF6: [slot(USrc.RS1, T, 3), slot(USrc.RS2, T, 2), emit(T), emit(T, **end)],
        0xF7: [slot(USrc.RS2, T, 2), slot(USrc.RS3, T, 3), slot(USrc.RS1, T, 3),
               emit(T, **end)],
        0xF8: [slot(USrc.RS1, V, 0), emit(V), slot(USrc.RS2, V, 0), nop, emit(V),
               emit(V, **end)],
        # an EMIT held two cycles (a BRANCH on Z in the same micro-word) keeps its verdict
        0xF9: [slot(USrc.RS1, T, 3), slot(USrc.RS2, T, 2), nop,
               emit(T, seq=USeq.BRANCH, cond=UCond.Z, target="rc_held"), "rc_held:",
               u(**end)],
    }
    await _load_routines(h, routines)

    def tensor(sim, f, s3, s2, count=1):
        for _ in range(count):
            sim.issue(T, isa.unpack(isa.TENSOR_RECORD, s3 << 96 | s2 << 64))
            s3 = s2 = 0

    def vector(sim, *slot0s):
        for v in slot0s:
            sim.issue(V, isa.unpack(isa.VECTOR_RECORD, v))

    ext = {0xF4: lambda sim, f: tensor(sim, f, sim.r(f["rs1"]), sim.r(f["rs2"])),
           0xF5: lambda sim, f: tensor(sim, f, sim.r(f["rs1"]), sim.r(f["rs2"])),
           0xF6: lambda sim, f: tensor(sim, f, sim.r(f["rs1"]), sim.r(f["rs2"]), 2),
           0xF7: lambda sim, f: tensor(sim, f, sim.r(f["rs1"]), sim.r(f["rs2"])),
           0xF8: lambda sim, f: vector(sim, sim.r(f["rs1"]), sim.r(f["rs2"]), 0),
           0xF9: lambda sim, f: tensor(sim, f, sim.r(f["rs1"]), sim.r(f["rs2"]))}

    def slot3(k, m, fmt):
        return isa.pack(isa.TENSOR_RECORD, k=k, m=m, fmt=fmt) >> 96

    def slot2(n):
        return isa.pack(isa.TENSOR_RECORD, n=n, psum_addr=rng.getrandbits(16)) >> 64

    good3, bad3 = slot3(rows, rows, 1), slot3(rows + 1, 1, 1)
    vec_good = isa.pack(isa.VECTOR_RECORD, op=isa.VecOp.TS, alu=1)
    vec_bad = isa.pack(isa.VECTOR_RECORD, op=isa.VecOp.TS, alu=isa.VEC_ALU_MAX + 1)
    cases = [(0xF4, good3, slot2(5), 0), (0xF4, good3, slot2(0), 0),
             (0xF4, bad3, slot2(5), 0), (0xF5, good3, slot2(3), 0),
             (0xF5, slot3(1, 0, 6), slot2(3), 0), (0xF5, good3, slot2(0), 0),
             (0xF6, good3, slot2(7), 0), (0xF7, good3, slot2(2), bad3),
             (0xF7, bad3, slot2(2), good3), (0xF8, vec_good, vec_good, 0),
             (0xF8, vec_good, vec_bad, 0), (0xF8, vec_bad, vec_good, 0),
             (0xF9, good3, slot2(4), 0), (0xF9, bad3, slot2(4), 0)]
    edges = [0, 1, rows, rows + 1, 255]
    for _ in range(12):
        op = rng.choice([0xF4, 0xF5, 0xF6, 0xF7, 0xF9])
        cases.append((op, slot3(rng.choice(edges), rng.choice(edges), rng.randrange(8)),
                      slot2(rng.choice([0, 1, 0xFFFF])),
                      slot3(rng.choice(edges), rng.choice(edges), rng.randrange(8))))
    traps = 0
    for i, (op, r1, r2, r3) in enumerate(cases):
        h.ready_p = {e: rng.choice([0.2, 1.0]) for e in Engine}
        words = assemble(f"li r1, {r1}\nli r2, {r2}\nli r3, {r3}")
        words += [isa.encode(op, rs1=1, rs2=2, rs3=3)] + assemble("halt")
        ref = RefSim(words, pmem_depth=dut_config()["pmem_depth"], execute=False,
                     extensions=ext, check=True, partitions=rows, cols=rows,
                     formats=core.formats).run(max_steps=200_000)
        await h.run(words)
        hw = await h.state()
        compare(h, hw, ref, f"case {i} (op {op:#x}, {r1:#x}, {r2:#x}, {r3:#x})")
        traps += bool(ref.error)
    assert 0 < traps < len(cases)
    dut._log.info("record check: %d cases, %d trapped (ILLEGAL_FIELD), as RefSim(check=True)",
                  len(cases), traps)
    for op in routines:
        await h.write_map(op, 0)


@cocotb.test()
async def test_random_programs(dut):
    """Differential test: random valid programs, hardware vs reference simulator."""
    h, rng = await _setup(dut, 5)
    n = int(os.environ.get("SEQ_RANDOM_N", "25"))
    base = rng.randrange(1 << 30)
    seeds = [base + i for i in range(n)]
    if os.environ.get("SEQ_PROGRAM_SEED"):
        # Replay: only these program seeds (comma-separated), engine patterns from the rng.
        seeds = [int(x) for x in os.environ["SEQ_PROGRAM_SEED"].split(",")]
        n = len(seeds)
    errors = flagged = claims = 0
    for seed in seeds:
        h.ready_p = {e: rng.choice([0.2, 0.6, 1.0]) for e in Engine}
        h.latency = {e: rng.choice([(1, 3), (1, 20), (10, 60)]) for e in Engine}
        words = assemble(random_program(seed))
        try:
            hw, ref = await _check(h, words, f"random program seed {seed}")
        except AssertionError:
            dut._log.error("mismatch on random program seed %d", seed)
            raise
        errors += bool(ref.error)
        flagged += bool(ref.races)
        claims += ref.order_claims
    # The random programs are not race-free (their registers address memory at random) and
    # need not be: these engine models have no memory. The race checker runs on each, and
    # every ordering it claims is checked against the hardware's timing (``check_order``);
    # about 7 % of the programs have a race (1000-program sweep), so a long sweep must flag
    # some, or the checker has gone blind.
    dut._log.info("RANDOM PROGRAMS: %d run, 0 mismatches (%d ended in a trap), %d flagged by "
                  "sim.races, %d of its ordering claims held on the hardware, base seed %d",
                  n, errors, flagged, claims, base)
    assert claims > 0, "the race checker claimed no ordering in the whole sweep"
    if n >= 200:
        assert flagged > 0, f"the race checker flagged none of {n} random programs"


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    def _dut(pmem_depth):
        from rtl.control.sequencer import Sequencer
        return Sequencer(pmem_depth=pmem_depth)

    def _seed():
        """A fresh seed per run, printed (pytest shows it on failure); COCOTB_RANDOM_SEED
        replays one."""
        seed = int(os.environ.get("COCOTB_RANDOM_SEED") or random.SystemRandom().randrange(2**31))
        print(f"COCOTB_RANDOM_SEED={seed}")
        return seed

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_sequencer(simulator):
        run_cocotb(lambda: _dut(256), name="sequencer", config={"pmem_depth": 256},
                   test_module="cocotb_tests.test_sequencer", simulator=simulator,
                   seed=_seed())

    def _checked_dut(pmem_depth, rows):
        """The sequencer with the core's record check (``NeuronCore._record_check`` of a
        ``rows`` x ``rows`` core, all formats) closing its ``*_terms`` -> ``*_illegal`` loop;
        its other ports are the sequencer's."""
        from amaranth.hdl import Module
        from amaranth.lib import wiring

        from rtl.control.sequencer import Sequencer
        from rtl.core.top import NeuronCore

        loop = {f"{n}_{p}" for n in ("tensor", "vector")
                for p in ("slot_terms", "blank_terms", "terms", "illegal")}

        class Checked(wiring.Component):
            def __init__(self):
                self._core = NeuronCore(rows=rows, pmem_depth=pmem_depth)
                self._core._MustUse__silence = True      # only its record check is used
                self._seq = Sequencer(pmem_depth=pmem_depth,
                                      check_terms=NeuronCore._RECORD_TERMS)
                super().__init__({n: mb for n, mb in self._seq.signature.members.items()
                                  if n not in loop})

            def elaborate(self, platform):
                m = Module()
                m.submodules.seq = seq = self._seq
                self._core._record_check(m, seq)
                for name, member in self.signature.members.items():
                    if not member.is_port:
                        wiring.connect(m, wiring.flipped(getattr(self, name)),
                                       getattr(seq, name))
                    elif member.flow == wiring.In:
                        m.d.comb += getattr(seq, name).eq(getattr(self, name))
                    else:
                        m.d.comb += getattr(self, name).eq(getattr(seq, name))
                return m

        return Checked()

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_sequencer_record_check(simulator):
        run_cocotb(lambda: _checked_dut(256, 2), name="sequencer_checked",
                   config={"pmem_depth": 256, "check_rows": 2},
                   test_module="cocotb_tests.test_sequencer", simulator=simulator,
                   testcase="test_record_check_timing", seed=_seed())

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_sequencer_random_long(simulator):
        run_cocotb(lambda: _dut(256), name="sequencer", config={"pmem_depth": 256},
                   test_module="cocotb_tests.test_sequencer", simulator=simulator,
                   testcase="test_random_programs", seed=_seed(),
                   extra_env={"SEQ_RANDOM_N": os.environ.get("SEQ_RANDOM_N", "1000")})
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
