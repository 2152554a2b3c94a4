"""The sequencer's performance counters."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PerfCounters", "ENGINE_COUNTERS"]

#: The counters kept per engine, in the order of the debug port (``DBG["busy"] + 3 * e + j``
#: for the first three, ``DBG["blocked"] + e`` for the last).
ENGINE_COUNTERS = ("busy", "semwait", "idle", "blocked")


class PerfCounters(wiring.Component):
    """Cycle, retirement and per-engine counters of a running program (32 bits, wrapping).

    While ``running``, every cycle counts in ``cycles`` and, per engine ``e``, in exactly one of
    ``busy`` (a record of that engine outstanding), ``semwait`` (none, and the sequencer
    waits for a semaphore) or ``idle``; ``blocked`` counts the cycles an EMIT to the engine
    waited for queue space. A retirement (``retire``, one per macro instruction) is registered
    and added a cycle later, so the sequencer's error cone does not reach the 32-bit counter;
    ``retired`` is the count with the pending one, as the architecture has it. ``clear``
    (START) zeroes every counter, overriding the cycle's counts.

    Members
    -------
    clear : In(1)
    running : In(1)
    retire : In(1)
    outstanding, blocked : In(3)
        One bit per engine (DMA, TENSOR, VECTOR).
    semwait : In(1)
        The sequencer waits for a semaphore this cycle.
    cycles, retired : Out(32)
    <engine>_<counter> : Out(32)
        For engine in ``dma``, ``tensor``, ``vector`` and counter in :data:`ENGINE_COUNTERS`.
    """

    _ENGINES = ("dma", "tensor", "vector")

    def __init__(self):
        members = {"clear": In(1), "running": In(1), "retire": In(1), "outstanding": In(3),
                   "blocked": In(3), "semwait": In(1), "cycles": Out(32), "retired": Out(32)}
        for e in self._ENGINES:
            for n in ENGINE_COUNTERS:
                members[f"{e}_{n}"] = Out(32)
        super().__init__(members)

    def counters(self, engine):
        """The four counters of engine number ``engine``, in :data:`ENGINE_COUNTERS` order."""
        return [getattr(self, f"{self._ENGINES[engine]}_{n}") for n in ENGINE_COUNTERS]

    def elaborate(self, platform):
        m = Module()
        cycles = Signal(32)
        m.d.comb += self.cycles.eq(cycles)
        regs = []
        for e in range(len(self._ENGINES)):
            busy_c, semw_c, idle_c, blk_c = (Signal(32, name=f"perf_{self._ENGINES[e]}_{n}")
                                             for n in ENGINE_COUNTERS)
            regs += [busy_c, semw_c, idle_c, blk_c]
            m.d.comb += [o.eq(r) for o, r in zip(self.counters(e),
                                                 (busy_c, semw_c, idle_c, blk_c))]
            with m.If(self.running):
                with m.If(self.outstanding[e]):
                    m.d.sync += busy_c.eq(busy_c + 1)
                with m.Elif(self.semwait):
                    m.d.sync += semw_c.eq(semw_c + 1)
                with m.Else():
                    m.d.sync += idle_c.eq(idle_c + 1)
                with m.If(self.blocked[e]):
                    m.d.sync += blk_c.eq(blk_c + 1)
        with m.If(self.running):
            m.d.sync += cycles.eq(cycles + 1)
        retired, retire_q = Signal(32), Signal()
        m.d.sync += [retire_q.eq(self.retire), retired.eq(self.retired)]
        m.d.comb += self.retired.eq(retired + retire_q)
        with m.If(self.clear):
            m.d.sync += [retired.eq(0), retire_q.eq(0), cycles.eq(0)]
            m.d.sync += [r.eq(0) for r in regs]
        return m
