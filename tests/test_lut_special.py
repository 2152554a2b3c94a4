"""The LUT lane's special results (``rtl.vector.lut_special.LutSpecial``) on the Amaranth
simulator against ``sim.vector.lut_eval`` (pre-scale 1.0, so ``w = z``): for every range mode,
``special`` where the model's result is a special value (its region NAN) and ``sval`` equal to
the model's result there, over NaN, Inf, zeros, subnormals, the EXP2 range limit and random
values of both signs, with ``en`` low on random cycles."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.lut_special import LutSpecial
from sim.vector import LutState, RangeMode, Region, lut_eval

SEED = 20261134
EDGES = [0, 0x80000000, 0x00000010, 0x80000010, 0x7F800000, 0xFF800000, 0x7FC00000,
         0xFFC00001, 0x43000000, 0xC3000000, 0x42FFFFFF, 0xC2FFFFFF, 0x3F800000, 0xBF800000]


@pytest.mark.parametrize("mode", [r for r in RangeMode if r != RangeMode.NONE])
def test_special_vs_model(mode):
    rng = np.random.default_rng(SEED + int(mode))
    zs = EDGES + [int(rng.integers(0, 1 << 32)) for _ in range(150)]
    st = LutState(16)
    st.mode = int(mode)
    out, region = lut_eval(np.array(zs, dtype=np.uint32), st)
    dut = LutSpecial()
    bad = []

    async def bench(ctx):
        ctx.set(getattr(dut.s1_is, mode.name.lower()), 1)
        ctx.set(dut.s1_sq, int(mode in (RangeMode.RSQRT, RangeMode.SQRT, RangeMode.LOG)))
        for i, z in enumerate(zs):
            ctx.set(dut.w, z)
            ctx.set(dut.en, 1)
            await ctx.tick()
            # en low keeps the flags: a different w meanwhile changes nothing
            while rng.random() < 0.3:
                ctx.set(dut.en, 0)
                ctx.set(dut.w, int(rng.integers(0, 1 << 32)))
                await ctx.tick()
            ctx.set(dut.s1_sign, z >> 31)
            special = region[i] == Region.NAN
            got = ctx.get(dut.special)
            if got != special or (special and ctx.get(dut.sval) != int(out[i])):
                bad.append((hex(z), got, hex(ctx.get(dut.sval)), special, hex(int(out[i]))))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]
