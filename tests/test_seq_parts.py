"""Parts of the sequencer (``rtl/control/sequencer.py``) on the Amaranth simulator: the
semaphore queue with a registered head (``_HeadFIFO``) against ``amaranth.lib.fifo.SyncFIFO``
cycle by cycle, and the LUT4 tree of the stall and error sums (``_or_tree``) against the plain
OR, with its first level at most four input bits per signal."""

import random

import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo
from amaranth.sim import Simulator

from rtl.control.sequencer import _HeadFIFO, _or_tree


@pytest.mark.parametrize("depth", [1, 2, 3, 8])
@pytest.mark.parametrize("p_write, p_read", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1.0, 1.0)])
def test_head_fifo_is_sync_fifo(depth, p_write, p_read):
    """Random writes and reads (the writer ignores ``w_rdy``, the reader ``r_rdy``, as the
    sequencer's push and the engines' done pulses may): ``level``, ``w_rdy`` and ``r_rdy``
    equal SyncFIFO's in every cycle and ``r_data`` while ``r_rdy`` (the head registered from
    the memory, or from the written word when that becomes the head)."""
    m = Module()
    m.submodules.ref = ref = fifo.SyncFIFO(width=8, depth=depth)
    m.submodules.dut = dut = _HeadFIFO(width=8, depth=depth)
    w_en, r_en, w_data = Signal(), Signal(), Signal(8)
    for f in (ref, dut):
        m.d.comb += [f.w_en.eq(w_en), f.r_en.eq(r_en), f.w_data.eq(w_data)]
    rng = random.Random(depth * 100 + int(10 * p_write) + int(p_read))
    seen = {"reads": 0, "heads": 0}

    async def bench(ctx):
        for cycle in range(3000):
            ctx.set(w_en, rng.random() < p_write)
            ctx.set(r_en, rng.random() < p_read)
            ctx.set(w_data, rng.getrandbits(8))
            for name in ("level", "w_rdy", "r_rdy"):
                got, want = ctx.get(getattr(dut, name)), ctx.get(getattr(ref, name))
                assert got == want, f"cycle {cycle}: {name} {got}, SyncFIFO {want}"
            if ctx.get(ref.r_rdy):
                got, want = ctx.get(dut.r_data), ctx.get(ref.r_data)
                assert got == want, f"cycle {cycle}: head {got:#x}, SyncFIFO {want:#x}"
                seen["heads"] += 1
                seen["reads"] += ctx.get(r_en)
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["reads"] > 300, seen


@pytest.mark.parametrize("widths, last", [((2,) * 9 + (3, 4), 3), ((2,) * 6 + (1,), 4),
                                          ((1,) * 5, 4), ((4, 4, 4, 4, 4, 2), 1)])
def test_or_tree(widths, last):
    """The OR of terms (each the AND of its flip-flops, ``widths`` bits) for random inputs;
    at most ``last`` signals returned; each first-level signal reads at most four bits."""
    m = Module()
    ins = [Signal(w, name=f"in{i}") for i, w in enumerate(widths)]
    terms = [x.all() for x in ins]
    top = _or_tree(m, "t", terms, last=last)
    assert len(top) <= last
    # (the first level's signals and what drives them, from the module's statements)
    level0 = [st for st in m._statements["comb"] if st.lhs.name.startswith("t_t0_")]
    assert level0, "no first-level signals"
    for st in level0:
        assert sum(len(x) for x in st.rhs._rhs_signals()) <= 4, st.lhs.name
    out = Signal()
    m.d.comb += out.eq(Cat(*top).any())
    rng = random.Random(len(widths))

    async def bench(ctx):
        for _ in range(400):
            vals = [rng.getrandbits(w) if rng.random() < 0.5 else (1 << w) - 1
                    for w in widths]
            for x, v in zip(ins, vals):
                ctx.set(x, v)
            want = any(v == (1 << w) - 1 for v, w in zip(vals, widths))
            assert ctx.get(out) == want, vals

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
