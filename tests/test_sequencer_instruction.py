"""The sequencer's instruction state machine (``rtl/control/instruction.py``) in the Amaranth
simulator against a Python model of its contract, over seeded random programs of X's
micro-instructions (stalls, END/HALT, JMP-like ``npc_res``, LOOP_STEP, CALL_POP, errors),
PCs beyond the program memory, illegal opcodes and START at random times."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.control.instruction import STATES, InstructionControl
from sim import isa
from sim.isa import ErrorBit

S = STATES
MASK = 0xFFFF_FFFF
FI = isa.field_offsets(isa.INSTR_FIELDS)


class Model:
    """The state machine's registers, stepped a cycle at a time."""

    def __init__(self, depth):
        self.depth = depth
        self.state, self.clr, self.pc, self.npc, self.ir = S["IDLE"], 0, 0, 0, 0
        self.npc_fix = self.pc_pend = self.pc_oob = self.illegal = self.fault_q = False
        self.rd_nz, self.sem_sel, self.err_status, self.err_any, self.err_pc = 0, 1, 0, 0, 0

    def field(self, name):
        lo, w = FI[name]
        return self.ir >> lo & ((1 << w) - 1)

    def outputs(self, i):
        npc_now = i["res_q"] if self.npc_fix else self.npc
        pc_now = npc_now if self.pc_pend else self.pc
        fault = i["x_live"] and i["exec_any"] or self.pc_oob or self.illegal
        st = self.state
        return {
            "start_clear": st in (S["IDLE"], S["DONE"]) and i["start"],
            "busy": st not in (S["IDLE"], S["DONE"]), "done": st == S["DONE"],
            "error": self.err_any, "err_status": self.err_status,
            "err_pc": self.pc if self.fault_q else self.err_pc,
            "clearing": st == S["CLEAR"], "clear_addr": self.clr,
            "in_map": st == S["MAP"], "in_exec": st == S["EXEC"], "mapping": st == S["MAP"],
            "running": st in (S["FETCH"], S["DECODE"], S["MAP"], S["EXEC"]),
            "pc": self.pc, "pc_now": pc_now, "rd_nz": self.rd_nz, "sem_sel": self.sem_sel,
            "fault": fault, **{n: self.field(n) for n in ("rd", "rs1", "rs2", "rs3", "imm")},
        }, npc_now

    def step(self, i):
        out, npc_now = self.outputs(i)
        st, nxt = self.state, dict(npc_fix=False, pc_pend=False)
        err_now = i["exec_err"] if st == S["EXEC"] and i["x_live"] else 0
        err_now &= ~(1 << ErrorBit.PC_RANGE | 1 << ErrorBit.ILLEGAL_OPCODE)
        err_now |= self.pc_oob << ErrorBit.PC_RANGE | self.illegal << ErrorBit.ILLEGAL_OPCODE
        if self.npc_fix:
            nxt["npc"] = i["res_q"]
        if self.pc_pend:
            nxt["pc"] = npc_now
        nxt["pc_oob"] = st == S["FETCH"] and out["pc_now"] >= self.depth
        nxt["illegal"] = st == S["MAP"] and not i["map_valid"]
        if i["go"]:
            nxt["npc"] = (i["loop_start"] if i["loop_step"] else
                          i["call_ret"] if i["call_pop"] else npc_now)
            if i["npc_res"]:
                nxt["npc_fix"] = True
            if i["end"]:
                nxt["state"] = S["DONE"] if i["halt"] else S["FETCH"]
        if i["adv"] and i["end"]:
            nxt["pc_pend"] = True
        nxt["fault_q"] = out["fault"]
        if self.fault_q:
            nxt["err_pc"] = self.pc
        if st in (S["IDLE"], S["DONE"]) and i["start"]:
            nxt.update(state=S["CLEAR"], clr=0, pc=i["start_pc"], err_status=0, err_any=0,
                       err_pc=0)
        elif st == S["CLEAR"]:
            nxt["clr"] = (self.clr + 1) % isa.NUM_REGS
            if self.clr == isa.NUM_REGS - 1:
                nxt["state"] = S["FETCH"]
        elif st == S["FETCH"]:
            nxt["state"] = S["DECODE"]
        elif st == S["DECODE"]:
            nxt.update(ir=i["pmem_data"], state=S["MAP"])
        elif st == S["MAP"]:
            nxt.update(npc=(self.pc + 1) & MASK, state=S["EXEC"], rd_nz=self.field("rd") != 0,
                       sem_sel=1 << (self.field("imm") & 15))
        if out["fault"]:
            nxt.update(err_status=self.err_status | err_now, state=S["DONE"], err_any=True)
        for k, v in nxt.items():
            setattr(self, k, v)
        return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_instruction_control_model(seed):
    rng = random.Random(seed)
    depth = 16
    dut = InstructionControl(pmem_depth=depth)
    model = Model(depth)
    seen = {"fault": 0, "retire": 0, "start": 0}

    def small():
        return rng.choice([rng.randrange(depth + 4), rng.getrandbits(32)])

    async def bench(ctx):
        hold = 0
        for cycle in range(4000):
            st = model.state
            x_live = st == S["EXEC"] and rng.random() < 0.8
            go = x_live and hold == 0
            hold = rng.choice([0, 0, 0, 1, 2]) if go or not x_live else hold - 1
            exec_err = rng.getrandbits(16) if x_live and rng.random() < 0.005 else 0
            end = rng.random() < 0.3
            i = {"start": rng.random() < (0.2 if st in (S["IDLE"], S["DONE"]) else 0.01),
                 "start_pc": small(), "pmem_data": rng.getrandbits(isa.INSTR_BITS),
                 "map_valid": rng.random() < 0.98, "x_live": x_live, "go": go,
                 "adv": go and not exec_err, "end": end, "halt": rng.random() < 0.1,
                 "npc_res": rng.random() < 0.3, "loop_step": rng.random() < 0.2,
                 "call_pop": rng.random() < 0.2, "loop_start": small(), "call_ret": small(),
                 "res_q": small(), "exec_err": exec_err, "exec_any": exec_err != 0}
            for k, v in i.items():
                ctx.set(getattr(dut, k), v)
            await ctx.delay(1e-9)
            want = model.step(i)
            got = {k: ctx.get(getattr(dut, k)) for k in want}
            assert got == {k: int(v) for k, v in want.items()}, (seed, cycle)
            seen["fault"] += want["fault"]
            seen["retire"] += i["adv"] and end
            seen["start"] += want["start_clear"]
            await ctx.tick()
        assert min(seen.values()) > 5, seen

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_instruction_control_parameters():
    with pytest.raises(ValueError, match="pmem_depth must be a power of two from 16 to 65536"):
        InstructionControl(pmem_depth=24)
