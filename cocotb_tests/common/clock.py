"""Clock and reset helpers shared by the testbenches (cocotb 2 idioms)."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["start_clock", "reset"]


def start_clock(dut, period_ns=10):
    """Start the ``clk`` clock of a generated Amaranth top."""
    Clock(dut.clk, period_ns, unit="ns").start()


async def reset(dut, cycles=2):
    """Hold the synchronous active-high ``rst`` for ``cycles`` rising edges."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
