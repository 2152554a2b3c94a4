"""The sequencer's micro-registers (T0, T1, UCTR, the flags) and the branch decision of the
micro-instruction in X."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim.isa import UCond

from .micro_decode import FLAGS

__all__ = ["MicroRegisters"]


class MicroRegisters(wiring.Component):
    """T0, T1, the micro-loop counter UCTR and the macro flags EQ/LT/LTU, written by X's
    micro-instruction, and whether it redirects (a taken BRANCH or ULOOP, or a RET).

    Every write lands one cycle after X (W) from ``res_q`` (X's result registered) or from
    the compares registered every cycle, so that neither the ALU nor ``go`` reaches these
    registers' data and enables: T0/T1 on ``go`` (``t0``/``t1`` show the pending value in
    W), UCTR on ``go`` (``uctr_fix`` high in W, when a ULOOP holds), the flags on ``adv``
    (``flags_w`` high in W, when a BRANCH on a flag holds). No zero test of X's result is in
    X's cycle: a BRANCH on Z/NZ decides on ``res_q == 0`` registered (it holds its first two
    cycles in X), ``uctr != 0`` is a flip-flop beside UCTR. A taken ULOOP decrements UCTR in
    W. ``redirect`` is a sum of products of the decoded branch conditions and registered
    flags (RET is folded into ``br_always``). ``clear`` (START) zeroes everything.

    Members
    -------
    flags : In(StructLayout({flag: 1 for flag in FLAGS}))
        X's decoded micro-word.
    clear, go, adv : In(1)
    res_q : In(32)
    alu_eq, alu_lt, alu_ltu : In(1)
        The ALU's compares of X's operands (a FLAGS write).
    loop_more : In(1)
        LOOP_MORE (the loop stack's top count is above 1).
    t0, t1 : Out(32)
        T0 and T1 as the architecture has them.
    macro_flags : Out(3)
        EQ, LT, LTU.
    uctr_fix, flags_w : Out(1)
        UCTR's, the flags' write is pending (W).
    redirect : Out(1)
        X's micro-instruction redirects the micro-pipeline (valid with ``go``).
    """

    def __init__(self):
        super().__init__({
            "flags": In(data.StructLayout({f: 1 for f in FLAGS})),
            "clear": In(1), "go": In(1), "adv": In(1), "res_q": In(32),
            "alu_eq": In(1), "alu_lt": In(1), "alu_ltu": In(1), "loop_more": In(1),
            "t0": Out(32), "t1": Out(32), "macro_flags": Out(3), "uctr_fix": Out(1),
            "flags_w": Out(1), "redirect": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        xd, go, res_q = self.flags, self.go, self.res_q
        t0, t1, t0_w, t1_w = Signal(32), Signal(32), Signal(), Signal()
        m.d.comb += [self.t0.eq(Mux(t0_w, res_q, t0)), self.t1.eq(Mux(t1_w, res_q, t1))]
        m.d.sync += [t0_w.eq(go & xd.dst_t0), t1_w.eq(go & xd.dst_t1)]
        with m.If(t0_w):
            m.d.sync += t0.eq(res_q)
        with m.If(t1_w):
            m.d.sync += t1.eq(res_q)

        uctr, uctr_nz, uctr_fix = Signal(16), Signal(), self.uctr_fix
        m.d.sync += uctr_fix.eq(0)
        with m.If(uctr_fix):
            m.d.sync += [uctr.eq(res_q[:16]), uctr_nz.eq(res_q[:16] != 0)]
        with m.If(go & xd.dst_uctr):
            m.d.sync += uctr_fix.eq(1)
        with m.If(go & xd.uloop & uctr_nz):
            m.d.sync += uctr_fix.eq(0)
        # A taken ULOOP's decrement lands in W; the next micro-instruction reaches X two
        # cycles later (the redirect), after the write.
        uloop_w = Signal()
        m.d.sync += uloop_w.eq(go & xd.uloop & uctr_nz)
        with m.If(uloop_w):
            m.d.sync += [uctr.eq(uctr - 1), uctr_nz.eq(uctr != 1)]

        flag_eq, flag_lt, flag_ltu = Signal(), Signal(), Signal()
        fl_eq, fl_lt, fl_ltu = Signal(), Signal(), Signal()
        m.d.sync += [fl_eq.eq(self.alu_eq), fl_lt.eq(self.alu_lt), fl_ltu.eq(self.alu_ltu),
                     self.flags_w.eq(self.adv & xd.dst_flags)]
        with m.If(self.flags_w):
            m.d.sync += [flag_eq.eq(fl_eq), flag_lt.eq(fl_lt), flag_ltu.eq(fl_ltu)]
        m.d.comb += self.macro_flags.eq(Cat(flag_eq, flag_lt, flag_ltu))

        res_zero = Signal()
        m.d.sync += res_zero.eq(res_q == 0)
        br_taken = Signal()
        m.d.comb += br_taken.eq(Cat(*[xd["br_" + c.name.lower()] & v for c, v in (
            (UCond.ALWAYS, 1), (UCond.Z, res_zero), (UCond.NZ, ~res_zero),
            (UCond.EQ, flag_eq), (UCond.NE, ~flag_eq), (UCond.LT, flag_lt),
            (UCond.GE, ~flag_lt), (UCond.LTU, flag_ltu), (UCond.GEU, ~flag_ltu),
            (UCond.LOOP_MORE, self.loop_more))]).any())
        m.d.comb += self.redirect.eq(br_taken | xd.uloop & uctr_nz)
        with m.If(self.clear):
            m.d.sync += [t0.eq(0), t1.eq(0), uctr.eq(0), uctr_nz.eq(0), uctr_fix.eq(0),
                         flag_eq.eq(0), flag_lt.eq(0), flag_ltu.eq(0)]
        return m
