"""cocotb tests of the skid buffer (rtl/bus/skid.py): every beat out once and in order under
seeded random valid/ready patterns (idle, back-pressure, both, none), ``i.ready`` only a
function of the buffer's own state (a cycle-by-cycle model written from the docstring),
zero latency while ``o`` is ready, and ``o`` stable while it waits."""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from rtl.bus.skid import SkidBuffer

WIDTH = 24


async def _run(dut, rng, n, p_valid, p_ready):
    """Offer ``n`` random beats (a stream source: valid held until taken), take them with a
    random ``o.ready``; return (sent, received)."""
    mask = (1 << dut_config()["width"]) - 1
    sent, got = [], []
    beats = [rng.getrandbits(64) & mask for _ in range(n)]
    k = 0
    full = False                 # the model: the skid register holds a beat
    skid = None
    offered = False
    dut.i__valid.value = 0
    dut.o__ready.value = 0
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
        o_payload = int(dut.o__payload.value)
        # The contract: i.ready is the complement of the skid flag, whatever o.ready is.
        assert i_ready == int(not full), f"cycle {cycles}: i.ready {i_ready}, skid full {full}"
        assert int(dut.full.value) == int(full)
        exp_valid = full or offered
        assert o_valid == int(exp_valid), f"cycle {cycles}: o.valid {o_valid}"
        if exp_valid:
            exp = skid if full else beats[k]          # zero latency when the skid is empty
            assert o_payload == exp, f"cycle {cycles}: o.payload {o_payload:#x}, want {exp:#x}"
        if prev_o is not None:
            assert (o_valid, o_payload) == prev_o, \
                f"cycle {cycles}: o changed while valid and not ready"
        prev_o = (o_valid, o_payload) if (o_valid and not ready) else None
        # Advance the model one clock edge.
        if o_valid and ready:
            got.append(o_payload)
        if full:
            if ready:
                full = False
        elif offered and not ready:
            full, skid = True, beats[k]
        if offered and i_ready:
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
            assert cycles == 300, f"full rate took {cycles} cycles for 300 beats"


@cocotb.test()
async def test_stall_then_release(dut):
    """o.ready low for a long time: exactly one extra beat is taken, then i.ready stays low;
    on release the skid beat leaves first."""
    start_clock(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await reset(dut)
    dut.i__valid.value = 1
    dut.i__payload.value = 0x111
    dut.o__ready.value = 0
    await ReadOnly()
    assert dut.i__ready.value == 1 and dut.o__valid.value == 1
    await RisingEdge(dut.clk)                  # 0x111 taken into the skid
    dut.i__payload.value = 0x222
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


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_skid(simulator):
        run_cocotb(lambda: SkidBuffer(WIDTH), name="skid", config={"width": WIDTH},
                   test_module="cocotb_tests.test_skid", simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
