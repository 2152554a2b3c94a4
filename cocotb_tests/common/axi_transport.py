"""The host driver's transport in a cocotb simulation: a cocotbext-axi ``AxiLiteMaster`` on
the core's ``axil`` port (``sim/host.py`` runs unchanged on top of it).

cocotbext-axi logs every transaction at INFO (hundreds of lines per program): the models made
through :func:`axi_models` log on ``cocotb.<top>.axi`` at WARNING, or at INFO with
``AXI_LOG=1`` in the environment.
"""

import logging
import os

from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from sim.host import Transport, BusError

__all__ = ["AxiLiteTransport", "CocotbAxiLiteTransport", "axi_models", "axi_log_level",
           "settle_comb"]


def axi_log_level():
    """INFO if ``AXI_LOG`` is set (not empty or 0), else WARNING."""
    return logging.INFO if os.environ.get("AXI_LOG", "0") not in ("", "0") else logging.WARNING


def axi_models(dut, make):
    """Create cocotbext-axi models with ``make()`` (one model or a tuple) and give their
    channel interfaces the logger ``cocotb.<top>.axi`` at :func:`axi_log_level`. Their
    construction banners, logged on the DUT's own logger, are held back the same way."""
    level = axi_log_level()
    parent = logging.getLogger(f"cocotb.{dut._name}")
    saved = parent.level
    if level > logging.INFO:
        parent.setLevel(level)
    try:
        models = make()
    finally:
        parent.setLevel(saved)
    log = logging.getLogger(f"cocotb.{dut._name}.axi")
    log.setLevel(level)
    for model in models if isinstance(models, tuple) else (models,):
        for name in ("write_if", "read_if"):
            if hasattr(model, name):
                getattr(model, name).log = log
    return models


class AxiLiteTransport(Transport):
    """A :class:`sim.host.Transport` over cocotbext-axi.

    Parameters
    ----------
    dut : the cocotb handle of the top level
    prefix : str
        Port prefix; the Amaranth member ``axil`` appears as ``axil__awaddr`` and so on, which
        cocotbext-axi finds with ``"axil_"``.
    irq : str, optional
        Name of the interrupt output, for :meth:`wait_irq`.
    master : AxiLiteMaster, optional
        Use this master instead of creating one on ``prefix``.
    """

    def __init__(self, dut, prefix="axil_", clock=None, reset=None, irq=None, master=None):
        self.dut = dut
        self.clock = clock if clock is not None else dut.clk
        reset = reset if reset is not None else dut.rst
        if master is None:
            master = axi_models(dut, lambda: AxiLiteMaster(AxiLiteBus.from_prefix(dut, prefix),
                                                           self.clock, reset))
        self.master = master
        self.irq = getattr(dut, irq) if irq else None

    async def read32(self, addr):
        resp = await self.master.read(addr, 4)
        if resp.resp != AxiResp.OKAY:
            raise BusError(addr, int(resp.resp), write=False)
        return int.from_bytes(resp.data, "little")

    async def write32(self, addr, value):
        resp = await self.master.write(addr, int(value).to_bytes(4, "little"))
        if resp.resp != AxiResp.OKAY:
            raise BusError(addr, int(resp.resp), write=True)

    async def write_raw(self, addr, data):
        """Write bytes (any strobes) and return the AXI response code without raising."""
        resp = await self.master.write(addr, bytes(data))
        return int(resp.resp)

    async def read_raw(self, addr):
        """Read a word and return ``(value, resp)`` without raising."""
        resp = await self.master.read(addr, 4)
        return int.from_bytes(resp.data, "little"), int(resp.resp)

    async def wait_cycles(self, n):
        await ClockCycles(self.clock, n)

    async def wait_irq(self, timeout_cycles):
        """Wait until the interrupt line is high or ``timeout_cycles`` pass; True if it rose."""
        if self.irq is None:
            raise RuntimeError("AxiLiteTransport was built without irq=")
        for _ in range(timeout_cycles):
            if int(self.irq.value):
                return True
            await RisingEdge(self.clock)
        return bool(int(self.irq.value))


class CocotbAxiLiteTransport(AxiLiteTransport):
    """An :class:`AxiLiteTransport` over an existing ``AxiLiteMaster`` (as
    ``cocotb_tests/common/core_env.py`` creates it); uses the ``irq`` port when the DUT has
    one."""

    def __init__(self, master, dut, irq="irq"):
        super().__init__(dut, master=master, irq=irq if hasattr(dut, irq) else None)


from cocotb_tests.common.clock import settle_comb  # noqa: E402,F401 (re-exported)