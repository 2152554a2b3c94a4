"""The vector engine's datapath in front of the LUT: per evaluation unit the format decoders,
ALU 0 and ALU 1, and the lane registers of the scalar operands."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.arith.decoder import FormatDecoder
from rtl.vector.alu import VectorAlu
from rtl.vector.issue import CMD_LAYOUT
from rtl.vector.lut import check_lanes, check_units
from sim.config import check_bool
from sim.dtypes import Format
from sim.vector import Src

__all__ = ["VectorFront"]


class VectorFront(wiring.Component):
    """``ALU1(ALU0(decode(a), s0), s1)`` for ``units`` evaluation units of a ``lanes``-wide
    engine (``sim.vector``): free-running, no clock enable, no handshake.

    Each unit decodes its ``a`` and ``b`` words (``rtl.arith.decoder.FormatDecoder``, formats
    ``fmt_a`` and ``c.fmt_b``), applies ALU 0 with the scalar ``s0`` (``c.imm0``, its lane
    register, or the decoded ``b``, by ``c.src0``) and ALU 1 with ``s1`` (``c.imm1``, its lane
    register, or the decoded ``b`` delayed along ALU 0). With ``units`` below ``lanes`` the
    element enters as ``lanes // units`` sub-beats: in sub-beat ``sub`` unit ``u`` takes lane
    ``sub * units + u`` of ``a``, ``b`` and the lane registers.

    Latency: ``o`` holds the result of the words presented ``latency`` cycles earlier
    (``front(deep)[2]``: the decoders' ``dec`` registers, ALU 0 and its output register,
    ALU 1 and its output register). The data registers have no reset; the user tracks
    validity. ``c`` and ``fmt_a`` must hold still while an instruction's elements flow.

    A beat marked with ``take_lane0`` / ``take_lane1`` (its sub-beat numbered by ``sub``) is
    decoded as ``b`` and loaded into the lane registers of operand 0 / 1 ``dec - dec_out``
    cycles later, before the first element that uses them is selected when the mark comes at
    least a cycle ahead of that element's entry.

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    units : int
        Evaluation units (a divisor of ``lanes``).
    formats : collection of Format
        Input formats of the decoders.
    deep : bool
        Pipeline the decoders (3 registers) and the ALUs (4 stages each).

    Members
    -------
    a, b : In(ArrayLayout(32, lanes))
        Raw words, low-aligned.
    sub : In(range(lanes // units))
        The sub-beat entering (only with ``units`` below ``lanes``).
    c : In(CMD_LAYOUT)
        The instruction (``fmt_b``, ``src0``, ``src1``, ``imm0``, ``imm1``, ``op0``, ``op1``).
    fmt_a : In(3)
        The format ``a`` is decoded from.
    take_lane0, take_lane1 : In(1)
        Load the decoded ``b`` into the lane registers of operand 0 / 1.
    o : Out(ArrayLayout(32, units))
        ALU 1's FP32 results.
    """

    def __init__(self, lanes, units=None, formats=tuple(Format), *, deep=True):
        self._lanes = check_lanes(lanes)
        self._units = units = check_units(units, lanes)
        self._formats = tuple(formats)
        self._deep = check_bool("deep", deep)
        ports = {
            "a": In(data.ArrayLayout(32, lanes)),
            "b": In(data.ArrayLayout(32, lanes)),
            "c": In(CMD_LAYOUT),
            "fmt_a": In(3),
            "take_lane0": In(1),
            "take_lane1": In(1),
            "o": Out(data.ArrayLayout(32, units)),
        }
        if units < lanes:
            ports["sub"] = In(range(lanes // units))
        super().__init__(ports)

    @staticmethod
    def front(deep):
        """Register stages: (registers of the decoders, ALU stages) and their sum (the input
        register before the decoders, their own stage and the register after them, ALU 0 and
        its output register, ALU 1 and its output register)."""
        dec, alu = (3, 4) if deep else (0, 0)
        return dec, alu, dec + 2 * (alu + 1)

    @property
    def latency(self):
        return self.front(self._deep)[2]

    def elaborate(self, platform):
        m = Module()
        lanes, units = self._lanes, self._units
        G = lanes // units
        vec = data.ArrayLayout(32, lanes)
        uvec = data.ArrayLayout(32, units)
        DEC, ALU, _ = self.front(self._deep)
        c = self.c
        run = Const(1)                   # the pipeline's (constant) enable
        lane_reg = [Signal(vec, name="lane_reg0"), Signal(vec, name="lane_reg1")]
        # ``sub_at(k)``: the sub-beat of the stage ``k`` cycles after its entry.
        subs = [self.sub] if G > 1 else []
        for i in range(DEC + ALU):
            if G > 1:
                subs.append(delay(m, run, subs[-1], 1, f"p{i}_sub"))

        def sub_at(k):
            return subs[k]

        def lane_of(vector, j, u):
            return vector[j * units + u]

        def pick(vector, u, k):
            """Unit ``u``'s word of a lanes-wide ``vector`` for the sub-beat ``sub_at(k)``."""
            if G == 1:
                return vector[u]
            return Cat(*(lane_of(vector, j, u) for j in range(G))).word_select(sub_at(k), 32)

        a0_y = Signal(uvec, reset_less=True)
        a0_t = Signal(uvec, reset_less=True)
        a1_y = Signal(uvec, reset_less=True)
        m.d.comb += self.o.eq(a1_y)
        dec_b_o = Signal(uvec)
        DEC_IN = DEC // 3                 # registers before the decoders, inside, after them
        DEC_MID = DEC // 3
        DEC_OUT = DEC - DEC_IN - DEC_MID
        # With a register after the decoders, ALU 0's scalar operand (the command's immediate,
        # the lane register or the decoded ``b``) is selected in front of it, so that the
        # selection is not in front of the adder's order compare (command register -> source
        # select -> compare -> swap). The lane registers then load from the decoders' output
        # one cycle earlier (``dec_b_o``), still before the first element is selected.
        for l in range(units):
            # The deep pipeline registers the decoders on both sides and cuts them in the
            # middle (``DEC_MID``), so that neither block RAM -> controller mux -> decoder nor
            # decoder -> operand select -> ALU 0's first step is one cycle, and the INT32
            # decode (absolute value, count, shift, round) is split over two.
            da = m.submodules[f"dec_a{l}"] = FormatDecoder(self._formats, stages=DEC_MID)
            db = m.submodules[f"dec_b{l}"] = FormatDecoder(self._formats, stages=DEC_MID)
            # (the lanes' data registers have no reset: the user's valid bits say what they
            # hold)
            data_in = [delay(m, run, pick(x, l, 0), DEC_IN, f"in_{n}{l}", reset_less=True)
                       for n, x in (("a", self.a), ("b", self.b))]
            m.d.comb += [da.a.eq(data_in[0]), da.fmt.eq(self.fmt_a), da.en.eq(run),
                         db.a.eq(data_in[1]), db.fmt.eq(c.fmt_b), db.en.eq(run)]
            xa = delay(m, run, da.o, DEC_OUT, f"dec_a{l}_o", reset_less=True)
            xb = delay(m, run, db.o, DEC_OUT, f"dec_b{l}_o", reset_less=True)
            dec_b = db.o if DEC_OUT else xb
            m.d.comb += dec_b_o[l].eq(dec_b)
            alu0 = m.submodules[f"alu0_{l}"] = VectorAlu(ALU)
            s0 = Mux(c.src0 == Src.IMM, c.imm0,
                     Mux(c.src0 == Src.LANE, pick(lane_reg[0], l, DEC - DEC_OUT), dec_b))
            s0 = delay(m, run, s0, DEC_OUT, f"s0_{l}", reset_less=True)
            m.d.comb += [alu0.op.eq(c.op0), alu0.x.eq(xa), alu0.s.eq(s0), alu0.en.eq(run)]
            alu1 = m.submodules[f"alu1_{l}"] = VectorAlu(ALU)
            # With sub-beats, ALU 1's lane register is picked a cycle ahead into a register
            # (the lane registers hold still while elements flow), so that no multiplexer on
            # the sub-beat precedes ALU 1's operand select.
            lane1 = lane_reg[1][l] if G == 1 else \
                delay(m, run, pick(lane_reg[1], l, DEC + ALU), 1, f"lane1_{l}", reset_less=True)
            s1 = Mux(c.src1 == Src.IMM, c.imm1, Mux(c.src1 == Src.LANE, lane1, a0_t[l]))
            m.d.comb += [alu1.op.eq(c.op1), alu1.x.eq(a0_y[l]), alu1.s.eq(s1), alu1.en.eq(run)]
            m.d.sync += [a0_y[l].eq(alu0.o),
                         a0_t[l].eq(delay(m, run, xb, ALU, f"b{l}", reset_less=True)),
                         a1_y[l].eq(alu1.o)]

        # The decoded prologue beat is at the decoders' output DEC - DEC_OUT cycles after it
        # is taken (the registers before and inside them), before the first element of the
        # instruction is selected in front of the register after them. With sub-beats the
        # beat is decoded in ``G`` sub-beats, each into its lanes.
        for i, take_lane in enumerate((self.take_lane0, self.take_lane1)):
            take = delay(m, 1, take_lane, DEC - DEC_OUT, f"take_lane{i}")
            if G == 1:
                with m.If(take):
                    m.d.sync += lane_reg[i].eq(dec_b_o)
                continue
            for j in range(G):
                with m.If(take & (sub_at(DEC - DEC_OUT) == j)):
                    m.d.sync += [lane_of(lane_reg[i], j, u).eq(dec_b_o[u]) for u in range(units)]
        return m
