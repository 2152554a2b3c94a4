"""The microcoded sequencer: fetches macro-instructions, runs each as a microroutine from a
writable control store, and dispatches engine records into per-engine queues.

Encodings, record layouts and the micro-word format come from ``sim/isa.py``; the shipped
control store and opcode map from ``sim/microcode.py``; the semantics are ``docs/isa.md`` and
its executable form ``sim/refsim.py``.

``Sequencer`` connects its units (``rtl/control/*.py``, each with its contract): the
instruction state machine with the PC and the errors (``InstructionControl``), the memories,
the F/R/X micro-pipeline (``MicroPipeline``, ``MicroDecoder``, ``OperandStage``, ``MicroAlu``,
``AdvanceControl``, ``MicroRegisters``), the stacks and generators (``MicroCallStack``,
``CallStack``, ``LoopStack``, ``AddressGenerators``), the semaphores, the engines' records and
queues (``EngineDispatch``: ``RecordBuilder`` and ``EngineQueue`` per engine), the performance
counters and the debug port (``DebugPort``); it holds X's registered result and the register
file's write port (W).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim import isa
from sim.config import check_int, check_pow2

from .addr_gens import AddressGenerators
from .advance import AdvanceControl
from .alu import MicroAlu
from .call_stack import CallStack
from .debug_port import DBG, DebugPort
from .dispatch import EngineDispatch, engine_ports
from .instruction import InstructionControl
from .loop_stack import LoopStack
from .memories import SequencerMemories
from .micro_decode import ENGINES, NAMES, MicroDecoder, field
from .micro_pipeline import MicroPipeline
from .micro_regs import MicroRegisters
from .micro_stack import MicroCallStack
from .operands import OperandStage
from .perf_counters import PerfCounters
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

_ENGINES, _NAMES = ENGINES, NAMES


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
        self._pmem_depth = check_pow2("pmem_depth", pmem_depth, 16, 65536)
        self._queue_depth = check_int("queue_depth", queue_depth, 1, 16)
        self._max_outstanding = check_int("max_outstanding", max_outstanding, 1, 64)
        self._check_terms = check_int("check_terms", check_terms, 1, 32)
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
        sig.update(engine_ports(check_terms), slot_data=Out(32))
        super().__init__(sig)

    pmem_depth = property(lambda self: self._pmem_depth)
    queue_depth = property(lambda self: self._queue_depth)
    max_outstanding = property(lambda self: self._max_outstanding)
    check_terms = property(lambda self: self._check_terms)

    def elaborate(self, platform):
        m = Module()
        pc_bits = ceil_log2(self._pmem_depth)
        # ---- units --------------------------------------------------------------------------
        # The instruction state machine (``InstructionControl``) steps each macro-instruction
        # through fetch, decode and map into EXEC, where F, R, X (``MicroPipeline``) run its
        # microroutine: F fetches from the control store and picks its own successor, R reads
        # the operands (``OperandStage``), X computes (``MicroAlu``) from its micro-word
        # decoded a stage early (``MicroDecoder``), holds or traps (``AdvanceControl``) and
        # redirects F on a taken BRANCH, ULOOP or RET. X's writes land one cycle later (W) from
        # ``res_q`` (X's result, registered every cycle), so the ALU and the stall cone reach a
        # few registers, not every destination's multiplexer and clock enable.
        m.submodules.instr = instr = InstructionControl(pmem_depth=self._pmem_depth)
        m.submodules.mems = mems = SequencerMemories(pmem_depth=self._pmem_depth)
        m.submodules.upipe = upipe = MicroPipeline()
        m.submodules.decoder = decoder = MicroDecoder()
        m.submodules.operands = ops = OperandStage()
        m.submodules.alu = alu = MicroAlu()
        m.submodules.advance = advance = AdvanceControl()
        m.submodules.uregs = uregs = MicroRegisters()
        m.submodules.ucalls = ucalls = MicroCallStack()
        m.submodules.calls = calls = CallStack()
        m.submodules.loops = loops = LoopStack()
        m.submodules.ags = ags = AddressGenerators()
        m.submodules.sems = sem_bank = SemaphoreBank()
        m.submodules.perf = perf = PerfCounters()
        # Each engine's record under construction and its record and completion FIFOs.
        m.submodules.dispatch = disp = EngineDispatch(
            queue_depth=self._queue_depth, max_outstanding=self._max_outstanding,
            check_terms=self._check_terms)
        xd, x_live = decoder.x, upipe.x_valid     # X is live on ``xv`` alone (it implies EXEC)
        go, adv_pre, adv = advance.go, advance.adv_pre, advance.adv
        uword_f, uword_r, uword_x = mems.ucode_data[:64], upipe.uword_r, upipe.uword_x
        start_clear, pc, res_q = instr.start_clear, instr.pc, Signal(32, name="res_q")
        rd, rd_nz, imm = instr.rd, instr.rd_nz, instr.imm
        w_rf_en, w_rf_addr, w_rf_data = Signal(), Signal(6), Signal(32)   # W's register write
        m.d.comb += [
            instr.start.eq(self.start), instr.start_pc.eq(self.start_pc),
            instr.pmem_data.eq(mems.pmem_data), instr.map_valid.eq(mems.map_data[isa.UADDR_BITS]),
            instr.go.eq(go), instr.adv.eq(adv), instr.x_live.eq(x_live),
            *[getattr(instr, n).eq(xd[n]) for n in ("end", "halt", "npc_res", "loop_step",
                                                    "call_pop")],
            instr.loop_start.eq(loops.start), instr.call_ret.eq(calls.ret), instr.res_q.eq(res_q),
            instr.exec_err.eq(advance.exec_err), instr.exec_any.eq(advance.exec_any),
            mems.busy.eq(self.busy), mems.pmem_addr.eq(instr.pc_now[:pc_bits]),
            mems.ucode_addr.eq(upipe.ucode_addr), mems.rf_a_addr.eq(ops.rf_a_addr),
            mems.rf_b_addr.eq(ops.rf_b_addr),
            upipe.ucode_data.eq(mems.ucode_data),
            upipe.map_entry.eq(mems.map_data[:isa.UADDR_BITS]),
            upipe.in_exec.eq(instr.in_exec), upipe.in_map.eq(instr.in_map), upipe.go.eq(go),
            upipe.redirect.eq(uregs.redirect), upipe.x_ret.eq(xd.ret),
            upipe.ret_target.eq(ucalls.top), upipe.x_end.eq(xd.end),
            upipe.x_ag_set.eq(xd.ag_set), upipe.x_ag_snap.eq(xd.ag_snap),
            upipe.flush.eq(instr.mapping), upipe.kill.eq(instr.fault),
            decoder.word.eq(uword_r), decoder.load.eq(upipe.x_load),
            ops.load.eq(instr.mapping), ops.rd.eq(rd), ops.rs1.eq(instr.rs1),
            ops.rs2.eq(instr.rs2), ops.rs3.eq(instr.rs3), ops.rd_nz.eq(rd_nz), ops.imm.eq(imm),
            ops.f_a.eq(field(uword_f, "a")), ops.f_b.eq(field(uword_f, "b")),
            ops.f_k.eq(field(uword_f, "const")[:2]), ops.r_a.eq(field(uword_r, "a")),
            ops.r_b.eq(field(uword_r, "b")), ops.r_const.eq(field(uword_r, "const")),
            ops.r_load.eq(upipe.r_load), ops.r_valid.eq(upipe.r_valid),
            ops.r_reads_set.eq(upipe.r_reads_set), ops.x_load.eq(upipe.x_load),
            ops.x_valid.eq(x_live), ops.x_wr_rd.eq(xd.wr_rd), ops.x_dst_t0.eq(xd.dst_t0),
            ops.x_dst_t1.eq(xd.dst_t1),
            ops.x_dst_agreg_k.eq(Cat(*[xd[f"dst_agreg_k{j}"] for j in range(isa.NUM_AG)])),
            ops.x_fwd.eq(alu.fwd), ops.x_fwd_n.eq(alu.fwd_n), ops.neg_r.eq(decoder.r.alu_neg),
            ops.t0.eq(uregs.t0), ops.t1.eq(uregs.t1), ops.ag_reg.eq(ags.reg),
            ops.ag_eff.eq(ags.eff), ops.ag_stride.eq(ags.stride), ops.ag_base.eq(ags.base),
            ops.ag_rd_eq.eq(ags.rd_eq), ops.ag_hit_ok.eq(ags.hit_ok),
            ops.ag_set_oh.eq(ags.set_oh), ops.ag_pair_eq.eq(ags.pair_eq),
            ops.w_rf_en.eq(w_rf_en), ops.w_rf_addr.eq(w_rf_addr), ops.w_rf_data.eq(w_rf_data),
            ops.rf_a_data.eq(mems.rf_a_data), ops.rf_b_data.eq(mems.rf_b_data),
            alu.a.eq(ops.a), alu.b.eq(ops.b), alu.b_n.eq(ops.b_n),
            alu.alu_tt.eq(Cat(*[xd[f"alu_tt{j}"] for j in range(4)])),
            alu.wr_sem.eq(xd.wr_sem), alu.fwd_sem.eq(xd.fwd_sem),
            alu.neg_next.eq(decoder.r.alu_neg),
            *[getattr(alu, n).eq(xd[n]) for n in ("alu_arith", "alu_neg", "alu_slt", "alu_sltu",
                                                  "alu_shl", "alu_rsh", "alu_sra")],
            uregs.flags.eq(xd), uregs.clear.eq(start_clear), uregs.go.eq(go), uregs.adv.eq(adv),
            uregs.res_q.eq(res_q), uregs.alu_eq.eq(alu.eq), uregs.alu_lt.eq(alu.lt),
            uregs.alu_ltu.eq(alu.ltu), uregs.loop_more.eq(loops.more),
            # (the micro-call stack changes on ``go``; the call stack's entry above the top
            # while a CALL_PUSH is in X, its top copy and pointers on ``adv_pre`` of its
            # CALL_PUSH / CALL_POP, gated apart from the stall cone by ``AdvanceControl``)
            ucalls.push.eq(go & xd.call), ucalls.pop.eq(go & xd.ret),
            ucalls.reset.eq(go & xd.end), ucalls.value.eq(upipe.upc_x + 1),
            ucalls.clear.eq(start_clear),
            calls.write.eq(x_live & xd.call_push & ~calls.full),
            calls.push.eq(advance.call_push), calls.pop.eq(advance.call_pop),
            calls.value.eq(pc + 1), calls.clear.eq(start_clear),
            loops.x_live.eq(x_live), loops.go.eq(go), loops.adv_pre.eq(adv_pre),
            loops.push.eq(xd.loop_push), loops.step.eq(xd.loop_step), loops.pop.eq(xd.loop_pop),
            loops.top.eq(xd.loop_top), loops.pc.eq(pc), loops.res_q.eq(res_q),
            loops.clear.eq(start_clear),
            ags.clear.eq(start_clear), ags.load.eq(instr.mapping), ags.rd.eq(rd),
            ags.rd_nz.eq(rd_nz), ags.set_x.eq(x_live & xd.ag_set), ags.set_go.eq(advance.ag_set),
            ags.snap_go.eq(advance.ag_snap), ags.index.eq(imm[:2]), ags.level.eq(imm[8:11]),
            ags.snap_k.eq(Cat(*[xd[f"ag_snap_k{j}"] for j in range(isa.NUM_AG)])),
            ags.res_q.eq(res_q), ags.level_oh.eq(loops.level_oh[1:]),
            # (the SEMINC and SEMSET go by their ``seq`` field; SEMSET's value in W)
            sem_bank.inc.eq(advance.seminc), sem_bank.set.eq(advance.semset),
            sem_bank.sel.eq(instr.sem_sel), sem_bank.set_value.eq(res_q[:isa.SEM_VALUE_BITS]),
            sem_bank.clear.eq(start_clear),
            disp.clear.eq(start_clear), disp.x_live.eq(x_live), disp.go.eq(go),
            disp.flags.eq(xd), disp.slot.eq(field(uword_x, "slot")), disp.res_q.eq(res_q),
            disp.push.eq(advance.push),
            *[getattr(sem_bank, "inc_" + _NAMES[e]).eq(getattr(disp, "inc_" + _NAMES[e]))
              for e in _ENGINES],
        ]
        m.d.comb += [getattr(mems, f"{mem}_wr_{p}").eq(getattr(self, f"{mem}_wr_{p}"))
                     for mem in ("pmem", "ucode", "map") for p in ("addr", "data", "en")]
        m.d.sync += res_q.eq(alu.res)
        for n, member in engine_ports(self._check_terms).items():
            if member.is_signature:
                wiring.connect(m, getattr(disp, n), wiring.flipped(getattr(self, n)))
            elif member.flow == In:
                m.d.comb += getattr(disp, n).eq(getattr(self, n))
            else:
                m.d.comb += getattr(self, n).eq(getattr(disp, n))
        m.d.comb += self.slot_data.eq(res_q)

        # ---- stall, errors, advance ----------------------------------------------------------
        # SEMRD's value: the semaphore of the previous cycle, registered (a SEMRD holds its
        # first two cycles in X), so neither the index nor the 16-way multiplexer is in front
        # of the ALU's result multiplexer.
        sem_cur = Signal(isa.SEM_VALUE_BITS)
        m.d.sync += sem_cur.eq(Array(sem_bank.now[i] for i in range(isa.NUM_SEMS))[imm[:4]])
        m.d.comb += [
            alu.sem_cur.eq(sem_cur),
            advance.flags.eq(xd), advance.x_live.eq(x_live),
            advance.res16.eq(alu.res[:isa.SEM_VALUE_BITS]), advance.sems.eq(sem_bank.value),
            advance.sem_sel.eq(instr.sem_sel), advance.outstanding.eq(disp.outstanding),
            advance.can_emit.eq(disp.can_emit), advance.chk_pend.eq(disp.chk_pend),
            advance.ill.eq(disp.ill),
            advance.uctr_fix.eq(uregs.uctr_fix), advance.flags_w.eq(uregs.flags_w),
            advance.more_pending.eq(loops.more_pending),
            advance.step_pending.eq(loops.step_pending),
            advance.loop_full.eq(loops.full), advance.loop_empty.eq(loops.empty),
            advance.call_full.eq(calls.full), advance.call_empty.eq(calls.empty),
            advance.ucall_full.eq(ucalls.full), advance.ucall_empty.eq(ucalls.empty),
        ]

        # ---- register file write port (W) ----------------------------------------------------
        # ``adv & wr_en`` is ``x_live & wr_en & ~wr_kill``, the kill a sum of products of its
        # own (``AdvanceControl``), apart from the stall and error cones. CLEAR writes zeros.
        wr_addr, wr_en = Signal(6), Signal()
        m.d.comb += [
            wr_addr.eq(Mux(xd.dst_agreg, ags.reg[field(uword_x, "const")[:2]], rd)),
            wr_en.eq(xd.wr_rd & rd_nz | Cat(*[xd[f"dst_agreg_k{j}"] & ags.hit_ok[j]
                                             for j in range(isa.NUM_AG)]).any()),
        ]
        m.d.sync += [w_rf_en.eq(x_live & wr_en & ~advance.wr_kill), w_rf_addr.eq(wr_addr),
                     w_rf_data.eq(alu.wr_data)]
        with m.If(instr.clearing):
            m.d.comb += [mems.rf_wr_addr.eq(instr.clear_addr), mems.rf_wr_data.eq(0),
                         mems.rf_wr_en.eq(1)]
        with m.Else():
            m.d.comb += [mems.rf_wr_addr.eq(w_rf_addr), mems.rf_wr_data.eq(w_rf_data),
                         mems.rf_wr_en.eq(w_rf_en)]

        # ---- outputs, performance counters, debug port -------------------------------------
        m.d.comb += [
            self.busy.eq(instr.busy), self.done.eq(instr.done), self.error.eq(instr.error),
            self.err_status.eq(instr.err_status), self.err_pc.eq(instr.err_pc),
            perf.clear.eq(start_clear), perf.running.eq(instr.running),
            perf.retire.eq(adv & xd.end), perf.outstanding.eq(disp.outstanding),
            perf.blocked.eq(Cat(*[x_live & xd["emit_" + _NAMES[e]] & ~disp.can_emit[e]
                                  for e in _ENGINES])),
            perf.semwait.eq(advance.wait_stall),
        ]
        # The debug read port (``DebugPort``, :data:`DBG`).
        m.submodules.debug = dbg = DebugPort()
        m.d.comb += [
            dbg.addr.eq(self.dbg_addr), self.dbg_data.eq(dbg.data),
            mems.rf_d_addr.eq(dbg.rf_addr), dbg.rf_data.eq(mems.rf_d_data),
            dbg.w_rf_en.eq(w_rf_en), dbg.w_rf_addr.eq(w_rf_addr), dbg.w_rf_data.eq(w_rf_data),
            dbg.sems.eq(sem_bank.now), dbg.flags.eq(uregs.macro_flags),
            dbg.err_status.eq(instr.err_status), dbg.err_pc.eq(instr.err_pc),
            dbg.pc.eq(instr.pc_now), dbg.retired.eq(perf.retired), dbg.cycles.eq(perf.cycles),
            dbg.loop_depth.eq(loops.depth), dbg.call_depth.eq(calls.depth),
            dbg.status.eq(Cat(self.busy, self.done, self.error)),
            dbg.counters.eq(Cat(*[c for e in _ENGINES for c in perf.counters(e)])),
        ]
        return m
