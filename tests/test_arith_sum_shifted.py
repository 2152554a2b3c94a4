"""``rtl.arith.fp32_mul.sum_shifted`` (the multipliers' partial-product sum with short carry
chains) against Python integer sums, on the multipliers' own term layouts and on random ones
(disjoint terms sharing a row, terms past the width, all-ones operands for the carries)."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rtl.arith.fp32_mul import sum_shifted


def _check(spec, width, trials, seed):
    rng = random.Random(seed)
    m = Module()
    ins = [Signal(w, name=f"t{i}") for i, (w, _) in enumerate(spec)]
    out = Signal(width)
    m.d.comb += out.eq(sum_shifted(m, [(v, sh) for v, (_, sh) in zip(ins, spec)], width, "s"))
    sim = Simulator(m)

    async def bench(ctx):
        for t in range(trials):
            if t % 4 == 0:
                vals = [(1 << w) - 1 for w, _ in spec]          # every carry
            else:
                vals = [rng.getrandbits(w) for w, _ in spec]
            for sig, v in zip(ins, vals):
                ctx.set(sig, v)
            want = sum(v << sh for v, (_, sh) in zip(vals, spec)) % (1 << width)
            got = ctx.get(out)
            assert got == want, f"terms {spec} values {vals}: {got:#x}, not {want:#x}"

    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("spec, width", [
    ([(36, 0), (24, 18), (24, 18), (12, 36)], 48),    # FP32Multiplier: 24 x 24 in 18 x 18
    ([(30, 0), (36, 6), (24, 24)], 48),                # LaneMultiplier, logic_bits 6
    ([(8, 0), (8, 20)], 32),                           # disjoint: one row, no adder
    ([(8, 0), (8, 4), (4, 30)], 32),
    ([(10, 5), (10, 40)], 32),                         # a term past the width
])
def test_layouts(spec, width):
    _check(spec, width, trials=40, seed=width)


@pytest.mark.parametrize("seed", range(20))
def test_random_layouts(seed):
    rng = random.Random(seed)
    width = rng.randint(4, 60)
    spec = [(rng.randint(1, 30), rng.randint(0, width + 3)) for _ in range(rng.randint(1, 7))]
    _check(spec, width, trials=20, seed=seed)
