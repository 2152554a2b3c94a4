"""cocotb tests of the DMA engine (rtl/dma/dma.py) with the real SBUF (rtl/core/sbuf.py) and a
cocotbext-axi AxiRam as external memory (random latency, back-pressure on all five channels,
error-response injection, a second SBUF writer competing for the shared SBUF write port).

Every transfer is compared bit-exactly with ``sim.host.dma_model`` (the golden model of a
DMA_RECORD, docs/isa.md) and every protection outcome with ``sim.host.dma_check``. A bus monitor
records every AR/AW/R/W/B handshake: it proves that refused transfers issue no transaction, that
bursts respect AXI rules (length, 4 KiB) and that several reads are outstanding at once.
"""

import itertools
import random

import numpy as np
import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from sim.dtypes import Format, STORAGE_BITS
from sim.errors import ErrorCode
from sim.host import dma_model, dma_check
from sim.dma_timing import across_partitions
from sim.isa import DMA_RECORD, pack
from sim.memmap import DMA_PERM_READ, DMA_PERM_WRITE
from rtl.core.sbuf import SBUF, SBUFReadSignature, SBUFWriteSignature
from rtl.dma.dma import DMA
from cocotb_tests.common.tb import random_seed
from cocotb_tests.common.streams import StreamMonitor, StreamSource
from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.axi_transport import settle_comb
from cocotb_tests.common.config import dut_config

RAM_SIZE = 1 << 16


class Harness(wiring.Component):
    """DMA + SBUF with a debug port pair for the testbench (preload and read back SBUF)."""

    def __init__(self, *, partitions, sbuf_depth, **kwargs):
        self.dma = DMA(partitions=partitions, sbuf_depth=sbuf_depth, **kwargs)
        self.P, self.depth = partitions, sbuf_depth
        members = {n: self.dma.signature.members[n]
                   for n in ("cmd", "done", "err_valid", "err_code", "err_addr", "err_info",
                             "abort", "busy", "windows", "rd_bytes", "wr_bytes",
                             "clear_counters")}
        members["m_axi"] = self.dma.signature.members["axi"]
        members["dbg_r"] = In(SBUFReadSignature(partitions, sbuf_depth))
        members["dbg_w"] = In(SBUFWriteSignature(partitions, sbuf_depth))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = dma = self.dma
        m.submodules.sbuf = sbuf = SBUF(self.P, self.depth, read_ports=("dma", "dbg"),
                                        write_ports=("dma", "dbg"))
        wiring.connect(m, dma.sbuf_r, sbuf.r_dma)
        wiring.connect(m, dma.sbuf_w, sbuf.w_dma)
        wiring.connect(m, wiring.flipped(self.dbg_r), sbuf.r_dbg)
        wiring.connect(m, wiring.flipped(self.dbg_w), sbuf.w_dbg)
        wiring.connect(m, wiring.flipped(self.cmd), dma.cmd)
        wiring.connect(m, dma.axi, wiring.flipped(self.m_axi))
        for name in ("done", "err_valid", "err_code", "err_addr", "err_info", "busy",
                     "rd_bytes", "wr_bytes"):
            m.d.comb += getattr(self, name).eq(getattr(dma, name))
        for name in ("abort", "windows", "clear_counters"):
            m.d.comb += getattr(dma, name).eq(getattr(self, name))
        return m


# ---------------------------------------------------------------------------------------------
# Testbench
# ---------------------------------------------------------------------------------------------

class BusMonitor:
    """Records AXI handshakes and checks burst rules; counts outstanding reads and writes."""

    def __init__(self, dut, max_burst, max_outstanding, bw):
        self.dut = dut
        self.max_burst = max_burst
        self.max_outstanding = max_outstanding
        self.bw = bw
        self.ar = []
        self.aw = []
        self.cycle = 0               # clock edges since start
        self.hs_cycles = []          # the edge of every AR and AW handshake
        self.r_beats = 0
        self.w_beats = 0
        self.max_rd_out = 0
        self.max_wr_out = 0
        self._rd_out = 0
        self._wr_out = 0
        self.errors = []

    def start(self):
        cocotb.start_soon(self._run())

    def transactions(self):
        return len(self.ar) + len(self.aw)

    def _check_burst(self, kind, addr, length, size):
        nbytes = (length + 1) * self.bw
        if addr % self.bw or size != self.bw.bit_length() - 1:
            self.errors.append(f"{kind} misaligned/size: 0x{addr:x} size {size}")
        if length + 1 > self.max_burst:
            self.errors.append(f"{kind} burst too long: {length + 1}")
        if (addr & 0xFFF) + nbytes > 0x1000:
            self.errors.append(f"{kind} crosses 4 KiB: 0x{addr:x} +{nbytes}")

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if int(d.m_axi__arvalid.value) and int(d.m_axi__arready.value):
                a, ln = int(d.m_axi__araddr.value), int(d.m_axi__arlen.value)
                self.ar.append((a, ln))
                self.hs_cycles.append(self.cycle)
                self._check_burst("AR", a, ln, int(d.m_axi__arsize.value))
                self._rd_out += 1
            if int(d.m_axi__awvalid.value) and int(d.m_axi__awready.value):
                a, ln = int(d.m_axi__awaddr.value), int(d.m_axi__awlen.value)
                self.aw.append((a, ln))
                self.hs_cycles.append(self.cycle)
                self._check_burst("AW", a, ln, int(d.m_axi__awsize.value))
                self._wr_out += 1
            self.max_rd_out = max(self.max_rd_out, self._rd_out)
            self.max_wr_out = max(self.max_wr_out, self._wr_out)
            if int(d.m_axi__rvalid.value) and int(d.m_axi__rready.value):
                self.r_beats += 1
                if int(d.m_axi__rlast.value):
                    self._rd_out -= 1
            if int(d.m_axi__wvalid.value) and int(d.m_axi__wready.value):
                self.w_beats += 1
            if int(d.m_axi__bvalid.value) and int(d.m_axi__bready.value):
                self._wr_out -= 1
            if self._rd_out > self.max_outstanding or self._wr_out > self.max_outstanding:
                self.errors.append(f"too many outstanding: {self._rd_out} {self._wr_out}")


class IssuerChecker:
    """White-box check of the burst issuer's lookahead registers (``rtl/dma/burst_issuer.py``
    and its ``rtl/dma/burst_splitter.py``), every cycle: while a segment is loaded (``iss_run``
    and not ``iss_load``) its flags equal their definitions from the counts (beats left
    L = ``iss_left1`` + 1, beats to the 4 KiB boundary T = ``iss_to4k``, ``iss_diff1`` =
    L - T - 1), and ``iss_ok`` equals iss_run & ~iss_load & (outstanding < max_outstanding)
    except in the two cycles after a stop (an error or an abort), where it may lag. A flag a
    burst late or early fails here even where the burst lengths hide it."""

    def __init__(self, dut, max_burst, max_outstanding, bw, errors):
        self.dut, self.mb, self.mo, self.k = dut, max_burst, max_outstanding, 4096 // bw
        self.checked = 0
        self.errors = errors

    def start(self):
        cocotb.start_soon(self._run())

    async def _run(self):
        issuer, control = self.dut.dma.issuer, self.dut.dma.control
        bursts = issuer.bursts
        stop_seen = 0
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            v = {n: int(getattr(issuer, n).value) for n in ("iss_load", "iss_ok", "outstanding")}
            v["iss_run"] = int(issuer.running.value)
            v.update({n: int(getattr(control, n).value) for n in ("err", "aborting")})
            v.update({n: int(getattr(bursts, n).value) for n in (
                "iss_left1", "iss_to4k", "iss_diff1", "iss_by4k", "iss_end", "iss_page")})
            stop_seen = 2 if v["err"] or v["aborting"] or int(self.dut.abort.value) else \
                max(0, stop_seen - 1)
            ok = v["iss_run"] and not v["iss_load"] and v["outstanding"] < self.mo
            if not stop_seen and v["iss_ok"] != ok:
                self.errors.append(f"iss_ok {v['iss_ok']} but {v}")
            if not v["iss_run"] or v["iss_load"]:
                continue
            left, to4k = v["iss_left1"] + 1, v["iss_to4k"]
            n = len(bursts.iss_diff1.value)
            diff1 = v["iss_diff1"] - ((v["iss_diff1"] >> (n - 1)) << n)
            by4k = to4k < left and to4k < self.mb
            want = dict(iss_diff1=left - to4k - 1, iss_by4k=by4k,
                        iss_end=left <= self.mb and left <= to4k,
                        iss_page=by4k or to4k == self.mb)
            got = dict(v, iss_diff1=diff1)
            bad = {f: got[f] for f, w in want.items() if got[f] != int(w)}
            if bad or not 1 <= to4k <= self.k:
                self.errors.append(f"L {left} T {to4k}: {bad}")
            self.checked += 1


class Bench:
    def __init__(self, dut, rng, *, pause=0.0, latency=0, exact_offer=False):
        self.dut = dut
        # Commands driven directly rather than by the stream source (see ``_run``): for the
        # tests whose exact cycle counts are recorded.
        self.exact_offer = exact_offer
        self.cfg = dut_config()
        self.P = self.cfg["partitions"]
        self.depth = self.cfg["sbuf_depth"]
        self.bw = self.cfg["data_width"] // 8
        # The longest burst: max_burst, at most half a 4 KiB page (``DMA.burst_beats``).
        self.mb = min(self.cfg["max_burst"], 2048 // self.bw)
        self.rng = rng
        self.pause = pause
        self.fail_read = set()       # beat addresses answered with SLVERR
        self.fail_write = set()
        self.latency = latency
        self.mon = BusMonitor(dut, self.mb, self.cfg["max_outstanding"], self.bw)
        # (its errors are the bus monitor's, which every test checks)
        self.iss_chk = IssuerChecker(dut, self.mb, self.cfg["max_outstanding"],
                                     self.bw, self.mon.errors)
        self.windows = []
        # A competing SBUF writer on the debug write port during ``run``: the probability of
        # starting a write per cycle, and the model array its taken writes are applied to.
        self.contend = 0.0
        self.model_sbuf = None
        self.contend_taken = 0
        self.contend_refused = 0

    def _make_ram(self):
        from cocotbext.axi import AxiBus, AxiRam
        dut, rng, pause = self.dut, self.rng, self.pause
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst, size=RAM_SIZE)
        self._patch_ram()
        if pause:
            def gen(seed):
                r = random.Random(seed)
                while True:
                    yield r.random() < pause
            ri, wi = self.ram.read_if, self.ram.write_if
            for k, ch in enumerate((ri.ar_channel, ri.r_channel, wi.aw_channel, wi.w_channel,
                                    wi.b_channel)):
                ch.set_pause_generator(gen(rng.getrandbits(32) + k))

    def _patch_ram(self):
        ram, bench = self.ram, self

        async def _read(address, length):
            if bench.latency:
                await ClockCycles(bench.dut.clk, bench.rng.randrange(bench.latency + 1))
            if address in bench.fail_read:
                raise IOError("injected read error")
            return ram.read(address % RAM_SIZE, length)

        async def _write(address, data):
            if address - address % bench.bw in bench.fail_write:
                raise IOError("injected write error")
            ram.write(address % RAM_SIZE, data)
        ram.read_if._read = _read
        ram.write_if._write = _write

    def across(self, rec):
        """Whether the DMA moves ``rec`` across partitions (``docs/dma.md``)."""
        return across_partitions(rec, data_width=8 * self.bw, sbuf_depth=self.depth)

    async def start(self):
        d = self.dut
        d.rst.value = 1
        # The command stream's driver (``valid`` held with the record until ``ready``).
        self.cmd = StreamSource(d, "cmd", rng=self.rng)
        d.abort.value = 0
        d.clear_counters.value = 0
        d.dbg_r__en.value = 0
        d.dbg_w__mask.value = 0
        d.windows.value = 0
        await settle_comb(d)
        self._make_ram()
        start_clock(d)
        await reset(d)
        self.mon.start()
        self.iss_chk.start()

    def set_windows(self, windows):
        """``windows``: list of (base, limit, perm), at most the configured number."""
        self.windows = list(windows)
        word = 0
        for k, (base, limit, perm) in enumerate(self.windows):
            word |= (base | limit << 32 | perm << 64) << (66 * k)
        self.dut.windows.value = word

    async def sbuf_write(self, sbuf):
        d = self.dut
        for a in range(self.depth):
            word = 0
            for p in range(self.P):
                word |= int(sbuf[p, a]) << (32 * p)
            d.dbg_w__addr.value = a
            d.dbg_w__data.value = word
            d.dbg_w__mask.value = (1 << self.P) - 1
            await RisingEdge(d.clk)
            assert int(d.dbg_w__ready.value), "SBUF write refused while the DMA is idle"
        d.dbg_w__mask.value = 0

    async def _contender(self, free, stop):
        """Write random words at SBUF addresses in ``free`` (which the running record does not
        touch) until ``stop[0]``; a write is held until taken (``ready`` at the clock edge)
        and then applied to ``model_sbuf``; a write still refused at the end is withdrawn."""
        d, rng = self.dut, self.rng
        w = None
        while not stop[0]:
            if w is None and free and rng.random() < self.contend:
                w = (rng.choice(free), rng.randrange(1, 1 << self.P),
                     [rng.getrandbits(32) for _ in range(self.P)])
                d.dbg_w__addr.value = w[0]
                d.dbg_w__data.value = sum(v << (32 * p) for p, v in enumerate(w[2]))
            d.dbg_w__mask.value = 0 if w is None else w[1]
            await RisingEdge(d.clk)
            if w is None:
                continue
            if int(d.dbg_w__ready.value):
                for p in range(self.P):
                    if w[1] >> p & 1:
                        self.model_sbuf[p, w[0]] = w[2][p]
                self.contend_taken += 1
                w = None
            else:
                self.contend_refused += 1
        d.dbg_w__mask.value = 0

    async def sbuf_read(self):
        d = self.dut
        out = np.zeros((self.P, self.depth), dtype=np.uint32)
        d.dbg_r__en.value = 1
        for a in range(self.depth + 1):
            if a < self.depth:
                d.dbg_r__addr.value = a
            await RisingEdge(d.clk)
            if a > 0:
                v = int(d.dbg_r__data.value)
                for p in range(self.P):
                    out[p, a - 1] = (v >> (32 * p)) & 0xFFFFFFFF
        d.dbg_r__en.value = 0
        return out

    async def run(self, rec, timeout=20000, abort_after=None):
        """Issue one record; return ``("done", None)`` or ``("error", (code, addr, info))``
        or ``("aborted", None)``, after the engine is idle again."""
        d = self.dut
        stop = [False]
        if self.contend:
            used = {(rec["sbuf_addr"] + k) % self.depth for k in range(rec["n0"] * rec["n1"])}
            free = [a for a in range(self.depth) if a not in used]
            task = cocotb.start_soon(self._contender(free, stop))
        try:
            return await self._run(rec, timeout, abort_after)
        finally:
            if self.contend:
                stop[0] = True
                await task

    async def _run(self, rec, timeout, abort_after):
        d = self.dut
        # 0, 0, 1 or 3 idle cycles before the command, drawn from the bench's generator as
        # its other random choices are, then the record is held until taken.
        idle = self.rng.choice([0, 0, 1, 3])
        if self.exact_offer:
            # Driven directly, ``ready`` read just after the edge: the counts of
            # test_cycle_counts* also depend on this coroutine resuming before the competing
            # SBUF writer and the bus monitor at every edge (the writer's last draw and the
            # monitor's start cycle), an order the source's ReadOnly sampling changes.
            for _ in range(idle):
                await RisingEdge(d.clk)
            d.cmd__payload.value = pack(DMA_RECORD, **rec)
            d.cmd__valid.value = 1
            while True:
                await RisingEdge(d.clk)
                if int(d.cmd__ready.value):
                    break
            d.cmd__valid.value = 0
        else:
            await self.cmd.send(pack(DMA_RECORD, **rec), idle=idle)
        result = None
        for cycle in range(timeout):
            await RisingEdge(d.clk)
            if abort_after is not None and cycle == abort_after:
                    d.abort.value = 1
            if int(d.done.value):
                result = result or ("done", None)
                self.last_cycles = cycle + 1       # command handshake to done pulse
            if int(d.err_valid.value):
                assert result is None, result
                result = ("error", (int(d.err_code.value), int(d.err_addr.value),
                                    int(d.err_info.value)))
            if cycle > 2 and not int(d.busy.value):
                break
        else:
            raise AssertionError(f"DMA did not finish within {timeout} cycles: {rec}")
        d.abort.value = 0
        return result or ("aborted", None)


    async def run_stream(self, recs, timeout=60000):
        """Offer ``recs`` back to back (each record as soon as the previous one is taken).
        Returns the events in order (``"done"`` or ``("error", (code, addr, info))``) and how
        many records were taken while the engine was busy. After an error no record is
        offered and ``abort`` is raised (as the core does) until the engine is idle."""
        d = self.dut
        busy_at_take = []        # ``busy`` in the cycle each record is taken
        mon = StreamMonitor(d, "cmd", on_beat=lambda _: busy_at_take.append(int(d.busy.value)))

        async def offer():
            for rec in recs:
                await self.cmd.send(pack(DMA_RECORD, **rec), idle=0)
        sender = cocotb.start_soon(offer())
        events, k, erred = [], 0, False
        try:
            for _ in range(timeout):
                await RisingEdge(d.clk)
                k_before, k = k, mon.beats
                if int(d.done.value):
                    events.append("done")
                if int(d.err_valid.value):
                    events.append(("error", (int(d.err_code.value), int(d.err_addr.value),
                                             int(d.err_info.value))))
                    if not erred:
                        # The offer of the next record is withdrawn (as the core's is).
                        sender.cancel()
                        d.cmd__valid.value = 0
                    erred = True
                d.abort.value = int(erred)
                if (k == len(recs) or erred) and k == k_before and not int(d.busy.value):
                    break
            else:
                raise AssertionError(f"stream did not finish within {timeout} cycles: "
                                     f"{k} of {len(recs)} taken, events {events}")
        finally:
            mon.stop()
            if not sender.done():
                sender.cancel()
        if not erred:
            mon.check()          # (a withdrawn offer is the one allowed violation)
        d.cmd__valid.value = 0
        d.abort.value = 0
        await RisingEdge(d.clk)
        return events, sum(busy_at_take[1:])


def _esize(fmt):
    return STORAGE_BITS[Format(fmt)] // 8


def random_record(rng, P, depth, fmt, store, region, *, contiguous=None):
    """A random record whose every element lies inside ``region`` = (lo, hi) (bytes)."""
    es = _esize(fmt)
    lo, hi = region
    while True:
        n0 = rng.choice([1, 2, 3, rng.randrange(1, 9), rng.randrange(1, 40)])
        n1 = rng.choice([1, 1, 2, 3])
        part_count = rng.randrange(1, P + 1)
        part_start = rng.randrange(0, P - part_count + 1)
        if n0 * n1 > depth:
            continue
        contig = rng.random() < 0.6 if contiguous is None else contiguous
        s0 = es if contig else es * rng.choice([-3, -1, 0, 2, 3, 5])
        s1 = es * rng.choice([n0, n0 + 1, n0 + 7, -n0 - 2, rng.randrange(-64, 64)])
        ps = es * rng.choice([n0 * n1, rng.randrange(-300, 300), 1024])
        if rng.random() < 0.35:
            # Across partitions (docs/dma.md): columns contiguous or apart, rows apart.
            ps = es
            s0 = es * part_count * rng.choice([1, 1, 2, 3]) if contig else s0
            s1 = rng.choice([s0 * n0, s0 * n0 + es * rng.randrange(9), -s0 * n0 - ps])
        rec = dict(ext_addr=0, ext_stride0=s0 & 0xFFFFFFFF, ext_stride1=s1 & 0xFFFFFFFF,
                   ext_part_stride=ps & 0xFFFFFFFF, n0=n0, n1=n1, part_start=part_start,
                   part_count=part_count, sbuf_addr=rng.randrange(depth), fmt=int(fmt),
                   store=int(store))
        # Offsets of every element relative to ext_addr; place ext_addr so that all fit.
        offs = [p * ps + i * s1 + j * s0 for p in range(part_count) for i in range(n1)
                for j in range(n0)]
        span_lo, span_hi = min(offs), max(offs) + es
        room = (hi - lo) - (span_hi - span_lo)
        if room < 0:
            continue
        base = lo - span_lo + rng.randrange(room // es + 1) * es
        rec["ext_addr"] = base
        return rec


def _region_of(rec):
    es = _esize(rec["fmt"])
    addrs = [(rec["ext_addr"] + p * rec["ext_part_stride"] + i * rec["ext_stride1"] +
              j * rec["ext_stride0"]) % (1 << 32)
             for p in range(rec["part_count"]) for i in range(rec["n1"])
             for j in range(rec["n0"])]
    return min(addrs), max(addrs) + es


async def _check_transfer(bench, rec, ext, sbuf):
    """Run ``rec`` on the DUT and on the model; compare the affected memory bit-exactly."""
    dut_result = await bench.run(rec)
    assert dut_result == ("done", None), (dut_result, rec)
    dma_model(rec, ext, sbuf)
    if rec["store"]:
        lo, hi = 0, RAM_SIZE
        got = bench.ram.read(lo, hi - lo)
        if got != bytes(ext[lo:hi]):
            diff = [k for k in range(hi - lo) if got[k] != ext[lo + k]]
            raise AssertionError(f"store mismatch at bytes {[hex(x) for x in diff[:8]]}: {rec}")
    else:
        got = await bench.sbuf_read()
        bad = np.argwhere(got != sbuf)
        assert len(bad) == 0, f"load mismatch at {bad[:8].tolist()}: {rec}"


ALL_FORMATS = list(Format)


async def _random_memories(bench, rng, region=(0, RAM_SIZE), *, windows=None, random_sbuf=True):
    """One read/write window over ``region`` (or the ``windows`` given, as
    :meth:`Bench.set_windows` takes them), random external memory and, with ``random_sbuf``,
    random SBUF contents (else SBUF is left as reset left it: zero); returns the models
    ``(ext, sbuf)`` the transfers are checked against."""
    bench.set_windows(windows if windows is not None else
                      [(region[0], region[1] - 1, DMA_PERM_READ | DMA_PERM_WRITE)])
    init = bytes(rng.getrandbits(8) for _ in range(RAM_SIZE))
    bench.ram.write(0, init)
    if not random_sbuf:
        return bytearray(init), np.zeros((bench.P, bench.depth), dtype=np.uint32)
    sbuf = np.array([[rng.getrandbits(32) for _ in range(bench.depth)] for _ in range(bench.P)],
                    dtype=np.uint32)
    await bench.sbuf_write(sbuf)
    return bytearray(init), sbuf


@cocotb.test()
@cocotb.parametrize(pause=[0.0, 0.5])
async def test_transfers(dut, pause):
    """Loads and stores of every format with random 3-D strided patterns (contiguous rows,
    element strides, negative strides, 4 KiB crossings), random latency and back-pressure;
    SBUF and external memory compared bit-exactly with the model."""
    seed = random_seed() + int(pause * 2)
    rng = random.Random(seed)
    dut._log.info("seed %d pause %.1f", seed, pause)
    bench = Bench(dut, rng, pause=pause, latency=3 if pause else 0)
    await bench.start()
    region = (0x0F00, 0x2300)             # crosses two 4 KiB boundaries
    ext, sbuf = await _random_memories(bench, rng, region)
    n = int(dut_config().get("transfers", 24))
    across = 0
    for k in range(n):
        fmt = ALL_FORMATS[k % len(ALL_FORMATS)]
        store = rng.random() < 0.5
        rec = random_record(rng, bench.P, bench.depth, fmt, store, region)
        while k % 4 == 0 and not bench.across(rec):     # every fourth record across
            rec = random_record(rng, bench.P, bench.depth, fmt, store, region)
        dut._log.info("record %d: %s", k, rec)
        await _check_transfer(bench, rec, ext, sbuf)
        across += bench.across(rec)
    dut._log.info("%d of %d records across partitions", across, n)
    assert across >= -(-n // 4), across
    assert not bench.mon.errors, bench.mon.errors[:5]
    # Byte counters: every element moved is counted in its direction.
    assert int(dut.rd_bytes.value) + int(dut.wr_bytes.value) > 0


@cocotb.test()
async def test_sbuf_write_contention(dut):
    """Random loads (and some stores) while a second writer takes the shared SBUF write port in
    many cycles: the DMA holds its element and stops taking R beats while refused, so SBUF
    ends bit-exact with the model (nothing lost or written twice) and the other writer's
    words land too."""
    seed = random_seed() + 3
    rng = random.Random(seed)
    dut._log.info("seed %d", seed)
    bench = Bench(dut, rng, pause=0.2, latency=1)
    await bench.start()
    region = (0x0F00, 0x2300)             # crosses two 4 KiB boundaries
    ext, sbuf = await _random_memories(bench, rng, region)
    bench.model_sbuf = sbuf
    n = int(dut_config().get("transfers", 24))
    across = 0
    for k in range(n):
        bench.contend = rng.choice([0.3, 0.7, 1.0])
        fmt = ALL_FORMATS[k % len(ALL_FORMATS)]
        store = rng.random() < 0.25
        while True:                                     # every fourth record across
            rec = random_record(rng, bench.P, bench.depth, fmt, store, region)
            rec["n1"] = 1 if rec["n0"] * rec["n1"] > bench.depth // 2 else rec["n1"]
            if k % 4 or bench.across(rec):
                break
        dut._log.info("record %d (contend %.1f): %s", k, bench.contend, rec)
        await _check_transfer(bench, rec, ext, sbuf)
        across += bench.across(rec)
    bench.contend = 0.0
    dut._log.info("%d of %d records across partitions", across, n)
    assert across >= -(-n // 4), across
    dut._log.info("competing writes: %d taken, %d refused cycles", bench.contend_taken,
                  bench.contend_refused)
    assert bench.contend_taken > 0 and bench.contend_refused > 0
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_bursts_outstanding(dut):
    """Long contiguous transfers: multi-beat bursts up to max_burst, several reads outstanding
    (slow memory), 4 KiB boundaries respected, exact data."""
    rng = random.Random(random_seed() + 7)
    bench = Bench(dut, rng, latency=6)
    await bench.start()
    cfg = bench.cfg
    ext, sbuf = await _random_memories(bench, rng, random_sbuf=False)
    n0 = bench.depth
    rec = dict(ext_addr=0x0FC4, ext_stride0=4, ext_stride1=0, ext_part_stride=n0 * 4 + 8,
               n0=n0, n1=1, part_start=0, part_count=bench.P, sbuf_addr=0,
               fmt=int(Format.FP32), store=0)
    await _check_transfer(bench, rec, ext, sbuf)
    lens = [ln + 1 for _, ln in bench.mon.ar]
    dut._log.info("AR bursts %d, longest %d, max outstanding reads %d", len(lens), max(lens),
                  bench.mon.max_rd_out)
    assert min(bench.mb, n0 * 4 // bench.bw) <= max(lens) <= bench.mb
    assert bench.mon.max_rd_out >= 2, bench.mon.max_rd_out
    assert sum(lens) == bench.mon.r_beats
    # The same data back out, elsewhere (store bursts).
    rec2 = dict(rec, ext_addr=0x8FF0, store=1)
    await _check_transfer(bench, rec2, ext, sbuf)
    wl = [ln + 1 for _, ln in bench.mon.aw]
    assert min(bench.mb, n0 * 4 // bench.bw) <= max(wl) <= bench.mb and sum(wl) == bench.mon.w_beats
    dut._log.info("AW bursts %d, max outstanding writes %d", len(wl), bench.mon.max_wr_out)
    assert not bench.mon.errors, bench.mon.errors[:5]


def expected_bursts(rec, bw, max_burst):
    """The bursts (address, AxLEN) of ``rec`` as documented (rtl/dma/dma.py): a contiguous row
    is one segment, otherwise every element is one; a segment is split greedily into bursts
    of min(beats left, ``max_burst``, beats to the next 4 KiB boundary) beats."""
    es = _esize(rec["fmt"])
    s0 = rec["ext_stride0"]
    contiguous = s0 == es
    out = []
    for p in range(rec["part_count"]):
        for i in range(rec["n1"]):
            row = rec["ext_addr"] + p * rec["ext_part_stride"] + i * rec["ext_stride1"]
            segs = ([(row, rec["n0"] * es)] if contiguous else
                    [(row + j * s0, es) for j in range(rec["n0"])])
            for e, nbytes in segs:
                e %= 1 << 32
                cur = e - e % bw
                left = -(-(e % bw + nbytes) // bw)
                while left:
                    n = min(left, max_burst, (0x1000 - cur % 0x1000) // bw)
                    out.append((cur, n - 1))
                    cur, left = (cur + n * bw) % (1 << 32), left - n
    return out


@cocotb.test()
async def test_burst_split(dut):
    """The exact AR and AW bursts (address and length) of contiguous rows starting at every
    kind of distance from a 4 KiB boundary (two bursts before it, one, less than one, at it,
    in the middle of a beat) and of strided records, against :func:`expected_bursts`, with
    back-pressure on every channel: the issuer's length and boundary flags, kept a burst
    ahead, must split every segment as the greedy rule does."""
    rng = random.Random(random_seed() + 17)
    bench = Bench(dut, rng, pause=0.3, latency=2)
    await bench.start()
    cfg = bench.cfg
    bw, mb, P, depth = bench.bw, bench.mb, bench.P, bench.depth
    ext, sbuf = await _random_memories(bench, rng)
    n_rec = 0
    # As many partitions as the memory holds (the stores' rows end below 0xC000 + 0x1000).
    parts = min(P, (RAM_SIZE - 0xC000) // (0x1000 + (mb + 1) * bw) + 1)
    for off in (-2 * mb * bw, -2 * mb * bw + bw, -mb * bw, -mb * bw - bw, -(mb + 1) * bw + 4,
                -3 * bw, -bw, 0, -2 * mb * bw - 2, -mb * bw + 1, -1):
        for store in (0, 1):
            fmt = Format.FP32 if off % 4 == 0 else Format.BF16 if off % 2 == 0 else Format.INT8
            es = _esize(fmt)
            n0 = depth // 2 - (3 if n_rec % 2 else 0)
            # Rows at shifting distances from the next boundaries (partition stride a page and
            # a burst and a beat), a second row half a page further on.
            rec = dict(ext_addr=0x3000 + 0x8000 * store + off, ext_stride0=es,
                       ext_stride1=0x800 + 3 * bw, ext_part_stride=0x1000 + (mb + 1) * bw,
                       n0=n0, n1=2, part_start=0,
                       part_count=parts, sbuf_addr=0, fmt=int(fmt), store=store)
            n_ar, n_aw = len(bench.mon.ar), len(bench.mon.aw)
            await _check_transfer(bench, rec, ext, sbuf)
            got = bench.mon.aw[n_aw:] if store else bench.mon.ar[n_ar:]
            want = expected_bursts(rec, bw, mb)
            assert got == want, (rec, [(hex(a), n) for a, n in got[:12]],
                                 [(hex(a), n) for a, n in want[:12]])
            n_rec += 1
    # Rows of about 12 KiB (their SBUF words wrap around): the distance to the boundary is
    # counted down from a whole page after each crossing, to the next crossing.
    for store, off in ((0, -2 * mb * bw), (1, -3 * bw), (0, -3 * bw), (1, -2 * mb * bw)):
        rec = dict(ext_addr=0x1000 + 0x8000 * store + off, ext_stride0=4, ext_stride1=0,
                   ext_part_stride=0, n0=3 * 0x1000 // 4 - 5, n1=1, part_start=0,
                   part_count=1, sbuf_addr=5, fmt=int(Format.FP32), store=store)
        n_ar, n_aw = len(bench.mon.ar), len(bench.mon.aw)
        await _check_transfer(bench, rec, ext, sbuf)
        got = bench.mon.aw[n_aw:] if store else bench.mon.ar[n_ar:]
        assert got == expected_bursts(rec, bw, mb), (rec, len(got))
    # Strided rows: one single-beat burst per element, from consecutive segments.
    for store in (0, 1):
        rec = dict(ext_addr=0x4FF0 + 0x8000 * store, ext_stride0=2 * bw + 2, ext_stride1=6,
                   ext_part_stride=0x101, n0=7, n1=2, part_start=0, part_count=P, sbuf_addr=3,
                   fmt=int(Format.INT8), store=store)
        n_ar, n_aw = len(bench.mon.ar), len(bench.mon.aw)
        await _check_transfer(bench, rec, ext, sbuf)
        got = bench.mon.aw[n_aw:] if store else bench.mon.ar[n_ar:]
        assert got == expected_bursts(rec, bw, mb), (rec, got[:8])
    assert not bench.mon.errors, bench.mon.errors[:5]
    assert bench.iss_chk.checked > 1000, bench.iss_chk.checked


@cocotb.test()
async def test_throughput(dut):
    """Bytes per cycle of long contiguous loads and stores on an ideal memory (no latency, no
    back-pressure), per element size. The DMA moves one element per cycle on the SBUF side,
    so the ceiling is min(element bytes, bus bytes) per cycle."""
    rng = random.Random(random_seed() + 5)
    bench = Bench(dut, rng)
    await bench.start()
    ext, sbuf = await _random_memories(bench, rng, random_sbuf=False)
    for fmt in (Format.INT8, Format.BF16, Format.FP32):
        es = _esize(fmt)
        for store in (0, 1):
            n0 = bench.depth
            rec = dict(ext_addr=0x4000, ext_stride0=es, ext_stride1=0,
                       ext_part_stride=n0 * es, n0=n0, n1=1, part_start=0,
                       part_count=bench.P, sbuf_addr=0, fmt=int(fmt), store=store)
            await _check_transfer(bench, rec, ext, sbuf)
            cycles = bench.last_cycles
            nbytes = n0 * bench.P * es
            rate = nbytes / cycles
            dut._log.info("throughput %s %s: %d bytes in %d cycles (command to done): "
                          "%.2f bytes/cycle", fmt.name, "store" if store else "load",
                          nbytes, cycles, rate)
            assert rate > 0.8 * min(es, bench.bw), rate


@cocotb.test()
async def test_across_partitions(dut):
    """Records whose partitions are consecutive in external memory (``docs/dma.md``): loads and
    stores of every element size, columns contiguous (one segment per row) and apart (one per
    column), aligned and not, bit-exact; on an ideal memory a contiguous record of at least
    128 beats moves nearly ``min(beat, part_count * esize)`` bytes per cycle, at every
    width."""
    rng = random.Random(random_seed() + 23)
    bench = Bench(dut, rng)
    await bench.start()
    P, bw, depth = bench.P, bench.bw, bench.depth
    ext, sbuf = await _random_memories(bench, rng)
    for fmt in (Format.INT8, Format.BF16, Format.FP32):
        es = _esize(fmt)
        for store in (0, 1):
            for gap, shift, parts in ((0, 0, P), (0, es, P), (es, 0, P), (3 * es, es, 1),
                                      (0, 0, max(1, P // 2))):
                col = parts * es
                n0 = min(depth // 2, 4096 // (col + gap))
                rec = dict(ext_addr=0x4000 + 0x4000 * store + shift, ext_stride0=col + gap,
                           ext_stride1=(col + gap) * n0, ext_part_stride=es, n0=n0, n1=2,
                           part_start=P - parts, part_count=parts,
                           sbuf_addr=rng.randrange(depth), fmt=int(fmt), store=store)
                await _check_transfer(bench, rec, ext, sbuf)
                nbytes = 2 * n0 * col
                rate = nbytes / bench.last_cycles
                dut._log.info("%s %s gap %d shift %d parts %d: %d bytes in %d cycles, %.2f "
                              "bytes/cycle", fmt.name, "store" if store else "load", gap,
                              shift, parts, nbytes, bench.last_cycles, rate)
                # (A column that does not divide into beats, or beats into it, is cut into
                # more chunks than the beats hold; a short record is mostly setup.)
                if (gap == 0 and shift == 0 and (col % bw == 0 or bw % col == 0)
                        and (n0 >= 64 or nbytes >= 128 * min(bw, col))):
                    assert rate > 0.8 * min(bw, col), (rate, min(bw, col))
    assert not bench.mon.errors, bench.mon.errors[:5]


#: Cycles from the command handshake to the ``done`` pulse of the records of
#: :func:`test_cycle_counts`, per configuration (partitions, data_width, max_burst,
#: max_outstanding): those of the DMA at 352ab1b. The DMA's timing is part of the core's cycle
#: counts, so a change to its handshakes (R, W, the SBUF write stage) must keep them or
#: change this table deliberately.
EXPECTED_CYCLES = {
    (4, 32, 8, 4): [148, 257, 284, 148, 292, 155, 253, 282, 149, 295, 190, 263, 299, 196, 288],
    (3, 64, 4, 2): [66, 99, 134, 65, 163, 68, 102, 135, 67, 161, 67, 106, 141, 65, 155],
}


@cocotb.test()
async def test_cycle_counts(dut):
    """Exact cycle counts of loads and stores of every element size, contiguous and strided,
    with back-pressure on the R and W channels and a second SBUF writer competing for the
    write port, each in a fixed pattern (a fixed seed, not ``COCOTB_RANDOM_SEED``), against
    :data:`EXPECTED_CYCLES`; the data are checked bit-exactly too. The R channel's ready, the
    write stage's request and room and the element walker are registered a cycle ahead
    (lookahead flip-flops); a lookahead a cycle late or early shows here as a changed count
    or as wrong data."""
    rng = random.Random(2024)
    bench = Bench(dut, rng, pause=0.25, exact_offer=True)
    await bench.start()
    cfg = bench.cfg
    ext, sbuf = await _random_memories(bench, rng)
    bench.model_sbuf = sbuf
    n0 = bench.depth // 4
    cycles = []
    for fmt in (Format.INT8, Format.BF16, Format.FP32):
        es = _esize(fmt)
        for store, stride, contend in ((0, 1, 0.0), (0, 1, 0.6), (0, 3, 0.6), (1, 1, 0.0),
                                       (1, -2, 0.0)):
            bench.contend = contend
            rec = dict(ext_addr=0x4000 + 0x800 * store, ext_stride0=(es * stride) & 0xFFFFFFFF,
                       ext_stride1=es * n0 * 3, ext_part_stride=es * n0 * 7, n0=n0, n1=2,
                       part_start=0, part_count=bench.P, sbuf_addr=n0, fmt=int(fmt),
                       store=store)
            await _check_transfer(bench, rec, ext, sbuf)
            cycles.append(bench.last_cycles)
    bench.contend = 0.0
    key = (cfg["partitions"], cfg["data_width"], cfg["max_burst"], cfg["max_outstanding"])
    dut._log.info("cycles %s: %s", key, cycles)
    assert not bench.mon.errors, bench.mon.errors[:5]
    assert bench.contend_taken > 0 and bench.contend_refused > 0
    assert EXPECTED_CYCLES.get(key) in (None, cycles), (EXPECTED_CYCLES.get(key), cycles)


#: Cycles to done and the sum of the AR/AW handshake cycles of the records of
#: :func:`test_cycle_counts_outstanding` (slow memory: the bursts in flight reach
#: max_outstanding), per configuration as in :data:`EXPECTED_CYCLES`: those of the DMA at
#: d9be81c.
EXPECTED_CYCLES_OUTSTANDING = {
    (4, 32, 8, 4): [(818, 101747), (530, 69632), (835, 11681), (275, 4085), (282, 610),
                    (275, 656), (833, 110844), (530, 69632)],
    (3, 64, 4, 2): [(406, 20205), (255, 12816), (194, 1028), (113, 673), (117, 266),
                    (113, 268), (397, 19149), (255, 13104)],
}


@cocotb.test()
async def test_cycle_counts_outstanding(dut):
    """Exact cycle counts and AR/AW handshake times of strided (one single-beat burst per
    element) and contiguous loads and stores on a memory answering each burst after up to 6
    cycles (a fixed seed), so that max_outstanding bursts are in flight and bursts wait for
    their predecessors to retire, against :data:`EXPECTED_CYCLES_OUTSTANDING`: the issuer's
    registered issue condition (``iss_ok``, a cycle ahead) must issue every burst in the
    cycle it was issued in before."""
    rng = random.Random(2025)
    bench = Bench(dut, rng, latency=6, exact_offer=True)
    await bench.start()
    cfg = bench.cfg
    ext, sbuf = await _random_memories(bench, rng)
    cycles = []
    for fmt, stride in ((Format.BF16, 3), (Format.FP32, 1), (Format.INT8, 1), (Format.FP32, -1)):
        es = _esize(fmt)
        for store in (0, 1):
            rec = dict(ext_addr=0x2000 + 0x6000 * store, ext_stride0=(es * stride) & 0xFFFFFFFF,
                       ext_stride1=es * bench.depth * 2, ext_part_stride=es * bench.depth * 5,
                       n0=bench.depth // 2, n1=2, part_start=0, part_count=bench.P, sbuf_addr=1,
                       fmt=int(fmt), store=store)
            n_hs, start = len(bench.mon.hs_cycles), bench.mon.cycle
            await _check_transfer(bench, rec, ext, sbuf)
            # The cycles to done, and the sum of the AR/AW handshakes' cycles from the start:
            # a burst issued a cycle late changes the second even where the memory, busy with
            # the bursts before it, hides it from the first.
            cycles.append((bench.last_cycles,
                           sum(c - start for c in bench.mon.hs_cycles[n_hs:])))
    key = (cfg["partitions"], cfg["data_width"], cfg["max_burst"], cfg["max_outstanding"])
    dut._log.info("cycles %s: %s (max outstanding: %d reads, %d writes)", key, cycles,
                  bench.mon.max_rd_out, bench.mon.max_wr_out)
    assert not bench.mon.errors, bench.mon.errors[:5]
    assert bench.mon.max_rd_out == bench.mon.max_wr_out == cfg["max_outstanding"]
    assert EXPECTED_CYCLES_OUTSTANDING.get(key) in (None, cycles), (
        EXPECTED_CYCLES_OUTSTANDING.get(key), cycles)


@cocotb.test()
async def test_axi_error_responses(dut):
    """SLVERR on a read beat / a write burst: the error code, the faulting address and RRESP
    are reported, no done pulse, the bus drains, and the next transfer is correct."""
    rng = random.Random(random_seed() + 11)
    bench = Bench(dut, rng, latency=2)
    await bench.start()
    ext, _ = await _random_memories(bench, rng, random_sbuf=False)
    sbuf = await bench.sbuf_read()       # (words the records do not reach keep their values)
    bw = bench.bw
    base = 0x2000
    rec = dict(ext_addr=base, ext_stride0=2, ext_stride1=0, ext_part_stride=0x100, n0=100,
               n1=1, part_start=0, part_count=bench.P, sbuf_addr=0, fmt=int(Format.BF16),
               store=0)
    for trial in range(3):
        bad = base + 0x100 * rng.randrange(bench.P) + bw * rng.randrange(200 // bw)
        bench.fail_read = {bad}
        result = await bench.run(rec)
        assert result == ("error", (ErrorCode.DMA_AXI_READ, bad, 2)), (result, hex(bad))
        await ClockCycles(dut.clk, 20)
        assert not int(dut.busy.value)
        assert bench.mon._rd_out == 0
    bench.fail_read = set()
    await _check_transfer(bench, rec, ext, sbuf)

    st = dict(rec, ext_addr=0x6000, store=1)
    sbuf_src = np.array([[rng.getrandbits(32) for _ in range(bench.depth)]
                         for _ in range(bench.P)], dtype=np.uint32)
    await bench.sbuf_write(sbuf_src)
    sbuf[:] = sbuf_src
    for trial in range(3):
        n_aw = len(bench.mon.aw)
        bad = 0x6000 + 0x100 * rng.randrange(bench.P) + bw * rng.randrange(200 // bw)
        bench.fail_write = {bad}
        result = await bench.run(st)
        # The burst containing the bad beat is the reported one.
        bursts = bench.mon.aw[n_aw:]
        start = [a for a, ln in bursts if a <= bad < a + (ln + 1) * bw]
        assert len(start) == 1, (bursts, hex(bad))
        assert result == ("error", (ErrorCode.DMA_AXI_WRITE, start[0], 2)), (result, hex(bad))
        assert bench.mon._wr_out == 0
        assert bench.mon.aw[-1][0] <= start[0] + 0x1000   # stopped soon after the error
    bench.fail_write = set()
    ext[:] = bench.ram.read(0, RAM_SIZE)       # partial writes of the failed runs are allowed
    await _check_transfer(bench, st, ext, sbuf)
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_protection(dut):
    """Window violations, misaligned records and partitions out of range: the documented
    error code and address, and NO bus transaction; permitted records run bit-exactly."""
    rng = random.Random(random_seed() + 13)
    dut._log.info("seed %d", random_seed() + 13)
    bench = Bench(dut, rng)
    await bench.start()
    nwin = bench.cfg["windows"]
    wins = [(0x1000, 0x17FF, DMA_PERM_READ), (0x1800, 0x1FFF, DMA_PERM_WRITE),
            (0x3000, 0x3FFF, DMA_PERM_READ | DMA_PERM_WRITE), (0x4000, 0x40FF, 0)][:nwin]
    ext, sbuf = await _random_memories(bench, rng, windows=wins)
    outcomes = {}
    n = int(dut_config().get("protection_records", 40))
    for k in range(n):
        fmt = rng.choice(ALL_FORMATS)
        store = rng.random() < 0.5
        region = rng.choice([(0x1000, 0x1800), (0x1800, 0x2000), (0x3000, 0x4000),
                             (0x0F80, 0x1100), (0x3F00, 0x4100), (0x4000, 0x4100),
                             (0x1700, 0x1900)])
        rec = random_record(rng, bench.P, bench.depth, fmt, store, region)
        kind = rng.random()
        if kind < 0.08:
            rec["ext_addr"] = (rec["ext_addr"] + rng.randrange(1, 4)) & 0xFFFFFFFF
        elif kind < 0.14:
            rec["part_start"] = bench.P - rec["part_count"] + 1
        elif kind < 0.2:
            rec["ext_addr"] = (0xFFFFFFFF - rng.randrange(64)) & ~3 & 0xFFFFFFFF
        code, addr = dma_check(rec, bench.windows, bench.P)
        n_bus = bench.mon.transactions()
        result = await bench.run(rec)
        outcomes[code] = outcomes.get(code, 0) + 1
        if code == ErrorCode.NONE:
            assert result == ("done", None), (result, rec)
            dma_model(rec, ext, sbuf)
        else:
            assert result[0] == "error" and result[1][:2] == (code, addr), (result, code,
                                                                           hex(addr), rec)
            if code == ErrorCode.DMA_WINDOW:
                assert result[1][2] == rec["store"], result
            assert bench.mon.transactions() == n_bus, "a refused record touched the bus"
    # Final state of both memories equals the model after all permitted records.
    assert bench.ram.read(0, RAM_SIZE) == bytes(ext)
    got = await bench.sbuf_read()
    assert (got == sbuf).all()
    dut._log.info("outcomes: %s", {ErrorCode(k).name: v for k, v in outcomes.items()})
    assert outcomes.get(ErrorCode.DMA_WINDOW, 0) > 0 and outcomes.get(ErrorCode.NONE, 0) > 0
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_window_edges(dut):
    """The window check at its edges, for strided rows (the span ``(n0 - 1) * ext_stride0``
    computed in SETUP): a row whose last element ends on the window's last byte runs, one
    element further is DMA_WINDOW; the same at the window's first byte, for positive and
    negative strides alike (a negative stride's row starts at its highest element). The
    expected outcome comes from the geometry (and agrees with ``sim.host.dma_check``)."""
    rng = random.Random(random_seed() + 29)
    bench = Bench(dut, rng)
    await bench.start()
    lo, hi = 0x1000, 0x17FF
    bench.set_windows([(lo, hi, DMA_PERM_READ | DMA_PERM_WRITE)])
    base = dict(ext_stride1=0, ext_part_stride=0, n1=1, part_start=0, part_count=1,
                sbuf_addr=0, fmt=int(Format.FP32))
    runs = 0
    for store in (0, 1):
        for n0 in (2, 3, 7):
            for stride, edge in itertools.product((4, 8, 12, -8, -12), ("high", "low")):
                span = (n0 - 1) * stride
                # the row's highest element ends on the window's last byte, or its lowest
                # starts on the first
                if edge == "high":
                    first = hi - 3 - max(span, 0)
                else:
                    first = lo - min(span, 0)
                for beyond in (0, 1):
                    addr = first + (4 if edge == "high" else -4) * beyond
                    rec = dict(base, store=store, n0=n0, ext_stride0=stride & 0xFFFFFFFF,
                               ext_addr=addr)
                    code, _ = dma_check(rec, bench.windows, bench.P)
                    want_code = ErrorCode.DMA_WINDOW if beyond else ErrorCode.NONE
                    assert code == want_code, (code, rec)
                    got = await bench.run(rec)
                    if beyond:
                        assert got[0] == "error" and got[1][0] == ErrorCode.DMA_WINDOW, (got, rec)
                    else:
                        assert got == ("done", None), (got, rec)
                    runs += 1
    dut._log.info("%d records at the window's edges", runs)
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_window_union(dut):
    """Across partitions (``docs/dma.md``) the rows of one ``i`` are first checked as one range;
    where that range leaves a window the rows are checked one by one. Rows split between two
    adjacent windows run (bit-exact); rows of which one leaves them report that row's
    DMA_WINDOW: every outcome is ``sim.host.dma_check``'s, at every width."""
    rng = random.Random(random_seed() + 31)
    bench = Bench(dut, rng)
    await bench.start()
    rw = DMA_PERM_READ | DMA_PERM_WRITE
    windows = [(0x1000, 0x1FFF, rw), (0x2000, 0x2FFF, rw)][:int(dut_config()["windows"])]
    ext, sbuf = await _random_memories(bench, rng, windows=windows)
    P, es = bench.P, 4
    runs = 0
    for store in (0, 1):
        for shift in range(P + 1):
            for last_row in (0x2F00, 0x3000 - es * shift):
                rec = dict(ext_addr=0x2000 - es * shift, ext_stride0=P * es,
                           ext_stride1=last_row - (0x2000 - es * shift), ext_part_stride=es,
                           n0=1, n1=2, part_start=0, part_count=P, sbuf_addr=rng.randrange(8),
                           fmt=int(Format.FP32), store=store)
                code, addr = dma_check(rec, bench.windows, P)
                if code == ErrorCode.NONE:
                    await _check_transfer(bench, rec, ext, sbuf)
                else:
                    got = await bench.run(rec)
                    assert got[0] == "error" and got[1][:2] == (code, addr), (got, rec)
                runs += 1
    dut._log.info("%d records across two windows", runs)
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_window_extremes(dut):
    """The window check where the thresholds it compares a row's first address with (``base -
    min(span, 0)``, ``limit - max(span, 0) - size + 1``, formed before the rows) leave
    [0, 2**32): windows at address 0 and at 2**32 - 1, rows that end on them or cross below 0
    or beyond 2**32 - 1, every element size, both stride signs, a second row past the edge;
    then spans too wide for any window (beyond +-2**32, which the thresholds' 33-bit span
    would wrap) and thresholds outside [0, 2**32) (a span longer than the window); window
    bounds off the element grid. Outcome and error address as ``sim.host.dma_check``; a
    refused record touches no bus."""
    rng = random.Random(random_seed() + 31)
    bench = Bench(dut, rng)
    await bench.start()
    rw = DMA_PERM_READ | DMA_PERM_WRITE
    top = (1 << 32) - 1
    lo_win, hi_win = (0, 0x7FF), (top - 0x7FF, top)
    base = dict(ext_part_stride=0, part_start=0, part_count=1, sbuf_addr=0)
    outcomes = {}

    async def check(rec):
        code, addr = dma_check(rec, bench.windows, bench.P)
        n_bus = bench.mon.transactions()
        got = await bench.run(rec)
        if code == ErrorCode.NONE:
            assert got == ("done", None), (got, rec)
        else:
            assert got[0] == "error" and got[1][:2] == (code, addr), (got, code, hex(addr), rec)
            assert bench.mon.transactions() == n_bus, f"a refused record touched the bus: {rec}"
        outcomes[code] = outcomes.get(code, 0) + 1
        return code

    k = 0
    for edge, fmt in itertools.product(("low", "high"),
                                       (Format.FP8_E4M3, Format.BF16, Format.FP32)):
        # one window at a time (a row crossing one end of the address space wraps to the other)
        bench.set_windows([(*(lo_win if edge == "low" else hi_win), rw)])
        es = _esize(int(fmt))
        for n0, mult in itertools.product((1, 3), (1, -1, 3, -2)):
            stride = mult * es
            span = (n0 - 1) * stride
            # the row's lowest byte on address 0 or its highest on 2**32 - 1; one element
            # further crosses below 0 or beyond 2**32 - 1 (the address wraps)
            if edge == "low":
                first = lo_win[0] - min(span, 0)
            else:
                first = hi_win[1] - (es - 1) - max(span, 0)
            for beyond in (0, 1):
                addr = (first + (es if edge == "high" else -es) * beyond) % (1 << 32)
                # with n1 = 2, a second row one element inward or outward (at random: for
                # a row on the edge it passes, or fails with the second row's address)
                step = -es if edge == "high" else es
                if rng.random() < 0.5:
                    step = -step
                rec = dict(base, store=k % 2, fmt=int(fmt), n0=n0, n1=1 + k % 3 // 2,
                           ext_stride0=stride & top, ext_stride1=step & top,
                           ext_addr=addr)
                code = await check(rec)
                if not beyond and rec["n1"] == 1:
                    assert code == ErrorCode.NONE, rec
                if beyond:
                    assert code == ErrorCode.DMA_WINDOW, rec
                k += 1
    # Window bounds off the element grid: an element must lie in the window whole (the upper
    # threshold is ``limit - size + 1`` less the span), rows walked over both bounds.
    bench.set_windows([(0x1001, 0x17FE, rw)])
    for fmt, mult in itertools.product((Format.BF16, Format.FP32), (1, -1)):
        es = _esize(int(fmt))
        span = 2 * mult * es
        for addr in itertools.chain(range(0x0FF8 - min(span, 0), 0x1008 - min(span, 0), es),
                                    range(0x17F8 - max(span, 0), 0x1808 - max(span, 0), es)):
            await check(dict(base, store=k % 2, fmt=int(fmt), n0=3, n1=1, ext_stride1=0,
                             ext_stride0=span // 2 & top, ext_addr=addr))
            k += 1
    # A row longer than either window (its span above limit - base: limit - max(span, 0) is
    # below 0, base - min(span, 0) beyond 2**32 - 1) and spans beyond +-2**32, whose low 33
    # bits would look short.
    bench.set_windows([(*lo_win, rw), (*hi_win, rw)])
    f32 = dict(base, fmt=int(Format.FP32), n1=1, ext_stride1=0)
    wide = [
        dict(ext_addr=0x10, n0=0x201, ext_stride0=4),              # span 0x800 > window
        dict(ext_addr=0x1000, n0=0x401, ext_stride0=-4 & top),      # from 0x1000 below 0
        dict(ext_addr=top - 3, n0=0x401, ext_stride0=-4 & top),     # down from 2**32 - 4
        dict(ext_addr=0x100, n0=5, ext_stride0=0x7FFFFFFC),         # span 2**33 - 16
        dict(ext_addr=top - 0x103, n0=5, ext_stride0=-0x7FFFFFFC & top),  # -(2**33 - 16)
        dict(ext_addr=0x100, n0=3, ext_stride0=0x80000000),         # span -2**32
        dict(ext_addr=0x100, n0=3, ext_stride0=0x7FFFFFFC),         # span 2**32 - 8
    ]
    for store in (0, 1):
        for change in wide:
            assert await check(dict(f32, store=store, **change)) == ErrorCode.DMA_WINDOW
    # The whole address space as one window: a row over all of it runs (its span 2**32 - 4
    # fits 33 bits), in either direction; one element further does not, nor a span beyond
    # +-2**32.
    bench.set_windows([(0, top, rw)])
    ends = dict(base, fmt=int(Format.BF16), n1=1, ext_stride1=0, store=0, n0=3)
    for addr, stride in ((2, 0x7FFFFFFE), (top - 1, -0x7FFFFFFE & top)):
        assert await check(dict(ends, ext_addr=addr, ext_stride0=stride)) == ErrorCode.NONE
        # (its rows cover [2, 2**32 - 1]: one element up crosses 2**32 or wraps to 0)
        assert await check(dict(ends, ext_addr=(addr + 2) & top,
                                ext_stride0=stride)) == ErrorCode.DMA_WINDOW
    for change in wide[3:6]:
        assert await check(dict(f32, store=1, **change)) == ErrorCode.DMA_WINDOW
    dut._log.info("%d records: %s", sum(outcomes.values()),
                  {ErrorCode(c).name: v for c, v in outcomes.items()})
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_record_checks(dut):
    """The setup checks in their documented order: a zero-size record (n0, n1 or part_count
    0) completes even when it is also misaligned or out of range; then DMA_ALIGN (address
    ext_addr, info 0), then SBUF_RANGE (address sbuf_addr, info part_start + part_count). None
    touches the bus; a correct record runs afterwards."""
    rng = random.Random(random_seed() + 17)
    bench = Bench(dut, rng)
    await bench.start()
    ext, sbuf = await _random_memories(bench, rng, (0, RAM_SIZE))
    P = bench.P
    base = dict(ext_addr=0x2000, ext_stride0=4, ext_stride1=64, ext_part_stride=256, n0=4,
                n1=2, part_start=0, part_count=P, sbuf_addr=3, fmt=int(Format.FP32), store=0)
    cases = [
        (dict(n0=0), ("done", None)),
        (dict(n1=0, ext_addr=0x2001), ("done", None)),
        (dict(part_count=0, part_start=P + 5), ("done", None)),
        (dict(ext_stride1=66, part_start=1), ("error", (ErrorCode.DMA_ALIGN, 0x2000, 0))),
        (dict(part_start=1, sbuf_addr=9), ("error", (ErrorCode.SBUF_RANGE, 9, P + 1))),
    ]
    for store in (0, 1):
        for change, want in cases:
            rec = dict(base, store=store, **change)
            n_bus = bench.mon.transactions()
            got = await bench.run(rec)
            assert got == want, (got, want, rec)
            assert bench.mon.transactions() == n_bus, f"a refused record touched the bus: {rec}"
    await _check_transfer(bench, base, ext, sbuf)
    assert not bench.mon.errors, bench.mon.errors[:5]


def _stream_records(rng, bench, n, region):
    """``n`` random records in ``region``, loads and stores mixed, long across-partitions ones
    among them; every few a store reads back the SBUF words the load before it wrote (a RAW
    through SBUF) to another place in ``region``."""
    recs = []
    while len(recs) < n:
        fmt = rng.choice(ALL_FORMATS)
        store = rng.random() < 0.5
        rec = random_record(rng, bench.P, bench.depth, fmt, store, region)
        if rng.random() < 0.3:
            es = _esize(fmt)
            n0 = bench.depth // 2
            rec = dict(rec, ext_part_stride=es, ext_stride0=es * bench.P, ext_stride1=0, n0=n0,
                       n1=1, part_start=0, part_count=bench.P, store=int(store))
            rec["ext_addr"] = region[0] + rng.randrange(
                (region[1] - region[0] - n0 * es * bench.P) // es + 1) * es
        recs.append(rec)
        if not rec["store"] and rng.random() < 0.5:
            recs.append(dict(rec, store=1))      # the loaded words back to where they came
    return recs


@cocotb.test()
@cocotb.parametrize(pause=[0.0, 0.3])
async def test_back_to_back(dut, pause):
    """Records offered back to back, loads and stores mixed, with SBUF read-after-write
    between a load and the store behind it: one ``done`` per record in order, memories
    bit-exact against the records applied one after another, and records taken while the
    engine still works on the one before (the overlap exists). Then a stream whose record
    fails its checks (a window) behind long transfers: every record before it is done
    first, then the error is the sequential one (code, address, information), nothing of it
    reaches the bus, and nothing after it runs."""
    rng = random.Random(random_seed() + 19 + int(pause * 10))
    bench = Bench(dut, rng, pause=pause, latency=3)
    await bench.start()
    region = (0x2000, 0x6000)
    ext, sbuf = await _random_memories(bench, rng, region=region)
    n = int(dut_config().get("transfers", 40))
    recs = _stream_records(rng, bench, n, region)
    events, overlapped = await bench.run_stream(recs)
    assert events == ["done"] * len(recs), (events, len(recs))
    assert overlapped > len(recs) // 4, (overlapped, len(recs))
    for rec in recs:
        dma_model(rec, ext, sbuf)
    assert bench.ram.read(0, RAM_SIZE) == bytes(ext)
    got = await bench.sbuf_read()
    assert (got == sbuf).all(), np.argwhere(got != sbuf)[:8].tolist()
    # A failing record behind long transfers of either direction.
    for trial in range(6):
        recs = _stream_records(rng, bench, rng.randrange(1, 4), region)
        bad = random_record(rng, bench.P, bench.depth, rng.choice(ALL_FORMATS),
                            rng.random() < 0.5, (region[1], region[1] + 0x400))
        if trial % 3 == 1:
            bad["ext_addr"] = (bad["ext_addr"] + 1) & 0xFFFFFFFF
        code, addr = dma_check(bad, bench.windows, bench.P)
        assert code != ErrorCode.NONE
        tail = _stream_records(rng, bench, 2, region)
        n_bus = bench.mon.transactions()
        events, _ = await bench.run_stream(recs + [bad] + tail)
        new = bench.mon.ar + bench.mon.aw
        assert all(region[0] <= a < region[1] for a, _ in new), "a refused record's burst"
        assert bench.mon.transactions() >= n_bus
        assert events[:-1] == ["done"] * len(recs), events
        assert events[-1][0] == "error" and events[-1][1][:2] == (code, addr), (
            events, code, hex(addr), bad)
        for rec in recs:
            dma_model(rec, ext, sbuf)
    assert bench.ram.read(0, RAM_SIZE) == bytes(ext)
    got = await bench.sbuf_read()
    assert (got == sbuf).all(), np.argwhere(got != sbuf)[:8].tolist()
    assert not bench.mon.errors, bench.mon.errors[:5]


@cocotb.test()
async def test_abort(dut):
    """Abort in the middle of long loads and stores: no burst is issued from the cycle the
    abort is seen on (no AR/AW valid rises after it), the engine drains and goes idle without
    done or error, and the next transfer is bit-exact."""
    rng = random.Random(random_seed() + 17)
    bench = Bench(dut, rng, pause=0.3, latency=2)
    await bench.start()
    _, sbuf = await _random_memories(bench, rng, random_sbuf=False)
    rec = dict(ext_addr=0x1000, ext_stride0=4, ext_stride1=0, ext_part_stride=0x400,
               n0=bench.depth, n1=1, part_start=0, part_count=bench.P, sbuf_addr=0,
               fmt=int(Format.FP32), store=0)
    # Per clock edge: abort, AR or AW valid, AR or AW handshake (the values the DUT saw).
    samples = []

    async def sample():
        d = dut
        while True:
            await RisingEdge(d.clk)
            arv, awv = int(d.m_axi__arvalid.value), int(d.m_axi__awvalid.value)
            samples.append((int(d.abort.value), arv | awv,
                            (arv & int(d.m_axi__arready.value)) |
                            (awv & int(d.m_axi__awready.value))))
    sampler = cocotb.start_soon(sample())
    runs = [(store, rng.randrange(10, 60)) for store in (0, 1, 0)]
    runs += [(store, after) for store in (0, 1) for after in range(6, 40, 3)]
    for store, after in runs:
        r = dict(rec, store=store)
        samples.clear()
        result = await bench.run(r, abort_after=after)
        assert result == ("aborted", None), result
        assert bench.mon._rd_out == 0 and bench.mon._wr_out == 0
        # (The first sample may be the previous run's last, abort still high.)
        k = next(k for k in range(1, len(samples))
                 if samples[k][0] and not samples[k - 1][0])
        new = [m for m in range(k + 1, len(samples))
               if samples[m][1] and (not samples[m - 1][1] or samples[m - 1][2])]
        assert not new, (store, after, k, new)
    sampler.cancel()
    ext = bytearray(bench.ram.read(0, RAM_SIZE))
    sbuf = await bench.sbuf_read()
    await _check_transfer(bench, rec, ext, sbuf)
    await _check_transfer(bench, dict(rec, ext_addr=0x9000, store=1), ext, sbuf)
    assert not bench.mon.errors, bench.mon.errors[:5]


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIGS = {
        "p4_dw32": dict(partitions=4, sbuf_depth=64, data_width=32, max_burst=8,
                        max_outstanding=4, windows=4),
        # The widest bus: bursts of 32 beats (2 KiB) although max_burst allows 256.
        "p8_dw512": dict(partitions=8, sbuf_depth=128, data_width=512, max_burst=256,
                         max_outstanding=4, windows=4),
        "p3_dw64": dict(partitions=3, sbuf_depth=32, data_width=64, max_burst=4,
                        max_outstanding=2, windows=3),
    }

    def _run(simulator, name, extra=None):
        cfg = CONFIGS[name]
        run_cocotb(lambda: Harness(**cfg), name=f"dma_{name}", config=dict(cfg, **(extra or {})),
                   test_module="cocotb_tests.test_dma", simulator=simulator)

    # Default run: the main configuration on both simulators, the 64-bit bus on Icarus (no
    # build step); the 64-bit bus on Verilator and longer sweeps are in the long run.
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_dma(simulator):
        _run(simulator, "p4_dw32")

    def test_dma_dw64_icarus():
        _run("icarus", "p3_dw64")

    # Windows, error codes and protection at the widest bus: Verilator by default, Icarus in
    # the long run.
    @pytest.mark.parametrize("simulator", [
        pytest.param("icarus", marks=pytest.mark.long), "verilator"])
    def test_dma_dw512(simulator):
        _run(simulator, "p8_dw512")

    @pytest.mark.long
    def test_core_dma128_icarus():
        """The 4x4 core of test_core with a 128-bit DMA: its GEMM, attention head (DMA
        transposes across partitions), AXI-error, illegal-record and counter programs."""
        import os
        from cocotb_tests.test_core import CORE_CONFIG, core_factory
        cfg = dict(CORE_CONFIG, dma_data_width=128)
        tests = ("test_gemm_tiled", "test_attention_head", "test_axi_error_then_correct_run",
                 "test_illegal_records_then_correct_run", "test_counters_per_program")
        seed = os.environ.get("COCOTB_RANDOM_SEED")
        run_cocotb(core_factory(cfg), name="core4x4d128", config=cfg,
                   test_module="cocotb_tests.test_core", simulator="icarus", testcase=list(tests),
                   seed=None if seed is None else int(seed))

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("name", list(CONFIGS))
    def test_dma_long(simulator, name):
        _run(simulator, name, {"transfers": 400, "protection_records": 600})
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass

