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
    """Icarus only: re-evaluate every ``always @*`` block once.

    Yosys gives each module a dummy register (``...dump_module$N``) in the sensitivity list of
    its combinational blocks so that they run at time 0, but Icarus 11 initialises it in its
    declaration, which raises no event: a block whose inputs then never change (a command
    register that stays 0 during reset) keeps X outputs (an FSM's outputs, a ready/valid that
    makes the cocotbext-axi models fail). Toggling the dummy registers runs every block. Only
    modules and structures are searched (not memories or other arrays, which are large in the
    core)."""
    if not cocotb.SIM_NAME.lower().startswith("icarus"):
        return
    regs = []

    def walk(handle, depth=0):
        for sub in handle:
            if "dump_module" in sub._name:
                regs.append(sub)
            elif depth < 8 and hasattr(sub, "__iter__") and sub._type in (
                    "GPI_MODULE", "GPI_STRUCTURE"):
                walk(sub, depth + 1)

    walk(dut)
    for reg in regs:
        reg.value = 1
    await Timer(1, unit="ps")
    for reg in regs:
        reg.value = 0
    await Timer(1, unit="ps")
    dut._log.debug("settle_comb: toggled %d combinational dummies", len(regs))
