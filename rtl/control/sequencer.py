"""The microcoded sequencer: fetches macro-instructions, runs each as a microroutine from a
writable control store, and dispatches engine records into per-engine queues.

Encodings, record layouts and the micro-word format come from ``sim/isa.py``; the shipped
control store and opcode map from ``sim/microcode.py``; the semantics are ``docs/isa.md`` and
its executable form ``sim/refsim.py``.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim import isa
from sim.config import check_int, check_pow2
from sim.isa import AG_SET_READS, AG_SNAP_READS, Engine, ErrorBit, UCond, USrc

from rtl.arith.wide_mux import lut4, pair_mux, wide_mux

from .alu import MicroAlu
from .layouts import record_layout
from .addr_gens import AddressGenerators
from .call_stack import CallStack
from .engine_queue import EngineQueue
from .loop_stack import LoopStack
from .memories import SequencerMemories
from .micro_decode import (ENGINES, HOLD_TERMS, NAMES, SEQ_TERMS, TRAP_TERMS, MicroDecoder,
                           field)
from .micro_stack import MicroCallStack
from .perf_counters import PerfCounters
from .record_builder import RecordBuilder
from .semaphores import SemaphoreBank

__all__ = ["Sequencer", "DBG", "YOSYS_HINTS"]

#: Yosys commands (to run right after ``read_rtlil``) that tell synthesis what the RTL
#: guarantees but cannot express in Amaranth: the program memory, the control store and the
#: opcode map are written only while the sequencer is not busy, so nothing is read from them in
#: the cycle it is written, and a read that collides with a write may return anything
#: (``COLLISION_X_MASK``). Without it yosys keeps the read-first value with comparator and
#: bypass logic around each block RAM,
#: on the fetch loop (control store -> next micro-address -> store) and on the instruction
#: decode (program memory -> operand compares). The FPGA builds (``fpga/build.py``),
#: ``scripts/unit_fmax.py`` and ``scripts/synth.py`` run it; Verilog users with another
#: synthesis tool may give the same don't-care the same way.
YOSYS_HINTS = (r"setparam -set COLLISION_X_MASK 1'1 r:MEMID=\pmem r:MEMID=\ucode %u "
               r"r:MEMID=\opmap %u t:$memrd_v2 %i")

#: Debug read-port map (``dbg_addr``): registers 0..63, then these.
DBG = {
    "sem": 64,          # 64..79: semaphores
    "flags": 80,        # bit0 EQ, bit1 LT, bit2 LTU
    "err_status": 81,
    "err_pc": 82,
    "pc": 83,
    "retired": 84,
    "cycles": 85,
    "busy": 86,         # 86 + 3*engine: cycles with a record of that engine outstanding
    "semwait": 87,      # 87 + 3*engine: engine idle while the sequencer waits on a semaphore
    "idle": 88,         # 88 + 3*engine: engine idle otherwise
    "blocked": 95,      # 95 + engine: cycles an EMIT to that engine waited for queue space
    "loop_depth": 98,
    "call_depth": 99,
    "status": 100,      # bit0 busy, bit1 done, bit2 error
}

# MAP, EXEC and DONE each own a bit of the state register (``in_map`` and ``in_exec`` are a
# flip-flop each, so that no compare of ``state`` is in front of the control store's address).
_S_IDLE, _S_CLEAR, _S_FETCH, _S_DECODE, _S_MAP, _S_EXEC, _S_DONE = 0, 1, 2, 3, 4, 8, 16
_ENGINES, _NAMES = ENGINES, NAMES
# Operand sources read from the register file.
_REG_SRCS = (USrc.RD, USrc.RS1, USrc.RS2, USrc.RS3, USrc.RD1, USrc.RD2, USrc.RD3, USrc.RS2P1,
             USrc.AGREG)
_HOLD_TERMS, _TRAP_TERMS, _SEQ_TERMS = HOLD_TERMS, TRAP_TERMS, SEQ_TERMS


class Sequencer(wiring.Component):
    """Microcoded control sequencer with three engine queues.

    Parameters
    ----------
    pmem_depth : int
        Program memory words (64-bit instructions), a power of two, 16..65536.
    queue_depth : int
        Records buffered per engine output queue, 1..16.
    max_outstanding : int
        Records per engine issued and not yet completed before EMIT stalls, 1..64
        (``sim.isa.MAX_OUTSTANDING`` by default).
    check_terms : int
        Record-check terms per slot (``*_slot_terms``), 1..32.

    Members
    -------
    start : In(1)
        Pulse (in idle or done state): clear registers (64 cycles), semaphores, flags, stacks,
        generators, errors and counters, then run from ``start_pc``.
    start_pc : In(32)
    busy, done, error : Out(1)
        ``done`` after HALT or an error; ``error`` with it on an error.
    err_status : Out(16)
        ``ErrorBit`` bits; ``err_pc`` the PC of the faulting instruction.
    pmem_wr_addr, pmem_wr_data, pmem_wr_en : In
        Program-memory write port, while the sequencer is not ``busy`` (a write while busy is
        ignored, as for the two ports below; the core refuses PROG- and UCODE-window writes
        while busy, ``sim/memmap.py``): nothing is read in the cycle it is written
        (:data:`YOSYS_HINTS`).
    ucode_wr_addr (9), ucode_wr_data (64), ucode_wr_en : In
        Control-store write port: new microroutines at run time, while not ``busy``.
    map_wr_addr (8), map_wr_data (10), map_wr_en : In
        Opcode-map write port, while not ``busy``: ``map_wr_data = 1 << 9 | micro-address``;
        0 makes an opcode illegal.
    dma, tensor, vector : Out(stream.Signature(record_layout(engine)))
        Engine record streams (``sim.isa.*_RECORD``); accept any back-pressure.
    dma_done, tensor_done, vector_done : In(1)
        One pulse per completed record of that engine, in issue order (sem_en or not): the
        sequencer applies the record's semaphore increment.
    slot_data : Out(32)
        The value written into a record slot, in the cycle after X wrote it (X's result
        registered, ``res_q``, whether or not a slot was written).
    tensor_slot_terms, vector_slot_terms : In(ArrayLayout(check_terms, slots))
        The core's record-check terms of ``slot_data`` (combinational from it), for each slot
        of that engine as if ``slot_data`` were written into it: the sequencer registers a
        slot's terms beside the slot in the cycle after it writes it (W), so that neither
        X's ALU nor the check at EMIT has the terms' logic in front of it. An EMIT of that
        engine right after a write of one of its ``sim.isa.CHECKED_SLOTS`` holds one cycle
        (the terms are then registered) and is not trapped in that cycle.
    tensor_blank_terms, vector_blank_terms : In(ArrayLayout(check_terms, slots))
        The terms of a slot not written since the last EMIT to that engine (it reads as 0):
        the core drives the terms of 0, constants (the sequencer keeps their verdict).
    tensor_terms, vector_terms : Out(ArrayLayout(check_terms, slots))
        The terms of the record being built for that engine as it will be in the next cycle
        unless an EMIT to it goes in this one (what an EMIT to it in the next cycle pushes):
        the terms of written slots (registered, or a slot's terms from ``*_slot_terms`` in
        the cycle after X wrote it, as they are registered), blank terms of the others.
    tensor_illegal, vector_illegal : In(1)
        The core's verdict on ``*_terms`` (combinational from them), which the sequencer
        registers: an EMIT of an illegal record raises ``ILLEGAL_FIELD`` and pushes nothing.
        The verdict of a record whose checked slots are all blank is kept from a cycle in
        which none is written (the blank terms are constants), for an EMIT right after an
        EMIT. Tie to 0 to accept every record.
    dbg_addr : In(8), dbg_data : Out(32)
        Combinational debug read port (:data:`DBG`): registers, semaphores, flags, errors,
        performance counters.

    Timing: an instruction takes 3 cycles of fetch/decode/map, two cycles to fill the
    three-stage micro-pipeline (fetch from the control store, read operands, execute), then one
    cycle per executed micro-instruction, plus two bubbles after a taken BRANCH or ULOOP or a
    RET, one after an AG_SET/AG_SNAP that does not end the instruction if its successor reads
    the generator state it writes (``sim.isa.AG_SET_READS``/``AG_SNAP_READS``), plus stalls.
    A WAIT holds its first two cycles (its value and the semaphore compare are registered)
    and goes on the cycle after the compare finds the value reached; a BRANCH on
    Z/NZ holds its first two cycles (the ALU result and its zero test are registered). A ULOOP
    right after a micro-instruction that writes UCTR, and a BRANCH on LOOP_MORE right after a
    LOOP_PUSH, hold one cycle (the count's zero tests are made on the registered result); a
    SEMRD holds its first two cycles and writes the semaphore as it was in the second
    (registered); a SEMINC reaches its semaphore two cycles after X. A PC beyond the program
    memory traps in DECODE. The engine queues run concurrently with the sequencer.
    Reset: idle, ``done = 0``; memories keep their contents (control store and map start with
    ``sim.microcode``).
    """

    def __init__(self, *, pmem_depth=1024, queue_depth=2, max_outstanding=isa.MAX_OUTSTANDING,
                 check_terms=1):
        check_pow2("pmem_depth", pmem_depth, 16, 65536)
        check_int("queue_depth", queue_depth, 1, 16)
        check_int("max_outstanding", max_outstanding, 1, 64)
        check_int("check_terms", check_terms, 1, 32)
        self._pmem_depth = pmem_depth
        self._queue_depth = queue_depth
        self._max_outstanding = max_outstanding
        self._check_terms = check_terms
        pc_bits = ceil_log2(pmem_depth)
        sig = {
            "start": In(1), "start_pc": In(32),
            "busy": Out(1), "done": Out(1), "error": Out(1),
            "err_status": Out(16), "err_pc": Out(32),
            "pmem_wr_addr": In(pc_bits), "pmem_wr_data": In(isa.INSTR_BITS),
            "pmem_wr_en": In(1),
            "ucode_wr_addr": In(isa.UADDR_BITS), "ucode_wr_data": In(64), "ucode_wr_en": In(1),
            "map_wr_addr": In(8), "map_wr_data": In(isa.MAP_BITS), "map_wr_en": In(1),
            "dbg_addr": In(8), "dbg_data": Out(32),
        }
        for e in _ENGINES:
            sig[_NAMES[e]] = Out(stream.Signature(record_layout(e)))
            sig[_NAMES[e] + "_done"] = In(1)
        sig["slot_data"] = Out(32)
        for e in (Engine.TENSOR, Engine.VECTOR):
            terms = data.ArrayLayout(check_terms, isa.RECORD_SLOTS[e])
            sig[_NAMES[e] + "_slot_terms"] = In(terms)
            sig[_NAMES[e] + "_blank_terms"] = In(terms)
            sig[_NAMES[e] + "_terms"] = Out(terms)
            sig[_NAMES[e] + "_illegal"] = In(1)
        super().__init__(sig)

    pmem_depth = property(lambda self: self._pmem_depth)
    queue_depth = property(lambda self: self._queue_depth)
    max_outstanding = property(lambda self: self._max_outstanding)
    check_terms = property(lambda self: self._check_terms)

    def elaborate(self, platform):
        m = Module()
        pc_bits = ceil_log2(self._pmem_depth)

        state = Signal(5)
        pc = Signal(32)
        npc = Signal(32)
        # X's writes of its result to ``npc`` and ``uctr`` land one cycle late: ``res_q`` is
        # the result registered, ``*_fix`` says the register still has to take it, and
        # ``*_now`` is the value as the architecture has it. So the ALU is not in front of
        # their multiplexers (or of ``pc``).
        res_q = Signal(32)
        npc_fix, uctr_fix = Signal(), Signal()
        npc_now = Signal(32)
        m.d.comb += npc_now.eq(Mux(npc_fix, res_q, npc))
        m.d.sync += [npc_fix.eq(0), uctr_fix.eq(0)]
        with m.If(npc_fix):
            m.d.sync += npc.eq(res_q)
        ir = Signal(isa.INSTR_BITS)
        fi = isa.field_offsets(isa.INSTR_FIELDS)
        op, rd, rs1, rs2, rs3, imm = (ir[fi[n][0]:fi[n][0] + fi[n][1]]
                                      for n in ("op", "rd", "rs1", "rs2", "rs3", "imm"))
        # The register indices rd+1..rd+3 and rs2+1, computed when the instruction loads
        # (MAP), keep the adders out of the operand read.
        rd_p = [Signal(6, name=f"rd_p{i}") for i in range(4)]     # rd+1, rd+2, rd+3, rs2+1
        rd_nz = Signal()                                         # rd != 0
        src_eq_rd = Signal(4)       # rs1, rs2, rs3, rs2 + 1 == rd (registered in MAP)
        in_exec = state[3]                 # state == _S_EXEC
        # An instruction's END leaves its successor's PC in ``npc`` and sets ``pc_pend``; ``pc``
        # copies ``npc`` in the next cycle (FETCH or DONE), so X's result does not reach
        # ``pc``. ``pc_now`` is the PC as the architecture has it (what every reader sees).
        pc_pend = Signal()
        start_clear = Signal()      # START: clear the architectural state
        m.d.comb += start_clear.eq(((state == _S_IDLE) | (state == _S_DONE)) & self.start)
        pc_now = Signal(32)
        m.d.comb += pc_now.eq(Mux(pc_pend, npc_now, pc))
        m.d.sync += pc_pend.eq(0)
        with m.If(pc_pend):
            m.d.sync += pc.eq(npc_now)

        # ---- memories ---------------------------------------------------------------------
        m.submodules.mems = mems = SequencerMemories(pmem_depth=self._pmem_depth)
        m.d.comb += [
            mems.busy.eq(self.busy),
            mems.pmem_wr_addr.eq(self.pmem_wr_addr), mems.pmem_wr_data.eq(self.pmem_wr_data),
            mems.pmem_wr_en.eq(self.pmem_wr_en),
            mems.ucode_wr_addr.eq(self.ucode_wr_addr),
            mems.ucode_wr_data.eq(self.ucode_wr_data), mems.ucode_wr_en.eq(self.ucode_wr_en),
            mems.map_wr_addr.eq(self.map_wr_addr), mems.map_wr_data.eq(self.map_wr_data),
            mems.map_wr_en.eq(self.map_wr_en),
            mems.pmem_addr.eq(pc_now[:pc_bits]),
        ]

        # ---- micro-pipeline ---------------------------------------------------------------
        # Three stages. F (fetch): the control store's output ``uword_f`` is the micro-word at
        # ``upc_f`` (the address registered by the block RAM); F picks its successor itself
        # (a JUMP/CALL target, else ``upc_f + 1``). R (read): the micro-word in ``uword_r``
        # (valid when ``rv``), registered from F, reads its operands from the register file
        # (forwarded from X's write of the same cycle) into ``a``/``b``. X (execute): the
        # micro-word in ``uword_x`` (valid when ``xv``) computes, stalls, writes and picks the
        # next micro-address. X redirects F on a taken BRANCH, ULOOP or RET (two bubbles: R and
        # F are refilled), and an AG_SET/AG_SNAP in X holds R one cycle (R may read the
        # generator state it writes). The register after the block RAM keeps its
        # clock-to-output delay out of the operand read (F's output only selects R's register
        # indices into registers, ``a_idx_q``/``b_idx_q``).
        uword_f = mems.ucode_data[:64]
        jump_f = mems.ucode_data[64]    # the jump bit of ``uword_f``, stored with it
        uword_r = Signal(64)
        uword_x = Signal(64)
        rv, xv = Signal(), Signal()
        upc_f = Signal(isa.UADDR_BITS)
        upc_r = Signal(isa.UADDR_BITS)
        upc_x = Signal(isa.UADDR_BITS)

        def uf(name):
            return field(uword_x, name)

        target = uf("target")
        slot, const = uf("slot"), uf("const")
        k = const[:2]
        a_sel_r, b_sel_r = field(uword_r, "a"), field(uword_r, "b")

        # X's micro-word decoded one stage early (``MicroDecoder``): R decodes ``uword_r`` and
        # the flags load with ``uword_x`` (so ``xd[n]`` is always the decode of ``uword_x``).
        # The stall, error and advance cones then start from single flip-flops instead of 3-
        # and 4-bit field compares.
        m.submodules.decoder = decoder = MicroDecoder()
        m.d.comb += decoder.word.eq(uword_r)
        r_dec = decoder.r
        xd = {n: decoder.x[n] for n in decoder.x.shape().members}
        const_r = field(uword_r, "const")
        k_r = const_r[:2]
        uctr = Signal(16)
        with m.If(uctr_fix):
            m.d.sync += uctr.eq(res_q[:16])
        # ``uctr != 0`` kept in a flip-flop beside it (``uctr_nz``; after X's write it takes
        # the test in W, while a ULOOP holds, so a ULOOP that goes reads ``uctr`` and
        # ``uctr_nz`` as they are): a ULOOP's redirect, in front of the control store's
        # address, then compares no 16-bit value.
        uctr_nz = Signal()
        # The micro-call stack (``MicroCallStack``), its registered pointer tests.
        m.submodules.ucalls = ucalls = MicroCallStack()
        usp_zero, usp_full = ucalls.empty, ucalls.full      # usp == 0, usp == UCALL_DEPTH

        # ---- architectural state ------------------------------------------------------------
        flag_eq, flag_lt, flag_ltu = Signal(), Signal(), Signal()
        # A FLAGS write lands in W (``flags_w``, set on ``adv``) from the compares registered
        # every cycle (``fl_*``): neither the ALU's compares nor ``adv`` reach the flags' data
        # and enable. A BRANCH on a flag right after the write holds one
        # cycle (the shipped routines write the flags with END, and branch in another macro
        # instruction).
        flags_w = Signal()
        fl_eq, fl_lt, fl_ltu = Signal(), Signal(), Signal()
        # The semaphores (``SemaphoreBank``): ``sems`` are its registers, ``sem_now`` the
        # values with a pending SEMSET.
        m.submodules.sems = sem_bank = SemaphoreBank()
        sems = [sem_bank.value[i] for i in range(isa.NUM_SEMS)]
        # The loop stack (``LoopStack``): its pointer tests and LOOP_MORE are flip-flops kept
        # beside the pointers and the top count.
        m.submodules.loops = loops = LoopStack()
        lsp, lsp_oh, lsp_zero, lsp_full = loops.depth, loops.level_oh, loops.empty, loops.full
        lmore_w, lstep_w = loops.more_pending, loops.step_pending
        # The call stack (``CallStack``): its depth, top entry (a RET's return PC) and
        # registered pointer tests.
        m.submodules.calls = calls = CallStack()
        csp, cret = calls.depth, calls.ret
        csp_zero, csp_full = calls.empty, calls.full
        # The address generators (``AddressGenerators``), with registered compares of their
        # registers for the forwarding test of an AGREG operand.
        m.submodules.ags = ags = AddressGenerators()
        ag_reg, ag_rd_eq, ag_hit_ok = ags.reg, ags.rd_eq, ags.hit_ok
        t0 = Signal(32)
        t1 = Signal(32)
        err_status = Signal(16)
        # W: X's writes of its result to the register file, the semaphores (SEMSET), the
        # generators' stride (AG_SET) and base (AG_SNAP), the record slots and a pushed loop
        # count land one cycle late, from registers (``w_rf_*``; ``res_q``, X's result loaded
        # on ``go``) under pending flags registered from X's decoded micro-word. A reader in
        # that cycle takes the pending value instead (``*_now``; the register file's read
        # ports compare the pending write's index). So the ALU's result and the write kill
        # (the stall and error cones) reach a few registers, not every destination's
        # multiplexer and clock enable (semaphores, slots, generators, register file). No cycle
        # changes: every value is where the architecture expects it, one multiplexer later.
        w_rf_en, w_rf_addr, w_rf_data = Signal(), Signal(6), Signal(32)
        sem_now = Array(sem_bank.now[i] for i in range(isa.NUM_SEMS))
        # T0 and T1 too (``t0_w``/``t1_w``), so that X's result and ``go`` do not reach their
        # 64 data inputs and clock enables.
        t0_w, t1_w = Signal(), Signal()
        t0_now, t1_now = Signal(32), Signal(32)
        m.d.comb += [t0_now.eq(Mux(t0_w, res_q, t0)), t1_now.eq(Mux(t1_w, res_q, t1))]
        err_pc = Signal(32)

        # ---- operand selection ------------------------------------------------------------
        # R stage: operand indices and values of the micro-word at upc_r. X's register-file
        # and T0/T1 writes of this cycle land at the same edge as R's capture into X: R only
        # registers that its operand is that write (``a_fw``/``b_fw``) and X takes the value
        # from ``x_prev``, the written value registered at that edge. So the ALU's result
        # goes to one register, not through R's operand multiplexers (late forwarding).
        wr_addr, wr_data, wr_en = Signal(6), Signal(32), Signal()    # X's write (before adv)

        # R's register indices are selected as F's micro-word enters R (``*_idx_q``); an
        # AGREG operand's index too (``ag_idx_r``, below), which also follows an AG_SET in X
        # while R holds.
        # The register sources are codes 1..8 (``RS2P1`` 8): an 8-way multiplexer on the
        # select's low three bits, whatever the others (the index of any other source is
        # never used: the read, the bypass compares and the forwarding tests are all taken
        # under a register source), so the control store's output passes no test of the
        # top bit before ``a_idx_q``/``b_idx_q``.
        assert all(int(s_) & 7 == i for i, s_ in enumerate(
            (USrc.RS2P1, USrc.RD, USrc.RS1, USrc.RS2, USrc.RS3, USrc.RD1, USrc.RD2, USrc.RD3)))

        # Both are 8-way multiplexers behind the control store's block RAM, built from the
        # ECP5 slices' own multiplexers on an ECP5 (``rtl.arith.wide_mux``): one LUT delay
        # instead of three routed LUT4 levels.
        def reg_index(sel, idx):
            m.d.comb += idx.eq(wide_mux(m, platform, sel, [rd_p[3], rd, rs1, rs2, rs3,
                                                           rd_p[0], rd_p[1], rd_p[2]],
                                        f"{idx.name}_mux"))

        def reg_index_eq_rd(sel, eq):
            # ``reg_index(sel) == rd`` from the compares registered with the instruction
            # (``src_eq_rd``); rd + 1..3 never equal rd.
            m.d.comb += eq.eq(wide_mux(m, platform, sel, [
                src_eq_rd[3], Const(1, 1), src_eq_rd[0], src_eq_rd[1], src_eq_rd[2],
                Const(0, 1), Const(0, 1), Const(0, 1)], f"{eq.name}_mux"))

        def operand(sel, rf_data, idx_q, agr_q, reg_q, val):
            # W's pending write of the operand's register instead of the file's stale word:
            # ``w_rf_addr == idx`` with the index's two registered sources compared at once
            # (``idx_q``, and ``ag_idx_r`` for an AGREG operand).
            # The register file's word (late: the read address fans out to the LUT-RAMs)
            # enters the last multiplexer, under ``reg_q`` (``sel`` is a register source,
            # registered with R's micro-word); the other sources are chosen before it.
            w_hit = w_rf_en & Mux(agr_q, w_rf_addr == ag_idx_r, w_rf_addr == idx_q)
            other = Signal(32, name=f"{val.name}_other")
            with m.Switch(sel):
                with m.Case(USrc.IMM):
                    m.d.comb += other.eq(imm)
                with m.Case(USrc.CONST):
                    m.d.comb += other.eq(const_r)
                with m.Case(USrc.T0):
                    m.d.comb += other.eq(t0_now)
                with m.Case(USrc.T1):
                    m.d.comb += other.eq(t1_now)
                with m.Case(USrc.AGSTRIDE):
                    m.d.comb += other.eq(ags.stride[k_r])
                with m.Case(USrc.AGBASE):
                    m.d.comb += other.eq(ags.base[k_r])
            m.d.comb += val.eq(Mux(reg_q, Mux(w_hit, w_rf_data, rf_data), other))

        def forwarded(sel, idx_q, rd_eq_q, hit):
            # R's operand is what X writes this cycle (register file, T0 or T1).
            with m.Switch(sel):
                with m.Case(*_REG_SRCS):
                    # ``wr_en & (wr_addr == idx)`` with both write addresses compared at once
                    # and the generator's tests per generator under X's one-hot ``k``. The
                    # index compares come from registers where they can: ``rd_eq_q``
                    # (``idx_q == rd``, registered with ``idx_q``) and, for an AGREG operand
                    # (the index is ``ag_reg[k_r]``), ``ag_rd_eq`` and ``ags.same``.
                    is_agr = sel == USrc.AGREG
                    rd_eq = Mux(is_agr, Cat(*[kr_oh[i] & ag_rd_eq[i]
                                              for i in range(isa.NUM_AG)]).any(), rd_eq_q)
                    ag_eq = [Mux(is_agr, Cat(*[kr_oh[i] & ags.same(i, j)
                                               for i in range(isa.NUM_AG)]).any(),
                                 ag_reg[j] == idx_q) for j in range(isa.NUM_AG)]
                    m.d.comb += hit.eq(xv & (
                        xd["wr_rd"] & rd_nz & rd_eq |
                        Cat(*[xd[f"dst_agreg_k{j}"] & ag_hit_ok[j] & ag_eq[j]
                              for j in range(isa.NUM_AG)]).any()))
                with m.Case(USrc.T0):
                    m.d.comb += hit.eq(xv & xd["dst_t0"])
                with m.Case(USrc.T1):
                    m.d.comb += hit.eq(xv & xd["dst_t1"])

        # ``ag_hit_ok[j]``: generator j's level is the current loop level and its register
        # is not r0 (a generator write, AGREG as destination, takes effect then).
        m.d.comb += ags.level_oh.eq(lsp_oh[1:])
        a_idx, b_idx = Signal(6), Signal(6)
        a_rd, b_rd = Signal(32), Signal(32)      # R's operands, as the register file has them
        a_hit, b_hit = Signal(), Signal()        # ... or X's result of this cycle instead
        a_q, b_q = Signal(32), Signal(32)        # X's operands (registered)
        a_fw, b_fw = Signal(), Signal()          # X's operand is ``x_prev`` instead
        x_prev = Signal(32)                      # the previous X's written value (registered)
        b_qn, x_prev_n = Signal(32), Signal(32)  # ``b_q``, ``x_prev`` XOR X's ``alu_neg``
        a, b = Signal(32), Signal(32)            # X's operands
        # (F's indices kept for synthesis: the 8-way multiplexer from the control store's
        # output, then one level for R's hold; ``keep`` stops synthesis from sharing it with
        # other decodes of the block RAM's output, which made five LUT levels)
        a_idx_f = Signal(6, name="a_idx_f", attrs={"keep": 1})
        b_idx_f = Signal(6, name="b_idx_f", attrs={"keep": 1})
        a_idx_q, b_idx_q = Signal(6), Signal(6)
        a_rd_eq_q, b_rd_eq_q = Signal(), Signal()      # ``*_idx_q == rd``
        a_rd_eq_f, b_rd_eq_f = Signal(name="a_rd_eq_f"), Signal(name="b_rd_eq_f")
        reg_index_eq_rd(field(uword_f, "a"), a_rd_eq_f)
        reg_index_eq_rd(field(uword_f, "b"), b_rd_eq_f)
        kr_oh = Signal(isa.NUM_AG)                    # ``k_r`` one-hot
        m.d.comb += kr_oh.eq(Const(1, isa.NUM_AG) << k_r)
        reg_index(field(uword_f, "a"), a_idx_f)
        reg_index(field(uword_f, "b"), b_idx_f)
        # An AGREG operand's index, ``ag_reg[k_r]``, is a register of its own (``ag_idx_r``)
        # loaded with R's micro-word, so the register file's read address is a two-way
        # multiplexer of flip-flops under a registered select (``a_agr_q``), not the
        # generators' 4-way multiplexer under ``k_r``. It holds the generator's
        # register as X's AG_SET will leave it (``ag_eff``; AG_SET is ``ag_reg``'s only
        # writer, and a successor that reads a generator's register stays in R until the
        # AG_SET has gone, ``x_holds_r``); while R holds, it takes an AG_SET of its generator
        # in X. Loaded with ``a_idx_q`` below.
        ag_idx_r = Signal(6)
        a_agr_q, b_agr_q = Signal(), Signal()
        a_reg_q, b_reg_q = Signal(), Signal()    # R's operand is a register source
        ag_set_x = ags.set_oh                    # X's AG_SET writes ``ag_reg[j]`` (when it goes)
        m.d.comb += [ags.set_x.eq(xv & xd["ag_set"]), ags.index.eq(imm[:2]), ags.rd.eq(rd)]
        # ``ag_eff[k]`` for F's ``k``: a 4-way multiplexer behind the control store, one ECP5
        # slice per bit (``wide_mux``; synthesis alone makes four LUT4 levels)
        ag_idx_f = wide_mux(m, platform, field(uword_f, "const")[:2],
                            [ags.eff[j] for j in range(isa.NUM_AG)], "ag_idx_f")
        m.d.comb += [a_idx.eq(Mux(a_agr_q, ag_idx_r, a_idx_q)),
                     b_idx.eq(Mux(b_agr_q, ag_idx_r, b_idx_q))]
        m.d.comb += [mems.rf_a_addr.eq(a_idx), mems.rf_b_addr.eq(b_idx)]
        operand(a_sel_r, mems.rf_a_data, a_idx_q, a_agr_q, a_reg_q, a_rd)
        operand(b_sel_r, mems.rf_b_data, b_idx_q, b_agr_q, b_reg_q, b_rd)
        forwarded(a_sel_r, a_idx_q, a_rd_eq_q, a_hit)
        forwarded(b_sel_r, b_idx_q, b_rd_eq_q, b_hit)
        m.d.comb += [a.eq(Mux(a_fw, x_prev, a_q)), b.eq(Mux(b_fw, x_prev, b_q))]

        # The ALU (``MicroAlu``): one carry chain for ADD, SUB, SLT and SLTU, ``b ^ neg``
        # registered beside ``b_q`` and ``x_prev`` (``b_qn``, ``x_prev_n``, from R's decode of
        # ``neg``), so the chain's operand is one multiplexer of flip-flops.
        m.submodules.alu = alu = MicroAlu()
        res, x_fwd = alu.res, alu.fwd
        m.d.comb += [alu.a.eq(a), alu.b.eq(b), alu.b_n.eq(Mux(b_fw, x_prev_n, b_qn)),
                     alu.alu_tt.eq(Cat(*[xd[f"alu_tt{j}"] for j in range(4)])),
                     alu.wr_sem.eq(xd["wr_sem"]),
                     alu.fwd_sem.eq(xd["fwd_sem"]), alu.neg_next.eq(r_dec["alu_neg"])]
        m.d.comb += [getattr(alu, n).eq(xd[n]) for n in ("alu_arith", "alu_neg", "alu_slt",
                                                         "alu_sltu", "alu_shl", "alu_rsh",
                                                         "alu_sra")]

        # No zero test of X's result is in X's cycle: every one is made on ``res_q`` (the
        # result registered) and registered again, so the ALU's carry chain reaches one
        # register. Its readers wait:
        # * a BRANCH on Z/NZ decides on ``res_zero`` (``res_q == 0`` registered): its first
        #   two cycles in X always hold (``zb_seen``, ``zb_go``), X's operands held;
        # * ``uctr_nz`` (``uctr != 0``) takes ``res_q[:16] != 0`` in W after X writes UCTR
        #   (``uctr_fix``), and a ULOOP in X holds while ``uctr_fix`` is set;
        # * a LOOP_PUSH writes its count's ``more`` flags in W (``LoopStack``), and a BRANCH
        #   on LOOP_MORE in X holds then (``lmore_w``).
        # So a ULOOP and a LOOP_MORE are a multiplexer of registered flags in front of the
        # control store's address, as before.
        res_zero = Signal()
        m.d.sync += res_zero.eq(res_q == 0)
        with m.If(uctr_fix):
            m.d.sync += uctr_nz.eq(res_q[:16] != 0)
        loop_more = loops.more      # an OR of flip-flops
        # A taken BRANCH or a RET: a sum of products of conditions decoded a stage early
        # (``br_*``, RET folded into ``br_always``) and registered flags.
        br_taken = Signal()
        m.d.comb += br_taken.eq(Cat(*[xd["br_" + c.name.lower()] & v for c, v in (
            (UCond.ALWAYS, 1), (UCond.Z, res_zero), (UCond.NZ, ~res_zero),
            (UCond.EQ, flag_eq), (UCond.NE, ~flag_eq), (UCond.LT, flag_lt),
            (UCond.GE, ~flag_lt), (UCond.LTU, flag_ltu), (UCond.GEU, ~flag_ltu),
            (UCond.LOOP_MORE, loop_more))]).any())

        # ---- engine queues ----------------------------------------------------------------
        # Each engine's record under construction (``RecordBuilder``: its slots, the slots
        # written since the last EMIT, the record check's registered terms and verdict) and
        # its record and completion FIFOs (``EngineQueue``; ``can_emit`` and ``outstanding``
        # are their registered flags).
        builders, queues, can_emit = {}, {}, {}
        outstanding = Signal(3)   # one bit per engine: a record issued and not completed
        for e in _ENGINES:
            name = _NAMES[e]
            bu = builders[e] = RecordBuilder(
                e, check_terms=None if e == Engine.DMA else self._check_terms)
            m.submodules[f"record_{name}"] = bu
            m.d.comb += [bu.clear.eq(start_clear), bu.write.eq(xd["slot_" + name]),
                         bu.emit.eq(xd["emit_" + name]), bu.slot.eq(slot), bu.res_q.eq(res_q)]
            if e != Engine.DMA:
                m.d.comb += [bu.write_chk.eq(xd["slot_chk_" + name]),
                             bu.slot_terms.eq(getattr(self, name + "_slot_terms")),
                             bu.blank_terms.eq(getattr(self, name + "_blank_terms")),
                             getattr(self, name + "_terms").eq(bu.terms),
                             bu.illegal.eq(getattr(self, name + "_illegal"))]
            qu = queues[e] = EngineQueue(e, depth=self._queue_depth,
                                         max_outstanding=self._max_outstanding)
            m.submodules[f"queue_{name}"] = qu
            wiring.connect(m, qu.o, wiring.flipped(getattr(self, name)))
            m.d.comb += [qu.record.eq(bu.record), qu.done.eq(getattr(self, name + "_done")),
                         outstanding[e].eq(qu.outstanding)]
            can_emit[e] = qu.can_emit
        # The record check's verdict on the record an EMIT in X pushes, low while a write of
        # a slot it reads is pending in W (``chk_pend``: the EMIT holds that cycle).
        ill_x = {e: builders[e].ill for e in _ENGINES}
        chk_pend = {e: builders[e].chk_pend for e in _ENGINES}

        sem_idx = imm[:4]
        # ``sem_idx`` one-hot, registered as the instruction loads (MAP).
        sem_sel = Signal(isa.NUM_SEMS, init=1)
        # SEMRD's value: the semaphore as it was in the previous cycle, registered (a SEMRD
        # holds its first two cycles in X, ``sr_seen`` and ``sr_go``: a SEMINC right before it
        # reaches the semaphore a cycle late, see below), so that the instruction's index and
        # the 16-way multiplexer are not in front of the ALU's result multiplexer.
        sem_cur = Signal(16)
        m.d.sync += sem_cur.eq(sem_now[sem_idx])
        m.d.comb += alu.sem_cur.eq(sem_cur)

        # ---- stall, errors, advance -------------------------------------------------------
        stall = Signal()
        wait_stall = Signal()
        # ``xv`` implies EXEC (MAP and every error clear it), so X is live on ``xv`` alone.
        x_live = Signal()
        m.d.comb += x_live.eq(xv)
        # WAIT registers its value (the ALU result) in its first cycle, compares it with the
        # semaphore in the second and decides in the third: neither the ALU's carry chain nor
        # the compare is in front of ``adv`` or of each other. The first two cycles of a
        # WAIT in X always hold; it goes on once the registered compare says the semaphore
        # reached the value (semaphores only grow while the sequencer waits, so a compare one
        # cycle old is safe). ``wait_stall``: cycles the semaphore was short.
        is_wait, wait_short, wait_go = Signal(), Signal(), Signal()
        wait_seen, wait_armed, wait_ok, wait_dead = Signal(), Signal(), Signal(), Signal()
        wait_val = Signal(16)
        # The compare is made against every semaphore and the instruction's one is picked
        # after it by the registered one-hot ``sem_sel``, so no 16:1 semaphore multiplexer
        # is in front of the compare's carry chain.
        # The compare reads the semaphore registers, not ``sem_now``: a SEMSET's pending
        # value (``sem_w``) is from the micro-instruction before this one in X, and the
        # compare is used only from the WAIT's second cycle in X, when ``sem_w`` is low.
        sem_short = Signal(isa.NUM_SEMS)
        m.d.comb += [sem_short[i].eq(sems[i] < wait_val) for i in range(isa.NUM_SEMS)]
        m.d.comb += [
            is_wait.eq(xd["wait"]),
            wait_short.eq((sem_short & sem_sel).any()),
            wait_go.eq(wait_armed & wait_ok),
            wait_stall.eq(x_live & is_wait & wait_armed & ~wait_ok),
        ]
        m.d.sync += [
            wait_seen.eq(x_live & is_wait & ~wait_go),
            wait_armed.eq(x_live & is_wait & wait_seen & ~wait_go),
            wait_val.eq(res[:16]),
            wait_ok.eq(~wait_short),
            wait_dead.eq(wait_short & (outstanding == 0)),   # implies ~wait_ok
        ]
        is_zbranch, zb_seen, zb_go = Signal(), Signal(), Signal()
        sr_seen = Signal()          # a SEMRD has held its first cycle in X
        sr_go = Signal()            # ... and its second: ``sem_cur`` holds what it reads
        m.d.comb += is_zbranch.eq(xd["zbranch"])
        # The conditions of ``_HOLD_TERMS`` and ``_TRAP_TERMS``, by the same keys; the stall,
        # ``exec_err`` and the register file's ``wr_kill`` are sums of products of these and
        # the terms' decoded flags (``xd[n]``, or ``xd["wk_" + n]`` for ``wr_kill``).
        hold_when = {"emit_" + _NAMES[e]: ~can_emit[e] | chk_pend[e] for e in _ENGINES}
        hold_when.update(wait=~wait_go, zbranch=~zb_go, barrier=outstanding != 0,
                         uloop=uctr_fix, br_loop_more=lmore_w, semrd=~sr_go,
                         loop_step=lstep_w, br_flags=flags_w)
        eb = ErrorBit
        trap_when = {
            (eb.LOOP_OVERFLOW, "loop_push"): lsp_full,
            (eb.LOOP_UNDERFLOW, "loop_top"): lsp_zero,
            (eb.CALL_OVERFLOW, "call_push"): csp_full,
            (eb.CALL_UNDERFLOW, "call_pop"): csp_zero,
            (eb.UCALL_OVERFLOW, "call"): usp_full,
            (eb.UCALL_UNDERFLOW, "ret"): usp_zero,
            (eb.MICRO_TRAP, "trap"): Const(1),
            (eb.DEADLOCK, "wait"): wait_armed & wait_dead,
            (eb.ILLEGAL_FIELD, "emit_tensor"): ill_x[Engine.TENSOR],
            (eb.ILLEGAL_FIELD, "emit_vector"): ill_x[Engine.VECTOR],
        }
        assert hold_when.keys() == set(_HOLD_TERMS), "hold conditions differ from _HOLD_TERMS"
        assert trap_when.keys() == set(_TRAP_TERMS), "trap conditions differ from _TRAP_TERMS"
        stall_any = Signal()    # ``stall`` without ``x_live``
        m.d.comb += stall_any.eq(Cat(*[xd[n] & hold_when[n] for n in _HOLD_TERMS]).any())
        m.d.comb += stall.eq(x_live & stall_any)

        err_now = Signal(16)
        exec_err = Signal(16)
        # A PC beyond the program memory traps in DECODE, from the compare registered in FETCH,
        # so that no 32-bit compare of ``pc_now`` is in front of ``fault`` and the state.
        pc_oob = Signal()       # (high in DECODE only)
        m.d.sync += pc_oob.eq((state == _S_FETCH) & (pc_now >= self._pmem_depth))
        for bit in dict.fromkeys(b for b, _ in _TRAP_TERMS):
            m.d.comb += exec_err[bit].eq(Cat(*[xd[n] & trap_when[b, n] for b, n in _TRAP_TERMS
                                               if b == bit]).any())
        with m.Switch(state):
            with m.Case(_S_EXEC):
                with m.If(xv):
                    m.d.comb += err_now.eq(exec_err)
        m.d.comb += err_now[ErrorBit.PC_RANGE].eq(pc_oob)
        # The opcode map's valid bit (a block RAM output) is registered in MAP and trapped on
        # in EXEC's first cycle, when nothing has reached X yet (xv is 0): the RAM's slow
        # clock-to-out then only feeds a flip-flop.
        illegal = Signal()
        m.d.sync += illegal.eq((state == _S_MAP) & ~mems.map_data[isa.UADDR_BITS])
        with m.If(illegal):
            m.d.comb += err_now[ErrorBit.ILLEGAL_OPCODE].eq(1)
        seq_fault = Signal()    # the errors of the ``seq`` field
        m.d.comb += seq_fault.eq(exec_err[ErrorBit.UCALL_OVERFLOW] |
                                 exec_err[ErrorBit.UCALL_UNDERFLOW] |
                                 exec_err[ErrorBit.MICRO_TRAP])
        fault = Signal()        # ``err_now != 0``, from its three sources
        # ``exec_err != 0`` grouped by the registered tests the terms share (one LUT each).
        # The record check (``ILLEGAL_FIELD``, the core's verdict registered, ``ill_x``)
        # enters last, apart from the terms of registered flags (``exec_other``).
        exec_any, exec_other = Signal(), Signal()
        m.d.comb += [
            exec_other.eq(Cat(exec_err[eb.LOOP_OVERFLOW] | exec_err[eb.LOOP_UNDERFLOW],
                              exec_err[eb.CALL_OVERFLOW] | exec_err[eb.CALL_UNDERFLOW],
                              seq_fault, exec_err[eb.DEADLOCK]).any()),
            exec_any.eq(exec_other | exec_err[eb.ILLEGAL_FIELD]),
        ]
        m.d.comb += fault.eq(x_live & exec_any | err_now[ErrorBit.PC_RANGE] | illegal)
        # ``adv``: X's micro-instruction takes effect (x_live implies EXEC, where err_now is
        # exec_err: the opcode map's output and the PC check stay out of this cone). ``go``:
        # the same without the error check, for an EMIT's clear of the written-slot bits: a
        # trapping micro-instruction's clear is never seen, since the sequencer stops and
        # START clears them.
        adv, go, adv_pre = Signal(), Signal(attrs={"keep": 1}), Signal()
        m.d.comb += [go.eq(x_live & ~stall), adv_pre.eq(go & ~exec_other),
                     adv.eq(adv_pre & ~exec_err[eb.ILLEGAL_FIELD])]
        # (On ``go``, not ``adv``: they differ only when X's micro-instruction traps, and the
        # trap empties X, so the flags are not read before they clear. ``adv`` is one to two
        # levels after ``go``, which would put these four flip-flops at the end of the stall
        # cone's longest path.)
        m.d.sync += [zb_seen.eq(x_live & is_zbranch & ~go),
                     sr_seen.eq(x_live & xd["semrd"] & ~go),
                     sr_go.eq(x_live & xd["semrd"] & ~go & sr_seen),
                     zb_go.eq(x_live & is_zbranch & ~go & zb_seen)]

        # A ``_SEQ_GATED`` micro-instruction's ``seq`` field lets it go: a sum of products of
        # the flags decoded for it alone (``{n}_plain``, ``{n}_<term>``) and registered
        # conditions, so that synthesis does not share the stall and error cones.
        seq_lets_go = {"zbranch": zb_go, "ret": ~usp_zero, "call": ~usp_full,
                       "uloop": ~uctr_fix, "br_loop_more": ~lmore_w, "br_flags": ~flags_w}
        assert tuple(seq_lets_go) == _SEQ_TERMS

        def seq_gate(n):
            return Cat(xd[n + "_plain"],
                       *[xd[f"{n}_{c}"] & ok for c, ok in seq_lets_go.items()]).any()

        # ---- semaphores -------------------------------------------------------------------
        # ``sem_inc``/``sem_set`` are ``adv`` for a SEMINC/SEMSET micro-instruction, which can
        # only stall through its ``seq`` field (a BRANCH on Z/NZ or LOOP_MORE, a ULOOP) and
        # only trap through it (RET, CALL, TRAP): ``seq_gate``. The semaphore index is
        # ``sem_sel``, one-hot and registered with the instruction. The bank shows a SEMINC
        # two cycles after X (``SemaphoreBank``), and nothing reads a semaphore in the cycle
        # after a SEMINC: a WAIT compares in its second cycle in X, a SEMRD reads the
        # semaphore of its second cycle (it holds two), the host sees the count a cycle later.
        # A SEMSET's value is X's result, registered (``res_q``) in the cycle after X.
        sem_inc, sem_set = Signal(), Signal()
        for sig, n in ((sem_inc, "seminc"), (sem_set, "semset")):
            m.d.comb += sig.eq(x_live & seq_gate(n))
        m.d.comb += [sem_bank.inc.eq(sem_inc), sem_bank.set.eq(sem_set),
                     sem_bank.sel.eq(sem_sel),
                     sem_bank.set_value.eq(res_q[:isa.SEM_VALUE_BITS]),
                     sem_bank.clear.eq(start_clear)]
        for e in _ENGINES:
            done = getattr(self, _NAMES[e] + "_done")
            m.d.comb += getattr(sem_bank, "inc_" + _NAMES[e]).eq(
                Mux(done & outstanding[e], queues[e].sem_head, 0))

        # ---- register file write port -----------------------------------------------------
        clr = Signal(6)
        # ``adv & wr_en`` is ``x_live & wr_en & ~wr_kill``: ``wr_kill`` is the stall and error
        # terms (``_HOLD_TERMS``, ``_TRAP_TERMS``: what ``stall_any`` and ``exec_err`` are made
        # of) as one sum of products of registered conditions and the micro-word's flags
        # decoded for writing micro-instructions alone (``wk_*``), so that synthesis does not
        # share the stall and error cones' series of terms (go, adv_pre, adv) with the register
        # file's write enables.
        wr_kill = Signal()
        m.d.comb += wr_kill.eq(Cat(
            *[xd["wk_" + n] & hold_when[n] for n in _HOLD_TERMS],
            *[xd["wk_" + n] & trap_when[b, n] for b, n in _TRAP_TERMS]).any())
        m.d.comb += [
            wr_addr.eq(Mux(xd["dst_agreg"], ag_reg[k], rd)),
            wr_data.eq(alu.wr_data),
            # (per generator, under one-hot selects decoded a stage early)
            wr_en.eq(xd["wr_rd"] & rd_nz |
                     Cat(*[xd[f"dst_agreg_k{j}"] & ag_hit_ok[j]
                           for j in range(isa.NUM_AG)]).any()),
        ]
        m.d.sync += [w_rf_en.eq(x_live & wr_en & ~wr_kill), w_rf_addr.eq(wr_addr),
                     w_rf_data.eq(wr_data)]
        with m.If(state == _S_CLEAR):
            m.d.comb += [mems.rf_wr_addr.eq(clr), mems.rf_wr_data.eq(0), mems.rf_wr_en.eq(1)]
        with m.Else():
            m.d.comb += [mems.rf_wr_addr.eq(w_rf_addr), mems.rf_wr_data.eq(w_rf_data),
                         mems.rf_wr_en.eq(w_rf_en)]
        m.d.comb += self.slot_data.eq(res_q)

        # ---- next macro PC ----------------------------------------------------------------
        npc_next = Signal(32)
        # X's result enters last, behind a select decoded a stage early.
        m.d.comb += npc_next.eq(Mux(xd["loop_step"], loops.start,
                                    Mux(xd["call_pop"], cret, npc_now)))

        # ---- micro next address -----------------------------------------------------------
        # X redirects on a taken BRANCH / ULOOP and on RET; otherwise R's micro-word is X's
        # successor already, and F's is R's. F's own successor: a JUMP/CALL target, else
        # upc_f + 1 (chosen in front of the control store's address, below).
        redirect = Signal()
        x_target = Signal(isa.UADDR_BITS)
        m.d.comb += [
            x_target.eq(Mux(xd["ret"], ucalls.top, target)),
            redirect.eq(br_taken | xd["uloop"] & uctr_nz),
        ]
        upc_f_inc = Signal(isa.UADDR_BITS)
        m.d.comb += upc_f_inc.eq(upc_f + 1)
        # X leaves the pipeline's R stage in place (END: the instruction is done; an AG_SET or
        # AG_SNAP whose successor in R reads the generator state it writes, ``AG_SET_READS`` /
        # ``AG_SNAP_READS`` of sim/isa.py: R re-reads its operands next cycle).
        # (whether R's micro-word reads that state is registered as F's word enters R, so
        # R's operand-select compares are not in front of the pipeline's moves and the
        # control store's address)
        def f_reads(srcs):
            return Cat(*[(field(uword_f, "a") == src) | (field(uword_f, "b") == src)
                         for src in srcs]).any()

        r_reads_set, r_reads_snap = Signal(), Signal()       # loaded with ``uword_r``
        x_holds_r = xd["end"] | xd["ag_set"] & r_reads_set | xd["ag_snap"] & r_reads_snap
        # The pipeline moves on ``go``, not ``adv``: a micro-instruction that traps stops the
        # sequencer (DONE) and the next instruction's MAP empties the pipeline, so what F and
        # R hold after a trap is never used, and the error terms (stack checks, the core's
        # record checks) stay out of the control-store address.
        x_take, r_take = Signal(), Signal()      # R -> X, F -> R this cycle
        m.d.comb += [
            x_take.eq(in_exec & rv & (~xv | (go & ~redirect & ~x_holds_r))),
            r_take.eq(in_exec & ~(go & redirect) & (~rv | x_take)),
        ]
        # The next micro-address: X's redirect target, else F's successor when R takes F's word
        # (``r_take`` without its redirect term, ``r_take_nr``: the same when there is no
        # redirect), else MAP's entry, else F's address again. ``go`` chooses last, the
        # redirect (X's zero test and branch terms) one level before, and F's successor (from
        # the block RAM's output) enters the multiplexer before them.
        r_take_nr = Signal()
        m.d.comb += r_take_nr.eq(in_exec & (~rv | ~xv | go & ~x_holds_r))
        with m.If(r_take_nr):
            m.d.sync += [r_reads_set.eq(f_reads(AG_SET_READS)),
                         r_reads_snap.eq(f_reads(AG_SNAP_READS))]
        # MAP's entry (the opcode map's block RAM output, late in the cycle) enters last,
        # beside ``go`` (X is empty in MAP, so ``go`` is low there).
        in_map = Signal()
        m.d.comb += in_map.eq(state[2])    # state == _S_MAP
        # The address for each outcome of ``go`` (``addr_go``, ``addr_hold``), and ``go``
        # choosing between them last: ``go`` (the stall's sum of products) is one level in
        # front of the control store's address pins. Both candidates and ``go`` are kept for
        # synthesis, which otherwise folds ``go`` into ``r_take_nr`` and the redirect term.
        # Each candidate is one LUT4 behind the block RAM's output: F's
        # jump bit and target select against a candidate made without them (``nj_*``: F's
        # ``upc_f + 1`` when F's successor is used, ``use_f_*``, else ``upc_f``), so the RAM's
        # output passes one LUT level, not two, before ``go``'s multiplexer.
        # The redirect enters beside ``go``: the address is ``go ? (redirect ? x_target :
        # addr_go) : (in_map ? MAP's entry : addr_hold)``, one slice per bit (``pair_mux``: a
        # LUT4 per pair on its own select, the PFUMX on ``go``; ``go`` is low in MAP, as X is
        # empty there), and ``addr_go`` is F's successor as if there were no redirect, so the
        # redirect does not pass ``use_f_go`` and ``nj_go``.
        use_f_go = Signal(attrs={"keep": 1})
        use_f_hold = Signal(attrs={"keep": 1})
        nj_go = Signal(isa.UADDR_BITS, attrs={"keep": 1})
        nj_hold = Signal(isa.UADDR_BITS, attrs={"keep": 1})
        target_f = field(uword_f, "target")
        m.d.comb += [
            use_f_go.eq(in_exec & (~rv | ~xv | ~x_holds_r)),
            use_f_hold.eq(in_exec & (~rv | ~xv)),
            nj_go.eq(Mux(use_f_go, upc_f_inc, upc_f)),
            nj_hold.eq(Mux(use_f_hold, upc_f_inc, upc_f)),
        ]
        # ``Mux(jump & use, target, nj)``, one LUT4 per bit (``lut4``: synthesis put the
        # select ``jump & use`` in a LUT of its own, a second level behind the block RAM).
        def f_succ(jump, use, tgt, nj):
            return (jump & use & tgt) | (~(jump & use) & nj)
        addr_go = lut4(m, platform, f_succ, (jump_f, use_f_go, target_f, nj_go), "addr_go")
        addr_hold = lut4(m, platform, f_succ, (jump_f, use_f_hold, target_f, nj_hold),
                         "addr_hold")
        m.d.comb += [
            mems.ucode_addr.eq(pair_mux(m, platform, go,
                                        (in_map, addr_hold, mems.map_data[:isa.UADDR_BITS]),
                                        (redirect, addr_go, x_target), "next_uaddr")),
        ]
        m.d.sync += upc_f.eq(mems.ucode_addr)
        # R's registers load on ``r_take_nr`` too: a taken redirect empties R (``rv``), and
        # the next ``r_take`` loads them again, so the redirect (``res_zero`` -> branch
        # terms) is not in the clock enable of R's ~90 flip-flops. Only ``rv`` follows ``r_take``.
        with m.If(r_take):
            m.d.sync += rv.eq(1)
        with m.Elif(x_take | (go & redirect)):
            m.d.sync += rv.eq(0)
        with m.If(r_take_nr):
            m.d.sync += [a_idx_q.eq(a_idx_f), b_idx_q.eq(b_idx_f),
                         a_rd_eq_q.eq(a_rd_eq_f), b_rd_eq_q.eq(b_rd_eq_f)]
            m.d.sync += [a_agr_q.eq(field(uword_f, "a") == USrc.AGREG),
                         b_agr_q.eq(field(uword_f, "b") == USrc.AGREG)]
            m.d.sync += [a_reg_q.eq(Cat(*[field(uword_f, "a") == s_ for s_ in _REG_SRCS]).any()),
                         b_reg_q.eq(Cat(*[field(uword_f, "b") == s_ for s_ in _REG_SRCS]).any())]
            m.d.sync += [uword_r.eq(uword_f), upc_r.eq(upc_f)]
        # ``ag_idx_r`` follows R's micro-word by ``r_take_nr`` (a taken redirect empties R,
        # and the next ``r_take`` loads it again), so the redirect (the zero test of X's
        # result, ``res_zero`` -> ``br_taken``) is not in front of it.
        # While R holds a word that reads the generator an AG_SET in X writes (``x_holds_r``:
        # then ``r_take_nr`` is low), it takes the AG_SET's register instead; otherwise it
        # loads ``ag_idx_f`` (a word that does not read AGREG ignores it). The select is made
        # of flip-flops, not of ``r_take_nr``, so the stall cone (``go``) is not in front of
        # the data input.
        ag_hit_r = Signal()
        m.d.comb += ag_hit_r.eq((ag_set_x & kr_oh).any())
        with m.If(r_take_nr | ag_hit_r):
            m.d.sync += ag_idx_r.eq(Mux(ag_hit_r & rv & r_reads_set, rd, ag_idx_f))
        # X's registers (~140 flip-flops) load whenever X is empty or its micro-instruction
        # goes, whether or not R has one for it (``xv`` says): their clock enable is
        # ``~xv | go``, without R's state, the redirect and the hold terms of ``x_take``.
        # Nothing reads them while ``xv`` is low (everything in X is gated by ``x_live``).
        m.d.comb += decoder.load.eq(~xv | go)
        with m.If(~xv | go):
            m.d.sync += [uword_x.eq(uword_r), upc_x.eq(upc_r), a_q.eq(a_rd), b_q.eq(b_rd),
                         a_fw.eq(a_hit), b_fw.eq(b_hit), x_prev.eq(x_fwd)]
            neg_r = r_dec["alu_neg"].replicate(32)
            m.d.sync += [b_qn.eq(b_rd ^ neg_r), x_prev_n.eq(alu.fwd_n)]
        with m.If(x_take):
            m.d.sync += xv.eq(1)
        with m.Elif(go):
            m.d.sync += xv.eq(0)

        # ---- effects of an advancing micro-instruction --------------------------------------
        # A slot write is enabled by X's decoded micro-word alone (``x_live``: no stall term,
        # rewriting while stalled is idempotent) and its word lands in W; an EMIT that goes
        # clears the written-slot bits (``RecordBuilder``).
        for e in _ENGINES:
            m.d.comb += [builders[e].x_live.eq(x_live), builders[e].go.eq(go)]
        # An EMIT pushes on ``adv``, written out for an EMIT: it can only stall for queue
        # space or through its ``seq`` field, and only trap through it or its record.
        # So the queues' write enables do not wait for the whole stall and error cones.
        for e in _ENGINES:
            push = Signal(name=f"push_{_NAMES[e]}")
            # (``seq_gate``, like ``sem_inc``: the sequencing fault is not in front of the
            # queue's level)
            m.d.comb += push.eq(xv & can_emit[e] & ~chk_pend[e] & ~ill_x[e] &
                                seq_gate("emit_" + _NAMES[e]))
            m.d.comb += queues[e].push.eq(push)
        # State that no debug read shows and START resets (or whose pointer START resets)
        # changes on ``go``; a trapping micro-instruction's change of it is never seen, since
        # the sequencer stops. The architectural state (PC, flags, loop and call depths,
        # registers, semaphores) changes on ``adv``. So the error terms stay out of the first
        # group's cones, and the state machine leaves EXEC on ``go`` (an error overrides it).
        m.d.sync += [t0_w.eq(go & xd["dst_t0"]), t1_w.eq(go & xd["dst_t1"])]
        with m.If(t0_w):
            m.d.sync += t0.eq(res_q)
        with m.If(t1_w):
            m.d.sync += t1.eq(res_q)
        # ``res_q`` loads every cycle (no clock enable): its readers read it only in the
        # cycle after X's micro-instruction went, or while it holds (a BRANCH on Z/NZ).
        m.d.sync += res_q.eq(res)
        with m.If(go):
            m.d.sync += npc.eq(npc_next)
            with m.If(xd["npc_res"]):
                m.d.sync += npc_fix.eq(1)
            with m.If(xd["dst_uctr"]):
                m.d.sync += uctr_fix.eq(1)
            with m.If(xd["uloop"] & uctr_nz):
                m.d.sync += uctr_fix.eq(0)
            with m.If(xd["end"]):
                m.d.sync += state.eq(Mux(xd["halt"], _S_DONE, _S_FETCH))
        m.d.comb += [ucalls.push.eq(go & xd["call"]), ucalls.pop.eq(go & xd["ret"]),
                     ucalls.reset.eq(go & xd["end"]), ucalls.value.eq(upc_x + 1),
                     ucalls.clear.eq(start_clear)]
        m.d.sync += [fl_eq.eq(alu.eq), fl_lt.eq(alu.lt), fl_ltu.eq(alu.ltu),
                     flags_w.eq(adv & xd["dst_flags"])]
        with m.If(flags_w):
            m.d.sync += [flag_eq.eq(fl_eq), flag_lt.eq(fl_lt), flag_ltu.eq(fl_ltu)]
        # An AG_SET or AG_SNAP goes by its ``seq`` field alone (``seq_gate``, like a SEMINC),
        # so the stall terms and ``go`` are not in front of the generators' registers.
        ag_set_go, ag_snap_go = Signal(), Signal()
        m.d.comb += [ag_set_go.eq(x_live & seq_gate("ag_set")),
                     ag_snap_go.eq(x_live & seq_gate("ag_snap"))]
        m.d.comb += [ags.set_go.eq(ag_set_go), ags.snap_go.eq(ag_snap_go),
                     ags.snap_k.eq(Cat(*[xd[f"ag_snap_k{j}"] for j in range(isa.NUM_AG)])),
                     ags.level.eq(imm[8:11]), ags.res_q.eq(res_q), ags.rd_nz.eq(rd_nz),
                     ags.clear.eq(start_clear), ags.load.eq(state == _S_MAP)]
        with m.If(adv):
            with m.If(xd["end"]):
                m.d.sync += pc_pend.eq(1)
        # The call stack's entries and ``cret`` (no debug read shows it; START empties the
        # stack) change on ``go``, so the record check is not in their clock enables.
        m.d.comb += [
            calls.write.eq(go & xd["call_push"]), calls.read.eq(go & xd["call_pop"]),
            calls.push.eq(adv_pre & xd["call_push"]), calls.pop.eq(adv_pre & xd["call_pop"]),
            calls.value.eq(pc + 1),
            calls.clear.eq(start_clear),
        ]
        # The loop and call stacks' pointers change on ``adv_pre``: their micro-instructions'
        # ``special`` is not EMIT, so the record check (``ILLEGAL_FIELD``, EMIT's alone) never
        # traps them and ``adv`` is ``adv_pre`` for them; written so, the check is not in
        # these registers' cones (``lsp``, ``csp``, ``ltop``).
        # The loop stack's pointers change on ``adv_pre`` (``LoopStack``), its entries while X
        # holds the micro-instruction, its top count in W.
        m.d.comb += [loops.x_live.eq(x_live), loops.go.eq(go), loops.adv_pre.eq(adv_pre),
                     loops.push.eq(xd["loop_push"]), loops.step.eq(xd["loop_step"]),
                     loops.pop.eq(xd["loop_pop"]), loops.top.eq(xd["loop_top"]),
                     loops.pc.eq(pc), loops.res_q.eq(res_q), loops.clear.eq(start_clear)]
        # A ULOOP's decrement lands in W as well (``uloop_w``; ``uctr_fix`` is cleared on
        # ``go``): a taken ULOOP redirects, so the next micro-instruction reaches X two
        # cycles later, after the write; an untaken one does not decrement.
        uloop_w = Signal()
        m.d.sync += uloop_w.eq(go & xd["uloop"] & uctr_nz)
        with m.If(uloop_w):
            m.d.sync += [uctr.eq(uctr - 1), uctr_nz.eq(uctr != 1)]

        # ---- performance counters ---------------------------------------------------------
        m.submodules.perf = perf = PerfCounters()
        m.d.comb += [
            perf.clear.eq(start_clear),
            perf.running.eq((state == _S_FETCH) | (state == _S_DECODE) | (state == _S_MAP) |
                            in_exec),
            perf.retire.eq(adv & xd["end"]),
            perf.outstanding.eq(outstanding),
            perf.blocked.eq(Cat(*[x_live & xd["emit_" + _NAMES[e]] & ~can_emit[e]
                                  for e in _ENGINES])),
            perf.semwait.eq(wait_stall),
        ]

        # ---- top-level state machine --------------------------------------------------------
        err_any = Signal()      # ``err_status != 0``, registered beside it
        # ``err_pc`` takes the faulting PC a cycle after the fault, from ``pc`` (``pc_now`` of
        # the faulting cycle: ``pc`` takes a pending ``npc`` at that edge and nothing else
        # moves it until START), so the fault, the end of the stall and error cones, is not
        # in 32 flip-flops' clock enables. ``err_pc_now`` is
        # the value as the architecture has it, in that cycle too. START (below) overrides.
        fault_q = Signal()
        err_pc_now = Signal(32)
        m.d.sync += fault_q.eq(fault)
        m.d.comb += err_pc_now.eq(Mux(fault_q, pc, err_pc))
        with m.If(fault_q):
            m.d.sync += err_pc.eq(pc)
        with m.Switch(state):
            with m.Case(_S_IDLE, _S_DONE):
                with m.If(self.start):
                    m.d.sync += [state.eq(_S_CLEAR), clr.eq(0), pc.eq(self.start_pc),
                                 err_status.eq(0), err_any.eq(0), err_pc.eq(0),
                                 flag_eq.eq(0), flag_lt.eq(0), flag_ltu.eq(0),
                                 t0.eq(0), t1.eq(0), uctr.eq(0),
                                 uctr_nz.eq(0), uctr_fix.eq(0)]
            with m.Case(_S_CLEAR):
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr == isa.NUM_REGS - 1):
                    m.d.sync += state.eq(_S_FETCH)
            with m.Case(_S_FETCH):
                m.d.sync += state.eq(_S_DECODE)
            with m.Case(_S_DECODE):
                m.d.sync += [ir.eq(mems.pmem_data), state.eq(_S_MAP)]
            with m.Case(_S_MAP):
                m.d.sync += [rv.eq(0), xv.eq(0), npc.eq(pc + 1), state.eq(_S_EXEC)]
                # The instruction's derived register indices and compares, from ``ir`` (not
                # from the program memory's output in DECODE, so the block RAM's late word
                # feeds only ``ir``). Nothing reads them before EXEC.
                m.d.sync += src_eq_rd.eq(Cat(rs1 == rd, rs2 == rd, rs3 == rd,
                                             (rs2 + 1)[:6] == rd))
                m.d.sync += [rd_p[i].eq(rd + i + 1) for i in range(3)]
                m.d.sync += [rd_p[3].eq(rs2 + 1), rd_nz.eq(rd != 0)]
                m.d.sync += sem_sel.eq(Const(1, isa.NUM_SEMS) << imm[:4])
        # An error stops the sequencer (last, so that it overrides the state machine: ``fault``
        # enters the state's multiplexer last). It cannot happen in IDLE, DONE, CLEAR, FETCH
        # or MAP (X is empty there, the PC check traps in DECODE and the opcode check follows
        # MAP).
        with m.If(fault):
            m.d.sync += [err_status.eq(err_status | err_now), state.eq(_S_DONE),
                         xv.eq(0), err_any.eq(1)]

        # ---- outputs ----------------------------------------------------------------------
        m.d.comb += [
            self.busy.eq((state != _S_IDLE) & (state != _S_DONE)),
            self.done.eq(state == _S_DONE),
            self.error.eq(err_any),
            self.err_status.eq(err_status),
            self.err_pc.eq(err_pc_now),
            mems.rf_d_addr.eq(self.dbg_addr[:6]),
        ]
        dbg = {DBG["flags"]: Cat(flag_eq, flag_lt, flag_ltu), DBG["err_status"]: err_status,
               DBG["err_pc"]: err_pc_now, DBG["pc"]: pc_now, DBG["retired"]: perf.retired,
               DBG["cycles"]: perf.cycles, DBG["loop_depth"]: lsp, DBG["call_depth"]: csp,
               DBG["status"]: Cat(self.busy, self.done, self.error)}
        for i in range(isa.NUM_SEMS):
            dbg[DBG["sem"] + i] = sem_now[i]
        for e in _ENGINES:
            counters = perf.counters(e)
            for j in range(3):
                dbg[DBG["busy"] + 3 * e + j] = counters[j]
            dbg[DBG["blocked"] + e] = counters[3]
        with m.If(self.dbg_addr < isa.NUM_REGS):
            m.d.comb += self.dbg_data.eq(Mux(w_rf_en & (w_rf_addr == self.dbg_addr[:6]),
                                             w_rf_data, mems.rf_d_data))
        with m.Else():
            with m.Switch(self.dbg_addr):
                for addr, value in dbg.items():
                    with m.Case(addr):
                        m.d.comb += self.dbg_data.eq(value)
        return m
