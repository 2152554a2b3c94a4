"""Small testbench helpers shared by the cocotb tests: lane packing and the run's seed."""

import os

import cocotb
import numpy as np

__all__ = ["pack_lanes", "unpack_lanes", "pack_rows", "random_seed", "logged_seed"]


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


def pack_rows(values, width):
    """:func:`pack_lanes` of each row of a (rows, lanes) array of unsigned values: one integer
    per row, lane 0 in the low bits."""
    values = np.asarray(values)
    if width in (8, 16, 32, 64):
        dtype = {8: "<u1", 16: "<u2", 32: "<u4", 64: "<u8"}[width]
        data = (values.astype(np.uint64) & np.uint64((1 << width) - 1)).astype(dtype)
        return [int.from_bytes(row.tobytes(), "little") for row in data]
    return [pack_lanes(row.tolist(), width) for row in values]


def random_seed():
    """The run's random seed (``COCOTB_RANDOM_SEED`` if set, else cocotb's own), which a test
    logs so that a failure can be replayed."""
    return int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))


def logged_seed(dut=None, offset=0):
    """:func:`random_seed` plus ``offset``, logged (on ``dut``'s log, else cocotb's) with the
    command line that replays it."""
    seed = random_seed()
    log = dut._log if dut is not None else cocotb.log
    log.info("random seed %d (rerun with COCOTB_RANDOM_SEED=%d)", seed, seed)
    return seed + offset
