"""The sequencer's ALU: X's micro-operation on its two 32-bit operands."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["MicroAlu", "log_shift"]


def log_shift(m, name, value, amount, *, left, fill=None):
    """``value`` (32 bits) shifted left or right by ``amount`` (5 bits), as three levels of
    multiplexers: by ``amount[0:2]`` (0..3), ``amount[2:4]`` (0, 4, 8, 12), ``amount[4]``
    (0, 16), each a 4:1 (the last 2:1) multiplexer per bit and a signal of its own
    (``{name}0``..``{name}2``, the last returned). A right shift fills with ``fill`` (1 bit,
    0 by default).

    Bit-identical to ``(value << amount)[:32]`` and ``Cat(value, fill.replicate(32)) >>
    amount``, with three LUT levels instead of the five levels of 2:1 multiplexers yosys
    builds for those (the ALU is on the sequencer's deepest paths, ``x_prev`` -> ALU -> the
    registers and semaphores). Separate left and right shifters: folding the left shift into
    the right one by bit reversal puts a multiplexer in front of the shifter."""
    fill = Const(0) if fill is None else fill

    def shifted(v, n):
        if left:
            return Cat(Const(0, n), v[:32 - n])
        return Cat(v[n:], fill.replicate(n))

    cur = value
    for lvl, (lo, hi) in enumerate(((0, 2), (2, 4), (4, 5))):
        sel = amount[lo:hi]
        ways = [shifted(cur, j << lo) for j in range(1 << (hi - lo))]
        nxt = Signal(32, name=f"{name}{lvl}")
        if len(ways) == 4:
            m.d.comb += nxt.eq(Mux(sel[1], Mux(sel[0], ways[3], ways[2]),
                                   Mux(sel[0], ways[1], ways[0])))
        else:
            m.d.comb += nxt.eq(Mux(sel[0], ways[1], ways[0]))
        cur = nxt
    return cur


class MicroAlu(wiring.Component):
    """The micro-ALU (``sim.isa.UAlu``), combinational, with the result in four forms.

    The op arrives as one-hot class flags decoded a stage early (``sim``'s
    :func:`rtl.control.micro_decode.decode`: ``alu_arith`` ADD/SUB, ``alu_neg`` SUB/SLT/SLTU,
    ``alu_slt``, ``alu_sltu``, ``alu_shl``, ``alu_rsh`` SHR/SRA, ``alu_sra``, and ``alu_tt``,
    the truth table over ``(a[i], b[i])`` of AND/OR/XOR/PASSA/PASSB, index ``2*a[i] + b[i]``);
    no flag set gives 0. One carry chain computes ADD, SUB, SLT and SLTU as ``a + b_n + neg``,
    where ``b_n`` is ``b ^ neg`` (registered by the caller beside ``b``, so the chain's operand
    is not behind an XOR).

    The result is built in two parts: the terms that do not wait for the carry chain (logic,
    shifters, SLT's sign-decided case; a ``keep`` signal ``<name>_early``) and, after the
    chain, one OR per bit with them. Since the op decode is one-hot, the OR is an XOR, which
    takes an inversion (``fwd_n``) into the early part.

    Members
    -------
    a, b, b_n : In(32)
        The operands and ``b ^ alu_neg``.
    alu_arith, alu_neg, alu_slt, alu_sltu, alu_shl, alu_rsh, alu_sra : In(1)
    alu_tt : In(4)
    sem_cur : In(SEM_VALUE_BITS)
        A SEMRD's semaphore value: ``wr_data`` and ``fwd`` take it under ``wr_sem``/
        ``fwd_sem`` instead of the ALU's result.
    wr_sem, fwd_sem, neg_next : In(1)
    res : Out(32)
        The ALU's result.
    wr_data, fwd : Out(32)
        The register file's write data and the forwarded value (``res`` or ``sem_cur``).
    fwd_n : Out(32)
        ``fwd ^ neg_next`` replicated (the next micro-word's ``alu_neg``).
    eq, lt, ltu : Out(1)
        ``a == b``, signed ``a < b``, unsigned ``a < b`` (a FLAGS write).
    """

    def __init__(self):
        super().__init__({
            "a": In(32), "b": In(32), "b_n": In(32),
            "alu_arith": In(1), "alu_neg": In(1), "alu_slt": In(1), "alu_sltu": In(1),
            "alu_shl": In(1), "alu_rsh": In(1), "alu_sra": In(1), "alu_tt": In(4),
            "sem_cur": In(isa.SEM_VALUE_BITS), "wr_sem": In(1), "fwd_sem": In(1),
            "neg_next": In(1),
            "res": Out(32), "wr_data": Out(32), "fwd": Out(32), "fwd_n": Out(32),
            "eq": Out(1), "lt": Out(1), "ltu": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        sum_c = Signal(34)
        m.d.comb += sum_c.eq(Cat(Const(1, 1), a) + Cat(self.alu_neg, self.b_n))
        diff, carry = sum_c[1:33], sum_c[33]
        sh = b[:5]
        sra_fill = Signal()
        m.d.comb += sra_fill.eq(self.alu_sra & a[31])
        lsh = log_shift(m, "alu_lsh", a, sh, left=True)
        rsh = log_shift(m, "alu_rsh", a, sh, left=False, fill=sra_fill)
        tt = self.alu_tt
        logic = Cat(*[Mux(a[i], Mux(b[i], tt[3], tt[2]), Mux(b[i], tt[1], tt[0]))
                      for i in range(32)])

        def sel(flag, value):
            return Mux(flag, value, 0)

        ab_sign = a[31] ^ b[31]
        res_early = Signal(32)
        m.d.comb += res_early.eq(logic | sel(self.alu_shl, lsh) | sel(self.alu_rsh, rsh) |
                                 (self.alu_slt & ab_sign & a[31]))

        def alu_out(out, flag=None, inv=None):
            early = Signal(32, name=f"{out.name}_early", attrs={"keep": 1})
            g = ~flag if flag is not None else Const(1)
            value = res_early if flag is None else Mux(flag, self.sem_cur, res_early)
            m.d.comb += early.eq(value if inv is None else value ^ inv.replicate(32))
            m.d.comb += out.eq((sel(self.alu_arith & g, diff) |
                                (self.alu_slt & g & ~ab_sign & diff[31] |
                                 self.alu_sltu & g & ~carry)) ^ early)

        res, wr, fwd, fwd_n = (Signal(32, name=n)
                               for n in ("alu_res", "alu_wr", "alu_fwd", "alu_fwd_n"))
        alu_out(res)
        alu_out(wr, self.wr_sem)
        alu_out(fwd, self.fwd_sem)
        alu_out(fwd_n, self.fwd_sem, self.neg_next)
        m.d.comb += [self.res.eq(res), self.wr_data.eq(wr), self.fwd.eq(fwd),
                     self.fwd_n.eq(fwd_n),
                     self.eq.eq(a == b), self.lt.eq(a.as_signed() < b.as_signed()),
                     self.ltu.eq(a < b)]
        return m
