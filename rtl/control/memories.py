"""The sequencer's memories: program memory, control store, opcode map and register file."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim import isa, microcode
from sim.config import check_pow2
from sim.isa import USeq

__all__ = ["SequencerMemories", "JUMPS", "jump_bit"]

#: Micro-sequencing codes whose successor is the word's target (the control store's 65th bit).
JUMPS = (USeq.JUMP, USeq.CALL)

_SEQ_LO, _SEQ_W = isa.field_offsets(isa.MICRO_FIELDS)["seq"]


def jump_bit(word):
    """The control store's 65th bit of a 64-bit micro-word (an int): its ``seq`` is JUMP or
    CALL."""
    return int((word >> _SEQ_LO & ((1 << _SEQ_W) - 1)) in JUMPS)


class SequencerMemories(wiring.Component):
    """The sequencer's block and LUT memories with their host write ports.

    The program memory (``pmem``), the control store (``ucode``) and the opcode map (``opmap``)
    are block RAMs read with latency 1 and written by the host only while the sequencer is not
    ``busy`` (a write while busy is dropped), so nothing is read from them in the cycle it is
    written (``rtl.control.sequencer.YOSYS_HINTS`` tells synthesis so; their names are what
    it selects). The control store keeps beside each micro-word a 65th bit, derived as the
    word is written (:func:`jump_bit`): its ``seq`` is JUMP or CALL, so the sequencer's
    next-address multiplexer takes a select straight from the block RAM instead of decoding
    the 3-bit field behind the RAM's late output. The opcode map is addressed by the program
    memory's output (the fetched instruction's opcode byte), so its entry follows the
    instruction word by one cycle. The register file (``regfile``, 64 x 32 bits, LUT RAM) has
    one synchronous write port and three asynchronous read ports (operands A and B, debug).

    Parameters
    ----------
    pmem_depth : int
        Program memory words (64-bit instructions), a power of two from 16 to 65536.

    Members
    -------
    busy : In(1)
        The sequencer runs: host writes are dropped.
    pmem_wr_addr, pmem_wr_data, pmem_wr_en : In
        Host write of one instruction.
    ucode_wr_addr, ucode_wr_data, ucode_wr_en : In
        Host write of one 64-bit micro-word.
    map_wr_addr, map_wr_data, map_wr_en : In
        Host write of one opcode-map entry.
    pmem_addr : In(range(pmem_depth))
        Program memory read address; ``pmem_data`` shows its word the next cycle.
    pmem_data : Out(64)
    ucode_addr : In(UADDR_BITS)
        Control store read address; ``ucode_data`` shows its word the next cycle.
    ucode_data : Out(65)
        The micro-word (bits 0..63) and its jump bit (bit 64).
    map_data : Out(MAP_BITS)
        The opcode map's entry for ``pmem_data[:8]``, the cycle after ``pmem_data``.
    rf_wr_addr, rf_wr_data, rf_wr_en : In
        Register-file write, at the clock edge.
    rf_a_addr, rf_b_addr, rf_d_addr : In(6)
        Register-file read addresses; ``rf_*_data`` in the same cycle (no bypass of a write
        at the same edge).
    rf_a_data, rf_b_data, rf_d_data : Out(32)
    """

    def __init__(self, *, pmem_depth=1024):
        self._pmem_depth = check_pow2("pmem_depth", pmem_depth, 16, 65536)
        pc_bits = ceil_log2(pmem_depth)
        super().__init__({
            "busy": In(1),
            "pmem_wr_addr": In(pc_bits), "pmem_wr_data": In(isa.INSTR_BITS),
            "pmem_wr_en": In(1),
            "ucode_wr_addr": In(isa.UADDR_BITS), "ucode_wr_data": In(64), "ucode_wr_en": In(1),
            "map_wr_addr": In(8), "map_wr_data": In(isa.MAP_BITS), "map_wr_en": In(1),
            "pmem_addr": In(pc_bits), "pmem_data": Out(isa.INSTR_BITS),
            "ucode_addr": In(isa.UADDR_BITS), "ucode_data": Out(65),
            "map_data": Out(isa.MAP_BITS),
            "rf_wr_addr": In(6), "rf_wr_data": In(32), "rf_wr_en": In(1),
            "rf_a_addr": In(6), "rf_a_data": Out(32),
            "rf_b_addr": In(6), "rf_b_data": Out(32),
            "rf_d_addr": In(6), "rf_d_data": Out(32),
        })

    pmem_depth = property(lambda self: self._pmem_depth)

    def elaborate(self, platform):
        m = Module()

        m.submodules.pmem = pmem = Memory(shape=isa.INSTR_BITS, depth=self._pmem_depth,
                                          init=[])
        pw = pmem.write_port()
        pr = pmem.read_port()
        m.d.comb += [pw.addr.eq(self.pmem_wr_addr), pw.data.eq(self.pmem_wr_data),
                     pw.en.eq(self.pmem_wr_en & ~self.busy), pr.addr.eq(self.pmem_addr),
                     self.pmem_data.eq(pr.data)]

        def f_jumps(word):          # the jump bit of a written word (a Value)
            seq_v = word[_SEQ_LO:_SEQ_LO + _SEQ_W]
            return Cat(*[seq_v == v for v in JUMPS]).any()

        m.submodules.ucode = ucode = Memory(
            shape=65, depth=isa.UCODE_DEPTH,
            init=[w | jump_bit(w) << 64 for w in microcode.control_store()])
        uw = ucode.write_port()
        ur = ucode.read_port()
        m.d.comb += [uw.addr.eq(self.ucode_wr_addr),
                     uw.data.eq(Cat(self.ucode_wr_data, f_jumps(self.ucode_wr_data))),
                     uw.en.eq(self.ucode_wr_en & ~self.busy),
                     ur.addr.eq(self.ucode_addr), self.ucode_data.eq(ur.data)]

        m.submodules.opmap = opmap = Memory(shape=isa.MAP_BITS, depth=256,
                                            init=microcode.opcode_map())
        mw = opmap.write_port()
        mr = opmap.read_port()
        m.d.comb += [mw.addr.eq(self.map_wr_addr), mw.data.eq(self.map_wr_data),
                     mw.en.eq(self.map_wr_en & ~self.busy), mr.addr.eq(pr.data[:8]),
                     self.map_data.eq(mr.data)]

        m.submodules.regfile = regfile = Memory(shape=32, depth=isa.NUM_REGS, init=[])
        rf_w = regfile.write_port()
        m.d.comb += [rf_w.addr.eq(self.rf_wr_addr), rf_w.data.eq(self.rf_wr_data),
                     rf_w.en.eq(self.rf_wr_en)]
        for name in "abd":
            rp = regfile.read_port(domain="comb")
            m.d.comb += [rp.addr.eq(getattr(self, f"rf_{name}_addr")),
                         getattr(self, f"rf_{name}_data").eq(rp.data)]
        return m
