"""A driver for cocotb tests of one-input, one-output stream stages (``i``, ``o``, ``full``):
random valid/ready traffic, every output checked each cycle against a model of the stage.

A model is an object with ``expect(offered)`` -> ``(i_ready, o_valid, o_payload, full)`` for
the present cycle (``offered``: the beat on ``i`` or None; ``o_payload`` None when not
valid) and ``edge(offered, i_ready, o_ready)``, which advances it one clock edge. Used by
``test_skid.py`` and ``test_pipeline_register.py``.
"""

from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import seeded_rng

__all__ = ["PATTERNS", "start", "drive", "run_patterns", "expect_held", "expect_release"]

#: (p_valid, p_ready): full rate, back-pressure, idle source, both, light and heavy stalls.
PATTERNS = ((1.0, 1.0), (1.0, 0.3), (0.3, 1.0), (0.5, 0.5), (1.0, 0.9), (0.9, 0.1))


async def start(dut):
    """Start the clock and reset the stage with ``i`` idle and ``o`` not ready."""
    start_clock(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await reset(dut)


async def expect_held(dut, payload, cycles):
    """For ``cycles`` cycles (``o.ready`` low): ``i.ready`` low, ``o`` valid with ``payload``."""
    for _ in range(cycles):
        await ReadOnly()
        assert dut.i__ready.value == 0 and dut.o__valid.value == 1
        assert int(dut.o__payload.value) == payload
        await RisingEdge(dut.clk)


async def expect_release(dut, first, second):
    """Raise ``o.ready`` on a full stage: ``first`` leaves with ``i.ready`` still low, then
    ``second`` is on ``o`` and ``i.ready`` is high."""
    dut.o__ready.value = 1
    await ReadOnly()
    assert int(dut.o__payload.value) == first and dut.i__ready.value == 0
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.o__payload.value) == second and dut.i__ready.value == 1


async def drive(dut, model, rng, n, p_valid, p_ready):
    """Offer ``n`` random beats (a stream source: valid held until taken), take them with a
    random ``o.ready``, compare every cycle with ``model``; return (sent, received, cycles).
    Also checks that ``o`` stays put while it is valid and not ready."""
    mask = (1 << dut_config()["width"]) - 1
    sent, got = [], []
    beats = [rng.getrandbits(64) & mask for _ in range(n)]
    k = 0
    offered = False
    prev_o = None
    cycles = 0
    while len(got) < n:
        cycles += 1
        assert cycles < 20 * n + 100, f"stuck: {len(got)} of {n} beats out"
        if not offered and k < n and rng.random() < p_valid:
            offered = True
        beat = beats[k] if offered else None
        dut.i__valid.value = int(offered)
        dut.i__payload.value = beat if offered else rng.getrandbits(64) & mask
        ready = rng.random() < p_ready
        dut.o__ready.value = int(ready)
        await ReadOnly()
        i_ready = int(dut.i__ready.value)
        o_valid = int(dut.o__valid.value)
        # The payload is only defined while valid.
        o_payload = int(dut.o__payload.value) if o_valid else None
        exp = model.expect(beat)
        got_now = (i_ready, o_valid, o_payload, int(dut.full.value))
        assert got_now == (int(exp[0]), int(exp[1]), exp[2], int(exp[3])), \
            f"cycle {cycles}: (i.ready, o.valid, o.payload, full) {got_now}, model {exp}"
        if prev_o is not None:
            assert (o_valid, o_payload) == prev_o, \
                f"cycle {cycles}: o changed while valid and not ready"
        prev_o = (o_valid, o_payload) if (o_valid and not ready) else None
        if o_valid and ready:
            got.append(o_payload)
        model.edge(beat, bool(i_ready), ready)
        if offered and i_ready:
            sent.append(beat)
            k += 1
            offered = False
        await RisingEdge(dut.clk)
    dut.i__valid.value = 0
    dut.o__ready.value = 1
    return sent, got, cycles


async def run_patterns(dut, make_model, full_rate_cycles):
    """Every pattern of :data:`PATTERNS` with a fresh model: all beats out once, in order;
    300 beats at full rate take ``full_rate_cycles`` cycles."""
    await start(dut)
    rng = seeded_rng(dut)
    for p_valid, p_ready in PATTERNS:
        sent, got, cycles = await drive(dut, make_model(), rng, 300, p_valid, p_ready)
        assert got == sent, f"valid {p_valid} ready {p_ready}: order or content differs"
        if p_valid == 1.0 and p_ready == 1.0:
            assert cycles == full_rate_cycles, \
                f"full rate took {cycles} cycles for 300 beats, not {full_rate_cycles}"
        for _ in range(3):                     # let the stage drain before the next pattern
            await RisingEdge(dut.clk)
