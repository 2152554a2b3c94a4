"""Program watchdog: a programmable cycle limit that aborts a program which runs too long."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["Watchdog"]


class Watchdog(wiring.Component):
    """Counts the cycles a program runs and aborts it past ``limit``.

    Parameters
    ----------
    width : int
        Bits of the limit and the counter, 1 to 64 (default 32, the ``WATCHDOG_LIMIT``
        register).

    Members
    -------
    limit : In(width)
        Cycle limit; 0 disables the watchdog. Sampled every cycle (the register block locks it
        while the core is busy).
    start : In(1)
        One-cycle pulse when a program starts: the counter restarts at 0 and ``abort`` falls.
    running : In(1)
        The program is running; the counter advances on every cycle with ``running`` high.
    clear : In(1)
        Drops ``abort`` (host ``CTRL.clear``) without touching the counter.
    count : Out(width)
        Cycles counted since ``start`` (saturates at ``2**width - 1``).
    timeout : Out(1)
        One-cycle pulse in the first cycle in which ``running`` is high while ``count`` has
        already reached a non-zero ``limit``: a program that runs for exactly ``limit`` cycles
        (``running`` high for ``limit`` cycles) does not time out, one more cycle does. At most
        one pulse per ``start``.
    abort : Out(1)
        High from the cycle after ``timeout`` until ``start`` or ``clear``: the core drains
        its engines to idle while it is high.

    Reset: counter 0, ``abort`` low.
    """

    def __init__(self, width=32):
        check_int("width", width, 1, 64)
        self._width = width
        super().__init__({
            "limit": In(width), "start": In(1), "running": In(1), "clear": In(1),
            "count": Out(width), "timeout": Out(1), "abort": Out(1),
        })

    width = property(lambda self: self._width)

    def elaborate(self, platform):
        m = Module()
        fired = Signal()
        m.d.comb += self.timeout.eq(self.running & ~fired & (self.limit != 0) &
                                    (self.count >= self.limit))
        with m.If(self.start):
            m.d.sync += [self.count.eq(0), fired.eq(0), self.abort.eq(0)]
        with m.Else():
            with m.If(self.running & (self.count != (1 << self._width) - 1)):
                m.d.sync += self.count.eq(self.count + 1)
            with m.If(self.timeout):
                m.d.sync += [fired.eq(1), self.abort.eq(1)]
            with m.If(self.clear):
                m.d.sync += self.abort.eq(0)
        return m
