"""The sequencer's operand stage: R's register indices and operands, and X's operand
registers with late forwarding."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.wide_mux import wide_mux
from sim import isa
from sim.isa import USrc

from .addr_gens import PAIRS

__all__ = ["OperandStage", "REG_SRCS"]

#: Operand sources read from the register file.
REG_SRCS = (USrc.RD, USrc.RS1, USrc.RS2, USrc.RS3, USrc.RD1, USrc.RD2, USrc.RD3, USrc.RS2P1,
            USrc.AGREG)
# The register sources are codes 1..8 (``RS2P1`` 8): an 8-way multiplexer on the select's low
# three bits, whatever the others (the index of any other source is never used: the read, the
# bypass compares and the forwarding tests are all taken under a register source), so the
# control store's output passes no test of the top bit before R's index registers.
assert all(int(s_) & 7 == i for i, s_ in enumerate(
    (USrc.RS2P1, USrc.RD, USrc.RS1, USrc.RS2, USrc.RS3, USrc.RD1, USrc.RD2, USrc.RD3)))


class OperandStage(wiring.Component):
    """Operands ``a`` and ``b`` (``sim.isa.USrc``) of the micro-word in R, registered into X.

    F -> R (``r_load``, the cycle F's micro-word enters R): the operands' register indices
    (``rd``, ``rs1``..``rs3``, ``rd + 1``..``rd + 3``, ``rs2 + 1``), their compares with
    ``rd``, whether each operand is a register source or AGREG, are selected from F's
    fields (``f_a``, ``f_b``) and registered, so that R's read address is a multiplexer of
    flip-flops. An AGREG operand's index (the generator ``f_k``'s register as X's AG_SET
    leaves it, ``ag_eff``) is a register of its own, which also takes an AG_SET of its
    generator in X while R holds (``r_reads_set``: R's word reads it).

    R: the register file is read at ``rf_a_addr``/``rf_b_addr`` (asynchronous), with W's
    pending write (``w_rf_*``) bypassed; the other sources are chosen before the file's word.
    R does not take X's write of this cycle: it registers that its operand is that write
    (X's register file, T0 or T1 write), and X then takes ``x_fwd``, X's forwarded value
    registered at the same edge (late forwarding: the ALU's result reaches one register).

    R -> X (``x_load``): the operands, the forwarding flags, ``x_fwd`` and ``b ^ neg_r`` and
    ``x_fwd_n`` (the same XOR R's ``alu_neg``) load; ``a``, ``b`` and ``b_n`` are X's
    operands. The instruction's derived indices (``rd + 1``.., the compares with ``rd``)
    load on ``load`` (MAP) from ``rd``, ``rs1``..``rs3``.

    Members
    -------
    load : In(1)
        A new instruction (MAP): its fields are stable from the next cycle.
    rd, rs1, rs2, rs3 : In(6); rd_nz : In(1); imm : In(32)
        The instruction's fields, ``rd != 0``.
    f_a, f_b : In(4); f_k : In(2)
        F's operand selects and generator (``const[1:0]``).
    r_a, r_b : In(4); r_const : In(16)
        R's operand selects and constant.
    r_load, r_valid, r_reads_set : In(1)
        F's word enters R; R holds a word; R's word reads what an AG_SET writes.
    x_load, x_valid : In(1)
        R's word enters X (X's registers load); X holds a word.
    x_wr_rd, x_dst_t0, x_dst_t1 : In(1); x_dst_agreg_k : In(NUM_AG)
        X's writes (decoded flags): ``rd`` (SEMRD included), T0, T1, generator ``k``'s
        register.
    x_fwd, x_fwd_n : In(32); neg_r : In(1)
        X's forwarded value, the same XOR ``neg_r`` (R's ``alu_neg``).
    t0, t1 : In(32)
        T0 and T1 as the architecture has them.
    ag_reg, ag_eff : In(ArrayLayout(6, NUM_AG)); ag_stride, ag_base : In(ArrayLayout(32, ..))
    ag_rd_eq, ag_hit_ok, ag_set_oh : In(NUM_AG); ag_pair_eq : In(len(PAIRS))
        The address generators (:class:`rtl.control.addr_gens.AddressGenerators`).
    w_rf_en : In(1); w_rf_addr : In(6); w_rf_data : In(32)
        W's pending register-file write.
    rf_a_addr, rf_b_addr : Out(6); rf_a_data, rf_b_data : In(32)
        The register file's read ports.
    a, b, b_n : Out(32)
        X's operands and ``b ^ alu_neg``.
    """

    def __init__(self):
        n = isa.NUM_AG
        sig = {"load": In(1), "rd_nz": In(1), "imm": In(32),
               "f_a": In(4), "f_b": In(4), "f_k": In(2), "r_a": In(4), "r_b": In(4),
               "r_const": In(16), "r_load": In(1), "r_valid": In(1), "r_reads_set": In(1),
               "x_load": In(1), "x_valid": In(1), "x_wr_rd": In(1), "x_dst_t0": In(1),
               "x_dst_t1": In(1), "x_dst_agreg_k": In(n), "x_fwd": In(32), "x_fwd_n": In(32),
               "neg_r": In(1), "t0": In(32), "t1": In(32),
               "ag_reg": In(data.ArrayLayout(6, n)), "ag_eff": In(data.ArrayLayout(6, n)),
               "ag_stride": In(data.ArrayLayout(32, n)),
               "ag_base": In(data.ArrayLayout(32, n)), "ag_rd_eq": In(n),
               "ag_hit_ok": In(n), "ag_set_oh": In(n), "ag_pair_eq": In(len(PAIRS)),
               "w_rf_en": In(1), "w_rf_addr": In(6), "w_rf_data": In(32),
               "rf_a_addr": Out(6), "rf_b_addr": Out(6), "rf_a_data": In(32),
               "rf_b_data": In(32), "a": Out(32), "b": Out(32), "b_n": Out(32)}
        for name in ("rd", "rs1", "rs2", "rs3"):
            sig[name] = In(6)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        n = isa.NUM_AG
        rd = self.rd
        # The instruction's rd + 1..3, rs2 + 1 and compares with rd, registered in MAP, keep
        # the adders out of the operand read.
        rd_p = [Signal(6, name=f"rd_p{i}") for i in range(4)]     # rd+1, rd+2, rd+3, rs2+1
        src_eq_rd = Signal(4)       # rs1, rs2, rs3, rs2 + 1 == rd
        with m.If(self.load):
            m.d.sync += src_eq_rd.eq(Cat(self.rs1 == rd, self.rs2 == rd, self.rs3 == rd,
                                         (self.rs2 + 1)[:6] == rd))
            m.d.sync += [rd_p[i].eq(rd + i + 1) for i in range(3)]
            m.d.sync += rd_p[3].eq(self.rs2 + 1)
        k_r = self.r_const[:2]
        kr_oh = Signal(n)                    # ``k_r`` one-hot
        m.d.comb += kr_oh.eq(Const(1, n) << k_r)
        ag_idx_r = Signal(6)

        def same(i, j):     # ``ag_reg[i] == ag_reg[j]``
            return Const(1) if i == j else self.ag_pair_eq[PAIRS.index((min(i, j), max(i, j)))]

        # One operand: F's index and compare with rd into R's registers (8-way multiplexers
        # behind the control store, ``wide_mux``: the ECP5 slices' own multiplexers; F's
        # index ``keep`` so synthesis shares it with no other decode of the block RAM's
        # output), R's value, R's forwarding test, X's registers.
        def operand(p, f_sel, r_sel, rf_addr, rf_data):
            idx_f = Signal(6, name=f"{p}_idx_f", attrs={"keep": 1})
            rd_eq_f = Signal(name=f"{p}_rd_eq_f")
            m.d.comb += idx_f.eq(wide_mux(m, platform, f_sel, [
                rd_p[3], rd, self.rs1, self.rs2, self.rs3, rd_p[0], rd_p[1], rd_p[2]],
                f"{p}_idx_f_mux"))
            # rd + 1..3 never equal rd
            m.d.comb += rd_eq_f.eq(wide_mux(m, platform, f_sel, [
                src_eq_rd[3], Const(1, 1), src_eq_rd[0], src_eq_rd[1], src_eq_rd[2],
                Const(0, 1), Const(0, 1), Const(0, 1)], f"{p}_rd_eq_f_mux"))
            idx_q, rd_eq_q = Signal(6, name=f"{p}_idx_q"), Signal(name=f"{p}_rd_eq_q")
            agr_q, reg_q = Signal(name=f"{p}_agr_q"), Signal(name=f"{p}_reg_q")
            with m.If(self.r_load):
                m.d.sync += [idx_q.eq(idx_f), rd_eq_q.eq(rd_eq_f), agr_q.eq(f_sel == USrc.AGREG),
                             reg_q.eq(Cat(*[f_sel == s_ for s_ in REG_SRCS]).any())]
            m.d.comb += rf_addr.eq(Mux(agr_q, ag_idx_r, idx_q))
            # R's value: W's pending write of the operand's register instead of the file's
            # stale word (``w_rf_addr == idx`` with the index's two registered sources
            # compared at once); the file's word (late: the read address fans out to the
            # LUT-RAMs) enters the last multiplexer, under ``reg_q``.
            w_hit = self.w_rf_en & Mux(agr_q, self.w_rf_addr == ag_idx_r,
                                       self.w_rf_addr == idx_q)
            other = Signal(32, name=f"{p}_rd_other")
            with m.Switch(r_sel):
                for src, value in ((USrc.IMM, self.imm), (USrc.CONST, self.r_const),
                                   (USrc.T0, self.t0), (USrc.T1, self.t1),
                                   (USrc.AGSTRIDE, self.ag_stride[k_r]),
                                   (USrc.AGBASE, self.ag_base[k_r])):
                    with m.Case(src):
                        m.d.comb += other.eq(value)
            val = Signal(32, name=f"{p}_rd")
            m.d.comb += val.eq(Mux(reg_q, Mux(w_hit, self.w_rf_data, rf_data), other))
            # R's operand is what X writes this cycle (register file, T0 or T1):
            # ``wr_en & (wr_addr == idx)`` with both write addresses compared at once and the
            # generators' tests per generator under R's one-hot ``k``, from registered
            # compares (``rd_eq_q``; for AGREG, ``ag_rd_eq`` and ``ag_pair_eq``).
            hit = Signal(name=f"{p}_hit")
            with m.Switch(r_sel):
                with m.Case(*REG_SRCS):
                    is_agr = r_sel == USrc.AGREG
                    rd_eq = Mux(is_agr, Cat(*[kr_oh[i] & self.ag_rd_eq[i]
                                              for i in range(n)]).any(), rd_eq_q)
                    ag_eq = [Mux(is_agr, Cat(*[kr_oh[i] & same(i, j) for i in range(n)]).any(),
                                 self.ag_reg[j] == idx_q) for j in range(n)]
                    m.d.comb += hit.eq(self.x_valid & (
                        self.x_wr_rd & self.rd_nz & rd_eq |
                        Cat(*[self.x_dst_agreg_k[j] & self.ag_hit_ok[j] & ag_eq[j]
                              for j in range(n)]).any()))
                with m.Case(USrc.T0):
                    m.d.comb += hit.eq(self.x_valid & self.x_dst_t0)
                with m.Case(USrc.T1):
                    m.d.comb += hit.eq(self.x_valid & self.x_dst_t1)
            q, fw = Signal(32, name=f"{p}_q"), Signal(name=f"{p}_fw")
            with m.If(self.x_load):
                m.d.sync += [q.eq(val), fw.eq(hit)]
            return val, q, fw

        a_rd, a_q, a_fw = operand("a", self.f_a, self.r_a, self.rf_a_addr, self.rf_a_data)
        b_rd, b_q, b_fw = operand("b", self.f_b, self.r_b, self.rf_b_addr, self.rf_b_data)
        # ``ag_idx_r`` follows R's word by ``r_load``; while R holds a word that reads the
        # generator an AG_SET in X writes, it takes the AG_SET's register instead (the
        # select is made of flip-flops, so the stall cone is not in front of its data).
        ag_idx_f = wide_mux(m, platform, self.f_k, [self.ag_eff[j] for j in range(n)],
                            "ag_idx_f")
        ag_hit_r = Signal()
        m.d.comb += ag_hit_r.eq((self.ag_set_oh & kr_oh).any())
        with m.If(self.r_load | ag_hit_r):
            m.d.sync += ag_idx_r.eq(Mux(ag_hit_r & self.r_valid & self.r_reads_set, rd,
                                        ag_idx_f))
        # X's registers: the previous X's forwarded value and ``b ^ neg`` (``b_qn``,
        # ``x_prev_n``), so the ALU's carry chain takes one multiplexer of flip-flops.
        x_prev, x_prev_n, b_qn = (Signal(32, name=n_) for n_ in ("x_prev", "x_prev_n", "b_qn"))
        with m.If(self.x_load):
            m.d.sync += [x_prev.eq(self.x_fwd), x_prev_n.eq(self.x_fwd_n),
                         b_qn.eq(b_rd ^ self.neg_r.replicate(32))]
        m.d.comb += [self.a.eq(Mux(a_fw, x_prev, a_q)), self.b.eq(Mux(b_fw, x_prev, b_q)),
                     self.b_n.eq(Mux(b_fw, x_prev_n, b_qn))]
        return m
