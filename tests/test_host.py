"""Fast checks of the host driver (sim/host.py) against a pure-Python model of the register
block, and of its external-memory helpers against numpy/ml_dtypes references:

* ``pack_elements``/``unpack_elements`` against numpy's own little-endian ``tobytes`` and
  ml_dtypes' narrow float types;
* ``dma_model`` against numpy ``as_strided`` views (positive strides) and a hand-computed case;
* ``dma_check`` on directed window cases;
* the driver, async (``asyncio.run``) and sync (``SyncHost``) over the same fake transport.
"""

import asyncio
import random

import numpy as np
import pytest
import ml_dtypes

from sim.dtypes import Format, STORAGE_BITS
from sim.errors import ErrorCode, ERRORS
from sim.memmap import (MEMORY_MAP, CTRL_START, CTRL_CLEAR, CTRL_CLEAR_COUNTERS, STATUS_BUSY,
                        STATUS_DONE, STATUS_ERROR, DMA_PERM_READ, DMA_PERM_WRITE, AXI_RESP)
from sim import host as H


# --- external-memory layout --------------------------------------------------------------

NUMPY_STORAGE = {8: "<u1", 16: "<u2", 32: "<u4"}


@pytest.mark.parametrize("fmt", list(Format))
def test_pack_matches_numpy(fmt):
    rng = np.random.default_rng(int(fmt))
    bits = STORAGE_BITS[fmt]
    vals = rng.integers(0, 1 << bits, size=37, dtype=np.uint64)
    ref = vals.astype(NUMPY_STORAGE[bits]).tobytes()
    assert H.pack_elements(vals, fmt) == ref
    back = H.unpack_elements(ref, fmt)
    assert back.dtype == np.uint32 and (back == vals).all()


@pytest.mark.parametrize("fmt, dtype", [
    (Format.BF16, ml_dtypes.bfloat16), (Format.FP16, np.float16),
    (Format.FP8_E4M3, ml_dtypes.float8_e4m3fn), (Format.FP8_E5M2, ml_dtypes.float8_e5m2),
    (Format.FP8_E3M4, ml_dtypes.float8_e3m4), (Format.FP32, np.float32), (Format.INT8, np.int8),
])
def test_pack_matches_ml_dtypes(fmt, dtype):
    """Narrow values low-aligned in 32-bit words pack to exactly the bytes numpy stores."""
    x = np.linspace(-3, 3, 29).astype(dtype)
    width = np.dtype(dtype).itemsize
    words = x.view(NUMPY_STORAGE[8 * width]).astype(np.uint32)
    assert H.pack_elements(words, fmt) == x.tobytes()
    assert (H.unpack_elements(x.tobytes(), fmt) == words).all()


def test_pack_errors():
    with pytest.raises(ValueError, match="fmt must be a sim.dtypes.Format code 0..7, not 9"):
        H.pack_elements([1], 9)
    with pytest.raises(ValueError, match="data has 3 bytes, 4 needed"):
        H.unpack_elements(b"abc", Format.BF16, 2)


# --- DMA golden model ----------------------------------------------------------------------

def _rec(**kw):
    base = dict(ext_addr=0, ext_stride0=1, ext_stride1=0, ext_part_stride=0, n0=1, n1=1,
                part_start=0, part_count=1, sbuf_addr=0, fmt=int(Format.INT8), store=0)
    base.update(kw)
    return base


@pytest.mark.parametrize("seed", range(12))
def test_dma_model_load_matches_as_strided(seed):
    rng = random.Random(seed)
    fmt = rng.choice(list(Format))
    es = STORAGE_BITS[fmt] // 8
    P, depth = 5, 64
    n0, n1 = rng.randrange(1, 9), rng.randrange(1, 4)
    pc = rng.randrange(1, P + 1)
    ps0 = rng.randrange(1, 3)
    s0, s1 = es * rng.randrange(1, 4), es * rng.randrange(1, 30)
    ps = es * rng.randrange(1, 200)
    ext_addr = es * rng.randrange(0, 100)
    ext = bytearray(rng.getrandbits(8) for _ in range(8192))
    sbuf = np.zeros((P, depth), np.uint32)
    rec = _rec(ext_addr=ext_addr, ext_stride0=s0, ext_stride1=s1, ext_part_stride=ps, n0=n0,
               n1=n1, part_start=min(ps0, P - pc), part_count=pc, sbuf_addr=rng.randrange(64),
               fmt=int(fmt))
    H.dma_model(rec, ext, sbuf)
    elems = np.frombuffer(bytes(ext), dtype=NUMPY_STORAGE[8 * es])
    view = np.lib.stride_tricks.as_strided(elems[ext_addr // es:], shape=(pc, n1, n0),
                                           strides=(ps, s1, s0))
    for p in range(pc):
        flat = view[p].reshape(-1)
        for k in range(n0 * n1):
            assert sbuf[rec["part_start"] + p, (rec["sbuf_addr"] + k) % depth] == flat[k]


def test_dma_model_store_and_wrap():
    ext = bytearray(64)
    sbuf = np.array([[0x11223344, 0xAABBCCDD, 0x55667788, 0]], dtype=np.uint32)
    # BF16 store with a negative inner stride: element j at 20 - 2*j.
    H.dma_model(_rec(ext_addr=20, ext_stride0=(-2) & 0xFFFFFFFF, n0=3, fmt=int(Format.BF16),
                     store=1, sbuf_addr=0), ext, sbuf)
    assert ext[16:22] == bytes([0x88, 0x77, 0xDD, 0xCC, 0x44, 0x33])
    # SBUF address wraps modulo depth.
    sbuf2 = np.zeros((1, 4), np.uint32)
    H.dma_model(_rec(ext_addr=16, n0=3, sbuf_addr=3), ext, sbuf2)
    assert list(sbuf2[0]) == [0x77, 0xDD, 0, 0x88]


def test_dma_check_cases():
    wins = [(0x1000, 0x1FFF, DMA_PERM_READ), (0x2000, 0x2FFF, DMA_PERM_WRITE)]
    ok = _rec(ext_addr=0x1000, ext_stride0=4, n0=1024, fmt=int(Format.FP32))
    assert H.dma_check(ok, wins, 4) == (ErrorCode.NONE, 0)
    assert H.dma_check(dict(ok, n0=1025), wins, 4) == (ErrorCode.DMA_WINDOW, 0x1000)
    assert H.dma_check(dict(ok, store=1), wins, 4) == (ErrorCode.DMA_WINDOW, 0x1000)
    assert H.dma_check(dict(ok, ext_addr=0x2000, store=1), wins, 4) == (ErrorCode.NONE, 0)
    # Rows straddling two windows are refused even if each byte is in some window.
    assert H.dma_check(dict(ok, ext_addr=0x1F00, n0=128), wins + [(0x2000, 0x2FFF, 1)], 4) \
        == (ErrorCode.DMA_WINDOW, 0x1F00)
    # Second partition's row outside: the reported address is that row's start.
    assert H.dma_check(dict(ok, n0=4, part_count=2, ext_part_stride=0x1000), wins, 4) == \
        (ErrorCode.DMA_WINDOW, 0x2000)
    assert H.dma_check(dict(ok, ext_addr=0x1002), wins, 4) == (ErrorCode.DMA_ALIGN, 0x1002)
    assert H.dma_check(dict(ok, part_start=3, part_count=2, sbuf_addr=7), wins, 4) == \
        (ErrorCode.SBUF_RANGE, 7)
    assert H.dma_check(dict(ok, n1=0), [], 4) == (ErrorCode.NONE, 0)
    # Wrap-around past 2**32 is never inside a window.
    assert H.dma_check(dict(ok, ext_addr=0xFFFFFFFC, n0=2), [(0, 0xFFFFFFFF, 3)], 4)[0] == \
        ErrorCode.DMA_WINDOW
    # Negative inner stride: the bounding box is checked.
    neg = _rec(ext_addr=0x1010, ext_stride0=(-4) & 0xFFFFFFFF, n0=5, fmt=int(Format.FP32))
    assert H.dma_check(neg, wins, 4) == (ErrorCode.NONE, 0)
    assert H.dma_check(dict(neg, n0=6), wins, 4) == (ErrorCode.DMA_WINDOW, 0x1010)


# --- the driver over a model of the register block -----------------------------------------

class FakeCore:
    """A Python model of the register block (sim/memmap.py rules) plus a trivial core."""

    def __init__(self, mm=MEMORY_MAP):
        self.mm = mm
        self.regs = {r.offset: (r.value if r.value is not None else r.reset)
                     for r in mm.registers}
        self.mem = {}
        self.busy = False
        self.refused = 0
        self.run_cycles = 0
        self.pending_error = None
        self.done = False
        self.error = None
        self.starts = 0

    def _find(self, addr):
        for r in self.mm.registers:
            if r.offset == addr & ~3:
                return r, None
        for w in self.mm.windows:
            if w.base <= addr < w.base + 4 * w.words:
                return None, w
        return None, None

    def read(self, addr):
        r, w = self._find(addr)
        if r is None and w is None:
            return 0, AXI_RESP["DECERR"]
        if w is not None:
            if self.busy:
                return 0, AXI_RESP["SLVERR"]
            return self.mem.get(addr & ~3, 0), 0
        if r.name == "STATUS":
            v = (STATUS_BUSY if self.busy else 0) | (STATUS_DONE if self.done else 0) | \
                (STATUS_ERROR if self.error else 0)
            return v, 0
        if r.name in ("ERR_CODE", "ERR_ADDR", "ERR_INFO", "ERR_COUNT"):
            e = self.error or (0, 0, 0)
            return {"ERR_CODE": e[0], "ERR_ADDR": e[1], "ERR_INFO": e[2],
                    "ERR_COUNT": int(bool(self.error))}[r.name], 0
        if r.name == "LOCK_REFUSED":
            return self.refused, 0
        if r.access == "wo":
            return 0, 0
        return self.regs[r.offset], 0

    def write(self, addr, value):
        r, w = self._find(addr)
        if r is None and w is None:
            return AXI_RESP["DECERR"]
        locked = w.locked if w is not None else r.locked
        if locked and self.busy:
            self.refused += 1
            return AXI_RESP["SLVERR"]
        if w is not None:
            self.mem[addr & ~3] = value
            return 0
        if r.access == "ro":
            return AXI_RESP["SLVERR"]
        if r.name == "CTRL":
            if value & CTRL_START and not self.busy:
                self.busy, self.done, self.starts = True, False, self.starts + 1
                self.cycles_left = self.run_cycles
            if value & CTRL_CLEAR:
                self.done, self.error = False, None
            if value & CTRL_CLEAR_COUNTERS:
                self.refused = 0
            return 0
        self.regs[r.offset] = value & ((1 << r.width) - 1)
        return 0

    def tick(self, n):
        if self.busy:
            self.cycles_left -= n
            if self.cycles_left <= 0:
                self.busy, self.done = False, True
                if self.pending_error:
                    self.error = self.pending_error


class SyncFake:
    """A synchronous transport (like the serial link to a board)."""

    def __init__(self, core):
        self.core = core

    def read32(self, addr):
        v, resp = self.core.read(addr)
        if resp:
            raise H.BusError(addr, resp, write=False)
        return v

    def write32(self, addr, value):
        resp = self.core.write(addr, value)
        if resp:
            raise H.BusError(addr, resp, write=True)

    def wait_cycles(self, n):
        self.core.tick(n)


class AsyncFake(H.Transport):
    def __init__(self, core):
        self.s = SyncFake(core)

    async def read32(self, addr):
        await asyncio.sleep(0)
        return self.s.read32(addr)

    async def write32(self, addr, value):
        await asyncio.sleep(0)
        return self.s.write32(addr, value)

    async def wait_cycles(self, n):
        await asyncio.sleep(0)
        self.s.wait_cycles(n)


class Mem:
    def __init__(self):
        self.data = bytearray(4096)

    def read(self, addr, n):
        return bytes(self.data[addr:addr + n])

    def write(self, addr, data):
        self.data[addr:addr + len(data)] = data


def _both_drivers(host_call):
    """Run the same scenario with the async driver and with SyncHost."""
    results = []
    core = FakeCore()
    host = H.Host(AsyncFake(core), Mem())

    def call(name, *a, **k):
        return asyncio.run(getattr(host, name)(*a, **k))
    results.append(host_call(call, core))
    core = FakeCore()
    sync = H.SyncHost(SyncFake(core), Mem())
    results.append(host_call(lambda name, *a, **k: getattr(sync, name)(*a, **k), core))
    return results


def test_driver_identify_and_loads():
    def scenario(call, core):
        core.regs[MEMORY_MAP.register("CONFIG0").offset] = 8 | 4 << 8 | 4 << 16
        ident = call("identify")
        assert (ident["rows"], ident["cols"], ident["dma_windows"]) == (8, 4, 4)
        call("load_program", [0x1122334455667788, 7], base=2)
        assert call("read_program", 5, base=4) == [0x55667788, 0x11223344, 7, 0, 0]
        call("load_program_words", [9], base=3)
        assert call("read_program", 1, base=3) == [9]
        call("load_lut", [1, 2, 3], base=10)
        assert call("read_lut", 3, base=10) == [1, 2, 3]
        with pytest.raises(ValueError, match="do not fit the LUT window"):
            call("load_lut", [0] * 10, base=2040)
        call("set_window", 1, 0x100, 0x1FF, read=True, write=False)
        assert core.regs[MEMORY_MAP.register("DMA_WIN1_PERM").offset] == DMA_PERM_READ
        with pytest.raises(ValueError, match="window index must be in 0..3, not 4"):
            call("set_window", 4, 0, 1)
        call("write_tensor", 0x40, [0x3F80, 0xBF80], Format.BF16)
        assert list(call("read_tensor", 0x40, 2, Format.BF16)) == [0x3F80, 0xBF80]
        return "ok"
    assert _both_drivers(scenario) == ["ok", "ok"]


def test_driver_identify_rejects_other_devices():
    core = FakeCore()
    core.regs[0] = 0x12345678
    with pytest.raises(IOError, match="no core found: ID reads 0x12345678"):
        H.SyncHost(SyncFake(core)).identify()


def test_driver_lock_and_run():
    def scenario(call, core):
        core.run_cycles = 500
        call("start", pc=3)
        assert core.starts == 1 and core.busy
        with pytest.raises(H.BusError, match="answered SLVERR"):
            call("set_seed", 5)
        with pytest.raises(H.BusError):
            call("load_program", [1])
        call("write", "SCRATCH", 9)               # never locked
        st = call("wait", timeout_cycles=10_000, poll_cycles=100)
        assert st["done"] and not st["busy"]
        assert call("counters")["lock_refused"] == 2
        call("clear_counters")
        assert call("counters")["lock_refused"] == 0
        core.run_cycles = 10 ** 9
        call("start")
        with pytest.raises(TimeoutError, match="core still busy after 1000 cycles"):
            call("wait", timeout_cycles=1000, poll_cycles=100)
        return "ok"
    assert _both_drivers(scenario) == ["ok", "ok"]


@pytest.mark.parametrize("code", [c for c in ErrorCode if c != ErrorCode.NONE])
def test_driver_errors_become_named_exceptions(code):
    def scenario(call, core):
        core.run_cycles = 50
        core.pending_error = (int(code), 0xABC0 + int(code), 0x77)
        call("start")
        with pytest.raises(H.AcceleratorError) as info:
            call("wait", timeout_cycles=1000, poll_cycles=10)
        e = info.value
        assert type(e) is H.ERROR_CLASSES[code]
        assert e.code == code and e.address == 0xABC0 + int(code) and e.info == 0x77
        assert ERRORS[code].name in str(e) and f"0x{0xABC0 + int(code):08x}" in str(e)
        call("clear")
        assert call("error") is None
        return "ok"
    assert _both_drivers(scenario) == ["ok", "ok"]


def test_unknown_error_code_still_reported():
    core = FakeCore()
    core.error = (15, 1, 2)
    err = H.SyncHost(SyncFake(core)).error()
    assert type(err) is H.AcceleratorError and "unknown error 15" in str(err)


def test_synchost_refuses_suspending_transport():
    class Suspending(H.Transport):
        async def read32(self, addr):
            await asyncio.sleep(0)
            return 0
    sync = H.SyncHost.__new__(H.SyncHost)
    sync._host = H.Host(Suspending())
    with pytest.raises(RuntimeError, match="the transport suspended"):
        sync.read("ID")
