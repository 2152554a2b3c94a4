"""A registered stream stage: ``i.ready``, ``o.valid`` and ``o.payload`` all from flip-flops."""

from amaranth.hdl import Module, Mux, Signal
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
    skid_valid : Out(1), skid_payload : Out(shape)
        The skid register (from flip-flops): when ``skid_valid``, its beat is the one the
        output register loads next; otherwise it loads the beat offered on ``i``. For a
        consumer that decides a cycle ahead (``rtl.tensor.psum.PSUM``'s ``lookahead``).
    """

    def __init__(self, shape):
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "full": Out(1),
            "skid_valid": Out(1),
            "skid_payload": Out(shape),
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
            self.skid_valid.eq(s_valid),
            self.skid_payload.eq(s_data),
        ]
        # The skid register's payload follows ``i`` whenever it holds no beat: only its
        # valid bit depends on ``o.ready``, so the wide payload's clock enable does not.
        with m.If(~s_valid):
            m.d.sync += s_data.eq(self.i.payload)
        # ``o.ready`` can be a consumer's late combinational answer (PSUM's hazard compare), so
        # it reaches every flip-flop here through one LUT. The output register (valid bit and
        # payload) is enabled when free; the skid register's valid bit is a plain next-state
        # function, not a clear under a condition, which synthesis made its flip-flop's reset
        # (LSR) together with the domain's reset, a second LUT after ``o.ready``. It is written
        # with ``o_valid & i.valid`` where ``s_valid`` implies ``o_valid`` (the skid register
        # fills only while the output register stalls, and empties into it first), so it is not
        # a function of the output register's enable and cannot be built on top of it.
        with m.If(~o_valid | self.o.ready):
            m.d.sync += [
                o_valid.eq(s_valid | self.i.valid),
                o_data.eq(Mux(s_valid, s_data, self.i.payload)),
            ]
        m.d.sync += s_valid.eq(~self.o.ready & (s_valid | (o_valid & self.i.valid)))
        return m
