"""The state buffer (SBUF): ``partitions`` memories of ``depth`` 32-bit words, one per lane.

Every engine has its own read port so that DMA, the tensor engine and the vector engine read
SBUF in the same cycle (``docs/interfaces.md`` section 5: one element per word whatever its
format, narrow values low-aligned; an engine reads or writes all partitions at one address).

The writers (DMA and vector engine in the core) share ONE write port per partition memory
through a round-robin arbiter. A memory with one write port and any number of synchronous read
ports maps to FPGA block RAM (yosys replicates it once per read port: ECP5 DP16KD, iCE40
SB_RAM40_4K); with two write ports it has to be built from flip-flops (``docs/fpga.md``).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.mem_ports import PartitionReadSignature, PartitionWriteSignature
from sim.config import check_int, check_pow2

__all__ = ["SBUFReadSignature", "SBUFWriteSignature", "SBUF"]

#: An SBUF read port (requester's view): ``rtl.bus.mem_ports.PartitionReadSignature``.
SBUFReadSignature = PartitionReadSignature
#: An SBUF write port (requester's view): ``rtl.bus.mem_ports.PartitionWriteSignature``.
SBUFWriteSignature = PartitionWriteSignature


class SBUF(wiring.Component):
    """State buffer: one :class:`amaranth.lib.memory.Memory` of ``depth`` x 32 bits per partition,
    each with a single write port shared by all writers and one read port per reader.

    Parameters
    ----------
    partitions : int
        Number of partitions P (= tensor rows = vector lanes), 1 to 1024.
    depth : int
        Words per partition, a power of two from 2 to 2**20.
    read_ports : tuple of str
        Names of the read ports; each becomes a member ``r_<name>``.
    write_ports : tuple of str
        Names of the writers; each becomes a member ``w_<name>``. They share one write port.
    init : list of list of int, optional
        Initial contents, ``init[p][addr]`` (tests only).

    Members
    -------
    r_<name> : In(SBUFReadSignature(partitions, depth))
        Read latency 1 cycle, one read per port per cycle, all ports independent.
    w_<name> : In(SBUFWriteSignature(partitions, depth))
        One write per cycle in all, granted by a round-robin arbiter with zero latency: a
        writer alone (no other mask non-zero) always sees ``ready`` 1, so one writer keeps
        one write per cycle. When several request in the same cycle, the writer at or after
        the turn pointer (in ``write_ports`` order) wins and the pointer moves to the writer
        after the winner, so the others are served in the next cycles and none starves (two
        writers requesting every cycle alternate). The losers see ``ready`` 0 and hold.
        A read of a word written in the same cycle returns the old value.

    Reset does not clear the contents; it sets the turn pointer to the first writer.
    """

    def __init__(self, partitions, depth, *,
                 read_ports=("dma", "tensor_stat", "tensor_mov", "vector_a", "vector_b"),
                 write_ports=("dma", "vector"), init=None):
        check_int("partitions", partitions, 1, 1024)
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
        P = self._partitions
        writers = [getattr(self, f"w_{name}") for name in self._write_ports]
        n = len(writers)

        # ---- write arbiter: one grant per cycle, round robin -----------------------------
        req = Signal(max(n, 1))
        grant = Signal(max(n, 1))
        m.d.comb += req.eq(Cat(*[w.mask.any() for w in writers]))
        if n == 1:
            m.d.comb += writers[0].ready.eq(1)
        elif n > 1:
            turn = Signal(range(n))              # the writer that wins the next conflict
            with m.Switch(turn):
                for k in range(n):
                    with m.Case(k):
                        order = [(k + j) % n for j in range(n)]
                        for pos, i in enumerate(order):
                            # Ready unless a writer ahead of i in this cycle's order requests.
                            ahead = [req[j] for j in order[:pos]]
                            m.d.comb += writers[i].ready.eq(~Cat(*ahead).any() if ahead else 1)
            # The pointer moves whenever a writer requests (one is then granted), to the
            # writer after the winner: its clock enable is the OR of the requests, not of the
            # grants, which wait for the other writers' requests through ``ready``: no
            # writer's ``ready``/grant path reaches ``turn``'s clock enable.
            turn_next = Signal.like(turn)
            for i in range(n):
                with m.If(grant[i]):
                    m.d.comb += turn_next.eq((i + 1) % n)
            with m.If(req.any()):
                m.d.sync += turn.eq(turn_next)
        m.d.comb += grant.eq(Cat(*[req[i] & writers[i].ready for i in range(n)]) if n else 0)
        w_addr = Signal(range(self._depth))
        w_mask = Signal(P)
        w_data = Signal(data.ArrayLayout(32, P))
        # At most one grant: an OR of the granted writer's fields is a one-hot multiplexer.
        for i, w in enumerate(writers):
            with m.If(grant[i]):
                m.d.comb += [w_addr.eq(w.addr), w_mask.eq(w.mask), w_data.eq(w.data)]

        #: The memories of the last elaboration (simulation back-door: ``mem.data[addr]``).
        self.memories = []
        for p in range(P):
            # Zero contents rather than none: simulators start an uninitialised memory at X,
            # and X read data would reach handshake logic of the engines in simulation.
            init = [0] * self._depth if self._init is None else list(self._init[p])
            mem = memory.Memory(shape=32, depth=self._depth, init=init)
            self.memories.append(mem)
            m.submodules[f"part{p}"] = mem
            if n:
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(w_addr), wp.data.eq(w_data[p]), wp.en.eq(w_mask[p])]
            for name in self._read_ports:
                rsig = getattr(self, f"r_{name}")
                rp = mem.read_port()
                m.d.comb += [
                    rp.addr.eq(rsig.addr),
                    rp.en.eq(rsig.en),
                    rsig.data[p].eq(rp.data),
                ]
        return m
