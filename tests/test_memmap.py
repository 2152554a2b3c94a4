"""Fast checks of the memory-map description, its docs, the error-code table and the parameter
checks of the bus/DMA/protection blocks (no simulator)."""

import json

import pytest

from sim.errors import ERRORS, ErrorCode, describe, SEQUENCER_ERROR_MAP, ERROR_CODE_BITS
from sim.memmap import MEMORY_MAP, build_memory_map, PERF_COUNTERS
from sim.isa import ErrorBit


def _ranges(mm):
    out = [(r.offset, r.offset + 4, r.name) for r in mm.registers]
    out += [(w.base, w.base + 4 * w.words, w.name) for w in mm.windows]
    return sorted(out)


@pytest.mark.parametrize("n", [1, 4, 8])
def test_map_is_consistent(n):
    mm = build_memory_map(n)
    ranges = _ranges(mm)
    for (a0, a1, n0), (b0, b1, n1) in zip(ranges, ranges[1:]):
        assert a1 <= b0, f"{n0} overlaps {n1}"
    assert ranges[-1][1] <= 1 << mm.addr_width
    names = [r.name for r in mm.registers]
    assert len(names) == len(set(names))
    for r in mm.registers:
        assert r.offset % 4 == 0
        assert r.access in ("ro", "rw", "wo")
        assert not (r.locked and r.access == "ro")
        for f in r.fields:
            assert 0 <= f.lsb and f.lsb + f.width <= 32
    for w in mm.windows:
        assert w.words & (w.words - 1) == 0 and w.base % (4 * w.words) == 0
    assert sum(1 for r in mm.registers if r.name.startswith("DMA_WIN")) == 3 * n


def test_what_the_lock_covers():
    """Issue 11: control store, tables, seeds, program memory and windows are locked; status
    and counters are not."""
    mm = MEMORY_MAP
    locked = {r.name for r in mm.registers if r.locked}
    assert {"SEED", "START_PC", "WATCHDOG_LIMIT"} <= locked
    assert all(f"DMA_WIN{i}_{k}" in locked for i in range(mm.dma_windows)
               for k in ("BASE", "LIMIT", "PERM"))
    assert all(w.locked for w in mm.windows)
    for name in ("STATUS", "ERR_CODE", "ERR_ADDR", "CTRL", "LOCK_REFUSED", "IRQ_ENABLE"):
        assert not mm.register(name).locked
    assert all(not mm.register(f"PERF_{n.upper()}").locked for n, _ in PERF_COUNTERS)


@pytest.mark.parametrize("value, exc, msg", [
    (0, ValueError, "dma_windows must be in 1..8, not 0"),
    (9, ValueError, "dma_windows must be in 1..8, not 9"),
    ("4", TypeError, "dma_windows must be an integer, not '4'"),
    (True, TypeError, "dma_windows must be an integer, not True"),
])
def test_build_memory_map_errors(value, exc, msg):
    with pytest.raises(exc, match=msg.replace(".", r"\.")):
        build_memory_map(value)


def test_json_is_the_description():
    from scripts.gen_memmap import memory_map_json
    d = json.loads(memory_map_json())
    assert d == json.loads(json.dumps(MEMORY_MAP.to_dict()))
    assert [r["offset"] for r in d["registers"]] == [r.offset for r in MEMORY_MAP.registers]


def test_docs_up_to_date():
    from scripts.gen_memmap import main
    assert main(["--check"]) == 0, "run python -m scripts.gen_memmap"


def test_error_table():
    assert set(ERRORS) == set(ErrorCode)
    assert max(ErrorCode) < 1 << ERROR_CODE_BITS
    assert describe(ErrorCode.WATCHDOG).name == "watchdog timeout"
    assert describe(15).name == "unknown error 15"
    assert set(SEQUENCER_ERROR_MAP) == {e.name for e in ErrorBit}
    text = open("docs/errors.md").read()
    for code, e in ERRORS.items():
        assert f"| {int(code)} | {e.name} |" in text


# --- RTL generated from the description (elaboration only) ---------------------------------

def test_register_block_ports_follow_the_map():
    from amaranth.hdl import Shape
    from rtl.bus.axi_lite import AXI4LiteRegisters
    regs = AXI4LiteRegisters(MEMORY_MAP)
    members = regs.signature.members
    for r in MEMORY_MAP.registers:
        if r.access == "rw":
            assert Shape.cast(members[r.port].shape).width == r.width
            assert f"{r.port}_we" in members
        elif r.access == "ro" and r.value is None and not r.internal:
            assert r.port in members
        elif r.value is not None:
            assert r.port not in members            # constants have no port
        else:
            assert members[r.port].flow.name == "Out"   # internal (LOCK_REFUSED): an output
    for w in MEMORY_MAP.windows:
        assert Shape.cast(members[w.port].signature.members["addr"].shape).width == w.addr_bits
    with pytest.raises(TypeError, match="memory_map must be a sim.memmap.MemoryMap, not 3"):
        AXI4LiteRegisters(3)


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(partitions=0, sbuf_depth=64), ValueError,
     "partitions must be an integer from 1 to 256, not 0"),
    (dict(partitions=4.0, sbuf_depth=64), TypeError, "partitions must be an integer, not 4.0"),
    (dict(partitions=4, sbuf_depth=48), ValueError,
     "sbuf_depth must be a power of two from 2 to 65536, not 48"),
    (dict(partitions=4, sbuf_depth=64, data_width=48), ValueError,
     "data_width must be a power of two from 32 to 512, not 48"),
    (dict(partitions=4, sbuf_depth=64, max_burst=3), ValueError,
     "max_burst must be a power of two from 1 to 256, not 3"),
    (dict(partitions=4, sbuf_depth=64, max_outstanding=0), ValueError,
     "max_outstanding must be an integer from 1 to 16, not 0"),
    (dict(partitions=4, sbuf_depth=64, windows=9), ValueError,
     "windows must be an integer from 1 to 8, not 9"),
])
def test_dma_parameter_errors(kwargs, exc, msg):
    from rtl.dma.dma import DMA
    with pytest.raises(exc, match=msg):
        DMA(**kwargs)


def test_dma_record_is_the_isa_record():
    from rtl.dma.dma import DmaRecord
    from sim.isa import DMA_RECORD, field_offsets
    offs = field_offsets(DMA_RECORD)
    for name, (off, width) in offs.items():
        assert DmaRecord[name].offset == off and DmaRecord[name].width == width


@pytest.mark.parametrize("make, exc, msg", [
    (lambda: __import__("rtl.core.watchdog", fromlist=["W"]).Watchdog(0), ValueError,
     "width must be an integer from 1 to 64, not 0"),
    (lambda: __import__("rtl.core.watchdog", fromlist=["W"]).Watchdog("8"), TypeError,
     "width must be an integer, not '8'"),
    (lambda: __import__("rtl.core.status", fromlist=["S"]).ErrorStatus(17), ValueError,
     "sources must be an integer from 1 to 16, not 17"),
    (lambda: __import__("rtl.core.status", fromlist=["S"]).ErrorStatus(None), TypeError,
     "sources must be an integer, not None"),
    (lambda: __import__("rtl.bus.axi", fromlist=["A"]).AXI4Signature(addr_width=32,
                                                                      data_width=24),
     ValueError, "data_width must be one of 32, 64, 128, 256, 512, 1024, not 24"),
    (lambda: __import__("rtl.bus.axi", fromlist=["A"]).AXI4LiteSignature(addr_width=0),
     ValueError, "addr_width must be an integer from 1 to 64, not 0"),
])
def test_protection_parameter_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()
