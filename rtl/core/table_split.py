"""Operand ``a``'s words to the vector engine or, for a TABLE command, to its configuration
port."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.vector.lut import CFG_LAYOUT
from sim.config import check_int

__all__ = ["TableSplit"]


class TableSplit(wiring.Component):
    """Routes the words of the vector controller's operand-``a`` streamer: an engine operand
    beat goes to ``a``; a TABLE word (``i.p.table``) to ``cfg``. Words of an unpaired TABLE
    (``i.p.pair`` 0) alternate address and data (lane 0): an address word is held, the data
    word that follows is offered as one write. A beat of a paired TABLE (``i.p.pair`` 1) is
    one write: address lane 0, data lane 1.

    ``cfg.valid`` is a flip-flop (``next_valid``/``next_table``/``next_pair``, the streamer's
    lookahead, and the phase give it a cycle early), and ``i.ready`` a multiplexer of that
    flip-flop and the two readys: no decode of the streamer's output precedes ``cfg.valid``,
    and ``cfg.ready`` and ``a.ready`` reach only the D inputs of flip-flops behind the
    streamer. The write's address and data are multiplexers selected by a flip-flop
    (``pair_r``, loaded from ``next_pair``). An unpaired address word is taken at once
    (``i.ready`` is 1 for it); a data word, a paired beat and an engine beat wait for their
    port. Where no word is offered ``i.ready`` may be 1.

    Parameters
    ----------
    lanes : int
        Vector lanes, 1 to 1024.

    Members
    -------
    i : In(stream.Signature({data: Array(32, lanes), last: 1, table: 1, pair: 1}))
        The streamer's words; ``last`` on a request's final word; ``pair`` (with ``table``)
        a paired TABLE's beat. A TABLE request is all paired or all unpaired.
    next_valid, next_table, next_pair : In(1)
        ``i.valid``, ``i.p.table`` and ``i.p.pair`` of the next cycle.
    a : Out(stream.Signature(ArrayLayout(32, lanes)))
        Engine operand beats.
    cfg : Out(stream.Signature(rtl.vector.lut.CFG_LAYOUT))
        TABLE writes (``write`` is 1).
    table_fin : Out(1)
        The last word of a TABLE request is taken in this cycle (combinational).

    Reset: expecting an address word, no write offered.
    """

    def __init__(self, lanes):
        self._lanes = check_int("lanes", lanes, 1, 1024)
        vec = data.ArrayLayout(32, lanes)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": vec, "last": 1, "table": 1,
                                                        "pair": 1}))),
            "next_valid": In(1), "next_table": In(1), "next_pair": In(1),
            "a": Out(stream.Signature(vec)),
            "cfg": Out(stream.Signature(CFG_LAYOUT)),
            "table_fin": Out(1),
        })

    lanes = property(lambda self: self._lanes)

    def elaborate(self, platform):
        m = Module()
        i, cfg = self.i, self.cfg
        phase = Signal()                # the next TABLE word is data
        phase_n = Signal()
        cfg_v = Signal()
        cfg_addr = Signal(16)
        pair_r = Signal()               # the offered TABLE word is a paired beat
        table = i.p.table
        # A paired beat's data is lane 1 (no lane 1 with one lane: no paired TABLE either).
        pair_data = i.p.data[1] if self._lanes > 1 else i.p.data[0]
        m.d.comb += phase_n.eq(phase)
        with m.If(i.valid & table & ~i.p.pair):
            with m.If(~phase):
                m.d.comb += phase_n.eq(1)
                m.d.sync += cfg_addr.eq(i.p.data[0])
            with m.Elif(cfg.ready):
                m.d.comb += phase_n.eq(0)
        m.d.sync += [phase.eq(phase_n), pair_r.eq(self.next_pair),
                     cfg_v.eq(self.next_valid & self.next_table & (phase_n | self.next_pair))]
        m.d.comb += [cfg.valid.eq(cfg_v), cfg.p.addr.eq(Mux(pair_r, i.p.data[0], cfg_addr)),
                     cfg.p.data.eq(Mux(pair_r, pair_data, i.p.data[0])), cfg.p.write.eq(1),
                     i.ready.eq(Mux(cfg_v, cfg.ready, table | self.a.ready)),
                     self.table_fin.eq(i.valid & table & i.ready & i.p.last),
                     self.a.valid.eq(i.valid & ~table), self.a.payload.eq(i.p.data)]
        return m
