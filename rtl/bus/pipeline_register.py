"""A registered stream stage: ``i.ready``, ``o.valid`` and ``o.payload`` all from flip-flops."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PipelineRegister"]


class PipelineRegister(wiring.Component):
    """Cut every combinational path of a stream, at one cycle of latency and full throughput.

    Where :class:`rtl.bus.skid.SkidBuffer` cuts only ``ready`` (its ``o`` is a multiplexer
    after ``i``), this stage also registers ``o.valid`` and ``o.payload``: nothing on ``o``
    depends combinationally on ``i`` and nothing on ``i`` on ``o``. Two registers: the output
    register, and a skid register that takes the beat offered in the cycle the output stalls.

    Timing: a beat taken on ``i`` at edge ``t`` is offered on ``o`` from ``t + 1`` while ``o``
    is ready (latency 1, one beat per cycle). While ``o`` is stalled the output register holds
    its beat (``o.payload`` stable), one more beat is taken into the skid register, and
    ``i.ready`` is low until the skid register has moved into the output register. Nothing is
    lost, duplicated or reordered. Reset empties both registers (their valid bits; the payload
    registers have no reset, and ``o.payload`` means nothing while ``o.valid`` is low).

    Parameters
    ----------
    shape : shape-like
        Payload shape (e.g. a ``data.StructLayout``).

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    full : Out(1)
        Either register holds a beat (for ``busy``/idle accounting).
    """

    def __init__(self, shape):
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        o_valid = Signal()
        o_data = Signal.like(self.i.payload, reset_less=True)
        s_valid = Signal()
        s_data = Signal.like(self.i.payload, reset_less=True)
        m.d.comb += [
            self.i.ready.eq(~s_valid),
            self.o.valid.eq(o_valid),
            self.o.payload.eq(o_data),
            self.full.eq(o_valid | s_valid),
        ]
        # The skid register's payload follows ``i`` whenever it holds no beat: only its
        # valid bit depends on ``o.ready``, so the wide payload's clock enable does not.
        with m.If(~s_valid):
            m.d.sync += s_data.eq(self.i.payload)
        with m.If(~o_valid | self.o.ready):
            # The output register is free this edge: fill it from the skid register first.
            with m.If(s_valid):
                m.d.sync += [o_valid.eq(1), o_data.eq(s_data), s_valid.eq(0)]
            with m.Else():
                m.d.sync += [o_valid.eq(self.i.valid), o_data.eq(self.i.payload)]
        with m.Elif(self.i.valid & ~s_valid):
            m.d.sync += s_valid.eq(1)
        return m
