"""DMA bytes per cycle against the bus peak: ``python -m scripts.bench dma [--json] [--quick]``.

The DMA alone (``rtl.dma.dma.DMA``) with a 16-partition SBUF and :class:`BenchMemory`, a
pipelined AXI4 memory in RTL (every burst answered ``--latency`` cycles after its address,
then one beat per cycle, any number of bursts outstanding, no back-pressure), on Verilator
through cocotb: the testbench only starts a record and waits for ``done``, so the simulation
runs at the compiled model's speed. FP32 elements (``part_count = 16``: a column is 64 bytes,
one beat of the widest bus), loads and stores, per bus width and transfer size:

* ``contiguous``: one external byte range, partitions consecutive (``ext_part_stride`` = 4,
  ``ext_stride0`` = 64): the across-partitions path of ``docs/dma.md``;
* ``strided``: the same columns one column apart (``ext_stride0`` = 128);
* ``transposing``: each partition's row contiguous (``ext_stride0`` = 4), one element per
  cycle into one partition.

Two figures per record: *stream*, a queue of ``stream_count(size)`` copies of the record
offered back to back (the DMA overlaps a record's setup, checks and bursts with the data of
the one before): bytes per cycle = bytes moved / cycles from the first command's handshake to
the last ``done``, the bandwidth the engine sustains; and *single* (latency-inclusive), one
record alone: bytes / cycles from its handshake to its ``done`` (its setup, window check and
the first burst's latency included). Peak = ``data_width / 8``.
"""

import json
import os
import pathlib
import tempfile

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import AXI4Signature
from sim.config import check_int, check_pow2
from sim.dma_timing import dma_record_cycles, dma_stream_cycles

__all__ = ["BenchMemory", "run", "add_arguments"]

WIDTHS = (32, 64, 128, 256, 512)
SIZES = (64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20)
QUICK_SIZES = (64, 4096, 65536)


def stream_count(size):
    """Copies of a record of ``size`` bytes in a stream measurement."""
    return 8 if size <= 65536 else 3
KINDS = ("contiguous", "strided", "transposing")
PARTITIONS = 16
ESIZE = 4
MAX_BURST = 256


class BenchMemory(wiring.Component):
    """A pipelined AXI4 subordinate memory for benchmarks: an AR or AW is taken every cycle
    while fewer than 16 wait; a read burst's beats follow ``latency`` cycles after its AR, one
    per cycle (the next burst's first beat right after the previous one's last); W beats are
    taken every cycle for the oldest AW (INCR, full width, ``wstrb`` honoured); a B follows the
    last W beat. Addresses wrap modulo ``size_bytes``. Responses are OKAY.

    Parameters
    ----------
    data_width : int
        A power of two from 32 to 512.
    size_bytes : int
        A power of two, at least 64 beats.
    latency : int
        Cycles from an AR to its first R beat, 1 to 255.

    Members
    -------
    axi : In(AXI4Signature(addr_width=32, data_width=data_width, id_width=1))
    """

    def __init__(self, *, data_width, size_bytes, latency=16):
        self._dw = check_pow2("data_width", data_width, 32, 512)
        self._size = check_pow2("size_bytes", size_bytes, 64 * data_width // 8, 1 << 30)
        self._latency = check_int("latency", latency, 1, 255)
        super().__init__({"axi": In(AXI4Signature(addr_width=32, data_width=data_width,
                                                  id_width=1))})

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        bw = self._dw // 8
        bsh = (bw - 1).bit_length()
        words = self._size // bw
        abits = (words - 1).bit_length()
        m.submodules.mem = mem = memory.Memory(shape=data.ArrayLayout(8, bw), depth=words,
                                               init=[])
        rd = mem.read_port(domain="comb")
        wr = mem.write_port(granularity=1)   # a byte per element
        now = Signal(16)
        m.d.sync += now.eq(now + 1)

        # Reads: (beat index, length, cycle due) queued; the head streams once due.
        ar_layout = data.StructLayout({"beat": abits, "len": 8, "due": 16})
        m.submodules.ar_q = ar_q = fifo.SyncFIFO(width=ar_layout.size, depth=16)
        ar_head = data.View(ar_layout, ar_q.r_data)
        m.d.comb += [axi.arready.eq(ar_q.w_rdy), ar_q.w_en.eq(axi.arvalid),
                     ar_q.w_data.eq(Cat(axi.araddr[bsh:bsh + abits], axi.arlen,
                                        now + self._latency))]
        r_active, r_beat, r_left = Signal(), Signal(abits), Signal(8)
        r_next = Signal()                        # the active burst ends this cycle
        m.d.comb += [
            rd.addr.eq(r_beat), axi.rdata.eq(rd.data), axi.rvalid.eq(r_active),
            axi.rlast.eq(r_left == 0), axi.rresp.eq(0), axi.rid.eq(0),
            r_next.eq(~r_active | (axi.rready & (r_left == 0))),
        ]
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += [r_beat.eq(r_beat + 1), r_left.eq(r_left - 1)]
        with m.If(r_next):
            due = (now - ar_head.due)[15]        # the head is due when now - due >= 0
            m.d.sync += r_active.eq(0)
            with m.If(ar_q.r_rdy & ~due):
                m.d.comb += ar_q.r_en.eq(1)
                m.d.sync += [r_active.eq(1), r_beat.eq(ar_head.beat), r_left.eq(ar_head.len)]

        # Writes: (beat index) per AW queued; W beats go to the head's burst.
        m.submodules.aw_q = aw_q = fifo.SyncFIFO(width=abits, depth=16)
        w_first, w_beat = Signal(init=1), Signal(abits)
        m.d.comb += [axi.awready.eq(aw_q.w_rdy), aw_q.w_en.eq(axi.awvalid),
                     aw_q.w_data.eq(axi.awaddr[bsh:bsh + abits]),
                     axi.wready.eq(aw_q.r_rdy)]
        beat = Mux(w_first, aw_q.r_data, w_beat)
        b_count = Signal(8)
        b_take = axi.bvalid & axi.bready
        w_take = axi.wvalid & axi.wready
        m.d.comb += [wr.addr.eq(beat), wr.data.eq(axi.wdata),
                     wr.en.eq(Mux(w_take, axi.wstrb, 0)),
                     axi.bvalid.eq(b_count != 0), axi.bresp.eq(0), axi.bid.eq(0)]
        with m.If(w_take):
            m.d.sync += [w_beat.eq(beat + 1), w_first.eq(axi.wlast)]
            m.d.comb += aw_q.r_en.eq(axi.wlast)
        m.d.sync += b_count.eq(b_count + (w_take & axi.wlast) - b_take)
        return m


class BenchHarness(wiring.Component):
    """DMA + SBUF + :class:`BenchMemory`, with the DMA's command, ``done``/``err`` and
    ``busy`` as ports and a free-running cycle counter; ``stream_start`` offers the record on
    ``cmd.payload`` ``stream_count`` times back to back (``cmd.valid`` is then ignored), and
    ``stream_done`` is the last of their ``done`` pulses."""

    def __init__(self, *, data_width, sbuf_depth, size_bytes, latency, max_burst):
        from rtl.dma.dma import DMA, DmaRecord, WindowLayout
        from amaranth.lib import stream
        self.dma = DMA(partitions=PARTITIONS, sbuf_depth=sbuf_depth, data_width=data_width,
                       max_burst=max_burst, windows=1)
        self.mem = BenchMemory(data_width=data_width, size_bytes=size_bytes, latency=latency)
        self.sbuf_depth = sbuf_depth
        super().__init__({"cmd": In(stream.Signature(DmaRecord)), "done": Out(1),
                          "err_valid": Out(1), "busy": Out(1), "cycle": Out(32),
                          "stream_start": In(1), "stream_count": In(8), "stream_done": Out(1),
                          "windows": In(data.ArrayLayout(WindowLayout, 1))})

    def elaborate(self, platform):
        from rtl.core.sbuf import SBUF
        m = Module()
        m.submodules.dma = dma = self.dma
        m.submodules.mem = mem = self.mem
        m.submodules.sbuf = sbuf = SBUF(PARTITIONS, self.sbuf_depth, read_ports=("dma",),
                                        write_ports=("dma",))
        wiring.connect(m, dma.axi, mem.axi)
        wiring.connect(m, dma.sbuf_r, sbuf.r_dma)
        wiring.connect(m, dma.sbuf_w, sbuf.w_dma)
        # The stream: records left to offer, done pulses left to see.
        offer, wait = Signal(8), Signal(8)
        m.d.comb += [
            dma.cmd.payload.eq(self.cmd.payload),
            dma.cmd.valid.eq(Mux(wait != 0, offer != 0, self.cmd.valid)),
            self.cmd.ready.eq(dma.cmd.ready & (wait == 0)),
        ]
        m.d.comb += self.stream_done.eq(dma.done & (wait == 1))
        with m.If(self.stream_start):
            m.d.sync += [offer.eq(self.stream_count), wait.eq(self.stream_count)]
        with m.Else():
            with m.If(dma.cmd.valid & dma.cmd.ready & (wait != 0)):
                m.d.sync += offer.eq(offer - 1)
            with m.If(dma.done & (wait != 0)):
                m.d.sync += wait.eq(wait - 1)
        m.d.comb += [self.done.eq(dma.done), self.err_valid.eq(dma.err_valid),
                     self.busy.eq(dma.busy), dma.windows.eq(self.windows),
                     dma.abort.eq(0), dma.clear_counters.eq(0)]
        m.d.sync += self.cycle.eq(self.cycle + 1)
        return m


def records(kind, nbytes, store):
    """The DMA_RECORD fields of a ``kind`` transfer of ``nbytes`` (FP32, 16 partitions)."""
    from sim.dtypes import Format
    col = PARTITIONS * ESIZE
    n = max(1, nbytes // col)                    # columns, or elements per partition
    base = dict(ext_addr=0x10000 if store else 0, n1=1, part_start=0,
                part_count=PARTITIONS, sbuf_addr=0, fmt=int(Format.FP32), store=int(store))
    if kind == "contiguous":
        return dict(base, ext_stride0=col, ext_stride1=0, ext_part_stride=ESIZE, n0=n)
    if kind == "strided":
        return dict(base, ext_stride0=2 * col, ext_stride1=0, ext_part_stride=ESIZE, n0=n)
    return dict(base, ext_stride0=ESIZE, ext_stride1=0, ext_part_stride=n * ESIZE, n0=n)


try:
    import cocotb
    from cocotb.triggers import ClockCycles, First, RisingEdge

    @cocotb.test()
    async def bench_records(dut):
        """Runs the records of ``BENCH_DMA["records"]`` (JSON in the environment, so that
        the build does not depend on them); writes their cycles to ``BENCH_DMA["out"]``."""
        from cocotb.clock import Clock
        from sim.isa import DMA_RECORD, pack
        cfg = json.loads(os.environ["BENCH_DMA"])
        Clock(dut.clk, 10, unit="ns").start()
        dut.cmd__valid.value = 0
        dut.stream_start.value = 0
        dut.stream_count.value = 0
        dut.windows.value = (0xFFFFFFFF << 32) | (3 << 64)        # all of memory, read/write
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        out = []
        for rec, count in zip(cfg["records"], cfg["counts"]):
            # The DMA is idle, so the command is taken at the next edge.
            dut.cmd__payload.value = pack(DMA_RECORD, **rec)
            dut.cmd__valid.value = 1
            await RisingEdge(dut.clk)
            start = int(dut.cycle.value)
            dut.cmd__valid.value = 0
            await RisingEdge(dut.done)
            single = int(dut.cycle.value) - start
            await RisingEdge(dut.clk)
            assert not int(dut.err_valid.value) and not int(dut.busy.value)
            # The same record ``count`` times back to back: from the edge that takes the
            # first (the DMA is idle: the edge after ``stream_start``) to the last done.
            dut.stream_count.value = count
            dut.stream_start.value = 1
            await RisingEdge(dut.clk)
            dut.stream_start.value = 0
            await RisingEdge(dut.clk)
            start = int(dut.cycle.value)
            await First(RisingEdge(dut.stream_done),
                        ClockCycles(dut.clk, 4 * count * single + 1000))
            assert int(dut.stream_done.value), f"stream of {count} did not finish: {rec}"
            out.append((single, int(dut.cycle.value) - start))
            await RisingEdge(dut.clk)
            assert not int(dut.err_valid.value) and not int(dut.busy.value)
        pathlib.Path(cfg["out"]).write_text(json.dumps(out))
except ImportError:  # pragma: no cover
    pass


def _depth(sizes):
    """SBUF words per partition for the largest of ``sizes``."""
    return max(16, 1 << (max(sizes) // (PARTITIONS * ESIZE) - 1).bit_length())


def _measure_amaranth(cfg, recs, counts):
    """The cycles of ``bench_records`` on Amaranth's simulator (in process, no build)."""
    from amaranth.sim import Simulator
    from sim.isa import DMA_RECORD, pack
    h = BenchHarness(**cfg)
    out = []

    async def until(ctx, sig, limit):
        for n in range(1, limit + 1):
            await ctx.tick()
            if ctx.get(sig):
                return n
        raise AssertionError(f"no {sig.name} within {limit} cycles")

    async def bench(ctx):
        ctx.set(h.windows.as_value(), (0xFFFFFFFF << 32) | (3 << 64))
        await ctx.tick()
        for rec, count in zip(recs, counts):
            ctx.set(h.cmd.payload.as_value(), pack(DMA_RECORD, **rec))
            ctx.set(h.cmd.valid, 1)
            await ctx.tick()                     # taken (the DMA is idle)
            ctx.set(h.cmd.valid, 0)
            single = await until(ctx, h.done, 1 << 22)
            await ctx.tick()
            assert not ctx.get(h.busy) and not ctx.get(h.err_valid)
            ctx.set(h.stream_count, count)
            ctx.set(h.stream_start, 1)
            await ctx.tick()
            ctx.set(h.stream_start, 0)
            await ctx.tick()                     # the first is taken
            stream = await until(ctx, h.stream_done, 4 * count * single + 1000)
            await ctx.tick()
            assert not ctx.get(h.busy) and not ctx.get(h.err_valid)
            out.append((single + 1, stream + 1))     # handshake to done inclusive, as above

    sim = Simulator(h)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def measure(data_width, sizes, kinds=KINDS, *, latency=16, max_burst=256,
            simulator="verilator"):
    """``{(kind, direction, size): (single, stream)}`` for one bus width: the cycles of one
    record alone and of a stream of ``stream_count(size)`` copies."""
    from cocotb_tests.common.runner import run_cocotb
    recs, keys = [], []
    for kind in kinds:
        for store in (0, 1):
            for size in sizes:
                recs.append(records(kind, size, store))
                keys.append((kind, "store" if store else "load", size))
    depth = _depth(sizes)
    size_bytes = 1 << 16                         # (addresses wrap: the data do not matter)
    cfg = dict(data_width=data_width, sbuf_depth=depth, size_bytes=size_bytes,
               latency=latency, max_burst=max_burst)
    counts = [stream_count(k[2]) for k in keys]
    if simulator == "amaranth":
        return dict(zip(keys, _measure_amaranth(cfg, recs, counts)))
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "cycles.json"
        run_cocotb(lambda: BenchHarness(**cfg), name=f"bench_dma_w{data_width}", config=cfg,
                   test_module="scripts.bench_dma", simulator=simulator,
                   extra_env={"BENCH_DMA": json.dumps(dict(
                       records=recs, counts=counts,
                       out=str(out)))})
        cycles = json.loads(out.read_text())
    return {k: tuple(c) for k, c in zip(keys, cycles)}


def add_arguments(parser):
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)),
                        help="bus widths in bits (default 32,64,128,256,512)")
    parser.add_argument("--latency", type=int, default=16,
                        help="memory latency from AR to the first R beat (default 16)")
    parser.add_argument("--simulator", default="verilator",
                        choices=("verilator", "icarus", "amaranth"))
    parser.add_argument("--sizes", default="",
                        help="transfer sizes in bytes (default: all, or the quick set)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="transfer kinds (default contiguous,strided,transposing)")


def run(args):
    widths = [int(w) for w in str(getattr(args, "widths", "") or
                                  ",".join(map(str, WIDTHS))).split(",")]
    sizes = QUICK_SIZES if getattr(args, "quick", False) else SIZES
    if getattr(args, "sizes", ""):
        sizes = tuple(int(x) for x in str(args.sizes).split(","))
    latency = getattr(args, "latency", 16)
    rows = []
    for w in widths:
        kinds = [k for k in str(getattr(args, "kinds", "") or ",".join(KINDS)).split(",") if k]
        for k in kinds:
            if k not in KINDS:
                raise ValueError(f"kinds must be among {', '.join(KINDS)}, not {k!r}")
        got = measure(w, sizes, kinds, latency=latency,
                      simulator=getattr(args, "simulator", "verilator"))
        for (kind, direction, size), (cycles, stream) in got.items():
            moved = max(1, size // (PARTITIONS * ESIZE)) * PARTITIONS * ESIZE
            rec = records(kind, size, direction == "store")
            kw = dict(data_width=w, sbuf_depth=_depth(sizes), max_burst=MAX_BURST,
                      latency=latency)
            n = stream_count(size)
            rate = moved / cycles
            rate_s = n * moved / stream
            model = dma_record_cycles(rec, **kw)
            model_s = dma_stream_cycles(rec, n, **kw)
            rows.append(dict(width=w, kind=kind, direction=direction, bytes=moved,
                             simulator=getattr(args, "simulator", "verilator"),
                             peak=w // 8, stream_count=n, stream_cycles=stream,
                             stream_bytes_per_cycle=round(rate_s, 3),
                             stream_fraction=round(rate_s / (w // 8), 4),
                             stream_model_cycles=model_s,
                             stream_model_error=round(model_s / stream - 1, 4),
                             cycles=cycles, bytes_per_cycle=round(rate, 3),
                             fraction=round(rate / (w // 8), 4),
                             model_cycles=model, model_error=round(model / cycles - 1, 4)))
    goal = [r for r in rows if r["kind"] == "contiguous" and r["bytes"] >= 4096]
    big = [r for r in rows if r["bytes"] >= 4096]
    return {"simulator": getattr(args, "simulator", "verilator"),
            "partitions": PARTITIONS, "format": "fp32", "latency": latency,
            "max_burst": MAX_BURST, "max_outstanding": 4, "sizes": list(sizes), "rows": rows,
            "contiguous_4k_stream_fraction": {
                w: min((r["stream_fraction"] for r in goal if r["width"] == w), default=None)
                for w in widths},
            "contiguous_4k_fraction": {w: min((r["fraction"] for r in goal if r["width"] == w),
                                              default=None) for w in widths},
            "model_max_error_4k": max((abs(r["model_error"]) for r in big), default=None),
            "stream_model_max_error_4k": max((abs(r["stream_model_error"]) for r in big),
                                             default=None)}


def measure_sequence(data_width, recs, *, latency=16, sbuf_depth=256, max_burst=MAX_BURST,
                     gaps=None):
    """Cycles of the records ``recs`` (dicts of ``sim.isa.DMA_RECORD`` fields) offered in
    order on Amaranth's simulator: record ``k`` is offered ``gaps[k]`` cycles after the
    previous one is taken (default 0: back to back). Returns ``[(take, done), ...]``: the
    cycle of each record's handshake and of its ``done`` pulse, counted from the first
    handshake."""
    from amaranth.sim import Simulator
    from sim.isa import DMA_RECORD, pack
    h = BenchHarness(data_width=data_width, sbuf_depth=sbuf_depth, size_bytes=1 << 16,
                     latency=latency, max_burst=max_burst)
    gaps = list(gaps or [0] * len(recs))
    takes, dones = [], []

    async def bench(ctx):
        ctx.set(h.windows.as_value(), (0xFFFFFFFF << 32) | (3 << 64))
        await ctx.tick()
        cycle = 0
        k = 0
        idle = gaps[0]
        limit = 64 + sum(gaps) + sum(4 * dma_record_cycles(
            r, data_width=data_width, sbuf_depth=sbuf_depth, max_burst=max_burst,
            latency=latency) for r in recs)
        while len(dones) < len(recs):
            offer = k < len(recs) and idle <= 0
            if offer:
                ctx.set(h.cmd.payload.as_value(), pack(DMA_RECORD, **recs[k]))
            ctx.set(h.cmd.valid, offer)
            await ctx.delay(1e-9)
            taken = offer and ctx.get(h.cmd.ready)
            if ctx.get(h.done):
                dones.append(cycle)
            assert not ctx.get(h.err_valid), f"error on record {len(dones)}"
            await ctx.tick()
            if taken:
                takes.append(cycle)
                k += 1
                idle = gaps[k] if k < len(recs) else 0
            else:
                idle -= 1
            cycle += 1
            assert cycle < limit, f"no done for record {len(dones)} within {limit} cycles"

    sim = Simulator(h)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return [(t - takes[0], d - takes[0]) for t, d in zip(takes, dones)]
