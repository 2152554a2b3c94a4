"""cocotb tests of ``rtl.round.prng.LanePrngs`` against ``sim.prng`` over a long stream.

Every cycle the test compares every lane's ``out`` with the golden next word, then advances a
random subset of lanes; it re-seeds at random times with random seeds (sometimes again while
the previous re-seed is still busy, which must restart it) and checks that ``busy`` lasts
exactly ``6 * lanes + 6`` cycles (docs/rounding.md: the seeding hash has six pipeline stages)
and that the streams restart as ``sim.prng.lane_states`` says.
"""

import cocotb
from cocotb.triggers import FallingEdge

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import seeded_rng
from cocotb_tests.common.tb import unpack_lanes
from sim.prng import STATE_WORDS, lane_states, xorwow_step

#: Documented (docs/rounding.md): re-seeding keeps ``busy`` for 6 * lanes + this many cycles.
SEED_PIPELINE = 6


def _out(dut, lanes):
    return unpack_lanes(dut.out.value.to_unsigned(), 32, lanes)


def _peek(state):
    return xorwow_step(list(state))


@cocotb.test()
async def long_stream_with_reseeds(dut):
    cfg = dut_config()
    lanes, cycles = cfg["lanes"], cfg["cycles"]
    seed_pipeline = SEED_PIPELINE
    rng = seeded_rng(dut)
    dut._log.info(f"{cycles} cycles, {lanes} lanes")
    start_clock(dut)
    dut.seed.value = 0
    dut.seed_load.value = 0
    dut.advance.value = 0
    await reset(dut)
    states = lane_states(lanes, 0)       # reset state: seed 0
    checked = 0
    reseeds = 0
    restarts = 0
    busy_left = 0
    await FallingEdge(dut.clk)
    for cyc in range(cycles):
        if busy_left:
            assert dut.busy.value == 1, f"cycle {cyc}: busy dropped early"
            busy_left -= 1
            dut.seed_load.value = 0
            dut.advance.value = (1 << lanes) - 1        # must be ignored while busy
            # Re-seed again (restarts): once at a fixed point with hash words in flight, then
            # at random.
            if (restarts == 0 and busy_left == seed_pipeline + 1) or rng.random() < 0.01:
                seed = rng.getrandbits(32)
                dut.seed.value = seed
                dut.seed_load.value = 1
                states = lane_states(lanes, seed)
                busy_left = STATE_WORDS * lanes + seed_pipeline
                restarts += 1
            await FallingEdge(dut.clk)
            continue
        assert dut.busy.value == 0, f"cycle {cyc}: busy"
        got = _out(dut, lanes)
        exp = [_peek(s) for s in states]
        assert got == exp, f"cycle {cyc}: lanes {got} expected {exp}"
        checked += lanes
        if rng.random() < 0.002:
            seed = rng.getrandbits(32)
            dut.seed.value = seed
            dut.seed_load.value = 1
            dut.advance.value = rng.getrandbits(lanes)
            states = lane_states(lanes, seed)
            busy_left = STATE_WORDS * lanes + seed_pipeline
            reseeds += 1
            dut._log.info(f"cycle {cyc}: re-seed 0x{seed:08x}")
        else:
            mask = rng.getrandbits(lanes) if rng.random() < 0.5 else (1 << lanes) - 1
            dut.seed_load.value = 0
            dut.advance.value = mask
            for i in range(lanes):
                if mask >> i & 1:
                    xorwow_step(states[i])
        await FallingEdge(dut.clk)
    dut._log.info(f"{checked} words bit-exact, {reseeds} re-seeds, {restarts} restarts while busy")
    assert (reseeds > 0 and restarts > 0) or cycles < 2000


# ---------------------------------------------------------------------------------------------
try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    def _run(simulator, lanes, cycles):
        from rtl.round.prng import LanePrngs
        run_cocotb(lambda: LanePrngs(lanes), name=f"prng_l{lanes}",
                   config={"lanes": lanes, "cycles": cycles},
                   test_module="cocotb_tests.test_prng", simulator=simulator)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_prng(simulator):
        _run(simulator, 4, 6000)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_prng_two_lanes(simulator):
        _run(simulator, 2, 6000)

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_prng_long(simulator):
        _run(simulator, 8, 200_000)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
