"""The DMA's data-side units alone, in the Amaranth simulator, against Python models: the
element walk (``ElementWalk``), the burst issuer (``BurstIssuer``), and the load and store
data paths (``LoadPath``, ``StorePath``, each fed by an ``ElementWalk``), with random stalls
on every handshake. The control-side units: ``test_dma_parts.py``."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from amaranth_tb import simulate
from rtl.dma.burst_issuer import BurstIssuer
from rtl.dma.element_walk import ElementWalk
from rtl.dma.load_path import LoadPath
from rtl.dma.store_path import StorePath
from test_dma_units import bursts_of, chunks_of

M32 = (1 << 32) - 1


def _record(rng, P, depth, bw, *, ilv=None):
    """A random record (every element distinct in SBUF) and its derived values, as the
    record setup gives them."""
    esh = rng.randrange(3)
    es = 1 << esh
    pc = rng.randrange(1, P + 1)
    n0, n1 = rng.randrange(1, 7), rng.randrange(1, 3)
    ilv = rng.random() < 0.5 if ilv is None else ilv
    if ilv:
        s0 = es * pc * rng.choice([1, 1, 2])
        ps = es
        s1 = s0 * n0 + es * rng.choice([0, 0, 3])
    else:
        s0 = es * rng.choice([1, 1, 2, -1, 5])
        ps = es * rng.choice([n0 * n1, 40])
        s1 = es * rng.choice([n0, n0 + 1, -n0])
    rec = dict(ext_addr=(rng.randrange(1 << 12) * es + (1 << 20)) & M32,
               ext_stride0=s0 & M32, ext_stride1=s1 & M32, ext_part_stride=ps & M32,
               n0=n0, n1=n1, part_start=rng.randrange(P - pc + 1), part_count=pc,
               sbuf_addr=rng.randrange(depth), fmt=0, store=0, sem=0, sem_en=0)
    der = dict(esh=esh, esize=es, contiguous=s0 == es, ilv=ilv, rows_contig=s0 == es * pc)
    return rec, der


def _elements(rec, der, depth, bw):
    """The model of the SBUF side's walk: per element (or chunk) ``(ext address, SBUF
    address, partition or first partition, elements, beat_end)``."""
    r, es = rec, der["esize"]
    if der["ilv"]:
        return [(a, (r["sbuf_addr"] + sidx) % depth, r["part_start"] + p, n, be)
                for a, p, n, sidx, be, _ in chunks_of(
                    r["ext_addr"], r["ext_stride0"], r["ext_stride1"], r["n0"], r["n1"],
                    r["part_count"], der["esh"], bw)]
    out = []
    for p in range(r["part_count"]):
        for i in range(r["n1"]):
            for j in range(r["n0"]):
                a = (r["ext_addr"] + p * r["ext_part_stride"] + i * r["ext_stride1"] +
                     j * r["ext_stride0"]) & M32
                be = (a % bw + es) % bw == 0 or not der["contiguous"] or j == r["n0"] - 1
                out.append((a, (r["sbuf_addr"] + i * r["n0"] + j) % depth,
                            r["part_start"] + p, 1, be))
    return out


def _segments(rec, der):
    """The model of the segments: ``(address, bytes)`` in issue order."""
    r, es = rec, der["esize"]
    s0, s1, ps = (r[k] for k in ("ext_stride0", "ext_stride1", "ext_part_stride"))
    if der["ilv"]:
        col = r["part_count"] * es
        if der["rows_contig"]:
            return [((r["ext_addr"] + i * s1) & M32, col * r["n0"]) for i in range(r["n1"])]
        return [((r["ext_addr"] + i * s1 + j * s0) & M32, col)
                for i in range(r["n1"]) for j in range(r["n0"])]
    if der["contiguous"]:
        return [((r["ext_addr"] + p * ps + i * s1) & M32, r["n0"] * es)
                for p in range(r["part_count"]) for i in range(r["n1"])]
    return [(e[0], es) for e in _elements(rec, der, 1 << 16, 4)]


def _set(ctx, port, values):
    for k, v in values.items():
        ctx.set(getattr(port, k), v)


@pytest.mark.parametrize("data_width", [32, 128])
def test_element_walk_matches_model(data_width):
    """Random records, a step in random cycles: each element's (chunk's) SBUF address,
    partition, beat offset, size and ``beat_end`` are the model's; ``done`` after the last."""
    P, depth, bw = 5, 64, data_width // 8
    dut = ElementWalk(partitions=P, sbuf_depth=depth, data_width=data_width)
    rng = random.Random(data_width + 1)

    async def bench(ctx):
        for walk in range(40):
            rec, der = _record(rng, P, depth, bw)
            _set(ctx, dut.rec, rec)
            _set(ctx, dut, der)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            es = der["esize"]
            for k, (a, addr, part, n, be) in enumerate(_elements(rec, der, depth, bw)):
                while rng.random() < 0.3:
                    await ctx.tick()
                got = (ctx.get(dut.addr), ctx.get(dut.off), ctx.get(dut.beat_end),
                       ctx.get(dut.nbytes), ctx.get(dut.done))
                assert got == (addr, a % bw, be, n * es, 0), (walk, k, rec, der)
                if der["ilv"]:
                    assert (ctx.get(dut.chunk_base), ctx.get(dut.chunk_n),
                            ctx.get(dut.chunk_off)) == (part, n, a % bw), (walk, k)
                else:
                    assert ctx.get(dut.part) == part, (walk, k)
                ctx.set(dut.step, 1)
                await ctx.tick()
                ctx.set(dut.step, 0)
            assert ctx.get(dut.done), walk

    simulate(dut, bench)


@pytest.mark.parametrize("data_width, max_burst, mo", [(32, 4, 2), (128, 2, 3), (64, 16, 1)])
def test_burst_issuer_matches_model(data_width, max_burst, mo):
    """Random records with random AR/AW ready, retirements and data-side pops; some records
    stopped halfway: the bursts are the model's in order until the stop, never more than
    ``mo`` in flight, the data queue and the write-response queue hand them out in order,
    and ``quiet`` comes when all have retired."""
    bw = data_width // 8
    dut = BurstIssuer(data_width=data_width, max_burst=max_burst, max_outstanding=mo)
    rng = random.Random(data_width * max_burst + mo)

    async def bench(ctx):
        stopped_early = 0
        for rec_no in range(40):
            rec, der = _record(rng, 4, 1 << 16, bw)
            rec["store"] = store = rng.randrange(2)
            want = [b for a, n in _segments(rec, der)
                    for b in bursts_of(a, n, beat_bytes=bw, max_burst=max_burst)]
            seg_bytes = _segments(rec, der)[0][1]
            _set(ctx, dut.rec, rec)
            _set(ctx, dut, dict(contiguous=der["contiguous"], ilv=der["ilv"],
                                rows_contig=der["rows_contig"], seg_bytes=seg_bytes))
            ctx.set(dut.walk, 1)
            await ctx.tick()
            ctx.set(dut.walk, 0)
            await ctx.tick().repeat(3)
            ctx.set(dut.run, 1)
            await ctx.tick()
            ctx.set(dut.run, 0)
            stop_at = rng.randrange(len(want)) if rng.random() < 0.2 else None
            issued, data_q, b_q, in_flight, cycles, retired, popped = [], [], [], [], 0, 0, 0
            stopping = False
            while cycles < 4000:
                cycles += 1
                if stop_at is not None and len(issued) >= stop_at and not stopping:
                    stopping = True
                    stopped_early += 1
                ctx.set(dut.stopping, stopping)
                ctx.set(dut.halt, stopping)
                a_ready = rng.random() < 0.6
                ctx.set(dut.a_ready, a_ready)
                # Retire one burst in flight now and then: a load's last R beat (which also
                # ends its data side), a store's B (after its data side ended).
                done_data = len(issued) if not store else popped
                retire = retired < min(len(issued), done_data) and rng.random() < 0.3
                retired += retire
                ctx.set(dut.r_last, retire and not store)
                ctx.set(dut.st, store)
                ctx.set(dut.bvalid, retire and store)
                ctx.set(dut.bresp, 0)
                if retire and store:
                    assert ctx.get(dut.b_addr) == b_q[0], rec_no
                pop = retire if not store else bool(data_q) and rng.random() < 0.4
                popped += pop
                ctx.set(dut.data_pop, pop)
                assert ctx.get(dut.data_level) == len(data_q), rec_no
                if data_q:
                    head = data_q[0]
                    assert (ctx.get(dut.data.addr), ctx.get(dut.data.len) + 1,
                            ctx.get(dut.data.single)) == (*head, head[1] == 1), rec_no
                pushed = ctx.get(dut.data_push)
                take = ctx.get(dut.a_valid) and a_ready
                if take:
                    burst = (ctx.get(dut.a_addr), ctx.get(dut.a_len) + 1)
                    issued.append(burst)
                await ctx.tick()
                if pushed:
                    # (the burst entering the queues: the request registered now)
                    b = (ctx.get(dut.a_addr), ctx.get(dut.a_len) + 1)
                    data_q.append(b)
                    in_flight.append(b)
                    if store:
                        b_q.append(b[0])
                if pop:
                    data_q.pop(0)
                if retire:
                    in_flight.pop(0)
                    if store:
                        b_q.pop(0)
                assert len(in_flight) <= mo, rec_no
                if ctx.get(dut.quiet) and not ctx.get(dut.running):
                    break
            if stop_at is None:
                assert issued == want, (rec_no, rec, der)
            else:
                assert issued == want[:len(issued)] and len(issued) <= stop_at + mo + 1
            assert not in_flight and ctx.get(dut.quiet), rec_no
            # (``stopping`` outlasts ``iss_ok`` by a cycle, as the control's IDLE does.)
            for sig in (dut.r_last, dut.bvalid, dut.data_pop):
                ctx.set(sig, 0)
            await ctx.tick()
            assert not ctx.get(dut.a_valid), rec_no
            while data_q:
                ctx.set(dut.data_pop, 1)
                await ctx.tick()
                data_q.pop(0)
            ctx.set(dut.data_pop, 0)
            ctx.set(dut.stopping, 0)
            ctx.set(dut.halt, 0)
            await ctx.tick()
        assert stopped_early > 2

    simulate(dut, bench)


class _PathBench(wiring.Component):
    """A data path with the element walk in front, connected as in the DMA."""

    def __init__(self, path_cls, **kw):
        self.walk = ElementWalk(**{k: kw[k] for k in ("partitions", "sbuf_depth",
                                                      "data_width")})
        self.path = path_cls(**kw)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.walk, m.submodules.path = w, p = self.walk, self.path
        m.d.comb += [w.step.eq(p.step), p.clear.eq(w.start)]
        for name in ("ilv", "esh", "off", "beat_end", "part", "addr", "chunk_base",
                     "chunk_n"):
            m.d.comb += getattr(p, name).eq(getattr(w, name))
        if hasattr(p, "nbytes"):
            m.d.comb += p.nbytes.eq(w.nbytes)
        else:
            m.d.comb += [p.done.eq(w.done), p.esize.eq(w.esize), p.chunk_off.eq(w.chunk_off)]
        return m


def _start(ctx, dut, rec, der):
    _set(ctx, dut.walk.rec, rec)
    _set(ctx, dut.walk, der)
    ctx.set(dut.walk.start, 1)


@pytest.mark.parametrize("data_width", [32, 128])
def test_load_path_matches_model(data_width):
    """Random records; R beats in the records' burst order with random ``rvalid`` and the
    SBUF port's ``ready`` random: the SBUF writes are the model's, each once and in order
    (an element per write, or a chunk's partitions in one), and ``rd_bytes`` counts them."""
    P, depth, bw = 4, 64, data_width // 8
    dut = _PathBench(LoadPath, partitions=P, sbuf_depth=depth, data_width=data_width)
    ld = dut.path
    rng = random.Random(data_width + 2)
    mem = {}

    def beat(a):
        if a not in mem:
            mem[a] = rng.getrandbits(8 * bw)
        return mem[a]

    def ext_word(a, es):
        return (beat(a - a % bw) >> 8 * (a % bw)) & ((1 << 8 * es) - 1)

    async def bench(ctx):
        total = 0
        for rec_no in range(25):
            rec, der = _record(rng, P, depth, bw)
            es = der["esize"]
            beats = []
            for a, n in _segments(rec, der):
                for ba, nb in bursts_of(a, n, beat_bytes=bw, max_burst=4):
                    beats += [(ba + k * bw, k == nb - 1) for k in range(nb)]
            want = []
            for a, addr, part, n, _ in _elements(rec, der, depth, bw):
                want.append((addr, tuple((part + k, ext_word(a + k * es, es))
                                         for k in range(n))))
            _start(ctx, dut, rec, der)
            ctx.set(ld.load, 0)
            await ctx.tick()
            ctx.set(dut.walk.start, 0)
            ctx.set(ld.load, 1)
            got, cycles = [], 0
            while (beats or len(got) < len(want)) and cycles < 3000:
                cycles += 1
                rvalid = bool(beats) and rng.random() < 0.7
                ctx.set(ld.rvalid, rvalid)
                if beats:
                    ctx.set(ld.rdata, beat(beats[0][0]))
                    ctx.set(ld.rlast, beats[0][1])
                ready = rng.random() < 0.6
                ctx.set(ld.sbuf_w.ready, ready)
                mask = ctx.get(ld.sbuf_w.mask)
                if mask and ready:
                    words = tuple((p, ctx.get(ld.sbuf_w.data[p])) for p in range(P)
                                  if mask >> p & 1)
                    got.append((ctx.get(ld.sbuf_w.addr), words))
                if rvalid and ctx.get(ld.rready):
                    assert ctx.get(ld.r_last) == beats[0][1]
                    beats.pop(0)
                await ctx.tick()
            ctx.set(ld.rvalid, 0)
            assert got == want, (rec_no, rec, der)
            assert not ctx.get(ld.pending) and not ctx.get(ld.buffered)
            total += sum(len(w) for _, w in want) * es
            assert ctx.get(ld.rd_bytes) == total, rec_no

    simulate(dut, bench)


@pytest.mark.parametrize("data_width, mo", [(32, 2), (128, 3)])
def test_store_path_matches_model(data_width, mo):
    """Random records from a random SBUF; bursts announced to the packer at random times
    (as the issuer does) and ``wready`` random: the W beats are the model's, data, strobes
    and ``wlast``, in order, and ``wr_bytes`` counts the elements."""
    P, depth, bw = 4, 64, data_width // 8
    dut = _PathBench(StorePath, partitions=P, sbuf_depth=depth, data_width=data_width,
                     max_outstanding=mo)
    sp = dut.path
    rng = random.Random(data_width + 3)
    sbuf = [[rng.getrandbits(32) for _ in range(depth)] for _ in range(P)]

    async def bench(ctx):
        total = 0
        for rec_no in range(25):
            rec, der = _record(rng, P, depth, bw)
            es = der["esize"]
            # The model: each segment's bursts' beats, with the bytes of its elements.
            elems = _elements(rec, der, depth, bw)
            want, bursts = [], []
            k = 0
            for a, n in _segments(rec, der):
                # (a segment's own elements: rows may overlap in external memory)
                seg_bytes, taken = {}, 0
                while k < len(elems) and taken < n and a <= elems[k][0] < a + n:
                    ea, addr, part, cnt, _ = elems[k]
                    taken += cnt * es
                    for q in range(cnt):
                        w = sbuf[part + q][addr]
                        for b in range(es):
                            seg_bytes[ea + q * es + b] = (w >> 8 * b) & 0xFF
                    k += 1
                for ba, nb in bursts_of(a, n, beat_bytes=bw, max_burst=4):
                    bursts.append((ba, nb))
                    for q in range(nb):
                        base = ba + q * bw
                        data = sum(seg_bytes.get(base + b, 0) << 8 * b for b in range(bw))
                        strb = sum((base + b in seg_bytes) << b for b in range(bw))
                        want.append((data, strb, q == nb - 1))
            assert k == len(elems)
            _start(ctx, dut, rec, der)
            ctx.set(sp.st, 0)
            await ctx.tick()
            ctx.set(dut.walk.start, 0)
            ctx.set(sp.st, 1)
            queue, got, cycles = [], [], 0
            rdata = [0] * P
            while len(got) < len(want) and cycles < 3000:
                cycles += 1
                push = bool(bursts) and len(queue) < mo and rng.random() < 0.5
                ctx.set(sp.data_push, push)
                ctx.set(sp.data_level, len(queue))
                if queue:
                    ctx.set(sp.data_len, queue[0][1] - 1)
                    ctx.set(sp.data_single, queue[0][1] == 1)
                for p in range(P):
                    ctx.set(sp.sbuf_r.data[p], rdata[p])
                wready = rng.random() < 0.6
                ctx.set(sp.w_ready, wready)
                if ctx.get(sp.w_valid) and wready:
                    got.append((ctx.get(sp.w_data), ctx.get(sp.w_strb), ctx.get(sp.w_last)))
                pop = ctx.get(sp.data_pop)
                if ctx.get(sp.sbuf_r.en):
                    addr = ctx.get(sp.sbuf_r.addr)
                    rdata = [sbuf[p][addr] for p in range(P)]
                await ctx.tick()
                if pop:
                    queue.pop(0)
                if push:
                    queue.append(bursts.pop(0))
            assert got == want, (rec_no, rec, der)
            assert not queue and not bursts and not ctx.get(sp.busy), rec_no
            total += sum(cnt for _, _, _, cnt, _ in elems) * es
            assert ctx.get(sp.wr_bytes) == total, rec_no

    simulate(dut, bench)
