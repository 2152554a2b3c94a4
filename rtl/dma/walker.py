"""The DMA's address walker: the positions of a record's elements, rows or segments."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AddressWalker"]


class AddressWalker(wiring.Component):
    """Walks ``p < np``, ``i < ni``, ``j < nj`` (p outermost), ``addr = base + p*ps + i*si +
    j*sj`` modulo 2**32, and ``sidx = i*nj + j`` (SBUF word offset, restarts per partition).

    ``start`` loads the first position (it wins over a ``step`` in the same cycle); ``step``
    advances; ``done`` is set by a step at the last position. Latency: the position moves at
    the clock edge of a ``start`` or ``step``; a cycle without either holds it (a stalled user
    simply does not step). Counts must be at least 1 and must not change between ``start``
    and the last step.

    The position is kept as counts left (``j_left``: positions after this one in the row,
    and so on) with registered "this is the last" flags, updated a step ahead, so that
    neither a step nor ``last`` waits for a compare against the counts (no carry chain in
    front of the registers' clock enables). ``update`` (a start or a step that moves),
    ``next_addr`` and ``next_last_j`` are the values the registers take, for lookahead
    registers of the user.

    The registers are enabled in three groups, each by ``start`` or by a step gated with one
    term of flip-flops formed beside it (the row position moves on every step that is not the
    last, the row on a step at a row's end, the partition on a step at a partition's end), and
    their next values are selected by ``start`` and the "last" flags alone: a step reaches the
    clock enables through one gate, not a chain of the "last" conditions.

    Members
    -------
    start, step : In(1)
    base, ps, si, sj : In(32)
        First address and the partition, row and position strides (two's complement).
    np : In(8)
    ni, nj : In(16)
        Partitions, rows per partition, positions per row.
    addr : Out(32)
    p : Out(8)
        The position's partition index.
    sidx : Out(32)
    last_j : Out(1)
        The position is its row's last.
    last : Out(1)
        The position is the walk's last.
    done : Out(1)
        A step was taken at the last position.
    update : Out(1)
        The position registers change at this edge.
    next_addr : Out(32)
    next_last_j : Out(1)
        ``addr`` and ``last_j`` after this edge (when ``update``).
    """

    start: In(1)
    step: In(1)
    base: In(32)
    ps: In(32)
    si: In(32)
    sj: In(32)
    np: In(8)
    ni: In(16)
    nj: In(16)
    addr: Out(32)
    p: Out(8)
    sidx: Out(32)
    last_j: Out(1)
    last: Out(1)
    done: Out(1)
    update: Out(1)
    next_addr: Out(32)
    next_last_j: Out(1)

    def elaborate(self, platform):
        m = Module()
        pbase = Signal(32)
        ibase = Signal(32)
        j_left = Signal(16)
        i_left = Signal(16)
        p_left = Signal(8)
        last_i = Signal()
        last_p = Signal()
        m.d.comb += self.last.eq(self.last_j & last_i & last_p)
        # What a step moves, from flip-flops (beside the step, not behind it): the position
        # in the row (every step but the one at the last position, which sets ``done``), the
        # row (a step at a row's end, not the last row of the last partition), the partition
        # (a step at a partition's end, not the last).
        mv_j, mv_i, mv_p = Signal(), Signal(), Signal()
        en_j, en_i, en_p = Signal(), Signal(), Signal()
        m.d.comb += [
            mv_j.eq(~self.done & ~self.last),
            mv_i.eq(~self.done & self.last_j & ~(last_i & last_p)),
            mv_p.eq(~self.done & self.last_j & last_i & ~last_p),
            self.update.eq(self.start | (self.step & ~self.done)),
            en_j.eq(self.start | (self.step & mv_j)),
            en_i.eq(self.start | (self.step & mv_i)),
            en_p.eq(self.start | (self.step & mv_p)),
        ]
        # The values the groups take (``start``: the first position; otherwise the step's):
        # the next position in the row, else the first of the next row (this partition's
        # next row, else the next partition's first).
        row_base = Mux(~last_i, ibase + self.si, pbase + self.ps)   # the next row's address
        m.d.comb += [
            self.next_addr.eq(Mux(self.start, self.base,
                                  Mux(~self.last_j, self.addr + self.sj,
                                      Mux(mv_i, row_base, self.addr)))),
            self.next_last_j.eq(Mux(self.start | (self.last_j & mv_i), self.nj == 1,
                                    Mux(~self.last_j, j_left == 1, self.last_j))),
        ]
        with m.If(en_j):
            m.d.sync += [
                self.addr.eq(self.next_addr), self.last_j.eq(self.next_last_j),
                j_left.eq(Mux(self.start | self.last_j, self.nj - 1, j_left - 1)),
                self.sidx.eq(Mux(self.start | (self.last_j & last_i), 0, self.sidx + 1)),
            ]
        with m.If(en_i):
            m.d.sync += [
                ibase.eq(Mux(self.start, self.base, row_base)),
                i_left.eq(Mux(self.start | last_i, self.ni - 1, i_left - 1)),
                last_i.eq(Mux(self.start | last_i, self.ni == 1, i_left == 1)),
            ]
        with m.If(en_p):
            m.d.sync += [
                pbase.eq(Mux(self.start, self.base, pbase + self.ps)),
                p_left.eq(Mux(self.start, self.np - 1, p_left - 1)),
                last_p.eq(Mux(self.start, self.np == 1, p_left == 1)),
                self.p.eq(Mux(self.start, 0, self.p + 1)),
            ]
        with m.If(self.update):
            m.d.sync += self.done.eq(~self.start & self.last)
        return m
