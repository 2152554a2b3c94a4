"""The instruction set: the one plain-Python description of macro-instruction encodings, engine
records and the microcode word, shared by the sequencer RTL (``rtl/control/``), the assembler
(``sim/asm.py``), the reference simulator (``sim/refsim.py``) and the tests.

Read ``docs/isa.md`` for the semantics. Everything here is plain data: field names, widths,
enum values. Never renumber an opcode or move a field: programs and microcode depend on them.

Layout conventions (as ``amaranth.lib.data.StructLayout``): the first field of a layout is in the
least significant bits. A *record* is a fixed-width word made of 32-bit *slots*; slot 0 is bits
[31:0]. The microcode builds records one slot at a time.
"""

import enum

__all__ = [
    "INSTR_BITS", "NUM_REGS", "REG_BITS", "NUM_SEMS", "SEM_BITS", "SEM_VALUE_BITS",
    "LOOP_DEPTH", "CALL_DEPTH", "UCALL_DEPTH", "NUM_AG", "MAX_OUTSTANDING",
    "INSTR_FIELDS", "Opcode", "Engine", "VecOp", "VecAlu", "Space", "ErrorBit",
    "OPCODE_INFO", "OpInfo",
    "DMA_RECORD", "TENSOR_RECORD", "VECTOR_RECORD", "RECORDS", "RECORD_SLOTS",
    "DMA_IMM", "MATMUL_IMM", "VEC_IMM", "AG_IMM", "SEM_IMM",
    "field_offsets", "layout_width", "pack", "unpack", "encode", "decode",
    "USER_OPCODES", "AG_SET_READS", "AG_SNAP_READS",
]

# --------------------------------------------------------------------------------------------
# Architectural sizes
# --------------------------------------------------------------------------------------------

#: Width of one macro-instruction in program memory.
INSTR_BITS = 64
#: Scalar registers (r0 reads 0, writes to it are ignored), each 32 bits.
NUM_REGS = 64
REG_BITS = 6
#: Semaphores: 16 counters of 16 bits (wrap modulo 2**16).
NUM_SEMS = 16
SEM_BITS = 4
SEM_VALUE_BITS = 16
#: Hardware loop nesting depth (LOOP/ENDLOOP stack).
LOOP_DEPTH = 4
#: Macro CALL/RET return-stack depth.
CALL_DEPTH = 8
#: Micro-level call/return stack depth (in the micro-sequencer).
UCALL_DEPTH = 4
#: Affine address generators.
NUM_AG = 4
#: Records per engine issued and not yet completed before EMIT stalls.
MAX_OUTSTANDING = 8

# --------------------------------------------------------------------------------------------
# Macro-instruction word (64 bits)
# --------------------------------------------------------------------------------------------

#: ``(name, width)`` from bit 0 upwards. ``imm`` is a full 32-bit immediate (no sign extension
#: needed: it is already 32 bits; the assembler accepts negative values as two's complement).
INSTR_FIELDS = [
    ("op", 8),     # opcode (Opcode); 0xF0-0xFF free for run-time microcode
    ("rd", 6),     # destination / descriptor register
    ("rs1", 6),    # source register 1
    ("rs2", 6),    # source register 2
    ("rs3", 6),    # source register 3
    ("imm", 32),   # 32-bit immediate, branch target (absolute PC), or an option layout
]


class Opcode(enum.IntEnum):
    """Macro opcodes (8 bits). 0xF0..0xFF are free for run-time (user) microcode."""
    NOP = 0x00
    HALT = 0x01
    BARRIER = 0x02
    JMP = 0x03
    CALL = 0x04
    RET = 0x05
    LOOP = 0x06
    ENDLOOP = 0x07
    AG = 0x08
    BEQ = 0x09
    BNE = 0x0A
    BLT = 0x0B
    BGE = 0x0C
    BLTU = 0x0D
    BGEU = 0x0E
    LI = 0x10
    ADD = 0x11
    SUB = 0x12
    AND = 0x13
    OR = 0x14
    XOR = 0x15
    SHL = 0x16
    SHR = 0x17
    SRA = 0x18
    ADDI = 0x19
    CMP = 0x1A
    CMPI = 0x1B
    SLT = 0x1C
    SLTU = 0x1D
    ANDI = 0x1E
    ORI = 0x1F
    SHLI = 0x20
    SHRI = 0x21
    XORI = 0x22
    SEMINC = 0x28
    SEMSET = 0x29
    WAIT = 0x2A
    WAITI = 0x2B
    SEMRD = 0x2C
    DMA_LD = 0x30
    DMA_ST = 0x31
    MATMUL = 0x38
    ACT = 0x40
    TT = 0x41
    TS = 0x42
    REDUCE = 0x43
    COPY = 0x44
    TABLE_LD = 0x45
    SEED_LD = 0x46
    ACC_RD = 0x47


#: Opcodes the shipped control store leaves unmapped on purpose (illegal until microcode for
#: them is loaded at run time).
USER_OPCODES = range(0xF0, 0x100)


class Engine(enum.IntEnum):
    """Per-engine record queues."""
    DMA = 0
    TENSOR = 1
    VECTOR = 2


class Space(enum.IntEnum):
    """Where a vector-engine source lives."""
    SBUF = 0
    PSUM = 1


class VecOp(enum.IntEnum):
    """``op`` field of a VECTOR record (4 bits)."""
    ACT = 0       # out = LUT[func & 1](a * scale + bias), no LUT if func & ACT_FUNC_LINEAR;
                  # acc=1 also sums out into accumulators
    TT = 1        # out = a <alu> b
    TS = 2        # out = a <alu> scalar
    REDUCE = 3    # out[dst] = <alu>-reduction of a[0..n-1] (alu in ADD, MAX, MIN)
    COPY = 4      # out = a (cast in_fmt -> out_fmt; INT32 -> INT32 copies the bits)
    TABLE = 5     # n LUT cfg writes: (address, data) = SBUF[0][a_addr + 2i],
                  # SBUF[0][a_addr + 2i + 1]; paired (func & TABLE_FUNC_PAIRED):
                  # SBUF[0][a_addr + i], SBUF[1][a_addr + i]
    SEED = 6      # re-seed the lanes' PRNGs from `scalar`
    ACC_RD = 7    # write each lane's accumulator to SBUF[dst] (encoded to out_fmt), then clear it


#: ``func`` bit of an ACT record: no LUT, ``out = a * scale + bias`` (FP32) encoded to
#: ``out_fmt``. With ``in_fmt=INT32, out_fmt=INT8`` and ``rnd`` RNE or SR this is the
#: requantization ``sat(round(a * scale + bias))`` (assembler ``requant``; docs/isa.md).
ACT_FUNC_LINEAR = 2


#: ``func`` bit of a TABLE record: the paired layout, one write per SBUF word of partitions 0
#: (address) and 1 (data), ``n + setup`` cycles instead of ``2n + setup`` (assembler
#: ``table_pair``; docs/isa.md). Every core has at least two partitions
#: (``sim.config.CoreConfig.rows`` >= 2), so the form is legal on every core.
TABLE_FUNC_PAIRED = 1


class VecAlu(enum.IntEnum):
    """``alu`` field of a VECTOR record (4 bits): ``y = a OP b`` for TT/TS; REDUCE uses
    ADD (sum), MAX, MIN. Values are identical to ``sim.vector.AluOp`` (the vector engine's
    op codes), so the core passes the field through. Comparisons give 1.0 or 0.0."""
    BYPASS = 0
    ADD = 1
    SUB = 2
    RSUB = 3     # b - a
    MUL = 4
    MAX = 5
    MIN = 6
    EQ = 7
    NE = 8
    LT = 9
    LE = 10
    GT = 11
    GE = 12


class ErrorBit(enum.IntEnum):
    """Bits of the sequencer's error status register (sticky until reset/start). Any set bit
    stops the sequencer with ``done`` and ``error`` high; ``err_pc`` holds the faulting PC."""
    ILLEGAL_OPCODE = 0    # an opcode with no microroutine (opcode-map entry not valid)
    CALL_OVERFLOW = 1     # CALL with CALL_DEPTH return addresses stacked
    CALL_UNDERFLOW = 2    # RET with an empty call stack
    LOOP_OVERFLOW = 3     # LOOP with LOOP_DEPTH loops open
    LOOP_UNDERFLOW = 4    # ENDLOOP with no loop open
    UCALL_OVERFLOW = 5    # micro CALL with UCALL_DEPTH micro return addresses stacked
    UCALL_UNDERFLOW = 6   # micro RET with an empty micro return stack
    PC_RANGE = 7          # fetch beyond the program memory
    DEADLOCK = 8          # WAIT below its value with no record outstanding on any engine
    MICRO_TRAP = 9        # a microroutine executed TRAP
    ILLEGAL_FIELD = 10    # a TENSOR/VECTOR record the core's engines cannot run (see
                          # tensor_record_error / vector_record_error); raised at its EMIT


# --------------------------------------------------------------------------------------------
# Engine records (what the microcode dispatches; docs/interfaces.md section 7)
# --------------------------------------------------------------------------------------------

#: DMA record: 7 slots, 224 bits. Moves, for p < part_count, i < n1, j < n0, the element
#: ext[ext_addr + p*ext_part_stride + i*ext_stride1 + j*ext_stride0] (bytes, element size
#: STORAGE_BITS[fmt]/8, little-endian) <-> SBUF[part_start + p][sbuf_addr + i*n0 + j].
DMA_RECORD = [
    ("ext_addr", 32),                            # slot 0
    ("ext_stride0", 32),                         # slot 1: inner (j) stride in bytes
    ("ext_stride1", 32),                         # slot 2: outer (i) stride in bytes
    ("ext_part_stride", 32),                     # slot 3: partition (p) stride in bytes
    ("n0", 16), ("n1", 16),                      # slot 4
    ("part_start", 8), ("part_count", 8), ("sbuf_addr", 16),   # slot 5
    ("fmt", 3), ("store", 1), ("sem", 4), ("sem_en", 1), ("_rsv6", 23),   # slot 6
]

#: TENSOR record: 4 slots, 128 bits. matmul(stationary[K,M], moving[K,N]):
#: stationary[k, m] = SBUF[k][stat_addr + m*stat_stride], moving[k, n] =
#: SBUF[k][mov_addr + n*mov_stride], result[m, n] -> PSUM[m][psum_addr + n].
TENSOR_RECORD = [
    ("stat_addr", 16), ("mov_addr", 16),         # slot 0
    ("stat_stride", 16), ("mov_stride", 16),     # slot 1
    ("psum_addr", 16), ("n", 16),                # slot 2
    ("k", 8), ("m", 8), ("fmt", 3), ("accumulate", 1), ("sem", 4), ("sem_en", 1),
    ("_rsv3", 7),                                # slot 3
]

#: VECTOR record: 5 slots, 160 bits. See docs/isa.md "Vector engine records".
VECTOR_RECORD = [
    ("op", 4), ("alu", 4), ("func", 4), ("a_space", 1), ("b_space", 1), ("in_fmt", 3),
    ("out_fmt", 3), ("rnd", 2), ("acc", 1), ("sem", 4), ("sem_en", 1), ("_rsv0", 4),  # slot 0
    ("a_addr", 16), ("b_addr", 16),              # slot 1
    ("dst_addr", 16), ("n", 16),                 # slot 2
    ("scalar", 32),                              # slot 3: TS scalar / ACT scale / SEED seed
    ("bias", 32),                                # slot 4: ACT bias (FP32 bits)
]

RECORDS = {Engine.DMA: DMA_RECORD, Engine.TENSOR: TENSOR_RECORD, Engine.VECTOR: VECTOR_RECORD}

# --------------------------------------------------------------------------------------------
# Immediate layouts of the engine instructions (the imm field, bit 0 first)
# --------------------------------------------------------------------------------------------

#: DMA_LD / DMA_ST imm. Bits [24:16] are DMA_RECORD slot 6 without `store`.
DMA_IMM = [
    ("part_start", 8), ("part_count", 8), ("fmt", 3), ("_z", 1), ("sem", 4), ("sem_en", 1),
    ("_rsv", 7),
]
#: MATMUL imm: identical to TENSOR_RECORD slot 3.
MATMUL_IMM = [
    ("k", 8), ("m", 8), ("fmt", 3), ("accumulate", 1), ("sem", 4), ("sem_en", 1), ("_rsv", 7),
]
#: Vector instructions' imm: VECTOR_RECORD slot 0 with `op` given by the opcode (bits [3:0] of
#: imm are ignored).
VEC_IMM = [
    ("_op", 4), ("alu", 4), ("func", 4), ("a_space", 1), ("b_space", 1), ("in_fmt", 3),
    ("out_fmt", 3), ("rnd", 2), ("acc", 1), ("sem", 4), ("sem_en", 1), ("_rsv", 4),
]
#: AG imm: generator index and loop level (1 = outermost; 0 disables the generator).
AG_IMM = [("k", 2), ("_z", 6), ("level", 3), ("_rsv", 21)]
#: SEMINC / SEMSET / WAIT / WAITI / SEMRD imm: semaphore index and (SEMSET/WAITI) value.
SEM_IMM = [("sem", 4), ("_z", 12), ("value", 16)]


class OpInfo:
    """Assembler syntax of an opcode: operand kinds in order.

    Kinds: ``rd rs1 rs2 rs3`` registers; ``imm`` 32-bit value; ``target`` label/PC into imm;
    ``sem`` semaphore index (imm[3:0]); ``value`` 16-bit value (imm[31:16]); ``k``/``level``
    (AG); ``key=value`` options for engine instructions (fields of the opcode's imm layout).
    """

    def __init__(self, operands, imm_layout=None, defaults=None):
        self.operands = tuple(operands)
        self.imm_layout = imm_layout
        self.defaults = dict(defaults or {})


_VEC = ("rd", "rs1", "rs2", "rs3")
OPCODE_INFO = {
    Opcode.NOP: OpInfo(()),
    Opcode.HALT: OpInfo(()),
    Opcode.BARRIER: OpInfo(()),
    Opcode.JMP: OpInfo(("target",)),
    Opcode.CALL: OpInfo(("target",)),
    Opcode.RET: OpInfo(()),
    Opcode.LOOP: OpInfo(("rs1", "target")),
    Opcode.ENDLOOP: OpInfo(()),
    Opcode.AG: OpInfo(("k", "rd", "rs1", "level")),
    Opcode.BEQ: OpInfo(("target",)), Opcode.BNE: OpInfo(("target",)),
    Opcode.BLT: OpInfo(("target",)), Opcode.BGE: OpInfo(("target",)),
    Opcode.BLTU: OpInfo(("target",)), Opcode.BGEU: OpInfo(("target",)),
    Opcode.LI: OpInfo(("rd", "imm")),
    Opcode.ADD: OpInfo(("rd", "rs1", "rs2")), Opcode.SUB: OpInfo(("rd", "rs1", "rs2")),
    Opcode.AND: OpInfo(("rd", "rs1", "rs2")), Opcode.OR: OpInfo(("rd", "rs1", "rs2")),
    Opcode.XOR: OpInfo(("rd", "rs1", "rs2")), Opcode.SHL: OpInfo(("rd", "rs1", "rs2")),
    Opcode.SHR: OpInfo(("rd", "rs1", "rs2")), Opcode.SRA: OpInfo(("rd", "rs1", "rs2")),
    Opcode.SLT: OpInfo(("rd", "rs1", "rs2")), Opcode.SLTU: OpInfo(("rd", "rs1", "rs2")),
    Opcode.ADDI: OpInfo(("rd", "rs1", "imm")), Opcode.ANDI: OpInfo(("rd", "rs1", "imm")),
    Opcode.ORI: OpInfo(("rd", "rs1", "imm")), Opcode.XORI: OpInfo(("rd", "rs1", "imm")),
    Opcode.SHLI: OpInfo(("rd", "rs1", "imm")), Opcode.SHRI: OpInfo(("rd", "rs1", "imm")),
    Opcode.CMP: OpInfo(("rs1", "rs2")), Opcode.CMPI: OpInfo(("rs1", "imm")),
    Opcode.SEMINC: OpInfo(("sem",)),
    Opcode.SEMSET: OpInfo(("sem", "value")),
    Opcode.WAIT: OpInfo(("sem", "rs1")),
    Opcode.WAITI: OpInfo(("sem", "value")),
    Opcode.SEMRD: OpInfo(("rd", "sem")),
    Opcode.DMA_LD: OpInfo(("rd", "rs1", "rs2"), DMA_IMM, {"part_count": 1}),
    Opcode.DMA_ST: OpInfo(("rd", "rs1", "rs2"), DMA_IMM, {"part_count": 1}),
    Opcode.MATMUL: OpInfo(_VEC, MATMUL_IMM, {"k": 1, "m": 1}),
    Opcode.ACT: OpInfo(_VEC, VEC_IMM),
    Opcode.TT: OpInfo(_VEC, VEC_IMM),
    Opcode.TS: OpInfo(_VEC, VEC_IMM),
    Opcode.REDUCE: OpInfo(_VEC, VEC_IMM),
    Opcode.COPY: OpInfo(_VEC, VEC_IMM),
    Opcode.TABLE_LD: OpInfo(("rs1", "rs3"), VEC_IMM),
    Opcode.SEED_LD: OpInfo(("rs2",), VEC_IMM),
    Opcode.ACC_RD: OpInfo(("rd",), VEC_IMM),
}

#: VecOp set by each vector opcode.
VEC_OPCODES = {
    Opcode.ACT: VecOp.ACT, Opcode.TT: VecOp.TT, Opcode.TS: VecOp.TS,
    Opcode.REDUCE: VecOp.REDUCE, Opcode.COPY: VecOp.COPY, Opcode.TABLE_LD: VecOp.TABLE,
    Opcode.SEED_LD: VecOp.SEED, Opcode.ACC_RD: VecOp.ACC_RD,
}
__all__ += ["VEC_OPCODES", "ACT_FUNC_LINEAR", "TABLE_FUNC_PAIRED"]

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def layout_width(layout):
    return sum(w for _, w in layout)


RECORD_SLOTS = {e: layout_width(l) // 32 for e, l in RECORDS.items()}

#: The record slots the core's EMIT check reads (``rtl/core/record_check.py``'s terms: TENSOR's
#: n in slot 2, k, m and fmt in slot 3; VECTOR's op, alu, rnd and b_space in slot 0). The
#: sequencer registers a slot's terms in the cycle after its write, so an EMIT of that engine
#: right after a write of one of these slots holds one cycle (``sim/cycles.py``).
CHECKED_SLOTS = {Engine.TENSOR: (2, 3), Engine.VECTOR: (0,)}

# --------------------------------------------------------------------------------------------
# Record validity (the core's engines): the one rule set the RTL check (``rtl/core/record_check.py``)
# and the reference simulator (``sim/refsim.py``, ``check=True``) implement. An invalid record
# raises ``ErrorBit.ILLEGAL_FIELD`` when the microroutine EMITs it (nothing is queued).
# --------------------------------------------------------------------------------------------

#: Largest valid ``alu`` (``VecAlu.GE``) and ``rnd`` (``RoundMode.SR``) field values.
VEC_ALU_MAX = 12
VEC_RND_MAX = 2
#: ``alu`` values REDUCE accepts.
VEC_REDUCE_ALUS = (1, 5, 6)      # VecAlu.ADD, MAX, MIN
#: Vector ops whose ``alu``/``rnd`` fields are checked (TABLE and SEED ignore them).
VEC_CHECKED_OPS = (0, 1, 2, 3, 4, 7)   # ACT, TT, TS, REDUCE, COPY, ACC_RD


def tensor_record_error(rec, rows, cols, formats):
    """Why a TENSOR record (field dict) is illegal on a ``rows x cols`` core whose tensor
    engine takes ``formats`` (ints), or ``None`` when it is legal: ``1 <= k <= rows``,
    ``1 <= m <= cols``, ``n >= 1``, ``fmt`` in ``formats``."""
    if not 1 <= rec["k"] <= rows:
        return f"k must be in 1..{rows}, not {rec['k']}"
    if not 1 <= rec["m"] <= cols:
        return f"m must be in 1..{cols}, not {rec['m']}"
    if rec["n"] < 1:
        return "n must be at least 1, not 0"
    if int(rec["fmt"]) not in [int(f) for f in formats]:
        return f"fmt {rec['fmt']} is not a tensor-engine format of this core"
    return None


def vector_record_error(rec):
    """Why a VECTOR record (field dict) is illegal, or ``None``: ``op`` beyond ACC_RD; for
    ACT, TT, TS, REDUCE, COPY, ACC_RD an ``alu`` beyond GE or ``rnd`` beyond SR; REDUCE with
    an ``alu`` other than ADD/MAX/MIN; TT with ``b_space = PSUM`` (the core has one PSUM read
    path, used by ``a``)."""
    op = rec["op"]
    if op > VecOp.ACC_RD:
        return f"op must be in 0..{int(VecOp.ACC_RD)}, not {op}"
    if op in VEC_CHECKED_OPS:
        if rec["alu"] > VEC_ALU_MAX:
            return f"alu must be in 0..{VEC_ALU_MAX}, not {rec['alu']}"
        if rec["rnd"] > VEC_RND_MAX:
            return f"rnd must be in 0..{VEC_RND_MAX}, not {rec['rnd']}"
    if op == VecOp.REDUCE and rec["alu"] not in VEC_REDUCE_ALUS:
        return f"REDUCE alu must be ADD, MAX or MIN, not {rec['alu']}"
    if op == VecOp.TT and rec["b_space"] == Space.PSUM:
        return "TT b_space must be SBUF (the core reads only a from PSUM)"
    return None


__all__ += ["VEC_ALU_MAX", "VEC_RND_MAX", "VEC_REDUCE_ALUS", "VEC_CHECKED_OPS",
            "tensor_record_error", "vector_record_error"]


def field_offsets(layout):
    """``{name: (offset, width)}`` of a ``[(name, width), ...]`` layout."""
    out, pos = {}, 0
    for name, width in layout:
        out[name] = (pos, width)
        pos += width
    return out


def pack(layout, **values):
    """Pack field values (missing ones are 0) into an int; raises ValueError on overflow or an
    unknown field name."""
    offs = field_offsets(layout)
    word = 0
    for name, value in values.items():
        if name not in offs:
            raise ValueError(f"unknown field {name!r}; fields are {', '.join(offs)}")
        pos, width = offs[name]
        value = int(value)
        if not 0 <= value < (1 << width):
            raise ValueError(f"{name} must be in 0..{(1 << width) - 1}, not {value}")
        word |= value << pos
    return word


def unpack(layout, word):
    """Inverse of :func:`pack`: ``{name: value}`` for every field (reserved ones included)."""
    return {name: (int(word) >> pos) & ((1 << w) - 1)
            for name, (pos, w) in field_offsets(layout).items()}


def encode(op, rd=0, rs1=0, rs2=0, rs3=0, imm=0):
    """Encode one macro-instruction as a 64-bit int. ``imm`` may be negative (two's
    complement)."""
    return pack(INSTR_FIELDS, op=int(op), rd=rd, rs1=rs1, rs2=rs2, rs3=rs3,
                imm=int(imm) & 0xFFFFFFFF)


def decode(word):
    """Fields of a 64-bit instruction word as a dict (``op`` is an int: it may be unmapped)."""
    return unpack(INSTR_FIELDS, word)

# --------------------------------------------------------------------------------------------
# Microcode word (64 bits): the control store's format (docs/isa.md section 7)
# --------------------------------------------------------------------------------------------

#: Control-store depth (micro-address width 9) and opcode-map entry width (valid + address).
UCODE_DEPTH = 512
UADDR_BITS = 9
MAP_BITS = UADDR_BITS + 1

MICRO_FIELDS = [
    ("seq", 3),       # USeq: next micro-address
    ("cond", 4),      # UCond for seq=BRANCH
    ("target", 9),    # branch/call/loop target
    ("a", 4),         # USrc of ALU operand A
    ("b", 4),         # USrc of ALU operand B
    ("alu", 4),       # UAlu
    ("dst", 4),       # UDst of the ALU result
    ("eng", 2),       # Engine for dst=SLOT and special=EMIT
    ("slot", 3),      # record slot for dst=SLOT
    ("special", 4),   # USpecial side effect
    ("const", 16),    # constant for src=CONST; generator index k = const[1:0] for AG sources
    ("_rsv", 7),
]


class USeq(enum.IntEnum):
    NEXT = 0      # upc + 1
    JUMP = 1      # target
    CALL = 2      # push upc + 1 (UCALL_DEPTH; overflow: UCALL_OVERFLOW), go to target
    RET = 3       # pop (empty: UCALL_UNDERFLOW)
    BRANCH = 4    # target if cond else upc + 1
    ULOOP = 5     # if uctr != 0: uctr -= 1, go to target; else upc + 1
    END = 6       # macro-instruction done: pc = npc, retire, fetch
    TRAP = 7      # MICRO_TRAP error


class UCond(enum.IntEnum):
    ALWAYS = 0
    Z = 1          # ALU result of this micro-instruction == 0
    NZ = 2
    EQ = 3         # macro flags
    NE = 4
    LT = 5
    GE = 6
    LTU = 7
    GEU = 8
    LOOP_MORE = 9  # loop stack non-empty and top remaining > 1


#: The micro branch conditions on the flags: a BRANCH on one right after a micro-instruction
#: that writes FLAGS holds one cycle (the flags are written in the cycle after;
#: ``sim/cycles.py``).
FLAG_CONDS = (UCond.EQ, UCond.NE, UCond.LT, UCond.GE, UCond.LTU, UCond.GEU)


class USrc(enum.IntEnum):
    ZERO = 0
    RD = 1         # r[rd]
    RS1 = 2
    RS2 = 3
    RS3 = 4
    RD1 = 5        # r[rd+1]
    RD2 = 6
    RD3 = 7
    RS2P1 = 8      # r[rs2+1]
    IMM = 9
    CONST = 10     # const field, zero-extended
    T0 = 11        # micro temporaries (not architectural)
    T1 = 12
    AGREG = 13     # r[AG[k].reg], k = const[1:0]
    AGSTRIDE = 14  # AG[k].stride
    AGBASE = 15    # AG[k].base


#: Operand sources that read what an AG_SET / AG_SNAP writes (AG_SET: a generator's register
#: index and stride; AG_SNAP: its base). In the three-stage sequencer the successor of such a
#: micro-instruction waits one cycle in the operand-read stage if it reads one of them.
AG_SET_READS = (USrc.AGREG, USrc.AGSTRIDE)
AG_SNAP_READS = (USrc.AGBASE,)


class UAlu(enum.IntEnum):
    ADD = 0
    SUB = 1
    AND = 2
    OR = 3
    XOR = 4
    SHL = 5       # by b & 31
    SHR = 6
    SRA = 7
    SLT = 8
    SLTU = 9
    PASSA = 10
    PASSB = 11


class UDst(enum.IntEnum):
    NONE = 0
    RD = 1        # r[rd] (r0 ignored)
    T0 = 2
    T1 = 3
    SLOT = 4      # record[eng].slot[slot]
    NPC = 5       # next macro PC
    FLAGS = 6     # EQ/LT/LTU of a compared with b (alu ignored)
    AGREG = 7     # r[AG[k].reg] if AG[k].level == loop depth != 0
    UCTR = 8      # micro loop counter (16 bits)


class USpecial(enum.IntEnum):
    NONE = 0
    EMIT = 1       # push record[eng] into its queue (stall while full), then clear it
    SEMINC = 2     # sem[imm & 15] += 1
    SEMSET = 3     # sem[imm & 15] = result & 0xFFFF
    WAIT = 4       # stall while sem[imm & 15] < result & 0xFFFF (DEADLOCK if nothing in flight)
    SEMRD = 5      # r[rd] = sem[imm & 15] (dst must be NONE)
    BARRIER = 6    # stall while any record is outstanding
    HALT = 7       # done (with seq=END)
    LOOP_PUSH = 8  # push {start = pc + 1, remaining = result} (LOOP_OVERFLOW)
    LOOP_STEP = 9  # top.remaining -= 1, npc = top.start (LOOP_UNDERFLOW if empty)
    LOOP_POP = 10  # pop (LOOP_UNDERFLOW if empty)
    CALL_PUSH = 11  # push pc + 1 (CALL_OVERFLOW), npc = result
    CALL_POP = 12  # npc = pop (CALL_UNDERFLOW)
    AG_SET = 13    # AG[imm & 3] = {level = (imm >> 8) & 7, reg = rd, stride = result}
    AG_SNAP = 14   # AG[k].base = result if AG[k].level == loop depth != 0


__all__ += ["UCODE_DEPTH", "UADDR_BITS", "MAP_BITS", "MICRO_FIELDS", "USeq", "UCond", "USrc",
            "UAlu", "UDst", "USpecial"]
