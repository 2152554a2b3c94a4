"""The sequencer's semaphores: counters the engines' completions and the microcode move."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["SemaphoreBank"]

_ENGINES = ("dma", "tensor", "vector")


class SemaphoreBank(wiring.Component):
    """``NUM_SEMS`` semaphores of ``SEM_VALUE_BITS`` bits (wrapping), each incremented by the
    completions of the records that name it and by SEMINC, and written by SEMSET.

    Every cycle each semaphore takes its value plus the increments of the cycle: one per
    engine whose ``inc_<engine>`` has its bit (at most three) and one for a SEMINC registered
    the cycle before. A SEMINC (``inc`` with the one-hot ``sel``) is registered and enters the
    next cycle's sum as its carry in, so the semaphore shows it two cycles after ``inc``, and
    ``inc`` reaches 16 flip-flops, not the select of every semaphore bit. A SEMSET (``set``
    with ``sel``) marks the selected semaphore pending for the next cycle, in which its value
    is ``set_value`` (``now`` shows it) and the cycle's increments add to it. ``clear`` zeroes
    every semaphore, overriding the cycle's other changes (not a pending SEMSET's).

    Members
    -------
    clear : In(1)
    inc, set : In(1)
        A SEMINC or SEMSET of the semaphores of ``sel``.
    sel : In(NUM_SEMS)
        One-hot semaphore of ``inc`` and ``set``.
    set_value : In(SEM_VALUE_BITS)
        The value of a SEMSET, the cycle after ``set``.
    inc_dma, inc_tensor, inc_vector : In(NUM_SEMS)
        The semaphores an engine's completion increments this cycle (one-hot or zero).
    value : Out(ArrayLayout(SEM_VALUE_BITS, NUM_SEMS))
        The semaphore registers.
    now : Out(ArrayLayout(SEM_VALUE_BITS, NUM_SEMS))
        The semaphores as the architecture has them: ``value``, or ``set_value`` where a
        SEMSET is pending.
    """

    def __init__(self):
        n, bits = isa.NUM_SEMS, isa.SEM_VALUE_BITS
        members = {"clear": In(1), "inc": In(1), "set": In(1), "sel": In(n),
                   "set_value": In(bits),
                   "value": Out(data.ArrayLayout(bits, n)),
                   "now": Out(data.ArrayLayout(bits, n))}
        for e in _ENGINES:
            members[f"inc_{e}"] = In(n)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n, bits = isa.NUM_SEMS, isa.SEM_VALUE_BITS
        sems = [Signal(bits, name=f"sem{i}") for i in range(n)]
        sem_w = Signal(n)                 # sems[i] takes set_value
        sem_inc_q = Signal(n)
        m.d.comb += [self.value[i].eq(sems[i]) for i in range(n)]
        m.d.comb += [self.now[i].eq(Mux(sem_w[i], self.set_value, sems[i])) for i in range(n)]
        m.d.sync += [sem_inc_q.eq(Mux(self.inc, self.sel, 0)),
                     sem_w.eq(Mux(self.set, self.sel, 0))]
        for i in range(n):
            incs = [getattr(self, f"inc_{e}")[i] for e in _ENGINES]
            eng_total = Signal(2, name=f"sem{i}_eng_inc")
            m.d.comb += eng_total.eq(sum(x.as_unsigned() for x in incs))
            # now + eng_total + sem_inc_q[i], the last as the carry into the low bit
            ssum = Signal(bits + 1, name=f"sem{i}_sum")
            m.d.comb += ssum.eq(Cat(Const(1, 1), self.now[i]) + Cat(sem_inc_q[i], eng_total))
            m.d.sync += sems[i].eq(ssum[1:])
        with m.If(self.clear):
            m.d.sync += [s.eq(0) for s in sems]
        return m
