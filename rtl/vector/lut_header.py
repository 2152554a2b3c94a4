"""The active bank's header of a ``Lut``, registered beside its pipeline's stages 1 and 2."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim.vector import ONE_F32, RangeMode

__all__ = ["HEADER_LAYOUT", "MODE_FLAGS", "LutHeader"]

#: One bank's header registers (``sim.vector.Hdr``), in the hardware's widths.
HEADER_LAYOUT = data.StructLayout({"mode": 3, "e_lo": 8, "nb_neg": 6, "nb_pos": 6,
                                   "pre": 32, "post": 32})

#: One flag per range mode but NONE (``s1_is``), named as ``RangeMode`` in lower case.
MODE_FLAGS = data.StructLayout({r.name.lower(): 1 for r in RangeMode if r != RangeMode.NONE})


class LutHeader(wiring.Component):
    """The header of bank ``bank`` as registers that the lanes' pipeline stages read.

    Every output is a register loaded while ``en`` is high (latency 1 enabled cycle), from the
    header of ``bank`` chosen by one multiplexer, so that no lane's logic starts at the bank
    select and the header multiplexer. They hold the element's header in its stage: the engine
    changes ``bank`` only with the pipeline empty and holds the LUT's ``lock`` while a table
    instruction runs, so no header of ``bank`` changes with an element in flight.

    Members
    -------
    banks : In(ArrayLayout(HEADER_LAYOUT, 2))
        Both banks' header registers.
    bank : In(1)
        The active bank.
    en : In(1)
        Clock enable of every output register (the LUT pipeline's).
    s1_mode : Out(3)
        The range mode (``RangeMode``), for the elements in stage 1.
    s1_is : Out(MODE_FLAGS)
        One flag per mode; ``s1_sq``: RSQRT, SQRT or LOG (for the special values).
    fin_scaled, fin_recip, fin_log : Out(1)
        The finish's choice: the scaled value (EXP2, RSQRT, SQRT, RECIP; RECIP's sign
        flipped), LOG's sum, or the value itself.
    pre_q, post_q : Out(32)
        PRE (1.0 after reset) and POST: the multipliers' operands start from registers.
    s2_bank : Out(1)
        The bank, for the elements in stage 2 (the descriptor read address).
    s2_e_lo : Out(8)
        E_LO, for the binade ``vE - e_lo`` of stage 2.
    s2_hi_neg, s2_hi_pos : Out(9)
        The segment's upper bounds ``e_lo + nb_*``, summed per bank before the choice: stage
        2's ``beyond`` is one comparison with a register, not two carry chains in series.

    Reset: every output 0 but ``pre_q`` (1.0).
    """

    banks: In(data.ArrayLayout(HEADER_LAYOUT, 2))
    bank: In(1)
    en: In(1)
    s1_mode: Out(3)
    s1_is: Out(MODE_FLAGS)
    s1_sq: Out(1)
    fin_scaled: Out(1)
    fin_recip: Out(1)
    fin_log: Out(1)
    pre_q: Out(32, init=ONE_F32)
    post_q: Out(32)
    s2_bank: Out(1)
    s2_e_lo: Out(8)
    s2_hi_neg: Out(9)
    s2_hi_pos: Out(9)

    def elaborate(self, platform):
        m = Module()
        b0, b1 = self.banks[0], self.banks[1]

        def choose(field):
            return Mux(self.bank, getattr(b1, field), getattr(b0, field))
        mode, e_lo, pre, post = (choose(f) for f in ("mode", "e_lo", "pre", "post"))
        hi = {key: Mux(self.bank, b1.e_lo + getattr(b1, key), b0.e_lo + getattr(b0, key))
              for key in ("nb_neg", "nb_pos")}
        with m.If(self.en):
            m.d.sync += [self.s1_mode.eq(mode)]
            m.d.sync += [getattr(self.s1_is, r.name.lower()).eq(mode == r)
                         for r in RangeMode if r != RangeMode.NONE]
            m.d.sync += self.s1_sq.eq((mode == RangeMode.RSQRT) | (mode == RangeMode.SQRT) |
                                      (mode == RangeMode.LOG))
            m.d.sync += [
                self.fin_scaled.eq((mode == RangeMode.EXP2) | (mode == RangeMode.RSQRT) |
                                   (mode == RangeMode.SQRT) | (mode == RangeMode.RECIP)),
                self.fin_recip.eq(mode == RangeMode.RECIP),
                self.fin_log.eq(mode == RangeMode.LOG),
                self.pre_q.eq(pre), self.post_q.eq(post)]
            m.d.sync += [self.s2_bank.eq(self.bank), self.s2_e_lo.eq(e_lo),
                         self.s2_hi_neg.eq(hi["nb_neg"]), self.s2_hi_pos.eq(hi["nb_pos"])]
        return m
