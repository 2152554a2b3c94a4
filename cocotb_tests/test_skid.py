"""cocotb tests of the skid buffer (rtl/bus/skid.py): every beat out once and in order under
seeded random valid/ready patterns (idle, back-pressure, both, none), ``i.ready`` only a
function of the buffer's own state (a cycle-by-cycle model written from the docstring),
zero latency while ``o`` is ready, and ``o`` stable while it waits."""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common import stream_stage
from cocotb_tests.common.streams import StreamMonitor
from rtl.bus.skid import SkidBuffer

WIDTH = 24


class _SkidModel:
    """The skid buffer as its docstring states it: ``i.ready`` is the complement of the skid
    flag (never a function of ``o.ready``); ``o`` is the skid register's beat, else ``i``'s
    (zero latency); a beat offered while ``o`` is not ready goes into the skid register."""

    def __init__(self):
        self.skid = None

    def expect(self, offered):
        full = self.skid is not None
        out = self.skid if full else offered
        return (not full, out is not None, out, full)

    def edge(self, offered, i_ready, o_ready):
        if self.skid is not None:
            if o_ready:
                self.skid = None
        elif offered is not None and not o_ready:
            self.skid = offered


@cocotb.test()
async def test_patterns(dut):
    """Random traffic with idle and back-pressure mixes: all beats out once, in order; 300
    beats at full rate in 300 cycles."""
    await stream_stage.run_patterns(dut, _SkidModel, 300)


@cocotb.test()
async def test_stall_then_release(dut):
    """o.ready low for a long time: exactly one extra beat is taken, then i.ready stays low;
    on release the skid beat leaves first."""
    await stream_stage.start(dut)
    dut.i__valid.value = 1
    dut.i__payload.value = 0x111
    await ReadOnly()
    assert dut.i__ready.value == 1 and dut.o__valid.value == 1
    await RisingEdge(dut.clk)                  # 0x111 taken into the skid
    dut.i__payload.value = 0x222
    await stream_stage.expect_held(dut, 0x111, 10)
    await stream_stage.expect_release(dut, 0x111, 0x222)


@cocotb.test()
async def test_stream_monitor_sees_violations(dut):
    """The shared StreamMonitor (cocotb_tests/common/streams.py) reports a source that changes
    its payload or drops valid before the beat is taken, and nothing on a stable stream."""
    await stream_stage.start(dut)
    dut.i__valid.value = 1
    dut.i__payload.value = 0x111
    await RisingEdge(dut.clk)                  # 0x111 into the skid: i.ready low from now on
    mon_i, mon_o = StreamMonitor(dut, "i"), StreamMonitor(dut, "o")
    dut.i__payload.value = 0x222
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.i__payload.value = 0x333              # changed while waiting: a violation
    await RisingEdge(dut.clk)
    dut.i__valid.value = 0                    # dropped before it was taken: a violation
    for _ in range(2):
        await RisingEdge(dut.clk)
    mon_i.stop()
    mon_o.stop()
    mon_o.check()                              # o held 0x111 the whole time
    assert mon_o.beats == 0
    try:
        mon_i.check()
    except AssertionError as exc:
        text = str(exc)
    else:
        raise AssertionError("the monitor missed both violations")
    assert "payload changed from 0x222 to 0x333" in text, text
    assert "valid dropped before the beat 0x333 was taken" in text, text


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_skid(simulator):
        run_cocotb(lambda: SkidBuffer(WIDTH), name="skid", config={"width": WIDTH},
                   test_module="cocotb_tests.test_skid", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
