"""The DMA's sub-components alone, in the Amaranth simulator (the whole DMA:
cocotb_tests/test_dma.py)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.dma.burst_splitter import BurstSplitter


def bursts_of(addr, nbytes, *, beat_bytes, max_burst):
    """The model: ``(beat-aligned address, beats)`` of the INCR bursts covering the bytes
    ``[addr, addr + nbytes)``, none longer than ``max_burst`` or crossing 4 KiB."""
    first, last = addr // beat_bytes, (addr + nbytes - 1) // beat_bytes
    page = 4096 // beat_bytes
    out, b = [], first
    while b <= last:
        n = min(last - b + 1, max_burst, page - b % page)
        out.append((b * beat_bytes, n))
        b += n
    return out


@pytest.mark.parametrize("data_width, max_burst", [(32, 16), (32, 1), (64, 256), (128, 4),
                                                      (256, 64), (512, 32)])
def test_burst_splitter_matches_model(data_width, max_burst):
    dut = BurstSplitter(data_width=data_width, max_burst=max_burst)
    bw = data_width // 8
    rng = random.Random(data_width * 1000 + max_burst)
    segments = [(4096 - bw, 2 * bw), (0, 1), (4095, 1), (4096 * 3 - 7, 4096 + 9)]
    # (at most about 300 bursts a segment, so the simulation stays short)
    longest = min(1 << 19, 300 * max_burst * bw)
    for _ in range(30):
        nbytes = rng.choice([rng.randrange(1, 64), rng.randrange(1, 9000),
                             rng.randrange(1, longest)])
        segments.append((rng.randrange(0, 1 << 30), nbytes))

    async def bench(ctx):
        for k, (addr, nbytes) in enumerate(segments):
            want = bursts_of(addr, nbytes, beat_bytes=bw, max_burst=max_burst)
            # The segment holds for a cycle before ``load`` (the counts are registered).
            ctx.set(dut.seg_addr, addr)
            ctx.set(dut.seg_bytes, nbytes)
            ctx.set(dut.seg_last, k & 1)
            await ctx.tick()
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            assert ctx.get(dut.last) == k & 1
            got = []
            for _ in range(len(want) + 1):
                # Idle cycles between issues change nothing.
                for _ in range(rng.randrange(2)):
                    await ctx.tick()
                n = ctx.get(dut.length) + 1
                assert ctx.get(dut.single) == (n == 1)
                got.append((ctx.get(dut.cur), n))
                end = ctx.get(dut.end)
                ctx.set(dut.issue, 1)
                await ctx.tick()
                ctx.set(dut.issue, 0)
                if end:
                    break
            assert got == want, f"segment {addr:#x} + {nbytes}"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_burst_splitter_parameters():
    with pytest.raises(ValueError,
                       match="data_width must be a power of two from 32 to 512, not 16"):
        BurstSplitter(data_width=16)
    with pytest.raises(ValueError, match="max_burst must be a power of two from 1 to 256, not 3"):
        BurstSplitter(max_burst=3)
    # A burst is at most half a 4 KiB page.
    with pytest.raises(ValueError, match="max_burst must be a power of two from 1 to 32, not 64"):
        BurstSplitter(data_width=512, max_burst=64)


def test_sbuf_write_stage_order_and_backpressure():
    """Random puts (an element in one partition or a chunk in several) against random
    ``ready``: every write reaches the port once, in order, with its mask and words, and holds
    while refused; ``full`` is exactly two waiting."""
    from rtl.dma.sbuf_write_stage import SbufWriteStage
    P, depth = 4, 64
    dut = SbufWriteStage(partitions=P, depth=depth)
    rng = random.Random(3)

    async def bench(ctx):
        waiting, written = [], []
        sent = []
        for cycle in range(600):
            assert ctx.get(dut.full) == (len(waiting) == 2), cycle
            assert ctx.get(dut.nonempty) == bool(waiting), cycle
            mask = ctx.get(dut.sbuf_w.mask)
            if waiting:
                addr, wmask, words = waiting[0]
                assert mask == wmask, cycle
                assert ctx.get(dut.sbuf_w.addr) == addr, cycle
                assert all(ctx.get(dut.sbuf_w.data[p]) == words[p] for p in range(P)
                           if wmask >> p & 1), cycle
            else:
                assert mask == 0, cycle
            put = not ctx.get(dut.full) and rng.random() < 0.6
            ready = rng.random() < 0.5
            wmask = rng.choice([1 << rng.randrange(P), rng.randrange(1, 1 << P)])
            item = (rng.randrange(depth), wmask, [rng.getrandbits(32) for _ in range(P)])
            ctx.set(dut.put, put)
            ctx.set(dut.addr, item[0])
            ctx.set(dut.mask, item[1])
            for p in range(P):
                ctx.set(dut.data[p], item[2][p])
            ctx.set(dut.sbuf_w.ready, ready)
            await ctx.tick()
            if waiting and ready:
                written.append(waiting.pop(0))
            if put:
                waiting.append(item)
                sent.append(item)
        assert written == sent[:len(written)] and len(written) > 200

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("depth", [1, 3, 4])
def test_burst_queue_order_and_level(depth):
    """Random pushes and pops within the user's count: the head is the oldest entry, pushes
    and pops in the same cycle both take effect, and ``level`` counts the entries."""
    from amaranth.lib import data
    from rtl.dma.burst_queue import BurstQueue
    word = data.StructLayout({"addr": 32, "len": 8, "single": 1})
    dut = BurstQueue(word, depth)
    rng = random.Random(depth)

    async def bench(ctx):
        model = []
        for cycle in range(500):
            assert ctx.get(dut.level) == len(model), cycle
            if model:
                head = ctx.get(dut.head)
                assert (head.addr, head.len, head.single) == model[0], cycle
            pop = bool(model) and rng.random() < 0.5
            push = (len(model) - pop < depth) and rng.random() < 0.5
            entry = (rng.getrandbits(32), rng.getrandbits(8), rng.getrandbits(1))
            ctx.set(dut.push, push)
            ctx.set(dut.pop, pop)
            ctx.set(dut.w_data, {"addr": entry[0], "len": entry[1], "single": entry[2]})
            await ctx.tick()
            if pop:
                model.pop(0)
            if push:
                model.append(entry)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _row_inside(window, need, tail, span, addr):
    """The model: the row's bytes ``[addr + min(span, 0), addr + max(span, 0) + tail]``
    (``tail``: ``esize - 1``, or a union's) lie in ``[0, 2**32)`` and in the window, which
    has the permission."""
    base, limit, perm = window
    lo, hi = addr + min(span, 0), addr + max(span, 0) + tail
    return bool(perm & need) and 0 <= lo and hi < 1 << 32 and base <= lo and hi <= limit


def test_window_check_matches_model():
    """Random windows, spans (some beyond +-2**32), unions and rows: ``hit`` after a clock edge
    is the model's verdict on the row presented before it, the record's values held two
    cycles, ``union`` one."""
    from rtl.dma.window_check import WindowCheck
    nwin = 3
    dut = WindowCheck(nwin)
    rng = random.Random(7)

    async def bench(ctx):
        checked = hits = 0
        for record in range(120):
            windows = []
            for _ in range(nwin):
                base = rng.choice([0, rng.getrandbits(32), rng.randrange(1 << 20)])
                limit = rng.choice([(1 << 32) - 1, base + rng.randrange(1 << 16),
                                    rng.getrandbits(32)]) & 0xFFFFFFFF
                windows.append((base, limit, rng.getrandbits(2)))
            need, esize = rng.choice([1, 2]), rng.choice([1, 2, 4])
            union_tail = rng.choice([esize - 1, rng.randrange(1024)])
            ctx.set(dut.union_tail, union_tail)
            span = rng.choice([0, rng.randrange(-4096, 4096), rng.randrange(-(1 << 34), 1 << 34),
                               rng.choice([-(1 << 32), (1 << 32) - 1, 1 << 32])])
            for w, (base, limit, perm) in enumerate(windows):
                ctx.set(dut.windows[w], {"base": base, "limit": limit, "perm": perm})
            ctx.set(dut.need, need)
            ctx.set(dut.esize, esize)
            ctx.set(dut.span, span)
            await ctx.tick()
            union = rng.randrange(2)
            ctx.set(dut.union, union)
            tail = union_tail if union else esize - 1
            await ctx.tick()
            for _ in range(12):
                w0 = windows[rng.randrange(nwin)]
                addr = rng.choice([rng.getrandbits(32), (w0[0] + rng.randrange(-8, 4096)) %
                                   (1 << 32), (w0[1] - max(span, 0) - tail -
                                               rng.randrange(-4, 8)) % (1 << 32)])
                ctx.set(dut.addr, addr)
                await ctx.tick()            # ``hit`` registers the verdict on ``addr``
                want = sum(_row_inside(win, need, tail, span, addr) << w
                           for w, win in enumerate(windows))
                assert ctx.get(dut.hit) == want, (windows, need, esize, span, tail, addr)
                checked += 1
                hits += want != 0
        assert checked > 1000 and hits > 100, (checked, hits)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def chunks_of(base, s0, s1, n0, n1, count, esh, bw):
    """The model of ``ColumnWalker``: ``(addr, p_off, n, sidx, beat_end, last)`` per chunk."""
    es = 1 << esh
    out = []
    rows_contig = s0 == count * es
    for i in range(n1):
        for j in range(n0):
            col = (base + i * s1 + j * s0) & 0xFFFFFFFF
            p = 0
            while p < count:
                a = (col + p * es) & 0xFFFFFFFF
                room = (bw - a % bw) // es
                n = min(room, count - p)
                col_end = p + n == count
                last = col_end and i == n1 - 1 and j == n0 - 1
                beat_end = (not col_end or room == n or not rows_contig or j == n0 - 1)
                out.append((a, p, n, i * n0 + j, beat_end, last))
                p += n
    return out


@pytest.mark.parametrize("data_width", [64, 512])
def test_column_walker_matches_model(data_width):
    from rtl.dma.column_walker import ColumnWalker
    dut = ColumnWalker(data_width=data_width)
    bw = data_width // 8
    rng = random.Random(data_width)

    async def bench(ctx):
        for walk in range(25):
            esh = rng.randrange(3)
            es = 1 << esh
            count = rng.choice([1, 3, 8, 16, rng.randrange(1, 256)])
            n0, n1 = rng.randrange(1, 5), rng.randrange(1, 4)
            s0 = rng.choice([count * es, count * es + es * rng.randrange(9), 0]) & 0xFFFFFFFF
            s1 = rng.choice([n0 * s0, rng.getrandbits(20) * es]) & 0xFFFFFFFF
            base = rng.getrandbits(32) & ~(es - 1)
            for sig, v in ((dut.base, base), (dut.s0, s0), (dut.s1, s1), (dut.n0, n0),
                           (dut.n1, n1), (dut.count, count), (dut.esh, esh),
                           (dut.rows_contig, s0 == count * es)):
                ctx.set(sig, v)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            want = chunks_of(base, s0, s1, n0, n1, count, esh, bw)
            for k, chunk in enumerate(want):
                assert not ctx.get(dut.done), (walk, k)
                got = tuple(ctx.get(x) for x in (dut.addr, dut.p_off, dut.n, dut.sidx,
                                                  dut.beat_end, dut.last))
                assert got == chunk, (walk, k, got, chunk)
                ctx.set(dut.step, 1)
                await ctx.tick()
                ctx.set(dut.step, 0)
            assert ctx.get(dut.done), walk

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_dma_width_parameters():
    from rtl.dma.dma import DMA
    from sim.config import CoreConfig
    with pytest.raises(ValueError,
                       match="data_width must be a power of two from 32 to 512, not 1024"):
        DMA(partitions=4, sbuf_depth=64, data_width=1024)
    with pytest.raises(ValueError,
                       match="dma_data_width must be a power of two from 32 to 512, not 48"):
        CoreConfig(dma_data_width=48)
    with pytest.raises(TypeError, match="dma_data_width must be an integer, not '64'"):
        CoreConfig(dma_data_width="64")
    cfg = CoreConfig(dma_data_width=256)
    assert CoreConfig.from_dict(cfg.to_dict()) == cfg and cfg.name.endswith("-d256")
    assert CoreConfig().name == CoreConfig(dma_data_width=32).name
    assert DMA(partitions=4, sbuf_depth=64, data_width=512, max_burst=256).burst_beats == 32
