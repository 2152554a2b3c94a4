"""cocotb tests of the error status block (rtl/core/status.py): first error wins and stays
until the host clears it, lowest source index wins a tie, reports are counted, code 0 is
ignored, clear and report in the same cycle, DONE/START, the interrupt line and the STATUS word;
directed cases then a seeded random sweep against a model written from the docstring."""

import cocotb
from cocotb.triggers import RisingEdge, ReadOnly

from sim.errors import ErrorCode
from sim.memmap import STATUS_BUSY, STATUS_DONE, STATUS_ERROR, STATUS_IRQ
from rtl.core.status import ErrorStatus
from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.axi_transport import settle_comb
from cocotb_tests.common.streams import seeded_rng

REPORT_BITS = 1 + 4 + 32 + 32


class Model:
    def __init__(self):
        self.error = self.code = self.addr = self.info = self.count = 0
        self.done_flag = self.irq = 0

    def outputs(self, busy):
        status = (busy * STATUS_BUSY) | (self.done_flag * STATUS_DONE) | \
            (self.error * STATUS_ERROR) | (self.irq * STATUS_IRQ)
        return dict(error=self.error, code=self.code, addr=self.addr, info=self.info,
                    count=self.count, done_flag=self.done_flag, irq=self.irq, status=status)

    def cycle(self, reports, done, start, clear, irq_enable):
        valid = [r for r in reports if r and r[0] != 0]
        new_irq = (self.done_flag & irq_enable & 1) | (self.error & (irq_enable >> 1) & 1)
        if clear:
            self.error = self.code = self.addr = self.info = self.count = 0
            self.done_flag = 0
        if start:
            self.done_flag = 0
        if done:
            self.done_flag = 1
        if valid:
            self.count = min(self.count + len(valid), (1 << 32) - 1)
            if not self.error:
                self.error = 1
                self.code, self.addr, self.info = valid[0]
        self.irq = new_irq


def _pack(reports):
    word = 0
    for k, r in enumerate(reports):
        if r is not None:
            code, addr, info = r
            word |= (1 | code << 1 | addr << 5 | info << 37) << (REPORT_BITS * k)
    return word


async def _setup(dut):
    for name in ("report", "done", "start", "clear", "busy", "irq_enable"):
        getattr(dut, name).value = 0
    await settle_comb(dut)
    start_clock(dut)
    await reset(dut)


async def _drive(dut, model, reports=(), done=0, start=0, clear=0, irq_enable=0, busy=0):
    n = dut_config()["sources"]
    reports = (list(reports) + [None] * n)[:n]
    dut.report.value = _pack(reports)
    dut.done.value = done
    dut.start.value = start
    dut.clear.value = clear
    dut.irq_enable.value = irq_enable
    dut.busy.value = busy
    await ReadOnly()
    got = {k: int(getattr(dut, k).value) for k in model.outputs(busy)}
    exp = model.outputs(busy)
    assert got == exp, f"reports={reports} done={done} start={start} clear={clear}: " \
                       f"got {got}, expected {exp}"
    model.cycle(reports, done, start, clear, irq_enable)
    await RisingEdge(dut.clk)
    return got


@cocotb.test()
async def test_directed(dut):
    await _setup(dut)
    m = Model()
    n = dut_config()["sources"]
    W, A = int(ErrorCode.DMA_WINDOW), int(ErrorCode.DMA_AXI_READ)
    await _drive(dut, m)
    # Tie: the lowest index wins; both are counted.
    reps = [None] * n
    reps[n - 1] = (A, 0x10, 2)
    if n > 1:
        reps[1] = (W, 0x20, 7)
    await _drive(dut, m, reps, irq_enable=3)
    out = await _drive(dut, m, irq_enable=3)
    assert out["error"] == 1 and out["code"] == (W if n > 1 else A)
    assert out["count"] == min(n, 2)
    out = await _drive(dut, m, irq_enable=3)
    assert out["irq"] == 1
    # A later error is counted, not latched; code 0 is ignored.
    await _drive(dut, m, [(int(ErrorCode.WATCHDOG), 0, 99), (0, 5, 5)], irq_enable=3)
    out = await _drive(dut, m, irq_enable=3)
    assert out["code"] == (W if n > 1 else A) and out["count"] == min(n, 2) + 1
    # Sticky across START; only clear removes it.
    await _drive(dut, m, start=1, irq_enable=3)
    out = await _drive(dut, m, irq_enable=3)
    assert out["error"] == 1
    # Clear and a new report in the same cycle: the new one is latched.
    await _drive(dut, m, [(int(ErrorCode.CALL_STACK), 0x44, 3)], clear=1, irq_enable=3)
    out = await _drive(dut, m, irq_enable=3)
    assert (out["code"], out["addr"], out["count"]) == (int(ErrorCode.CALL_STACK), 0x44, 1)
    await _drive(dut, m, clear=1)
    out = await _drive(dut, m)
    assert out["error"] == 0 and out["count"] == 0
    # DONE raises the interrupt only when enabled.
    await _drive(dut, m, done=1)
    out = await _drive(dut, m)
    out = await _drive(dut, m, irq_enable=1)
    assert out["done_flag"] == 1 and out["irq"] == 0
    out = await _drive(dut, m, irq_enable=1)
    assert out["irq"] == 1 and out["status"] & STATUS_IRQ
    await _drive(dut, m, start=1, irq_enable=1)
    await _drive(dut, m, irq_enable=1)
    out = await _drive(dut, m, irq_enable=1, busy=1)
    assert out["irq"] == 0 and out["status"] == STATUS_BUSY


@cocotb.test()
async def test_random(dut):
    rng = seeded_rng(dut)
    await _setup(dut)
    m = Model()
    n = dut_config()["sources"]
    irq_enable = 0
    for _ in range(int(dut_config().get("cycles", 3000))):
        reps = [((rng.randrange(16), rng.getrandbits(32), rng.getrandbits(32))
                 if rng.random() < 0.03 else None) for _ in range(n)]
        if rng.random() < 0.02:
            irq_enable = rng.randrange(4)
        await _drive(dut, m, reps, done=int(rng.random() < 0.03),
                     start=int(rng.random() < 0.02), clear=int(rng.random() < 0.03),
                     irq_enable=irq_enable, busy=rng.randrange(2))


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("sources", [4, 1])
    def test_status(simulator, sources):
        run_cocotb(lambda: ErrorStatus(sources), name=f"status_s{sources}",
                   config={"sources": sources},
                   test_module="cocotb_tests.test_watchdog_status", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
