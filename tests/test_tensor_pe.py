"""One INT8 PE against a cycle model of its contract, ``psum_out = psum_in + w[x_bank] * x``
with ``mul_stages`` = ``row_delay`` = 1, the weight sampled from bank ``x_bank_in`` at the edge
that loads ``x_reg`` (rtl/tensor/pe.py), under random clock-enable stalls, bank switches and
weight writes to either bank (the one in use included, which reaches later values only)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.tensor.pe import ProcessingElement
from sim.dtypes import Format


def _s8(v):
    return (v & 0xFF) - ((v & 0x80) << 1)


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - ((v >> (bits - 1)) << bits)


@pytest.mark.parametrize("top", [False, True], ids=["row", "top"])
def test_int8_pe_cycle_model(top):
    dut = ProcessingElement({Format.INT8}, top=top)
    rng = random.Random(20261122 + top)
    seen = set()

    async def bench(ctx):
        x = xb = mul = last = wsel = 0
        w = [0, 0]
        for cycle in range(4000):
            en = int(rng.random() < 0.7)
            x_in, xb_in = rng.getrandbits(8), rng.getrandbits(1)
            we, wz, wd = rng.choice([0, 0, 0, 1, 2, 3]), int(rng.random() < 0.1), rng.getrandbits(8)
            psum_in = rng.getrandbits(32)
            ctx.set(dut.en, en)
            ctx.set(dut.x_in, x_in)
            ctx.set(dut.x_bank_in, xb_in)
            ctx.set(dut.w_we, we)
            ctx.set(dut.w_zero, wz)
            ctx.set(dut.w_data, wd)
            if not top:
                ctx.set(dut.psum_in, psum_in)
            assert ctx.get(dut.psum_out) == last & 0xFFFFFFFF, f"cycle {cycle}"
            seen.add(last)
            # The clock edge, in the model.
            p = _s8(wsel) * _s8(x)
            if en:
                last = mul if top else _s(_s(psum_in, 32) + mul, 32)
                mul, x, xb, wsel = p, x_in, xb_in, w[xb_in]
            for b in range(2):
                if we >> b & 1:
                    w[b] = 0 if wz else wd
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) > 1000                       # products and sums really varied
