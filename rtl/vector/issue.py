"""The vector engine's instruction sequencer: takes a command, reads its prologue, injects its
elements into the free-running pipeline under a credit count, and drains it."""

import contextlib

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int
from sim.dtypes import Format
from sim.vector import CMD_FIELDS, AccOp, AluOp, Src

__all__ = ["VectorIssue", "CMD_LAYOUT"]

#: The ``cmd`` stream payload (field order and widths from ``sim.vector.CMD_FIELDS``).
CMD_LAYOUT = data.StructLayout({name: width for name, width in CMD_FIELDS})


class VectorIssue(wiring.Component):
    """Sequencing of :class:`rtl.vector.engine.VectorEngine`: one instruction at a time.

    In IDLE a ``cmd`` beat is taken (``cmd.ready`` is ``idle``, a flip-flop) into ``c``; the
    sequencer then takes the prologue ``b`` beats (PRO0 for ``src0`` LANE, PRO1 for ``src1``
    LANE; ``take_lane0`` / ``take_lane1`` mark them), injects ``count`` elements (BODY: one
    per ``a`` beat, with a ``b`` beat for tensor operands), the accumulators' read-out if
    ``emit_acc`` (EMIT), and waits for ``empty`` (DRAIN) before returning to IDLE.

    An element enters only with a credit left: ``credits`` starts at ``fifo_depth``, an
    injection takes one and each ``ret_fifo`` / ``ret_drop`` pulse returns one, so the result
    FIFO (whose room the credits count) never overflows and the pipeline never stalls. A
    summing instruction (``acc_op`` SUM; with ``subs`` above 1, any ``acc_op`` but NONE)
    leaves ``acc_wait`` empty cycles after each element, for the accumulate adder.

    With ``subs`` above 1 an element enters as ``subs`` sub-beats in consecutive cycles
    (``inject_sub``, numbered by ``sub``; ``inject`` with the first takes the credit); the
    input beats are taken with the last sub-beat, and the read-out waits until the last
    element's last sub-beat is in its accumulator (``subs - 1 + acc_wait`` cycles).

    Parameters
    ----------
    subs : int
        Sub-beats per element (``lanes // units``), 1..128.
    acc_wait : int
        The accumulate adder's stages (0..8).
    fifo_depth : int
        Credits: entries of the result FIFO (1..4096).

    Members
    -------
    cmd : In(stream.Signature(CMD_LAYOUT))
        Instructions.
    c : Out(CMD_LAYOUT)
        The current instruction, registered when taken.
    raw : Out(1)
        ``sim.vector.raw_copy`` of ``c``, registered with it.
    fmt_a : Out(3)
        The decoders' format for ``a``: FP32 for a raw copy, else ``c.fmt_a``.
    summing : Out(1)
        ``c`` spaces its elements for the accumulate adder (combinational from ``c``).
    a_valid, b_valid : In(1); a_ready, b_ready : Out(1)
        The input streams' handshakes (combinational from the state, the credits, the valids).
    inject, inject_emit, inject_sub : Out(1)
        An element (or, with ``inject_emit``, the read-out) enters; ``inject_sub``: a
        sub-beat enters (``inject`` itself when ``subs`` is 1; the read-out is one slot).
    sub : Out(range(subs))
        The sub-beat entering (with ``subs`` above 1 only).
    take_lane0, take_lane1 : Out(1)
        A prologue beat is taken for the lane registers of operand 0 / 1.
    acc_rst : Out(1)
        A one-cycle pulse, the cycle after an instruction with ``acc_reset`` is taken.
    ret_fifo, ret_drop : In(1)
        A credit returns: a beat left the result FIFO; an element without output left the
        pipeline.
    empty : In(1)
        Nothing is in flight in the pipeline (DRAIN ends on it).
    idle : Out(1, init=1)
        In IDLE (a flip-flop).
    """

    def __init__(self, subs=1, acc_wait=0, fifo_depth=16):
        self._subs = check_int("subs", subs, 1, 128)
        self._acc_wait = check_int("acc_wait", acc_wait, 0, 8)
        self._fifo_depth = check_int("fifo_depth", fifo_depth, 1, 4096)
        ports = {
            "cmd": In(stream.Signature(CMD_LAYOUT)),
            "c": Out(CMD_LAYOUT),
            "raw": Out(1),
            "fmt_a": Out(3),
            "summing": Out(1),
            "a_valid": In(1), "a_ready": Out(1),
            "b_valid": In(1), "b_ready": Out(1),
            "inject": Out(1), "inject_emit": Out(1), "inject_sub": Out(1),
            "take_lane0": Out(1), "take_lane1": Out(1),
            "acc_rst": Out(1),
            "ret_fifo": In(1), "ret_drop": In(1),
            "empty": In(1),
            "idle": Out(1, init=1),
        }
        if subs > 1:
            ports["sub"] = Out(range(subs))
        super().__init__(ports)

    @property
    def subs(self):
        return self._subs

    @property
    def acc_wait(self):
        return self._acc_wait

    @property
    def fifo_depth(self):
        return self._fifo_depth

    def elaborate(self, platform):
        m = Module()
        G, ACC = self._subs, self.acc_wait
        c = self.c
        inject, inject_emit = self.inject, self.inject_emit
        remaining = Signal(16)
        # remaining == 0, kept beside it, so that no 16-bit test precedes the credit counter
        # and the input handshakes.
        rem_zero = Signal()
        sub = self.sub if G > 1 else Const(0, 1)
        inject_sub = self.inject_sub
        if G == 1:
            m.d.comb += inject_sub.eq(inject)

        # Credits: ``fifo_depth`` minus the elements in flight and the FIFO's content.
        credits = Signal(range(self._fifo_depth + 1), init=self._fifo_depth)
        # A summed element is followed by ``acc_wait`` empty cycles, so that the accumulate
        # adder (free-running, ``acc_wait`` stages) sees its operands stable that long.
        gap = Signal(range(ACC + 1))
        # (with fewer units every accumulating instruction: the shared unit's loop)
        summing_cmd = self.summing
        m.d.comb += summing_cmd.eq((c.acc_op == AccOp.SUM) if G == 1 else
                                   (c.acc_op != AccOp.NONE))
        can_inject = Signal()
        m.d.comb += can_inject.eq((credits != 0) & (gap == 0))
        if ACC:
            with m.If(inject & ~inject_emit & summing_cmd):
                m.d.sync += gap.eq(ACC)
            with m.Elif(gap != 0):
                m.d.sync += gap.eq(gap - 1)
        need_b = (c.src0 == Src.TENSOR) | (c.src1 == Src.TENSOR)

        # Both outcomes of ``inject`` are summed beside it (one adder each, from the register
        # and the returned credits), and it only selects.
        ret = Signal(2)
        ret_m1 = Signal(signed(3))
        m.d.comb += [ret.eq(self.ret_fifo + self.ret_drop), ret_m1.eq(ret - 1)]
        m.d.sync += credits.eq(Mux(inject, credits + ret_m1, credits + ret))

        # The sub-beat counter steps with each sub-beat entering (or decoded, in PRO0/PRO1)
        # and returns to 0 after the last, which takes the input beat.
        last_sub = (sub == G - 1) if G > 1 else Const(1, 1)

        def if_last():
            return m.If(last_sub) if G > 1 else contextlib.nullcontext()

        def step_sub():
            if G > 1:
                m.d.sync += sub.eq(Mux(last_sub, 0, sub + 1))
        # With fewer units, the read-out waits until the last element's last sub-beat is in
        # its accumulator: it reaches the accumulators' output at least ``G - 1 + ACC`` cycles
        # after that element entered (``emit_wait`` is loaded then).
        emit_wait = Signal(range(G + ACC + 1))
        if G > 1:
            with m.If(inject & summing_cmd):
                m.d.sync += emit_wait.eq(G + ACC - 2)
            with m.Elif(emit_wait != 0):
                m.d.sync += emit_wait.eq(emit_wait - 1)
        # cmd.ready comes from ``idle``, a flip-flop beside the FSM's state that is 1 exactly
        # in IDLE: the controller's queue read enables and its completion logic follow it, so
        # no decode of the state precedes them. (Plain assignments, not set inside the FSM: a
        # process that only reads a never-changing state is not run at time 0 by Icarus in
        # SystemVerilog mode, which would leave them X.)
        idle = self.idle
        a_in_ready, b_in_ready = self.a_ready, self.b_ready
        a_valid, b_valid = self.a_valid, self.b_valid

        def prologue(take_lane, then_pro1):
            """PRO0/PRO1: one ``b`` beat (``G`` sub-beats) for the lane registers of an operand,
            then PRO1 if ``then_pro1``, else BODY."""
            m.d.comb += take_lane.eq(b_valid)
            if G == 1:
                m.d.comb += b_in_ready.eq(1)
            with m.If(b_valid):
                step_sub()
                with if_last():
                    with m.If(then_pro1):
                        m.next = "PRO1"
                    with m.Else():
                        m.next = "BODY"

        m.d.sync += self.acc_rst.eq(0)
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.cmd.valid):
                    m.d.sync += idle.eq(0)
                    p = self.cmd.payload
                    m.d.sync += [c.eq(p), remaining.eq(p.count), rem_zero.eq(p.count == 0)]
                    p_raw = ((p.fmt_a == Format.INT32) & (p.fmt_o == Format.INT32) &
                             (p.op0 == AluOp.BYPASS) & (p.op1 == AluOp.BYPASS) & ~p.lut)
                    m.d.sync += [self.raw.eq(p_raw),
                                 self.fmt_a.eq(Mux(p_raw, Format.FP32, p.fmt_a))]
                    m.d.sync += self.acc_rst.eq(p.acc_reset)
                    with m.If(p.src0 == Src.LANE):
                        m.next = "PRO0"
                    with m.Elif(p.src1 == Src.LANE):
                        m.next = "PRO1"
                    with m.Else():
                        m.next = "BODY"
            with m.State("PRO0"):
                prologue(self.take_lane0, c.src1 == Src.LANE)
            with m.State("PRO1"):
                prologue(self.take_lane1, Const(0, 1))
            with m.State("BODY"):
                def finish():
                    with m.If(c.emit_acc):
                        m.next = "EMIT"
                    with m.Else():
                        m.next = "DRAIN"

                def take():
                    b_ok = b_valid | ~need_b
                    if G == 1:
                        m.d.comb += [a_in_ready.eq(can_inject & b_ok),
                                     b_in_ready.eq(can_inject & a_valid & need_b)]
                    with m.If(can_inject & a_valid & b_ok):
                        m.d.comb += inject.eq(1)
                        m.d.sync += [remaining.eq(remaining - 1), rem_zero.eq(remaining == 1)]
                        if G > 1:
                            m.d.comb += inject_sub.eq(1)
                            step_sub()
                if G == 1:
                    with m.If(rem_zero):
                        finish()
                    with m.Else():
                        take()
                else:
                    # An element's sub-beats after its first enter unconditionally (the first
                    # took the credit); its input beats are taken with the last.
                    with m.If(sub != 0):
                        m.d.comb += inject_sub.eq(1)
                        step_sub()
                    with m.Elif(rem_zero):
                        finish()
                    with m.Else():
                        take()
            with m.State("EMIT"):
                with m.If(can_inject if G == 1 else can_inject & (emit_wait == 0)):
                    m.d.comb += [inject.eq(1), inject_emit.eq(1)]
                    if G > 1:
                        m.d.comb += inject_sub.eq(1)
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                with m.If(self.empty):
                    m.d.sync += idle.eq(1)
                    m.next = "IDLE"
        if G > 1:
            # The input beats are taken with their last sub-beat (BODY; PRO0/PRO1 decode the
            # prologue beat), as plain assignments outside the FSM like ``idle``'s, so that
            # Icarus evaluates them from time 0.
            in_body = fsm.ongoing("BODY")
            m.d.comb += [a_in_ready.eq(last_sub & in_body),
                         b_in_ready.eq(last_sub & (fsm.ongoing("PRO0") | fsm.ongoing("PRO1") |
                                                   in_body & need_b))]
        m.d.comb += self.cmd.ready.eq(idle)
        return m
