"""A program run as data: what the host writes before START (:class:`Image`) and what it reads
back after (:class:`Outcome`), with one executor per backend.

Every way of running the core takes an :class:`Image` and returns an :class:`Outcome`, so the
same run can be repeated on the reference simulator, the RTL (cocotb or the fast Verilator
harness) and a board, and the outcomes compared field by field:

    image = Image(program=words, memory=[(0x1000, w.tobytes())], readback=[(0x6000, 256)])
    out = run_refsim(CoreConfig.preset("core4"), image)          # numpy reference
    out = run_host(host, image)                                    # any sim.host.SyncHost

``run_host`` is the one host sequence for every RTL backend: it opens the DMA windows, sets the
seed and the watchdog, loads the LUT, microcode and program, writes external memory, clears
the counters, starts at ``pc`` and waits, then reads back. (An ``async`` twin,
:func:`run_host_async`, serves cocotb.)

This module imports neither Amaranth nor cocotb.
"""

import dataclasses

from sim.host import AcceleratorError, Host, SyncHost, _run_sync

__all__ = ["Image", "Outcome", "run_host", "run_host_async", "run_refsim"]


@dataclasses.dataclass
class Image:
    """Everything a run needs.

    Parameters
    ----------
    program : list of int
        64-bit instruction words (``sim.asm.assemble`` output), loaded at instruction 0.
    memory : list of (int, bytes)
        External-memory segments written before the run (byte address, contents).
    readback : list of (int, int)
        External-memory regions read after the run (byte address, length).
    microcode : list of (int, list of int)
        ``(word address, 32-bit words)`` written into the UCODE window (control store and
        opcode map), for run-time microcoded instructions.
    lut : list of (int, list of int)
        ``(word address, 32-bit words)`` written into the LUT window.
    windows : list of (int, int, bool, bool) or None
        DMA windows ``(base, limit, read, write)``; None opens one read/write window over the
        whole 32-bit address space.
    seed : int or None
        Written to the SEED register before START (None: left as it is).
    watchdog : int
        Cycle limit of the program (0: no watchdog).
    max_cycles : int
        The host gives up (``TimeoutError``) after this many cycles.
    pc : int
        Start address.
    """

    program: list
    memory: list = dataclasses.field(default_factory=list)
    readback: list = dataclasses.field(default_factory=list)
    microcode: list = dataclasses.field(default_factory=list)
    lut: list = dataclasses.field(default_factory=list)
    windows: list = None
    seed: int = None
    watchdog: int = 0
    max_cycles: int = 10_000_000
    pc: int = 0


@dataclasses.dataclass
class Outcome:
    """What a run left behind.

    Members
    -------
    memory : list of bytes
        One entry per ``Image.readback`` region.
    error : AcceleratorError or None
        The latched error (``docs/errors.md``), not raised.
    cycles : int or None
        ``PERF_CYCLES`` (None where the backend has no clock: the reference simulator).
    counters : dict
        The performance counters (``Host.counters``); empty for the reference simulator.
    backend : str
        Which backend produced it.
    """

    memory: list
    error: object = None
    cycles: int = None
    counters: dict = dataclasses.field(default_factory=dict)
    backend: str = ""


async def run_host_async(host, image):
    """Run ``image`` through a :class:`sim.host.Host` (async transport); return an Outcome."""
    windows = image.windows
    if windows is None:
        windows = [(0, 0xFFFFFFFF, True, True)]
    await host.clear_windows()
    for i, (base, limit, rd, wr) in enumerate(windows):
        await host.set_window(i, base, limit, rd, wr)
    if image.seed is not None:
        await host.set_seed(image.seed)
    await host.set_watchdog(image.watchdog)
    for base, words in image.lut:
        await host.load_lut(words, base)
    for base, words in image.microcode:
        await host.load_microcode(words, base)
    await host.load_program(image.program)
    for addr, data in image.memory:
        await host.write_memory(addr, data)
    await host.clear()
    await host.clear_counters()
    await host.start(image.pc)
    error = None
    try:
        await host.wait(timeout_cycles=image.max_cycles, poll_cycles=256)
    except AcceleratorError as e:
        error = e
    counters = await host.counters()
    memory = [await host.read_memory(a, n) for a, n in image.readback]
    return Outcome(memory=memory, error=error, cycles=counters["cycles"], counters=counters)


def run_host(host, image):
    """:func:`run_host_async` through a :class:`sim.host.SyncHost` (fast backend, board)."""
    if isinstance(host, SyncHost):
        host = host._host
    if not isinstance(host, Host):
        raise TypeError(f"host must be a sim.host.SyncHost, not {type(host).__name__}")
    return _run_sync(run_host_async(host, image))


def run_refsim(config, image, **kwargs):
    """Run ``image`` on the reference simulator of ``config`` (a ``sim.config.CoreConfig``).

    External memory is sized to hold every segment and readback region. The SEED register
    is ``image.seed`` (None: 0, its value after reset): START reseeds the vector engine's
    generators from it, on the core as here (``RefSim(host_seed=)``). Microcode and LUT
    writes are not modelled here: a run-time microcoded instruction needs ``extensions=``
    (passed through ``kwargs`` to ``RefSim``). The error is reported as on the core (an
    :class:`AcceleratorError` from the reference simulator's error bits), not raised. The
    race check is on unless ``races=False`` (``sim/races.py``): its verdict is
    ``out.refsim.races_error()``, a ``sim.races.RaceError`` naming the two instructions of
    the first race, or None.
    """
    import numpy as np
    if image.microcode and "extensions" not in kwargs:
        raise ValueError("image has microcode: pass extensions= with its semantics")
    top = max([a + len(d) for a, d in image.memory] + [a + n for a, n in image.readback] +
              [1 << 16])
    size = 1 << (top - 1).bit_length()
    kwargs.setdefault("host_seed", 0 if image.seed is None else image.seed)
    sim = config.refsim(image.program, ext_bytes=size, **kwargs)
    for addr, data in image.memory:
        sim.ext[addr:addr + len(data)] = np.frombuffer(bytes(data), dtype=np.uint8)
    sim.run()
    error = None
    if sim.error:
        error = AcceleratorError(sim.error, sim.err_pc, 0)
    memory = [bytes(sim.ext[a:a + n]) for a, n in image.readback]
    out = Outcome(memory=memory, error=error, backend="refsim")
    out.refsim = sim
    return out
