"""The vector/activation engine (``docs/vector.md``; golden model ``sim.vector``)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.utils import ceil_log2
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.skid import SkidBuffer
from rtl.vector.front import VectorFront
from rtl.vector.issue import CMD_LAYOUT, VectorIssue
from rtl.vector.lane_acc import LaneAcc
from rtl.vector.lut import CFG_LAYOUT, Lut, check_depth, check_lanes, check_units
from rtl.vector.output import VectorOutput
from sim.config import check_bool, check_int
from sim.dtypes import Format
from sim.rounding import MAX_N_RAND, RAW_MODE
from sim.vector import AccOp, element_cycles

__all__ = ["VectorEngine", "CMD_LAYOUT"]

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
    cycles (``lanes // units`` at least), and ``latency`` is ``lanes // units - 2`` cycles
    longer from three sub-beats on: the rounding unit then has one encoder per unit and encodes
    a beat in sub-beats (``rtl.vector.serial_round.SerialRounding``).

    The pipeline has no clock enable: it never stalls. Its results enter a FIFO of
    ``fifo_depth`` entries before the rounding unit, and an element is taken only while the
    FIFO has room for it and for every element in flight (a credit counter), so
    back-pressure on ``o`` fills the FIFO and then holds the inputs, and nothing is lost.
    ``o`` leaves through a skid buffer (``rtl.bus.skid.SkidBuffer``: no latency, ``o.ready``
    reaches only a register); ``a`` and ``b`` enter through skid buffers as well: their
    ``ready`` is a register (low for a cycle after a beat waited), and a beat may be taken
    before the engine uses it. Results still in the FIFO or the rounding unit when the engine
    returns to idle leave in order, with the format and rounding mode of their instruction.

    The engine connects its parts: ``VectorIssue`` (the instruction sequence and the credits),
    ``VectorFront`` (decoders, ALU 0 and ALU 1, lane registers), ``Lut``, ``LaneAcc`` (hold
    register and accumulators) and ``VectorOutput`` (result FIFO, rounding unit, output skid
    buffer), each in its own file under ``rtl/vector/``.

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
        self._deep = check_bool("deep", deep)
        self._units = units = check_units(units, lanes)
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

    @property
    def acc_wait(self):
        """The accumulate adder's stages: extra cycles per element of a summing instruction with
        a unit per lane; with fewer units, an accumulating instruction (any ``acc_op`` but
        NONE) takes an element every ``acc_wait + 1`` cycles at the most."""
        return 3 if self._deep else 0

    @property
    def fifo_depth(self):
        """Entries of the result FIFO between the pipeline and the rounding unit: a power of
        two above an element's round trip (taken, through the pipeline and the FIFO, its
        credit back), so that credits never throttle a stream the output takes at full rate."""
        return 1 << ceil_log2(VectorFront.front(self._deep)[2] + Lut.latency_of(self._deep) + 8 +
                              self.subs - 1)

    @property
    def latency(self):
        """Cycles from an ``a`` beat taken to its ``o`` beat valid: the stages before the LUT,
        the LUT, the hold register ``y_h`` and the output stage
        (``VectorOutput.latency_of``: the result FIFO, the rounding unit's registers; with
        fewer units its sub-beats)."""
        return (VectorFront.front(self._deep)[2] + Lut.latency_of(self._deep) + 1 +
                VectorOutput.latency_of(self._deep, self.subs))

    def elaborate(self, platform):
        m = Module()
        lanes, units, G = self._lanes, self._units, self.subs
        vec = data.ArrayLayout(32, lanes)
        FRONT = VectorFront.front(self._deep)[2]

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
        # only when the result FIFO has room for everything in flight (credits, counted by the
        # sequencer), so nothing downstream can push back into the pipeline.
        m.submodules.out = out_stage = VectorOutput(lanes, self.fifo_depth, self._n_rand,
                                                    deep=self._deep, units=units)
        m.d.comb += [out_stage.seed.eq(self.seed), out_stage.seed_load.eq(self.seed_load)]
        wiring.connect(m, out_stage.o, wiring.flipped(self.o))

        # The input streams enter through skid buffers, so that the controller's streamers see
        # a ready that is a register here.
        m.submodules.a_skid = a_skid = SkidBuffer(vec)
        m.submodules.b_skid = b_skid = SkidBuffer(vec)
        wiring.connect(m, wiring.flipped(self.a), a_skid.i)
        wiring.connect(m, wiring.flipped(self.b), b_skid.i)
        a_in, b_in = a_skid.o, b_skid.o

        m.submodules.issue = issue = VectorIssue(G, self.acc_wait, self.fifo_depth)
        wiring.connect(m, wiring.flipped(self.cmd), issue.cmd)
        c = issue.c
        m.d.comb += [issue.a_valid.eq(a_in.valid), a_in.ready.eq(issue.a_ready),
                     issue.b_valid.eq(b_in.valid), b_in.ready.eq(issue.b_ready)]

        m.submodules.front = front = VectorFront(lanes, units, self._formats, deep=self._deep)
        m.d.comb += [front.a.eq(a_in.payload), front.b.eq(b_in.payload), front.c.eq(c),
                     front.fmt_a.eq(issue.fmt_a), front.take_lane0.eq(issue.take_lane0),
                     front.take_lane1.eq(issue.take_lane1)]
        if G > 1:
            m.d.comb += front.sub.eq(issue.sub)

        # -- pipeline valid/kind bits: the stages before the LUT, the LUT's --------------------
        # With fewer units than lanes an element enters as ``G`` sub-beats in consecutive
        # cycles: ``p_sub`` follows the sub-beat down the pipeline.
        n = FRONT + lut.latency
        p_valid = [Signal(name=f"p{i}_valid") for i in range(n)]
        p_emit = [Signal(name=f"p{i}_emit") for i in range(n)]  # 1: acc read-out
        m.d.sync += [p_valid[0].eq(issue.inject_sub), p_emit[0].eq(issue.inject_emit)]
        for i in range(1, n):
            m.d.sync += [p_valid[i].eq(p_valid[i - 1]), p_emit[i].eq(p_emit[i - 1])]
        if G > 1:
            p_sub = [Signal(range(G), name=f"p{i}_sub") for i in range(n)]
            m.d.sync += [p_sub[0].eq(issue.sub)] + [p_sub[i].eq(p_sub[i - 1])
                                                    for i in range(1, n)]
        a1_valid, a1_emit = p_valid[FRONT - 1], p_emit[FRONT - 1]

        # -- LUT ----------------------------------------------------------------------------
        m.d.comb += [lut.z.eq(front.o), lut.bank.eq(c.bank), lut.bypass.eq(~c.lut),
                     lut.count.eq(a1_valid & ~a1_emit & c.lut), lut.en.eq(1),
                     lut.lock.eq(self.busy & c.lut)]

        # -- hold register, accumulate, into the FIFO -------------------------------------
        # ``y_h`` takes each element at the LUT's end and holds it until the next one (at
        # least ``acc_wait + 1`` cycles later in a summing instruction), which the
        # accumulate adder reads with ``acc``; ``acc`` takes the sum ``acc_wait`` cycles later.
        m.submodules.acc = acc = LaneAcc(lanes, units, self.acc_wait)
        m.d.comb += [acc.y.eq(lut.y), acc.y_valid.eq(p_valid[-1]), acc.y_emit.eq(p_emit[-1]),
                     acc.op.eq(c.acc_op), acc.summing.eq(issue.summing),
                     acc.rst.eq(issue.acc_rst)]
        if G > 1:
            m.d.comb += acc.sub.eq(p_sub[-1])
        out = acc.yh_valid & (acc.yh_emit | c.emit)
        # A raw copy's elements leave the rounding unit unchanged (FP32, RAW_MODE); its
        # accumulator beat is encoded as any other.
        el_raw = issue.raw & ~acc.yh_emit
        w = out_stage.w_data
        m.d.comb += [w.data.eq(Mux(acc.yh_emit, acc.acc, acc.y_h)),
                     w.fmt.eq(Mux(el_raw, Format.FP32, c.fmt_o)),
                     w.mode.eq(Mux(el_raw, RAW_MODE, c.rmode)),
                     out_stage.w_en.eq(out)]
        # A credit returns when a beat leaves the FIFO or an element without output (``emit``
        # 0) leaves the hold register.
        m.d.comb += [issue.ret_fifo.eq(out_stage.ret), issue.ret_drop.eq(acc.yh_valid & ~out),
                     issue.empty.eq(~(acc.yh_valid | acc.busy | Cat(*p_valid).any()))]

        # busy covers a beat waiting in an input skid buffer: the controller counts a beat as
        # sent once the buffer has it, possibly before this engine has taken its command.
        m.d.comb += self.busy.eq(~issue.idle | a_skid.full | b_skid.full)
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
