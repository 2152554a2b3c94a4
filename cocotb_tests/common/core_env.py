"""Test environment of the whole core under cocotb: clock, reset, an AXI4-Lite master for the
host, an AXI RAM (cocotbext-axi) as the external memory with random latency, back-pressure and
error regions, and the host driver on top.

    env = CoreEnv(dut, seed=seed, latency=(0, 6), pause=0.3)
    await env.reset()
    host = env.host()            # sim.host driver over the cocotb AXI-Lite transport

The AXI memory model records every access (``env.accesses``: (kind, byte address, length)) so
tests can check that nothing outside the allowed windows is touched.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from .clock import reset as _reset
from .clock import start_clock

__all__ = ["CoreEnv", "pause_pattern", "AXIL_PREFIX", "AXI_PREFIX"]

#: Generated port prefixes of the core's buses (``<port>__<member>``).
AXIL_PREFIX = "axil_"
AXI_PREFIX = "axi_"


def pause_pattern(rng, probability):
    """An endless generator of pause flags: True with ``probability`` (a back-pressure or idle
    pattern for a cocotbext-axi channel)."""
    while True:
        yield rng.random() < probability


class CoreEnv:
    """Everything a core test needs around the DUT.

    Parameters
    ----------
    dut : the cocotb handle of the generated core (top ``top``).
    seed : int
        Seeds the latency and pause patterns (log it).
    mem_size : int
        Bytes of external memory.
    latency : (int, int)
        Each read beat / write beat of the AXI RAM waits a random number of cycles in this range.
    pause : float
        Probability that a channel of the AXI RAM pauses on a cycle (back-pressure on AR/AW/W,
        idle cycles on R/B).
    """

    def __init__(self, dut, *, seed=0, mem_size=1 << 20, latency=(0, 0), pause=0.0):
        self.dut = dut
        self.seed = seed
        self.rng = random.Random(seed)
        self.latency = latency
        self.error_ranges = []
        self.accesses = []
        start_clock(dut)
        dut.rst.value = 1
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, AXIL_PREFIX), dut.clk, dut.rst)
        self.ram = AxiRam(AxiBus.from_prefix(dut, AXI_PREFIX), dut.clk, dut.rst, size=mem_size)
        self._hook_ram()
        self.set_pause(pause)
        dut._log.info("CoreEnv seed=%d latency=%s pause=%s", seed, latency, pause)

    def set_pause(self, probability):
        """Random back-pressure / idle cycles on every channel of the AXI RAM."""
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            if probability > 0:
                ch.set_pause_generator(pause_pattern(random.Random(self.rng.random()),
                                                     probability))
            else:
                ch.clear_pause_generator()

    def _in_error(self, addr, length):
        return any(lo < addr + length and addr < hi for lo, hi in self.error_ranges)

    def _hook_ram(self):
        env, ram = self, self.ram
        clk = self.dut.clk

        async def delay():
            lo, hi = env.latency
            if hi > 0:
                n = env.rng.randint(lo, hi)
                if n:
                    await ClockCycles(clk, n)

        async def read(address, length):
            await delay()
            address %= ram.size
            env.accesses.append(("r", address, length))
            if env._in_error(address, length):
                raise IOError(f"read error at {address:#x}")
            return ram.read(address, length)

        async def write(address, data):
            await delay()
            address %= ram.size
            env.accesses.append(("w", address, len(data)))
            if env._in_error(address, len(data)):
                raise IOError(f"write error at {address:#x}")
            ram.write(address, data)

        ram.read_if._read = read
        ram.write_if._write = write

    async def reset(self, cycles=4):
        """Synchronous reset of the core (the AXI models reset with it)."""
        await _reset(self.dut, cycles)

    async def cycles(self, n):
        await ClockCycles(self.dut.clk, n)

    def host(self, **kwargs):
        """The host driver (``sim.host``) over the cocotb AXI-Lite transport."""
        from sim.host import Host
        from .axi_transport import CocotbAxiLiteTransport
        return Host(CocotbAxiLiteTransport(self.axil, self.dut), **kwargs)

    # External memory helpers (byte addresses, little-endian).
    def write_mem(self, addr, data):
        self.ram.write(addr, bytes(data))

    def read_mem(self, addr, length):
        return self.ram.read(addr, length)
