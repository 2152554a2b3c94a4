"""Whole-core random-program differential fuzz: the fast backend against the reference
simulator.

    record = fastsim.fuzz.run(CoreConfig(rows=2, formats=("bf16",)), seed=1, count=500)
    record["mismatches"]                  # [] when every program agreed

A program is the sequencer's random program (``cocotb_tests/test_sequencer_progs.py``:
ALU, branches, nested loops, calls, affine generators, semaphores, deterministic errors)
with every engine record replaced by a *valid* one (:func:`core_program`): DMA loads and
stores of FP32 rows inside the fuzz region of external memory, matmuls of the core's first
format within the array, and vector COPY / TT add between SBUF and PSUM, each keeping the
semaphore options of the record it replaces. The reference simulator has no DMA protection
model, so records stay inside it; everything else is random.

Compared per program: the error (code and address, from the reference simulator's error
bits through ``sim.errors.SEQUENCER_ERROR_MAP``), for programs without an error the
retired-instruction count (``PERF_INSTRET``) and, when moreover the reference simulator's
race check finds no unordered pair of records (the result then does not depend on engine
timing), the whole fuzz region. (An error aborts the records in flight, so what they wrote
depends on timing.)

SBUF, PSUM and the external memory keep their contents from one program to the next (START
and reset clear neither), so each reference run starts from the previous one's final SBUF and
PSUM. Before the first program, and after a program whose final state depends on timing (a
race, an error that aborted records in flight, a hang), the scrub image (:func:`scrub_image`)
zeroes SBUF (a DMA load of the zeros it writes to external memory at :data:`ZEROS`) and PSUM
(a matmul of those zeros) on the core, and the next reference run starts from zeros again.

:func:`run` is a pure function of its arguments (a JSON-able record), so a sweep can split a
long fuzz into (seed, count) jobs.
"""

import random
import re
import time

import numpy as np

from sim.asm import assemble
from sim.config import CoreConfig, check_int
from sim.errors import SEQUENCER_ERROR_MAP, ErrorCode
from sim.image import Image
from sim.isa import ErrorBit

__all__ = ["run", "core_program", "scrub_program", "scrub_image", "REGION", "ZEROS"]

#: External memory the programs use: (base, bytes); filled with random bytes per program.
REGION = (0x0, 0x4000)
#: External memory no fuzz program touches: the scrub image writes zeros there (other images
#: may have left data) and loads them into SBUF.
ZEROS = 0x10000
_ENGINE = re.compile(r"^\s*(dma_ld|dma_st|matmul|act|tt|ts|reduce|copy|table_ld|seed_ld|"
                     r"acc_rd)\b")
_SEM = re.compile(r"sem=(\d+), sem_en=(\d)")


def _li(reg, value):
    return f"li r{reg}, {int(value) & 0xFFFFFFFF:#x}"


def _record(rng, config, sem):
    """Lines of one valid engine record (operand registers r52..r63 set just before it)."""
    P, C = config.rows, config.cols
    opt = f"sem={sem[0]}, sem_en={sem[1]}"
    kind = rng.choice(["dma_ld", "dma_ld", "dma_st", "matmul", "copy", "tt"])
    if kind.startswith("dma"):
        n0, n1 = rng.randrange(1, 9), rng.randrange(1, 3)
        ps = rng.randrange(P)
        pc = rng.randrange(1, P - ps + 1)
        s0 = rng.choice([4, 8])
        s1 = n0 * s0 + rng.choice([0, 4, 16])
        sp = n1 * s1 + rng.choice([0, 4, 64])
        ext = 4 * rng.randrange(REGION[0] // 4, (REGION[0] + REGION[1] // 2) // 4)
        sb = rng.randrange(config.sbuf_depth - n0 * n1 + 1)
        return [_li(60, n0 | n1 << 16), _li(61, s0), _li(62, s1), _li(63, sp), _li(58, ext),
                _li(59, sb), f"{kind} r60, r58, r59, part_start={ps}, part_count={pc}, "
                f"fmt=fp32, {opt}"]
    n = rng.randrange(1, 9)
    if kind == "matmul":
        k, m = rng.randrange(1, P + 1), rng.randrange(1, C + 1)
        fmt = config.formats[0].name.lower()
        return [_li(57, rng.randrange(config.psum_depth - n + 1)),
                _li(58, rng.randrange(config.sbuf_depth - m + 1)),
                _li(59, rng.randrange(config.sbuf_depth - n + 1)), _li(56, n),
                f"matmul r57, r58, r59, r56, k={k}, m={m}, fmt={fmt}, "
                f"accumulate={rng.randrange(2)}, {opt}"]
    a_space = rng.choice(["sbuf", "psum"])
    a_depth = config.psum_depth if a_space == "psum" else config.sbuf_depth
    lines = [_li(57, rng.randrange(config.sbuf_depth - n + 1)),
             _li(58, rng.randrange(a_depth - n + 1)),
             _li(59, rng.randrange(config.sbuf_depth - n + 1)), _li(56, n)]
    if kind == "copy":
        return lines + [f"copy r57, r58, r0, r56, a_space={a_space}, in_fmt=fp32, "
                        f"out_fmt=fp32, {opt}"]
    return lines + [f"tt r57, r58, r59, r56, alu=add, a_space={a_space}, b_space=sbuf, "
                    f"in_fmt=fp32, out_fmt=fp32, {opt}"]


def core_program(seed, config):
    """Assembly text of the whole-core random program ``seed`` for ``config``."""
    from cocotb_tests.test_sequencer_progs import random_program
    rng = random.Random(seed ^ 0x5EED)
    out = []
    for line in random_program(seed).splitlines():
        if _ENGINE.match(line):
            m = _SEM.search(line)
            sem = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            out += _record(rng, config, sem)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def scrub_program(config):
    """Assembly text zeroing SBUF (DMA load of zeros) and PSUM (a matmul of those zeros)."""
    P, C = config.rows, config.cols
    fmt = config.formats[0].name.lower()
    return "\n".join([
        _li(60, config.sbuf_depth | 1 << 16), _li(61, 4), _li(62, 0), _li(63, 0),
        _li(58, ZEROS), _li(59, 0),
        f"dma_ld r60, r58, r59, part_start=0, part_count={P}, fmt=fp32, sem=0, sem_en=1",
        "waiti 0, 1", _li(57, 0), _li(56, config.psum_depth),
        f"matmul r57, r59, r59, r56, k={P}, m={C}, fmt={fmt}, accumulate=0, sem=1, sem_en=1",
        "waiti 1, 1", "halt"]) + "\n"


def scrub_image(config):
    """The :func:`scrub_program` as an Image that also writes the zeros it loads (external
    memory at :data:`ZEROS` holds whatever an earlier image left there)."""
    return Image(program=assemble(scrub_program(config)),
                 memory=[(ZEROS, bytes(4 * config.sbuf_depth))], max_cycles=1_000_000)


def _expected_error(ref):
    """(ErrorCode, address) the core reports for the reference simulator's error bits."""
    if not ref.error:
        return None
    bits = [b for b in ErrorBit if ref.error >> int(b) & 1]
    code = SEQUENCER_ERROR_MAP.get(bits[0].name, ErrorCode.NONE) if bits else ErrorCode.NONE
    return int(code), ref.err_pc


def run(config, seed, count, *, core=None, max_cycles=200_000):
    """Fuzz ``count`` programs (program seeds ``seed * 1_000_003 + i``) on ``config``.

    Parameters
    ----------
    config : sim.config.CoreConfig
    seed : int
        Seeds the programs and the memory contents.
    count : int
        Programs to run.
    core : fastsim.FastCore, optional
        An open core of ``config`` to use (default: one is opened and closed here); it may
        have run other images (it is reset and scrubbed first).

    Returns
    -------
    dict
        ``config``, ``seed``, ``count``, ``compared_memory`` (race-free programs whose
        memory was compared), ``errors`` (programs ending in an error), ``outcomes``
        (count per error name), ``mismatches`` (``{"program_seed", "what"}`` each, at most
        20), ``mismatch_count``, ``cycles`` (simulated), ``wall_s``.
    """
    if not isinstance(config, CoreConfig):
        raise TypeError(f"config must be a sim.config.CoreConfig, not {type(config).__name__}")
    check_int("seed", seed, 0, (1 << 63) - 1)
    check_int("count", count, 0, 1 << 40)
    from fastsim.core import FastCore
    own = core is None
    if own:
        core = FastCore(config)
    else:
        core.reset()
    t0 = time.monotonic()
    c0 = core.cycle
    rec = {"config": config.to_dict(), "seed": seed, "count": count, "compared_memory": 0,
           "errors": 0, "outcomes": {}, "scrubs": 0, "mismatches": [], "mismatch_count": 0}
    state = {"sbuf_psum": None}          # None: the core's SBUF / PSUM must be scrubbed
    try:
        for i in range(count):
            ps = seed * 1_000_003 + i
            if state["sbuf_psum"] is None:
                _scrub(core, config)
                rec["scrubs"] += 1
            what = _one(core, config, ps, max_cycles, rec, state)
            if what:
                rec["mismatch_count"] += 1
                if len(rec["mismatches"]) < 20:
                    rec["mismatches"].append({"program_seed": ps, "what": what})
        rec["cycles"] = core.cycle - c0
    finally:
        if own:
            core.close()
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    return rec


def _scrub(core, config):
    from sim.image import run_host
    out = run_host(core.host(), scrub_image(config))
    if out.error is not None:
        raise RuntimeError(f"fuzz: the scrub program failed: {out.error}")


def _one(core, config, ps, max_cycles, rec, state):
    from sim.image import run_host
    text = core_program(ps, config)
    words = assemble(text)
    if len(words) > config.pmem_depth:
        words = words[:config.pmem_depth - 1] + [assemble("halt\n")[0]]
    mem = np.random.default_rng(ps).integers(0, 256, REGION[1], dtype=np.uint8).tobytes()
    ref = config.refsim(words, ext_bytes=1 << 17, races=True)
    ref.ext[REGION[0]:REGION[0] + REGION[1]] = np.frombuffer(mem, dtype=np.uint8)
    if state["sbuf_psum"] is not None:
        ref.sbuf[:], ref.psum[:] = state["sbuf_psum"]
    ref.run()
    state["sbuf_psum"] = None if (ref.races or ref.error) else (ref.sbuf.copy(),
                                                                 ref.psum.copy())
    image = Image(program=words, memory=[(REGION[0], mem)], readback=[REGION],
                  max_cycles=max_cycles)
    try:
        out = run_host(core.host(), image)
    except TimeoutError as exc:
        core.reset()
        state["sbuf_psum"] = None
        return f"hang: {exc}"
    exp = _expected_error(ref)
    got = None if out.error is None else (int(out.error.code), out.error.address)
    name = "none" if got is None else ErrorCode(got[0]).name
    rec["outcomes"][name] = rec["outcomes"].get(name, 0) + 1
    rec["errors"] += got is not None
    if got != exp:
        state["sbuf_psum"] = None
        return f"error {got} vs reference {exp}"
    if got is None and out.counters.get("instret") != ref.retired:
        return f"instret {out.counters.get('instret')} vs reference {ref.retired}"
    if not ref.races and not ref.error:
        rec["compared_memory"] += 1
        exp_mem = bytes(ref.ext[REGION[0]:REGION[0] + REGION[1]])
        if out.memory[0] != exp_mem:
            state["sbuf_psum"] = None
            k = next(j for j in range(len(exp_mem)) if out.memory[0][j] != exp_mem[j])
            return f"memory differs from byte 0x{REGION[0] + k:x}"
    return None
