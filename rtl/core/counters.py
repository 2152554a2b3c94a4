"""The core's performance counters (``PERF_*`` registers, ``docs/memory_map.md``)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.control.sequencer import DBG

__all__ = ["CoreCounters", "DEBUG_SAMPLES"]

#: The sequencer debug-port addresses sampled in turn, one per cycle: instructions retired
#: and the three semaphore-wait counters.
DEBUG_SAMPLES = (DBG["retired"], DBG["semwait"] + 0, DBG["semwait"] + 3, DBG["semwait"] + 6)


class CoreCounters(wiring.Component):
    """Cycles, per-engine busy cycles, instructions retired and semaphore-wait cycles of the
    program that runs.

    One lifetime for every counter: each restarts at ``start`` and ``clear`` zeroes it, so
    after a program each holds that program's figure. The cycle and busy counters count the
    cycles with ``running`` high (a busy counter those with its engine's flag high too).
    The sequencer's own counters are read through its debug port, one address of
    :data:`DEBUG_SAMPLES` per cycle in turn (``dbg_addr`` advances every cycle from reset);
    since they restart at START, ``clear`` subtracts a snapshot taken then.

    Members
    -------
    start, clear, running : In(1)
        A program starts; ``CTRL.clear_counters``; a program runs.
    tensor_busy, vector_busy, dma_busy : In(1)
        The engines' activity.
    dbg_addr : Out(8), dbg_data : In(32)
        The sequencer's debug port (combinational read).
    cycles : Out(64)
    tensor_cycles, vector_cycles, dma_cycles : Out(32)
        Registered counts (a count includes the cycle before it is read).
    instret, sem_wait : Out(32)
        Instructions retired, and the sum of the semaphore-wait counters, since ``start``
        or ``clear``: two registers behind the samples (up to 5 cycles behind the sequencer),
        so that neither an adder nor a subtractor is in front of the register block's read
        multiplexer.
    seq_wait : Out(1)
        A semaphore-wait counter moved between its last two samples (4 cycles apart).

    Reset: every count 0.
    """

    def __init__(self):
        super().__init__({
            "start": In(1), "clear": In(1), "running": In(1),
            "tensor_busy": In(1), "vector_busy": In(1), "dma_busy": In(1),
            "dbg_addr": Out(8), "dbg_data": In(32),
            "cycles": Out(64), "tensor_cycles": Out(32), "vector_cycles": Out(32),
            "dma_cycles": Out(32), "instret": Out(32), "sem_wait": Out(32),
            "seq_wait": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        busy = ((self.tensor_busy, self.tensor_cycles), (self.vector_busy, self.vector_cycles),
                (self.dma_busy, self.dma_cycles))
        with m.If(self.start | self.clear):
            m.d.sync += self.cycles.eq(0)
            m.d.sync += [count.eq(0) for _, count in busy]
        with m.Elif(self.running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            for flag, count in busy:
                with m.If(flag):
                    m.d.sync += count.eq(count + 1)

        dsel = Signal(2)
        m.d.sync += dsel.eq(dsel + 1)
        dvals = [Signal(32, name=f"dbg_val{i}") for i in range(len(DEBUG_SAMPLES))]
        with m.Switch(dsel):
            for i, a in enumerate(DEBUG_SAMPLES):
                with m.Case(i):
                    m.d.comb += self.dbg_addr.eq(a)
                    m.d.sync += dvals[i].eq(self.dbg_data)
                    if i:
                        m.d.sync += self.seq_wait.eq(self.dbg_data != dvals[i])
        sem_wait = Signal(32)
        m.d.sync += sem_wait.eq(dvals[1] + dvals[2] + dvals[3])
        instret_base, sem_wait_base = Signal(32), Signal(32)
        with m.If(self.start):
            m.d.sync += [instret_base.eq(0), sem_wait_base.eq(0)]
        with m.Elif(self.clear):
            m.d.sync += [instret_base.eq(dvals[0]), sem_wait_base.eq(sem_wait)]
        m.d.sync += [self.instret.eq(dvals[0] - instret_base),
                     self.sem_wait.eq(sem_wait - sem_wait_base)]
        return m
