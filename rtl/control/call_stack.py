"""The sequencer's call stack of macro-instruction return addresses."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["CallStack"]


class CallStack(wiring.Component):
    """``CALL_DEPTH`` return addresses of 32 bits, with the top one kept in a register.

    The entries and the top copy ``ret`` change on ``write`` / ``read`` (the sequencer's
    ``go``: the micro-instruction leaves X or holds), the pointers on ``push`` / ``pop`` (its
    ``adv_pre``): a push that holds rewrites the same entry with the same value, so the record
    check and the stall cone reach only the pointers' enables. ``empty`` and ``full`` are
    flip-flops kept beside the depth, so an underflow or overflow trap compares nothing.
    ``clear`` (START) empties the stack and overrides the cycle's moves; the entries keep
    their values.

    Members
    -------
    write : In(1)
        A CALL's push goes: the entry at ``depth`` and ``ret`` take ``value``.
    read : In(1)
        A RET's pop goes: ``ret`` takes the entry below the top.
    push, pop : In(1)
        Move the pointers (with ``write`` / ``read`` of the same micro-instruction).
    clear : In(1)
    value : In(32)
        The return address a CALL pushes.
    ret : Out(32)
        The top entry (a RET's return address).
    depth : Out(range(CALL_DEPTH + 1))
    empty, full : Out(1)
    """

    def __init__(self):
        super().__init__({
            "write": In(1), "read": In(1), "push": In(1), "pop": In(1), "clear": In(1),
            "value": In(32), "ret": Out(32), "depth": Out(range(isa.CALL_DEPTH + 1)),
            "empty": Out(1, init=1), "full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = isa.CALL_DEPTH
        cstack = Array(Signal(32, name=f"call{i}") for i in range(n))
        csp, cret = self.depth, self.ret
        ctop = Signal(range(n), init=n - 1)
        ib = (n - 1).bit_length()
        with m.If(self.write):
            m.d.sync += [cstack[csp[:ib]].eq(self.value), cret.eq(self.value)]
        with m.If(self.read):
            m.d.sync += cret.eq(cstack[(ctop - 1)[:ib]])
        with m.If(self.push):
            m.d.sync += [csp.eq(csp + 1), ctop.eq(csp), self.empty.eq(0),
                         self.full.eq(csp == n - 1)]
        with m.If(self.pop):
            m.d.sync += [csp.eq(csp - 1), ctop.eq(ctop - 1), self.empty.eq(csp == 1),
                         self.full.eq(0)]
        with m.If(self.clear):
            m.d.sync += [csp.eq(0), ctop.eq(-1), self.empty.eq(1), self.full.eq(0)]
        return m
