"""cocotb tests of the UART (rtl/bus/uart.py): the receiver and the transmitter, each against a
Python model of the serial line (8N1, LSB first), with random idle gaps, baud-rate mismatch,
back-pressure on the receive stream (overrun), bad stop bits and glitches.

The line driver and monitor here (:class:`UartLine`) are also used by
``test_uart_bridge.py``.
"""

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import (Scoreboard, StreamMonitor, StreamSink,
                                          StreamSource, seeded_rng)

PERIOD_NS = 10


class UartLine:
    """The far end of a serial line: drives ``rx`` bit by bit, decodes ``tx`` into bytes.

    ``rate_error`` stretches (positive) or shrinks the driver's bit time relative to the DUT's
    ``divisor`` clock cycles; gaps between bytes are drawn by ``gap(rng)`` in bit times.
    """

    def __init__(self, clk, rx, tx, divisor, *, rng, rate_error=0.0, gap=None):
        self.clk, self.rx, self.tx = clk, rx, tx
        self.divisor = divisor
        self.rng = rng
        self.bit_ps = round(divisor * PERIOD_NS * 1000 * (1 + rate_error))
        self.gap = gap or (lambda rng: 0)
        self.received = []
        self.send_queue = []
        self._send_event = None
        self.errors = []
        rx.value = 1

    async def send_byte(self, byte, *, stop=1):
        bits = [0] + [(byte >> i) & 1 for i in range(8)] + [stop]
        for b in bits:
            self.rx.value = b
            await Timer(self.bit_ps, unit="ps")
        self.rx.value = 1

    async def send(self, data):
        for byte in data:
            idle = self.gap(self.rng)
            if idle:
                await Timer(round(idle * self.bit_ps), unit="ps")
            await self.send_byte(byte)

    async def monitor(self):
        """Decode every byte the DUT transmits into ``received`` (checks the stop bit)."""
        while True:
            await FallingEdge(self.tx)
            # Mid-bit of the start bit, then of each data bit and of the stop bit.
            await ClockCycles(self.clk, self.divisor // 2)
            if self.tx.value != 0:
                self.errors.append("start bit shorter than half a bit")
                continue
            byte = 0
            for i in range(8):
                await ClockCycles(self.clk, self.divisor)
                byte |= int(self.tx.value) << i
            await ClockCycles(self.clk, self.divisor)
            if self.tx.value != 1:
                self.errors.append(f"stop bit 0 after byte 0x{byte:02x}")
            self.received.append(byte)

    async def receive(self, n, *, timeout_bits=None):
        """Wait until ``n`` more bytes than already taken are in ``received``; return them.
        On time-out return what arrived (like pyserial)."""
        limit = timeout_bits if timeout_bits is not None else 20 * (n + 2)
        waited = 0
        while len(self.received) < n and waited < limit * self.divisor:
            await ClockCycles(self.clk, self.divisor)
            waited += self.divisor
        out, self.received = self.received[:n], self.received[n:]
        return bytes(out)


def gap_pattern(name):
    """Idle time between bytes, in bit times."""
    if name == "none":
        return lambda rng: 0
    if name == "random":
        return lambda rng: rng.choice([0, 0, 0, 0.3, 1, 2.5, 7])
    raise ValueError(name)


async def setup(dut, cfg):
    start_clock(dut, PERIOD_NS)
    dut.rx.value = 1
    dut.o__ready.value = 0
    dut.i__valid.value = 0
    await reset(dut)


@cocotb.test()
@cocotb.parametrize(gaps=["none", "random"], rate_error=[0.0, -0.02, 0.02])
async def test_rx_bytes(dut, gaps, rate_error):
    """Random bytes arrive intact with gaps and +-2% baud mismatch; the receive stream is
    taken with random back-pressure that is short enough never to overrun."""
    cfg = dut_config()
    divisor = cfg["divisor"]
    rng = seeded_rng(dut, 17)
    dut._log.info(f"gaps={gaps} rate_error={rate_error}")
    await setup(dut, cfg)
    line = UartLine(dut.clk, dut.rx, dut.tx, divisor, rng=rng, rate_error=rate_error,
                    gap=gap_pattern(gaps))
    data = bytes([0x00, 0xFF, 0x55, 0xAA, 0x01, 0x80]) + rng.randbytes(40)
    sink = StreamSink(dut, "o", rng=rng, ready_p=0.3)
    mon = StreamMonitor(dut, "o")
    overruns = []

    async def count_overruns():
        while True:
            await ReadOnly()
            if dut.overrun.value:
                overruns.append(1)
            await RisingEdge(dut.clk)

    counter = cocotb.start_soon(count_overruns())
    # (a frame with its longest gap lasts at most 18 bit times)
    received = cocotb.start_soon(sink.collect(len(data), timeout=(18 * len(data) + 4) * divisor))
    await line.send(data)
    got = await received
    counter.cancel()
    mon.check()
    assert not overruns
    Scoreboard("received bytes", fmt=hex).compare(got, data)


@cocotb.test()
async def test_rx_overrun_frame_error_glitch(dut):
    """A byte completing while the previous one is untaken is dropped with an overrun pulse;
    a stop bit of 0 drops the byte with a frame_error pulse; a low glitch shorter than half a
    bit is not a start bit."""
    cfg = dut_config()
    divisor = cfg["divisor"]
    rng = seeded_rng(dut)
    await setup(dut, cfg)
    line = UartLine(dut.clk, dut.rx, dut.tx, divisor, rng=rng)
    pulses = {"overrun": 0, "frame_error": 0}

    async def count():
        while True:
            await ReadOnly()
            pulses["overrun"] += int(dut.overrun.value)
            pulses["frame_error"] += int(dut.frame_error.value)
            await RisingEdge(dut.clk)

    async def expect(byte):
        """``o`` offers ``byte`` in this cycle (nothing if None)."""
        await ReadOnly()
        if byte is None:
            assert dut.o__valid.value == 0
        else:
            assert dut.o__valid.value == 1 and int(dut.o__payload.value) == byte
        await RisingEdge(dut.clk)

    async def arrives(byte):
        await line.send(bytes([byte]))
        await ClockCycles(dut.clk, 2)
        await expect(byte)

    counter = cocotb.start_soon(count())
    # Overrun: ready stays low over three bytes; the first is held, the next two dropped.
    await line.send(b"\x11\x22\x33")
    await ClockCycles(dut.clk, divisor)
    assert pulses["overrun"] == 2
    assert dut.o__valid.value == 1 and int(dut.o__payload.value) == 0x11
    dut.o__ready.value = 1
    await RisingEdge(dut.clk)
    dut.o__ready.value = 0
    await expect(None)
    # Frame error: the byte is dropped, the following one arrives.
    await line.send_byte(0x5A, stop=0)
    await ClockCycles(dut.clk, divisor)
    assert pulses["frame_error"] == 1
    await expect(None)
    await arrives(0xC3)
    dut.o__ready.value = 1
    await RisingEdge(dut.clk)
    dut.o__ready.value = 0
    await ClockCycles(dut.clk, 2)
    # Glitch: low for a third of a bit, then a real byte.
    dut.rx.value = 0
    await ClockCycles(dut.clk, max(1, divisor // 3 - 2))
    dut.rx.value = 1
    await ClockCycles(dut.clk, 2 * divisor)
    await expect(None)
    await arrives(0x7E)
    assert pulses == {"overrun": 2, "frame_error": 1}
    counter.cancel()


@cocotb.test()
@cocotb.parametrize(idle=["none", "random"])
async def test_tx_bytes(dut, idle):
    """Random bytes offered with random idle cycles between them leave as correct 8N1 frames,
    back-to-back frames exactly 10 bit times apart; ready only while idle."""
    cfg = dut_config()
    divisor = cfg["divisor"]
    rng = seeded_rng(dut, 3)
    dut._log.info(f"idle={idle}")
    await setup(dut, cfg)
    line = UartLine(dut.clk, dut.rx, dut.tx, divisor, rng=rng)
    mon = cocotb.start_soon(line.monitor())
    source = StreamSource(dut, "i", rng=rng)
    data = bytes([0x00, 0xFF, 0x55, 0xAA]) + rng.randbytes(30)
    starts = []         # the edge at which each byte was taken
    for byte in data:
        if idle == "random" and rng.random() < 0.5:
            await ClockCycles(dut.clk, rng.randrange(1, 3 * divisor))
        await source.send(byte)
        starts.append(get_sim_time(unit="ns"))
    got = await line.receive(len(data))
    mon.cancel()
    assert not line.errors, line.errors
    assert got == data, f"sent {data.hex()} got {got.hex()}"
    if idle == "none":
        gaps = {round(b - a) for a, b in zip(starts, starts[1:])}
        assert gaps == {10 * divisor * PERIOD_NS}, gaps


if not cocotb.is_simulation:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    def _pair(divisor):
        from amaranth.hdl import Module
        from amaranth.lib import stream, wiring
        from amaranth.lib.wiring import In, Out

        from rtl.bus.uart import UartRx, UartTx

        class UartPair(wiring.Component):
            """The receiver and the transmitter side by side, not connected."""
            rx: In(1, init=1)
            o: Out(stream.Signature(8))
            overrun: Out(1)
            frame_error: Out(1)
            i: In(stream.Signature(8))
            tx: Out(1, init=1)

            def elaborate(self, platform):
                m = Module()
                m.submodules.urx = urx = UartRx(divisor)
                m.submodules.utx = utx = UartTx(divisor)
                m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                             self.overrun.eq(urx.overrun),
                             self.frame_error.eq(urx.frame_error)]
                wiring.connect(m, urx.o, wiring.flipped(self.o))
                wiring.connect(m, wiring.flipped(self.i), utx.i)
                return m

        return UartPair()

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("divisor", [7])
    def test_uart(simulator, divisor):
        run_cocotb(lambda: _pair(divisor), name=f"uart_d{divisor}", config={"divisor": divisor},
                   test_module="cocotb_tests.test_uart", simulator=simulator)

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("divisor", [4, 16])
    def test_uart_divisors(simulator, divisor):
        run_cocotb(lambda: _pair(divisor), name=f"uart_d{divisor}", config={"divisor": divisor},
                   test_module="cocotb_tests.test_uart", simulator=simulator)
