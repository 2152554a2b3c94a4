"""A skid buffer: a stream stage whose ``i.ready`` is a register, with no added latency."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Cut the combinational ``ready`` path of a stream without adding a cycle.

    A beat passes straight through (``o`` is ``i`` in the same cycle) while ``o`` is ready.
    When ``o`` is not ready the beat offered on ``i`` is still taken, into the skid register,
    and ``i.ready`` falls the next cycle; the skid register is sent first once ``o`` is ready
    again. So ``i.ready`` is the complement of one flip-flop (never a function of ``o.ready``),
    ``o.valid`` and ``o.payload`` are a multiplexer after ``i``'s, throughput is one beat per
    cycle, latency 0, and the upstream sees back-pressure one cycle late: it may present one
    more beat, which is kept. Nothing is lost, duplicated or reordered; ``o.payload`` is stable
    while ``o.valid`` is high and ``o.ready`` low. The skid register's payload has no reset (its
    valid bit has).

    Parameters
    ----------
    shape : shape-like
        Payload shape (e.g. a ``data.ArrayLayout``).

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    full : Out(1)
        The skid register holds a beat (for ``busy``/idle accounting).
    """

    def __init__(self, shape):
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        full = Signal()
        skid = Signal.like(self.i.payload, reset_less=True)   # ``full`` says what it holds
        m.d.comb += [
            self.i.ready.eq(~full),
            self.o.valid.eq(full | self.i.valid),
            self.o.payload.eq(Mux(full, skid, self.i.payload)),
            self.full.eq(full),
        ]
        # The skid register follows ``i`` while it is empty: only ``full`` depends on
        # ``o.ready``, not the wide payload's clock enable.
        with m.If(~full):
            m.d.sync += skid.eq(self.i.payload)
        with m.If(full):
            with m.If(self.o.ready):
                m.d.sync += full.eq(0)
        with m.Elif(self.i.valid & ~self.o.ready):
            m.d.sync += full.eq(1)
        return m
