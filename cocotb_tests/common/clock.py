"""Clock and reset helpers shared by the testbenches (cocotb 2 idioms)."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer

__all__ = ["start_clock", "reset", "settle_comb"]


def start_clock(dut, period_ns=10):
    """Start the ``clk`` clock of a generated Amaranth top."""
    Clock(dut.clk, period_ns, unit="ns").start()


async def reset(dut, cycles=2):
    """Hold the synchronous active-high ``rst`` for ``cycles`` rising edges."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def settle_comb(dut):
    """Icarus 11 does not run Yosys' ``always @*`` blocks at time 0 (their dummy trigger reg is
    initialised in its declaration, which raises no event), so combinational outputs of an FSM
    read X until one of their inputs changes. Toggle those trigger regs once."""
    if not cocotb.SIM_NAME.lower().startswith("icarus"):
        return
    regs = []

    def walk(handle, depth=0):
        for sub in handle:
            name = sub._name
            if "dump_module" in name:
                regs.append(sub)
            elif depth < 8 and hasattr(sub, "__iter__") and not hasattr(sub, "value"):
                walk(sub, depth + 1)

    walk(dut)
    for reg in regs:
        reg.value = 1
    await Timer(1, unit="ps")
    for reg in regs:
        reg.value = 0
    await Timer(1, unit="ps")
