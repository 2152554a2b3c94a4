"""The DMA's error report: the code, address and information of a record's first error."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_pow2
from sim.errors import ERROR_CODE_BITS, ErrorCode

__all__ = ["ErrorReport"]


class ErrorReport(wiring.Component):
    """Registers an error's code, address and information when ``report`` is raised.

    The source is selected by flags that are registers of the engine, so the error registers
    wait only for ``report``, not for a priority chain of the conditions: ``load`` (an R
    response: ``DMA_AXI_READ`` at the failing beat's address, ``RRESP``), ``st`` (a B
    response: ``DMA_AXI_WRITE`` at the burst's address, ``BRESP``), ``row_v`` (a window
    verdict: ``DMA_WINDOW`` at the row's first element, the record's ``store`` bit),
    ``misaligned`` (``DMA_ALIGN`` at ``ext_addr``), else ``SBUF_RANGE`` (at ``sbuf_addr``,
    ``part_start + part_count``). Only one source can report at a time (the engine's states
    keep them apart). ``err_valid`` is a one-cycle pulse the cycle after ``report``; the code,
    address and information hold until the next report.

    A check error found while an earlier record is still moving data is registered by
    ``hold`` (``row_v``, ``misaligned`` or else ``SBUF_RANGE``, as above) and reported by
    ``release`` (with ``report``) once that record is done, so that errors and ``done``
    pulses come in the order of the records.

    Parameters
    ----------
    data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``): a beat's bytes, for the R address.

    Members
    -------
    report, load, st, row_v, misaligned : In(1)
    hold, release : In(1)
    r_burst : In(32)
        The address of the burst being read.
    r_beat : In(8)
        The beat's index in it.
    rresp, bresp : In(2)
    b_addr, row_addr, ext_addr : In(32)
    store : In(1)
    sbuf_addr : In(16)
    part_end : In(9)
    err_valid : Out(1)
    err_code : Out(ERROR_CODE_BITS)
    err_addr : Out(32)
    err_info : Out(32)
    """

    def __init__(self, *, data_width=32):
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        super().__init__({
            "report": In(1), "hold": In(1), "release": In(1), "load": In(1), "st": In(1),
            "row_v": In(1),
            "misaligned": In(1), "r_burst": In(32), "r_beat": In(8), "rresp": In(2),
            "bresp": In(2), "b_addr": In(32), "row_addr": In(32), "ext_addr": In(32),
            "store": In(1), "sbuf_addr": In(16), "part_end": In(9),
            "err_valid": Out(1), "err_code": Out(ERROR_CODE_BITS), "err_addr": Out(32),
            "err_info": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        bsh = (self._data_width // 8 - 1).bit_length()
        m.d.sync += self.err_valid.eq(0)
        # A check error's code, address and information (the sources of ``hold``).
        chk_code = Signal(ERROR_CODE_BITS)
        chk_addr = Signal(32)
        chk_info = Signal(32)
        with m.If(self.row_v):
            m.d.comb += [chk_code.eq(ErrorCode.DMA_WINDOW), chk_addr.eq(self.row_addr),
                         chk_info.eq(self.store)]
        with m.Elif(self.misaligned):
            m.d.comb += [chk_code.eq(ErrorCode.DMA_ALIGN), chk_addr.eq(self.ext_addr),
                         chk_info.eq(0)]
        with m.Else():
            m.d.comb += [chk_code.eq(ErrorCode.SBUF_RANGE), chk_addr.eq(self.sbuf_addr),
                         chk_info.eq(self.part_end)]
        held_code = Signal(ERROR_CODE_BITS)
        held_addr = Signal(32)
        held_info = Signal(32)
        with m.If(self.hold):
            m.d.sync += [held_code.eq(chk_code), held_addr.eq(chk_addr),
                         held_info.eq(chk_info)]
        with m.If(self.report):
            m.d.sync += self.err_valid.eq(1)
            with m.If(self.release):
                m.d.sync += [self.err_code.eq(held_code), self.err_addr.eq(held_addr),
                             self.err_info.eq(held_info)]
            with m.Elif(self.load):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_AXI_READ),
                             self.err_addr.eq(self.r_burst + (self.r_beat << bsh)),
                             self.err_info.eq(self.rresp)]
            with m.Elif(self.st):
                m.d.sync += [self.err_code.eq(ErrorCode.DMA_AXI_WRITE),
                             self.err_addr.eq(self.b_addr), self.err_info.eq(self.bresp)]
            with m.Else():
                m.d.sync += [self.err_code.eq(chk_code), self.err_addr.eq(chk_addr),
                             self.err_info.eq(chk_info)]
        return m
