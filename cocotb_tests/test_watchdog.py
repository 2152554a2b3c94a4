"""cocotb tests of the watchdog (rtl/core/watchdog.py): the exact limit boundary (a program of
exactly ``limit`` cycles survives, one more cycle times out), disabled watchdog, abort held
until start/clear, one timeout per start, counter saturation, and a seeded random sweep of
start/running/clear/limit compared cycle by cycle with a model written from the docstring."""

import cocotb
from cocotb.triggers import RisingEdge, ReadOnly

from rtl.core.watchdog import Watchdog
from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.axi_transport import settle_comb
from cocotb_tests.common.streams import seeded_rng


class Model:
    """The contract of ``Watchdog``'s docstring, one call per clock cycle."""

    def __init__(self, width):
        self.max = (1 << width) - 1
        self.count = 0
        self.fired = False
        self.abort = 0

    def cycle(self, limit, start, running, clear):
        timeout = int(running and not self.fired and limit != 0 and self.count >= limit)
        out = (self.count, timeout, self.abort)
        if start:
            self.count, self.fired, self.abort = 0, False, 0
        else:
            if running and self.count != self.max:
                self.count += 1
            if timeout:
                self.fired, self.abort = True, 1
            if clear:
                self.abort = 0
        return out


async def _setup(dut):
    for name in ("limit", "start", "running", "clear"):
        getattr(dut, name).value = 0
    await settle_comb(dut)
    start_clock(dut)
    await reset(dut)


async def _drive(dut, model, limit, start, running, clear):
    dut.limit.value = limit
    dut.start.value = start
    dut.running.value = running
    dut.clear.value = clear
    await ReadOnly()
    got = (int(dut.count.value), int(dut.timeout.value), int(dut.abort.value))
    exp = model.cycle(limit, start, running, clear)
    assert got == exp, f"inputs limit={limit} start={start} running={running} clear={clear}: " \
                       f"got (count, timeout, abort) {got}, expected {exp}"
    await RisingEdge(dut.clk)
    return got


@cocotb.test()
async def test_limit_boundary(dut):
    """Running exactly ``limit`` cycles never times out; ``limit + 1`` does, once, in the
    cycle after the ``limit``-th; abort then stays high until start or clear."""
    await _setup(dut)
    width = dut_config()["width"]
    model = Model(width)
    for limit in (1, 2, 5, min(37, (1 << width) - 1)):
        await _drive(dut, model, limit, 1, 0, 0)
        for _ in range(limit):
            _, t, a = await _drive(dut, model, limit, 0, 1, 0)
            assert not t and not a
        _, t, a = await _drive(dut, model, limit, 0, 0, 0)     # program ended in time
        assert not t and not a
        await _drive(dut, model, limit, 1, 0, 0)
        for k in range(limit):
            await _drive(dut, model, limit, 0, 1, 0)
        _, t, _ = await _drive(dut, model, limit, 0, 1, 0)
        assert t == 1, f"no timeout at cycle {limit + 1} with limit {limit}"
        for _ in range(5):                                    # one pulse only, abort held
            _, t, a = await _drive(dut, model, limit, 0, 1, 0)
            assert t == 0 and a == 1
        _, _, a = await _drive(dut, model, limit, 0, 0, 1)    # host clear drops abort
        _, _, a = await _drive(dut, model, limit, 0, 0, 0)
        assert a == 0
    # limit 0: disabled, however long the program runs.
    await _drive(dut, model, 0, 1, 0, 0)
    for _ in range(300):
        _, t, a = await _drive(dut, model, 0, 0, 1, 0)
        assert not t and not a


@cocotb.test()
async def test_random(dut):
    """Seeded random start/running/clear/limit for many cycles against the model."""
    rng = seeded_rng(dut)
    await _setup(dut)
    width = dut_config()["width"]
    model = Model(width)
    limit = 0
    timeouts = 0
    for cycle in range(int(dut_config().get("cycles", 4000))):
        if rng.random() < 0.01:
            limit = rng.choice([0, 1, 3, rng.randrange(1 << min(width, 7)), (1 << width) - 1])
        start = int(rng.random() < 0.01)
        running = int(rng.random() < 0.9)
        clear = int(rng.random() < 0.005)
        _, t, _ = await _drive(dut, model, limit, start, running, clear)
        timeouts += t
    dut._log.info("timeouts seen: %d", timeouts)
    assert timeouts > 0


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("width", [32, 4])
    def test_watchdog(simulator, width):
        run_cocotb(lambda: Watchdog(width), name=f"watchdog_w{width}", config={"width": width},
                   test_module="cocotb_tests.test_watchdog", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
