"""The FP32 adder's first and last steps on their own (``rtl.arith.fp32_add_order`` and
``rtl.arith.fp32_add_round``), combinational, on the Amaranth simulator: step 1's terms from
their definitions (order by magnitude, clamped exponent difference, trailing zeros, the near
path's exact difference), step 4's normalisation, rounding to nearest even, overflow, FTZ and
path selection from the fields' meaning. The whole adder is checked against numpy float32 by
``test_fp32_add_*.py`` and ``cocotb_tests/test_arith_fp32_add.py``."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.arith.fp32_add_order import FP32AddOrder
from rtl.arith.fp32_add_round import FP32AddRound

SEED = 20261133


def _pairs(rng, n):
    out = []
    for _ in range(n):
        a = int(rng.integers(0, 2)) << 31 | int(rng.integers(0, 256)) << 23 | \
            int(rng.integers(0, 1 << 23))
        if rng.random() < 0.5:           # exponents at most one apart
            e = ((a >> 23) & 0xFF) + int(rng.integers(-1, 2))
            b = int(rng.integers(0, 2)) << 31 | (e & 0xFF) << 23 | int(rng.integers(0, 1 << 23))
        else:
            b = int(rng.integers(0, 1 << 32))
        if rng.random() < 0.1:
            b = a ^ 0x80000000
        out.append((a, b))
    return out


def _tz(sig):
    return (sig & -sig).bit_length() - 1


@pytest.mark.parametrize("near_early", [False, True])
def test_order_terms(near_early):
    rng = np.random.default_rng(SEED + near_early)
    dut = FP32AddOrder(near_early)
    bad = []

    async def bench(ctx):
        for a, b in _pairs(rng, 400):
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            o = dut.o
            ma, mb = a & 0x7FFFFFFF, b & 0x7FFFFFFF
            swap = ma < mb
            big, small = (b, a) if swap else (a, b)
            ea, eb = (a >> 23) & 0xFF, (b >> 23) & 0xFF
            sub = (a ^ b) >> 31
            full = [(x & 0x7FFFFF) | 1 << 23 for x in (a, b)]
            sig_small = 0 if (small >> 23) & 0xFF == 0 else (small & 0x7FFFFF) | 1 << 23
            exp = dict(swap=int(swap), sig_big=(big & 0x7FFFFF) | 1 << 23,
                       far_x=sig_small ^ (0xFFFFFF if sub else 0), e_big=(big >> 23) & 0xFF,
                       s_big=big >> 31, sub=sub, shift=min(abs(ea - eb), 27),
                       d_le1=int(abs(ea - eb) <= 1), nz_a=int(ea != 0), nz_b=int(eb != 0),
                       tz_a=_tz(full[0]), tz_b=_tz(full[1]), zero_sign=(a & b) >> 31,
                       emax_a=int(ea == 0xFF), emax_b=int(eb == 0xFF))
            if near_early:
                if abs(ea - eb) <= 1 and ea and eb:
                    fb, fs = (full[1], full[0]) if swap else (full[0], full[1])
                    exp["near_diff"] = (fb << 1) - (fs << (ea == eb))
            else:
                exp["d_one"] = (ea ^ eb) & 1
            got = {k: ctx.get(getattr(o, k)) for k in exp}
            if got != exp:
                bad.append((hex(a), hex(b), {k: (got[k], exp[k]) for k in exp
                                             if got[k] != exp[k]}))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:3]


def _round_ref(f):
    """Step 4 from the meaning of its inputs."""
    if f["special"]:
        return f["special_val"]
    s = f["s_big"]
    if f["use_near"]:
        if f["near_zero"]:
            return 0
        e = f["e_big"] - f["near_lz"]
        if e <= 0:
            return s << 31
        m = ((f["near_diff"] << f["near_lz"]) >> 1) & 0x7FFFFF
        return s << 31 | e << 23 | m
    fs = f["far_sum"]
    top = fs.bit_length() - 1                   # 27, 26 or 25
    e = f["e_big"] + top - 26
    sh = top - 23
    m = (fs >> sh) & 0x7FFFFF
    g = (fs >> (sh - 1)) & 1
    st = int(fs & ((1 << (sh - 1)) - 1) != 0)
    if e >= 255:
        return s << 31 | 0x7F800000
    if e <= 0:
        return s << 31
    mag = (e << 23 | m) + (g & (st | (m & 1)))
    return s << 31 | mag


def test_round_vs_meaning():
    rng = np.random.default_rng(SEED + 7)
    dut = FP32AddRound()
    bad = []

    async def bench(ctx):
        for _ in range(1500):
            e = int(rng.choice([0, 1, 2, 3, 253, 254, 255] + [int(rng.integers(0, 256))] * 4))
            top = int(rng.choice([25, 26, 27]))
            fs = 1 << top | int(rng.integers(0, 1 << top))
            if rng.random() < 0.3:              # ties
                fs &= ~((1 << (top - 24)) - 1)
                fs |= 1 << (top - 24)
            nd = int(rng.integers(0, 1 << 25)) >> int(rng.integers(0, 26))
            lz = 25 - nd.bit_length()
            f = dict(e_big=e, s_big=int(rng.integers(0, 2)), far_sum=fs, near_diff=nd,
                     near_lz=min(lz, 24) if nd else 25 & 0x1F, near_zero=int(nd == 0),
                     special=int(rng.random() < 0.1), special_val=int(rng.integers(0, 1 << 32)),
                     use_near=int(rng.random() < 0.5), e_ge254=int(e >= 254),
                     e_ge255=int(e == 255), e_eq0=int(e == 0), e_le1=int(e <= 1),
                     e_p1=(e + 1) & 0xFF, e_m1=(e - 1) & 0xFF)
            if nd == 0:
                f["near_lz"] = 25
            for k, v in f.items():
                ctx.set(getattr(dut.i, k), v)
            got, exp = ctx.get(dut.o), _round_ref(f)
            if got != exp:
                bad.append(({k: hex(v) for k, v in f.items()}, hex(got), hex(exp)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:3]


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_order_parameter_error():
    with pytest.raises(TypeError, match=r"^near_early must be a bool, not 1$"):
        FP32AddOrder(1)
