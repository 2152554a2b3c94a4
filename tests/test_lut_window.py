"""The host's LUT window (``sim.memmap`` LUT_PAGE and the window decode, ``sim.host``): every
cfg address of a 1024-entry LUT has exactly one (page, window word), the decode gives it back,
and ``SyncHost.write_lut`` / ``read_lut_cfg`` reach every entry of a golden-model LUT through a
transport that decodes the window as ``rtl/core/top.py`` does. The same on the RTL:
``cocotb_tests/test_core.py::test_lut_window_every_entry``."""

import numpy as np
import pytest

from sim.host import SyncHost
from sim.lut import compile_table
from sim.memmap import (LUT_PAGE_OFFSET, LUT_WINDOW_BASE, LUT_WINDOW_WORDS, MEMORY_MAP,
                        lut_cfg_address, lut_window_address)
from sim.tables import SHIPPED
from sim.vector import (MAX_BINADES, Hdr, Status, VectorEngineModel, coef_addr, desc_addr,
                        hdr_addr, status_addr)


def _all_cfg_addresses(depth):
    out = [coef_addr(b, e, w) for b in (0, 1) for e in range(depth) for w in range(3)]
    out += [desc_addr(b, s, i) for b in (0, 1) for s in (0, 1) for i in range(MAX_BINADES)]
    out += [hdr_addr(b, r) for b in (0, 1) for r in Hdr]
    return out + [status_addr(r) for r in Status]


def test_window_address_round_trip():
    """Every register of a 1024-entry LUT maps to one (page, word) inside the window, and the
    decode gives the address back; no two addresses share a (page, word)."""
    seen = {}
    for a in _all_cfg_addresses(1024):
        page, word = lut_window_address(a)
        assert 0 <= page < 16 and 0 <= word < LUT_WINDOW_WORDS
        assert lut_cfg_address(page, word) == a
        assert (page, word) not in seen, (hex(a), hex(seen.get((page, word), 0)))
        seen[(page, word)] = a
    assert lut_window_address(coef_addr(1, 1023, 2)) == (15, 1024 + 0xFE)
    assert lut_window_address(coef_addr(0, 63, 2)) == (0, 0xFE)        # page 0: as before


def test_window_address_rejects():
    for bad in (-1, 1 << 16, 0x3000, 0x7000, 0xF000):
        with pytest.raises(ValueError, match="cfg_addr"):
            lut_window_address(bad)


def test_memory_map_has_the_page_register():
    reg = MEMORY_MAP.register("LUT_PAGE") if hasattr(MEMORY_MAP, "register") else \
        next(r for r in MEMORY_MAP.registers if r.name == "LUT_PAGE")
    assert reg.offset == LUT_PAGE_OFFSET and reg.width == 4 and reg.locked
    win = MEMORY_MAP.window("LUT")
    assert (win.base, win.words) == (LUT_WINDOW_BASE, LUT_WINDOW_WORDS)


class _CoreLutWindow:
    """A synchronous transport with the core's LUT window and LUT_PAGE register in front of a
    golden-model LUT (``VectorEngineModel`` cfg port)."""

    def __init__(self, depth):
        self.model = VectorEngineModel(4, depth=depth)
        self.page = 0
        self.page_writes = 0

    def _cfg(self, addr):
        assert LUT_WINDOW_BASE <= addr < LUT_WINDOW_BASE + 4 * LUT_WINDOW_WORDS, hex(addr)
        return lut_cfg_address(self.page, (addr - LUT_WINDOW_BASE) // 4)

    def write32(self, addr, value):
        if addr == LUT_PAGE_OFFSET:
            self.page = value & 0xF
            self.page_writes += 1
        else:
            self.model.cfg_write(self._cfg(addr), value)

    def read32(self, addr):
        if addr == LUT_PAGE_OFFSET:
            return self.page
        return self.model.cfg_read(self._cfg(addr))


@pytest.mark.parametrize("depth", [64, 1024])
def test_host_reaches_every_entry(depth):
    """A full table load and read-back of both banks through the host window, the last entry
    included; LUT_PAGE ends at 0; no access sets the LUT's error flag."""
    t = _CoreLutWindow(depth)
    host = SyncHost(t)
    rng = np.random.default_rng(depth)
    addrs = [coef_addr(b, e, w) for b in (0, 1) for e in range(depth) for w in range(3)]
    words = [int(x) for x in rng.integers(0, 1 << 32, len(addrs), dtype=np.uint64)]
    host.write_lut(zip(addrs, words))
    assert host.read_lut_cfg(addrs) == words
    assert [int(t.model.banks[1].coef[depth - 1, w]) for w in range(3)] == words[-3:]
    assert t.page == 0 and t.model.error == 0
    assert (t.page_writes > 0) == (depth > 64)
    assert host.read_lut_cfg([status_addr(Status.DEPTH)]) == [depth]


def test_host_loads_a_compiled_table():
    """A shipped table compiled for 1024 entries, loaded with ``write_lut(table.writes(1))``,
    evaluates as the table itself."""
    tab = compile_table(SHIPPED["gelu"], depth=1024, budget=1024)
    t = _CoreLutWindow(1024)
    SyncHost(t).write_lut(tab.writes(1))
    ref = VectorEngineModel(4, depth=1024)
    ref.load_table(1, tab.writes(1))
    assert np.array_equal(t.model.banks[1].coef, ref.banks[1].coef)
    assert np.array_equal(t.model.banks[1].desc, ref.banks[1].desc)
