"""Shared driver of the arithmetic testbenches (``test_arith_*.py``); holds no tests itself.

The design under test is an :class:`rtl.arith.lanes.ArithLanes` wrapper: ``lanes`` copies of
one block with packed ports. :func:`check_vectors` feeds ``n`` vectors (numpy arrays, one per
input port) through it, ``lanes`` per cycle, and compares every output lane bit-exactly with
the expected values (computed beforehand by the golden model in ``sim/``).

Pipelined blocks (``stages > 0``) are clocked: inputs change on the falling edge, outputs are
read on the falling edge, and with ``en_prob < 1`` the shared ``en`` is low on random cycles.
A Python model of the pipeline (a vector enters on each enabled rising edge and leaves
``stages`` enabled edges later; nothing moves while ``en`` is low) gives the expected output on
every cycle, so holding under stall and the exact latency are checked too. Combinational
blocks are driven and read 1 ns later.
"""

import numpy as np

from cocotb.triggers import FallingEdge, Timer

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.tb import logged_seed, pack_rows
from sim.dtypes import Format

__all__ = ["LANES", "seed", "formats_and_bias", "pack_rows", "check_vectors", "F32_EDGES", "edge_pairs", "add_stimulus",
           "mul_stimulus"]


#: Lanes of the test wrapper per simulator. Icarus spends its time evaluating logic, so lanes
#: only amortise the Python per cycle; Verilator's C++ build time grows with the design, and it
#: runs a few lanes faster than Icarus runs many.
LANES = {"icarus": 16, "verilator": 4}


def seed():
    """The run's random seed (``COCOTB_RANDOM_SEED``), logged so a failure can be replayed."""
    return logged_seed()


def formats_and_bias(cfg):
    """The configuration's ``formats`` (a set of Format) and ``fp8_bias`` ({Format: bias})."""
    return ({Format(f) for f in cfg["formats"]},
            {Format(int(k)): v for k, v in cfg.get("fp8_bias", {}).items()})


def _lane(value, i, width):
    return (value >> (width * i)) & ((1 << width) - 1)


async def check_vectors(dut, *, lanes, stages, inputs, expected, out="o", out_width=32,
                        en_prob=1.0, rng=None, label="", max_report=8):
    """Drive ``inputs`` (dict port -> (array of n values, width)) and compare port ``out``
    with ``expected`` (array of n values). Returns the number of vectors checked; fails with
    the first mismatching lanes (operands, got, expected) otherwise."""
    n = len(expected)
    cycles = -(-n // lanes)
    pad = cycles * lanes - n

    def rows(arr):
        arr = np.asarray(arr).astype(np.uint64)
        if pad:
            arr = np.concatenate([arr, np.repeat(arr[-1:], pad)])
        return arr.reshape(cycles, lanes)

    in_rows = {p: rows(a) for p, (a, _) in inputs.items()}
    packed = {p: pack_rows(in_rows[p], w) for p, (_, w) in inputs.items()}
    exp_rows = rows(expected)
    exp_packed = pack_rows(exp_rows, out_width)
    errors = []

    def compare(got, k):
        if got == exp_packed[k]:
            return
        for i in range(lanes):
            g = _lane(got, i, out_width)
            e = int(exp_rows[k, i])
            if g != e and len(errors) < max_report:
                ops = ", ".join(f"{p}=0x{int(in_rows[p][k, i]):x}" for p in inputs)
                errors.append(f"{label} vector {k * lanes + i}: {ops}: got 0x{g:x}, "
                              f"expected 0x{e:x}")
        if not errors:
            errors.append(f"{label} row {k}: packed mismatch")

    if stages == 0:
        for k in range(cycles):
            for p in inputs:
                getattr(dut, p).value = packed[p][k]
            await Timer(1, unit="ns")
            compare(getattr(dut, out).value.to_unsigned(), k)
            if len(errors) >= max_report:
                break
    else:
        rng = rng or np.random.default_rng(0)
        start_clock(dut)
        dut.en.value = 0        # so that the edge ending the reset captures nothing
        for p in inputs:
            getattr(dut, p).value = 0
        await reset(dut)
        captured = []           # row presented at each enabled rising edge (None: filler)
        nxt = 0
        while True:
            await FallingEdge(dut.clk)
            c = len(captured)
            if c >= stages:
                k = captured[c - stages]
                if k is not None:
                    compare(getattr(dut, out).value.to_unsigned(), k)
                if c >= cycles + stages - 1 or len(errors) >= max_report:
                    break
            en = 1 if en_prob >= 1.0 else int(rng.random() < en_prob)
            row = nxt if nxt < cycles else None
            for p in inputs:
                getattr(dut, p).value = packed[p][row or 0]
            dut.en.value = en
            if en:
                captured.append(row)
                nxt += 1
    assert not errors, "\n".join(errors)
    return n


# -- stimulus shared by the FP32 testbenches (and tests/test_formats_*.py) -------------------

#: FP32 patterns worth pairing with each other: zeros, subnormals (DAZ), normal boundaries,
#: max finite, Inf, quiet/signalling/negative NaNs, 1 and its neighbours, powers of two around
#: the rounding positions of 1.0 and the FTZ/overflow edges.
F32_EDGES = [
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000,
    0x00800000, 0x80800000, 0x00800001, 0x00FFFFFF, 0x01000000, 0x7F7FFFFF, 0xFF7FFFFF,
    0x7F7FFFFE, 0x7F000000, 0x7E800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
    0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x3F800000, 0xBF800000, 0x3F800001, 0xBF800001,
    0x3F7FFFFF, 0x40000000, 0x3F000000, 0x3FC00000, 0x33800000, 0xB3800000, 0x33000000,
    0x33800001, 0x34000000, 0x4B800000, 0x4B000000, 0x4B7FFFFF, 0x1F800000, 0x20000000,
    0x5F800000, 0x5F7FFFFF, 0x3FFFFFFF, 0x40400000,
]


def edge_pairs():
    """Every ordered pair of :data:`F32_EDGES`, as two uint32 arrays."""
    e = np.array(F32_EDGES, dtype=np.uint32)
    return np.repeat(e, len(e)), np.tile(e, len(e))


def _with_exp(man_sign, exp):
    return (man_sign & np.uint32(0x807FFFFF)) | (exp.astype(np.uint32) << np.uint32(23))


def add_stimulus(rng, n):
    """``n`` FP32 operand pairs for an adder: a mix of uniform bit patterns, close exponents
    with random signs (alignment, cancellation), exact half-ULP ties, near-cancellation
    (b = -a plus a few ULPs), the FTZ region and the overflow region."""
    k = n // 6
    parts = []
    u = lambda m: rng.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.uint32)
    parts.append((u(k), u(k)))
    a = u(k)
    ea = rng.integers(1, 255, k)
    eb = np.clip(ea + rng.integers(-27, 28, k), 1, 254)
    parts.append((_with_exp(a, ea), _with_exp(u(k), eb)))
    # ties: b is half an ULP of a (times an odd factor in 1, 3), either sign
    a = _with_exp(u(k), rng.integers(30, 220, k))
    ea = ((a >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    sb = u(k) & np.uint32(0x80000000)
    odd = rng.choice(np.array([0, 0x400000], dtype=np.uint32), k)
    parts.append((a, sb | odd | (ea - 24 - (odd != 0)).astype(np.uint32) << np.uint32(23)))
    a = u(k)
    delta = rng.integers(-4, 5, k).astype(np.int64)
    b = ((a.astype(np.int64) & 0x7FFFFFFF) + delta).clip(0, 0x7F7FFFFF).astype(np.uint32)
    parts.append((a, b | (~a & np.uint32(0x80000000))))
    parts.append((_with_exp(u(k), rng.integers(1, 28, k)), _with_exp(u(k), rng.integers(1, 28, k))))
    m = n - 5 * k
    parts.append((_with_exp(u(m), rng.integers(240, 255, m)),
                  _with_exp(u(m), rng.integers(240, 255, m))))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def mul_stimulus(rng, n):
    """``n`` FP32 operand pairs for a multiplier: uniform bit patterns, exponent pairs whose
    product lands near the FTZ boundary 2**-126 or the overflow boundary 2**128, products just
    below 2**-126 that IEEE rounding carries up to it, and significands whose product is an
    exact rounding tie."""
    k = n // 5
    u = lambda m: rng.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.uint32)
    parts = [(u(k), u(k))]
    ea = rng.integers(1, 255, k)
    parts.append((_with_exp(u(k), ea), _with_exp(u(k), np.clip(127 - 126 - ea + 127
                                                               + rng.integers(-3, 3, k), 1, 254))))
    ea = rng.integers(1, 255, k)
    parts.append((_with_exp(u(k), ea), _with_exp(u(k), np.clip(254 + 127 - ea
                                                               + rng.integers(-2, 3, k), 1, 254))))
    # products in [2**-126 - 2**-150, 2**-126): b ~ 2**-126 / a, keep the hits (float64 is
    # exact for a 48-bit significand product)
    hits_a, hits_b = [], []
    while sum(len(h) for h in hits_a) < k:
        a = _with_exp(u(4 * k), rng.integers(40, 90, 4 * k)) & np.uint32(0x7FFFFFFF)
        fa = a.view(np.float32).astype(np.float64)
        b = (2.0 ** -126 / fa).astype(np.float32).view(np.uint32)
        b = b + rng.integers(-2, 3, 4 * k).astype(np.uint32)
        p = fa * b.view(np.float32).astype(np.float64)
        ok = (p >= 2.0 ** -126 - 2.0 ** -150) & (p < 2.0 ** -126)
        hits_a.append(a[ok])
        hits_b.append(b[ok])
    s = u(k) & np.uint32(0x80000000)
    parts.append((np.concatenate(hits_a)[:k] | s, np.concatenate(hits_b)[:k]))
    # ties: (1 + x * 2**-12)(1 + y * 2**-12) with small x, y often has a 2**-24 tail
    m = n - 4 * k
    x = rng.integers(0, 1 << 12, m).astype(np.uint32) << np.uint32(11)
    y = rng.integers(0, 1 << 12, m).astype(np.uint32) << np.uint32(11)
    parts.append((_with_exp(x | (u(m) & np.uint32(0x80000000)), rng.integers(100, 150, m)),
                  _with_exp(y, rng.integers(100, 150, m))))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
