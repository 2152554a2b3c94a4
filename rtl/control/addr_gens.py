"""The sequencer's address generators: per generator a loop level, a register, a stride and a
base (AG_SET, AG_SNAP, AGREG)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["AddressGenerators", "PAIRS"]

#: The generator pairs ``(i, j)``, ``i < j``, in the order of ``pair_eq``'s bits.
PAIRS = tuple((i, j) for i in range(isa.NUM_AG) for j in range(i + 1, isa.NUM_AG))


class AddressGenerators(wiring.Component):
    """``NUM_AG`` generators ``{level, reg, stride, base}`` of X's AG_SET and AG_SNAP.

    An AG_SET (``set_go``: X's AG_SET goes by its ``seq`` field) of generator ``index``
    writes its level (``level``, one-hot), its register (``rd``) and, the cycle after (W),
    its stride (``res_q``, X's result registered). An AG_SNAP of generator ``j``
    (``snap_go`` with ``snap_k[j]``) writes its base from ``res_q`` in W, if the generator's
    level is the current loop level (``level_oh``). ``stride`` and ``base`` are the values as
    the architecture has them (the pending W write bypassed). ``clear`` (START) zeroes every
    generator; ``load`` (MAP) registers ``reg[j] == rd`` for the new instruction's ``rd``.

    Registered compares are kept beside the registers for the sequencer's forwarding tests:
    ``rd_eq[j]`` is ``reg[j] == rd``, ``pair_eq`` bit ``p`` is ``reg[i] == reg[j]`` for
    ``PAIRS[p] == (i, j)``; a level and a tag one-hot (the tag zero while the register is r0)
    make ``hit_ok[j]``: the generator's level is the current one and its register is not r0
    (an AGREG write takes effect).

    Members
    -------
    clear, load : In(1)
    rd : In(6), rd_nz : In(1)
        The instruction's ``rd`` and ``rd != 0`` (registered with it).
    set_x : In(1)
        X holds an AG_SET (``eff`` shows its register as it will leave it).
    set_go, snap_go : In(1)
    index : In(2)
        An AG_SET's generator (``imm[1:0]``).
    level : In(3)
        An AG_SET's loop level (``imm[10:8]``).
    snap_k : In(NUM_AG)
        An AG_SNAP's generator, one-hot.
    res_q : In(32)
    level_oh : In(LOOP_DEPTH)
        The loop depth one-hot (bit ``v - 1``: depth ``v``; 0 for an empty stack).
    reg, eff : Out(ArrayLayout(6, NUM_AG))
        The registers; the same with X's AG_SET applied.
    set_oh : Out(NUM_AG)
        The generator X's AG_SET writes (when it goes), one-hot, or 0.
    stride, base : Out(ArrayLayout(32, NUM_AG))
    rd_eq : Out(NUM_AG), pair_eq : Out(len(PAIRS)), hit_ok : Out(NUM_AG)
    """

    def __init__(self):
        n = isa.NUM_AG
        super().__init__({
            "clear": In(1), "load": In(1), "rd": In(6), "rd_nz": In(1),
            "set_x": In(1), "set_go": In(1), "snap_go": In(1), "index": In(2), "level": In(3),
            "snap_k": In(n), "res_q": In(32), "level_oh": In(isa.LOOP_DEPTH),
            "reg": Out(data.ArrayLayout(6, n)), "eff": Out(data.ArrayLayout(6, n)),
            "set_oh": Out(n),
            "stride": Out(data.ArrayLayout(32, n)), "base": Out(data.ArrayLayout(32, n)),
            "rd_eq": Out(n), "pair_eq": Out(len(PAIRS), init=(1 << len(PAIRS)) - 1),
            "hit_ok": Out(n),
        })

    def same(self, i, j):
        """``reg[i] == reg[j]``: 1, or the registered compare of the pair."""
        return Const(1) if i == j else self.pair_eq[PAIRS.index((min(i, j), max(i, j)))]

    def elaborate(self, platform):
        m = Module()
        n = isa.NUM_AG
        rd, res_q, ks = self.rd, self.res_q, self.index
        # The level and tag one-hot: bit v - 1 is level v (1..LOOP_DEPTH; the other levels
        # never match), the tag zero while the register is r0.
        lvl_oh = [Signal(isa.LOOP_DEPTH, name=f"ag{i}_lvl_oh") for i in range(n)]
        tag = [Signal(isa.LOOP_DEPTH, name=f"ag{i}_tag") for i in range(n)]
        reg = [Signal(6, name=f"ag{i}_reg") for i in range(n)]
        stride = [Signal(32, name=f"ag{i}_stride") for i in range(n)]
        base = [Signal(32, name=f"ag{i}_base") for i in range(n)]
        ags_w = Signal(n)          # stride[j] takes res_q
        agb_w = Signal(n)          # base[j] takes res_q
        lvl_ok = [Signal(name=f"ag{j}_lvl_ok") for j in range(n)]
        m.d.comb += [self.reg[j].eq(reg[j]) for j in range(n)]
        m.d.comb += [self.stride[j].eq(Mux(ags_w[j], res_q, stride[j])) for j in range(n)]
        m.d.comb += [self.base[j].eq(Mux(agb_w[j], res_q, base[j])) for j in range(n)]
        m.d.comb += [lvl_ok[j].eq((lvl_oh[j] & self.level_oh).any()) for j in range(n)]
        m.d.comb += [self.hit_ok[j].eq((tag[j] & self.level_oh).any()) for j in range(n)]
        m.d.comb += self.set_oh.eq(Mux(self.set_x, Const(1, n) << ks, 0))
        m.d.comb += [self.eff[j].eq(Mux(self.set_oh[j], rd, reg[j])) for j in range(n)]

        m.d.sync += [ags_w.eq(0), agb_w.eq(0)]
        for j in range(n):
            with m.If(ags_w[j]):
                m.d.sync += stride[j].eq(res_q)
            with m.If(agb_w[j]):
                m.d.sync += base[j].eq(res_q)
        # An AG_SET or AG_SNAP goes by its ``seq`` field alone, so the stall terms and ``go``
        # are not in front of these registers.
        with m.If(self.set_go):
            lvl = Cat(*[self.level == v for v in range(1, isa.LOOP_DEPTH + 1)])
            for j in range(n):
                with m.If(ks == j):
                    m.d.sync += self.rd_eq[j].eq(1)
                    m.d.sync += [self.pair_eq[PAIRS.index((min(i, j), max(i, j)))].eq(
                        self.rd_eq[i]) for i in range(n) if i != j]
                    m.d.sync += [reg[j].eq(rd), lvl_oh[j].eq(lvl),
                                 tag[j].eq(Mux(self.rd_nz, lvl, 0))]
            m.d.sync += ags_w.eq(Const(1, n) << ks)
        for j in range(n):
            with m.If(self.snap_go & self.snap_k[j] & lvl_ok[j]):
                m.d.sync += agb_w[j].eq(1)
        with m.If(self.clear):
            m.d.sync += [v.eq(0) for v in stride + base + reg + lvl_oh + tag]
            m.d.sync += [self.rd_eq[j].eq(~self.rd_nz) for j in range(n)]
            m.d.sync += self.pair_eq.eq(-1)
        with m.If(self.load):
            m.d.sync += [self.rd_eq[j].eq(reg[j] == rd) for j in range(n)]
        return m
