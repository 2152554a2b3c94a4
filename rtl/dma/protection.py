"""The DMA's protection check: every row of a record against the address windows."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int, check_pow2

from .layouts import DmaRecord
from .walker import AddressWalker
from .window_check import WindowCheck, WindowLayout

__all__ = ["ProtectionCheck"]


class ProtectionCheck(wiring.Component):
    """Walks a record's rows ``(p, i)`` and registers, for one row per cycle, whether it lies
    inside a window with the permission the record needs (``WindowCheck``).

    Across partitions (``ilv``) with ``row_span >= 0`` the rows of one ``i`` (one per
    partition, each an element after the last: ``union_tail`` bytes from the first row's
    first byte to the last row's last, less the span) are first checked as one range
    (``union``):
    if every union lies in a window so does every row, and the verdicts come after ``n1``
    rows instead of ``part_count * n1``. ``retry`` (a union failed) checks the rows one by one
    (``union`` 0 until the next ``setup``), so the verdict and the failing row are those of
    the row check.

    Timing (the DMA's states): the row walker is held at the first row from ``take`` to
    ``span`` (``hold``, a flip-flop) and steps every cycle it is not held, so no state decode
    is in front of its clock enables (a step past the last row does nothing); ``retry`` holds
    it again until the next ``span``. The thresholds of ``WindowCheck`` follow ``esize``,
    ``union_tail`` (both from ``sum`` on), ``row_span``, ``union`` (from ``span`` on) and
    ``windows`` one to two cycles late: all are the record's in ``check`` (``windows`` are
    static while the DMA is busy), and after a ``retry`` ``union`` is 0 in ``span``. In every ``check`` cycle the walker's row
    is compared and the row's first address and "last row" flag are registered with
    ``row_v`` (cleared in ``setup`` and by ``retry``); the verdict ``row_ok`` on that row is
    valid the cycle after, with ``row_v``, from registers and a few gates.

    Parameters
    ----------
    windows, data_width : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    rec : In(DmaRecord)
    windows : In(ArrayLayout(WindowLayout, windows))
    esize : In(3)
    row_span : In(signed(50))
        ``(n0 - 1) * ext_stride0``.
    union_tail : In(10)
        ``part_count * esize - 1`` (``RecordChecks.part_tail``).
    ilv : In(1)
        The record moves across partitions.
    idle, take, setup, span, check, retry : In(1)
        The DMA's state strobes (``take``: a record is taken in IDLE).
    union : Out(1)
        The rows of one ``i`` are checked as one range.
    row_v : Out(1)
        ``row_ok``, ``row_addr`` and ``row_last`` are a row's.
    row_ok : Out(1)
    row_addr : Out(32)
        The row's first element address.
    row_last : Out(1)
        The row is the record's last.
    """

    def __init__(self, *, windows, data_width=32):
        self._windows = check_int("windows", windows, 1, 8)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        super().__init__({
            "rec": In(DmaRecord), "windows": In(data.ArrayLayout(WindowLayout, windows)),
            "esize": In(3), "row_span": In(signed(50)),
            "union_tail": In(10), "ilv": In(1),
            "idle": In(1), "take": In(1), "setup": In(1), "span": In(1), "check": In(1),
            "retry": In(1),
            "union": Out(1), "row_v": Out(1), "row_ok": Out(1), "row_addr": Out(32),
            "row_last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.rec
        m.submodules.rows = chk = AddressWalker()
        m.submodules.win_check = wchk = WindowCheck(self._windows)
        hold = Signal()
        union_off = Signal()
        m.d.comb += self.union.eq(self.ilv & ~self.row_span[-1] & ~union_off)
        m.d.comb += [
            chk.base.eq(c.ext_addr), chk.ps.eq(c.ext_part_stride), chk.si.eq(c.ext_stride1),
            chk.ni.eq(c.n1), chk.np.eq(Mux(self.union, 1, c.part_count)),
            chk.nj.eq(1), chk.sj.eq(0), chk.start.eq(hold), chk.step.eq(1),
            wchk.windows.eq(self.windows), wchk.need.eq(Mux(c.store, 0b10, 0b01)),
            wchk.esize.eq(self.esize), wchk.addr.eq(chk.addr), wchk.span.eq(self.row_span),
            wchk.union_tail.eq(self.union_tail), wchk.union.eq(self.union),
            self.row_ok.eq(wchk.hit.any()),
        ]
        with m.If(self.idle):
            m.d.sync += hold.eq(self.take)
        with m.If(self.setup):
            m.d.sync += [self.row_v.eq(0), union_off.eq(0)]
        with m.If(self.span):
            m.d.sync += hold.eq(0)
        with m.If(self.check):
            m.d.sync += [self.row_addr.eq(chk.addr), self.row_last.eq(chk.last),
                         self.row_v.eq(1)]
        with m.If(self.retry):
            m.d.sync += [union_off.eq(1), hold.eq(1), self.row_v.eq(0)]
        return m
