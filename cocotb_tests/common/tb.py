"""Small testbench helpers shared by the cocotb tests: lane packing and the run's seed."""

import os

import cocotb

__all__ = ["pack_lanes", "unpack_lanes", "random_seed"]


def pack_lanes(values, width):
    """``values`` as one integer, element ``i`` in bits ``[i*width, (i+1)*width)`` (each
    value masked to ``width`` bits): the packed form of an ``ArrayLayout`` port."""
    out = 0
    for i, v in enumerate(values):
        out |= (int(v) & ((1 << width) - 1)) << (i * width)
    return out


def unpack_lanes(value, width, lanes):
    """The inverse of :func:`pack_lanes`: ``lanes`` unsigned elements of ``width`` bits."""
    mask = (1 << width) - 1
    return [(int(value) >> (i * width)) & mask for i in range(lanes)]


def random_seed():
    """The run's random seed (``COCOTB_RANDOM_SEED`` if set, else cocotb's own), which a test
    logs so that a failure can be replayed."""
    return int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))
