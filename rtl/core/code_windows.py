"""The PROG and UCODE windows: host writes to the sequencer's program memory, control store and
opcode map."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.bus.axi_lite import WindowSignature
from sim import isa
from sim.config import check_pow2
from sim.memmap import MEMORY_MAP

__all__ = ["CodeWindows", "UCODE_MAP_BASE"]

#: UCODE window word address of opcode-map entry 0 (entries 0..255 follow).
UCODE_MAP_BASE = 2048


class CodeWindows(wiring.Component):
    """Assembles the host's 32-bit window writes into the sequencer's 64-bit write ports.

    PROG: instruction ``i`` is words ``2i`` (bits 31..0) and ``2i+1`` (bits 63..32); the
    instruction is written when word ``2i+1`` is written, from the last even word written
    (held in a register). UCODE: control-store word ``u`` likewise from words ``2u`` and
    ``2u+1``; opcode-map entry ``o`` at word ``UCODE_MAP_BASE + o``. Writes beyond a memory
    are dropped; reads return 0. The write ports follow the window's strobe in the same
    cycle (combinational); no back-pressure.

    Parameters
    ----------
    pmem_depth : int
        Program-memory instructions, a power of two from 16 to 2048.

    Members
    -------
    prog, ucode : In(WindowSignature)
        The register block's PROG and UCODE window ports.
    pmem_wr_addr, pmem_wr_data, pmem_wr_en : Out
        The program-memory write port (``ceil_log2(pmem_depth)`` bits, 64 bits).
    ucode_wr_addr, ucode_wr_data, ucode_wr_en : Out
        The control-store write port (``isa.UADDR_BITS``, 64 bits).
    map_wr_addr, map_wr_data, map_wr_en : Out
        The opcode-map write port (8 bits, ``isa.MAP_BITS``).
    """

    def __init__(self, pmem_depth):
        self._pmem_depth = check_pow2("pmem_depth", pmem_depth, 16, 2048)
        windows = {w.port: w for w in MEMORY_MAP.windows}
        super().__init__({
            "prog": In(WindowSignature(windows["prog"].addr_bits)),
            "ucode": In(WindowSignature(windows["ucode"].addr_bits)),
            "pmem_wr_addr": Out(ceil_log2(pmem_depth)), "pmem_wr_data": Out(isa.INSTR_BITS),
            "pmem_wr_en": Out(1),
            "ucode_wr_addr": Out(isa.UADDR_BITS), "ucode_wr_data": Out(64),
            "ucode_wr_en": Out(1),
            "map_wr_addr": Out(8), "map_wr_data": Out(isa.MAP_BITS), "map_wr_en": Out(1),
        })

    pmem_depth = property(lambda self: self._pmem_depth)

    def elaborate(self, platform):
        m = Module()
        prog = self.prog
        lo = Signal(32)
        with m.If(prog.we & ~prog.addr[0]):
            m.d.sync += lo.eq(prog.wdata)
        m.d.comb += [
            self.pmem_wr_addr.eq(prog.addr[1:]),
            self.pmem_wr_data.eq(Cat(lo, prog.wdata)),
            self.pmem_wr_en.eq(prog.we & prog.addr[0] & (prog.addr[1:] < self._pmem_depth)),
            prog.rdata.eq(0),
        ]
        uc = self.ucode
        ulo = Signal(32)
        is_map = uc.addr >= UCODE_MAP_BASE
        with m.If(uc.we & ~uc.addr[0]):
            m.d.sync += ulo.eq(uc.wdata)
        m.d.comb += [
            self.ucode_wr_addr.eq(uc.addr[1:]),
            self.ucode_wr_data.eq(Cat(ulo, uc.wdata)),
            self.ucode_wr_en.eq(uc.we & uc.addr[0] & (uc.addr < 2 * isa.UCODE_DEPTH)),
            self.map_wr_addr.eq(uc.addr[:8]),
            self.map_wr_data.eq(uc.wdata),
            self.map_wr_en.eq(uc.we & is_map & (uc.addr < UCODE_MAP_BASE + 256)),
            uc.rdata.eq(0),
        ]
        return m
