"""The DMA's control-side units alone, in the Amaranth simulator, against Python models:
the beat lanes (``BeatUnpack``, ``ChunkPack``), the record setup (``RecordChecks``), the
protection check (``ProtectionCheck``), the error report (``ErrorReport``) and the control
(``DmaControl``). The data-side units: ``test_dma_paths.py``; the whole DMA:
``cocotb_tests/test_dma.py``."""

import random

import pytest
from amaranth.sim import Simulator

from amaranth_tb import simulate
from rtl.dma.control import DmaControl
from rtl.dma.error_report import ErrorReport
from rtl.dma.lanes import BeatUnpack, ChunkPack
from rtl.dma.protection import ProtectionCheck
from rtl.dma.record_checks import RecordChecks
from sim.dtypes import STORAGE_BITS, Format
from sim.errors import ErrorCode

M32 = (1 << 32) - 1


def _s32(v):
    return v - (1 << 32) if v >> 31 else v


def _comb(dut, bench):
    """Run ``bench`` on a combinational ``dut`` (no clock)."""
    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def _elements(beat, bw, off, es):
    """The model: the elements of a beat (an int of ``bw`` bytes) from byte ``off`` on."""
    raw = beat.to_bytes(bw, "little")[off:] + bytes(4 * bw)
    return [int.from_bytes(raw[k * es:k * es + es], "little") for k in range(bw)]


@pytest.mark.parametrize("data_width, lanes", [(32, 4), (128, 8), (512, 16)])
def test_beat_unpack_matches_model(data_width, lanes):
    dut = BeatUnpack(data_width=data_width, lanes=lanes)
    bw = data_width // 8
    rng = random.Random(data_width)

    async def bench(ctx):
        for _ in range(300):
            beat, off, esh = rng.getrandbits(data_width), rng.randrange(bw), rng.randrange(4)
            es = 1 << min(esh, 2)                # esh 3 reads as 2
            for sig, v in ((dut.beat, beat), (dut.off, off), (dut.esh, esh)):
                ctx.set(sig, v)
            want = _elements(beat, bw, off, es)
            assert ctx.get(dut.elem) == want[0], (beat, off, esh)
            got = ctx.get(dut.lanes)
            assert [(got >> 32 * k) & M32 for k in range(lanes)] == want[:lanes], (off, esh)

    _comb(dut, bench)


@pytest.mark.parametrize("partitions, data_width", [(5, 32), (8, 64), (16, 128), (3, 512)])
def test_chunk_pack_matches_model(partitions, data_width):
    dut = ChunkPack(partitions=partitions, data_width=data_width)
    bw = data_width // 8
    rng = random.Random(partitions * data_width)

    async def bench(ctx):
        for _ in range(300):
            esh = rng.randrange(3)
            es = 1 << esh
            off = rng.randrange(bw) & ~(es - 1)
            base = rng.randrange(partitions)
            n = rng.randrange(1, min((bw - off) // es, partitions - base) + 1)
            words = [rng.getrandbits(32) for _ in range(partitions)]
            for sig, v in ((dut.words, sum(w << 32 * k for k, w in enumerate(words))),
                           (dut.base, base), (dut.n, n), (dut.off, off), (dut.esh, esh)):
                ctx.set(sig, v)
            data = strb = 0
            for k in range(n):
                pos = off + k * es
                data |= (words[base + k] & ((1 << 8 * es) - 1)) << 8 * pos
                strb |= ((1 << es) - 1) << pos
            assert (ctx.get(dut.data), ctx.get(dut.strb)) == (data, strb), (base, n, off, esh)

    _comb(dut, bench)


def test_error_report_sources():
    """Each source gives its code, address and information; ``err_valid`` is one pulse the
    cycle after ``report``; the registers hold until the next report; a check error
    registered by ``hold`` is reported with its values at ``release``."""
    dut = ErrorReport(data_width=128)
    fields = dict(r_burst=0x1000, r_beat=3, rresp=2, bresp=3, b_addr=0x2000, row_addr=0x3000,
                  ext_addr=0x4001, store=1, sbuf_addr=77, part_end=300)
    cases = [  # (source flags, code, addr, info)
        (dict(load=1), ErrorCode.DMA_AXI_READ, 0x1000 + 3 * 16, 2),
        (dict(st=1), ErrorCode.DMA_AXI_WRITE, 0x2000, 3),
        (dict(row_v=1, misaligned=1), ErrorCode.DMA_WINDOW, 0x3000, 1),
        (dict(misaligned=1), ErrorCode.DMA_ALIGN, 0x4001, 0),
        (dict(), ErrorCode.SBUF_RANGE, 77, 300),
    ]

    async def bench(ctx):
        for k, v in fields.items():
            ctx.set(getattr(dut, k), v)
        for flags, code, addr, info in cases:
            for k in ("load", "st", "row_v", "misaligned"):
                ctx.set(getattr(dut, k), flags.get(k, 0))
            ctx.set(dut.report, 1)
            await ctx.tick()
            ctx.set(dut.report, 0)
            got = (ctx.get(dut.err_code), ctx.get(dut.err_addr), ctx.get(dut.err_info))
            assert ctx.get(dut.err_valid) == 1 and got == (code, addr, info), (flags, got)
            for k in ("load", "st", "row_v", "misaligned"):
                ctx.set(getattr(dut, k), 1 - flags.get(k, 0))
            await ctx.tick().repeat(2)
            assert ctx.get(dut.err_valid) == 0
            assert (ctx.get(dut.err_code), ctx.get(dut.err_addr), ctx.get(dut.err_info)) == got
        # A check error held (``hold``) and reported later (``release``): the values at the
        # hold, whatever the sources are at the release; no err_valid before it.
        for flags, code, addr, info in cases[2:]:
            for k in ("load", "st", "row_v", "misaligned"):
                ctx.set(getattr(dut, k), flags.get(k, 0))
            ctx.set(dut.hold, 1)
            await ctx.tick()
            ctx.set(dut.hold, 0)
            ctx.set(dut.row_addr, 0x5000)
            for k in ("row_v", "misaligned"):
                ctx.set(getattr(dut, k), 1 - flags.get(k, 0))
            await ctx.tick().repeat(3)
            assert ctx.get(dut.err_valid) == 0
            ctx.set(dut.load, 1)                     # a data side flag: release wins
            ctx.set(dut.report, 1)
            ctx.set(dut.release, 1)
            await ctx.tick()
            ctx.set(dut.report, 0)
            ctx.set(dut.release, 0)
            ctx.set(dut.load, 0)
            ctx.set(dut.row_addr, 0x3000)
            got = (ctx.get(dut.err_code), ctx.get(dut.err_addr), ctx.get(dut.err_info))
            assert ctx.get(dut.err_valid) == 1 and got == (code, addr, info), (flags, got)
            await ctx.tick()

    simulate(dut, bench)


def _random_record(rng, P, *, n_max=40):
    fmt = rng.choice(list(Format))
    es = STORAGE_BITS[fmt] // 8
    n0 = rng.choice([0, 1, 2, rng.randrange(1, n_max), rng.randrange(1 << 16)])
    n1 = rng.choice([0, 1, 2, rng.randrange(1, 6)])
    pc = rng.choice([0, 1, rng.randrange(1, P + 1), rng.randrange(256)])
    s0 = rng.choice([es, es * pc, es * rng.randrange(-9, 9), rng.getrandbits(32),
                     rng.getrandbits(16)]) & M32
    s1 = rng.choice([(s0 * n0) & M32, rng.getrandbits(32), rng.getrandbits(17)])
    ps = rng.choice([es, es * 3, rng.getrandbits(32), 1])
    return dict(ext_addr=rng.getrandbits(32) & ~(es - 1 if rng.random() < 0.8 else 0),
                ext_stride0=s0, ext_stride1=s1 & M32, ext_part_stride=ps & M32, n0=n0, n1=n1,
                part_start=rng.choice([0, rng.randrange(256)]), part_count=pc,
                sbuf_addr=rng.getrandbits(16), fmt=int(fmt), store=rng.randrange(2),
                sem=0, sem_en=0)


def _checks_model(r, P, depth):
    es = STORAGE_BITS[Format(r["fmt"])] // 8
    esh = es.bit_length() - 1
    s0, s1, n0, n1, pc = (r[k] for k in ("ext_stride0", "ext_stride1", "n0", "n1",
                                         "part_count"))
    col = pc * es
    st_ok = s0 < 1 << 16 and s0 >= col and (n1 == 1 or (s1 < 1 << 16 and s1 >= n0 * s0))
    ilv = r["ext_part_stride"] == es and (st_ok if r["store"] else n0 * n1 <= depth)
    rows_contig = s0 == col
    contiguous = s0 == es
    if ilv:
        seg = col * n0 if rows_contig else col
    else:
        seg = n0 * es if contiguous else es
    return dict(
        esh=esh, esize=es, contiguous=contiguous, empty=0 in (n0, n1, pc),
        misaligned=any(r[k] % es for k in ("ext_addr", "ext_stride0", "ext_stride1",
                                           "ext_part_stride")),
        part_end=r["part_start"] + pc, part_over=r["part_start"] + pc > P,
        part_tail=(col - 1) & 0x3FF, ilv=ilv,
        rows_contig=rows_contig, row_span=(n0 - 1) * _s32(s0),
        seg_bytes=seg & ((1 << 27) - 1))


@pytest.mark.parametrize("data_width", [32, 128])
def test_record_checks_match_model(data_width):
    """Random records through take, setup, sum and span (random idle cycles between records
    with other commands offered, the command changing after the take): every output equals
    the model's."""
    P, depth = 6, 256
    dut = RecordChecks(partitions=P, sbuf_depth=depth, data_width=data_width)
    rng = random.Random(data_width + 5)

    def put(ctx, port, r):
        for k, v in r.items():
            ctx.set(getattr(port, k), v)

    async def bench(ctx):
        for _ in range(200):
            r = _random_record(rng, P)
            ctx.set(dut.idle, 1)
            for _ in range(rng.randrange(3)):              # commands offered, not taken
                put(ctx, dut.cmd, _random_record(rng, P))
                await ctx.tick()
            put(ctx, dut.cmd, r)
            await ctx.tick()                                # the take
            ctx.set(dut.idle, 0)
            put(ctx, dut.rec, r)
            put(ctx, dut.cmd, _random_record(rng, P))
            for strobe in (dut.setup, dut.sum, dut.span):
                ctx.set(strobe, 1)
                await ctx.tick()
                ctx.set(strobe, 0)
            want = _checks_model(r, P, depth)
            got = {k: ctx.get(getattr(dut, k)) for k in want}
            assert got == {k: int(v) for k, v in want.items()}, r
            await ctx.tick().repeat(rng.randrange(1, 3))
            assert {k: ctx.get(getattr(dut, k)) for k in want} == got   # held

    simulate(dut, bench)


def _row_inside(window, need, esize, span, addr):
    base, limit, perm = window
    lo, hi = addr + min(span, 0), addr + max(span, 0) + esize - 1
    return bool(perm & need) and 0 <= lo and hi < 1 << 32 and base <= lo and hi <= limit


def test_protection_check_matches_model():
    """Random records and windows, driven through the DMA's states (a failing union retried
    row by row as the control does): the verdict and the first failing row's address are the
    row-by-row model's; a record checked by unions takes ``n1`` verdicts."""
    nwin = 2
    dut = ProtectionCheck(windows=nwin, data_width=128)
    rng = random.Random(11)

    async def bench(ctx):
        unions = fails = 0
        for rec_no in range(150):
            esh = rng.randrange(3)
            es = 1 << esh
            pc, n0, n1 = rng.randrange(1, 5), rng.randrange(1, 6), rng.randrange(1, 4)
            ilv = rng.random() < 0.5
            s0 = es * rng.choice([1, pc, -2, 3])
            ps = es if ilv else es * rng.choice([n0 * n1, -7, 100])
            s1 = es * rng.choice([n0 * pc, -n0, 64])
            base = rng.choice([rng.randrange(1 << 16), M32 - rng.randrange(256)]) & ~(es - 1)
            span = (n0 - 1) * s0
            windows = []
            for _ in range(nwin):
                lo = (base - rng.choice([0, 8, 4096])) & M32
                # Some limits an element either side of the first union's last byte.
                union_end = base + max(span, 0) + pc * es - 1
                limit = (union_end + es * rng.randrange(-1, 2) if rng.random() < 0.3 else
                         lo + rng.choice([64, 600, 1 << 20]))
                windows.append((lo, limit & M32, rng.choice([3, 3, 1, 2])))
            store = rng.randrange(2)
            need = 2 if store else 1
            rows = [((base + p * ps + i * s1) & M32) for p in range(pc) for i in range(n1)]
            bad = [a for a in rows
                   if not any(_row_inside(w, need, es, span, a) for w in windows)]
            rec = dict(ext_addr=base, ext_stride0=s0 & M32, ext_stride1=s1 & M32,
                       ext_part_stride=ps & M32, n0=n0, n1=n1, part_count=pc, store=store)
            for k, v in rec.items():
                ctx.set(getattr(dut.rec, k), v)
            for w, (b, lim, perm) in enumerate(windows):
                ctx.set(dut.windows[w], {"base": b, "limit": lim, "perm": perm})
            for sig, v in ((dut.union_tail, pc * es - 1), (dut.esize, es),
                           (dut.row_span, span), (dut.ilv, ilv)):
                ctx.set(sig, v)
            ctx.set(dut.idle, 1)
            ctx.set(dut.take, 1)
            await ctx.tick()
            ctx.set(dut.idle, 0)
            ctx.set(dut.take, 0)
            for strobe in (dut.setup, None, dut.span):
                if strobe is not None:
                    ctx.set(strobe, 1)
                await ctx.tick()
                if strobe is not None:
                    ctx.set(strobe, 0)
            verdicts, result = 0, None
            union_seen = ctx.get(dut.union)
            for _ in range(200):
                ctx.set(dut.check, 1)
                retry = False
                if ctx.get(dut.row_v):
                    verdicts += 1
                    if not ctx.get(dut.row_ok) and ctx.get(dut.union):
                        retry = True
                    elif not ctx.get(dut.row_ok):
                        result = ("fail", ctx.get(dut.row_addr))
                    elif ctx.get(dut.row_last):
                        result = ("pass", None)
                ctx.set(dut.retry, retry)
                await ctx.tick()
                ctx.set(dut.check, 0)
                ctx.set(dut.retry, 0)
                if result:
                    break
                if retry:
                    ctx.set(dut.span, 1)
                    await ctx.tick()
                    ctx.set(dut.span, 0)
            want = ("fail", bad[0]) if bad else ("pass", None)
            assert result == want, (rec_no, rec, windows)
            assert union_seen == (ilv and span >= 0), rec_no
            if union_seen and not bad:
                assert verdicts == n1, (rec_no, verdicts)
                unions += pc > 1
            fails += bool(bad)
        assert unions > 10 and 20 < fails < 130, (unions, fails)

    simulate(dut, bench)


def test_control_sequences():
    """Directed: an empty record completes, a misaligned one reports, a failing row reports,
    a failing union retries; a store is done two cycles after its last write response, a
    load the cycle after its data side finishes; a record behind a load of the same
    direction issues before the load is done and goes to the data side when it is free; a
    store behind a load waits; a check error behind a load is held until the load is done;
    an abort drains without done, the write stage keeps ``busy`` in IDLE; an AXI error stops
    the issue and is reported once."""
    dut = DmaControl()

    async def bench(ctx):
        names = ("empty", "misaligned", "part_over", "row_v", "row_ok", "row_last", "union",
                 "r_error", "b_error", "drained", "running", "pending", "ld_fin", "st_fin",
                 "r_rec_last", "b_rec")

        def inputs(**kw):
            for k in names:
                ctx.set(getattr(dut, k), kw.get(k, 1 if k == "drained" else 0))

        async def take(store=0):
            ctx.set(dut.cmd.payload.store, store)
            ctx.set(dut.cmd.valid, 1)
            assert ctx.get(dut.cmd.ready) and ctx.get(dut.idle) and ctx.get(dut.take)
            await ctx.tick()
            ctx.set(dut.cmd.valid, 0)
            seq = []
            for name in ("setup", "sum", "span"):
                seq.append(ctx.get(getattr(dut, name)) and ctx.get(dut.busy))
                if name == "span":
                    return seq
                await ctx.tick()

        async def to_run(store, **kw):
            """Take a record whose rows pass; return run and dstart of the CHECK cycle."""
            inputs(**kw)
            await take(store)
            await ctx.tick()
            inputs(row_v=1, row_ok=1, row_last=1, **kw)
            got = ctx.get(dut.run), ctx.get(dut.dstart)
            await ctx.tick()
            return got

        # Empty: done the cycle after SPAN, back in IDLE.
        inputs(empty=1)
        assert await take() == [1, 1, 1]
        assert ctx.get(dut.walk)
        await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.idle) and not ctx.get(dut.busy)
        await ctx.tick()
        assert not ctx.get(dut.done)
        # Misaligned: a report in SPAN, err after it, no done.
        inputs(misaligned=1)
        await take()
        assert ctx.get(dut.report) and not ctx.get(dut.hold)
        await ctx.tick()
        assert ctx.get(dut.idle) and ctx.get(dut.err) and not ctx.get(dut.done)
        # A failing union retries (back to SPAN), then a failing row reports.
        inputs()
        await take()
        await ctx.tick()
        assert ctx.get(dut.check) and not ctx.get(dut.err)
        inputs(row_v=1, union=1)
        assert ctx.get(dut.retry) and not ctx.get(dut.report)
        await ctx.tick()
        assert ctx.get(dut.span)
        inputs()
        await ctx.tick()
        inputs(row_v=1)
        assert ctx.get(dut.check) and ctx.get(dut.report) and not ctx.get(dut.retry)
        await ctx.tick()
        assert ctx.get(dut.idle)
        # A store: run and dstart together; its data side ends at st_fin, done two cycles
        # after the last write response.
        assert await to_run(1, running=1) == (1, 1)
        inputs(running=1)
        assert ctx.get(dut.st) and not ctx.get(dut.load) and ctx.get(dut.busy)
        assert ctx.get(dut.d_act) and not ctx.get(dut.dstart)
        inputs()
        await ctx.tick()
        assert ctx.get(dut.idle) and ctx.get(dut.st) and ctx.get(dut.busy)
        inputs(st_fin=1)
        await ctx.tick()
        inputs()
        assert not ctx.get(dut.d_act) and ctx.get(dut.b_wait) and ctx.get(dut.busy)
        assert not ctx.get(dut.done)
        inputs(b_rec=1)
        await ctx.tick()
        inputs()
        assert not ctx.get(dut.done) and ctx.get(dut.busy)
        await ctx.tick()
        assert ctx.get(dut.done) and not ctx.get(dut.busy)
        await ctx.tick()
        # A load on the data side; a second load issues before it is done and goes to the
        # data side at its end; a store behind them waits for the data side to be idle.
        await to_run(0, running=1)
        inputs()
        assert ctx.get(dut.load) and not ctx.get(dut.idle)
        await ctx.tick()
        assert ctx.get(dut.load) and ctx.get(dut.idle) and ctx.get(dut.cmd.ready)
        assert await to_run(0, running=1) == (1, 0)   # the data side is busy: no dstart
        inputs()
        assert ctx.get(dut.d_act) and not ctx.get(dut.dstart) and not ctx.get(dut.idle)
        await ctx.tick().repeat(2)
        assert not ctx.get(dut.idle)                  # not handed yet
        inputs(ld_fin=1)
        await ctx.tick()
        inputs()
        assert ctx.get(dut.done) and not ctx.get(dut.d_act)
        assert ctx.get(dut.dstart)                    # handed, and the front is free
        await ctx.tick()
        assert ctx.get(dut.idle) and ctx.get(dut.load) and ctx.get(dut.d_act)
        inputs(r_rec_last=1)
        await ctx.tick()
        inputs()
        assert ctx.get(dut.r_hold)
        assert await to_run(1) == (0, 0)              # a store behind a load waits
        await ctx.tick().repeat(3)
        assert not ctx.get(dut.run) and not ctx.get(dut.st)
        inputs(ld_fin=1)
        await ctx.tick()
        inputs()
        assert ctx.get(dut.done) and ctx.get(dut.run) and ctx.get(dut.dstart)
        await ctx.tick()
        assert ctx.get(dut.st) and not ctx.get(dut.r_hold)
        inputs(st_fin=1)
        await ctx.tick()
        inputs(b_rec=1)
        await ctx.tick()
        inputs()
        await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.idle)
        # A window error behind a load is held until the load is done.
        await to_run(0)
        inputs()
        await ctx.tick()
        await take(0)
        await ctx.tick()
        inputs(row_v=1)
        assert ctx.get(dut.hold) and not ctx.get(dut.report)
        await ctx.tick()
        inputs()
        await ctx.tick().repeat(3)
        assert not ctx.get(dut.report) and not ctx.get(dut.release) and not ctx.get(dut.err)
        inputs(ld_fin=1)
        assert not ctx.get(dut.release)
        await ctx.tick()
        inputs()
        assert ctx.get(dut.done) and ctx.get(dut.release) and ctx.get(dut.report)
        await ctx.tick()
        assert ctx.get(dut.idle) and ctx.get(dut.err) and not ctx.get(dut.done)
        await ctx.tick()
        # A load aborted in RUN: halt until drained, no done; the write stage keeps busy.
        inputs(running=1)
        await take(store=0)
        await ctx.tick()
        inputs(row_v=1, row_ok=1, row_last=1, running=1)
        await ctx.tick()
        inputs(running=1, drained=0)
        assert ctx.get(dut.load)
        ctx.set(dut.abort, 1)
        await ctx.tick()
        ctx.set(dut.abort, 0)
        assert ctx.get(dut.stopping) and ctx.get(dut.halt) and ctx.get(dut.load)
        await ctx.tick().repeat(2)
        assert ctx.get(dut.halt)
        inputs(drained=1, ld_fin=1, pending=1)
        await ctx.tick()
        assert ctx.get(dut.idle) and not ctx.get(dut.done) and not ctx.get(dut.load)
        assert ctx.get(dut.busy) and ctx.get(dut.cmd.ready)
        inputs()
        assert not ctx.get(dut.busy)
        # An AXI error in RUN stops the issue (stopping) and is reported once.
        await to_run(1, running=1)
        inputs(b_error=1, running=1, drained=0)
        assert ctx.get(dut.report) and not ctx.get(dut.stopping)
        await ctx.tick()
        inputs(running=1, drained=0)
        assert ctx.get(dut.err) and ctx.get(dut.stopping) and ctx.get(dut.halt)
        assert not ctx.get(dut.report)

    simulate(dut, bench)
