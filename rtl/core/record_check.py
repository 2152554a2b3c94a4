"""The record check of the TENSOR and VECTOR engines, in the form the sequencer registers it."""

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.control.layouts import record_layout
from sim import isa
from sim.config import ENGINE_FORMATS, check_formats, check_int

__all__ = ["RecordCheck", "RECORD_TERMS"]

#: Record-check terms per slot (``Sequencer.check_terms``): TENSOR slot 3 has the most
#: (k and m: 2 or 5 each, fmt: 1).
RECORD_TERMS = 11

_CHECKED = ((isa.Engine.TENSOR, "tensor"), (isa.Engine.VECTOR, "vector"))


def _nibbles(value):
    return [value[i:i + 4] for i in range(0, len(value), 4)]


def _range_terms(value, hi):
    # 1 <= value <= hi for an 8-bit field, from its nibbles h (high) and l (low) and hi's H
    # and L: h < H, h == H, l <= L, h == 0, l == 0 (with H = 0, two terms: h != 0 and l
    # outside 1..L).
    hi = min(hi, 0xFF)
    h, l, hh, ll = value[4:8], value[:4], hi >> 4, hi & 15
    if hh == 0:
        return [h != 0, (l == 0) | (l > ll)]
    return [h < hh, h == hh, l <= ll, h == 0, l == 0]


def _range_bad(terms):
    if len(terms) == 2:
        return terms[0] | terms[1]
    h_lt, h_eq, l_le, h_z, l_z = terms
    return ~(h_lt | h_eq & l_le) | h_z & l_z


class RecordCheck(wiring.Component):
    """``sim.isa.tensor_record_error`` and ``sim.isa.vector_record_error`` on the records the
    sequencer builds, split so that the sequencer can register it: an EMIT of an invalid
    record traps ``ILLEGAL_FIELD`` and nothing reaches the engine.

    The check is in two parts: terms of at most 4 bits each of the word written into one
    record slot (``slot_data``), which the sequencer registers beside the slot, and the
    verdict, a small function of the terms of the whole record (``*_terms``), which the
    sequencer registers for an EMIT. Combinational, no state.

    Parameters
    ----------
    rows, cols : int
        The tensor array (``k`` must be 1..rows, ``m`` 1..cols), 1 to 1024 each.
    formats : collection of Format
        The tensor engine's input formats (a TENSOR record's ``fmt`` must be one).
    terms : int
        Terms per slot, ``RECORD_TERMS`` to 32 (the sequencer's ``check_terms``).

    Members
    -------
    slot_data : In(32)
        The word the sequencer writes into a record slot.
    tensor_slot_terms, vector_slot_terms : Out(ArrayLayout(terms, slots))
        For each slot, the terms of a record with ``slot_data`` in that slot.
    tensor_blank_terms, vector_blank_terms : Out(ArrayLayout(terms, slots))
        The terms of a slot that reads as 0 (constants).
    tensor_terms, vector_terms : In(ArrayLayout(terms, slots))
        The terms of the record being built, each slot's from one of the two above.
    tensor_illegal, vector_illegal : Out(1)
        The verdict on ``*_terms``: the record is invalid.
    """

    def __init__(self, rows, cols, formats=ENGINE_FORMATS, *, terms=RECORD_TERMS):
        self._rows = check_int("rows", rows, 1, 1024)
        self._cols = check_int("cols", cols, 1, 1024)
        self._formats = tuple(sorted(set(check_formats(formats, names=False))))
        self._terms = check_int("terms", terms, RECORD_TERMS, 32)
        sig = {"slot_data": In(32)}
        for e, name in _CHECKED:
            layout = data.ArrayLayout(terms, isa.RECORD_SLOTS[e])
            sig[name + "_slot_terms"] = Out(layout)
            sig[name + "_blank_terms"] = Out(layout)
            sig[name + "_terms"] = In(layout)
            sig[name + "_illegal"] = Out(1)
        super().__init__(sig)

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    formats = property(lambda self: self._formats)
    terms = property(lambda self: self._terms)

    def _tensor_terms(self, word):
        t = data.View(record_layout(isa.Engine.TENSOR), word)
        k, mm = _range_terms(t.k, self._rows), _range_terms(t.m, self._cols)
        fmt_ok = Cat(*[t.fmt == int(f) for f in self._formats]).any()
        return {2: [n != 0 for n in _nibbles(t.n)], 3: k + mm + [~fmt_ok]}

    def _tensor_bad(self, terms):
        nk = len(_range_terms(Const(0, 8), self._rows))
        k, mm = terms[3][:nk], terms[3][nk:-1]
        return ~Cat(*terms[2]).any() | _range_bad(k) | _range_bad(mm) | terms[3][-1]

    @staticmethod
    def _vector_terms(word):
        v = data.View(record_layout(isa.Engine.VECTOR), word)
        return {0: [v.op > isa.VecOp.ACC_RD,
                    Cat(*[v.op == o for o in isa.VEC_CHECKED_OPS]).any(),
                    v.op == isa.VecOp.REDUCE, v.op == isa.VecOp.TT,
                    v.alu > isa.VEC_ALU_MAX,
                    ~Cat(*[v.alu == a for a in isa.VEC_REDUCE_ALUS]).any(),
                    v.rnd > isa.VEC_RND_MAX, v.b_space == isa.Space.PSUM]}

    @staticmethod
    def _vector_bad(terms):
        op_bad, checked, reduce, tt, alu_bad, alu_nored, rnd_bad, b_psum = terms[0]
        return op_bad | checked & (alu_bad | rnd_bad) | reduce & alu_nored | tt & b_psum

    def elaborate(self, platform):
        m = Module()
        rules = {"tensor": (self._tensor_terms, self._tensor_bad),
                 "vector": (self._vector_terms, self._vector_bad)}
        for e, name in _CHECKED:
            terms_of, bad = rules[name]
            nslots = isa.RECORD_SLOTS[e]
            width = isa.layout_width(isa.RECORDS[e])
            slot_terms = getattr(self, name + "_slot_terms")
            blank_terms = getattr(self, name + "_blank_terms")
            # Slot s's terms: the word with ``slot_data`` in slot s (the other slots' bits are
            # not used by slot s's terms).
            for s in range(nslots):
                word = Cat(Const(0, 32 * s), self.slot_data, Const(0, width - 32 * (s + 1)))
                terms = terms_of(word).get(s, [])
                blank = terms_of(Const(0, width)).get(s, [])
                assert len(terms) <= self._terms
                m.d.comb += [slot_terms[s].eq(Cat(*terms)), blank_terms[s].eq(Cat(*blank))]
            held = getattr(self, name + "_terms")
            counts = {s: len(t) for s, t in terms_of(Const(0, width)).items()}
            m.d.comb += getattr(self, name + "_illegal").eq(
                bad({s: [held[s][i] for i in range(n)] for s, n in counts.items()}))
        return m
