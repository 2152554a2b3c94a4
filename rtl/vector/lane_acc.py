"""The vector engine's accumulators: the hold register of the element leaving the LUT and one
accumulator per lane (``sim.vector.acc_update``), with an accumulate unit per lane or shared
by sub-beats (``rtl.vector.interleaved_acc.InterleavedAcc``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.fp32_add import FP32Adder
from rtl.vector.interleaved_acc import InterleavedAcc
from rtl.vector.lut import check_lanes, check_units
from sim.config import check_int
from sim.dtypes import CANONICAL_NAN_F32
from sim.vector import AccOp, acc_identity

__all__ = ["AccUnit", "LaneAcc", "acc_identity_of", "order_key"]


def order_key(value, ez):
    """``order_key`` (``sim.vector``) of the DAZ'd ``value``, from its DAZ flag ``ez`` (the
    exponent is 0): a monotonic unsigned key, -0 and +0 equal."""
    sign = Const(0x80000000, 32)
    return Mux(ez, sign, Mux(value[31], ~value, value | sign))

def acc_identity_of(m, acc_op):
    """A 32-bit signal holding ``acc_identity`` of the accumulate op ``acc_op`` (the value an
    accumulator restarts from)."""
    value = Signal(32)
    with m.Switch(acc_op):
        for op in AccOp:
            with m.Case(int(op)):
                m.d.comb += value.eq(acc_identity(op))
    return value


class AccUnit(wiring.Component):
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
        acc_key = order_key(acc, acc_ez)
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


class LaneAcc(wiring.Component):
    """The elements leaving the LUT, held for the output, and accumulated per lane.

    ``y_h`` takes each element (all lanes) and holds it until the next one, for the result
    FIFO and, with a unit per lane, for the accumulate units, which read it with ``acc``.
    ``acc[l]`` becomes ``acc_update(op, acc[l], y_h[l])`` (``sim.vector.acc_update``) for
    each element that is not a read-out (``y_emit``).

    With ``units`` equal to ``lanes``: an ``AccUnit`` per lane. ``yh_valid`` follows
    ``y_valid`` by one cycle. An element is in the accumulators one cycle after ``yh_valid``
    under MAX, MIN and NONE, and ``stages + 1`` cycles after it while ``summing`` (``op``
    SUM: the adder's operands must then stay stable that long, so the next element comes
    ``stages + 1`` cycles later at the earliest; ``busy`` meanwhile). MAX and MIN need
    ``acc`` stable for three cycles before an element (``AccUnit``).

    With fewer ``units``: ``y`` carries sub-beat ``sub`` (lanes ``sub * units + u``); the
    first ``lanes // units - 1`` sub-beats wait in registers and the element is gathered into
    ``y_h`` with its last (``yh_valid`` a cycle after it, or after a read-out). The sub-beats
    are accumulated as they come by an ``InterleavedAcc`` (``busy``: an update in flight).

    ``rst`` loads ``acc_identity(op)`` into every accumulator in the next cycle (no element
    may be accumulated then).

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    units : int
        Accumulate units (a divisor of ``lanes``).
    stages : int
        The accumulate adder's pipeline registers (0..4).

    Members
    -------
    y : In(ArrayLayout(32, units))
        FP32 elements.
    y_valid, y_emit : In(1)
        ``y`` holds an element (or, with ``y_emit``, the read-out's slot).
    sub : In(range(lanes // units))
        ``y``'s sub-beat (with fewer ``units`` only).
    op : In(2)
        :class:`sim.vector.AccOp` of the instruction.
    summing : In(1)
        (A unit per lane) ``op`` is SUM: an element is in the accumulators after the adder.
    rst : In(1)
        Load ``acc_identity(op)``.
    y_h : Out(ArrayLayout(32, lanes))
        The last element.
    yh_valid, yh_emit : Out(1)
        ``y_h`` took an element (or the read-out's slot) in the previous cycle.
    acc : Out(ArrayLayout(32, lanes))
        The accumulators.
    busy : Out(1)
        An accumulation is in flight.
    """

    def __init__(self, lanes, units=None, stages=0):
        self._lanes = check_lanes(lanes)
        self._units = units = check_units(units, lanes)
        self._stages = check_int("stages", stages, 0, FP32Adder.MAX_STAGES)
        vec = data.ArrayLayout(32, lanes)
        ports = {
            "y": In(data.ArrayLayout(32, units)),
            "y_valid": In(1),
            "y_emit": In(1),
            "op": In(2),
            "summing": In(1),
            "rst": In(1),
            "y_h": Out(vec),
            "yh_valid": Out(1),
            "yh_emit": Out(1),
            "acc": Out(vec),
            "busy": Out(1),
        }
        if units < lanes:
            ports["sub"] = In(range(lanes // units))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.yh_emit.eq(self.y_emit)
        if self._units == self._lanes:
            self._per_lane(m)
        else:
            self._shared(m)
        return m

    def _per_lane(self, m):
        lanes, ACC = self._lanes, self._stages
        vec = data.ArrayLayout(32, lanes)
        acc = Signal(vec)
        lut_y = self.y
        y_h = Signal(vec)
        yh_key = Signal(vec)             # DAZ'd value, key, DAZ and NaN flags of y_h (AccUnit)
        yh_daz = Signal(vec)
        yh_ez = Signal(lanes)
        yh_nan = Signal(lanes)
        yh_valid = self.yh_valid
        m.d.sync += yh_valid.eq(self.y_valid)
        m.d.comb += [self.y_h.eq(y_h), self.acc.eq(acc)]
        next_key = Signal(vec)           # the key ``yh_key`` takes with the next element
        next_ez = [lut_y[l][23:31] == 0 for l in range(lanes)]
        m.d.comb += [next_key[l].eq(order_key(lut_y[l], next_ez[l])) for l in range(lanes)]
        with m.If(self.y_valid):
            m.d.sync += y_h.eq(lut_y)
            for l in range(lanes):
                yl, ez = lut_y[l], next_ez[l]
                m.d.sync += [yh_key[l].eq(next_key[l]), yh_ez[l].eq(ez),
                             yh_daz[l].eq(Mux(ez, yl & 0x80000000, yl)),
                             yh_nan[l].eq((yl[23:31] == 0xFF) & (yl[0:23] != 0))]
        elem = yh_valid & ~self.yh_emit
        summing_cmd = self.summing
        if ACC:
            acc_we = Signal()
            pend = [Signal(name=f"acc_pend{i}") for i in range(ACC)]
            m.d.sync += pend[0].eq(elem & summing_cmd)
            for i in range(1, ACC):
                m.d.sync += pend[i].eq(pend[i - 1])
            m.d.comb += [acc_we.eq(Mux(summing_cmd, pend[-1], elem)),
                         self.busy.eq(Cat(*pend).any())]
        else:
            acc_we = elem
        # An instruction's acc_reset loads its op's identity through the units in the cycle
        # after the instruction is taken (``rst`` registered by the user, the op from its
        # instruction register): the pipeline is empty then, so no element is accumulated in
        # that cycle, and the controller's queue head does not reach the accumulators.
        acc_rst = self.rst
        acc_rst_value = acc_identity_of(m, self.op)
        for l in range(lanes):
            au = m.submodules[f"acc{l}"] = AccUnit(ACC)
            m.d.comb += [au.op.eq(self.op), au.acc.eq(acc[l]), au.y.eq(y_h[l]),
                         au.y_daz.eq(yh_daz[l]),
                         au.y_key.eq(yh_key[l]), au.next_key.eq(next_key[l]),
                         au.y_ez.eq(yh_ez[l]), au.y_nan.eq(yh_nan[l]),
                         au.we.eq(acc_we), au.rst.eq(acc_rst), au.rst_value.eq(acc_rst_value)]
            with m.If(acc_we | acc_rst):
                m.d.sync += acc[l].eq(au.o)

    def _shared(self, m):
        lanes, units, ACC = self._lanes, self._units, self._stages
        G = lanes // units
        y, y_valid, y_emit, y_sub = self.y, self.y_valid, self.y_emit, self.sub
        y_h = Signal(data.ArrayLayout(32, lanes))
        y_col = Signal(data.ArrayLayout(32, lanes - units))
        last = y_sub == G - 1
        m.d.sync += self.yh_valid.eq(y_valid & (y_emit | last))
        for j in range(G - 1):
            with m.If(y_valid & (y_sub == j)):
                m.d.sync += [y_col[j * units + u].eq(y[u]) for u in range(units)]
        with m.If(y_valid & last):
            m.d.sync += y_h.eq(Cat(y_col, y))
        acc_rst_value = acc_identity_of(m, self.op)
        m.submodules.acc = acc = InterleavedAcc(lanes, units, ACC)
        m.d.comb += [acc.op.eq(self.op), acc.valid.eq(y_valid & ~y_emit), acc.sub.eq(y_sub),
                     acc.y.eq(y), acc.rst.eq(self.rst), acc.rst_value.eq(acc_rst_value),
                     self.y_h.eq(y_h), self.acc.eq(acc.acc), self.busy.eq(acc.busy)]
