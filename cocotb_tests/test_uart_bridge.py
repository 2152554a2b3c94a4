"""cocotb tests of the UART-to-AXI4-Lite bridge (rtl/bus/uart_bridge.py), driven through its
serial lines by the bytes the host transport (fpga/host_serial.py) sends.

* A Python AXI4-Lite slave (:class:`AxiLiteSlave`): a word memory with random ready and
  response delays, SLVERR and DECERR regions, and checks of the master's handshake rules.
* The expected replies come from a model of the protocol written from docs/fpga.md (the
  encoders of fpga/host_serial.py and a dict memory), never from the RTL.
* ``test_serial_transport`` runs the real :class:`fpga.host_serial.SerialTransport`, blocking
  code in a cocotb bridge thread, over a pyserial-like port whose ``write`` and ``read`` drive
  and sample the simulated lines: the same program that talks to a board.
"""

import struct

import cocotb
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, settle_comb, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import seeded_rng
from cocotb_tests.test_uart import PERIOD_NS, UartLine, gap_pattern
from fpga.host_serial import (
    REPLY_PING,
    REPLY_READ,
    REPLY_WRITE,
    BusError,
    SerialTransport,
    encode_ping,
    encode_read,
    encode_write,
)

SLVERR_BASE = 0xE000_0000     # [0xE0000000, 0xF0000000): SLVERR
DECERR_BASE = 0xF000_0000     # [0xF0000000, 2**32): DECERR
PROTOCOL_VERSION = 1


def region_resp(addr):
    if addr >= DECERR_BASE:
        return 3
    if addr >= SLVERR_BASE:
        return 2
    return 0


class AxiLiteSlave:
    """A word-addressed memory behind AXI4-Lite with random delays; checks the master."""

    def __init__(self, dut, rng, *, stall=0.5, max_delay=4):
        self.dut, self.rng = dut, rng
        self.stall, self.max_delay = stall, max_delay
        self.mem = {}
        self.errors = []
        self.log = []          # ("W"|"R", addr, data) in bus order
        self.hold = False      # while True, no handshake is accepted (to stall the bridge)
        for name in ("awready", "wready", "bvalid", "arready", "rvalid"):
            getattr(dut, f"bus__{name}").value = 0
        dut.bus__bresp.value = 0
        dut.bus__rresp.value = 0
        dut.bus__rdata.value = 0

    def _delay(self):
        return 0 if self.rng.random() >= self.stall else self.rng.randint(1, self.max_delay)

    async def run(self):
        dut = self.dut
        aw = w = None
        b_wait = r_wait = None           # cycles left before raising bvalid / rvalid
        b_resp = r_resp = None
        ar = None
        b_valid = r_valid = 0
        prev = {}
        while True:
            # Readies for this cycle (a random pattern), then look at the settled values.
            dut.bus__awready.value = int(aw is None and not self.hold and self._delay() == 0)
            dut.bus__wready.value = int(w is None and not self.hold and self._delay() == 0)
            dut.bus__arready.value = int(ar is None and r_resp is None and not self.hold
                                         and self._delay() == 0)
            await ReadOnly()
            cur = {n: int(getattr(dut, f"bus__{n}").value) for n in
                   ("awvalid", "awaddr", "wvalid", "wdata", "wstrb", "arvalid", "araddr",
                    "bready", "rready", "bvalid", "rvalid")}
            # AXI rule: a raised valid stays up, with stable payload, until its handshake.
            for v, fields in (("awvalid", ("awaddr",)), ("wvalid", ("wdata", "wstrb")),
                              ("arvalid", ("araddr",))):
                if prev.get(v) and not prev.get(v + "_hs"):
                    if not cur[v] or any(cur[f] != prev[f] for f in fields):
                        self.errors.append(f"{v} dropped or payload changed before handshake")
            aw_hs = cur["awvalid"] and dut.bus__awready.value
            w_hs = cur["wvalid"] and dut.bus__wready.value
            ar_hs = cur["arvalid"] and dut.bus__arready.value
            b_hs = cur["bvalid"] and cur["bready"]
            r_hs = cur["rvalid"] and cur["rready"]
            if w_hs and cur["wstrb"] != 0xF:
                self.errors.append(f"wstrb 0x{cur['wstrb']:x}, expected 0xf")
            prev = dict(cur, awvalid_hs=aw_hs, wvalid_hs=w_hs, arvalid_hs=ar_hs)
            await RisingEdge(dut.clk)
            if aw_hs:
                aw = cur["awaddr"]
            if w_hs:
                w = cur["wdata"]
            if ar_hs:
                ar = cur["araddr"]
            if b_hs:
                dut.bus__bvalid.value = b_valid = 0
                b_resp = None
                aw = w = None
            if r_hs:
                dut.bus__rvalid.value = r_valid = 0
                r_resp = None
                ar = None
            if aw is not None and w is not None and b_resp is None:
                b_resp = region_resp(aw)
                if b_resp == 0:
                    self.mem[aw & ~3] = w
                self.log.append(("W", aw, w))
                b_wait = self._delay()
            if b_resp is not None and not b_valid:
                if b_wait == 0:
                    dut.bus__bvalid.value = b_valid = 1
                    dut.bus__bresp.value = b_resp
                else:
                    b_wait -= 1
            if ar is not None and r_resp is None:
                r_resp = region_resp(ar)
                data = self.mem.get(ar & ~3, 0) if r_resp == 0 else 0xDEAD0000 | (ar & 0xFFFF)
                dut.bus__rdata.value = data
                self.log.append(("R", ar, data))
                r_wait = self._delay()
            if r_resp is not None and not r_valid:
                if r_wait == 0:
                    dut.bus__rvalid.value = r_valid = 1
                    dut.bus__rresp.value = r_resp
                else:
                    r_wait -= 1


class ProtocolModel:
    """The expected replies, from the protocol description and a dict memory."""

    def __init__(self):
        self.mem = {}

    def reply(self, cmd):
        if cmd[0] == "ping":
            return bytes([REPLY_PING | PROTOCOL_VERSION])
        if cmd[0] == "write":
            _, addr, value = cmd
            resp = region_resp(addr)
            if resp == 0:
                self.mem[addr & ~3] = value
            return bytes([REPLY_WRITE | resp])
        _, addr = cmd
        resp = region_resp(addr)
        data = self.mem.get(addr & ~3, 0) if resp == 0 else 0xDEAD0000 | (addr & 0xFFFF)
        return struct.pack("<BI", REPLY_READ | resp, data)


def encode(cmd):
    if cmd[0] == "ping":
        return encode_ping()
    if cmd[0] == "write":
        return encode_write(cmd[1], cmd[2])
    return encode_read(cmd[1])


def random_commands(rng, n):
    addrs = [4 * i for i in range(8)] + [SLVERR_BASE + 8, DECERR_BASE + 0x20, 0xFFFF_FFFC]
    cmds = []
    for _ in range(n):
        kind = rng.choices(["read", "write", "ping"], [4, 4, 1])[0]
        if kind == "ping":
            cmds.append(("ping",))
        else:
            addr = rng.choice(addrs) if rng.random() < 0.8 else rng.randrange(0, 1 << 32)
            if kind == "read":
                cmds.append(("read", addr))
            else:
                cmds.append(("write", addr, rng.randrange(1 << 32)))
    return cmds


async def setup(dut, rng, **slave_kwargs):
    cfg = dut_config()
    await settle_comb(dut)
    start_clock(dut, PERIOD_NS)
    dut.rx.value = 1
    slave = AxiLiteSlave(dut, rng, **slave_kwargs)
    await reset(dut)
    cocotb.start_soon(slave.run())
    return cfg, slave


def line_for(dut, cfg, rng, gaps="random", rate_error=0.0):
    line = UartLine(dut.clk, dut.rx, dut.tx, cfg["divisor"], rng=rng, rate_error=rate_error,
                    gap=gap_pattern(gaps))
    cocotb.start_soon(line.monitor())
    return line


@cocotb.test()
@cocotb.parametrize(gaps=["none", "random"], stall=[0.0, 0.6])
async def test_random_commands(dut, gaps, stall):
    """Random READ32/WRITE32/PING frames (incl. SLVERR/DECERR addresses), sent in groups that
    fit the receive buffer without waiting for replies, with random gaps between bytes and a
    slave that stalls every channel at random; every reply and the memory match the model."""
    rng = seeded_rng(dut, int(stall * 10) + len(gaps))
    dut._log.info(f"gaps={gaps} stall={stall}")
    cfg, slave = await setup(dut, rng, stall=stall)
    line = line_for(dut, cfg, rng, gaps)
    model = ProtocolModel()
    cmds = random_commands(rng, 40)
    pos = 0
    while pos < len(cmds):
        group, size = [], 0
        while pos < len(cmds) and size + len(encode(cmds[pos])) <= cfg["rx_depth"]:
            group.append(cmds[pos])
            size += len(encode(cmds[pos]))
            pos += 1
        expected = b"".join(model.reply(c) for c in group)
        await line.send(b"".join(encode(c) for c in group))
        got = await line.receive(len(expected))
        assert got == expected, f"commands {group}: expected {expected.hex()} got {got.hex()}"
    assert not line.errors, line.errors
    assert not slave.errors, slave.errors
    assert slave.mem == model.mem


@cocotb.test()
async def test_timeout_garbage_and_overrun(dut):
    """Unknown command bytes are ignored; a partial frame is dropped after `timeout` idle
    cycles; a stalled bus lets the receive buffer overflow, which pulses `overrun`, and the
    host recovers with a time-out and PING."""
    rng = seeded_rng(dut)
    cfg, slave = await setup(dut, rng, stall=0.0)
    line = line_for(dut, cfg, rng, "none")
    overruns = []

    async def watch():
        while True:
            await ReadOnly()
            if dut.overrun.value.is_resolvable and int(dut.overrun.value):
                overruns.append(1)
            await RisingEdge(dut.clk)

    cocotb.start_soon(watch())
    await line.send(b"\x00\xff\x13" + encode_ping())
    assert await line.receive(1) == bytes([REPLY_PING | PROTOCOL_VERSION])
    # A partial write (address only), silence longer than the time-out, then a full write:
    # the partial frame must not have been completed by the new bytes.
    await line.send(encode_write(0x10, 0x1234_5678)[:5])
    await ClockCycles(dut.clk, cfg["timeout"] + 4)
    await line.send(encode_write(0x14, 0xCAFE_F00D) + encode_read(0x14) + encode_read(0x10))
    got = await line.receive(11)
    assert got == bytes([REPLY_WRITE]) + struct.pack("<BIBI", REPLY_READ, 0xCAFE_F00D,
                                                     REPLY_READ, 0), got.hex()
    assert not overruns
    # Stall the bus and send more than fits: overrun, then recovery.
    slave.hold = True
    burst = b"".join(encode_write(4 * i, i) for i in range(cfg["rx_depth"] // 9 + 3))
    await line.send(burst)
    assert overruns, "no overrun pulse with a full receive buffer"
    slave.hold = False
    await ClockCycles(dut.clk, 2 * cfg["timeout"] + 60 * cfg["divisor"])
    line.received.clear()
    await line.send(encode_ping() + encode_write(0x40, 0x4040_4040) + encode_read(0x40))
    got = await line.receive(7)
    assert got == bytes([REPLY_PING | 1, REPLY_WRITE]) + struct.pack("<BI", REPLY_READ,
                                                                     0x4040_4040), got.hex()
    assert not slave.errors, slave.errors


class SimSerialPort:
    """pyserial's write/read/reset_input_buffer over the simulated lines (for bridge threads)."""

    def __init__(self, line, timeout_bits=400):
        self.line = line
        self.timeout_bits = timeout_bits
        self.bytes_out = 0

    @resume
    async def write(self, data):
        self.bytes_out += len(data)
        await self.line.send(bytes(data))
        return len(data)

    @resume
    async def read(self, n):
        return await self.line.receive(n, timeout_bits=self.timeout_bits)

    def reset_input_buffer(self):
        self.line.received.clear()


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.6])
async def test_serial_transport(dut, stall):
    """fpga.host_serial.SerialTransport, unchanged, against the simulated bridge: ping,
    write32/read32, pipelined block transfers within its window, BusError on SLVERR/DECERR."""
    rng = seeded_rng(dut, 5)
    dut._log.info(f"stall={stall}")
    cfg, slave = await setup(dut, rng, stall=stall)
    line = line_for(dut, cfg, rng, "random")
    port = SimSerialPort(line)
    words = [rng.randrange(1 << 32) for _ in range(12)]

    def host_program():
        link = SerialTransport(port, window=cfg["rx_depth"], frame_timeout=0)
        results = {"version": link.ping()}
        link.write32(0x100, 0x0BAD_F00D)
        results["one"] = link.read32(0x100)
        link.write_block(0x200, words)
        results["block"] = link.read_block(0x200, len(words))
        for addr in (SLVERR_BASE, DECERR_BASE + 4):
            try:
                link.read32(addr)
            except BusError as e:
                results.setdefault("errors", []).append((e.op, e.addr, e.resp))
            try:
                link.write32(addr, 1)
            except BusError as e:
                results.setdefault("errors", []).append((e.op, e.addr, e.resp))
        return results

    results = await bridge(host_program)()
    assert results["version"] == PROTOCOL_VERSION
    assert results["one"] == 0x0BAD_F00D
    assert results["block"] == words
    assert results["errors"] == [("read", SLVERR_BASE, 2), ("write", SLVERR_BASE, 2),
                                 ("read", DECERR_BASE + 4, 3), ("write", DECERR_BASE + 4, 3)]
    assert not line.errors, line.errors
    assert not slave.errors, slave.errors


if not cocotb.is_simulation:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIG = {"divisor": 6, "rx_depth": 16, "tx_depth": 8, "timeout": 300}

    def _bridge(cfg):
        from rtl.bus.uart_bridge import UartBridge
        return UartBridge(divisor=cfg["divisor"], rx_depth=cfg["rx_depth"],
                          tx_depth=cfg["tx_depth"], timeout=cfg["timeout"])

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_uart_bridge(simulator):
        run_cocotb(lambda: _bridge(CONFIG), name="uart_bridge", config=CONFIG,
                   test_module="cocotb_tests.test_uart_bridge", simulator=simulator)
