"""The sequencer's micro-word decoder: one-bit flags of the micro-word in R, registered for X."""

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.isa import Engine, UAlu, UCond, UDst, USeq, USpecial

__all__ = ["MicroDecoder", "field", "decode", "FLAGS", "ENGINES", "NAMES", "HOLD_TERMS",
           "TRAP_TERMS", "SEQ_GATED", "CALL_GATED", "SEQ_TERMS"]

ENGINES = (Engine.DMA, Engine.TENSOR, Engine.VECTOR)
NAMES = {Engine.DMA: "dma", Engine.TENSOR: "tensor", Engine.VECTOR: "vector"}

_MO = isa.field_offsets(isa.MICRO_FIELDS)

#: What holds X's micro-instruction (a stall) and what traps it (an error bit): each term is a
#: flag decoded from the micro-word (:func:`decode`) and a condition of registered state,
#: bound by the sequencer under the same key. The stall, the errors of X and the register
#: file's write kill are all built from these two lists, so they cannot disagree.
HOLD_TERMS = tuple("emit_" + NAMES[e] for e in ENGINES) + ("wait", "zbranch", "barrier",
                                                           "uloop", "br_loop_more", "semrd",
                                                           "loop_step", "br_flags")
#: The micro-instructions whose special can neither hold nor trap, so that only their ``seq``
#: field decides whether they go (the sequencer's ``seq_gate``): SEMINC, SEMSET, AG_SET,
#: AG_SNAP, and EMIT (whose queue space and record check enter beside the gate).
SEQ_GATED = ("seminc", "semset", "ag_set", "ag_snap") + tuple("emit_" + NAMES[e]
                                                             for e in ENGINES)
#: CALL_PUSH and CALL_POP: their special neither holds nor traps but on the call stack's
#: registered ``full`` / ``empty``, so whether they move the stack is that flip-flop and the
#: same ``seq`` gate, apart from the stall cone.
CALL_GATED = ("call_push", "call_pop")
#: The ``seq``-field terms that can hold or trap them (``*_plain`` is the micro-word without
#: any of them and without TRAP); each is paired with the registered condition under which it
#: lets the micro-instruction go.
SEQ_TERMS = ("zbranch", "ret", "call", "uloop", "br_loop_more", "br_flags")
#: ``(error bit, flag)``: the micro-instructions that trap and the bit they raise.
TRAP_TERMS = (
    (isa.ErrorBit.LOOP_OVERFLOW, "loop_push"),
    (isa.ErrorBit.LOOP_UNDERFLOW, "loop_top"),      # LOOP_STEP or LOOP_POP
    (isa.ErrorBit.CALL_OVERFLOW, "call_push"),
    (isa.ErrorBit.CALL_UNDERFLOW, "call_pop"),
    (isa.ErrorBit.UCALL_OVERFLOW, "call"),
    (isa.ErrorBit.UCALL_UNDERFLOW, "ret"),
    (isa.ErrorBit.MICRO_TRAP, "trap"),
    (isa.ErrorBit.DEADLOCK, "wait"),
    (isa.ErrorBit.ILLEGAL_FIELD, "emit_tensor"),
    (isa.ErrorBit.ILLEGAL_FIELD, "emit_vector"),
)


def field(word, name):
    """Field ``name`` of ``sim.isa.MICRO_FIELDS`` in the micro-word ``word`` (a Value)."""
    lo, w = _MO[name]
    return word[lo:lo + w]


def decode(word):
    """``{flag: 1-bit Value}`` of the micro-word ``word``: one-hot ALU classes, the ``seq``
    values, each special, each destination, EMITs and slot writes per engine, branch
    conditions, and the combinations the sequencer's stall, error and write cones read."""
    seq_w, special_w = field(word, "seq"), field(word, "special")
    dst_w, eng_w, cond_w = field(word, "dst"), field(word, "eng"), field(word, "cond")
    alu_w = field(word, "alu")
    d = {}
    for v in UAlu:
        d["alu_" + v.name.lower()] = alu_w == v
    d["alu_arith"] = d["alu_add"] | d["alu_sub"]
    d["alu_neg"] = d["alu_sub"] | d["alu_slt"] | d["alu_sltu"]    # a + ~b + 1
    d["alu_rsh"] = d["alu_shr"] | d["alu_sra"]
    # AND/OR/XOR/PASSA/PASSB as a truth table over (a[i], b[i]), index 2*a[i] + b[i]
    tt = {UAlu.AND: 0b1000, UAlu.OR: 0b1110, UAlu.XOR: 0b0110, UAlu.PASSA: 0b1100,
          UAlu.PASSB: 0b1010}
    for j in range(4):
        d[f"alu_tt{j}"] = Cat(*[d["alu_" + op.name.lower()] for op, t in tt.items()
                               if t >> j & 1]).any()
    for n, v in (("end", USeq.END), ("call", USeq.CALL), ("ret", USeq.RET),
                 ("branch", USeq.BRANCH), ("uloop", USeq.ULOOP), ("trap", USeq.TRAP)):
        d[n] = seq_w == v
    for v in USpecial:
        if v != USpecial.NONE:
            d[v.name.lower()] = special_w == v
    for v in UDst:
        if v != UDst.NONE:
            d["dst_" + v.name.lower()] = dst_w == v
    for e in ENGINES:
        d["emit_" + NAMES[e]] = d["emit"] & (eng_w == e)
        d["slot_" + NAMES[e]] = ~d["emit"] & d["dst_slot"] & (eng_w == e)
    for e, slots in isa.CHECKED_SLOTS.items():      # a write of a checked slot
        d["slot_chk_" + NAMES[e]] = d["slot_" + NAMES[e]] & Cat(
            *[field(word, "slot") == s_ for s_ in slots]).any()
    d["zbranch"] = d["branch"] & ((cond_w == UCond.Z) | (cond_w == UCond.NZ))
    d["br_flags"] = d["branch"] & Cat(*[cond_w == c for c in isa.FLAG_CONDS]).any()
    for v in UCond:     # a BRANCH on each condition
        d["br_" + v.name.lower()] = d["branch"] & (cond_w == v)
    d["br_always"] = d["br_always"] | d["ret"]      # redirects unconditionally
    d["dst_t01"] = d["dst_t0"] | d["dst_t1"]
    # npc_next is X's result (a JMP's target, a CALL's) rather than a stack's value
    d["npc_res"] = ((d["dst_npc"] | d["call_push"]) & ~d["loop_step"] &
                    ~d["call_pop"])
    d["wr_rd"] = d["dst_rd"] | ~d["dst_agreg"] & d["semrd"]
    d["wr_sem"] = d["semrd"] & ~d["dst_rd"] & ~d["dst_agreg"]   # SEMRD writes rd
    d["fwd_sem"] = d["wr_sem"] & ~d["dst_t01"]                  # ... and forwards it
    d["loop_top"] = d["loop_step"] | d["loop_pop"]   # reads the loop stack's top
    # The flags of ``HOLD_TERMS``/``TRAP_TERMS`` again for writing micro-instructions only
    # (``wk_*``, flip-flops of their own: the register file's write kill).
    writes = d["dst_rd"] | d["dst_agreg"] | d["semrd"]
    for n in dict.fromkeys(HOLD_TERMS + tuple(n for _, n in TRAP_TERMS)):
        d["wk_" + n] = writes & d[n]
    # An AGREG write and an AG_SNAP per generator ``k`` (one-hot)
    for j in range(isa.NUM_AG):
        k_j = field(word, "const")[:2] == j
        d[f"dst_agreg_k{j}"] = d["dst_agreg"] & k_j
        d[f"ag_snap_k{j}"] = d["ag_snap"] & k_j
    # ``SEQ_GATED`` and ``CALL_GATED`` by the ``seq`` terms that can hold or trap them (a
    # BRANCH on Z/NZ holds, as do a ULOOP and a BRANCH on LOOP_MORE after the write of what
    # they test, a RET or CALL may trap on the micro-stack, a TRAP traps): whether they go is
    # one sum of products of these and registered flags.
    for n in SEQ_GATED + CALL_GATED:
        d[n + "_plain"] = d[n] & ~d["trap"]
        for c in SEQ_TERMS:
            d[n + "_plain"] = d[n + "_plain"] & ~d[c]
        for c in SEQ_TERMS:
            d[f"{n}_{c}"] = d[n] & d[c]
    return d


#: The flags :func:`decode` makes, in order.
FLAGS = tuple(decode(Const(0, 64)))


class MicroDecoder(wiring.Component):
    """Decodes the micro-word entering X one stage early, so that X's stall, error and advance
    cones start from single flip-flops instead of field compares.

    ``r`` is :func:`decode` of ``word`` (combinational: R's micro-word); ``x`` is ``r``
    registered on ``load`` (the cycle R's word enters X), so ``x`` is always the decode of
    X's micro-word. Latency: one cycle from ``word`` to ``x``; ``x`` holds while ``load`` is
    low. Reset: all flags 0.

    Members
    -------
    word : In(64)
        R's micro-word.
    load : In(1)
        X takes R's word this cycle.
    r, x : Out(StructLayout({flag: 1 for flag in FLAGS}))
        The flags of ``word``, and of X's micro-word (registered).
    """

    def __init__(self):
        flags = data.StructLayout({n: 1 for n in FLAGS})
        super().__init__({"word": In(64), "load": In(1), "r": Out(flags), "x": Out(flags)})

    def elaborate(self, platform):
        m = Module()
        d = decode(self.word)
        m.d.comb += [self.r[n].eq(v) for n, v in d.items()]
        with m.If(self.load):
            m.d.sync += self.x.eq(self.r)
        return m
