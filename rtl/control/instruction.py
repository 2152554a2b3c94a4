"""The sequencer's instruction state machine: START, register clear, fetch, decode, map and
execute of each macro-instruction, the PC and the errors."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.config import check_pow2
from sim.isa import ErrorBit

__all__ = ["InstructionControl", "STATES"]

#: The state encoding. MAP, EXEC and DONE each own a bit of the state register (``in_map`` and
#: ``in_exec`` are a flip-flop each, so that no compare of the state is in front of the
#: control store's address).
STATES = {"IDLE": 0, "CLEAR": 1, "FETCH": 2, "DECODE": 3, "MAP": 4, "EXEC": 8, "DONE": 16}
_S = STATES

_FI = isa.field_offsets(isa.INSTR_FIELDS)
_OPERANDS = ("rd", "rs1", "rs2", "rs3", "imm")


class InstructionControl(wiring.Component):
    """Which step of a macro-instruction the sequencer is in, its PC, its fields and its errors.

    States: IDLE (after reset) or DONE (after HALT or an error) until ``start``; CLEAR for
    ``NUM_REGS`` cycles (``clear_addr`` walks the register file); then per instruction FETCH
    (the program memory's address is ``pc_now``), DECODE (the word is loaded into the
    instruction register), MAP (the opcode map's entry is read; ``rd_nz``, ``sem_sel`` and
    ``npc = pc + 1`` are registered) and EXEC until X's END goes (``go & end``): FETCH, or DONE
    on HALT. ``fault`` (an error) moves to DONE from any state.

    The next PC (``npc``): on ``go``, a LOOP_STEP's ``loop_start``, a CALL_POP's ``call_ret``,
    else the present one; X's result (``npc_res``: a JMP's or CALL's target) enters from
    ``res_q`` in the cycle after (W), so the ALU is not in front of ``npc``'s multiplexer.
    An END that takes effect (``adv & end``) makes ``pc`` copy ``npc`` in the next cycle;
    ``pc_now`` shows that value in that cycle already (what every reader of the PC sees).

    Errors: X's bits (``exec_err`` while ``x_live`` in EXEC, ``exec_any``), a PC beyond the
    program memory (compared in FETCH, registered, raised in DECODE) and an illegal opcode (the
    map entry's valid bit registered in MAP, raised in EXEC's first cycle, when X is empty).
    ``err_status`` collects them until the next ``start``; ``err_pc`` is the faulting
    instruction's PC, registered from ``pc`` in the cycle after the fault (shown in that cycle
    too), so the fault is not in 32 flip-flops' clock enables.

    Parameters
    ----------
    pmem_depth : int
        Program memory words, a power of two, 16..65536.

    Members
    -------
    start : In(1); start_pc : In(32)
        In IDLE or DONE: clear errors and registers, then run from ``start_pc``.
    start_clear : Out(1)
        ``start`` taken this cycle: the other units clear their architectural state.
    busy, done, error : Out(1)
        Not IDLE or DONE; DONE; an error was raised since ``start``.
    err_status : Out(16); err_pc : Out(32)
        ``ErrorBit`` bits; the PC of the faulting instruction.
    clearing : Out(1); clear_addr : Out(6)
        CLEAR: write 0 to the register at ``clear_addr``.
    in_map, in_exec : Out(1)
        The state's MAP and EXEC bits (flip-flops).
    mapping : Out(1)
        ``state == MAP``, for the units that load an instruction's fields in MAP.
    running : Out(1)
        FETCH, DECODE, MAP or EXEC.
    pc, pc_now : Out(32)
        The PC register; the PC as the architecture has it.
    pmem_data : In(INSTR_BITS)
        The program memory's word at ``pc_now`` of the cycle before.
    map_valid : In(1)
        The opcode map entry's valid bit (read in MAP).
    rd, rs1, rs2, rs3, imm : Out(widths of ``sim.isa.INSTR_FIELDS``)
        The instruction register's fields (loaded in DECODE).
    rd_nz : Out(1); sem_sel : Out(NUM_SEMS)
        ``rd != 0`` and ``imm[3:0]`` one-hot, registered in MAP.
    go, adv, x_live : In(1)
        X's micro-instruction leaves X; takes effect; X holds one.
    end, halt, npc_res, loop_step, call_pop : In(1)
        X's decoded flags.
    loop_start, call_ret, res_q : In(32)
        The loop stack's start PC, the call stack's return PC, X's result registered.
    exec_err : In(16); exec_any : In(1)
        X's error bits, ``exec_err != 0`` (:class:`rtl.control.advance.AdvanceControl`).
    fault : Out(1)
        An error this cycle: the sequencer stops (DONE) and the pipeline is killed.
    """

    def __init__(self, *, pmem_depth=1024):
        check_pow2("pmem_depth", pmem_depth, 16, 65536)
        self._pmem_depth = pmem_depth
        sig = {"start": In(1), "start_pc": In(32), "start_clear": Out(1),
               "busy": Out(1), "done": Out(1), "error": Out(1),
               "err_status": Out(16), "err_pc": Out(32),
               "clearing": Out(1), "clear_addr": Out(isa.REG_BITS),
               "in_map": Out(1), "in_exec": Out(1), "mapping": Out(1), "running": Out(1),
               "pc": Out(32), "pc_now": Out(32),
               "pmem_data": In(isa.INSTR_BITS), "map_valid": In(1),
               "rd_nz": Out(1), "sem_sel": Out(isa.NUM_SEMS, init=1),
               "go": In(1), "adv": In(1), "x_live": In(1),
               "end": In(1), "halt": In(1), "npc_res": In(1), "loop_step": In(1),
               "call_pop": In(1),
               "loop_start": In(32), "call_ret": In(32), "res_q": In(32),
               "exec_err": In(16), "exec_any": In(1), "fault": Out(1)}
        for n in _OPERANDS:
            sig[n] = Out(_FI[n][1])
        super().__init__(sig)

    pmem_depth = property(lambda self: self._pmem_depth)

    def elaborate(self, platform):
        m = Module()
        state = Signal(5)
        m.d.comb += [self.in_exec.eq(state[3]), self.in_map.eq(state[2]),
                     self.mapping.eq(state == _S["MAP"]),
                     self.start_clear.eq(((state == _S["IDLE"]) | (state == _S["DONE"]))
                                         & self.start)]
        # ``npc_fix``: ``npc`` still has to take X's result from ``res_q``; ``npc_now`` is the
        # value as the architecture has it. ``pc_pend``: ``pc`` still has to take ``npc``.
        pc, npc, npc_now = self.pc, Signal(32, name="npc"), Signal(32, name="npc_now")
        npc_fix, pc_pend = Signal(), Signal()
        m.d.comb += [npc_now.eq(Mux(npc_fix, self.res_q, npc)),
                     self.pc_now.eq(Mux(pc_pend, npc_now, pc))]
        m.d.sync += [npc_fix.eq(0), pc_pend.eq(0)]
        with m.If(npc_fix):
            m.d.sync += npc.eq(self.res_q)
        with m.If(pc_pend):
            m.d.sync += pc.eq(npc_now)
        ir = Signal(isa.INSTR_BITS)
        m.d.comb += [getattr(self, n).eq(ir[_FI[n][0]:_FI[n][0] + _FI[n][1]])
                     for n in _OPERANDS]

        err_now = Signal(16)
        # A PC beyond the program memory traps in DECODE (the compare registered in FETCH); the
        # opcode map's valid bit (a block RAM output) is registered in MAP and trapped on in
        # EXEC's first cycle, when X is empty: no wide compare or RAM output is in front of
        # ``fault`` and the state.
        pc_oob, illegal = Signal(), Signal()
        m.d.sync += [pc_oob.eq((state == _S["FETCH"]) & (self.pc_now >= self._pmem_depth)),
                     illegal.eq((state == _S["MAP"]) & ~self.map_valid)]
        with m.If((state == _S["EXEC"]) & self.x_live):
            m.d.comb += err_now.eq(self.exec_err)
        m.d.comb += [err_now[ErrorBit.PC_RANGE].eq(pc_oob),
                     err_now[ErrorBit.ILLEGAL_OPCODE].eq(illegal),
                     self.fault.eq(self.x_live & self.exec_any | pc_oob | illegal)]

        # State that no debug read shows changes on ``go`` (a trapping micro-instruction's
        # change of it is never seen, since the sequencer stops); the architectural state on
        # ``adv``.
        with m.If(self.go):
            m.d.sync += npc.eq(Mux(self.loop_step, self.loop_start,
                                   Mux(self.call_pop, self.call_ret, npc_now)))
            with m.If(self.npc_res):
                m.d.sync += npc_fix.eq(1)
            with m.If(self.end):
                m.d.sync += state.eq(Mux(self.halt, _S["DONE"], _S["FETCH"]))
        with m.If(self.adv & self.end):
            m.d.sync += pc_pend.eq(1)
        err_status, err_pc = Signal(16), Signal(32)
        err_any = Signal()      # ``err_status != 0``, registered beside it
        fault_q = Signal()
        m.d.sync += fault_q.eq(self.fault)
        m.d.comb += self.err_pc.eq(Mux(fault_q, pc, err_pc))
        with m.If(fault_q):
            m.d.sync += err_pc.eq(pc)
        clr = self.clear_addr
        with m.Switch(state):
            with m.Case(_S["IDLE"], _S["DONE"]):
                with m.If(self.start):
                    m.d.sync += [state.eq(_S["CLEAR"]), clr.eq(0), pc.eq(self.start_pc),
                                 err_status.eq(0), err_any.eq(0), err_pc.eq(0)]
            with m.Case(_S["CLEAR"]):
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr == isa.NUM_REGS - 1):
                    m.d.sync += state.eq(_S["FETCH"])
            with m.Case(_S["FETCH"]):
                m.d.sync += state.eq(_S["DECODE"])
            with m.Case(_S["DECODE"]):
                m.d.sync += [ir.eq(self.pmem_data), state.eq(_S["MAP"])]
            with m.Case(_S["MAP"]):
                # (from ``ir``, so the program memory's late word feeds only ``ir``)
                m.d.sync += [npc.eq(pc + 1), state.eq(_S["EXEC"]), self.rd_nz.eq(self.rd != 0),
                             self.sem_sel.eq(Const(1, isa.NUM_SEMS) << self.imm[:4])]
        # An error stops the sequencer (last: ``fault`` enters the state's multiplexer last).
        with m.If(self.fault):
            m.d.sync += [err_status.eq(err_status | err_now), state.eq(_S["DONE"]),
                         err_any.eq(1)]
        m.d.comb += [
            self.busy.eq((state != _S["IDLE"]) & (state != _S["DONE"])),
            self.done.eq(state == _S["DONE"]), self.error.eq(err_any),
            self.err_status.eq(err_status), self.clearing.eq(state == _S["CLEAR"]),
            self.running.eq((state == _S["FETCH"]) | (state == _S["DECODE"])
                            | (state == _S["MAP"]) | self.in_exec),
        ]
        return m
