"""The soft reset of the engines: how an abort reaches every register it returns to idle."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_bool

from .global_buffer import global_buffer

__all__ = ["EngineReset"]


class EngineReset(wiring.Component):
    """The reset of the units an abort holds in reset (the sequencer, the engine controllers,
    the tensor and vector engines, PSUM's pipeline).

    Parameters
    ----------
    engine : bool
        False: ``reset`` is ``aborting`` itself (combinational); the units stay in ``sync``
        under a ``ResetInserter(reset)``, so their registers reset on ``rst | aborting``.
        True: ``reset`` is a flip-flop that the domain reset sets and that otherwise loads
        ``aborting_next`` (so it equals ``aborting`` from the cycle after the reset), through
        a DCCA onto a global network on an ECP5 platform (``global_buffer``); the units then
        run in a reset-less domain ``engine`` on the same clock, reset by ``reset`` alone:
        on an FPGA no OR of two resets drives every such register over general routing, and
        the units are also held in reset for one cycle after ``rst`` falls.

    Members
    -------
    aborting : In(1)
        The abort (``RunControl.aborting``).
    aborting_next : In(1)
        Its next value (``RunControl.aborting_next``).
    reset : Out(1)
        The units' reset.
    """

    def __init__(self, engine):
        self._engine = check_bool("engine", engine)
        super().__init__({"aborting": In(1), "aborting_next": In(1), "reset": Out(1)})

    engine = property(lambda self: self._engine)

    def elaborate(self, platform):
        m = Module()
        if not self._engine:
            m.d.comb += self.reset.eq(self.aborting)
            return m
        soft_ff = Signal(init=1)
        m.d.sync += soft_ff.eq(self.aborting_next)
        m.d.comb += self.reset.eq(global_buffer(m, "soft_buf", soft_ff, platform))
        return m
