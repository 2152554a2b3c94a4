"""The vector/activation engine (``docs/vector.md``; golden model ``sim.vector``)."""

import contextlib

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.utils import ceil_log2
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.arith.decoder import FormatDecoder
from rtl.arith.fp32_add import FP32Adder
from rtl.bus.pipeline_register import PipelineRegister
from rtl.bus.skid import SkidBuffer
from rtl.round.rounding_unit import RoundingUnit
from rtl.vector.alu import VectorAlu
from rtl.vector.interleaved_acc import InterleavedAcc
from rtl.vector.lut import CFG_LAYOUT, Lut, check_depth, check_lanes
from sim.dtypes import CANONICAL_NAN_F32, Format
from sim.config import check_int
from sim.rounding import MAX_N_RAND, RAW_MODE
from sim.vector import CMD_FIELDS, AccOp, AluOp, Src, acc_identity, element_cycles

__all__ = ["VectorEngine", "CMD_LAYOUT"]

#: The ``cmd`` stream payload (field order and widths from ``sim.vector.CMD_FIELDS``).
CMD_LAYOUT = data.StructLayout({name: width for name, width in CMD_FIELDS})


def _order_key(value, ez):
    """``order_key`` (``sim.vector``) of the DAZ'd ``value``, from its DAZ flag ``ez`` (the
    exponent is 0): a monotonic unsigned key, -0 and +0 equal."""
    sign = Const(0x80000000, 32)
    return Mux(ez, sign, Mux(value[31], ~value, value | sign))



def _acc_identity_of(m, acc_op):
    """A 32-bit signal holding ``acc_identity`` of the accumulate op ``acc_op`` (the value an
    accumulator restarts from)."""
    value = Signal(32)
    with m.Switch(acc_op):
        for op in AccOp:
            with m.Case(int(op)):
                m.d.comb += value.eq(acc_identity(op))
    return value

class _AccUnit(wiring.Component):
    """``acc OP y`` for the accumulate ops (``sim.vector.acc_update``). MAX and MIN are
    combinational; SUM's adder has ``stages`` free-running registers, so its result is valid
    once ``acc`` and ``y`` have been stable for ``stages`` cycles (the engine spaces summed
    elements that far apart and holds ``y`` meanwhile).

    ``rst`` makes ``o`` ``rst_value`` (an instruction's ``acc_reset``: its op's identity).

    MAX and MIN run once per element, from ``acc`` back into it, so that loop has no register
    to spare: the DAZ'd value, order key, DAZ flag and NaN flag of ``y`` come with it
    (``y_daz``, ``y_key``, ``y_ez``, ``y_nan``, registered with ``y``), and the key and flags
    of ``acc`` are kept here in registers. With
    ``we`` (``acc`` takes ``o`` this cycle) under MAX or MIN they take those of the result (the
    larger or smaller key: the key of the chosen value); otherwise they follow ``acc`` one
    cycle late, so that no key computation from ``acc`` is inside the accumulator's loop.

    The compare of the keys (``gt``: acc's above y's) is looked up a cycle ahead: ``next_key``
    is the key of the element ``y`` takes at the next edge, compared in this cycle with ``y``'s
    key and with acc's (registered: ``c_prev``, ``c_acc``); whether acc then holds ``y``'s
    value is registered too (``took_y``), and ``gt`` is a multiplexer of those three
    flip-flops. So ``acc`` must have been stable for three cycles before an element under MAX
    or MIN (the engine's instructions start with a pipeline fill far longer than that). No
    32-bit compare is in the loop (``y_key`` -> carry chains -> ``acc``)."""

    def __init__(self, stages=0):
        self._stages = stages
        super().__init__({"op": In(2), "acc": In(32), "y": In(32), "y_daz": In(32),
                          "y_key": In(32), "next_key": In(32), "y_ez": In(1), "y_nan": In(1),
                          "we": In(1),
                          "rst": In(1),
                          "rst_value": In(32), "o": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.add = add = FP32Adder(stages=self._stages)
        m.d.comb += [add.a.eq(self.acc), add.b.eq(self.y)]
        sign = Const(0x80000000, 32)
        acc = self.acc
        a_key = Signal(32)
        a_ez = Signal()
        a_nan = Signal()
        a = Signal(32)                   # acc, DAZ'd
        m.d.comb += a.eq(Mux(a_ez, acc & sign, acc))
        ka, ky, y_ez, y = a_key, self.y_key, self.y_ez, self.y_daz
        nan = a_nan | self.y_nan
        gt = Signal()
        c_prev, c_acc, took_y = Signal(), Signal(), Signal()
        m.d.sync += [c_prev.eq(ky > self.next_key), c_acc.eq(ka > self.next_key)]
        m.d.comb += gt.eq(Mux(took_y, c_prev, c_acc))
        both = Mux(a[31] & y[31], sign, 0)
        either = Mux(a[31] | y[31], sign, 0)
        is_max, is_min = self.op == AccOp.MAX, self.op == AccOp.MIN
        # Only ``gt`` (acc's key above y's) selects, last, between two candidates formed beside
        # it, so that no chain of multiplexers after the compares (max/min, NaN, the op, the
        # reset) and no select of six inputs precedes ``acc``. ``gt`` low means y's key above or
        # equal; equal keys are equal DAZ'd values unless both are zeros (the zero key), so the "not
        # gt" candidate is y's outcome except when both are zeros, where it is the zeros' tie rule.
        mm = Signal()                    # MAX or MIN decides this cycle
        m.d.comb += mm.eq((is_max | is_min) & ~nan & ~self.rst)
        tie = Mux(is_max, both, either)
        v_gt = Mux(is_max, a, y)         # acc's key above: MAX keeps acc, MIN takes y
        v_le = Mux(a_ez & y_ez, tie, Mux(is_max, y, a))
        other = Signal(32)
        with m.If(self.rst):
            m.d.comb += other.eq(self.rst_value)
        with m.Elif(self.op == AccOp.SUM):
            m.d.comb += other.eq(add.o)
        with m.Elif(is_max | is_min):
            m.d.comb += other.eq(CANONICAL_NAN_F32)      # (mm low: a NaN)
        with m.Else():
            m.d.comb += other.eq(self.acc)
        o_gt = Signal(32)
        o_le = Signal(32)
        m.d.comb += [o_gt.eq(Mux(mm, v_gt, other)), o_le.eq(Mux(mm, v_le, other)),
                     self.o.eq(Mux(gt, o_gt, o_le))]
        # The result's key is that of the value chosen (a DAZ'd operand, or a zero of key
        # ``sign`` when both are zeros); its DAZ flag likewise (equal keys: equal flags, so
        # the "not gt" candidate may be y's). Selected by ``gt`` last as well.
        upd = Signal()
        m.d.comb += upd.eq(self.we & (is_max | is_min))
        acc_ez = acc[23:31] == 0
        acc_key = _order_key(acc, acc_ez)
        acc_nan = (acc[23:31] == 0xFF) & (acc[0:23] != 0)
        k_gt = Mux(upd, Mux(is_max, ka, ky), acc_key)
        k_le = Mux(upd, Mux(is_max, ky, ka), acc_key)
        ez_gt = Mux(upd, Mux(is_max, a_ez, y_ez), acc_ez)
        ez_le = Mux(upd, Mux(is_max, y_ez, a_ez), acc_ez)
        m.d.sync += [a_key.eq(Mux(gt, k_gt, k_le)), a_ez.eq(Mux(gt, ez_gt, ez_le)),
                     a_nan.eq(Mux(upd, nan, acc_nan)),
                     # acc's key next cycle is y's: MAX with y's above or equal, MIN with
                     # acc's above
                     took_y.eq(upd & Mux(is_max, ~gt, gt))]
        return m


class VectorEngine(wiring.Component):
    """The vector/activation engine: per lane ``y2 = LUT(ALU1(ALU0(decode(a), s0), s1))``,
    accumulate into per-lane registers, encode through the rounding unit.

    An exact INT32 copy (``sim.vector.raw_copy``: INT32 in and out, both ALUs BYPASS, no LUT)
    converts nothing: the decoders take the word as FP32 (unchanged) and the rounding unit
    passes it in its raw mode (``sim.rounding.RAW_MODE``), so every 32-bit pattern arrives.

    One instruction at a time: a ``cmd`` beat is taken when the engine is idle; the engine
    then reads the prologue ``b`` beats (per-lane scalars), streams ``count`` elements (``a``,
    and ``b`` for tensor operands), emits ``o`` beats (one per element if ``emit``, plus the
    accumulators if ``emit_acc``) and drains its pipeline before the next ``cmd``. Throughput:
    one element (all lanes) per cycle, except that a summing instruction (``acc_op`` SUM)
    takes an element only every ``1 + acc_wait`` cycles, while its pipelined adder settles (3
    deep, 0 not); an element's ``o`` beat is valid ``latency`` cycles after its ``a`` beat is
    taken (52 deep, 14 not), so an instruction takes about ``count * (1 + acc_wait) + latency
    + 2`` cycles. With fewer ``units`` than lanes an element takes ``element_cycles(acc_op)``
    cycles (``lanes // units`` at least) and ``latency`` is unchanged.

    The pipeline has no clock enable: it never stalls. Its results enter a FIFO of
    ``fifo_depth`` entries before the rounding unit, and an element is taken only while the
    FIFO has room for it and for every element in flight (a credit counter), so
    back-pressure on ``o`` fills the FIFO and then holds the inputs, and nothing is lost.
    ``o`` leaves through a skid buffer (``rtl.bus.skid.SkidBuffer``: no latency, ``o.ready``
    reaches only a register); ``a`` and ``b`` enter through skid buffers as well: their
    ``ready`` is a register (low for a cycle after a beat waited), and a beat may be taken
    before the engine uses it. Results still in the FIFO or the rounding unit when the engine
    returns to idle leave in order, with the format and rounding mode of their instruction.

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    depth : int
        LUT entries per bank (power of two, 8..1024).
    formats : collection of Format
        Input formats the decoders support (``rtl.arith.decoder.FormatDecoder``).
    n_rand : int
        Random bits per SR decision of the rounding unit.
    deep : bool
        Pipeline the decoders, the ALUs' FP32 units and the LUT (``Lut(deep=True)``) for clock
        speed; ``False`` keeps the short pipeline (each ALU and each LUT step in one cycle).
        Results are identical; only ``latency`` differs.
    units : int or None
        Evaluation units: decoders, ALUs, LUT pipelines and accumulate adders (``None``: one
        per lane). Fewer units (a divisor of ``lanes``) make a compact engine: an element
        beat of ``lanes`` elements passes through the units in ``lanes // units`` consecutive
        cycles (sub-beat ``j`` carries lanes ``j * units + u``), the accumulators are
        ``InterleavedAcc``, and an instruction takes an element every ``element_cycles(acc_op)``
        cycles (``sim.vector.element_cycles``). Results are identical.

    Members
    -------
    cmd : In(stream.Signature(CMD_LAYOUT))
        Instructions (fields in ``sim.vector.CMD_FIELDS``).
    a, b : In(stream.Signature(ArrayLayout(32, lanes)))
        Raw elements, formats ``fmt_a`` / ``fmt_b`` of the command, low-aligned.
    o : Out(stream.Signature(ArrayLayout(32, lanes)))
        Encoded results (``fmt_o``, ``rmode``), low-aligned.
    cfg, rdata, error :
        LUT configuration port (``rtl.vector.lut.Lut``: a beat is taken into a register, so
        ``ready`` is a register, and carried out from it; one beat every two cycles at most, a
        read's ``rdata`` two cycles after it is taken). A beat in that register does not make
        the engine ``busy``: it is carried out before any later instruction reaches the LUT.
    seed : In(32), seed_load : In(1)
        Re-seed the rounding unit's generators (a pulse).
    busy : Out(1)
        An instruction is in progress, or an input beat waits in a skid buffer (results may
        still be in the FIFO or the rounding unit).
    idle_q : Out(1)
        ``~busy`` from one register, for controllers whose completion logic follows it: 0
        whenever ``busy`` or ``idle_hold`` is 1, and 1 one cycle after both have fallen (a
        register of ``busy``'s terms, ``idle_hold`` and the beats and instruction taken in the
        cycle before).
    idle_hold : In(1)
        The user's own terms to fold into ``idle_q`` (the core: a LUT configuration beat
        waiting in a register in front of ``cfg``, or entering it); they must also cover the
        cycle after they end, as ``busy``'s terms do.
    """

    def __init__(self, lanes, depth=512, formats=tuple(Format), n_rand=16, *, deep=True,
                 units=None):
        self._lanes = check_lanes(lanes)
        self._depth = check_depth(depth)
        if not isinstance(deep, bool):
            raise TypeError(f"deep must be a bool, not {deep!r}")
        self._deep = deep
        if units is None:
            units = lanes
        check_int("units", units, 1, lanes)
        if lanes % units:
            raise ValueError(f"units must be a divisor of lanes ({lanes}), not {units}")
        self._units = units
        self._formats = tuple(formats)
        self._n_rand = check_int("n_rand", n_rand, 1, MAX_N_RAND)
        vec = data.ArrayLayout(32, lanes)
        super().__init__({
            "cmd": In(stream.Signature(CMD_LAYOUT)),
            "a": In(stream.Signature(vec)),
            "b": In(stream.Signature(vec)),
            "o": Out(stream.Signature(vec)),
            "cfg": In(stream.Signature(CFG_LAYOUT)),
            "rdata": Out(stream.Signature(32)),
            "error": Out(1),
            "seed": In(32),
            "seed_load": In(1),
            "busy": Out(1),
            "idle_q": Out(1, init=1),
            "idle_hold": In(1),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def depth(self):
        return self._depth

    @property
    def deep(self):
        return self._deep

    @property
    def units(self):
        return self._units

    @property
    def subs(self):
        """Cycles an element beat spends entering the units (``lanes // units``)."""
        return self._lanes // self._units

    def element_cycles(self, acc_op=AccOp.NONE):
        """Cycles per element beat of an instruction with ``acc_op`` when nothing stalls
        (``sim.vector.element_cycles``)."""
        return element_cycles(self.subs, self.acc_wait, acc_op)

    @staticmethod
    def _front(deep):
        """Register stages before the LUT: (registers of the decoders, ALU stages) and their
        sum (the input register before the decoders, their own stage and the register after
        them, ALU 0 and its output register, ALU 1 and its output register)."""
        dec, alu = (3, 4) if deep else (0, 0)
        return dec, alu, dec + 2 * (alu + 1)

    @property
    def acc_wait(self):
        """The accumulate adder's stages: extra cycles per element of a summing instruction with
        a unit per lane; with fewer units, an accumulating instruction (any ``acc_op`` but
        NONE) takes an element every ``acc_wait + 1`` cycles at the most."""
        return 3 if self._deep else 0

    @staticmethod
    def _ru_encoder_stages(deep):
        return 3 if deep else 0

    @property
    def fifo_depth(self):
        """Entries of the result FIFO between the pipeline and the rounding unit: a power of
        two above an element's round trip (taken, through the pipeline and the FIFO, its
        credit back), so that credits never throttle a stream the output takes at full rate."""
        return 1 << ceil_log2(self._front(self._deep)[2] + Lut.latency_of(self._deep) + 8 +
                              self.subs - 1)

    @property
    def latency(self):
        """Cycles from an ``a`` beat taken to its ``o`` beat valid: the stages before the LUT,
        the LUT, the hold register ``y_h``, the result FIFO (2), the register after it and
        the rounding unit's registers (input, encoder stages, output)."""
        return (self._front(self._deep)[2] + Lut.latency_of(self._deep) + 1 + 2 + 1 + 2 +
                self._ru_encoder_stages(self._deep))

    def _lane_accs(self, m, y, y_valid, y_emit, acc_op, summing_cmd):
        """A unit per lane: the hold register ``y_h`` and an ``_AccUnit`` per lane. Returns
        ``y_h``, its valid and read-out flags, the accumulators, their pending flag, the
        reset pulse and value (driven by the caller's sequencing)."""
        lanes, ACC = self._lanes, self.acc_wait
        vec = data.ArrayLayout(32, lanes)
        acc = Signal(vec)
        lut_y = y
        y_h = Signal(vec)
        yh_key = Signal(vec)             # DAZ'd value, key, DAZ and NaN flags of y_h (_AccUnit)
        yh_daz = Signal(vec)
        yh_ez = Signal(lanes)
        yh_nan = Signal(lanes)
        yh_valid = Signal()
        yh_emit = Signal()
        m.d.sync += [yh_valid.eq(y_valid), yh_emit.eq(y_emit)]
        next_key = Signal(vec)           # the key ``yh_key`` takes with the next element
        next_ez = [lut_y[l][23:31] == 0 for l in range(lanes)]
        m.d.comb += [next_key[l].eq(_order_key(lut_y[l], next_ez[l])) for l in range(lanes)]
        with m.If(y_valid):
            m.d.sync += y_h.eq(lut_y)
            for l in range(lanes):
                yl, ez = lut_y[l], next_ez[l]
                m.d.sync += [yh_key[l].eq(next_key[l]), yh_ez[l].eq(ez),
                             yh_daz[l].eq(Mux(ez, yl & 0x80000000, yl)),
                             yh_nan[l].eq((yl[23:31] == 0xFF) & (yl[0:23] != 0))]
        elem = yh_valid & ~yh_emit
        if ACC:
            acc_we = Signal()
            pend = [Signal(name=f"acc_pend{i}") for i in range(ACC)]
            m.d.sync += pend[0].eq(elem & summing_cmd)
            for i in range(1, ACC):
                m.d.sync += pend[i].eq(pend[i - 1])
            m.d.comb += acc_we.eq(Mux(summing_cmd, pend[-1], elem))
            acc_pending = Cat(*pend).any()
        else:
            acc_we = elem
            acc_pending = Const(0)
        # An instruction's acc_reset loads its op's identity through the units in the cycle
        # after the instruction is taken (``acc_rst`` registered, the op from ``c``): the
        # pipeline is empty then (IDLE follows DRAIN's ``empty``), so no element is accumulated
        # in that cycle, and the controller's queue head does not reach the accumulators
        # (``op_q`` -> ``acc_reset`` -> the accumulator's input).
        acc_rst = Signal()
        acc_rst_value = _acc_identity_of(m, acc_op)
        for l in range(lanes):
            au = m.submodules[f"acc{l}"] = _AccUnit(ACC)
            m.d.comb += [au.op.eq(acc_op), au.acc.eq(acc[l]), au.y.eq(y_h[l]),
                         au.y_daz.eq(yh_daz[l]),
                         au.y_key.eq(yh_key[l]), au.next_key.eq(next_key[l]),
                         au.y_ez.eq(yh_ez[l]), au.y_nan.eq(yh_nan[l]),
                         au.we.eq(acc_we), au.rst.eq(acc_rst), au.rst_value.eq(acc_rst_value)]
            with m.If(acc_we | acc_rst):
                m.d.sync += acc[l].eq(au.o)
        return y_h, yh_valid, yh_emit, acc, acc_pending, acc_rst, acc_rst_value

    def _assemble(self, m, y, y_valid, y_emit, y_sub, acc_op):
        """Fewer units than lanes: the sub-beats leaving the LUT (``y``, sub-beat ``y_sub``)
        are accumulated as they come (``InterleavedAcc``) and gathered into the element's
        hold register ``y_h``; the first ``G - 1`` wait in ``y_col``. ``yh_valid`` is the
        element complete (or the read-out). Returns what ``_lane_accs`` returns."""
        lanes, units, G, ACC = self._lanes, self._units, self.subs, self.acc_wait
        y_h = Signal(data.ArrayLayout(32, lanes))
        y_col = Signal(data.ArrayLayout(32, lanes - units))
        yh_valid = Signal()
        yh_emit = Signal()
        last = y_sub == G - 1
        m.d.sync += [yh_valid.eq(y_valid & (y_emit | last)), yh_emit.eq(y_emit)]
        for j in range(G - 1):
            with m.If(y_valid & (y_sub == j)):
                m.d.sync += [y_col[j * units + u].eq(y[u]) for u in range(units)]
        with m.If(y_valid & last):
            m.d.sync += y_h.eq(Cat(y_col, y))
        acc_rst = Signal()
        acc_rst_value = _acc_identity_of(m, acc_op)
        m.submodules.acc = acc = InterleavedAcc(lanes, units, ACC)
        m.d.comb += [acc.op.eq(acc_op), acc.valid.eq(y_valid & ~y_emit), acc.sub.eq(y_sub),
                     acc.y.eq(y), acc.rst.eq(acc_rst), acc.rst_value.eq(acc_rst_value)]
        return y_h, yh_valid, yh_emit, acc.acc, acc.busy, acc_rst, acc_rst_value

    def elaborate(self, platform):
        m = Module()
        lanes, units, G = self._lanes, self._units, self.subs
        vec = data.ArrayLayout(32, lanes)
        uvec = data.ArrayLayout(32, units)
        DEC, ALU, FRONT = self._front(self._deep)

        m.submodules.lut = lut = Lut(units, self._depth, deep=self._deep)
        # The LUT takes a cfg beat into a register and its ready is that register's (its
        # address decode, the bank lock and a pending read stay out of the sender): through
        # a combinational ready the core's TABLE beats would run streamer output -> LUT cfg
        # write -> the streamer's and the controller's queue enables in one cycle.
        wiring.connect(m, wiring.flipped(self.cfg), lut.cfg)
        wiring.connect(m, lut.rdata, wiring.flipped(self.rdata))
        m.d.comb += self.error.eq(lut.error)

        # -- the pipeline runs free: no clock enable ------------------------------------------
        # Every stage from the input registers to the hold register ``y_h`` moves every cycle.
        # No pipeline-wide stall is the clock enable of the data registers (some 3,000
        # flip-flops per two lanes; such a fan-out crosses the chip). Instead an element enters
        # only when the
        # result FIFO has room for everything in flight (credits), so nothing downstream can
        # push back into the pipeline.
        # The rounding unit registers its input (stages=2): the FIFO's data is a block RAM's
        # output, which reaches a register, not the encoder's first stage.
        m.submodules.ru = ru = RoundingUnit(lanes=lanes, n_rand=self._n_rand, stages=2,
                                            encoder_stages=self._ru_encoder_stages(self._deep))
        # A FIFO entry is a rounding-unit beat (its ``i`` payload layout): the values with their
        # instruction's fmt_o and rmode, so that results left in the FIFO at the end of an
        # instruction keep them.
        beat = ru.i.payload.shape()
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(
            width=beat.size, depth=self.fifo_depth)
        # A register stage between the FIFO and the rounding unit: the FIFO's data is a block
        # RAM's output, and the beat's rounding mode decides whether the lanes' PRNGs advance
        # (the clock enable of some 200 flip-flops per lane), so no block RAM output reaches
        # a PRNG's enable.
        m.submodules.ru_in = ru_in = PipelineRegister(beat)
        # The skid buffer keeps o.ready (the SBUF write arbiter's) out of the rounding unit.
        m.submodules.o_skid = skid = SkidBuffer(vec)
        m.d.comb += [ru.seed.eq(self.seed), ru.seed_load.eq(self.seed_load),
                     ru_in.i.valid.eq(ofifo.r_rdy), ofifo.r_en.eq(ru_in.i.ready),
                     ru_in.i.payload.eq(ofifo.r_data),
                     ru.i.valid.eq(ru_in.o.valid), ru_in.o.ready.eq(ru.i.ready),
                     ru.i.payload.eq(ru_in.o.payload),
                     skid.i.valid.eq(ru.o.valid), skid.i.payload.eq(ru.o.payload.data),
                     ru.o.ready.eq(skid.i.ready)]
        wiring.connect(m, skid.o, wiring.flipped(self.o))

        # The input streams enter through skid buffers, so that the controller's streamers see
        # a ready that is a register here.
        m.submodules.a_skid = a_skid = SkidBuffer(vec)
        m.submodules.b_skid = b_skid = SkidBuffer(vec)
        wiring.connect(m, wiring.flipped(self.a), a_skid.i)
        wiring.connect(m, wiring.flipped(self.b), b_skid.i)
        a_in, b_in = a_skid.o, b_skid.o

        c = Signal(CMD_LAYOUT)           # the current instruction
        # ``sim.vector.raw_copy`` of the instruction, and the format its decoders use (FP32,
        # which passes the word unchanged, for a raw copy), both registered with ``c``.
        raw = Signal()
        dec_fmt_a = Signal(3)
        remaining = Signal(16)
        # remaining == 0, kept beside it, so that no 16-bit test precedes the credit counter
        # and the input handshakes.
        rem_zero = Signal()
        lane_reg = [Signal(vec, name="lane_reg0"), Signal(vec, name="lane_reg1")]
        run = Const(1)                   # the pipeline's (constant) enable

        # -- pipeline valid/kind bits: the stages before the LUT, the LUT's --------------------
        lat = lut.latency
        p_valid = [Signal(name=f"p{i}_valid") for i in range(FRONT + lat)]
        p_emit = [Signal(name=f"p{i}_emit") for i in range(FRONT + lat)]  # 1: acc read-out
        a1_valid, a1_emit = p_valid[FRONT - 1], p_emit[FRONT - 1]
        inject = Signal()                # an element (all lanes) or the acc read-out enters
        inject_emit = Signal()
        # With fewer units than lanes an element enters as ``G`` sub-beats in consecutive
        # cycles (``inject`` with the first): ``sub`` is the sub-beat entering (the lanes
        # ``sub * units + u``) and ``p_sub`` follows it down the pipeline, taken every cycle,
        # so that ``sub_at(k)`` is the sub-beat of the stage ``k`` cycles after its entry.
        inject_sub = inject
        sub = Const(0, 1)
        p_sub = []
        if G > 1:
            inject_sub = Signal()
            sub = Signal(range(G))
            p_sub = [Signal(range(G), name=f"p{i}_sub") for i in range(FRONT + lat)]
            m.d.sync += [p_sub[0].eq(sub)] + [p_sub[i].eq(p_sub[i - 1])
                                              for i in range(1, FRONT + lat)]

        def sub_at(k):
            return sub if k == 0 else p_sub[k - 1]

        def lane_of(vector, j, u):
            return vector[j * units + u]

        def pick(vector, u, k):
            """Unit ``u``'s word of a lanes-wide ``vector`` for the sub-beat ``sub_at(k)``."""
            if G == 1:
                return vector[u]
            return Cat(*(lane_of(vector, j, u) for j in range(G))).word_select(sub_at(k), 32)

        # Credits: ``fifo_depth`` minus the elements in flight (injected, not yet through the hold
        # register) minus the FIFO's content. An element may enter only with a credit left,
        # so the FIFO never overflows; a credit returns when the rounding unit takes a beat
        # from the FIFO or when an element without output (``emit`` 0) leaves the hold register.
        credits = Signal(range(self.fifo_depth + 1), init=self.fifo_depth)
        # A summed element is followed by ``acc_wait`` empty cycles, so that the accumulate
        # adder (free-running, ``acc_wait`` stages) sees its operands stable that long.
        ACC = self.acc_wait
        gap = Signal(range(ACC + 1))
        # (with fewer units every accumulating instruction: the shared unit's loop)
        summing_cmd = (c.acc_op == AccOp.SUM) if G == 1 else (c.acc_op != AccOp.NONE)
        can_inject = Signal()
        m.d.comb += can_inject.eq((credits != 0) & (gap == 0))
        if ACC:
            with m.If(inject & ~inject_emit & summing_cmd):
                m.d.sync += gap.eq(ACC)
            with m.Elif(gap != 0):
                m.d.sync += gap.eq(gap - 1)

        # -- decode and ALU 0 ---------------------------------------------------------------
        a0_y = Signal(uvec, reset_less=True)
        a0_t = Signal(uvec, reset_less=True)
        a1_y = Signal(uvec, reset_less=True)
        dec_b_o = Signal(uvec)
        need_b = (c.src0 == Src.TENSOR) | (c.src1 == Src.TENSOR)
        DEC_IN = DEC // 3                 # registers before the decoders, inside, after them
        DEC_MID = DEC // 3
        DEC_OUT = DEC - DEC_IN - DEC_MID
        # With a register after the decoders, ALU 0's scalar operand (the command's immediate,
        # the lane register or the decoded ``b``) is selected in front of it, so that the
        # selection is not in front of the adder's order compare (command register -> source
        # select -> compare -> swap). The lane registers
        # then load from the decoders' output one cycle earlier (``dec_b_o``), still before
        # the first element is selected.
        for l in range(units):
            # The deep pipeline registers the decoders on both sides and cuts them in the
            # middle (``DEC_MID``), so that neither block RAM -> controller mux -> decoder nor
            # decoder -> operand select -> ALU 0's first step is one cycle, and the INT32
            # decode (absolute value, count, shift, round) is split over two.
            da = m.submodules[f"dec_a{l}"] = FormatDecoder(self._formats, stages=DEC_MID)
            db = m.submodules[f"dec_b{l}"] = FormatDecoder(self._formats, stages=DEC_MID)
            # (the lanes' data registers have no reset: ``p_valid`` says what they hold)
            data_in = [delay(m, run, pick(x.payload, l, 0), DEC_IN, f"in_{n}{l}",
                             reset_less=True)
                       for n, x in (("a", a_in), ("b", b_in))]
            m.d.comb += [da.a.eq(data_in[0]), da.fmt.eq(dec_fmt_a), da.en.eq(run),
                         db.a.eq(data_in[1]),
                         db.fmt.eq(c.fmt_b), db.en.eq(run)]
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
        m.d.sync += [p_valid[0].eq(inject_sub), p_emit[0].eq(inject_emit)]
        for i in range(1, FRONT + lat):
            m.d.sync += [p_valid[i].eq(p_valid[i - 1]), p_emit[i].eq(p_emit[i - 1])]

        # -- LUT ----------------------------------------------------------------------------
        m.d.comb += [lut.z.eq(a1_y), lut.bank.eq(c.bank), lut.bypass.eq(~c.lut),
                     lut.count.eq(a1_valid & ~a1_emit & c.lut), lut.en.eq(run),
                     lut.lock.eq(self.busy & c.lut)]

        # -- hold register, accumulate, into the FIFO -------------------------------------
        # ``y_h`` takes each element at the LUT's end and holds it until the next one (at
        # least ``acc_wait + 1`` cycles later in a summing instruction), which the
        # accumulate adder reads with ``acc``; ``acc`` takes the sum ``acc_wait`` cycles later.
        y_valid, y_emit = p_valid[-1], p_emit[-1]
        if G == 1:
            y_h, yh_valid, yh_emit, acc_vec, acc_pending, acc_rst, acc_rst_value = \
                self._lane_accs(m, lut.y, y_valid, y_emit, c.acc_op, summing_cmd)
        else:
            y_h, yh_valid, yh_emit, acc_vec, acc_pending, acc_rst, acc_rst_value = \
                self._assemble(m, lut.y, y_valid, y_emit, p_sub[-1], c.acc_op)
        out = yh_valid & (yh_emit | c.emit)
        w_beat = Signal(beat)
        # A raw copy's elements leave the rounding unit unchanged (FP32, RAW_MODE); its
        # accumulator beat is encoded as any other.
        el_raw = raw & ~yh_emit
        m.d.comb += [w_beat.data.eq(Mux(yh_emit, acc_vec, y_h)),
                     w_beat.fmt.eq(Mux(el_raw, Format.FP32, c.fmt_o)),
                     w_beat.mode.eq(Mux(el_raw, RAW_MODE, c.rmode)),
                     ofifo.w_en.eq(out), ofifo.w_data.eq(w_beat)]
        # Both outcomes of ``inject`` are summed beside it (one adder each, from the register
        # and the returned credits), and it only selects.
        ret = Signal(2)
        ret_m1 = Signal(signed(3))
        m.d.comb += [ret.eq((ofifo.r_en & ofifo.r_rdy) + (yh_valid & ~out)),
                     ret_m1.eq(ret - 1)]
        m.d.sync += credits.eq(Mux(inject, credits + ret_m1, credits + ret))
        empty = ~(yh_valid | acc_pending | Cat(*p_valid).any())

        # -- lane operands (PRO0/PRO1 take one ``b`` beat each) -----------------------------
        # The decoded beat is at the decoders' output DEC - DEC_OUT cycles after it is taken
        # (the registers before and inside them), before the first element of BODY is
        # selected in front of the register after them (DEC - DEC_OUT cycles after it is
        # taken, one cycle later at the earliest).
        # With fewer units the beat is decoded in ``G`` sub-beats, each into its lanes.
        take_lane = [Signal(name="take_lane0"), Signal(name="take_lane1")]
        for i in range(2):
            take = delay(m, 1, take_lane[i], DEC - DEC_OUT, f"take_lane{i}")
            if G == 1:
                with m.If(take):
                    m.d.sync += lane_reg[i].eq(dec_b_o)
                continue
            for j in range(G):
                with m.If(take & (sub_at(DEC - DEC_OUT) == j)):
                    m.d.sync += [lane_of(lane_reg[i], j, u).eq(dec_b_o[u]) for u in range(units)]

        # -- instruction sequencing -------------------------------------------------------
        # cmd.ready and busy come from ``idle``, a flip-flop beside the FSM's state that is 1
        # exactly in IDLE: the controller's queue read enables and its completion logic follow
        # them, so no decode of the state precedes them. (Plain assignments, not set inside the FSM:
        # a process that only reads a never-changing state is not run at time 0 by Icarus in
        # SystemVerilog mode, which would leave them X.)
        # The sub-beat counter steps with each sub-beat entering (or decoded, in PRO0/PRO1)
        # and returns to 0 after the last, which takes the input beat.
        last_sub = (sub == G - 1) if G > 1 else Const(1, 1)

        def if_last():
            return m.If(last_sub) if G > 1 else contextlib.nullcontext()

        def step_sub():
            if G > 1:
                m.d.sync += sub.eq(Mux(last_sub, 0, sub + 1))
        # With fewer units, the read-out waits until the last element's last sub-beat is in
        # its accumulator: it reaches the accumulators' output at least ``G - 1 + ACC`` cycles
        # after that element entered (``emit_wait`` is loaded then).
        emit_wait = Signal(range(G + ACC + 1))
        if G > 1:
            with m.If(inject & summing_cmd):
                m.d.sync += emit_wait.eq(G + ACC - 2)
            with m.Elif(emit_wait != 0):
                m.d.sync += emit_wait.eq(emit_wait - 1)
        idle = Signal(init=1)
        m.d.sync += acc_rst.eq(0)
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.cmd.valid):
                    m.d.sync += idle.eq(0)
                    p = self.cmd.payload
                    m.d.sync += [c.eq(p), remaining.eq(p.count), rem_zero.eq(p.count == 0)]
                    p_raw = ((p.fmt_a == Format.INT32) & (p.fmt_o == Format.INT32) &
                             (p.op0 == AluOp.BYPASS) & (p.op1 == AluOp.BYPASS) & ~p.lut)
                    m.d.sync += [raw.eq(p_raw), dec_fmt_a.eq(Mux(p_raw, Format.FP32, p.fmt_a))]
                    m.d.sync += acc_rst.eq(p.acc_reset)
                    with m.If(p.src0 == Src.LANE):
                        m.next = "PRO0"
                    with m.Elif(p.src1 == Src.LANE):
                        m.next = "PRO1"
                    with m.Else():
                        m.next = "BODY"
            with m.State("PRO0"):
                m.d.comb += take_lane[0].eq(b_in.valid)
                if G == 1:
                    m.d.comb += b_in.ready.eq(1)
                with m.If(b_in.valid):
                    step_sub()
                    with if_last():
                        with m.If(c.src1 == Src.LANE):
                            m.next = "PRO1"
                        with m.Else():
                            m.next = "BODY"
            with m.State("PRO1"):
                m.d.comb += take_lane[1].eq(b_in.valid)
                if G == 1:
                    m.d.comb += b_in.ready.eq(1)
                with m.If(b_in.valid):
                    step_sub()
                    with if_last():
                        m.next = "BODY"
            with m.State("BODY"):
                def finish():
                    with m.If(c.emit_acc):
                        m.next = "EMIT"
                    with m.Else():
                        m.next = "DRAIN"

                def take():
                    b_ok = b_in.valid | ~need_b
                    if G == 1:
                        m.d.comb += [a_in.ready.eq(can_inject & b_ok),
                                     b_in.ready.eq(can_inject & a_in.valid & need_b)]
                    with m.If(can_inject & a_in.valid & b_ok):
                        m.d.comb += inject.eq(1)
                        m.d.sync += [remaining.eq(remaining - 1), rem_zero.eq(remaining == 1)]
                        if G > 1:
                            m.d.comb += inject_sub.eq(1)
                            step_sub()
                if G == 1:
                    with m.If(rem_zero):
                        finish()
                    with m.Else():
                        take()
                else:
                    # An element's sub-beats after its first enter unconditionally (the first
                    # took the credit); its input beats are taken with the last.
                    with m.If(sub != 0):
                        m.d.comb += inject_sub.eq(1)
                        step_sub()
                    with m.Elif(rem_zero):
                        finish()
                    with m.Else():
                        take()
            with m.State("EMIT"):
                with m.If(can_inject if G == 1 else can_inject & (emit_wait == 0)):
                    m.d.comb += [inject.eq(1), inject_emit.eq(1)]
                    if G > 1:
                        m.d.comb += inject_sub.eq(1)
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                with m.If(empty):
                    m.d.sync += idle.eq(1)
                    m.next = "IDLE"
        if G > 1:
            # The input beats are taken with their last sub-beat (BODY; PRO0/PRO1 decode the
            # prologue beat), as plain assignments outside the FSM like ``idle``'s, so that
            # Icarus evaluates them from time 0.
            in_body = fsm.ongoing("BODY")
            m.d.comb += [a_in.ready.eq(last_sub & in_body),
                         b_in.ready.eq(last_sub & (fsm.ongoing("PRO0") | fsm.ongoing("PRO1") |
                                                   in_body & need_b))]
        # busy covers a beat waiting in an input skid buffer: the controller counts a beat as
        # sent once the buffer has it, possibly before this engine has taken its command.
        m.d.comb += [self.cmd.ready.eq(idle),
                     self.busy.eq(~idle | a_skid.full | b_skid.full)]
        # ``idle_q``: ``busy`` of the next cycle can only be 1 if the engine is busy now or
        # takes an instruction or an input beat now (a skid buffer fills only from its input,
        # ``idle`` falls only on an instruction taken). A flip-flop, so that the input skid
        # buffers' ``full`` does not go through the vector controller's completion logic into
        # its queues' clock enables.
        m.d.sync += self.idle_q.eq(~(self.busy | self.idle_hold |
                                     (self.cmd.valid & self.cmd.ready) |
                                     (self.a.valid & self.a.ready) |
                                     (self.b.valid & self.b.ready)))
        return m
