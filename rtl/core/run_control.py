"""Program control of the core: START, the end of a program, the abort, the error reports, the
error status and the watchdog."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.errors import ERROR_CODE_BITS, SEQUENCER_ERROR_MAP, ErrorCode
from sim.memmap import CTRL_ABORT, CTRL_CLEAR, CTRL_CLEAR_COUNTERS, CTRL_START

from .status import ErrorReport, ErrorStatus
from .watchdog import Watchdog

__all__ = ["RunControl"]


class RunControl(wiring.Component):
    """Starts a program on ``CTRL.start``, ends it when the sequencer and the engines are done,
    and aborts it on ``CTRL.abort``, a watchdog timeout or an error.

    Four error sources, in priority order: the sequencer's traps (``seq_err_status``, mapped
    by ``sim.errors.SEQUENCER_ERROR_MAP``: the lowest set ``ErrorBit`` decides), the DMA, the
    watchdog, the vector engine's LUT index error. A source's report is its rising edge (the
    sequencer's only while running). The reports reach ``ErrorStatus`` through a register:
    an error is latched, and counted, one cycle after its report; the abort reacts to the
    report itself.

    Members
    -------
    ctrl : In(32), ctrl_we : In(1)
        The ``CTRL`` register's written value and its write strobe (bits ``CTRL_*``).
    irq_enable : In(2), watchdog_limit : In(32)
        The ``IRQ_ENABLE`` and ``WATCHDOG_LIMIT`` registers.
    seq_error : In(1), seq_err_status : In(16), seq_err_pc : In(32)
        The sequencer's error flag, its ``ErrorBit`` bits and the faulting PC.
    seq_done, seq_busy : In(1)
        The sequencer has reached the end of the program; it is executing.
    dma_error : In(ErrorReport)
        The DMA's error pulse with its code, address and details.
    lut_error : In(1)
        The vector engine's LUT error flag (reported on its rising edge).
    engines_idle, dma_busy : In(1)
        Every engine has drained; the DMA has bursts in flight.
    start : Out(1)
        ``CTRL.start`` written while no program runs: the program starts (combinational).
    running : Out(1)
        From the cycle after ``start`` until the cycle after the program ends.
    aborting : Out(1)
        From the cycle after an abort request until the end of the program: the engines are
        held in reset, the DMA drains its bursts (the program ends when ``dma_busy`` falls).
    aborting_next : Out(1)
        ``aborting``'s next value (combinational), for a copy in another flip-flop.
    clear_counters : Out(1)
        ``CTRL.clear_counters`` written (combinational).
    status, err_code, err_addr, err_info, err_count : Out
        The ``STATUS``, ``ERR_*`` register values (``ErrorStatus``).
    irq : Out(1)
        The interrupt line (``ErrorStatus.irq``).

    A program ends (DONE) when the sequencer is done, not busy and the engines are idle, or
    when an abort has drained the DMA; never in the cycle of its own ``start``. Reset: no
    program runs.
    """

    def __init__(self):
        super().__init__({
            "ctrl": In(32), "ctrl_we": In(1), "irq_enable": In(2), "watchdog_limit": In(32),
            "seq_error": In(1), "seq_err_status": In(16), "seq_err_pc": In(32),
            "seq_done": In(1), "seq_busy": In(1),
            "dma_error": In(ErrorReport), "lut_error": In(1),
            "engines_idle": In(1), "dma_busy": In(1),
            "start": Out(1), "running": Out(1), "aborting": Out(1), "aborting_next": Out(1),
            "clear_counters": Out(1),
            "status": Out(32), "err_code": Out(ERROR_CODE_BITS), "err_addr": Out(32),
            "err_info": Out(32), "err_count": Out(32), "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        status = m.submodules.status = ErrorStatus(sources=4)
        wd = m.submodules.watchdog = Watchdog(32)
        running, start, aborting = self.running, self.start, self.aborting
        finish = Signal()
        ctrl, ctrl_we = self.ctrl, self.ctrl_we
        clear = Signal()
        m.d.comb += [
            start.eq(ctrl_we & (ctrl & CTRL_START).any() & ~running),
            clear.eq(ctrl_we & (ctrl & CTRL_CLEAR).any()),
            self.clear_counters.eq(ctrl_we & (ctrl & CTRL_CLEAR_COUNTERS).any()),
        ]

        # Reports: the rising edges of the sequencer's and the LUT's error flags.
        seq_err_prev = Signal()
        lut_err_prev = Signal()
        m.d.sync += [seq_err_prev.eq(self.seq_error), lut_err_prev.eq(self.lut_error)]
        seq_code = Signal(4)
        es = self.seq_err_status
        m.d.comb += seq_code.eq(0)
        for bit in reversed(isa.ErrorBit):
            with m.If(es[int(bit)]):
                m.d.comb += seq_code.eq(SEQUENCER_ERROR_MAP[bit.name])
        # (the register: the status block's count and first-error selection start at
        # flip-flops, not behind the sources' decodes such as err_status -> code)
        rep = Signal(data.ArrayLayout(ErrorReport, 4))
        m.d.sync += status.report.eq(rep)
        m.d.comb += [
            rep[0].valid.eq(self.seq_error & ~seq_err_prev & running),
            rep[0].code.eq(seq_code), rep[0].addr.eq(self.seq_err_pc), rep[0].info.eq(es),
            rep[1].eq(self.dma_error),
            rep[2].valid.eq(wd.timeout), rep[2].code.eq(ErrorCode.WATCHDOG),
            rep[2].addr.eq(wd.count), rep[2].info.eq(self.watchdog_limit),
            rep[3].valid.eq(self.lut_error & ~lut_err_prev), rep[3].code.eq(ErrorCode.LUT_INDEX),
        ]

        abort_req = Signal()
        m.d.comb += abort_req.eq(running & ~aborting & (
            (ctrl_we & (ctrl & CTRL_ABORT).any()) | wd.timeout | status.error |
            rep[0].valid | rep[1].valid | rep[3].valid))
        with m.If(start):
            m.d.sync += running.eq(1)
        m.d.comb += self.aborting_next.eq(aborting | abort_req)
        with m.If(running & ~start & ((~aborting & self.seq_done & ~self.seq_busy &
                                       self.engines_idle) | (aborting & ~self.dma_busy))):
            m.d.comb += [finish.eq(1), self.aborting_next.eq(0)]
            m.d.sync += running.eq(0)
        m.d.sync += aborting.eq(self.aborting_next)

        m.d.comb += [
            status.done.eq(finish),
            status.start.eq(start),
            status.clear.eq(clear),
            status.busy.eq(running),
            status.irq_enable.eq(self.irq_enable),
            wd.limit.eq(self.watchdog_limit),
            wd.start.eq(start),
            wd.running.eq(running & ~aborting),
            wd.clear.eq(clear),
            self.status.eq(status.status),
            self.err_code.eq(status.code),
            self.err_addr.eq(status.addr),
            self.err_info.eq(status.info),
            self.err_count.eq(status.count),
            self.irq.eq(status.irq),
        ]
        return m
