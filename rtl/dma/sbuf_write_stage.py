"""The DMA's SBUF write stage: loaded elements on their way to the shared SBUF write port."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.mem_ports import PartitionWriteSignature
from sim.config import check_int, check_pow2

__all__ = ["SbufWriteStage"]


class SbufWriteStage(wiring.Component):
    """A two-entry FIFO of SBUF writes in front of an SBUF write port.

    ``put`` (only while ``~full``) enters one write: a word address, the partitions written
    (``mask``: one for an element along a partition, a chunk's across partitions) and a word
    per partition; the head is the write request on ``sbuf_w``, held until the port's
    ``ready`` takes it. One write per cycle, one cycle from ``put`` to the request.

    The request (address, mask, data) comes from registers and never from ``sbuf_w.ready``,
    as the port requires. The level is two flip-flops, ``nonempty`` (the request) and ``full``
    (no room), each one gate of the put, the pop and themselves, so ``ready`` (the SBUF
    arbiter's answer, which depends on the other writers' requests) reaches only those flags
    and the read position, and the writer's ``full`` is a flip-flop.

    Parameters
    ----------
    partitions : int
        The ``DMA``'s (``rtl/dma/dma.py``).
    depth : int
        The ``DMA``'s ``sbuf_depth``.

    Members
    -------
    put : In(1)
        Enter ``addr``, ``mask``, ``data``; must be low while ``full``.
    addr : In(range(depth))
    mask : In(partitions)
        The partitions written.
    data : In(ArrayLayout(32, partitions))
        A word per partition.
    full : Out(1)
        Two writes wait.
    nonempty : Out(1)
        A write waits (the write request is raised).
    sbuf_w : Out(PartitionWriteSignature(partitions, depth))
    """

    def __init__(self, *, partitions, depth):
        self._partitions = check_int("partitions", partitions, 1, 256)
        self._depth = check_pow2("depth", depth, 2, 1 << 16)
        depth_bits = (depth - 1).bit_length()
        super().__init__({
            "put": In(1), "addr": In(depth_bits),
            "mask": In(partitions), "data": In(data.ArrayLayout(32, partitions)),
            "full": Out(1), "nonempty": Out(1),
            "sbuf_w": Out(PartitionWriteSignature(partitions, depth)),
        })

    partitions = property(lambda self: self._partitions)
    depth = property(lambda self: self._depth)

    def elaborate(self, platform):
        m = Module()
        P = self._partitions
        w_word = data.StructLayout({"addr": len(self.addr), "mask": P,
                                    "data": data.ArrayLayout(32, P)})
        m.submodules.words = wq_mem = memory.Memory(shape=w_word, depth=2, init=[])
        wq_w, wq_r = wq_mem.write_port(), wq_mem.read_port(domain="comb")
        wq_ne, wq_full = self.nonempty, self.full
        wq_pop = Signal()         # SBUF takes the head
        wq_wp, wq_rp = Signal(), Signal()        # write and read positions
        m.d.comb += wq_pop.eq(wq_ne & self.sbuf_w.ready)
        m.d.sync += [wq_ne.eq(self.put | wq_full | (wq_ne & ~wq_pop)),
                     wq_full.eq((wq_full | (wq_ne & self.put)) & ~wq_pop)]
        with m.If(self.put):
            m.d.sync += wq_wp.eq(~wq_wp)
        with m.If(wq_pop):
            m.d.sync += wq_rp.eq(~wq_rp)
        m.d.comb += [
            wq_w.en.eq(self.put), wq_w.addr.eq(wq_wp), wq_r.addr.eq(wq_rp),
            wq_w.data.addr.eq(self.addr),
            # A refused write stays at the head and the FIFO fills.
            self.sbuf_w.addr.eq(wq_r.data.addr),
        ]
        m.d.comb += [wq_w.data.mask.eq(self.mask), wq_w.data.data.eq(self.data),
                     self.sbuf_w.mask.eq(Mux(wq_ne, wq_r.data.mask, 0)),
                     self.sbuf_w.data.eq(wq_r.data.data)]
        return m
