"""cocotb tests of the registered stream stage (rtl/bus/pipeline_register.py): every beat out
once and in order under seeded random valid/ready patterns (idle, back-pressure, both,
none), every output compared each cycle with a model written from the docstring (``i.ready``
only from the stage's own state, latency 1, ``o`` stable while it waits), full rate at full
throughput, and a long stall."""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common import stream_stage
from rtl.bus.pipeline_register import PipelineRegister

WIDTH = 24


class _RegisterModel:
    """The stage as its docstring states it: ``i.ready`` is the complement of the skid
    register's flag; ``o`` is the output register; at an edge where the output register is
    free (empty or taken) it loads the skid register's beat, else the beat offered on ``i``;
    otherwise a beat taken on ``i`` goes into the skid register."""

    def __init__(self):
        self.out = None
        self.skid = None

    def expect(self, offered):
        return (self.skid is None, self.out is not None, self.out,
                self.out is not None or self.skid is not None)

    def edge(self, offered, i_ready, o_ready):
        taken = offered if i_ready else None
        if self.out is None or o_ready:
            if self.skid is not None:
                self.out, self.skid = self.skid, None
            else:
                self.out = taken
        elif taken is not None:
            self.skid = taken


@cocotb.test()
async def test_patterns(dut):
    """Random traffic with idle and back-pressure mixes: all beats out once, in order; 300
    beats at full rate in 301 cycles (latency 1)."""
    await stream_stage.run_patterns(dut, _RegisterModel, 301)


@cocotb.test()
async def test_stall_then_release(dut):
    """o.ready low for a long time: two beats are held (output and skid), i.ready stays low;
    on release they leave in order and i.ready rises."""
    await stream_stage.start(dut)
    dut.i__valid.value = 1
    dut.i__payload.value = 0x111
    await ReadOnly()
    assert dut.i__ready.value == 1 and dut.o__valid.value == 0
    await RisingEdge(dut.clk)                  # 0x111 into the output register
    dut.i__payload.value = 0x222
    await ReadOnly()
    assert dut.i__ready.value == 1 and int(dut.o__payload.value) == 0x111
    await RisingEdge(dut.clk)                  # 0x222 into the skid register
    dut.i__payload.value = 0x333
    await stream_stage.expect_held(dut, 0x111, 10)
    await stream_stage.expect_release(dut, 0x111, 0x222)
    await RisingEdge(dut.clk)                  # 0x333 taken
    dut.i__valid.value = 0
    await ReadOnly()
    assert int(dut.o__payload.value) == 0x333 and dut.o__valid.value == 1
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.o__valid.value == 0 and dut.full.value == 0


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_pipeline_register(simulator):
        run_cocotb(lambda: PipelineRegister(WIDTH), name="pipeline_register",
                   config={"width": WIDTH},
                   test_module="cocotb_tests.test_pipeline_register", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
