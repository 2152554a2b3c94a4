"""The DMA's cycle model (``sim/dma_timing.py``) against the RTL: cycles measured by
``scripts/bench_dma.py`` (the DMA alone on Verilator with a pipelined memory of latency 16,
16 partitions, FP32, max_burst 256), pinned here, and (long) measured again."""

import pytest

from scripts.bench_dma import KINDS, records, _depth
from scripts.bench_dma import stream_count
from sim.dma_timing import across_partitions, dma_record_cycles, dma_stream_cycles

SIZES = (64, 4096, 65536)
#: RTL cycles (command to done) per (width, kind, direction): one per size of SIZES.
RTL_CYCLES = {
    (32, 'contiguous', 'load'): [107, 4895, 77855],
    (32, 'contiguous', 'store'): [57, 2073, 32793],
    (32, 'strided', 'load'): [107, 4895, 77855],
    (32, 'strided', 'store'): [57, 2073, 32793],
    (32, 'transposing', 'load'): [107, 1067, 16427],
    (32, 'transposing', 'store'): [57, 1050, 16410],
    (64, 'contiguous', 'load'): [36, 540, 8220],
    (64, 'contiguous', 'store'): [19, 523, 8203],
    (64, 'strided', 'load'): [36, 540, 8220],
    (64, 'strided', 'store'): [19, 523, 8203],
    (64, 'transposing', 'load'): [36, 1067, 16427],
    (64, 'transposing', 'store'): [57, 1050, 16410],
    (128, 'contiguous', 'load'): [32, 284, 4124],
    (128, 'contiguous', 'store'): [15, 267, 4107],
    (128, 'strided', 'load'): [32, 374, 5654],
    (128, 'strided', 'store'): [15, 267, 4107],
    (128, 'transposing', 'load'): [32, 1067, 16427],
    (128, 'transposing', 'store'): [57, 1050, 16410],
    (256, 'contiguous', 'load'): [30, 156, 2076],
    (256, 'contiguous', 'store'): [13, 139, 2059],
    (256, 'strided', 'load'): [30, 336, 5136],
    (256, 'strided', 'store'): [13, 139, 2059],
    (256, 'transposing', 'load'): [30, 1067, 16427],
    (256, 'transposing', 'store'): [57, 1050, 16410],
    (512, 'contiguous', 'load'): [29, 92, 1052],
    (512, 'contiguous', 'store'): [12, 75, 1035],
    (512, 'strided', 'load'): [29, 320, 4880],
    (512, 'strided', 'store'): [12, 138, 2058],
    (512, 'transposing', 'load'): [29, 1067, 16427],
    (512, 'transposing', 'store'): [57, 1050, 16410],
}


STREAM_SIZES = (64, 4096)
#: RTL cycles of ``stream_count(size)`` copies back to back (the first handshake to the last
#: done; ``scripts/bench_dma.py`` on Amaranth's simulator, whose single-record cycles equal
#: RTL_CYCLES' above), per (width, kind, direction): one per size of STREAM_SIZES.
RTL_STREAM_CYCLES = {
    (32, 'contiguous', 'load'): [723, 39027], (32, 'contiguous', 'store'): [442, 16570],
    (32, 'strided', 'load'): [723, 39027], (32, 'strided', 'store'): [442, 16570],
    (32, 'transposing', 'load'): [723, 8263], (32, 'transposing', 'store'): [442, 8246],
    (64, 'contiguous', 'load'): [159, 4152], (64, 'contiguous', 'store'): [103, 4135],
    (64, 'strided', 'load'): [159, 4152], (64, 'strided', 'store'): [103, 4135],
    (64, 'transposing', 'load'): [159, 8263], (64, 'transposing', 'store'): [442, 8246],
    (128, 'contiguous', 'load'): [141, 2104], (128, 'contiguous', 'store'): [85, 2087],
    (128, 'strided', 'load'): [141, 2838], (128, 'strided', 'store'): [85, 2087],
    (128, 'transposing', 'load'): [141, 8263], (128, 'transposing', 'store'): [442, 8246],
    (256, 'contiguous', 'load'): [133, 1080], (256, 'contiguous', 'store'): [83, 1063],
    (256, 'strided', 'load'): [133, 2576], (256, 'strided', 'store'): [83, 1091],
    (256, 'transposing', 'load'): [133, 8263], (256, 'transposing', 'store'): [442, 8246],
    (512, 'contiguous', 'load'): [129, 568], (512, 'contiguous', 'store'): [82, 551],
    (512, 'strided', 'load'): [129, 2448], (512, 'strided', 'store'): [82, 1090],
    (512, 'transposing', 'load'): [129, 8263], (512, 'transposing', 'store'): [442, 8246],
}


@pytest.mark.parametrize("key", sorted(RTL_STREAM_CYCLES))
def test_stream_model_matches_rtl(key):
    """``dma_stream_cycles`` within 2 % of the RTL from 4 KiB, 10 % below."""
    width, kind, direction = key
    for size, rtl in zip(STREAM_SIZES, RTL_STREAM_CYCLES[key]):
        model = dma_stream_cycles(records(kind, size, direction == "store"),
                                  stream_count(size), data_width=width,
                                  sbuf_depth=_depth(STREAM_SIZES), max_burst=256, latency=16)
        tol = 0.02 if size >= 4096 else 0.1
        assert abs(model - rtl) <= tol * rtl, (key, size, model, rtl)


def test_stream_contiguous_goal():
    """Contiguous 4 KiB streams reach 90 % of the bus peak from 64 bits up (RTL figures; at
    32 bits there is no across-partitions path)."""
    for (width, kind, direction), cycles in RTL_STREAM_CYCLES.items():
        if kind == "contiguous" and width > 32:
            rate = stream_count(4096) * 4096 / cycles[1]
            assert rate >= 0.9 * width / 8, (width, direction, rate)


@pytest.mark.long
@pytest.mark.parametrize("width", [64, 512])
def test_stream_cycles_measured(width):
    from scripts.bench_dma import measure
    got = measure(width, STREAM_SIZES, simulator="amaranth")
    for (kind, direction, size), (_, stream) in got.items():
        k = STREAM_SIZES.index(size)
        assert stream == RTL_STREAM_CYCLES[(width, kind, direction)][k], (kind, direction,
                                                                          size, stream)


def _model(width, kind, store, size, sizes=SIZES):
    return dma_record_cycles(records(kind, size, store), data_width=width,
                             sbuf_depth=_depth(sizes), max_burst=256, latency=16)


@pytest.mark.parametrize("key", sorted(RTL_CYCLES))
def test_model_matches_rtl(key):
    width, kind, direction = key
    for size, rtl in zip(SIZES, RTL_CYCLES[key]):
        model = _model(width, kind, direction == "store", size)
        tol = 0.02 if size >= 1024 else 0.1
        assert abs(model - rtl) <= tol * rtl, (key, size, model, rtl)


def test_across_partitions_rule():
    rec = records("contiguous", 4096, 0)
    assert across_partitions(rec, data_width=64, sbuf_depth=64)
    assert not across_partitions(rec, data_width=32, sbuf_depth=64)
    assert not across_partitions(rec, data_width=64, sbuf_depth=32)      # SBUF words wrap
    st = records("contiguous", 4096, 1)
    assert across_partitions(st, data_width=512, sbuf_depth=64)
    assert not across_partitions(dict(st, ext_stride0=32), data_width=512, sbuf_depth=64)
    assert dma_record_cycles(dict(rec, n0=0), data_width=64) == 3


@pytest.mark.long
@pytest.mark.parametrize("width", [32, 128, 512])
def test_model_matches_rtl_measured(width):
    from scripts.bench_dma import measure
    got = measure(width, SIZES)
    for (kind, direction, size), rtl in got.items():
        model = _model(width, kind, direction == "store", size)
        tol = 0.02 if size >= 1024 else 0.1
        assert abs(model - rtl) <= tol * rtl, (kind, direction, size, model, rtl)


def test_engine_cost_uses_the_model():
    """``EngineCost(dma_config=...)`` charges a DMA record the model's cycles; without a
    configuration it keeps its bytes-per-cycle estimate."""
    from sim.config import CoreConfig
    from sim.cycles import EngineCost
    from sim.isa import Engine
    rec = records("contiguous", 4096, 0)
    cfg = CoreConfig(rows=16, sbuf_depth=1024, dma_data_width=128, max_burst=256)
    want = dma_record_cycles(rec, data_width=128, sbuf_depth=1024, max_burst=256, latency=16)
    assert EngineCost(dma_config=cfg)(Engine.DMA, rec) == want
    assert EngineCost()(Engine.DMA, rec) == 6 + 4096 // 8
