"""The shipped microcode: control-store words and the opcode-to-microroutine map, computed here
and used as the RTL memories' initial contents (``rtl/control/sequencer.py``).

A tiny micro-assembler: a routine is a list of :func:`u` words and ``"label:"`` strings;
``target="label"`` is resolved when the store is linked. The micro-word format is
``sim.isa.MICRO_FIELDS``; its semantics are in ``docs/isa.md`` section 7.

Run-time extension: :func:`fused_matmul_act` returns microcode for a new macro-instruction
(opcode 0xF0 by default) that is loaded through the sequencer's control-store and map write
ports; the Verilog is not regenerated.
"""

from sim import isa
from sim.isa import (Engine, Opcode, UAlu, UCond, UDst, USeq, USpecial, USrc, VecOp,
                     UCODE_DEPTH)

__all__ = ["u", "link", "control_store", "opcode_map", "map_entry", "ROUTINES", "LABELS",
           "fused_matmul_act", "fused_matmul_act_ref", "FUSED_OPCODE", "recursive_ucall",
           "rep_seminc"]


def u(seq=USeq.NEXT, cond=UCond.ALWAYS, target=0, a=USrc.ZERO, b=USrc.ZERO, alu=UAlu.PASSA,
      dst=UDst.NONE, eng=0, slot=0, special=USpecial.NONE, const=0):
    """One micro-instruction as a field dict (``target`` may be a label string)."""
    return dict(seq=seq, cond=cond, target=target, a=a, b=b, alu=alu, dst=dst, eng=eng,
                slot=slot, special=special, const=const)


def _encode(word, labels):
    w = dict(word)
    if isinstance(w["target"], str):
        w["target"] = labels[w["target"]]
    return isa.pack(isa.MICRO_FIELDS, **{k: int(v) for k, v in w.items()})


def link(items, base=0, labels=None):
    """Place ``items`` (words and ``"label:"`` strings) at ``base``: returns (words, labels)."""
    labels = dict(labels or {})
    pos = base
    for it in items:
        if isinstance(it, str):
            labels[it.rstrip(":")] = pos
        else:
            pos += 1
    words = [_encode(it, labels) for it in items if not isinstance(it, str)]
    return words, labels


END = dict(seq=USeq.END)


def _alu_rr(alu):
    return [u(a=USrc.RS1, b=USrc.RS2, alu=alu, dst=UDst.RD, **END)]


def _alu_ri(alu):
    return [u(a=USrc.RS1, b=USrc.IMM, alu=alu, dst=UDst.RD, **END)]


def _branch(cond, name):
    return [u(seq=USeq.BRANCH, cond=cond, target=f"{name}_take"), u(**END),
            f"{name}_take:", u(a=USrc.IMM, dst=UDst.NPC, **END)]


def _slot(eng, slot, **kw):
    return u(dst=UDst.SLOT, eng=eng, slot=slot, **kw)


def _dma(store):
    e = Engine.DMA
    last = [u(a=USrc.T0, b=USrc.CONST, alu=UAlu.AND, dst=UDst.T0, const=0x1F7)]
    last.append(_slot(e, 6, a=USrc.T0, b=USrc.CONST, alu=UAlu.OR, const=8 if store else 0))
    return [
        _slot(e, 0, a=USrc.RS1),
        _slot(e, 1, a=USrc.RD1),
        _slot(e, 2, a=USrc.RD2),
        _slot(e, 3, a=USrc.RD3),
        _slot(e, 4, a=USrc.RD),
        u(a=USrc.RS2, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=16),
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.AND, dst=UDst.T1, const=0xFFFF),
        _slot(e, 5, a=USrc.T0, b=USrc.T1, alu=UAlu.OR),
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHR, dst=UDst.T0, const=16),
        *last,
        u(special=USpecial.EMIT, eng=e, **END),
    ]


def _lo16_hi16(eng, slot, lo, hi):
    """record[eng].slot = (lo & 0xFFFF) | (hi << 16)."""
    return [u(a=lo, b=USrc.CONST, alu=UAlu.AND, dst=UDst.T0, const=0xFFFF),
            u(a=hi, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T1, const=16),
            _slot(eng, slot, a=USrc.T0, b=USrc.T1, alu=UAlu.OR)]


def _matmul_body():
    # The slots the EMIT check reads (``isa.CHECKED_SLOTS``: 2 and 3) first, so that the EMIT
    # does not follow one of their writes (it would hold a cycle while the check's terms are
    # registered).
    e = Engine.TENSOR
    return [
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=7),      # imm & 0x1FFFFFF
        _slot(e, 3, a=USrc.T0, b=USrc.CONST, alu=UAlu.SHR, const=7),
        *_lo16_hi16(e, 2, USrc.RD, USrc.RS3),
        *_lo16_hi16(e, 0, USrc.RS1, USrc.RS2),
        u(a=USrc.CONST, b=USrc.CONST, alu=UAlu.ADD, dst=UDst.T0, const=0x8000),   # 0x10000
        _slot(e, 1, a=USrc.T0, b=USrc.CONST, alu=UAlu.OR, const=1),           # strides 1, 1
    ]


def _vec(op):
    e = Engine.VECTOR
    body = [
        # slot 0 = imm[27:4] << 4 | op
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=4),
        u(a=USrc.T0, b=USrc.CONST, alu=UAlu.SHR, dst=UDst.T0, const=8),
        u(a=USrc.T0, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=4),
        _slot(e, 0, a=USrc.T0, b=USrc.CONST, alu=UAlu.OR, const=int(op)),
        *_vec_addrs(),                    # inlined: a CALL/RET would cost two bubbles
    ]
    if op == VecOp.TT:
        body += _lo16_hi16(e, 1, USrc.RS1, USrc.RS2)
    if op in (VecOp.TS, VecOp.ACT, VecOp.SEED):
        body.append(_slot(e, 3, a=USrc.RS2))
    if op == VecOp.ACT:
        body.append(_slot(e, 4, a=USrc.RS2P1))
    body.append(u(special=USpecial.EMIT, eng=e, **END))
    return body


def _vec_addrs(last=None):
    """VECTOR slots 1 (a_addr only) and 2 (dst_addr | n << 16); ``last``: fields added to the
    final micro-instruction."""
    e = Engine.VECTOR
    return [_slot(e, 1, a=USrc.RS1, b=USrc.CONST, alu=UAlu.AND, const=0xFFFF),
            *_lo16_hi16(e, 2, USrc.RD, USrc.RS3)[:-1],
            _slot(e, 2, a=USrc.T0, b=USrc.T1, alu=UAlu.OR, **(last or {}))]


def _ag_all(kind, last=None):
    """Snapshot, step or restore every affine generator; ``last``: fields added to the final
    micro-instruction (default: RET, for the shared subroutine)."""
    out = []
    for k in range(isa.NUM_AG):
        if kind == "snap":
            out.append(u(a=USrc.AGREG, special=USpecial.AG_SNAP, const=k))
        elif kind == "step":
            out.append(u(a=USrc.AGREG, b=USrc.AGSTRIDE, alu=UAlu.ADD, dst=UDst.AGREG, const=k))
        else:
            out.append(u(a=USrc.AGBASE, dst=UDst.AGREG, const=k))
    out[-1].update(last if last is not None else {"seq": USeq.RET})
    return out


def _routines():
    r = {}
    r[Opcode.NOP] = [u(**END)]
    r[Opcode.HALT] = [u(special=USpecial.BARRIER), u(special=USpecial.HALT, **END)]
    r[Opcode.BARRIER] = [u(special=USpecial.BARRIER, **END)]
    r[Opcode.JMP] = [u(a=USrc.IMM, dst=UDst.NPC, **END)]
    r[Opcode.CALL] = [u(a=USrc.IMM, special=USpecial.CALL_PUSH, **END)]
    r[Opcode.RET] = [u(special=USpecial.CALL_POP, **END)]
    # The generator walks are inlined (not CALLs of ag_*_all): a RET costs two bubbles.
    r[Opcode.LOOP] = [
        u(a=USrc.RS1, seq=USeq.BRANCH, cond=UCond.Z, target="loop_zero"),
        u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
        *_ag_all("snap", last=dict(END)),
        "loop_zero:",
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.ADD, const=1, dst=UDst.NPC, **END),
    ]
    r[Opcode.ENDLOOP] = [
        u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target="endloop_more"),
        *_ag_all("restore", last=dict(special=USpecial.LOOP_POP, **END)),
        "endloop_more:",
        *_ag_all("step", last=dict(special=USpecial.LOOP_STEP, **END)),
    ]
    r[Opcode.AG] = [u(a=USrc.RS1, special=USpecial.AG_SET, **END)]
    for op, cond in ((Opcode.BEQ, UCond.EQ), (Opcode.BNE, UCond.NE), (Opcode.BLT, UCond.LT),
                     (Opcode.BGE, UCond.GE), (Opcode.BLTU, UCond.LTU),
                     (Opcode.BGEU, UCond.GEU)):
        r[op] = _branch(cond, op.name.lower())
    r[Opcode.LI] = [u(a=USrc.IMM, dst=UDst.RD, **END)]
    for op, alu in ((Opcode.ADD, UAlu.ADD), (Opcode.SUB, UAlu.SUB), (Opcode.AND, UAlu.AND),
                    (Opcode.OR, UAlu.OR), (Opcode.XOR, UAlu.XOR), (Opcode.SHL, UAlu.SHL),
                    (Opcode.SHR, UAlu.SHR), (Opcode.SRA, UAlu.SRA), (Opcode.SLT, UAlu.SLT),
                    (Opcode.SLTU, UAlu.SLTU)):
        r[op] = _alu_rr(alu)
    for op, alu in ((Opcode.ADDI, UAlu.ADD), (Opcode.ANDI, UAlu.AND), (Opcode.ORI, UAlu.OR),
                    (Opcode.XORI, UAlu.XOR), (Opcode.SHLI, UAlu.SHL), (Opcode.SHRI, UAlu.SHR)):
        r[op] = _alu_ri(alu)
    r[Opcode.CMP] = [u(a=USrc.RS1, b=USrc.RS2, dst=UDst.FLAGS, **END)]
    r[Opcode.CMPI] = [u(a=USrc.RS1, b=USrc.IMM, dst=UDst.FLAGS, **END)]
    r[Opcode.SEMINC] = [u(special=USpecial.SEMINC, **END)]
    r[Opcode.SEMSET] = [u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHR, const=16,
                          special=USpecial.SEMSET, **END)]
    r[Opcode.WAIT] = [u(a=USrc.RS1, b=USrc.CONST, alu=UAlu.AND, const=0xFFFF,
                        special=USpecial.WAIT, **END)]
    r[Opcode.WAITI] = [u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHR, const=16,
                         special=USpecial.WAIT, **END)]
    r[Opcode.SEMRD] = [u(special=USpecial.SEMRD, **END)]
    r[Opcode.DMA_LD] = _dma(store=False)
    r[Opcode.DMA_ST] = _dma(store=True)
    r[Opcode.MATMUL] = _matmul_body() + [u(special=USpecial.EMIT, eng=Engine.TENSOR, **END)]
    for op, vop in isa.VEC_OPCODES.items():
        r[op] = _vec(vop)
    return r


def _subroutines():
    return [
        "ag_snap_all:", *_ag_all("snap"),
        "ag_step_all:", *_ag_all("step"),
        "ag_restore_all:", *_ag_all("restore"),
        # VECTOR slots 1 (a_addr only) and 2 (dst_addr | n << 16)
        "vec_addrs:", *_vec_addrs(last=dict(seq=USeq.RET)),
    ]


ROUTINES = _routines()


def _build():
    items = []
    for op, body in ROUTINES.items():
        items.append(f"op_{op.name}:")
        items += body
    items += _subroutines()
    words, labels = link(items)
    if len(words) > UCODE_DEPTH:
        raise AssertionError(f"shipped microcode needs {len(words)} words > {UCODE_DEPTH}")
    return words, labels


_WORDS, LABELS = _build()


def map_entry(uaddr):
    """An opcode-map word: valid bit above the micro-address."""
    return (1 << isa.UADDR_BITS) | uaddr


def control_store():
    """The control store's initial contents: ``UCODE_DEPTH`` words (unused ones are TRAP)."""
    trap = isa.pack(isa.MICRO_FIELDS, seq=int(USeq.TRAP))
    return _WORDS + [trap] * (UCODE_DEPTH - len(_WORDS))


def opcode_map():
    """256 map words: ``map_entry(address)`` for shipped opcodes, 0 (illegal) otherwise."""
    m = [0] * 256
    for op in ROUTINES:
        m[int(op)] = map_entry(LABELS[f"op_{op.name}"])
    return m


def used_words():
    return len(_WORDS)


FUSED_OPCODE = 0xF0


def fused_matmul_act(base=None):
    """Microcode of ``mmact rd, rs1, rs2, rs3, imm`` (opcode 0xF0), a fused matmul +
    activation, for loading at run time: returns ``(words, base)``.

    It issues the MATMUL record of ``matmul rd, rs1, rs2, rs3, imm`` (PSUM address ``r[rd]``,
    N ``r[rs3]``, with ``sem=imm.sem sem_en=imm.sem_en``), waits until every record issued so
    far has completed (a micro BARRIER: the engines are not ordered by the hardware, and the
    ACT must read the PSUM tile the MATMUL writes), then issues an ACT record reading that
    tile (``a_space=PSUM``, ``a_addr=r[rd]``, ``n=r[rs3]``, ``in_fmt=FP32``), writing SBUF at
    ``r[rd+1]`` with ``func = imm[31:28]``, ``scale = 1.0``, ``bias = 0``. Its semantics for
    the reference simulator: :func:`fused_matmul_act_ref`.
    """
    base = used_words() if base is None else base
    e = Engine.VECTOR
    slot0 = isa.pack(isa.VECTOR_RECORD[:12], op=int(VecOp.ACT), a_space=1, in_fmt=0)
    items = [
        *_matmul_body(),
        u(special=USpecial.EMIT, eng=Engine.TENSOR),
        # ACT slot 0: op/a_space constant; func = imm >> 28 at bits [11:8]
        u(a=USrc.IMM, b=USrc.CONST, alu=UAlu.SHR, dst=UDst.T0, const=28),
        u(a=USrc.T0, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=8),
        _slot(e, 0, a=USrc.T0, b=USrc.CONST, alu=UAlu.OR, const=slot0),
        _slot(e, 1, a=USrc.RD, b=USrc.CONST, alu=UAlu.AND, const=0xFFFF),
        *_lo16_hi16(e, 2, USrc.RD1, USrc.RS3),
        u(a=USrc.CONST, dst=UDst.T0, const=0x3F80),                       # 1.0 = 0x3F800000
        u(a=USrc.T0, b=USrc.CONST, alu=UAlu.SHL, dst=UDst.T0, const=16),
        _slot(e, 3, a=USrc.T0),
        # The MATMUL's PSUM tile is complete only once its record is (its done pulse waits
        # for PSUM's write latency): the ACT is emitted after the BARRIER, the record built
        # while the MATMUL runs.
        u(special=USpecial.BARRIER),
        u(special=USpecial.EMIT, eng=e, **END),
    ]
    words, _ = link(items, base=base, labels=LABELS)
    return words, base


def fused_matmul_act_ref(sim, f):
    """The semantics of :func:`fused_matmul_act` for ``sim.refsim.RefSim(extensions=
    {FUSED_OPCODE: fused_matmul_act_ref})``: the MATMUL record, the BARRIER, the ACT record."""
    from sim.refsim import record_fields
    sim.issue(Engine.TENSOR, record_fields(Engine.TENSOR, Opcode.MATMUL, f, sim.r, sim.r))
    sim.barrier()
    sim.issue(Engine.VECTOR, dict(op=VecOp.ACT, a_space=1, func=f["imm"] >> 28,
                                  a_addr=sim.r(f["rd"]) & 0xFFFF,
                                  dst_addr=sim.r(f["rd"] + 1) & 0xFFFF,
                                  n=sim.r(f["rs3"]) & 0xFFFF, scalar=0x3F800000))


def rep_seminc(base):
    """Microcode of an instruction that increments ``sem[imm & 15]`` ``r[rs1] & 0xFFFF`` times
    with the micro loop counter (a second run-time instruction, exercising ULOOP)."""
    items = [
        u(a=USrc.RS1, b=USrc.CONST, alu=UAlu.AND, const=0xFFFF, dst=UDst.T0,
          seq=USeq.BRANCH, cond=UCond.Z, target="rep_done"),
        u(a=USrc.T0, b=USrc.CONST, alu=UAlu.SUB, const=1, dst=UDst.UCTR),
        "rep_loop:",
        # ULOOP: uctr != 0 -> uctr -= 1 and repeat, so this runs (uctr + 1) times
        u(special=USpecial.SEMINC, seq=USeq.ULOOP, target="rep_loop"),
        "rep_done:",
        u(**END),
    ]
    words, _ = link(items, base=base, labels=LABELS)
    return words


def recursive_ucall(base):
    """Microcode that calls itself forever: must raise UCALL_OVERFLOW, not hang."""
    items = ["rec:", u(seq=USeq.CALL, target="rec")]
    words, _ = link(items, base=base, labels=LABELS)
    return words
