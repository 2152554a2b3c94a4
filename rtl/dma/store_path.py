"""The DMA's store data side: SBUF reads to W beats."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.mem_ports import PartitionReadSignature
from sim.config import check_int, check_pow2

from .lanes import ChunkPack

__all__ = ["StorePath"]


class StorePath(wiring.Component):
    """Reads the elements (or, across partitions, chunks) of a record from SBUF in walk order,
    one per cycle, packs them into W beats and offers the beats in order.

    Pipeline: the read is issued (``sbuf_r.en``, ``step``: the walk moves on) while ``st``, the
    walk is not ``done`` and stage 1 is free or moves on; stage 1 is the block RAM's output,
    which stage 2 registers whole (every partition's word: the RAM's output reaches only a
    register) with the element's partition and where its bytes land in the beat (both decided as
    the read was issued); stage 2 selects the element's word and ORs its bytes into the beat
    accumulator. Two cycles from the read to the accumulator, one element per cycle. A beat is
    finished by an element with ``beat_end`` and enters a two-entry W FIFO, whose head is the W
    channel; a beat is packed only if its burst was issued (``data_level`` not 0) and the FIFO
    has room, both known from a flip-flop registered from the next levels (``data_push``,
    ``data_pop``), so ``wready`` reaches only the FIFO's read side. Stalls (no room, no burst)
    hold stage 2, then stage 1, then the reads; the RAM port holds its data while not read. The
    burst's last beat sets ``wlast`` and pops ``data``.

    ``clear`` empties the stages and the accumulator (between records); ``busy``: a stage
    holds an element.

    Parameters
    ----------
    partitions, sbuf_depth, data_width, max_outstanding : int
        The ``DMA``'s (``rtl/dma/dma.py``); ``max_outstanding``
        is the range of ``data_level``.

    Members
    -------
    st, clear, ilv, done : In(1)
        ``done``: the element walk is over.
    esh, esize, off, beat_end, part, addr, chunk_base, chunk_n, chunk_off : In
        The element (chunk) from the element walk: ``ElementWalk``'s members of these names
        and shapes (``esh``, ``esize``: the record's element-size shift and size).
    step : Out(1)
        The element is read.
    sbuf_r : Out(PartitionReadSignature(partitions, sbuf_depth))
    data_len : In(8)
    data_single : In(1)
    data_level : In(range(max_outstanding + 1))
    data_push : In(1)
        The head burst of the issuer's ``data`` queue, its level and push.
    data_pop : Out(1)
        The head burst's last beat is packed.
    w_valid, w_last : Out(1)
    w_data : Out(data_width)
    w_strb : Out(data_width // 8)
    w_ready : In(1)
    busy : Out(1)
    clear_counters : In(1)
    wr_bytes : Out(32)
        Bytes read from SBUF since reset or ``clear_counters``.
    """

    def __init__(self, *, partitions, sbuf_depth, data_width=32, max_outstanding=4):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._sbuf_depth = check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 16)
        self._data_width = check_pow2("data_width", data_width, 32, 512)
        mo = check_int("max_outstanding", max_outstanding, 1, 16)
        bw = data_width // 8
        pbits = max(1, (partitions - 1).bit_length())
        super().__init__({
            "st": In(1), "clear": In(1), "ilv": In(1), "done": In(1), "esh": In(2),
            "esize": In(3), "off": In(range(bw)), "beat_end": In(1), "part": In(pbits),
            "addr": In(range(sbuf_depth)), "chunk_base": In(pbits),
            "chunk_n": In(range(bw + 1)), "chunk_off": In(range(bw)), "step": Out(1),
            "sbuf_r": Out(PartitionReadSignature(partitions, sbuf_depth)),
            "data_len": In(8), "data_single": In(1), "data_level": In(range(mo + 1)),
            "data_push": In(1), "data_pop": Out(1),
            "w_valid": Out(1), "w_last": Out(1), "w_data": Out(data_width), "w_strb": Out(bw),
            "w_ready": In(1), "busy": Out(1), "clear_counters": In(1), "wr_bytes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        P = self._partitions
        bw = self._data_width // 8
        pbits = len(self.part)
        st, esize = self.st, self.esize
        acc = Signal(8 * bw)
        acc_strb = Signal(bw)
        # Where the packer is in the head burst (the oldest AW without all its W beats), so
        # that whether the next beat is the burst's last comes from flip-flops and the
        # queue's stored ``single`` bit, not from a compare of a beat count with the queue's
        # output. ``w_first``: the next beat is a burst's first; otherwise ``w_rem`` beats
        # follow it in the burst and ``w_rem_zero`` is ``w_rem == 0``.
        w_first = Signal(init=1)
        w_rem = Signal(8)
        w_rem_zero = Signal()
        w_beat_layout = data.StructLayout({"data": 8 * bw, "strb": bw, "last": 1})
        m.submodules.w_out = w_out = fifo.SyncFIFO(width=w_beat_layout.size, depth=2)
        w_head, w_new = data.View(w_beat_layout, w_out.r_data), Signal(w_beat_layout)
        m.d.comb += [
            self.w_valid.eq(w_out.r_rdy), w_out.w_data.eq(w_new), w_out.r_en.eq(self.w_ready),
            self.w_data.eq(w_head.data), self.w_strb.eq(w_head.strb),
            self.w_last.eq(w_head.last),
        ]
        # ``w_go`` == (data_level != 0) & w_out.w_rdy, registered from the next levels.
        rd_w = w_out.r_en & w_out.r_rdy
        wr_w = w_out.w_en & w_out.w_rdy
        d_level, d_push, d_pop = self.data_level, self.data_push, self.data_pop
        w_go = Signal()
        m.d.sync += w_go.eq((d_push | ~((d_level == 0) | (d_level == 1) & d_pop)) &
                            (rd_w | ~((w_out.level == 2) | (w_out.level == 1) & wr_w)))

        s1_valid, s1_part, s1_beat_end = Signal(), Signal(pbits), Signal()
        # Stage 2 registers the read port's words of every partition, so that the block
        # RAMs' outputs (late in the cycle) reach only this register; the element's
        # partition is selected from the register (``s2_part``, moved with it).
        s2_valid = Signal()
        s2_words = Signal(data.ArrayLayout(32, P), reset_less=True)
        s2_part = Signal(pbits)
        s2_word = Signal(32)
        m.d.comb += s2_word.eq(s2_words[s2_part])
        s2_beat_end = Signal()
        # ``s1_sel[j]`` bit ``i``: byte ``i`` of the SBUF word is byte ``j`` of the beat (``i``
        # below the element size, ``j = off + i``); ``s1_strb``: the element's byte strobe.
        # Both move to stage 2 with the word, which then passes one AND-OR per beat byte.
        s1_sel = [Signal(4, name=f"s1_sel{j}") for j in range(bw)]
        s1_strb = Signal(bw)
        s2_sel = [Signal(4, name=f"s2_sel{j}") for j in range(bw)]
        s2_strb = Signal(bw)
        s2_data = Signal(8 * bw)
        for j in range(bw):
            byte = Const(0, 8)
            for i in range(min(4, j + 1)):
                byte = byte | Mux(s2_sel[j][i], s2_word[8 * i:8 * i + 8], 0)
            m.d.comb += s2_data[8 * j:8 * j + 8].eq(byte)
        pk_take = Signal()
        m.d.comb += pk_take.eq(st & s2_valid & (~s2_beat_end | w_go))
        w_last = Signal()
        m.d.comb += w_last.eq(Mux(w_first, self.data_single, w_rem_zero))
        s1_base, s2_base = Signal(pbits), Signal(pbits)
        s1_n, s2_n = Signal.like(self.chunk_n), Signal.like(self.chunk_n)
        s1_off, s2_off = Signal.like(self.chunk_off), Signal.like(self.chunk_off)
        m.submodules.pack = pack = ChunkPack(partitions=P, data_width=self._data_width)
        m.d.comb += [pack.words.eq(s2_words.as_value()), pack.base.eq(s2_base),
                     pack.n.eq(s2_n),
                     pack.off.eq(s2_off), pack.esh.eq(self.esh)]
        ilv = self.ilv
        pk_data, pk_strb = Mux(ilv, pack.data, s2_data), Mux(ilv, pack.strb, s2_strb)
        pk_bytes = Mux(ilv, s2_n << self.esh, esize)
        with m.If(pk_take):
            m.d.sync += self.wr_bytes.eq(self.wr_bytes + pk_bytes)
            with m.If(s2_beat_end):
                m.d.comb += [w_out.w_en.eq(1), w_new.data.eq(acc | pk_data),
                             w_new.strb.eq(acc_strb | pk_strb), w_new.last.eq(w_last)]
                m.d.sync += [acc.eq(0), acc_strb.eq(0)]
                with m.If(w_last):
                    m.d.sync += w_first.eq(1)
                    m.d.comb += d_pop.eq(1)
                with m.Else():
                    m.d.sync += [w_first.eq(0),
                                 w_rem.eq(Mux(w_first, self.data_len, w_rem) - 1),
                                 w_rem_zero.eq(Mux(w_first, self.data_len, w_rem) == 1)]
            with m.Else():
                m.d.sync += [acc.eq(acc | pk_data), acc_strb.eq(acc_strb | pk_strb)]
        adv2 = Signal()
        m.d.comb += adv2.eq(~s2_valid | pk_take)
        rd_go = self.step
        m.d.comb += [rd_go.eq(st & ~self.done & (~s1_valid | adv2)),
                     self.sbuf_r.en.eq(rd_go), self.sbuf_r.addr.eq(self.addr),
                     self.busy.eq(s1_valid | s2_valid)]
        with m.If(adv2):
            m.d.sync += [s2_valid.eq(s1_valid), s2_words.eq(self.sbuf_r.data),
                         s2_part.eq(s1_part),
                         s2_beat_end.eq(s1_beat_end), s2_strb.eq(s1_strb), s1_valid.eq(0)]
            m.d.sync += [s2_sel[j].eq(s1_sel[j]) for j in range(bw)]
            m.d.sync += [s2_base.eq(s1_base), s2_n.eq(s1_n), s2_off.eq(s1_off)]
        with m.If(rd_go):
            m.d.sync += [s1_valid.eq(1), s1_part.eq(self.part), s1_beat_end.eq(self.beat_end)]
            m.d.sync += [s1_base.eq(self.chunk_base), s1_n.eq(self.chunk_n),
                         s1_off.eq(self.chunk_off)]
            sel_next = [Cat(*[(self.off == j - i) & (i < esize) for i in range(min(4, j + 1))])
                        for j in range(bw)]
            m.d.sync += [s1_sel[j].eq(sel_next[j]) for j in range(bw)]
            m.d.sync += s1_strb.eq(Cat(*[sel.any() for sel in sel_next]))
        with m.If(self.clear_counters):
            m.d.sync += self.wr_bytes.eq(0)
        with m.If(self.clear):
            m.d.sync += [s1_valid.eq(0), s2_valid.eq(0), acc.eq(0), acc_strb.eq(0),
                         w_first.eq(1)]
        return m
