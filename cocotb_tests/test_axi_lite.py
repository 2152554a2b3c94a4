"""cocotb tests of the AXI4-Lite register block (rtl/bus/axi_lite.py) against the memory map
(sim/memmap.py): every register kind, byte strobes, unmapped addresses, the configuration lock
(refusal and counting), the memory windows under random back-pressure on all five channels with
concurrent reads and writes, and the host driver (sim/host.py) over the cocotb transport.

Expected values come from the memory map and a Python model of the windows, never from the RTL.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from amaranth.hdl import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from sim.memmap import MEMORY_MAP, CTRL_CLEAR_COUNTERS, AXI_RESP
from sim.errors import ErrorCode
from rtl.bus.axi_lite import AXI4LiteRegisters
from cocotb_tests.common.streams import seeded_rng
from cocotb_tests.common.tb import logged_seed
from cocotb_tests.common.clock import reset, start_clock

OKAY, SLVERR, DECERR = AXI_RESP["OKAY"], AXI_RESP["SLVERR"], AXI_RESP["DECERR"]


class Harness(wiring.Component):
    """The register block with a real memory behind every window (full window depth)."""

    def __init__(self, memory_map=MEMORY_MAP):
        self.mm = memory_map
        self.regs = AXI4LiteRegisters(memory_map)
        wins = {w.port for w in memory_map.windows}
        self._names = [n for n in self.regs.signature.members if n not in wins]
        super().__init__({n: self.regs.signature.members[n] for n in self._names})

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = self.regs
        for name in self._names:
            member = self.regs.signature.members[name]
            if name == "axil":
                wiring.connect(m, wiring.flipped(self.axil), regs.axil)
            elif member.flow == In:
                m.d.comb += getattr(regs, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(regs, name))
        for win in self.mm.windows:
            port = getattr(regs, win.port)
            mem = memory.Memory(shape=32, depth=win.words, init=[])
            m.submodules[f"mem_{win.port}"] = mem
            wp = mem.write_port(granularity=8)
            rp = mem.read_port()
            m.d.comb += [
                wp.addr.eq(port.addr), wp.data.eq(port.wdata),
                wp.en.eq(port.wstrb & port.we.replicate(4)),
                rp.addr.eq(port.addr), rp.en.eq(port.re), port.rdata.eq(rp.data),
            ]
        return m


def _ro_inputs():
    return [r for r in MEMORY_MAP.registers
            if r.access == "ro" and r.value is None and not r.internal]


async def _setup(dut, pause=None):
    from cocotb_tests.common.axi_transport import AxiLiteTransport
    start_clock(dut)
    dut.busy.value = 0
    for r in _ro_inputs():
        getattr(dut, r.port).value = 0
    t = AxiLiteTransport(dut)
    if pause is not None:
        m = t.master
        for ch in (m.write_if.aw_channel, m.write_if.w_channel, m.write_if.b_channel,
                   m.read_if.ar_channel, m.read_if.r_channel):
            ch.set_pause_generator(pause())
    await reset(dut)
    return t


def _random_pause(rng, p):
    def gen():
        while True:
            yield rng.random() < p
    return gen


@cocotb.test()
async def test_registers(dut):
    """Constants, RW registers and their ports, RO inputs, CTRL strobes, strobes, errors."""
    rng = seeded_rng(dut)
    t = await _setup(dut)
    mm = MEMORY_MAP
    assert await t.read32(mm.register("ID").offset) == 0x4E434F52
    assert await t.read32(mm.register("VERSION").offset) == mm.register("VERSION").value

    # Reset values, then write/read every RW register and check its port.
    for reg in mm.registers:
        if reg.access == "rw":
            assert await t.read32(reg.offset) == reg.reset, reg.name
    expected = {}
    for reg in mm.registers:
        if reg.access == "rw":
            v = rng.getrandbits(32)
            await t.write32(reg.offset, v)
            expected[reg.name] = v & ((1 << reg.width) - 1)
    for reg in mm.registers:
        if reg.access == "rw":
            got = await t.read32(reg.offset)
            assert got == expected[reg.name], (reg.name, hex(got), hex(expected[reg.name]))
            assert int(getattr(dut, reg.port).value) == expected[reg.name], reg.name
    # The same reads issued all at once (AR beats back to back, each address taken the cycle
    # after the previous read executes): each answer is its own register's, not a word of
    # the multiplexer still loaded from the previous address.
    rw = [reg for reg in mm.registers if reg.access == "rw"]
    order = rw * 2
    rng.shuffle(order)
    events = [t.master.init_read(reg.offset, 4) for reg in order]
    for reg, ev in zip(order, events):
        await ev.wait()
        got = int.from_bytes(ev.data.data, "little")
        assert got == expected[reg.name], (reg.name, hex(got), hex(expected[reg.name]))

    # Byte strobes: write one byte of SCRATCH.
    sc = mm.register("SCRATCH").offset
    await t.write32(sc, 0x11223344)
    assert await t.write_raw(sc + 2, b"\xAB") == OKAY
    assert await t.read32(sc) == 0x11AB3344
    assert await t.write_raw(sc, b"\x01\x02") == OKAY
    assert await t.read32(sc) == 0x11AB0201

    # Read-only inputs are sampled at read time.
    for reg in _ro_inputs():
        v = rng.getrandbits(32)
        getattr(dut, reg.port).value = v
        assert await t.read32(reg.offset) == v, reg.name
        assert await t.write_raw(reg.offset, b"\0\0\0\0") == SLVERR, reg.name
    assert await t.write_raw(mm.register("ID").offset, b"\0\0\0\0") == SLVERR

    # CTRL is write-only: each write is one strobe carrying the value; reads give 0.
    seen = []

    async def watch():
        while True:
            await RisingEdge(dut.clk)
            if int(dut.ctrl_we.value):
                seen.append(int(dut.ctrl.value))
            else:
                assert int(dut.ctrl.value) == 0
    task = cocotb.start_soon(watch())
    for v in (1, 2, 4, 5):
        await t.write32(mm.register("CTRL").offset, v)
    await ClockCycles(dut.clk, 3)
    task.cancel()
    assert seen == [1, 2, 4, 5], seen
    assert await t.read32(mm.register("CTRL").offset) == 0

    # Unmapped addresses.
    for addr in (0x0FC, 0x200, 0x3FFC, 0xE000, 0xFFFC):
        assert await t.read_raw(addr) == (0, DECERR), hex(addr)
        assert await t.write_raw(addr, b"\1\2\3\4") == DECERR, hex(addr)

    # A read of SCRATCH issued from 3 cycles before to 7 cycles after a write to it: a read
    # answered after the write's response carries the new value, one answered before it the
    # old one (the write lands a cycle after its decision; a read executed in between would
    # return a stale word).
    answers = set()
    for lag in range(-3, 8):
        old, new = rng.getrandbits(32), rng.getrandbits(32)
        await t.write32(sc, old)
        await ClockCycles(dut.clk, 4)
        times = {}

        async def handshakes():
            n = 0
            while True:
                await RisingEdge(dut.clk)
                n += 1
                for ch in "br":
                    if int(getattr(dut, f"axil__{ch}valid").value) and \
                            int(getattr(dut, f"axil__{ch}ready").value):
                        times.setdefault(ch, n)
        task = cocotb.start_soon(handshakes())
        if lag < 0:
            rev = t.master.init_read(sc, 4)
            await ClockCycles(dut.clk, -lag)
            wev = t.master.init_write(sc, new.to_bytes(4, "little"))
        else:
            wev = t.master.init_write(sc, new.to_bytes(4, "little"))
            await ClockCycles(dut.clk, lag)
            rev = t.master.init_read(sc, 4)
        await wev.wait()
        await rev.wait()
        task.cancel()
        got = int.from_bytes(rev.data.data, "little")
        after = times["r"] > times["b"]
        answers.add(after)
        assert got == (new if after else old), (lag, times, hex(got), hex(old), hex(new))
    assert answers == {False, True}, answers


@cocotb.test()
async def test_lock(dut):
    """While busy: locked registers and windows answer SLVERR, keep their value, and every
    refused write is counted; status, counters and unlocked registers stay accessible."""
    rng = seeded_rng(dut, 1)
    t = await _setup(dut)
    mm = MEMORY_MAP
    locked = [r for r in mm.registers if r.locked]
    assert {r.name for r in locked} >= {"START_PC", "WATCHDOG_LIMIT", "SEED", "DMA_WIN0_BASE"}
    before = {}
    for r in locked:
        v = rng.getrandbits(r.width)
        await t.write32(r.offset, v)
        before[r.name] = v
    prog = mm.window("PROG")
    await t.write32(prog.base + 8, 0xCAFEF00D)
    assert await t.read32(mm.register("LOCK_REFUSED").offset) == 0

    dut.busy.value = 1
    dut.status.value = 0x1
    dut.perf_cycles_lo.value = 1234
    refused = 0
    for r in locked:
        assert await t.write_raw(r.offset, rng.getrandbits(32).to_bytes(4, "little")) == SLVERR
        refused += 1
        assert await t.read32(r.offset) == before[r.name], r.name      # reads stay allowed
        assert int(getattr(dut, r.port).value) == before[r.name], r.name
    for win in mm.windows:
        assert await t.write_raw(win.base + 4 * rng.randrange(win.words), b"\1\2\3\4") == SLVERR
        refused += 1
        assert (await t.read_raw(win.base))[1] == SLVERR                # not counted
    assert await t.read32(mm.register("LOCK_REFUSED").offset) == refused
    assert int(dut.lock_refused.value) == refused
    assert await t.read32(mm.register("STATUS").offset) == 1
    assert await t.read32(mm.register("PERF_CYCLES_LO").offset) == 1234
    await t.write32(mm.register("SCRATCH").offset, 0x5A5A5A5A)          # never locked
    await t.write32(mm.register("IRQ_ENABLE").offset, 3)
    assert await t.read32(mm.register("SCRATCH").offset) == 0x5A5A5A5A
    await t.write32(mm.register("CTRL").offset, 4)                      # abort stays possible
    assert await t.read32(mm.register("LOCK_REFUSED").offset) == refused

    dut.busy.value = 0
    await t.write32(mm.register("SEED").offset, 77)
    assert await t.read32(mm.register("SEED").offset) == 77
    assert await t.read32(prog.base + 8) == 0xCAFEF00D
    await t.write32(mm.register("CTRL").offset, CTRL_CLEAR_COUNTERS)
    assert await t.read32(mm.register("LOCK_REFUSED").offset) == 0


@cocotb.test()
@cocotb.parametrize(pause=[0.0, 0.3, 0.7])
async def test_windows_random(dut, pause):
    """Concurrent reads and writes over every window and SCRATCH with random back-pressure on
    all channels, compared with a Python model."""
    seed = logged_seed(dut, int(pause * 10))
    rng = random.Random(seed)
    t = await _setup(dut, pause=_random_pause(random.Random(seed + 100), pause) if pause
                     else None)
    mm = MEMORY_MAP
    model = {}
    targets = [(w.base, w.words) for w in mm.windows] + [(mm.register("SCRATCH").offset, 1)]
    for _ in range(6):
        # A batch of writes to distinct addresses, issued concurrently with reads of addresses
        # written in earlier batches (whose values are settled).
        addrs = set()
        while len(addrs) < 24:
            base, words = rng.choice(targets)
            addrs.add(base + 4 * rng.randrange(words))
        old = [a for a in model if a not in addrs]
        events = []
        new = {}
        for a in sorted(addrs):
            v = rng.getrandbits(32)
            events.append(("w", a, t.master.init_write(a, v.to_bytes(4, "little"))))
            new[a] = v
        for a in rng.sample(old, min(len(old), 16)):
            events.append(("r", a, t.master.init_read(a, 4)))
        for kind, a, ev in events:
            await ev.wait()
            resp = ev.data
            assert int(resp.resp) == OKAY, (kind, hex(a))
            if kind == "r":
                assert int.from_bytes(resp.data, "little") == model[a], hex(a)
        model.update(new)
    for a, v in model.items():
        assert await t.read32(a) == v, hex(a)


@cocotb.test()
async def test_host_driver(dut):
    """sim/host.py over the cocotb transport: identify, window loads, DMA windows, the lock as
    a Python exception, latched errors as named exceptions, waiting for DONE."""
    from sim.host import Host, BusError, DmaWindowViolation, WatchdogTimeout, AcceleratorError
    t = await _setup(dut)
    dut.config0.value = 8 | (8 << 8) | (4 << 16) | (0x7F << 24)
    host = Host(t)
    ident = await host.identify()
    assert (ident["rows"], ident["cols"], ident["dma_windows"], ident["formats"]) == \
        (8, 8, 4, 0x7F)
    words = [0x0123456789ABCDEF, 0x1111, 0xFFFFFFFF00000000]
    await host.load_program(words, base=2)
    assert await host.read_program(6, base=4) == [0x89ABCDEF, 0x01234567, 0x1111, 0, 0,
                                                   0xFFFFFFFF]
    await host.load_microcode([5, 6, 7])
    assert await host.read_microcode(3) == [5, 6, 7]
    await host.load_lut(list(range(10)), base=2038)
    assert await host.read_lut(10, base=2038) == list(range(10))
    await host.set_window(2, 0x1000, 0x1FFF, read=True, write=False)
    assert (int(dut.dma_win2_base.value), int(dut.dma_win2_limit.value),
            int(dut.dma_win2_perm.value)) == (0x1000, 0x1FFF, 1)
    await host.set_watchdog(5000)
    assert int(dut.watchdog_limit.value) == 5000

    dut.busy.value = 1
    try:
        await host.set_seed(1)
        raise AssertionError("a locked write did not raise")
    except BusError as e:
        assert e.resp == SLVERR and e.write
    assert (await host.counters())["lock_refused"] == 1
    dut.busy.value = 0

    # Latched errors become named exceptions.
    dut.status.value = 0b110
    dut.err_code.value = int(ErrorCode.DMA_WINDOW)
    dut.err_addr.value = 0xDEAD0000
    dut.err_info.value = 3
    dut.err_count.value = 1
    try:
        await host.wait(timeout_cycles=100)
        raise AssertionError("no exception")
    except DmaWindowViolation as e:
        assert e.address == 0xDEAD0000 and "DMA window violation" in str(e)
        assert "0xdead0000" in str(e)
    dut.err_code.value = int(ErrorCode.WATCHDOG)
    err = await host.error()
    assert isinstance(err, WatchdogTimeout) and isinstance(err, AcceleratorError)
    dut.err_code.value = 0
    dut.status.value = 0b010
    st = await host.wait(timeout_cycles=100)
    assert st["done"] and not st["error"]
    dut.status.value = 0b001
    try:
        await host.wait(timeout_cycles=200, poll_cycles=50)
        raise AssertionError("no timeout")
    except TimeoutError:
        pass


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_axi_lite(simulator):
        run_cocotb(lambda: Harness(), name="axi_lite", config={},
                   test_module="cocotb_tests.test_axi_lite", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
