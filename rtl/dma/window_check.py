"""The DMA's window check: does a row of a record lie inside a permitted address window?"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["WindowLayout", "WindowCheck"]

#: One host-programmed address window (``DMA_WIN<i>_*`` registers): bytes ``[base, limit]``,
#: ``perm`` bit 0 read (loads), bit 1 write (stores).
WindowLayout = data.StructLayout({"base": 32, "limit": 32, "perm": 2})


class WindowCheck(wiring.Component):
    """Per window, whether the row starting at ``addr`` lies inside it with the permission.

    A row with first element address ``a`` covers the bytes ``[a + lo_off, a + hi_off]``
    (``lo_off = min(span, 0)``, ``hi_off = max(span, 0) + tail``, ``tail`` being ``esize - 1``,
    or ``union_tail`` with ``union``: the last of a union's rows starts ``union_tail -
    (esize - 1)`` bytes after the first), which must lie in
    ``[0, 2**32)`` and in the window ``[base, limit]``, that is ``base - lo_off <= a <= limit -
    hi_off`` (exactly: ``base >= 0`` and ``limit < 2**32`` make the first condition follow
    from the second). The two thresholds depend on the record and the windows, not on the
    row, so they are registered (with ``ok``: the window has the permission ``need`` and both
    thresholds lie in ``[0, 2**32)``, else no row can pass), and a row is compared with
    registers only: one 32-bit carry chain per compare, not an adder in front of it. A span
    outside ``[-2**32, 2**32)`` fails every row, so the thresholds are formed from the span's
    low 33 bits (34- and 36-bit carry chains, no wide test behind them) beside a registered
    "the span fits".

    Timing: ``limit - (esize - 1)`` and ``limit - union_tail`` are registered from ``esize``
    and ``union_tail``, then the thresholds from one of them (``union``) and ``span``, every
    cycle: ``esize`` and ``union_tail`` must be stable two cycles and ``span``, ``union``,
    ``need`` and the windows one cycle before the rows they check. So the union's extent is
    in registers before the check, and ``union`` only selects one of them. ``hit`` is registered every cycle from
    ``addr``: it is the verdict on the previous cycle's ``addr``.

    Parameters
    ----------
    windows : int
        The ``DMA``'s (``rtl/dma/dma.py``).

    Members
    -------
    windows : In(ArrayLayout(WindowLayout, windows))
    need : In(2)
        The permission the record needs (0b01 load, 0b10 store).
    esize : In(3)
        Element size in bytes (1, 2 or 4).
    span : In(signed(50))
        ``(n0 - 1) * ext_stride0``: the row's last element less its first, in bytes.
    union_tail : In(10)
        The bytes of a union after its first row's first byte, less the span.
    union : In(1)
        The row is a union (``union_tail`` instead of ``esize - 1``).
    addr : In(32)
        The row's first element address.
    hit : Out(windows)
        Per window, the previous cycle's row lies inside it.
    """

    def __init__(self, windows):
        self._windows = check_int("windows", windows, 1, 8)
        super().__init__({
            "windows": In(data.ArrayLayout(WindowLayout, windows)),
            "need": In(2), "esize": In(3), "span": In(signed(50)), "union_tail": In(10),
            "union": In(1), "addr": In(32),
            "hit": Out(windows),
        })

    def elaborate(self, platform):
        m = Module()
        span = self.span
        span33 = Signal(signed(33))
        span_fits = Signal()
        m.d.comb += span33.eq(span[:33])
        m.d.sync += span_fits.eq((span[32:] == 0) | (span[32:] == (1 << (len(span) - 32)) - 1))
        hits = []
        for w in range(self._windows):
            win = self.windows[w]
            win_adj = Signal(signed(34), name=f"win{w}_adj")    # limit - (esize - 1)
            win_adj_u = Signal(signed(34), name=f"win{w}_adj_u")  # limit - union_tail
            win_lo = Signal(32, name=f"win{w}_lo")              # base - lo_off, low bits
            win_hi = Signal(32, name=f"win{w}_hi")              # limit - hi_off, low bits
            win_ok = Signal(name=f"win{w}_ok")
            lo_full = Signal(34, name=f"win{w}_lo_full")        # exact if span_fits
            hi_full = Signal(signed(36), name=f"win{w}_hi_full")  # exact if span_fits
            # (The span's sign bit selects, not a 50-bit zero test: the same for a zero span.)
            m.d.comb += [lo_full.eq(win.base - Mux(span33 < 0, span33, 0)),
                         hi_full.eq(Mux(self.union, win_adj_u, win_adj) -
                                Mux(span33 < 0, 0, span33))]
            m.d.sync += [
                win_adj.eq(Cat(win.limit, Const(0, 1)).as_signed() - (self.esize - 1)),
                win_adj_u.eq(Cat(win.limit, Const(0, 1)).as_signed() - self.union_tail),
                win_lo.eq(lo_full[:32]), win_hi.eq(hi_full[:32]),
                win_ok.eq((win.perm & self.need).any() & ~lo_full[32] & ~hi_full[-1]),
            ]
            hits.append(span_fits & win_ok & (self.addr >= win_lo) & (self.addr <= win_hi))
        m.d.sync += self.hit.eq(Cat(*hits))
        return m
