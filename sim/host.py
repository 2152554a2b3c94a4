"""The host driver: program the core through its AXI4-Lite registers, independent of transport.

One implementation serves the cocotb simulation and a board. The driver's methods are
``async``; a :class:`Transport` supplies ``read32``/``write32``/``read_block``/``write_block``
and ``wait_cycles`` (cocotb: ``cocotb_tests/common/axi_transport.py``). A synchronous transport
(a serial link to a board) is used through :class:`SyncHost`, which runs the same coroutines to
completion without an event loop (a sync transport never suspends).

External memory (where DMA reads and writes tensors) is reached through a second object with
``read(addr, n) -> bytes`` and ``write(addr, data)``, sync or async (in simulation the
cocotbext-axi ``AxiRam``).

Also here, because the driver needs them to place tensors: :func:`pack_elements` /
:func:`unpack_elements` (external-memory layout: elements packed by ``STORAGE_BITS``,
little-endian) and :func:`dma_model`, the golden model of one DMA record (``docs/isa.md``).

This module imports neither Amaranth nor cocotb.
"""

import inspect

import numpy as np

from sim.dtypes import Format, STORAGE_BITS
from sim.errors import ErrorCode, describe
from sim.memmap import (MEMORY_MAP, CTRL_START, CTRL_CLEAR, CTRL_ABORT, CTRL_CLEAR_COUNTERS,
                        STATUS_BUSY, STATUS_DONE, STATUS_ERROR, IRQ_DONE, IRQ_ERROR,
                        DMA_PERM_READ, DMA_PERM_WRITE, CORE_ID, PERF_COUNTERS, AXI_RESP,
                        LUT_PAGE_BITS, lut_window_address)

__all__ = ["Transport", "BusError", "AcceleratorError", "IllegalInstruction",
           "DmaWindowViolation", "AxiReadError", "AxiWriteError", "WatchdogTimeout",
           "LutIndexError", "SemaphoreError", "CallStackOverflow", "DmaAlignmentError",
           "SbufRangeError", "LoopStackError", "PcRangeError", "Deadlock",
           "MicrocodeTrap", "ERROR_CLASSES", "Host", "SyncHost", "pack_elements",
           "unpack_elements", "dma_model"]


# ---------------------------------------------------------------------------------------------
# External-memory layout and the DMA golden model
# ---------------------------------------------------------------------------------------------

def _storage_bytes(fmt):
    try:
        return STORAGE_BITS[Format(fmt)] // 8
    except ValueError:
        raise ValueError(f"fmt must be a sim.dtypes.Format code 0..7, not {fmt!r}") from None


def pack_elements(values, fmt):
    """Pack element bit patterns (ints or an integer array, low-aligned) into bytes as the DMA
    stores them: ``STORAGE_BITS[fmt]/8`` bytes each, little-endian. Upper bits are dropped."""
    size = _storage_bytes(fmt)
    out = bytearray()
    mask = (1 << (8 * size)) - 1
    for v in np.asarray(values).ravel():
        out += (int(v) & mask).to_bytes(size, "little")
    return bytes(out)


def unpack_elements(data, fmt, count=None):
    """Inverse of :func:`pack_elements`: a ``uint32`` array of ``count`` elements (default:
    all of ``data``), each zero-extended as the DMA loads it into an SBUF word."""
    size = _storage_bytes(fmt)
    if count is None:
        count = len(data) // size
    if len(data) < count * size:
        raise ValueError(f"data has {len(data)} bytes, {count * size} needed")
    return np.array([int.from_bytes(data[k * size:(k + 1) * size], "little")
                     for k in range(count)], dtype=np.uint32)


def dma_model(record, ext, sbuf):
    """Apply one DMA record (a dict of ``DMA_RECORD`` fields) to ``ext`` (a ``bytearray``,
    external memory from address 0) and ``sbuf`` (``uint32`` array ``[P, depth]``), in place.

    Follows ``docs/isa.md``: element ``(p, i, j)`` at external byte address
    ``ext_addr + p*ext_part_stride + i*ext_stride1 + j*ext_stride0`` (mod 2**32) and SBUF
    word ``SBUF[part_start + p][(sbuf_addr + i*n0 + j) mod depth]``. Protection checks are not
    modelled here (see :func:`dma_check`).
    """
    size = _storage_bytes(record["fmt"])
    depth = sbuf.shape[1]
    n0, n1, npart = record["n0"], record["n1"], record["part_count"]
    for p in range(npart):
        for i in range(n1):
            for j in range(n0):
                e = (record["ext_addr"] + p * record["ext_part_stride"] +
                     i * record["ext_stride1"] + j * record["ext_stride0"]) % (1 << 32)
                part = record["part_start"] + p
                word = (record["sbuf_addr"] + i * n0 + j) % depth
                if record["store"]:
                    ext[e:e + size] = (int(sbuf[part, word]) & ((1 << 8 * size) - 1)
                                       ).to_bytes(size, "little")
                else:
                    sbuf[part, word] = int.from_bytes(bytes(ext[e:e + size]), "little")


def _s32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def dma_check(record, windows, partitions):
    """The protection checks the DMA applies before any bus access.

    ``windows`` is a list of ``(base, limit, perm)``. Returns ``(ErrorCode, addr)``:
    ``(NONE, 0)`` when the record may run. The order of checks and the reported addresses are
    those of ``docs/errors.md``.
    """
    size = _storage_bytes(record["fmt"])
    n0, n1, npart = record["n0"], record["n1"], record["part_count"]
    if n0 == 0 or n1 == 0 or npart == 0:
        return ErrorCode.NONE, 0
    if any(record[k] % size for k in ("ext_addr", "ext_stride0", "ext_stride1",
                                      "ext_part_stride")):
        return ErrorCode.DMA_ALIGN, record["ext_addr"]
    if record["part_start"] + npart > partitions:
        return ErrorCode.SBUF_RANGE, record["sbuf_addr"]
    need = DMA_PERM_WRITE if record["store"] else DMA_PERM_READ
    span = (n0 - 1) * _s32(record["ext_stride0"])
    for p in range(npart):
        for i in range(n1):
            base = (record["ext_addr"] + p * record["ext_part_stride"] +
                    i * record["ext_stride1"]) % (1 << 32)
            lo = base + min(span, 0)
            hi = base + max(span, 0) + size - 1
            ok = lo >= 0 and hi < (1 << 32) and any(
                perm & need and wb <= lo and hi <= wl for wb, wl, perm in windows)
            if not ok:
                return ErrorCode.DMA_WINDOW, base
    return ErrorCode.NONE, 0


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

class BusError(IOError):
    """The AXI4-Lite port answered SLVERR or DECERR (e.g. a write refused by the lock)."""

    def __init__(self, addr, resp, write):
        names = {v: k for k, v in AXI_RESP.items()}
        self.addr, self.resp, self.write = addr, resp, write
        super().__init__(f"{'write' if write else 'read'} of 0x{addr:04x} answered "
                         f"{names.get(resp, resp)}")


class AcceleratorError(RuntimeError):
    """An error latched by the core. ``code``, ``address`` and ``info`` are the ERR_CODE,
    ERR_ADDR and ERR_INFO registers; the message names the error and the address."""

    def __init__(self, code, address, info, count=1):
        self.code = code
        self.address = address
        self.info = info
        self.count = count
        d = describe(code)
        self.name = d.name
        super().__init__(f"{d.name} (code {int(code)}) at 0x{address:08x} [{d.addr_meaning}], "
                         f"info 0x{info:08x} [{d.info_meaning}]")


class IllegalInstruction(AcceleratorError): pass
class DmaWindowViolation(AcceleratorError): pass
class AxiReadError(AcceleratorError): pass
class AxiWriteError(AcceleratorError): pass
class WatchdogTimeout(AcceleratorError): pass
class LutIndexError(AcceleratorError): pass
class SemaphoreError(AcceleratorError): pass
class CallStackOverflow(AcceleratorError): pass
class DmaAlignmentError(AcceleratorError): pass
class SbufRangeError(AcceleratorError): pass
class LoopStackError(AcceleratorError): pass
class PcRangeError(AcceleratorError): pass
class Deadlock(AcceleratorError): pass
class MicrocodeTrap(AcceleratorError): pass


ERROR_CLASSES = {
    ErrorCode.ILLEGAL_INSTRUCTION: IllegalInstruction,
    ErrorCode.DMA_WINDOW: DmaWindowViolation,
    ErrorCode.DMA_AXI_READ: AxiReadError,
    ErrorCode.DMA_AXI_WRITE: AxiWriteError,
    ErrorCode.WATCHDOG: WatchdogTimeout,
    ErrorCode.LUT_INDEX: LutIndexError,
    ErrorCode.SEMAPHORE: SemaphoreError,
    ErrorCode.CALL_STACK: CallStackOverflow,
    ErrorCode.DMA_ALIGN: DmaAlignmentError,
    ErrorCode.SBUF_RANGE: SbufRangeError,
    ErrorCode.LOOP_STACK: LoopStackError,
    ErrorCode.PC_RANGE: PcRangeError,
    ErrorCode.DEADLOCK: Deadlock,
    ErrorCode.MICRO_TRAP: MicrocodeTrap,
}


# ---------------------------------------------------------------------------------------------
# Transport and driver
# ---------------------------------------------------------------------------------------------

class Transport:
    """What the driver needs from a link to the AXI4-Lite port (all methods ``async``).

    ``read32``/``write32`` raise :class:`BusError` on a non-OKAY response. The block methods
    default to word loops; a transport may do better (bursts over a serial link).
    """

    async def read32(self, addr):
        raise NotImplementedError

    async def write32(self, addr, value):
        raise NotImplementedError

    async def read_block(self, addr, nwords):
        return [await self.read32(addr + 4 * k) for k in range(nwords)]

    async def write_block(self, addr, words):
        for k, w in enumerate(words):
            await self.write32(addr + 4 * k, int(w))

    async def wait_cycles(self, n):
        """Let about ``n`` core clock cycles pass (a board may sleep instead)."""
        return None


async def _maybe(result):
    return await result if inspect.isawaitable(result) else result


class Host:
    """The driver. ``memory`` (optional) is the external memory as seen by the DMA."""

    def __init__(self, transport, memory=None, memory_map=MEMORY_MAP):
        self.t = transport
        self.mem = memory
        self.mm = memory_map

    def addr(self, name):
        return self.mm.register(name).offset

    async def read(self, name):
        return await self.t.read32(self.addr(name))

    async def write(self, name, value):
        await self.t.write32(self.addr(name), int(value) & 0xFFFFFFFF)

    # -- identification ----------------------------------------------------------------------
    async def identify(self):
        """Return a dict of ID, version and the CONFIG0/CONFIG1 fields; raise ``IOError`` if
        the ID register does not read ``"NCOR"``."""
        ident = await self.read("ID")
        if ident != CORE_ID:
            raise IOError(f"no core found: ID reads 0x{ident:08x}, expected 0x{CORE_ID:08x}")
        out = {"id": ident, "version": await self.read("VERSION")}
        for name in ("CONFIG0", "CONFIG1"):
            value = await self.read(name)
            for f in self.mm.register(name).fields:
                out[f.name] = (value >> f.lsb) & ((1 << f.width) - 1)
        return out

    # -- loading -----------------------------------------------------------------------------
    async def _load_window(self, window, words, base):
        win = self.mm.window(window)
        words = [int(w) & 0xFFFFFFFF for w in words]
        if base < 0 or base + len(words) > win.words:
            raise ValueError(f"{len(words)} words at {base} do not fit the {window} window "
                             f"of {win.words} words")
        await self.t.write_block(win.base + 4 * base, words)

    async def _read_window(self, window, nwords, base=0):
        win = self.mm.window(window)
        if base < 0 or nwords < 0 or base + nwords > win.words:
            raise ValueError(f"{nwords} words at {base} do not fit the {window} window "
                             f"of {win.words} words")
        return await self.t.read_block(win.base + 4 * base, nwords)

    async def load_program(self, instructions, base=0):
        """Write 64-bit instructions (``sim.asm.assemble`` output) into program memory from
        instruction index ``base``: instruction i is window words 2i (bits 31..0) and 2i+1
        (bits 63..32), low word first (the core commits an instruction on its high word)."""
        flat = []
        for w in instructions:
            w = int(w) & ((1 << 64) - 1)
            flat += [w & 0xFFFFFFFF, w >> 32]
        await self._load_window("PROG", flat, 2 * base)

    async def load_program_words(self, words32, base=0):
        """Write raw 32-bit words into the PROG window from word ``base``."""
        await self._load_window("PROG", words32, base)

    async def load_microcode(self, words32, base=0):
        await self._load_window("UCODE", words32, base)

    async def load_lut(self, words32, base=0):
        """Write LUT window words from ``base`` (the current LUT_PAGE applies; see
        :meth:`write_lut` for cfg addresses)."""
        await self._load_window("LUT", words32, base)

    async def set_lut_page(self, page):
        """LUT_PAGE: cfg index bits [11:8] of every LUT window word."""
        if not 0 <= page < 1 << LUT_PAGE_BITS:
            raise ValueError(f"page must be in 0..{(1 << LUT_PAGE_BITS) - 1}, not {page}")
        await self.write("LUT_PAGE", page)

    async def write_lut(self, writes):
        """Write ``(cfg address, data)`` pairs (``sim.vector`` addresses, e.g. a compiled
        table's ``writes(bank)``) through the LUT window, every entry of every table size
        included: LUT_PAGE is set where the address needs it and left at 0."""
        page = 0
        for addr, data in writes:
            p, word = lut_window_address(int(addr))
            if p != page:
                await self.set_lut_page(p)
                page = p
            await self._load_window("LUT", [data], word)
        if page:
            await self.set_lut_page(0)

    async def read_lut_cfg(self, addrs):
        """Read the words at cfg addresses ``addrs`` through the LUT window (as
        :meth:`write_lut`); LUT_PAGE is left at 0."""
        out, page = [], 0
        for addr in addrs:
            p, word = lut_window_address(int(addr))
            if p != page:
                await self.set_lut_page(p)
                page = p
            out += await self._read_window("LUT", 1, word)
        if page:
            await self.set_lut_page(0)
        return out

    async def read_program(self, nwords, base=0):
        return await self._read_window("PROG", nwords, base)

    async def read_microcode(self, nwords, base=0):
        return await self._read_window("UCODE", nwords, base)

    async def read_lut(self, nwords, base=0):
        return await self._read_window("LUT", nwords, base)

    async def set_seed(self, seed):
        await self.write("SEED", seed)

    async def set_watchdog(self, cycles):
        """Cycle limit of a program (0 disables the watchdog)."""
        await self.write("WATCHDOG_LIMIT", cycles)

    async def set_window(self, index, base, limit, read=True, write=True):
        """Program DMA window ``index``: bytes ``base..limit`` inclusive."""
        if not 0 <= index < self.mm.dma_windows:
            raise ValueError(f"window index must be in 0..{self.mm.dma_windows - 1}, "
                             f"not {index}")
        if not 0 <= base <= limit < 1 << 32:
            raise ValueError(f"window must satisfy 0 <= base <= limit < 2**32, not "
                             f"0x{base:x}..0x{limit:x}")
        perm = (DMA_PERM_READ if read else 0) | (DMA_PERM_WRITE if write else 0)
        await self.write(f"DMA_WIN{index}_BASE", base)
        await self.write(f"DMA_WIN{index}_LIMIT", limit)
        await self.write(f"DMA_WIN{index}_PERM", perm)

    async def clear_windows(self):
        for i in range(self.mm.dma_windows):
            await self.write(f"DMA_WIN{i}_PERM", 0)

    # -- external memory -----------------------------------------------------------------------
    async def write_memory(self, addr, data):
        if self.mem is None:
            raise RuntimeError("no external memory attached to this Host")
        await _maybe(self.mem.write(addr, bytes(data)))

    async def read_memory(self, addr, n):
        if self.mem is None:
            raise RuntimeError("no external memory attached to this Host")
        return bytes(await _maybe(self.mem.read(addr, n)))

    async def write_tensor(self, addr, values, fmt):
        """Place element bit patterns at ``addr``, packed as the DMA expects."""
        await self.write_memory(addr, pack_elements(values, fmt))

    async def read_tensor(self, addr, count, fmt):
        return unpack_elements(await self.read_memory(addr, count * _storage_bytes(fmt)),
                               fmt, count)

    # -- running -----------------------------------------------------------------------------
    async def status(self):
        s = await self.read("STATUS")
        return {"busy": bool(s & STATUS_BUSY), "done": bool(s & STATUS_DONE),
                "error": bool(s & STATUS_ERROR), "raw": s}

    async def clear(self):
        """Clear DONE, ERROR, the error registers and the interrupt."""
        await self.write("CTRL", CTRL_CLEAR)

    async def abort(self):
        await self.write("CTRL", CTRL_ABORT)

    async def clear_counters(self):
        await self.write("CTRL", CTRL_CLEAR_COUNTERS)

    async def start(self, pc=0, irq=True):
        await self.write("START_PC", pc)
        await self.write("IRQ_ENABLE", (IRQ_DONE | IRQ_ERROR) if irq else 0)
        await self.write("CTRL", CTRL_START)

    async def error(self):
        """The latched error as an :class:`AcceleratorError` (not raised), or None."""
        code = await self.read("ERR_CODE")
        if code == ErrorCode.NONE:
            return None
        addr = await self.read("ERR_ADDR")
        info = await self.read("ERR_INFO")
        count = await self.read("ERR_COUNT")
        try:
            cls = ERROR_CLASSES.get(ErrorCode(code), AcceleratorError)
        except ValueError:
            cls = AcceleratorError
        return cls(code, addr, info, count)

    async def check(self):
        """Raise the latched error, if any."""
        err = await self.error()
        if err is not None:
            raise err

    async def wait(self, timeout_cycles=1_000_000, poll_cycles=64, irq=None):
        """Wait until the program is done; raise its error or ``TimeoutError``.

        ``irq`` (optional): an awaitable factory ``irq(timeout_cycles) -> bool`` that waits
        for the interrupt line (the cocotb transport offers one); otherwise STATUS is polled
        every ``poll_cycles`` cycles.
        """
        if irq is not None:
            await irq(timeout_cycles)
        waited = 0
        while True:
            st = await self.status()
            if st["done"] or st["error"]:
                break
            if waited >= timeout_cycles:
                raise TimeoutError(f"core still busy after {waited} cycles "
                                   f"(STATUS 0x{st['raw']:x})")
            await self.t.wait_cycles(poll_cycles)
            waited += poll_cycles
        await self.check()
        return st

    async def run(self, pc=0, timeout_cycles=1_000_000, **kwargs):
        await self.start(pc)
        return await self.wait(timeout_cycles, **kwargs)

    async def counters(self):
        """Performance counters as a dict (``cycles`` is the 64-bit combination)."""
        base = self.addr("PERF_CYCLES_LO")
        words = await self.t.read_block(base, len(PERF_COUNTERS))
        out = {name: w for (name, _), w in zip(PERF_COUNTERS, words)}
        out["cycles"] = out.pop("cycles_lo") | (out.pop("cycles_hi") << 32)
        out["lock_refused"] = await self.read("LOCK_REFUSED")
        return out


def _run_sync(coro):
    """Run a coroutine that never suspends (all its awaits are on a sync transport)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("SyncHost: the transport suspended; use Host with an async transport")


class _AsyncAdapter(Transport):
    """Presents a synchronous transport (plain methods) as a :class:`Transport`."""

    def __init__(self, sync):
        self.sync = sync

    async def read32(self, addr):
        return self.sync.read32(addr)

    async def write32(self, addr, value):
        return self.sync.write32(addr, value)

    async def read_block(self, addr, nwords):
        if hasattr(self.sync, "read_block"):
            return self.sync.read_block(addr, nwords)
        return await super().read_block(addr, nwords)

    async def write_block(self, addr, words):
        if hasattr(self.sync, "write_block"):
            return self.sync.write_block(addr, words)
        return await super().write_block(addr, words)

    async def wait_cycles(self, n):
        if hasattr(self.sync, "wait_cycles"):
            return self.sync.wait_cycles(n)


class SyncHost:
    """The same driver for a synchronous transport (e.g. a serial link to a board): every
    :class:`Host` method is available as a plain method."""

    def __init__(self, transport, memory=None, memory_map=MEMORY_MAP):
        self._host = Host(_AsyncAdapter(transport), memory, memory_map)

    def __getattr__(self, name):
        attr = getattr(self._host, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args, **kwargs):
            return _run_sync(attr(*args, **kwargs))
        call.__doc__ = attr.__doc__
        return call
