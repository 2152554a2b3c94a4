"""Instruction-level reference simulator of the core: the sequencer's architectural semantics
(``docs/isa.md``) on numpy state, with the engines' golden models applied to every record.

It is written from the ISA document, independently of the microcode: the differential tests run
the same program on the RTL sequencer (which executes microcode) and here, and compare registers,
semaphores, flags, error status and the record trace of every engine.

Sequential semantics: each record is executed completely the moment it is issued (its semaphore
is incremented at once), so ``WAIT`` on an unsatisfied semaphore is a deadlock. The hardware
runs its three engine queues concurrently: ``races=True`` checks that the program orders every
pair of records of different engines that touch the same SBUF/PSUM words (``sim/races.py``).

Usage::

    sim = RefSim(program_words, config=CoreConfig.preset("core8"))    # or CoreConfig().refsim
    sim.run()
    sim.regs, sim.sems, sim.trace[Engine.DMA], sim.error, sim.sbuf, sim.races ...
"""

import numpy as np

from sim import isa
from sim.config import CoreConfig
from sim.dtypes import STORAGE_BITS, Format
from sim.isa import Engine, ErrorBit, Opcode, VecOp
from sim.records import KIND_NOP, KIND_SEED, KIND_TABLE, vector_commands

__all__ = ["RefSim", "record_fields", "MASK32"]

MASK32 = 0xFFFFFFFF


def _s32(x):
    x &= MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def record_fields(engine, op, f, R, rreg):
    """The record (as a field dict) that macro-instruction ``f`` (decoded fields) issues.

    ``rreg(i)`` reads register ``i`` (mod 64). This is the single definition of which record
    fields each engine instruction fills; all other fields are 0.
    """
    imm = f["imm"]
    if engine == Engine.DMA:
        d = isa.unpack(isa.DMA_IMM, imm)
        n = rreg(f["rd"])
        return dict(ext_addr=rreg(f["rs1"]), ext_stride0=rreg(f["rd"] + 1),
                    ext_stride1=rreg(f["rd"] + 2), ext_part_stride=rreg(f["rd"] + 3),
                    n0=n & 0xFFFF, n1=n >> 16, part_start=d["part_start"],
                    part_count=d["part_count"], sbuf_addr=rreg(f["rs2"]) & 0xFFFF,
                    fmt=d["fmt"], store=int(op == Opcode.DMA_ST), sem=d["sem"],
                    sem_en=d["sem_en"])
    if engine == Engine.TENSOR:
        d = isa.unpack(isa.MATMUL_IMM, imm)
        return dict(stat_addr=rreg(f["rs1"]) & 0xFFFF, mov_addr=rreg(f["rs2"]) & 0xFFFF,
                    stat_stride=1, mov_stride=1, psum_addr=rreg(f["rd"]) & 0xFFFF,
                    n=rreg(f["rs3"]) & 0xFFFF, k=d["k"], m=d["m"], fmt=d["fmt"],
                    accumulate=d["accumulate"], sem=d["sem"], sem_en=d["sem_en"])
    d = isa.unpack(isa.VEC_IMM, imm)
    out = {k: v for k, v in d.items() if not k.startswith("_")}
    out["op"] = isa.VEC_OPCODES[op]
    # Every vector opcode copies the same register operands (unused ones are ignored by the
    # engine); ACT also takes its bias from rs2+1.
    out.update(a_addr=rreg(f["rs1"]) & 0xFFFF, dst_addr=rreg(f["rd"]) & 0xFFFF,
               n=rreg(f["rs3"]) & 0xFFFF)
    if op == Opcode.TT:
        out["b_addr"] = rreg(f["rs2"]) & 0xFFFF
    if op in (Opcode.TS, Opcode.ACT, Opcode.SEED_LD):
        out["scalar"] = rreg(f["rs2"])
    if op == Opcode.ACT:
        out["bias"] = rreg(f["rs2"] + 1)
    return out


_ENGINE_OF = {Opcode.DMA_LD: Engine.DMA, Opcode.DMA_ST: Engine.DMA,
              Opcode.MATMUL: Engine.TENSOR}
_ENGINE_OF.update({op: Engine.VECTOR for op in isa.VEC_OPCODES})


class Halt(Exception):
    pass


class RefSim:
    """Reference simulator.

    Parameters
    ----------
    program : list of int
        64-bit instruction words.
    config : sim.config.CoreConfig, optional
        The core this program runs on: geometry, program-memory depth, formats and the vector
        engine's parameters come from it (explicit keyword arguments override). Without it,
        those of ``CoreConfig()``, the default core.
    partitions, cols, sbuf_depth, psum_depth : int
        Memory geometry (docs/interfaces.md section 5); ``cols`` None: ``partitions``.
    ext_bytes : int
        External memory size (addresses wrap modulo it).
    pmem_depth : int
        Program memory depth (fetching beyond it raises PC_RANGE).
    extensions : dict, optional
        ``{opcode: fn(sim, fields)}``: semantics of run-time microcoded instructions. A
        routine that stalls until its earlier records complete calls :meth:`barrier`.
    execute : bool
        Apply records to the memories with the golden models (False: trace only).
    check : bool or None
        Validate TENSOR and VECTOR records as the core does (``sim.isa.tensor_record_error``,
        ``vector_record_error``): an invalid record traps ``ILLEGAL_FIELD`` at the issuing
        instruction and is not issued (``illegal`` holds the reason). False (the bare
        sequencer, which issues any record): invalid records are traced and their data
        semantics skipped (listed in ``skipped``). None: True when ``config`` is given.
    formats : collection of Format, optional
        The core's tensor-engine formats for ``check`` (default: the configuration's).
    lut_entries, n_rand : int
        The vector engine's LUT entries per bank and random bits per stochastic-rounding
        decision; they must equal the core's: SR with another ``n_rand`` differs in about
        1 of 256 decisions.
    races : bool or None
        Record every record's SBUF/PSUM accesses and the semaphore order, and list the
        unordered conflicting pairs in ``races`` after :meth:`run` (``sim/races.py``). None:
        True when ``config`` is given.
    host_seed : int
        The host's SEED register (reset value 0). START reseeds every lane generator of the
        vector engine from it, so a run starts with the generators of this seed
        (``docs/memory_map.md``); ``seed_ld`` reseeds them from the program.

    Members
    -------
    races : list of sim.races.Race
        Unordered conflicting record pairs (empty unless ``races``).
    """

    def __init__(self, program, *, config=None, partitions=None, cols=None, sbuf_depth=None,
                 psum_depth=None, ext_bytes=1 << 16, pmem_depth=None, extensions=None,
                 execute=True, check=None, formats=None, lut_entries=None, n_rand=None,
                 races=None, host_seed=0):
        given = config is not None
        cfg = CoreConfig() if config is None else config
        if not isinstance(cfg, CoreConfig):
            raise TypeError(f"config must be a sim.config.CoreConfig, not {config!r}")
        partitions = cfg.rows if partitions is None else partitions
        cols = (cfg.cols if given or partitions == cfg.rows else partitions) \
            if cols is None else cols
        sbuf_depth = cfg.sbuf_depth if sbuf_depth is None else sbuf_depth
        psum_depth = cfg.psum_depth if psum_depth is None else psum_depth
        pmem_depth = cfg.pmem_depth if pmem_depth is None else pmem_depth
        formats = cfg.formats if formats is None else formats
        lut_entries = cfg.lut_entries if lut_entries is None else lut_entries
        n_rand = cfg.n_rand if n_rand is None else n_rand
        check = given if check is None else check
        races = given if races is None else races
        self.config = cfg
        self.program = [int(w) for w in program]
        self.P, self.cols = partitions, cols
        self.sbuf_depth, self.psum_depth = sbuf_depth, psum_depth
        self.pmem_depth = pmem_depth
        self.extensions = dict(extensions or {})
        self.execute = execute
        self.check = check
        self.formats = tuple(int(f) for f in formats)
        self.lut_entries, self.n_rand = lut_entries, n_rand
        self.host_seed = host_seed
        self.illegal = None
        self.ext = np.zeros(ext_bytes, dtype=np.uint8)
        self.sbuf = np.zeros((partitions, sbuf_depth), dtype=np.uint32)
        self.psum = np.zeros((cols, psum_depth), dtype=np.uint32)
        self.regs = [0] * isa.NUM_REGS
        self.flags = {"EQ": 0, "LT": 0, "LTU": 0}
        self.sems = [0] * isa.NUM_SEMS
        self.loops = []      # [start_pc, remaining]
        self.calls = []
        self.ags = [dict(level=0, reg=0, stride=0, base=0) for _ in range(isa.NUM_AG)]
        self.pc = 0
        self.error = 0
        self.err_pc = 0
        self.done = False
        self.retired = 0
        self.trace = {e: [] for e in Engine}     # packed record ints per engine
        self.order = []                          # (engine, packed) in issue order
        self.skipped = []                        # records whose data semantics were not run
        self._vec = None
        self._race = None
        if races:
            from sim.races import RaceChecker
            self._race = RaceChecker(partitions=partitions, cols=cols, sbuf_depth=sbuf_depth,
                                     psum_depth=psum_depth, text=self._text)

    @property
    def vec(self):
        """The vector engine's model (``sim.vector.VectorEngineModel``), created on first use
        with its lane generators seeded from ``host_seed``, as START leaves them."""
        if self._vec is None:
            from sim import vector as V
            self._vec = V.VectorEngineModel(self.P, depth=self.lut_entries,
                                            n_rand=self.n_rand, seed=self.host_seed)
        return self._vec

    @vec.setter
    def vec(self, model):
        self._vec = model

    @property
    def races(self):
        """The races found so far (``sim.races.Race``; empty without ``races=True``)."""
        return [] if self._race is None else self._race.races

    @property
    def race_checker(self):
        """The ``sim.races.RaceChecker`` (None without ``races=True``)."""
        return self._race

    def races_error(self):
        """A ``sim.races.RaceError`` naming the first race's two instructions, or None."""
        if not self.races:
            return None
        from sim.races import RaceError
        return RaceError(self.races)

    def barrier(self):
        """A run-time routine's BARRIER: every record issued so far has completed (only the
        race check sees it; records already run to completion here)."""
        if self._race is not None:
            self._race.barrier()

    def _text(self, pc):
        from sim.asm import disassemble_one
        word = self.program[pc] if 0 <= pc < len(self.program) else 0
        try:
            return disassemble_one(word).strip()
        except Exception:       # an extension opcode: no mnemonic
            return f".word {word:#018x}"

    # -- state helpers -------------------------------------------------------------------
    def r(self, i):
        return self.regs[i % isa.NUM_REGS]

    def w(self, i, v):
        i %= isa.NUM_REGS
        if i:
            self.regs[i] = v & MASK32

    def _trap(self, bit):
        self.error |= 1 << bit
        self.err_pc = self.pc
        self.done = True
        raise Halt

    def issue(self, engine, fields):
        """Issue one record: trace it, execute it, apply its semaphore."""
        word = isa.pack(isa.RECORDS[engine], **fields)
        if self.check and engine != Engine.DMA:
            rec = isa.unpack(isa.RECORDS[engine], word)
            why = (isa.tensor_record_error(rec, self.P, self.cols, self.formats)
                   if engine == Engine.TENSOR else isa.vector_record_error(rec))
            if why is not None:
                self.illegal = why
                self._trap(ErrorBit.ILLEGAL_FIELD)
        self.trace[engine].append(word)
        self.order.append((engine, word))
        if self._race is not None:
            self._race.issue(engine, isa.unpack(isa.RECORDS[engine], word), self.pc)
        if self.execute:
            self._execute(engine, isa.unpack(isa.RECORDS[engine], word))
        if fields.get("sem_en"):
            s = fields["sem"]
            self.sems[s] = (self.sems[s] + 1) & 0xFFFF

    # -- engines ---------------------------------------------------------------------------
    def _execute(self, engine, rec):
        if engine == Engine.DMA:
            self._dma(rec)
        elif engine == Engine.TENSOR:
            self._matmul(rec)
        else:
            self._vector(rec)

    def _dma(self, r):
        nbytes = STORAGE_BITS[Format(r["fmt"])] // 8
        size = self.ext.size
        for p in range(r["part_count"]):
            part = (r["part_start"] + p) % self.P
            for i in range(r["n1"]):
                for j in range(r["n0"]):
                    e = (r["ext_addr"] + p * r["ext_part_stride"] + i * r["ext_stride1"]
                         + j * r["ext_stride0"]) & MASK32
                    a = (r["sbuf_addr"] + i * r["n0"] + j) % self.sbuf_depth
                    idx = [(e + b) % size for b in range(nbytes)]
                    if r["store"]:
                        v = int(self.sbuf[part, a])
                        for b, x in enumerate(idx):
                            self.ext[x] = (v >> (8 * b)) & 0xFF
                    else:
                        v = 0
                        for b, x in enumerate(idx):
                            v |= int(self.ext[x]) << (8 * b)
                        self.sbuf[part, a] = v

    def _matmul(self, r):
        """A TENSOR record on the tensor engine's model (``sim/tensor.py``); its command is the
        record's fields unchanged (``sim.records.tensor_command``)."""
        from sim import tensor
        fmt = Format(r["fmt"])
        K, M, N = r["k"], r["m"], r["n"]
        if fmt not in tensor.ENGINE_FORMATS or not (1 <= K <= self.P) or \
                not (1 <= M <= self.cols) or N < 1:
            self.skipped.append((Engine.TENSOR, r))
            return
        mask = np.uint64((1 << STORAGE_BITS[fmt]) - 1)
        sm = (r["stat_addr"] + np.arange(M) * r["stat_stride"]) % self.sbuf_depth
        sn = (r["mov_addr"] + np.arange(N) * r["mov_stride"]) % self.sbuf_depth
        st = self.sbuf[:K, sm].astype(np.uint64) & mask
        mv = self.sbuf[:K, sn].astype(np.uint64) & mask
        res = tensor.column_sums(st, mv, fmt, rows=self.P, cols=self.cols, fast=True,
                                 accumulate=self.config.tensor_accumulate)
        if N <= self.psum_depth:
            # N distinct words: one vectorised write.
            a = (r["psum_addr"] + np.arange(N)) % self.psum_depth
            self.psum[:, a] = tensor.add_fast(self.psum[:, a], res, fmt) \
                if r["accumulate"] else res
            return
        for n in range(N):
            a = (r["psum_addr"] + n) % self.psum_depth
            if r["accumulate"]:
                self.psum[:, a] = tensor.add_fast(self.psum[:, a], res[:, n], fmt)
            else:
                self.psum[:, a] = res[:, n]

    def _read_lanes(self, space, addr, count, stride=1):
        """``count`` beats of P lanes from SBUF or PSUM at ``addr``, ``addr + stride``, ...
        (PSUM lanes >= cols read +0.0)."""
        out = np.zeros((count, self.P), dtype=np.uint32)
        for i in range(count):
            a = addr + i * stride
            if space == isa.Space.SBUF:
                out[i] = self.sbuf[:, a % self.sbuf_depth]
            else:
                out[i, :self.cols] = self.psum[:, a % self.psum_depth]
        return out

    def _vector(self, r):
        """A VECTOR record: the vector controller's commands of it (``sim.records``) on the
        vector engine's golden model (``sim/vector.py``)."""
        # An ALU op or rounding mode the engine lacks has no data semantics (with ``check``
        # such a record traps before it gets here).
        if r["op"] not in (VecOp.SEED, VecOp.TABLE) and \
                (r["alu"] > isa.VEC_ALU_MAX or r["rnd"] > isa.VEC_RND_MAX):
            self.skipped.append((Engine.VECTOR, r))
            return
        for c in vector_commands(r, self.P):
            if c["kind"] == KIND_NOP:
                self.skipped.append((Engine.VECTOR, r))
            elif c["kind"] == KIND_SEED:
                self.vec.ru.reseed(c["scalar"])
            elif c["kind"] == KIND_TABLE:
                # Unpaired (parts 1): n words of SBUF partition 0, alternating LUT address and
                # data; paired (parts 2): n words of partitions 0 (address) and 1 (data).
                w = self._read_lanes(isa.Space.SBUF, c["a_addr"], c["n"], c["a_stride"])
                pairs = zip(w[:, 0], w[:, 1]) if c["parts"] == 2 else \
                    zip(w[0::2, 0], w[1::2, 0])
                for addr, data in pairs:
                    self.vec.cfg_write(int(addr), int(data))
            else:
                a = self._read_lanes(c["a_psum"], c["a_addr"], c["n"], c["a_stride"])
                # The core reads b from SBUF only (a TT record with b_space = PSUM traps,
                # isa.vector_record_error); without the check the ISA's b_space applies.
                b = self._read_lanes(r["b_space"], c["b_addr"], c["n"], c["b_stride"]) \
                    if c["b_en"] else None
                outs = self.vec.execute(c["op"], a, () if b is None else b)
                assert len(outs) == c["o_n"], (c, len(outs))
                for i, o in enumerate(outs):
                    self.sbuf[:, (c["o_addr"] + i * c["o_stride"]) % self.sbuf_depth] = o

    # -- execution ----------------------------------------------------------------------------
    def run(self, max_steps=1_000_000):
        """Run until HALT or an error (or ``max_steps`` instructions: RuntimeError)."""
        for _ in range(max_steps):
            if self.done:
                return self
            try:
                self.step()
            except Halt:
                return self
        raise RuntimeError(f"program did not halt within {max_steps} instructions")

    def step(self):
        if self.pc >= self.pmem_depth:
            self._trap(ErrorBit.PC_RANGE)
        word = self.program[self.pc] if self.pc < len(self.program) else 0
        f = isa.decode(word)
        op = f["op"]
        npc = self.pc + 1
        R, W = self.r, self.w
        rd, rs1, rs2, imm = f["rd"], f["rs1"], f["rs2"], f["imm"]
        sem_idx = imm & 0xF
        sem_val = imm >> 16

        if op in self.extensions:
            res = self.extensions[op](self, f)
            npc = npc if res is None else res
        elif op not in Opcode.__members__.values():
            self._trap(ErrorBit.ILLEGAL_OPCODE)
        else:
            op = Opcode(op)
            if op == Opcode.NOP:
                pass
            elif op == Opcode.BARRIER:
                self.barrier()
            elif op == Opcode.HALT:
                self.barrier()
                self.done = True
            elif op == Opcode.JMP:
                npc = imm
            elif op == Opcode.CALL:
                if len(self.calls) >= isa.CALL_DEPTH:
                    self._trap(ErrorBit.CALL_OVERFLOW)
                self.calls.append(npc)
                npc = imm
            elif op == Opcode.RET:
                if not self.calls:
                    self._trap(ErrorBit.CALL_UNDERFLOW)
                npc = self.calls.pop()
            elif op == Opcode.LOOP:
                count = R(rs1)
                if count == 0:
                    npc = (imm + 1) & MASK32
                else:
                    if len(self.loops) >= isa.LOOP_DEPTH:
                        self._trap(ErrorBit.LOOP_OVERFLOW)
                    self.loops.append([npc, count])
                    depth = len(self.loops)
                    for ag in self.ags:
                        if ag["level"] == depth:
                            ag["base"] = R(ag["reg"])
            elif op == Opcode.ENDLOOP:
                if not self.loops:
                    self._trap(ErrorBit.LOOP_UNDERFLOW)
                depth = len(self.loops)
                top = self.loops[-1]
                if top[1] > 1:
                    top[1] -= 1
                    for ag in self.ags:
                        if ag["level"] == depth:
                            W(ag["reg"], R(ag["reg"]) + ag["stride"])
                    npc = top[0]
                else:
                    for ag in self.ags:
                        if ag["level"] == depth:
                            W(ag["reg"], ag["base"])
                    self.loops.pop()
            elif op == Opcode.AG:
                d = isa.unpack(isa.AG_IMM, imm)
                self.ags[d["k"]].update(level=d["level"], reg=rd, stride=R(rs1))
            elif op in _BRANCH:
                flag, want = _BRANCH[op]
                if self.flags[flag] == want:
                    npc = imm
            elif op == Opcode.LI:
                W(rd, imm)
            elif op in _ALU_RR:
                W(rd, _alu(_ALU_RR[op], R(rs1), R(rs2)))
            elif op in _ALU_RI:
                W(rd, _alu(_ALU_RI[op], R(rs1), imm))
            elif op in (Opcode.CMP, Opcode.CMPI):
                a, b = R(rs1), (R(rs2) if op == Opcode.CMP else imm)
                self.flags = {"EQ": int(a == b), "LT": int(_s32(a) < _s32(b)),
                              "LTU": int(a < b)}
            elif op == Opcode.SEMINC:
                self.sems[sem_idx] = (self.sems[sem_idx] + 1) & 0xFFFF
            elif op == Opcode.SEMSET:
                self.sems[sem_idx] = sem_val
                if self._race is not None:
                    self._race.semset(sem_idx)
            elif op in (Opcode.WAIT, Opcode.WAITI):
                want = (R(rs1) & 0xFFFF) if op == Opcode.WAIT else sem_val
                if self.sems[sem_idx] < want:
                    self._trap(ErrorBit.DEADLOCK)
                if self._race is not None:
                    self._race.wait(sem_idx, want, self.sems[sem_idx])
            elif op == Opcode.SEMRD:
                W(rd, self.sems[sem_idx])
            else:
                engine = _ENGINE_OF[op]
                self.issue(engine, record_fields(engine, op, f, R, self.r))
        self.retired += 1
        self.pc = npc & MASK32


def _alu(name, a, b):
    a &= MASK32
    b &= MASK32
    if name == "add":
        return (a + b) & MASK32
    if name == "sub":
        return (a - b) & MASK32
    if name == "and":
        return a & b
    if name == "or":
        return a | b
    if name == "xor":
        return a ^ b
    if name == "shl":
        return (a << (b & 31)) & MASK32
    if name == "shr":
        return a >> (b & 31)
    if name == "sra":
        return (_s32(a) >> (b & 31)) & MASK32
    if name == "slt":
        return int(_s32(a) < _s32(b))
    if name == "sltu":
        return int(a < b)
    raise ValueError(name)


_ALU_RR = {Opcode.ADD: "add", Opcode.SUB: "sub", Opcode.AND: "and", Opcode.OR: "or",
           Opcode.XOR: "xor", Opcode.SHL: "shl", Opcode.SHR: "shr", Opcode.SRA: "sra",
           Opcode.SLT: "slt", Opcode.SLTU: "sltu"}
_ALU_RI = {Opcode.ADDI: "add", Opcode.ANDI: "and", Opcode.ORI: "or", Opcode.XORI: "xor",
           Opcode.SHLI: "shl", Opcode.SHRI: "shr"}
_BRANCH = {Opcode.BEQ: ("EQ", 1), Opcode.BNE: ("EQ", 0), Opcode.BLT: ("LT", 1),
           Opcode.BGE: ("LT", 0), Opcode.BLTU: ("LTU", 1), Opcode.BGEU: ("LTU", 0)}
