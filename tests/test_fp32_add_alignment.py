"""The FP32 adder's far path (``rtl.arith.fp32_add``, combinational) against
``sim.formats.fp32_add`` on pairs built to exercise the sticky bit: exponent differences 0-30
(beyond the 27-bit clamp), the smaller operand's trailing zeros 0-23 (so that its lowest one
lands on either side of the round bit), both signs, both orders. The Amaranth simulator keeps
it quick; the cocotb tests (``cocotb_tests/test_arith_fp32_add.py``) cover the rest."""

import numpy as np
from amaranth.sim import Simulator

from rtl.arith.fp32_add import FP32Adder
from sim.formats import fp32_add


def _pairs(n, rng):
    a, b = [], []
    for _ in range(n):
        ea = int(rng.integers(1, 254))
        eb = max(1, ea - int(rng.integers(0, 31)))
        tz = int(rng.integers(0, 24))
        mb = (int(rng.integers(0, 1 << 23)) >> tz) << tz if tz < 23 else 0
        x = int(rng.integers(0, 2)) << 31 | ea << 23 | int(rng.integers(0, 1 << 23))
        y = int(rng.integers(0, 2)) << 31 | eb << 23 | mb
        if rng.integers(0, 2):
            x, y = y, x
        a.append(x)
        b.append(y)
    return a, b


def test_far_path_sticky_vs_golden():
    a, b = _pairs(2000, np.random.default_rng(2026_11_25))
    want = fp32_add(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)).astype(np.uint32)
    dut = FP32Adder(stages=0)
    got = []

    async def tb(ctx):
        for x, y in zip(a, b):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            await ctx.delay(1e-9)
            got.append(ctx.get(dut.o))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    bad = [(hex(x), hex(y), hex(g), hex(int(w)))
           for x, y, g, w in zip(a, b, got, want) if g != int(w)]
    assert not bad, f"{len(bad)} of {len(a)} mismatches, first: {bad[:4]}"
