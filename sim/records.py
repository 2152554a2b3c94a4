"""The engine controllers' commands of a record: the model of each engine's record adapter
(``rtl/core/tensor_record.py``, ``rtl/core/vector_record.py``). Plain Python.

A record is a dict of its fields (``sim.isa.unpack`` of ``sim.isa.TENSOR_RECORD`` or
``VECTOR_RECORD``); a command is a dict of the controller's command fields
(``rtl.core.tensor_ctrl.tensor_cmd_layout``, ``rtl.core.vector_ctrl.vector_cmd_layout``), the
vector engine's own instruction as a dict of ``sim.vector.CMD_FIELDS``. ``sim/refsim.py``
executes the same records on the engines' models.
"""

from sim.isa import ACT_FUNC_LINEAR, TABLE_FUNC_PAIRED, VecAlu, VecOp
from sim.vector import AccOp, AluOp, Src, make_cmd

__all__ = ["KIND_ENGINE", "KIND_TABLE", "KIND_SEED", "KIND_NOP", "TENSOR_RECORD_FIELDS",
           "tensor_command", "vector_commands"]

#: Vector command kinds: an engine instruction; LUT configuration writes from SBUF partition 0
#: (``n`` words alternating address, data); a re-seed of the rounding generators from
#: ``scalar``; nothing (completes in order).
KIND_ENGINE, KIND_TABLE, KIND_SEED, KIND_NOP = range(4)

#: The TENSOR record fields a tensor command takes unchanged.
TENSOR_RECORD_FIELDS = ("fmt", "k", "m", "n", "stat_addr", "stat_stride", "mov_addr",
                        "mov_stride", "psum_addr", "accumulate", "sem")

_REDUCE = {VecAlu.ADD: AccOp.SUM, VecAlu.MAX: AccOp.MAX, VecAlu.MIN: AccOp.MIN}


def tensor_command(rec):
    """The tensor controller's command of TENSOR record ``rec``: its fields unchanged and
    ``sem_en`` (one done pulse per record)."""
    return {**{f: rec[f] for f in TENSOR_RECORD_FIELDS}, "sem_en": 1}


def vector_commands(rec, parts):
    """The vector controller's commands of VECTOR record ``rec``, ``parts`` partitions each:
    one command, or two for ACC_RD (read the accumulators out, then reset them to +0; only the
    second asks for a done pulse). Each command's ``op`` is the engine instruction as a dict
    (meaningful for ``KIND_ENGINE`` only). An unknown op, or a REDUCE with an ALU op other
    than ADD, MAX, MIN, is a NOP (the sequencer's record check traps such records)."""
    op, n = rec["op"], rec["n"]
    c = dict(kind=KIND_ENGINE, scalar=rec["scalar"], n=n, a_psum=rec["a_space"],
             a_addr=rec["a_addr"], a_stride=1, b_en=0, b_addr=rec["b_addr"], b_stride=1,
             o_n=n, o_addr=rec["dst_addr"], o_stride=1, parts=parts, sem=rec["sem"], sem_en=1)
    e = dict(fmt_a=rec["in_fmt"], fmt_b=rec["in_fmt"], fmt_o=rec["out_fmt"], rmode=rec["rnd"],
             count=n, emit=1)
    nop = dict(kind=KIND_NOP, n=0, o_n=0)
    if op == VecOp.ACT:
        e.update(op0=AluOp.MUL, imm0=rec["scalar"], op1=AluOp.ADD, imm1=rec["bias"],
                 lut=int(not rec["func"] & ACT_FUNC_LINEAR), bank=rec["func"] & 1,
                 acc_op=AccOp.SUM if rec["acc"] else AccOp.NONE)
    elif op == VecOp.TT:
        e.update(op0=rec["alu"], src0=Src.TENSOR)
        c.update(b_en=1)
    elif op == VecOp.TS:
        e.update(op0=rec["alu"], imm0=rec["scalar"])
    elif op == VecOp.REDUCE:
        e.update(emit=0, acc_reset=1, emit_acc=1, acc_op=_REDUCE.get(rec["alu"], AccOp.NONE))
        c.update(o_n=1)
        if rec["alu"] not in _REDUCE:
            c.update(nop)
    elif op == VecOp.TABLE:
        if rec["func"] & TABLE_FUNC_PAIRED and parts > 1:
            c.update(kind=KIND_TABLE, n=n, a_psum=0, o_n=0, parts=2)
        else:
            c.update(kind=KIND_TABLE, n=n << 1, a_psum=0, o_n=0, parts=1)
    elif op == VecOp.SEED:
        c.update(kind=KIND_SEED, n=0, o_n=0)
    elif op == VecOp.ACC_RD:
        first = dict(c, n=0, o_n=1, sem_en=0,
                     op=make_cmd(**{**e, "emit": 0, "count": 0, "emit_acc": 1}))
        e.update(emit=0, count=0, acc_op=AccOp.SUM, acc_reset=1)
        return [first, dict(c, n=0, o_n=0, op=make_cmd(**e))]
    elif op != VecOp.COPY:
        c.update(nop)
    return [dict(c, op=make_cmd(**e))]
