"""EngineReset (``rtl/core/engine_reset.py``): the engines' reset follows the abort, directly
or through the soft-reset flip-flop that the domain reset sets."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module

from rtl.core.engine_reset import EngineReset

from amaranth_tb import simulate


@pytest.mark.parametrize("engine", [False, True])
def test_engine_reset_random(engine):
    dut = EngineReset(engine)
    m = Module()
    m.submodules.dut = dut
    m.domains.sync = cd = ClockDomain()
    rng = random.Random(int(engine))

    async def main(ctx):
        ff = 1                                   # the flip-flop's reset value
        for cycle in range(500):
            reset = int(rng.random() < 0.05)
            aborting, nxt = rng.getrandbits(1), rng.getrandbits(1)
            ctx.set(cd.rst, reset)
            ctx.set(dut.aborting, aborting)
            ctx.set(dut.aborting_next, nxt)
            want = ff if engine else aborting
            assert ctx.get(dut.reset) == want, f"engine={engine} cycle {cycle}"
            await ctx.tick()
            ff = 1 if reset else nxt

    simulate(m, main)


def test_engine_reset_parameter():
    with pytest.raises(TypeError, match="engine must be a bool, not 1"):
        EngineReset(1)
