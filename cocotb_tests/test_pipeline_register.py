"""cocotb tests of the registered stream stage (rtl/bus/pipeline_register.py): every beat out
once and in order under seeded random valid/ready patterns (idle, back-pressure, both,
none), every output compared each cycle with a model written from the docstring (``i.ready``
only from the stage's own state, latency 1, ``o`` stable while it waits), full rate at full
throughput, and a long stall."""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from rtl.bus.pipeline_register import PipelineRegister

WIDTH = 24


async def _run(dut, rng, n, p_valid, p_ready):
    """Offer ``n`` random beats (a stream source: valid held until taken), take them with a
    random ``o.ready``; return (sent, received, cycles)."""
    mask = (1 << dut_config()["width"]) - 1
    sent, got = [], []
    beats = [rng.getrandbits(64) & mask for _ in range(n)]
    k = 0
    out = None                   # the model: the output register's beat, or None
    skid = None                  # the skid register's beat, or None
    offered = False
    prev_o = None
    cycles = 0
    while len(got) < n:
        cycles += 1
        assert cycles < 20 * n + 100, f"stuck: {len(got)} of {n} beats out"
        if not offered and k < n and rng.random() < p_valid:
            offered = True
        dut.i__valid.value = int(offered)
        dut.i__payload.value = beats[k] if offered else rng.getrandbits(WIDTH) & mask
        ready = rng.random() < p_ready
        dut.o__ready.value = int(ready)
        await ReadOnly()
        i_ready = int(dut.i__ready.value)
        o_valid = int(dut.o__valid.value)
        # The payload is only defined while valid (the output register loads ``i`` when empty).
        o_payload = int(dut.o__payload.value) if o_valid else None
        assert i_ready == int(skid is None), f"cycle {cycles}: i.ready {i_ready}, skid {skid}"
        assert int(dut.full.value) == int(out is not None or skid is not None)
        assert o_valid == int(out is not None), f"cycle {cycles}: o.valid {o_valid}"
        if out is not None:
            assert o_payload == out, f"cycle {cycles}: o.payload {o_payload:#x}, want {out:#x}"
        if prev_o is not None:
            assert (o_valid, o_payload) == prev_o, \
                f"cycle {cycles}: o changed while valid and not ready"
        prev_o = (o_valid, o_payload) if (o_valid and not ready) else None
        # Advance the model one clock edge.
        taken = offered and i_ready
        if o_valid and ready:
            got.append(o_payload)
        if out is None or ready:
            if skid is not None:
                out, skid = skid, None
            else:
                out = beats[k] if offered else None
        elif taken:
            skid = beats[k]
        if taken:
            sent.append(beats[k])
            k += 1
            offered = False
        await RisingEdge(dut.clk)
    dut.i__valid.value = 0
    dut.o__ready.value = 1
    return sent, got, cycles


@cocotb.test()
async def test_patterns(dut):
    """Random traffic with idle and back-pressure mixes: all beats out once, in order."""
    start_clock(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await reset(dut)
    rng = random.Random(cocotb.RANDOM_SEED)
    for p_valid, p_ready in ((1.0, 1.0), (1.0, 0.3), (0.3, 1.0), (0.5, 0.5), (1.0, 0.9),
                             (0.9, 0.1)):
        sent, got, cycles = await _run(dut, rng, 300, p_valid, p_ready)
        assert got == sent, f"valid {p_valid} ready {p_ready}: order or content differs"
        if p_valid == 1.0 and p_ready == 1.0:
            assert cycles == 301, f"full rate took {cycles} cycles for 300 beats (latency 1)"
        for _ in range(3):                     # drain whatever the model still holds
            await RisingEdge(dut.clk)


@cocotb.test()
async def test_stall_then_release(dut):
    """o.ready low for a long time: two beats are held (output and skid), i.ready stays low;
    on release they leave in order and i.ready rises."""
    start_clock(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await reset(dut)
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
    for _ in range(10):
        await ReadOnly()
        assert dut.i__ready.value == 0 and dut.o__valid.value == 1
        assert int(dut.o__payload.value) == 0x111
        await RisingEdge(dut.clk)
    dut.o__ready.value = 1
    await ReadOnly()
    assert int(dut.o__payload.value) == 0x111 and dut.i__ready.value == 0
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.o__payload.value) == 0x222 and dut.i__ready.value == 1
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
