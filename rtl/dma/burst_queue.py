"""A ring buffer of the DMA's bursts in flight, with no full or empty handshake."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["BurstQueue"]


class BurstQueue(wiring.Component):
    """``depth`` entries of ``shape`` in LUT RAM, first in first out, for bookkeeping of the
    bursts issued and not finished.

    The user counts the entries itself (the DMA's outstanding bursts), so a push never meets
    a full queue nor a pop an empty one, and neither waits for a ready: a push and a pop move
    only their own pointer (and the level), each through one gate. ``head`` is the oldest
    entry, read asynchronously; a push and a pop may come in the same cycle. Undefined when
    the user pushes a full or pops an empty queue.

    Parameters
    ----------
    shape : ShapeLike
        An entry.
    depth : int
        Entries, 1 to 256.

    Members
    -------
    push : In(1)
        Enter ``w_data``.
    w_data : In(shape)
    pop : In(1)
        Drop the head.
    head : Out(shape)
        The oldest entry (when ``level`` is not 0).
    level : Out(range(depth + 1))
        Entries held.
    """

    def __init__(self, shape, depth):
        self._shape = shape
        self._depth = check_int("depth", depth, 1, 256)
        super().__init__({
            "push": In(1), "w_data": In(shape), "pop": In(1), "head": Out(shape),
            "level": Out(range(depth + 1)),
        })

    depth = property(lambda self: self._depth)

    def elaborate(self, platform):
        m = Module()
        n = self._depth
        m.submodules.mem = mem = memory.Memory(shape=self._shape, depth=n, init=[])
        w, r = mem.write_port(), mem.read_port(domain="comb")
        wp, rp = Signal(range(n), name="wp"), Signal(range(n), name="rp")
        m.d.comb += [w.addr.eq(wp), w.en.eq(self.push), w.data.eq(self.w_data),
                     r.addr.eq(rp), self.head.eq(r.data)]
        with m.If(self.push):
            m.d.sync += wp.eq(Mux(wp == n - 1, 0, wp + 1))
        with m.If(self.pop):
            m.d.sync += rp.eq(Mux(rp == n - 1, 0, rp + 1))
        m.d.sync += self.level.eq(self.level + self.push - self.pop)
        return m
