"""The sequencer's debug read port: registers, semaphores, flags, errors and counters by
address (``rtl.control.sequencer.DBG``)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["DebugPort", "DBG"]

#: Debug read-port map (``addr``): registers 0..63, then these.
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


class DebugPort(wiring.Component):
    """Combinational read of the sequencer's state at ``addr`` (:data:`DBG`); 0 for an address
    not in the map. A register (``addr`` < 64) reads the register file's debug port, or W's
    pending write to it (``w_rf_*``) as the architecture has it.

    Members
    -------
    addr : In(8)
    data : Out(32)
    rf_addr : Out(6); rf_data : In(32)
        The register file's debug read port (asynchronous).
    w_rf_en : In(1); w_rf_addr : In(6); w_rf_data : In(32)
        W's pending register-file write.
    sems : In(ArrayLayout(SEM_VALUE_BITS, NUM_SEMS))
        The semaphores as the architecture has them.
    flags : In(3); err_status : In(16); err_pc, pc, retired, cycles : In(32)
    loop_depth : In(range(LOOP_DEPTH + 1)); call_depth : In(range(CALL_DEPTH + 1))
    status : In(3)
        Busy, done, error.
    counters : In(ArrayLayout(32, 12))
        Per engine ``e``: ``4 * e`` + (busy, semwait, idle, blocked).
    """

    def __init__(self):
        super().__init__({
            "addr": In(8), "data": Out(32), "rf_addr": Out(6), "rf_data": In(32),
            "w_rf_en": In(1), "w_rf_addr": In(6), "w_rf_data": In(32),
            "sems": In(data.ArrayLayout(isa.SEM_VALUE_BITS, isa.NUM_SEMS)),
            "flags": In(3), "err_status": In(16), "err_pc": In(32), "pc": In(32),
            "retired": In(32), "cycles": In(32),
            "loop_depth": In(range(isa.LOOP_DEPTH + 1)),
            "call_depth": In(range(isa.CALL_DEPTH + 1)), "status": In(3),
            "counters": In(data.ArrayLayout(32, 12)),
        })

    def elaborate(self, platform):
        m = Module()
        values = {DBG[n]: getattr(self, n) for n in ("flags", "err_status", "err_pc", "pc",
                                                     "retired", "cycles", "loop_depth",
                                                     "call_depth", "status")}
        for i in range(isa.NUM_SEMS):
            values[DBG["sem"] + i] = self.sems[i]
        for e in range(3):
            for j in range(3):
                values[DBG["busy"] + 3 * e + j] = self.counters[4 * e + j]
            values[DBG["blocked"] + e] = self.counters[4 * e + 3]
        m.d.comb += self.rf_addr.eq(self.addr[:6])
        with m.If(self.addr < isa.NUM_REGS):
            m.d.comb += self.data.eq(Mux(self.w_rf_en & (self.w_rf_addr == self.addr[:6]),
                                         self.w_rf_data, self.rf_data))
        with m.Else():
            with m.Switch(self.addr):
                for addr, value in values.items():
                    with m.Case(addr):
                        m.d.comb += self.data.eq(value)
        return m
