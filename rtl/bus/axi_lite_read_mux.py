"""The register read multiplexer of :class:`rtl.bus.axi_lite.AXI4LiteRegisters`."""

from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import RESP_DECERR, RESP_OKAY
from sim.memmap import MemoryMap

__all__ = ["AXI4LiteReadMux", "read_sources"]


def read_sources(memory_map):
    """The registers of ``memory_map`` whose read value is an input of the multiplexer (RW
    registers, read-only registers without a constant value), in map order."""
    return [reg for reg in memory_map.registers
            if reg.access == "rw" or (reg.access == "ro" and reg.value is None)]


class AXI4LiteReadMux(wiring.Component):
    """The word and response of a register read, registered in two levels.

    The multiplexer is a tree indexed by the low word-address bits (the registers sit in the
    first ``2**k`` words), not a compare per register. First level: one register per group of
    ``2**lo`` words holding a register (``r_grp_*``, indexed by the low address bits) and a
    one-hot select of the group (0 for an address out of range); second level: an AND-OR of
    the groups into ``data``.

    Parameters
    ----------
    memory_map : sim.memmap.MemoryMap

    Members
    -------
    addr : In(memory_map.addr_width)
        Byte address of the read (bits 1..0 ignored).
    <reg> : In(reg.width)
        One input per register of :func:`read_sources`: its current value.
    data : Out(32)
        The word at ``addr``: the input's value (zero-extended), a constant register's value,
        0 for a write-only register or an unmapped word. Loaded every cycle, no enable:
        ``data`` is the word for the ``addr`` and inputs of two cycles before.
    resp : Out(2)
        ``RESP_OKAY`` if ``addr`` holds a register, else ``RESP_DECERR``; for the ``addr`` of
        one cycle before.

    Both outputs reset to 0 (``RESP_OKAY``). No stall: the user holds ``addr`` for two cycles
    (and the inputs unchanged by its own writes) before it takes ``data``.
    """

    def __init__(self, memory_map):
        if not isinstance(memory_map, MemoryMap):
            raise TypeError(f"memory_map must be a sim.memmap.MemoryMap, not {memory_map!r}")
        self._mm = memory_map
        members = {"addr": In(memory_map.addr_width), "data": Out(32), "resp": Out(2)}
        for reg in read_sources(memory_map):
            members[reg.port] = In(reg.width)
        super().__init__(members)

    memory_map = property(lambda self: self._mm)

    def elaborate(self, platform):
        m = Module()
        mm = self._mm
        r_word = self.addr[2:mm.addr_width]
        k = max((reg.offset >> 2) for reg in mm.registers).bit_length() if mm.registers else 0
        words = [Const(0, 32)] * (1 << k)
        mapped = 0                   # bit w: word w holds a register
        for reg in mm.registers:
            if reg.access == "wo":
                value = Const(0, 32)
            elif reg.access == "ro" and reg.value is not None:
                value = Const(reg.value, 32)
            else:
                value = getattr(self, reg.port)
            words[reg.offset >> 2] = value
            mapped |= 1 << (reg.offset >> 2)
        in_range = (r_word >> k) == 0
        index = r_word[:k]
        lo = (k + 1) // 2
        or_tree = Const(0, 32)
        for g in range(1 << (k - lo)):
            group = words[g << lo:(g + 1) << lo]
            if not (mapped >> (g << lo)) & ((1 << (1 << lo)) - 1):
                continue
            r_grp = Signal(32, name=f"r_grp_{g}")
            r_grp_sel = Signal(name=f"r_grp_sel_{g}")
            m.d.sync += [r_grp.eq(Array(group)[index[:lo]]),
                         r_grp_sel.eq(in_range & (index[lo:] == g))]
            or_tree = or_tree | Mux(r_grp_sel, r_grp, 0)
        m.d.sync += [
            self.data.eq(or_tree),
            self.resp.eq(Mux(in_range & Const(mapped, 1 << k).bit_select(index, 1),
                             RESP_OKAY, RESP_DECERR)),
        ]
        return m
