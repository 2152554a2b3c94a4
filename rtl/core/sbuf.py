"""The state buffer (SBUF): ``partitions`` memories of ``depth`` 32-bit words, one per lane.

Every engine has its own ports so that DMA, the tensor engine and the vector engine work on
SBUF in the same cycle (``docs/interfaces.md`` section 5: one element per word whatever its
format, narrow values low-aligned; an engine reads or writes all partitions at one address).
"""

from amaranth.hdl import Module, Shape
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SBUFReadSignature", "SBUFWriteSignature", "SBUF", "check_pow2"]


def check_pow2(name, value, minimum=2, maximum=1 << 24):
    """Raise ``TypeError``/``ValueError`` unless ``value`` is a power of two in range."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < minimum or value > maximum or value & (value - 1):
        raise ValueError(f"{name} must be a power of two from {minimum} to {maximum}, "
                         f"not {value}")


class SBUFReadSignature(wiring.Signature):
    """A synchronous read port of all partitions at one address (requester's view).

    Members
    -------
    addr : Out(range(depth))
        Word address within every partition.
    en : Out(1)
        Read enable. ``data`` shows the word at ``addr`` the cycle after ``en`` was 1 and holds
        its value while ``en`` is 0 (so a stalled reader keeps its data in the port register).
    data : In(ArrayLayout(32, partitions))
        One word per partition, partition 0 in the least significant bits.
    """

    def __init__(self, partitions, depth):
        self.partitions = partitions
        self.depth = depth
        super().__init__({
            "addr": Out(range(depth)),
            "en": Out(1),
            "data": In(data.ArrayLayout(32, partitions)),
        })


class SBUFWriteSignature(wiring.Signature):
    """A write port of all partitions at one address (requester's view).

    Members
    -------
    addr : Out(range(depth))
    mask : Out(partitions)
        Partition ``p`` is written with ``data[p]`` at the rising edge when ``mask[p]`` is 1.
    data : Out(ArrayLayout(32, partitions))
    """

    def __init__(self, partitions, depth):
        self.partitions = partitions
        self.depth = depth
        super().__init__({
            "addr": Out(range(depth)),
            "mask": Out(partitions),
            "data": Out(data.ArrayLayout(32, partitions)),
        })


class SBUF(wiring.Component):
    """State buffer: one :class:`amaranth.lib.memory.Memory` of ``depth`` x 32 bits per partition.

    Parameters
    ----------
    partitions : int
        Number of partitions P (= tensor rows = vector lanes), 1 to 1024.
    depth : int
        Words per partition, a power of two from 2 to 2**20.
    read_ports : tuple of str
        Names of the read ports; each becomes a member ``r_<name>``.
    write_ports : tuple of str
        Names of the write ports; each becomes a member ``w_<name>``.
    init : list of list of int, optional
        Initial contents, ``init[p][addr]`` (tests only).

    Members
    -------
    r_<name> : In(SBUFReadSignature(partitions, depth))
        Read latency 1 cycle, one read per port per cycle, all ports independent.
    w_<name> : In(SBUFWriteSignature(partitions, depth))
        One write per port per cycle. Two ports writing the same word of the same partition in
        the same cycle is a program error (the engines are ordered by semaphores); the port
        listed last wins. A read of a word written in the same cycle returns the old value.

    Reset does not clear the contents.
    """

    def __init__(self, partitions, depth, *,
                 read_ports=("dma", "tensor_stat", "tensor_mov", "vector_a", "vector_b"),
                 write_ports=("dma", "vector"), init=None):
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            raise TypeError(f"partitions must be an integer, not {partitions!r}")
        if not 1 <= partitions <= 1024:
            raise ValueError(f"partitions must be an integer from 1 to 1024, not {partitions}")
        check_pow2("depth", depth, 2, 1 << 20)
        for kind, names in (("read_ports", read_ports), ("write_ports", write_ports)):
            if (not isinstance(names, (tuple, list)) or
                    not all(isinstance(n, str) and n.isidentifier() for n in names) or
                    len(set(names)) != len(names)):
                raise TypeError(f"{kind} must be a sequence of distinct identifiers, "
                                f"not {names!r}")
        self._partitions = partitions
        self._depth = depth
        self._read_ports = tuple(read_ports)
        self._write_ports = tuple(write_ports)
        self._init = init
        members = {}
        for name in self._read_ports:
            members[f"r_{name}"] = In(SBUFReadSignature(partitions, depth))
        for name in self._write_ports:
            members[f"w_{name}"] = In(SBUFWriteSignature(partitions, depth))
        super().__init__(members)

    partitions = property(lambda self: self._partitions)
    depth = property(lambda self: self._depth)
    read_ports = property(lambda self: self._read_ports)
    write_ports = property(lambda self: self._write_ports)

    def elaborate(self, platform):
        m = Module()
        #: The memories of the last elaboration (simulation back-door: ``mem.data[addr]``).
        self.memories = []
        for p in range(self._partitions):
            # Zero contents rather than none: simulators start an uninitialised memory at X,
            # and X read data would reach handshake logic of the engines in simulation.
            init = [0] * self._depth if self._init is None else list(self._init[p])
            mem = memory.Memory(shape=32, depth=self._depth, init=init)
            self.memories.append(mem)
            m.submodules[f"part{p}"] = mem
            for name in self._write_ports:
                req = getattr(self, f"w_{name}")
                wp = mem.write_port()
                m.d.comb += [
                    wp.addr.eq(req.addr),
                    wp.data.eq(req.data[p]),
                    wp.en.eq(req.mask[p]),
                ]
            for name in self._read_ports:
                req = getattr(self, f"r_{name}")
                rp = mem.read_port()
                m.d.comb += [
                    rp.addr.eq(req.addr),
                    rp.en.eq(req.en),
                    req.data[p].eq(rp.data),
                ]
        return m
