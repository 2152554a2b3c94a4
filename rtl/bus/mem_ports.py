"""Ports of partitioned memories (SBUF, PSUM): all partitions at one address.

These signatures are shared by the memories (``rtl.core.sbuf``, ``rtl.tensor.psum``) and by
the units that read or write them (``rtl.dma``, the core's controllers), so they live here,
below all of them, and no engine imports another engine's package for them.

The read port is ``amaranth.lib.memory.ReadPort.Signature`` seen from the requester, with
``data`` an ``ArrayLayout`` of one 32-bit word per partition and ``en`` reset to 0 (a
requester that does not drive ``en`` does not read).
"""

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PartitionReadSignature", "PartitionWriteSignature"]


class PartitionReadSignature(wiring.Signature):
    """A synchronous read port of all partitions at one address (requester's view).

    Parameters
    ----------
    partitions : int
        Number of partitions (words per read).
    depth : int
        Words per partition.

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


class PartitionWriteSignature(wiring.Signature):
    """A write port of all partitions at one address (requester's view).

    A write is requested by a non-zero ``mask`` and is taken at the rising edge where ``ready``
    is 1 (like a stream whose ``valid`` is ``mask != 0``). ``addr``, ``mask`` and ``data`` must
    not depend combinationally on ``ready``; a requester that sees ``ready`` 0 holds its write
    (or withdraws it: the arbiter keeps no state about requests it has not granted).

    Parameters
    ----------
    partitions : int
        Number of partitions.
    depth : int
        Words per partition.

    Members
    -------
    addr : Out(range(depth))
    mask : Out(partitions)
        Partition ``p`` is written with ``data[p]`` when ``mask[p]`` is 1 and ``ready`` is 1.
    data : Out(ArrayLayout(32, partitions))
    ready : In(1)
        The write is taken this cycle. Combinational from the other writers' masks and the
        arbiter's state, never from this port's own ``mask``: a writer alone gets 1.
    """

    def __init__(self, partitions, depth):
        self.partitions = partitions
        self.depth = depth
        super().__init__({
            "addr": Out(range(depth)),
            "mask": Out(partitions),
            "data": Out(data.ArrayLayout(32, partitions)),
            "ready": In(1),
        })
