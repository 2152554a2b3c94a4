"""Error status block: sticky error code / address / info, DONE flag and the interrupt line.

The codes are ``sim.errors.ErrorCode``; the register view (``STATUS``, ``ERR_CODE``,
``ERR_ADDR``, ``ERR_INFO``, ``ERR_COUNT``) is ``sim/memmap.py``'s.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int
from sim.errors import ERROR_CODE_BITS
from sim.memmap import STATUS_BUSY, STATUS_DONE, STATUS_ERROR, STATUS_IRQ, IRQ_DONE, IRQ_ERROR

__all__ = ["ErrorReport", "ErrorStatus"]

#: What an error source drives: ``valid`` for one cycle with the code and its details.
ErrorReport = data.StructLayout({
    "valid": 1, "code": ERROR_CODE_BITS, "addr": 32, "info": 32,
})


class ErrorStatus(wiring.Component):
    """Latches the first error until the host clears it, and drives the interrupt.

    Parameters
    ----------
    sources : int
        Number of error sources (1 to 16): sequencer, DMA, watchdog, vector engine...

    Members
    -------
    report : In(ArrayLayout(ErrorReport, sources))
        Each source pulses ``valid`` with a non-zero ``code``. When several report in the same
        cycle, the lowest index is latched. A report while an error is latched is counted in
        ``count`` but not latched (the first error wins). A report with code 0 is ignored.
    done : In(1)
        One-cycle pulse: the program finished (with or without error): sets ``done_flag``.
    start : In(1)
        One-cycle pulse: a program starts: clears ``done_flag`` only (errors stay latched
        until ``clear``; the core should not start while ``error`` is high).
    clear : In(1)
        Host ``CTRL.clear``: clears ``done_flag``, ``error``, ``code``, ``addr``, ``info``,
        ``count``. A report in the same cycle is latched after the clear (not lost).
    busy : In(1)
        Only reflected in ``status``.
    irq_enable : In(2)
        Bit 0: interrupt on ``done_flag``, bit 1: on ``error`` (``IRQ_ENABLE`` register).
    error : Out(1)
        An error is latched (the core stops issuing work while it is high).
    code : Out(ERROR_CODE_BITS)
    addr : Out(32)
    info : Out(32)
    count : Out(32)
        Reports since the last clear (saturating).
    done_flag : Out(1)
    irq : Out(1)
        Level: ``done_flag & irq_enable[0] | error & irq_enable[1]``, registered (rises one
        cycle after the flag); falls when the host clears the flags or the enables.
    status : Out(32)
        The ``STATUS`` register word.

    Reset: everything 0.
    """

    def __init__(self, sources=4):
        check_int("sources", sources, 1, 16)
        self._sources = sources
        super().__init__({
            "report": In(data.ArrayLayout(ErrorReport, sources)),
            "done": In(1), "start": In(1), "clear": In(1), "busy": In(1),
            "irq_enable": In(2),
            "error": Out(1), "code": Out(ERROR_CODE_BITS), "addr": Out(32), "info": Out(32),
            "count": Out(32), "done_flag": Out(1), "irq": Out(1), "status": Out(32),
        })

    sources = property(lambda self: self._sources)

    def elaborate(self, platform):
        m = Module()
        n = self._sources
        valid = [self.report[k].valid & (self.report[k].code != 0) for k in range(n)]
        nvalid = Signal(range(n + 1))
        m.d.comb += nvalid.eq(sum(valid))

        with m.If(self.clear):
            m.d.sync += [self.error.eq(0), self.code.eq(0), self.addr.eq(0),
                         self.info.eq(0), self.count.eq(0), self.done_flag.eq(0)]
        with m.If(self.start):
            m.d.sync += self.done_flag.eq(0)
        with m.If(self.done):
            m.d.sync += self.done_flag.eq(1)
        # Count (saturating); after a clear in the same cycle the count restarts from 0. The
        # sums ``count + j`` (saturated) are formed from the register alone and the reports
        # only select one, so that they are not in front of an adder.
        # (``keep``: yosys would otherwise share the adders behind the select again.)
        plus = [self.count]
        for j in range(1, n + 1):
            total = Signal(33, name=f"count_plus{j}")
            sat = Signal(32, name=f"count_sat{j}", attrs={"keep": 1})
            m.d.comb += [total.eq(self.count + j), sat.eq(total[32].replicate(32) | total[:32])]
            plus.append(sat)
        with m.If(nvalid != 0):
            with m.If(self.clear):
                m.d.sync += self.count.eq(nvalid)
            with m.Else():
                m.d.sync += self.count.eq(Array(plus)[nvalid])
        # Latch the lowest-index report when nothing is latched (or being cleared): an AND-OR
        # of the reports under one-hot selects instead of a chain of multiplexers.
        free = ~self.error | self.clear
        first = [Signal(name=f"first{k}") for k in range(n)]
        m.d.comb += [first[k].eq(valid[k] & ~Cat(*valid[:k]).any()) for k in range(n)]
        with m.If(free & Cat(*valid).any()):
            m.d.sync += self.error.eq(1)
            for name in ("code", "addr", "info"):
                picked = 0
                for k in range(n):
                    picked = picked | Mux(first[k], getattr(self.report[k], name), 0)
                m.d.sync += getattr(self, name).eq(picked)

        m.d.sync += self.irq.eq((self.done_flag & self.irq_enable[0]) |
                                (self.error & self.irq_enable[1]))
        assert (STATUS_BUSY, STATUS_DONE, STATUS_ERROR, STATUS_IRQ) == (1, 2, 4, 8)
        assert (IRQ_DONE, IRQ_ERROR) == (1, 2)
        m.d.comb += self.status.eq(Cat(self.busy, self.done_flag, self.error, self.irq))
        return m
