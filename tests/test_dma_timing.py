"""The DMA's cycle model (``sim/dma_timing.py``) against the RTL: cycles measured by
``scripts/bench_dma.py`` (the DMA alone on Verilator with a pipelined memory of latency 16,
16 partitions, FP32, max_burst 256), pinned here, and (long) measured again."""

import pytest

from scripts.bench_dma import KINDS, records, _depth
from sim.dtypes import STORAGE_BITS
from scripts.bench_dma import stream_count
from sim.dma_timing import across_partitions, dma_record_cycles, dma_stream_cycles

SIZES = (64, 4096, 65536)
#: RTL cycles (command to done) per (width, kind, direction): one per size of SIZES.
RTL_CYCLES = {
    (32, 'contiguous', 'load'): [44, 1052, 16412],
    (32, 'contiguous', 'store'): [27, 1035, 16395],
    (32, 'strided', 'load'): [44, 1052, 16412],
    (32, 'strided', 'store'): [27, 1035, 16395],
    (32, 'transposing', 'load'): [44, 1067, 16427],
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
    (32, 'contiguous', 'load'): [199, 8248], (32, 'contiguous', 'store'): [167, 8231],
    (32, 'strided', 'load'): [199, 8248], (32, 'strided', 'store'): [167, 8231],
    (32, 'transposing', 'load'): [199, 8263], (32, 'transposing', 'store'): [442, 8246],
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
    """Contiguous 4 KiB streams reach 90 % of the bus peak at every width (RTL figures)."""
    for (width, kind, direction), cycles in RTL_STREAM_CYCLES.items():
        if kind == "contiguous":
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
    assert across_partitions(rec, data_width=32, sbuf_depth=64)
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
    for (kind, direction, size), (rtl, _) in got.items():
        assert rtl == RTL_CYCLES[(width, kind, direction)][SIZES.index(size)], (kind, size)
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


def _random_records(rng, n, depth):
    """``n`` DMA records of every layout (across partitions contiguous or column-strided,
    along partitions), loads and stores, 1 to 16 partitions, 1- to 4-byte elements."""
    from sim.dtypes import Format
    recs = []
    for _ in range(n):
        fmt = rng.choice([Format.FP8_E4M3, Format.BF16, Format.FP32])
        es = STORAGE_BITS[fmt] // 8
        pc, n0, n1 = rng.choice([1, 3, 8, 16]), rng.choice([1, 4, 8, 32]), rng.choice([1, 2])
        kind = rng.choice(["contiguous", "contiguous", "strided", "along"])
        ps, s0 = (n0 * n1 * es * 2, es) if kind == "along" else \
            (es, pc * es * (2 if kind == "strided" else 1))
        store = int(rng.random() < 0.4)
        recs.append(dict(ext_addr=rng.randrange(0, 4096, es) + 0x8000 * store, ext_stride0=s0,
                         ext_stride1=n0 * s0 + rng.choice([0, 64]), ext_part_stride=ps,
                         n0=n0, n1=n1, part_start=0, part_count=pc,
                         sbuf_addr=rng.randrange(0, depth - n0 * n1 + 1), fmt=int(fmt),
                         store=store))
    return recs


def _timeline(width, latency, depth, recs, gaps):
    """``[(take, done), ...]`` of ``DmaTimeline`` for ``recs`` offered as
    ``measure_sequence`` offers them (record ``k`` ``gaps[k]`` cycles after ``k - 1`` is
    taken), and the cycles of the records one after another."""
    from sim.dma_timing import DmaTimeline
    kw = dict(data_width=width, sbuf_depth=depth, max_burst=256, latency=latency)
    tl = DmaTimeline(**kw)
    out, valid, serial = [], 0, 0
    for r, g in zip(recs, gaps):
        out.append(tl.add(r, valid + g))
        valid = out[-1][0] + 1
        serial += g + dma_record_cycles(r, **kw)
    return out, serial


#: Bench records back to back, both directions, every layout (``records``).
SEQUENCE = [("contiguous", 256, 0), ("contiguous", 64, 0), ("contiguous", 1024, 0),
            ("contiguous", 1024, 1), ("contiguous", 256, 1), ("strided", 1024, 1),
            ("strided", 256, 0), ("contiguous", 64, 0), ("transposing", 256, 0),
            ("transposing", 64, 1), ("contiguous", 1024, 1), ("contiguous", 64, 0)]


@pytest.mark.parametrize("width, latency", [(32, 16), (128, 3), (128, 16), (512, 16)])
def test_timeline_matches_rtl(width, latency):
    """``DmaTimeline`` against the DMA (Amaranth's simulator, ``measure_sequence``) on the
    records of SEQUENCE back to back, then with pauses: each take and done within 3 cycles
    plus the single-record model's error (``dma_record_cycles`` within 10 % below 4 KiB),
    the whole sequence within 2 %; the records overlap (one after another takes at least 7
    cycles per record longer: their setup and checks hide behind the data before them)."""
    from scripts.bench_dma import measure_sequence
    recs = [records(k, n, st) for k, n, st in SEQUENCE]
    kw = dict(data_width=width, sbuf_depth=64, max_burst=256, latency=latency)
    for gaps in ([0] * len(recs), [0, 5, 0, 1, 30, 0, 2, 0, 0, 9, 0, 1]):
        rtl = measure_sequence(width, recs, latency=latency, sbuf_depth=64, gaps=gaps)
        model, serial = _timeline(width, latency, 64, recs, gaps)
        slack = 0
        for k, (r, (take, done), (t, d)) in enumerate(zip(recs, rtl, model)):
            print(k, SEQUENCE[k], "rtl", take, done, "model", t, d)
            if SEQUENCE[k][0] == "transposing":
                slack += 0.1 * dma_record_cycles(r, **kw)
            assert abs(t - take) <= 3 + slack and abs(d - done) <= 3 + slack, (k, gaps)
        assert abs(d - rtl[-1][1]) <= 0.02 * rtl[-1][1], (d, rtl[-1][1])
        assert serial - rtl[-1][1] >= 7 * (len(recs) - 1), (serial, rtl[-1][1])


def test_timeline_paced_records():
    """Records bound by their bursts' issue (a column per segment: two cycles each) behind a
    record whose bursts hold the slots for long (a single partition: a beat's eight columns
    take eight cycles): the issue-bound record runs as alone from the end of the data before
    it, and the front takes the next one when its late bursts are issued. Each take and done
    within 3 cycles of the DMA's (Amaranth's simulator)."""
    from scripts.bench_dma import measure_sequence
    from sim.dtypes import Format
    rec = dict(ext_addr=0, ext_stride0=2, ext_stride1=16, ext_part_stride=2, n0=8, n1=8,
               part_start=0, part_count=1, sbuf_addr=0, fmt=int(Format.BF16), store=0)
    recs = [rec, dict(rec, part_count=3, ext_addr=0x1000, sbuf_addr=100, ext_stride1=20),
            dict(rec, part_count=3, ext_addr=0x2000, sbuf_addr=200, ext_stride1=20), rec,
            dict(rec, part_count=2, ext_addr=0x3000, sbuf_addr=300)]
    rtl = measure_sequence(128, recs, latency=3, sbuf_depth=512)
    model, serial = _timeline(128, 3, 512, recs, [0] * len(recs))
    for k, ((take, done), (t, d)) in enumerate(zip(rtl, model)):
        print(k, "rtl", take, done, "model", t, d)
        assert abs(t - take) <= 3 and abs(d - done) <= 3, k


@pytest.mark.parametrize("width, latency, seed", [(32, 3, 5), (128, 3, 1), (128, 16, 2),
                                                  (64, 3, 3), (512, 8, 4)])
def test_timeline_matches_rtl_random(width, latency, seed):
    """``DmaTimeline`` against the DMA on a seeded random sequence of records of every layout
    (some of whose single-record cycles the model gives only within 10-15 %), offered back to
    back or after random pauses: the time from one record's done to the next one's within
    6 cycles plus 15 % of the record alone, the whole sequence within 3 %."""
    import random
    from scripts.bench_dma import measure_sequence
    rng = random.Random(seed)
    depth = 256
    recs = _random_records(rng, 14, depth)
    gaps = [0] + [rng.choice([0, 0, 0, 1, 7, 40]) for _ in recs[1:]]
    rtl = measure_sequence(width, recs, latency=latency, sbuf_depth=depth, gaps=gaps)
    model, _ = _timeline(width, latency, depth, recs, gaps)
    kw = dict(data_width=width, sbuf_depth=depth, max_burst=256, latency=latency)
    prev_r = prev_m = 0
    for k, (r, (take, done), (t, d)) in enumerate(zip(recs, rtl, model)):
        print(k, r, "rtl", take, done, "model", t, d)
        alone = dma_record_cycles(r, **kw)
        assert abs((d - prev_m) - (done - prev_r)) <= 6 + 0.15 * alone, k
        prev_r, prev_m = done, d
    assert abs(d - rtl[-1][1]) <= 0.03 * rtl[-1][1], (d, rtl[-1][1])


def test_timeline_rules():
    """The overlap rules on the model alone: a record of the same direction is taken long
    before the one ahead is done and its data follow; one of the other direction starts its
    bursts only when the one ahead is done; a record alone costs ``dma_record_cycles``."""
    from sim.dma_timing import DmaTimeline
    kw = dict(data_width=128, sbuf_depth=256, max_burst=256, latency=16)
    ld, st = records("contiguous", 4096, 0), records("contiguous", 4096, 1)
    alone_ld = dma_record_cycles(ld, **kw)
    alone_st = dma_record_cycles(st, **kw)
    tl = DmaTimeline(**kw)
    assert tl.add(ld, 5) == (5, 5 + alone_ld)
    t2, d2 = tl.add(ld, 0)
    assert t2 < 5 + alone_ld // 4 and d2 - (5 + alone_ld) < alone_ld
    t3, d3 = tl.add(st, 0)
    assert t3 < d2 and d3 >= d2 + alone_st - 6
    assert DmaTimeline(**kw).add(st, 0) == (0, alone_st)


def test_timeline_delay():
    """``DmaTimeline.delay(n)``: the record behind a delayed one is taken no earlier than two
    cycles after the delayed data side's end and is done ``n`` cycles later than without the
    delay (its data follow the delayed one's); a delay before any record changes nothing."""
    from sim.dma_timing import DmaTimeline
    kw = dict(data_width=32, sbuf_depth=256, max_burst=16, latency=3)
    ld = records("contiguous", 4096, 0)
    ref, late = DmaTimeline(**kw), DmaTimeline(**kw)
    late.delay(50)
    assert late.add(ld, 0) == ref.add(ld, 0)
    n = 3000                     # beyond the first record's end: the take must wait for it
    late.delay(n)
    fin = late._last[2]
    assert late.free == fin + 2
    t_ref, d_ref = ref.add(ld, 0)
    t, d = late.add(ld, 0)
    assert t == fin + 2 > t_ref and d >= d_ref + n
    small = DmaTimeline(**kw)
    small.add(ld, 0)
    free = small.free
    small.delay(1)              # the front's own bound stays when it is the later one
    assert small.free == max(free, small._last[2] + 2)


def test_microsim_overlaps_dma_records():
    """``MicroSim`` with ``EngineCost(dma_config=...)`` takes the second of two loads before
    the first is done (a serial server would not) and both finish sooner than one after
    the other."""
    from sim.asm import assemble
    from sim.config import CoreConfig
    from sim.cycles import EngineCost, MicroSim
    from sim.isa import Engine
    cfg = CoreConfig(rows=16, sbuf_depth=1024, dma_data_width=128, max_burst=256)
    # two loads of 64 columns of 16 FP32 partitions (4 KiB each), across partitions
    prog = assemble("li r1, 0x10040\nli r2, 64\nli r3, 0\nli r4, 4\nli r5, 0\nli r6, 0x1000\n"
                    "li r7, 0\nli r8, 64\n"
                    "dma_ld r1, r5, r7, part_start=0, part_count=16, fmt=fp32\n"
                    "dma_ld r1, r6, r8, part_start=0, part_count=16, fmt=fp32\nhalt\n")
    ms = MicroSim(prog, cost=EngineCost(dma_config=cfg)).run()
    a, b = ms.timeline[Engine.DMA]
    assert a.fields["n0"] == 64 and a.fields["ext_stride0"] == 64 and a.fields["n1"] == 1
    assert b.accept < a.done
    rec = records("contiguous", 4096, 0)
    alone = dma_record_cycles(rec, data_width=128, sbuf_depth=1024, max_burst=256)
    assert b.done - a.accept < 2 * alone
    assert EngineCost(dma_config=cfg).dma_timeline() is not None
    assert EngineCost().dma_timeline() is None


@pytest.mark.parametrize("width", [32, 128])
def test_rtl_cost_overlaps_dma_records_at_every_width(width):
    """``kernels.bench.RtlCost`` (the bench's model of the RTL) gives the DMA its timeline
    at every width: the RTL's DMA overlaps consecutive records at 32 bits too."""
    from kernels.bench import RtlCost
    from sim.config import CoreConfig
    cost = RtlCost.for_config(CoreConfig(dma_data_width=width))
    assert cost.dma_config.dma_data_width == width
    assert cost.dma_timeline() is not None
