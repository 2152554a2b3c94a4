"""Accumulators of a vector engine whose lanes share evaluation units (``VectorEngine(units=...)``):
one accumulate unit per evaluation unit, the lanes' accumulators in registers."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import check_stages, delay
from rtl.vector.alu import VectorAlu
from rtl.vector.lut import check_units
from sim.config import check_int
from sim.vector import AccOp, AluOp

__all__ = ["InterleavedAcc"]


class InterleavedAcc(wiring.Component):
    """``acc[l] = acc_update(op, acc[l], y)`` (``sim.vector.acc_update``) for ``lanes`` lanes
    with ``units`` accumulate units: lane ``l`` is served by unit ``l % units`` in sub-beat
    ``l // units``. Each unit is a ``VectorAlu(stages, mul=False)`` (SUM is its ADD, MAX and
    MIN its own, with the same NaN and zero rules), so the lanes' accumulators cost 32
    flip-flops each and the FP32 adder is shared.

    Parameters
    ----------
    lanes : int
        Accumulators (1..128), a multiple of ``units``.
    units : int
        Accumulate units.
    stages : int
        Pipeline registers of the units (0..4).

    Members
    -------
    op : In(2)
        :class:`sim.vector.AccOp` (NONE leaves the accumulators unchanged).
    valid : In(1)
        ``y`` holds the elements of lanes ``sub * units + u`` (``u`` < ``units``) to
        accumulate.
    sub : In(range(lanes // units))
        The sub-beat of ``y``.
    y : In(ArrayLayout(32, units))
        FP32 elements.
    rst : In(1)
        Load ``rst_value`` into every accumulator (never together with ``valid`` or while an
        update is in flight).
    rst_value : In(32)
    acc : Out(ArrayLayout(32, lanes))
        The accumulators: an element taken with ``valid`` is in its lane's accumulator
        ``stages + 1`` cycles later (``latency``). A lane's next element must come no earlier
        than that (its accumulator is read as the element is taken).
    busy : Out(1)
        An update is in flight.
    """

    def __init__(self, lanes, units, stages=0):
        self._lanes = check_int("lanes", lanes, 1, 128)
        self._units = check_units(units, lanes)
        self._stages = check_stages(stages, VectorAlu.MAX_STAGES)
        self._subs = lanes // units
        super().__init__({
            "op": In(2),
            "valid": In(1),
            "sub": In(range(max(self._subs, 2))),
            "y": In(data.ArrayLayout(32, units)),
            "rst": In(1),
            "rst_value": In(32),
            "acc": Out(data.ArrayLayout(32, lanes)),
            "busy": Out(1),
        })

    @property
    def latency(self):
        """Cycles from an element taken to its lane's accumulator updated (``stages + 1``)."""
        return self._stages + 1

    def elaborate(self, platform):
        m = Module()
        units, subs, n = self._units, self._subs, self._stages
        alu_op = Signal(4)
        with m.Switch(self.op):
            for acc_op, code in ((AccOp.SUM, AluOp.ADD), (AccOp.MAX, AluOp.MAX),
                                 (AccOp.MIN, AluOp.MIN), (AccOp.NONE, AluOp.BYPASS)):
                with m.Case(int(acc_op)):
                    m.d.comb += alu_op.eq(code)
        write = self.valid & (self.op != AccOp.NONE)
        # The valid flag and the sub-beat travel beside the units' registers; the flags reset
        # (they say what the data registers hold), the sub-beat does not.
        pend = [write]
        for i in range(n):
            r = Signal(name=f"pend{i + 1}")
            m.d.sync += r.eq(pend[-1])
            pend.append(r)
        sub_o = delay(m, 1, self.sub, n, "sub", reset_less=True)
        m.d.comb += self.busy.eq(Cat(*pend[1:]).any())
        for u in range(units):
            alu = m.submodules[f"alu{u}"] = VectorAlu(n, mul=False)
            mine = [self.acc[j * units + u] for j in range(subs)]
            m.d.comb += [alu.op.eq(alu_op), alu.s.eq(self.y[u]),
                         alu.x.eq(Cat(*mine).word_select(self.sub, 32) if subs > 1 else mine[0])]
            for j in range(subs):
                with m.If(self.rst):
                    m.d.sync += mine[j].eq(self.rst_value)
                with m.Elif(pend[-1] & ((sub_o == j) if subs > 1 else 1)):
                    m.d.sync += mine[j].eq(alu.o)
        return m
