"""A count of pending events with two increments and one decrement per cycle."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["PendingCount"]


class PendingCount(wiring.Component):
    """Counts events that are pending: ``inc_a`` and ``inc_b`` add one each, ``dec`` takes
    one away, all in the same cycle if they come together (a sum, so no event is lost).

    ``nz`` is a flip-flop beside the count, so that a user's logic sees one flag, not a
    compare. The user keeps the count from 0 to ``limit``: ``dec`` only while ``nz``, and no
    more than ``limit`` events pending (the count wraps otherwise).

    Parameters
    ----------
    limit : int
        The most events pending, 1 to 65535.

    Members
    -------
    inc_a, inc_b, dec : In(1)
    nz : Out(1)
        Events are pending (after the last edge's updates).

    Reset: none pending.
    """

    def __init__(self, limit):
        self._limit = check_int("limit", limit, 1, 65535)
        super().__init__({"inc_a": In(1), "inc_b": In(1), "dec": In(1), "nz": Out(1)})

    limit = property(lambda self: self._limit)

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self._limit + 1))
        count_next = Signal.like(count)
        m.d.comb += count_next.eq(count + self.inc_a + self.inc_b - self.dec)
        m.d.sync += [count.eq(count_next), self.nz.eq(count_next != 0)]
        return m
