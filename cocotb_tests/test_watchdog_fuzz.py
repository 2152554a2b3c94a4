"""Protection and fault handling of the whole core (issue 11), through the host driver:

* ``test_faults``: each fault injected in turn (DMA window violation, AXI read error response,
  watchdog timeout on an endless loop, illegal instruction, a semaphore wait that can never
  complete, configuration lock while running), each ending in its documented error (a Python
  exception naming it) or refusal, and after each one a correct program runs and its result
  matches the DMA golden model.
* ``test_fuzz``: random bytes as programs and random valid-but-hostile programs (addresses
  inside and outside the windows, huge loop counts, waits that never complete, deep
  recursion, wild jumps). Every run must end in DONE or a documented error within the watchdog
  limit (plus the drain time), and no access may touch external memory outside its windows:
  the AXI RAM model logs every access and the bytes outside the writable windows are compared
  with their initial contents at the end. A correct program is re-run every few fuzz programs.

The count of fuzzed programs, hangs and out-of-window accesses is logged ("fuzz summary").
"""

import random

import cocotb

from sim.asm import assemble
from sim.dtypes import Format
from sim.errors import ErrorCode
from sim.memmap import DMA_PERM_READ, DMA_PERM_WRITE
from cocotb_tests.common.tb import random_seed
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.axi_transport import settle_comb

MEM_SIZE = 1 << 16
#: (base, limit, perm) of the DMA windows the host opens for every test program.
WINDOWS = [(0x1000, 0x1FFF, DMA_PERM_READ | DMA_PERM_WRITE),
           (0x3000, 0x37FF, DMA_PERM_WRITE),
           (0x5000, 0x50FF, DMA_PERM_READ)]

CORRECT = """
    li r1, 0x10010          ; n0 = 16, n1 = 1
    li r2, 4                ; ext_stride0: FP32
    li r3, 0
    li r4, 64               ; ext_part_stride
    li r10, 0x1000
    li r11, 0
    dma_ld r1, r10, r11, part_start=0, part_count=2, fmt=0, sem=0, sem_en=1
    waiti 0, 1
    li r12, {dst}
    dma_st r1, r12, r11, part_start=0, part_count=2, fmt=0, sem=1, sem_en=1
    waiti 1, 1
    halt
"""


async def _env(dut, **kwargs):
    from cocotb_tests.common.core_env import CoreEnv
    dut.rst.value = 1
    await settle_comb(dut)
    env = CoreEnv(dut, seed=random_seed(), mem_size=MEM_SIZE, **kwargs)
    await env.reset()
    host = env.host()
    for i, (base, limit, perm) in enumerate(WINDOWS):
        await host.set_window(i, base, limit, read=bool(perm & DMA_PERM_READ),
                              write=bool(perm & DMA_PERM_WRITE))
    return env, host


async def _run(host, words, limit, timeout):
    """Load and run ``words``; return "done", an ErrorCode, or "hang"."""
    from sim.host import AcceleratorError
    await host.clear()
    await host.set_watchdog(limit)
    await host.load_program(words)
    await host.start(0)
    try:
        await host.wait(timeout_cycles=timeout, poll_cycles=50)
        result = "done"
    except AcceleratorError as e:
        result = ErrorCode(e.code) if e.code in set(ErrorCode) else e.code
    except TimeoutError:
        return "hang"
    st = await host.status()
    assert not st["busy"], "core still busy after DONE"
    return result


async def _correct_run(env, host, rng, dst=0x3000):
    """The reference program: 2 x 16 FP32 from window 0 to ``dst``; compare with the model."""
    src = bytes(rng.getrandbits(8) for _ in range(128))
    env.write_mem(0x1000, src)
    env.write_mem(dst, bytes(128))
    result = await _run(host, assemble(CORRECT.format(dst=dst)), 20000, 20000)
    assert result == "done", result
    # The DMA golden model of the two records: partition p's 16 elements at 0x1000 + 64p are
    # copied to dst + 64p (load then store of the same SBUF words).
    assert env.read_mem(dst, 128) == src, "correct program after a fault: wrong result"


def _outside_windows(accesses):
    bad = []
    for kind, addr, length in accesses:
        need = DMA_PERM_READ if kind == "r" else DMA_PERM_WRITE
        if not any(perm & need and base <= addr and addr + length - 1 <= limit
                   for base, limit, perm in WINDOWS):
            bad.append((kind, hex(addr), length))
    return bad


@cocotb.test()
async def test_faults(dut):
    from sim.host import (BusError, DmaWindowViolation, AxiReadError, WatchdogTimeout,
                          AcceleratorError)
    rng = random.Random(random_seed())
    env, host = await _env(dut, latency=(0, 2), pause=0.2)
    await _correct_run(env, host, rng)

    # 1. Window violation: a load from 0x2000 (no window): error, address, and no bus access.
    n_acc = len(env.accesses)
    prog = assemble(CORRECT.format(dst=0x3000).replace("li r10, 0x1000", "li r10, 0x2000"))
    assert await _run(host, prog, 20000, 20000) == ErrorCode.DMA_WINDOW
    err = await host.error()
    assert isinstance(err, DmaWindowViolation) and err.address == 0x2000, err
    assert len(env.accesses) == n_acc, "a refused transfer touched the bus"
    # A store into the read-only window is refused too.
    prog = assemble(CORRECT.format(dst=0x5000))
    assert await _run(host, prog, 20000, 20000) == ErrorCode.DMA_WINDOW
    assert (await host.error()).address == 0x5000
    await _correct_run(env, host, rng)

    # 2. AXI error response on a read.
    env.error_ranges = [(0x1040, 0x1044)]
    assert await _run(host, assemble(CORRECT.format(dst=0x3000)), 20000, 20000) == \
        ErrorCode.DMA_AXI_READ
    err = await host.error()
    assert isinstance(err, AxiReadError) and err.address == 0x1040 and err.info == 2, err
    env.error_ranges = []
    await _correct_run(env, host, rng)

    # 3. Watchdog: an endless loop is aborted after the limit.
    prog = assemble("top: jmp top")
    assert await _run(host, prog, 500, 5000) == ErrorCode.WATCHDOG
    err = await host.error()
    assert isinstance(err, WatchdogTimeout) and err.info == 500, err
    await _correct_run(env, host, rng)

    # 4. Illegal instruction (an opcode left free for run-time microcode).
    prog = assemble("nop\nnop") + [0xF3] + assemble("halt")
    assert await _run(host, prog, 5000, 5000) == ErrorCode.ILLEGAL_INSTRUCTION
    err = await host.error()
    assert err.address == 2, err
    await _correct_run(env, host, rng)

    # 5. A semaphore wait that can never complete: the deadlock trap or the watchdog.
    r = await _run(host, assemble("waiti 3, 5\nhalt"), 3000, 6000)
    assert r in (ErrorCode.SEMAPHORE, ErrorCode.DEADLOCK, ErrorCode.WATCHDOG), r
    await _correct_run(env, host, rng)

    # 6. Configuration lock while a program runs: refused, counted, program unaffected.
    await host.clear()
    await host.clear_counters()
    await host.set_watchdog(3000)
    await host.load_program(assemble("top: jmp top"))
    await host.start(0)
    refused = 0
    for action in (lambda: host.set_seed(1), lambda: host.load_program(assemble("halt")),
                   lambda: host.set_window(0, 0, 0xFFFFFFFF), lambda: host.load_lut([1]),
                   lambda: host.load_microcode([0, 0])):
        try:
            await action()
            raise AssertionError("a locked write was accepted while busy")
        except BusError:
            refused += 1
    counters = await host.counters()
    assert counters["lock_refused"] >= refused, counters
    assert (await host.status())["busy"]
    try:
        await host.wait(timeout_cycles=8000, poll_cycles=100)
    except AcceleratorError as e:
        assert e.code == ErrorCode.WATCHDOG
    await _correct_run(env, host, rng)
    assert not _outside_windows(env.accesses)


def _hostile_program(rng):
    """A random program built from hostile but valid pieces."""
    lines = []
    for piece in range(rng.randrange(1, 5)):
        kind = rng.randrange(6)
        if kind <= 1:
            fmt = rng.choice(list(Format))
            addr = rng.choice([0x1000, 0x1F80, 0x2000, 0x3000, 0x37F0, 0x5000, 0x50F0, 0x0,
                               0xFFFFFFF0, rng.randrange(0, MEM_SIZE)])
            addr &= ~3
            n0 = rng.randrange(1, 17)
            op = rng.choice(["dma_ld", "dma_st"])
            sem = rng.randrange(4)
            lines += [
                f"li r1, {n0 | (1 << 16)}", f"li r2, {rng.choice([1, 2, 4, 8, -4])}",
                "li r3, 0", f"li r4, {rng.choice([0, 16, 64, 256, -64])}",
                f"li r10, {addr}", f"li r11, {rng.randrange(16)}",
                f"{op} r1, r10, r11, part_start=0, part_count={rng.randrange(1, 3)}, "
                f"fmt={int(fmt)}, sem={sem}, sem_en=1",
            ]
            if rng.random() < 0.5:
                lines.append(f"waiti {sem}, 1")
        elif kind == 2:
            lines += [f"li r5, {rng.choice([0x7FFFFFFF, 100000, 3])}", f"loop r5, L{piece}",
                      "nop", f"L{piece}: endloop"]
        elif kind == 3:
            lines.append(f"waiti {rng.randrange(16)}, {rng.randrange(1, 9)}")
        elif kind == 4:
            lines.append(f"R{piece}: call R{piece}")
        else:
            lines.append(f"jmp {rng.choice([1000, 63, 0x7FFF])}")
    lines.append("halt")
    return assemble("\n".join(lines))


def _random_ops(rng, n):
    """Instructions with valid opcodes and random fields (registers, immediates, options)."""
    from sim import isa
    ops = [op for op in isa.Opcode]
    words = []
    for _ in range(n):
        imm = rng.choice([rng.getrandbits(32), rng.randrange(64), rng.randrange(0x1000, 0x6000),
                          0xFFFFFFFF])
        words.append(isa.encode(rng.choice(ops), rng.randrange(64), rng.randrange(64),
                                rng.randrange(64), rng.randrange(64), imm))
    return words


@cocotb.test()
async def test_fuzz(dut):
    rng = random.Random(random_seed() + 1)
    dut._log.info("seed %d", random_seed() + 1)
    env, host = await _env(dut, latency=(0, 2), pause=0.2)
    init = bytes(rng.getrandbits(8) for _ in range(MEM_SIZE))
    env.write_mem(0, init)
    limit = int(dut_config().get("watchdog", 1500))
    n = int(dut_config().get("programs", 24))
    pmem = dut_config()["pmem_depth"]
    outcomes = {}
    hangs = 0
    for k in range(n):
        if k % 3 == 0:
            words = [rng.getrandbits(64) for _ in range(rng.randrange(1, pmem + 1))]
            kind = "random bytes"
        elif k % 3 == 1:
            words = _random_ops(rng, rng.randrange(1, pmem + 1))
            kind = "random opcodes"
        else:
            words = _hostile_program(rng)[:pmem]
            kind = "hostile"
        result = await _run(host, words, limit, 3 * limit + 2000)
        dut._log.info("fuzz %d (%s, %d instructions): %s", k, kind, len(words),
                      getattr(result, "name", result))
        if result == "hang":
            hangs += 1
            await host.abort()
            await env.cycles(2000)
        else:
            assert result == "done" or isinstance(result, ErrorCode), result
        name = result.name if isinstance(result, ErrorCode) else str(result)
        outcomes[name] = outcomes.get(name, 0) + 1
        if k % 6 == 5:
            await _correct_run(env, host, rng, dst=0x3400)
    bad = _outside_windows(env.accesses)
    # Bytes outside the writable windows are untouched.
    final = env.read_mem(0, MEM_SIZE)
    untouched = [(0, 0x1000), (0x2000, 0x3000), (0x3800, MEM_SIZE)]
    changed = sum(final[lo:hi] != init[lo:hi] for lo, hi in untouched)
    dut._log.info("fuzz summary: %d programs, %d hangs, %d out-of-window accesses, "
                  "%d regions changed outside windows, outcomes %s", n, hangs, len(bad),
                  changed, outcomes)
    assert hangs == 0 and not bad and changed == 0, (hangs, bad[:5], changed)


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CORE = dict(rows=2, cols=2, sbuf_depth=32, psum_depth=16, pmem_depth=64, lut_entries=8,
                dma_windows=4)

    def _core():
        from rtl.core.top import NeuronCore
        return NeuronCore(formats=(Format.INT8,), **CORE)

    # Icarus by default; Verilator (its build is most of the run) in the long set, beside
    # test_core_fuzz_long on both simulators.
    @pytest.mark.parametrize("simulator", [
        "icarus", pytest.param("verilator", marks=pytest.mark.long)])
    def test_core_protection(simulator):
        run_cocotb(_core, name="core_protection", config=dict(CORE, programs=12),
                   test_module="cocotb_tests.test_watchdog_fuzz", simulator=simulator)

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_core_fuzz_long(simulator):
        run_cocotb(_core, name="core_protection", config=dict(CORE, programs=300),
                   test_module="cocotb_tests.test_watchdog_fuzz", simulator=simulator,
                   testcase="test_fuzz")
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
