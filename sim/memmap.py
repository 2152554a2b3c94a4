"""The AXI4-Lite memory map of the core: ONE plain-Python description.

Everything that knows a register address reads it from here: the RTL register block
(``rtl/bus/axi_lite.py`` generates its decoder and ports from :data:`MEMORY_MAP`), the host
driver (``sim/host.py``), ``docs/memory_map.md`` and the JSON map (both written by
``scripts/gen_memmap.py``). This module imports neither Amaranth nor cocotb.

Conventions
-----------
* Byte addresses; every register is 32 bits wide and 32-bit aligned. Sub-word writes (WSTRB
  not all ones) write only the enabled bytes of RW registers and window words.
* Access kinds: ``ro`` (read only; the value comes from the core through an input port, or is
  a constant when ``value`` is set, or is kept inside the register block when ``internal``),
  ``rw`` (stored in the register block, driven to the core through an output port), ``wo``
  (write-only command register: each write gives a one-cycle strobe with the written value;
  reads return 0).
* ``locked`` registers and windows are refused (SLVERR, counted in ``LOCK_REFUSED``) while
  the core is busy; everything else stays accessible.
* Responses: OKAY; SLVERR for a write refused by the lock, a write to a read-only register or
  a window access while the core is busy; DECERR for an address that maps to nothing.
"""

from dataclasses import dataclass, field, asdict

from sim.errors import ERROR_CODE_BITS

__all__ = ["Field", "Register", "Window", "MemoryMap", "build_memory_map", "MEMORY_MAP",
           "PERF_COUNTERS", "DMA_PERM_READ", "DMA_PERM_WRITE", "CTRL_START", "CTRL_CLEAR",
           "CTRL_ABORT", "CTRL_CLEAR_COUNTERS", "STATUS_BUSY", "STATUS_DONE", "STATUS_ERROR",
           "STATUS_IRQ", "IRQ_DONE", "IRQ_ERROR", "CORE_ID", "MAP_VERSION", "AXI_RESP",
           "LUT_WINDOW_BASE", "LUT_WINDOW_WORDS", "LUT_PAGE_OFFSET", "LUT_PAGE_BITS",
           "LUT_INDEX_BITS", "lut_window_address", "lut_cfg_address"]

#: Value of the ``ID`` register: ASCII "NCOR".
CORE_ID = 0x4E434F52
#: Value of the ``VERSION`` register: major.minor.patch in bytes 2..0 of the memory map.
MAP_VERSION = 0x000100

#: The LUT window (vector-engine cfg port): 2048 words at 0xC000 and the page register that
#: supplies cfg index bits [11:8], so that every coefficient entry of a 1024-entry table
#: (cfg index entry * 4 + word, 12 bits) is reachable (``lut_window_address``).
LUT_WINDOW_BASE = 0xC000
LUT_WINDOW_WORDS = 2048
LUT_PAGE_OFFSET = 0x0F0
LUT_PAGE_BITS = 4
#: cfg index bits a window word carries itself (the page supplies those above).
LUT_INDEX_BITS = 8


def lut_window_address(cfg_addr):
    """``(page, word)``: the LUT_PAGE value and the LUT window word that reach the vector
    engine's cfg address ``cfg_addr`` (``sim.vector``: coefficient, descriptor, header or
    status). Inverse of :func:`lut_cfg_address`.

    Raises
    ------
    ValueError
        If ``cfg_addr`` is not a 16-bit address the window can reach (an index of 4096 or
        more, region 3 below 0x8000, or a status index of 4096 or more).
    """
    if not isinstance(cfg_addr, int) or not 0 <= cfg_addr < 1 << 16:
        raise ValueError(f"cfg_addr must be in 0..0xffff, not {cfg_addr!r}")
    if cfg_addr & 0x8000:
        region, bank, index = 3, 0, cfg_addr & 0x7FFF
    else:
        region, bank, index = (cfg_addr >> 12) & 3, (cfg_addr >> 14) & 1, cfg_addr & 0xFFF
        if region == 3:
            raise ValueError(f"cfg_addr 0x{cfg_addr:04x} is in no LUT region")
    if index >> (LUT_INDEX_BITS + LUT_PAGE_BITS):
        raise ValueError(f"cfg_addr 0x{cfg_addr:04x}: index beyond the LUT window's reach")
    word = (bank << 10) | (region << 8) | (index & ((1 << LUT_INDEX_BITS) - 1))
    return index >> LUT_INDEX_BITS, word


def lut_cfg_address(page, word):
    """The cfg address that LUT window word ``word`` reaches with LUT_PAGE = ``page`` (the
    core's window decode, ``rtl/core/lut_window.py``)."""
    region, bank, low = (word >> 8) & 3, (word >> 10) & 1, word & 0xFF
    index = ((page & ((1 << LUT_PAGE_BITS) - 1)) << LUT_INDEX_BITS) | low
    return 0x8000 | index if region == 3 else (bank << 14) | (region << 12) | index


# Bit masks of the command and status registers.
CTRL_START = 1 << 0
CTRL_CLEAR = 1 << 1
CTRL_ABORT = 1 << 2
CTRL_CLEAR_COUNTERS = 1 << 3
STATUS_BUSY = 1 << 0
STATUS_DONE = 1 << 1
STATUS_ERROR = 1 << 2
STATUS_IRQ = 1 << 3
IRQ_DONE = 1 << 0
IRQ_ERROR = 1 << 1
DMA_PERM_READ = 1 << 0
DMA_PERM_WRITE = 1 << 1

#: AXI response codes.
AXI_RESP = {"OKAY": 0, "EXOKAY": 1, "SLVERR": 2, "DECERR": 3}

#: Performance counters (read only, driven by the core), in address order.
#: Every counter restarts at START and is zeroed by CTRL.clear_counters; it counts while the
#: program runs, so after DONE it holds that program's figure until the next START.
PERF_COUNTERS = [
    ("cycles_lo", "Cycles of the program since START (bits 31..0); stops when it ends."),
    ("cycles_hi", "Bits 63..32 of the cycle counter."),
    ("tensor_busy", "Cycles of the program the tensor engine was busy."),
    ("vector_busy", "Cycles of the program the vector/activation engine was busy."),
    ("dma_busy", "Cycles of the program the DMA engine was busy."),
    ("dma_rd_bytes", "Bytes the DMA read from external memory in the program."),
    ("dma_wr_bytes", "Bytes the DMA wrote to external memory in the program."),
    ("instret", "Instructions the sequencer retired in the program."),
    ("sem_wait", "Cycles of the program engines spent waiting on a semaphore (summed over "
                 "engines)."),
]
# (The LUT's under/over-range counters are read through the LUT window's status region,
# ``sim.vector.Status``; there is no separate saturation counter here.)


@dataclass(frozen=True)
class Field:
    """A bit field of a register (documentation and driver decoding)."""
    name: str
    lsb: int
    width: int
    doc: str


@dataclass(frozen=True)
class Register:
    """One 32-bit register."""
    name: str
    offset: int
    access: str               # "ro", "rw" or "wo"
    doc: str
    reset: int = 0            # rw: value after reset; ro with value: the constant
    locked: bool = False
    value: int = None         # ro constant (no port)
    internal: bool = False    # ro kept inside the register block (no port)
    fields: tuple = ()
    width: int = 32           # rw: bits stored (upper bits read as 0)

    @property
    def port(self):
        """Name of the RTL port of this register (lower case name)."""
        return self.name.lower()


@dataclass(frozen=True)
class Window:
    """A window of 32-bit words mapped onto a memory port of the core."""
    name: str
    base: int
    words: int                # size of the address range in 32-bit words (a power of two)
    doc: str
    locked: bool = True
    #: Cycles from the read strobe ``re`` to the word on ``rdata`` (the register block waits
    #: that long before it answers).
    read_latency: int = 1

    @property
    def port(self):
        return self.name.lower()

    @property
    def addr_bits(self):
        return (self.words - 1).bit_length()


@dataclass(frozen=True)
class MemoryMap:
    """The whole map: registers, windows and the AXI4-Lite address width."""
    addr_width: int
    registers: tuple
    windows: tuple
    dma_windows: int
    notes: tuple = field(default=())

    def register(self, name):
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise KeyError(name)

    def window(self, name):
        for win in self.windows:
            if win.name == name:
                return win
        raise KeyError(name)

    def to_dict(self):
        return {
            "addr_width": self.addr_width,
            "data_width": 32,
            "dma_windows": self.dma_windows,
            "registers": [asdict(r) for r in self.registers],
            "windows": [asdict(w) for w in self.windows],
            "responses": dict(AXI_RESP),
        }


def build_memory_map(dma_windows=4):
    """Return the :class:`MemoryMap` for ``dma_windows`` DMA address windows (1..8).

    Raises
    ------
    TypeError
        If ``dma_windows`` is not an integer.
    ValueError
        If ``dma_windows`` is not in 1..8.
    """
    if not isinstance(dma_windows, int) or isinstance(dma_windows, bool):
        raise TypeError(f"dma_windows must be an integer, not {dma_windows!r}")
    if not 1 <= dma_windows <= 8:
        raise ValueError(f"dma_windows must be in 1..8, not {dma_windows}")
    regs = [
        Register("ID", 0x000, "ro", "Identification: ASCII \"NCOR\".", value=CORE_ID),
        Register("VERSION", 0x004, "ro", "Memory-map version (major.minor.patch in bytes 2..0).",
                 value=MAP_VERSION),
        Register("CONFIG0", 0x008, "ro", "Configuration of this core instance.", fields=(
            Field("rows", 0, 8, "tensor-array rows (= SBUF partitions P)"),
            Field("cols", 8, 8, "tensor-array columns"),
            Field("dma_windows", 16, 4, "number of DMA address windows"),
            Field("formats", 24, 8, "bit f set: Format f supported by the tensor engine"))),
        Register("CONFIG1", 0x00C, "ro", "Memory sizes of this core instance.", fields=(
            Field("sbuf_depth_log2", 0, 8, "log2 of SBUF words per partition"),
            Field("psum_depth_log2", 8, 8, "log2 of PSUM words per partition"),
            Field("prog_depth_log2", 16, 8, "log2 of program-memory words"),
            Field("ucode_depth_log2", 24, 8, "log2 of control-store words"))),
        Register("CTRL", 0x010, "wo", "Commands (write 1 to a bit; each bit is a one-cycle "
                 "strobe). START is ignored while busy.", fields=(
                     Field("start", 0, 1, "start the program at START_PC"),
                     Field("clear", 1, 1, "clear DONE, ERROR, the error registers and IRQ"),
                     Field("abort", 2, 1, "abort the running program (engines to idle)"),
                     Field("clear_counters", 3, 1, "zero the performance counters (which "
                           "also restart at START) and LOCK_REFUSED"))),
        Register("STATUS", 0x014, "ro", "Status. DONE is sticky until CTRL.CLEAR or the next "
                 "START; ERROR (and ERR_*) only until CTRL.CLEAR.", fields=(
                     Field("busy", 0, 1, "a program is running"),
                     Field("done", 1, 1, "the last program finished (with or without error)"),
                     Field("error", 2, 1, "an error is latched in ERR_CODE"),
                     Field("irq", 3, 1, "the interrupt line"))),
        Register("ERR_CODE", 0x018, "ro", "Latched error code (docs/errors.md); 0: none.",
                 fields=(Field("code", 0, ERROR_CODE_BITS, "sim.errors.ErrorCode"),)),
        Register("ERR_ADDR", 0x01C, "ro", "Faulting address of the latched error (meaning per "
                 "code, docs/errors.md)."),
        Register("ERR_INFO", 0x020, "ro", "Detail word of the latched error (per code)."),
        Register("ERR_COUNT", 0x024, "ro", "Errors reported since the last clear (the first "
                 "one is latched)."),
        Register("IRQ_ENABLE", 0x028, "rw", "Interrupt enables.", width=2, fields=(
            Field("done", 0, 1, "interrupt when a program finishes"),
            Field("error", 1, 1, "interrupt when an error is latched"))),
        Register("START_PC", 0x02C, "rw", "Program-memory word address where START begins.",
                 locked=True),
        Register("WATCHDOG_LIMIT", 0x030, "rw", "Cycle limit of a program; 0 disables the "
                 "watchdog.", locked=True),
        Register("LOCK_REFUSED", 0x034, "ro", "Writes refused by the configuration lock since "
                 "reset or CTRL.CLEAR_COUNTERS.", internal=True),
        Register("SEED", 0x038, "rw", "Stochastic-rounding seed; every write and every START "
                 "re-seed the lane generators from it, so each program starts from the "
                 "generators of this seed (a seed_ld in the program re-seeds them again).",
                 locked=True),
        Register("SCRATCH", 0x03C, "rw", "Scratch register for the host (never locked)."),
        Register("LUT_PAGE", LUT_PAGE_OFFSET, "rw", "LUT window page: bits [11:8] of the cfg "
                 "index of every LUT window word (coefficient entries 64 * page .. 64 * page "
                 "+ 63; lut_window_address).", width=LUT_PAGE_BITS, locked=True),
    ]
    for i in range(dma_windows):
        base = 0x040 + 16 * i
        regs += [
            Register(f"DMA_WIN{i}_BASE", base, "rw", f"DMA window {i}: first byte address.",
                     locked=True),
            Register(f"DMA_WIN{i}_LIMIT", base + 4, "rw", f"DMA window {i}: last byte address "
                     "(inclusive).", locked=True),
            Register(f"DMA_WIN{i}_PERM", base + 8, "rw", f"DMA window {i}: permissions; 0 "
                     "disables the window.", locked=True, width=2, fields=(
                         Field("read", 0, 1, "the DMA may read (load to SBUF)"),
                         Field("write", 1, 1, "the DMA may write (store from SBUF)"))),
        ]
    for i, (name, doc) in enumerate(PERF_COUNTERS):
        regs.append(Register(f"PERF_{name.upper()}", 0x100 + 4 * i, "ro", doc))
    windows = (
        Window("PROG", 0x4000, 4096, "Program memory: one 32-bit word per address; the core's "
               "program-memory width decides how words form instructions (docs/isa.md)."),
        Window("UCODE", 0x8000, 4096, "Control store (microcode) words."),
        # A LUT read goes through the vector engine's cfg port: the core registers the request
        # (1), a pipeline register in front of the cfg port holds it (2), the LUT's cfg
        # register takes it (3), the table memory answers (4), the LUT registers the word (5)
        # and the core registers it (6).
        Window("LUT", LUT_WINDOW_BASE, LUT_WINDOW_WORDS, "LUT activation tables (vector "
               "engine cfg port): word a is cfg address region a[9:8] (0 coef, 1 desc, 2 hdr, "
               "3 status), bank a[10], index LUT_PAGE << 8 | a[7:0].", read_latency=6),
    )
    return MemoryMap(addr_width=16, registers=tuple(regs), windows=windows,
                     dma_windows=dma_windows)


#: The memory map of the default configuration (4 DMA windows).
MEMORY_MAP = build_memory_map()


def _check(mm):
    """Self-check: registers aligned, inside the map, not overlapping each other or windows."""
    seen = {}
    for r in mm.registers:
        assert r.offset % 4 == 0 and r.offset < 0x4000, r
        assert r.offset not in seen, (r, seen.get(r.offset))
        seen[r.offset] = r
    for w in mm.windows:
        assert w.words & (w.words - 1) == 0 and w.base % (4 * w.words) == 0, w
        assert w.base + 4 * w.words <= 1 << mm.addr_width, w


_check(MEMORY_MAP)
