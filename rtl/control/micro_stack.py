"""The sequencer's micro-call stack: return addresses of CALLs within the microcode."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["MicroCallStack"]


class MicroCallStack(wiring.Component):
    """``UCALL_DEPTH`` control-store addresses; a micro-CALL pushes, a micro-RET pops, the
    macro instruction's END empties it.

    Every change happens on the sequencer's ``go`` (the micro-instruction leaves X): ``push``
    writes ``value`` above the top, ``pop`` drops the top, ``reset`` (END) empties the stack
    and wins over both; ``clear`` (START) empties it too and wins over everything. ``top`` is
    the top entry (a micro-RET's target) through a multiplexer of registers, the top index
    being a register kept beside the depth; ``empty`` and ``full`` are flip-flops kept
    beside it too, so an underflow or overflow trap compares nothing. Pushing a full or
    popping an empty stack is the caller's trap, not a change here that anything reads.

    Members
    -------
    push, pop, reset, clear : In(1)
    value : In(UADDR_BITS)
        The return address a push writes.
    top : Out(UADDR_BITS)
        The top entry.
    empty, full : Out(1)
    """

    def __init__(self):
        super().__init__({
            "push": In(1), "pop": In(1), "reset": In(1), "clear": In(1),
            "value": In(isa.UADDR_BITS), "top": Out(isa.UADDR_BITS),
            "empty": Out(1, init=1), "full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = isa.UCALL_DEPTH
        ustack = Array(Signal(isa.UADDR_BITS, name=f"ustack{i}") for i in range(n))
        usp = Signal(range(n + 1))
        utop = Signal(range(n), init=n - 1)
        m.d.comb += self.top.eq(ustack[utop])
        with m.If(self.push):
            m.d.sync += [ustack[usp].eq(self.value), usp.eq(usp + 1), utop.eq(usp),
                         self.empty.eq(0), self.full.eq(usp == n - 1)]
        with m.If(self.pop):
            m.d.sync += [usp.eq(usp - 1), utop.eq(utop - 1), self.empty.eq(usp == 1),
                         self.full.eq(0)]
        with m.If(self.reset | self.clear):
            m.d.sync += [usp.eq(0), utop.eq(-1), self.empty.eq(1), self.full.eq(0)]
        return m
