"""The sequencer's call stack of macro-instruction return addresses."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["CallStack"]


class CallStack(wiring.Component):
    """``CALL_DEPTH`` return addresses of 32 bits, with the top one kept in a register.

    ``write`` stores ``value`` into the entry at ``depth``, above the top, where nothing reads
    it: the sequencer raises it in every cycle a CALL_PUSH is in X with the stack not full,
    held or not, from flip-flops alone, so that the 8 x 32 entries' clock enables are neither
    behind the stall nor behind the push's gate; a push that holds rewrites the same entry
    with the same value. A ``push`` (in a cycle with ``write``) loads the top copy ``ret``
    with ``value``; a ``pop`` loads it with the entry below the top; both move the pointers.
    The sequencer drives them from ``AdvanceControl``'s ``call_push`` / ``call_pop``, sums of
    products of registered flags apart from the stall cone. ``empty`` and ``full`` are
    flip-flops kept beside the depth, so an underflow or overflow trap compares nothing.
    ``clear`` (START) empties the stack and overrides the cycle's moves; the entries keep
    their values.

    Members
    -------
    write : In(1)
        The entry at ``depth`` takes ``value`` (only while not ``full``).
    push : In(1)
        A CALL's push (with ``write``): ``ret`` takes ``value``, the depth grows.
    pop : In(1)
        A RET's pop: ``ret`` takes the entry below the top (only while not ``empty``).
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
            "write": In(1), "push": In(1), "pop": In(1), "clear": In(1),
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
            m.d.sync += cstack[csp[:ib]].eq(self.value)
        with m.If(self.push):
            m.d.sync += [cret.eq(self.value), csp.eq(csp + 1), ctop.eq(csp), self.empty.eq(0),
                         self.full.eq(csp == n - 1)]
        with m.If(self.pop):
            m.d.sync += [cret.eq(cstack[(ctop - 1)[:ib]]),
                         csp.eq(csp - 1), ctop.eq(ctop - 1), self.empty.eq(csp == 1),
                         self.full.eq(0)]
        with m.If(self.clear):
            m.d.sync += [csp.eq(0), ctop.eq(-1), self.empty.eq(1), self.full.eq(0)]
        return m
