"""The LUT's configuration port: cfg writes and reads of the table memories, the headers, the
status registers and the hit/underflow/overflow counters (``sim.vector``'s cfg map)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.vector.lut_header import HEADER_LAYOUT
from sim.vector import (CFG_ADDR_BITS, CFG_BANK_BIT, DESC_BASE_BITS, MAX_BINADES, ONE_F32, Hdr,
                        Status)

__all__ = ["CFG_LAYOUT", "LutConfig"]

#: The cfg stream payload: one 32-bit word written (``write=1``) or read (``write=0``).
CFG_LAYOUT = data.StructLayout({"addr": CFG_ADDR_BITS, "data": 32, "write": 1})


class LutConfig(wiring.Component):
    """Carries out cfg beats on the LUT's state: the coefficient and descriptor memories
    (through their write ports and cfg read ports, owned by the ``Lut``), both banks' header
    registers, the sticky ``error`` and the counters.

    A beat is taken into a register and carried out from it the next cycle at the earliest;
    ``ready`` is high while the register is empty or its beat is carried out in this cycle,
    so writes stream at one beat per cycle (``ready`` a function of flip-flops, ``lock``,
    ``bank`` and ``rdata.ready``, never of ``cfg.valid`` or the payload). A write lands in
    the cycle after it is carried out (a coefficient, descriptor or header word one cycle
    later still, from registers of their own); a read is not carried out in the cycle after
    a write (``q_wrote``), so it sees every earlier write; its ``rdata`` beat is valid three
    cycles after it is taken at the earliest. A bad address sets ``error`` (a read then
    returns 0). A write to bank ``bank`` waits in the register while ``lock`` is high; a
    status write is never blocked. The counters add ``inc_*`` every cycle; a cfg write to a
    counter in the same cycle wins.

    Parameters
    ----------
    lanes : int
    depth : int
        Entries per bank.

    Members
    -------
    cfg : In(stream.Signature(CFG_LAYOUT)); rdata : Out(stream.Signature(32)); error : Out(1)
        As the ``Lut``'s.
    lock, bank : In(1)
    inc_hits, inc_unders, inc_overs : In(range(lanes + 1))
        The lanes' counted elements of the cycle.
    header : Out(ArrayLayout(HEADER_LAYOUT, 2))
        Both banks' header registers (PRE 1.0 after reset).
    coef_wr_en : Out(3); coef_wr_addr : Out(log2(depth) + 1); coef_wr_data : Out(96)
        The coefficient memory's write port (granularity 32).
    coef_rd_addr : Out(log2(depth) + 1); coef_rd_data : In(96)
        A read port of it (asynchronous; registered here).
    desc_wr_en : Out(1); desc_wr_addr : Out(7)
    desc_wr_base : Out(DESC_BASE_BITS); desc_wr_k : Out(3); desc_wr_low : Out(7)
        The descriptor memories' write ports: base, K and the mask ``0x7F >> K``.
    desc_rd_addr : Out(7); desc_rd_base : In(DESC_BASE_BITS); desc_rd_k : In(3)
        Read ports of the base and K memories (asynchronous).
    """

    def __init__(self, lanes, depth):
        self._lanes, self._depth = lanes, depth
        abits = depth.bit_length() - 1
        count = range(lanes + 1)
        super().__init__({
            "cfg": In(stream.Signature(CFG_LAYOUT)), "rdata": Out(stream.Signature(32)),
            "error": Out(1), "lock": In(1), "bank": In(1),
            "inc_hits": In(count), "inc_unders": In(count), "inc_overs": In(count),
            "header": Out(data.ArrayLayout(HEADER_LAYOUT, 2)),
            "coef_wr_en": Out(3), "coef_wr_addr": Out(abits + 1), "coef_wr_data": Out(96),
            "coef_rd_addr": Out(abits + 1), "coef_rd_data": In(96),
            "desc_wr_en": Out(1), "desc_wr_addr": Out(7), "desc_wr_base": Out(DESC_BASE_BITS),
            "desc_wr_k": Out(3), "desc_wr_low": Out(7),
            "desc_rd_addr": Out(7), "desc_rd_base": In(DESC_BASE_BITS), "desc_rd_k": In(3),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        abits = depth.bit_length() - 1
        # -- configuration state ------------------------------------------------------------
        hdr = []
        for bank in range(2):
            hdr.append({
                Hdr.MODE: Signal(3, name=f"b{bank}_mode"),
                Hdr.E_LO: Signal(8, name=f"b{bank}_e_lo"),
                Hdr.NB_NEG: Signal(6, name=f"b{bank}_nb_neg"),
                Hdr.NB_POS: Signal(6, name=f"b{bank}_nb_pos"),
                Hdr.PRE: Signal(32, name=f"b{bank}_pre", init=ONE_F32),
                Hdr.POST: Signal(32, name=f"b{bank}_post"),
            })
        hits = Signal(32)
        unders = Signal(32)
        overs = Signal(32)
        error = Signal()
        m.d.comb += self.error.eq(error)

        # -- cfg port ---------------------------------------------------------------------
        # A beat is taken into a register with its address decoded (``q_*``) and carried out
        # from there the next cycle: the bank-lock check, the RAM write enables, the header
        # and counter writes and the read multiplexer start from flip-flops, and ``cfg.ready``
        # is ``~q_valid | take`` of those flip-flops: no path runs from the cfg port through
        # the address decode to the descriptor RAM's write enables.
        p = self.cfg.payload
        a = p.addr
        region = a[12:14]
        is_status = a[15]
        low_in = a[0:12]
        entry_in = low_in[2:12]
        st_in = a[0:15]
        coef_in = ~is_status & (region == 0) & (low_in[0:2] != 3) & (entry_in < depth)
        desc_in = ~is_status & (region == 1) & (low_in < 2 * MAX_BINADES)
        hdr_in = ~is_status & (region == 2) & (low_in <= Hdr.POST)
        status_in = is_status & (st_in <= Status.DEPTH)
        bad_in = ~(coef_in | desc_in | hdr_in | status_in) | \
            (is_status & p.write & (st_in == Status.DEPTH))
        q_valid = Signal()
        q = Signal(CFG_LAYOUT, name="q")
        coef_ok, desc_ok, bad, lockable = (
            Signal(name=f"q_{n}") for n in ("coef", "desc", "bad", "lockable"))
        # One-hot selects of the header register (per bank) and of the status register.
        hsel = [{reg: Signal(name=f"q_hsel_b{bank}_{reg.name.lower()}") for reg in Hdr}
                for bank in range(2)]
        ssel = {reg: Signal(name=f"q_ssel_{reg.name.lower()}") for reg in Status}
        take = Signal()
        m.d.comb += self.cfg.ready.eq(~q_valid | take)
        with m.If(take):
            m.d.sync += q_valid.eq(0)
        with m.If(self.cfg.valid & self.cfg.ready):
            m.d.sync += [q_valid.eq(1), q.eq(p),
                         coef_ok.eq(coef_in), desc_ok.eq(desc_in), bad.eq(bad_in),
                         lockable.eq(p.write & (coef_in | desc_in | hdr_in))]
            m.d.sync += [sig.eq(hdr_in & (a[CFG_BANK_BIT] == bank) & (low_in[0:3] == reg))
                         for bank in range(2) for reg, sig in hsel[bank].items()]
            m.d.sync += [sig.eq(status_in & (st_in == reg)) for reg, sig in ssel.items()]
        p = q
        bank_a = q.addr[CFG_BANK_BIT]
        low = q.addr[0:12]
        entry = low[2:12]
        word = low[0:2]
        blocked = lockable & self.lock & (bank_a == self.bank)
        rd_valid = Signal()
        rd_sel = Signal(2)          # the coefficient word 0..2 to return, 3: ``rd_value``
        rd_value = Signal(32)
        # A write was carried out in the previous cycle: its word reaches the memories and
        # header registers only at the end of this one, so a read waits a cycle.
        q_wrote = Signal()
        # The read's word is registered once more (``out``) before ``rdata``, so that the
        # coefficient RAM's block RAMs (a slow clock-to-out) -> their output multiplexer -> the
        # word select do not precede the core's window register. ``s1_free``: the read stage
        # may move on (``out`` empty or taken).
        # ``out`` is one 4-way multiplexer of the three words and ``rd_value`` on a registered
        # select (``rd_sel``: a LUT and a PFUMX after the block RAM), and has no reset
        # (``out_valid`` has), so its enable can only be the flip-flops' clock enable, not a
        # LUT in front of them.
        out_valid = Signal()
        out = Signal(32, reset_less=True)
        s1_free = Signal()
        # The register's beat may be carried out: it is there and no read result waits (a
        # read's stage is moving or empty); ``take`` adds the bank lock, the header writes'
        # ``hdr_we`` (below) their bank's lock.
        movable = q_valid & ~(rd_valid & ~s1_free)
        m.d.comb += [s1_free.eq(~out_valid | self.rdata.ready),
                     take.eq(movable & ~blocked & (p.write | ~q_wrote))]
        m.d.sync += q_wrote.eq(take & p.write)
        m.d.comb += self.desc_rd_addr.eq(Cat(low[0:6], bank_a))
        # The cfg read's row, loaded whenever the read stage is free (like ``rd_value``): it is
        # the read's in the cycle a read is taken, and holds while its result waits.
        cfg_coef = Signal(96, reset_less=True)
        m.d.comb += self.coef_rd_addr.eq(Cat(entry[0:abits], bank_a))
        with m.If(~rd_valid | s1_free):
            m.d.sync += cfg_coef.eq(self.coef_rd_data)
        # A coefficient write reaches the block RAM one cycle after it is taken, from registers
        # (``wr_*``), so that the RAM's write enable does not wait for the bank-lock check and
        # the read stage's ``rdata.ready`` in front of the RAM's enable. Nothing
        # reads the word meanwhile: a cfg read is carried out two cycles after a write at the
        # earliest (``q_wrote``), and a lane reads a written bank only once ``lock`` allows
        # the write.
        wr_en = Signal(3)
        wr_addr = Signal(abits + 1, reset_less=True)
        wr_data = Signal(32, reset_less=True)
        m.d.sync += [wr_en.eq(Mux(take & p.write & coef_ok, 1 << word, 0)),
                     wr_addr.eq(Cat(entry[0:abits], bank_a)), wr_data.eq(p.data)]
        m.d.comb += [self.coef_wr_en.eq(wr_en), self.coef_wr_addr.eq(wr_addr),
                     self.coef_wr_data.eq(Cat(wr_data, wr_data, wr_data))]
        # A descriptor write likewise, from ``desc_we``, ``desc_wa`` and ``wr_data``, so that
        # ``take`` is not in front of the descriptor LUT-RAMs' 80 write enables.
        # The lanes read a descriptor later than the header (see the header's ``hdr_we``).
        desc_we = Signal()
        desc_wa = Signal(7, reset_less=True)
        m.d.sync += [desc_we.eq(take & p.write & desc_ok), desc_wa.eq(Cat(low[0:6], bank_a))]
        m.d.comb += [
            self.desc_wr_en.eq(desc_we), self.desc_wr_addr.eq(desc_wa),
            self.desc_wr_base.eq(wr_data[0:DESC_BASE_BITS]), self.desc_wr_k.eq(wr_data[16:19]),
            self.desc_wr_low.eq(Const(0x7F, 7) >> wr_data[16:19]),
        ]
        with m.If(s1_free):
            m.d.sync += [rd_valid.eq(0), out_valid.eq(rd_valid),
                         out.eq(Cat(cfg_coef, rd_value).word_select(rd_sel, 32))]
        m.d.comb += [self.rdata.valid.eq(out_valid), self.rdata.payload.eq(out)]
        # Counter increments; a cfg write to a counter in the same cycle wins.
        inc = {Status.HITS: self.inc_hits, Status.UNDERS: self.inc_unders,
               Status.OVERS: self.inc_overs}
        counters = {Status.HITS: hits, Status.UNDERS: unders, Status.OVERS: overs}
        for reg, ctr in counters.items():
            m.d.sync += ctr.eq(ctr + inc[reg])
        with m.If(take):
            m.d.sync += rd_valid.eq(~p.write)
            with m.If(bad):
                m.d.sync += error.eq(1)
            with m.Elif(p.write):
                with m.If(ssel[Status.ERROR]):
                    m.d.sync += error.eq(0)
        # A header write lands one cycle after it is taken, from registers like a coefficient
        # word (``hdr_we``, one per header register, and ``wr_data``): the header registers'
        # clock enables are flip-flops, not ``take`` (no ``c.lut`` -> ``lock`` -> ``take`` path
        # reaches the clock enables of ~150 header flip-flops). Nothing reads the register
        # meanwhile: a cfg read is carried out two cycles after a write at the earliest, and the
        # lanes read a bank's header for an instruction's elements only, after ``lock`` has held
        # back writes to it: the engine raises ``lock`` the cycle after it takes an instruction, and
        # the header's copies (``pre_q``, ``s1_mode``, ...) take the first element's header two
        # cycles after it at the earliest (the short pipeline; 13 cycles later still when deep).
        # ``hdr_we`` is ``take`` of a header write, written per bank: ``hsel`` is set only for a
        # header address of that bank, so such a beat is never ``bad`` and is ``blocked`` exactly
        # when ``lock`` is high and ``bank`` is that bank (no compare with the beat's bank bit).
        hdr_we = [{reg: Signal(name=f"hdr_we_b{bank}_{reg.name.lower()}") for reg in Hdr}
                  for bank in range(2)]
        for bank in range(2):
            lock_b = self.lock & (self.bank == bank)
            for reg, sig in hdr[bank].items():
                m.d.sync += hdr_we[bank][reg].eq(movable & ~lock_b & p.write &
                                                 hsel[bank][reg])
                with m.If(hdr_we[bank][reg]):
                    m.d.sync += sig.eq(wr_data)
        # A counter's clear without the bank-lock check and the bad-address test of ``take``:
        # a status write is never blocked, and a write to a counter is never bad, so no lock
        # check precedes a counter's clear.
        for reg, ctr in counters.items():
            with m.If(q_valid & ~(rd_valid & ~s1_free) & p.write & ssel[reg]):
                m.d.sync += ctr.eq(0)
        # The read result register loads whenever it is free (``rdata`` empty or taken), not
        # only with ``take``: its enable then does not wait for the bank-lock check, and the
        # value loaded in the cycle a read is taken is the read's.
        rd_next = Signal(32)
        terms = [Mux(desc_ok, Cat(self.desc_rd_base, Const(0, 16 - DESC_BASE_BITS),
                                  self.desc_rd_k), 0)]
        terms += [Mux(sig, hdr[bank][reg], 0) for bank in range(2)
                  for reg, sig in hsel[bank].items()]
        values = {Status.ERROR: error, Status.DEPTH: depth, **counters}
        terms += [Mux(sig, values[reg], 0) for reg, sig in ssel.items()]
        # The selects are one-hot (or all low for a bad address: 0), so an OR of the terms.
        acc_or = terms[0]
        for t in terms[1:]:
            acc_or = acc_or | t
        m.d.comb += rd_next.eq(Mux(p.write, 0, acc_or))
        with m.If(~rd_valid | s1_free):
            m.d.sync += [rd_sel.eq(Mux(coef_ok, word, 3)), rd_value.eq(rd_next)]

        m.d.comb += [self.header[bank][reg.name.lower()].eq(sig)
                     for bank in range(2) for reg, sig in hdr[bank].items()]
        return m
