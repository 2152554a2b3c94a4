"""The FP32 adder's near path and step 1's order and specials (``rtl.arith.fp32_add``) against
``sim.formats.fp32_add``, pipelined (``stages`` 3, the near path's difference formed in step 1,
chosen by the exponents' low bits and the order compare; ``stages`` 4, formed in step 2):
exponent differences -2..2 over the whole exponent range (0, DAZ, and 255, Inf/NaN, included), equal
and nearly equal significands (cancellation of many bits), a subnormal against the smallest
normals (DAZ: the near path's operands are not masked, so it must not be taken), and Inf/NaN
against everything. The Amaranth simulator keeps it quick; the cocotb tests
(``cocotb_tests/test_arith_fp32_add.py``) run the random mix on both simulators."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.arith.fp32_add import FP32Adder
from sim.formats import fp32_add


def _pairs(rng):
    a, b = [], []

    def put(x, y):
        a.append(x & 0xFFFFFFFF)
        b.append(y & 0xFFFFFFFF)

    man = lambda: int(rng.integers(0, 1 << 23))
    sign = lambda: int(rng.integers(0, 2)) << 31
    for ea in list(range(0, 12)) + list(range(120, 136)) + list(range(244, 256)) + \
            [int(e) for e in rng.integers(0, 256, 40)]:
        for d in (-2, -1, 0, 1, 2):
            eb = ea + d
            if not 0 <= eb <= 255:
                continue
            for _ in range(4):
                ma = man()
                # equal, nearly equal (a few ULPs apart) or unrelated significands
                mb = [ma, (ma + int(rng.integers(-3, 4))) % (1 << 23), man(),
                      int(rng.integers(0, 16))][int(rng.integers(0, 4))]
                sa = sign()
                sb = sa ^ (1 << 31) if rng.random() < 0.8 else sa   # mostly subtractions
                put(sa | ea << 23 | ma, sb | eb << 23 | mb)
    # a subnormal (DAZ: a zero) against the smallest normals, either order and sign
    for _ in range(300):
        sub_ = sign() | int(rng.integers(1, 1 << 23))
        norm = sign() | int(rng.integers(1, 3)) << 23 | int(rng.integers(0, 1 << 23)) >> \
            int(rng.integers(0, 24))
        if rng.integers(0, 2):
            put(sub_, norm)
        else:
            put(norm, sub_)
    # Inf and NaN against Inf, NaN, zeros, normals of either sign
    others = [0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001, 0x7F800001, 0x00000000,
              0x80000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x00000001]
    for x in others:
        for y in others:
            put(x, y)
    return a, b


@pytest.mark.parametrize("stages", [3, 4])
def test_near_path_vs_golden(stages):
    a, b = _pairs(np.random.default_rng(2026_12_02 + stages))
    want = fp32_add(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)).astype(np.uint32)
    dut = FP32Adder(stages=stages)
    got = []

    async def tb(ctx):
        for k in range(len(a) + stages):
            if k < len(a):
                ctx.set(dut.a, a[k])
                ctx.set(dut.b, b[k])
            await ctx.tick()
            if k >= stages - 1 and len(got) < len(a):
                got.append(ctx.get(dut.o))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    bad = [(hex(x), hex(y), hex(g), hex(int(w)))
           for x, y, g, w in zip(a, b, got, want) if g != int(w)]
    assert len(got) == len(a)
    assert not bad, f"{len(bad)} of {len(a)} mismatches (a, b, got, want), first: {bad[:4]}"
