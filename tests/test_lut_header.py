"""LutHeader (rtl/vector/lut_header.py): the active bank's header, registered."""

import random

from amaranth.sim import Simulator

from rtl.vector.lut_header import LutHeader
from sim.vector import ONE_F32, RangeMode


def _expected(bank):
    mode = RangeMode(bank["mode"]) if bank["mode"] in iter(RangeMode) else None
    flags = {r.name.lower(): int(mode == r) for r in RangeMode if r != RangeMode.NONE}
    return dict(
        s1_mode=bank["mode"], s1_is=flags,
        s1_sq=int(mode in (RangeMode.RSQRT, RangeMode.SQRT, RangeMode.LOG)),
        fin_scaled=int(mode in (RangeMode.EXP2, RangeMode.RSQRT, RangeMode.SQRT,
                                RangeMode.RECIP)),
        fin_recip=int(mode == RangeMode.RECIP), fin_log=int(mode == RangeMode.LOG),
        pre_q=bank["pre"], post_q=bank["post"], s2_e_lo=bank["e_lo"],
        s2_hi_neg=bank["e_lo"] + bank["nb_neg"], s2_hi_pos=bank["e_lo"] + bank["nb_pos"])


def test_lut_header():
    """Random headers and bank choices: outputs one enabled cycle later from the chosen bank,
    held while ``en`` is low; ``pre_q`` is 1.0 after reset."""
    dut = LutHeader()
    rng = random.Random(5)

    async def bench(ctx):
        assert ctx.get(dut.pre_q) == ONE_F32 and ctx.get(dut.post_q) == 0
        prev = None
        for step in range(200):
            banks = [dict(mode=rng.randrange(8), e_lo=rng.randrange(256),
                          nb_neg=rng.randrange(33), nb_pos=rng.randrange(33),
                          pre=rng.randrange(1 << 32), post=rng.randrange(1 << 32))
                     for _ in range(2)]
            for i, b in enumerate(banks):
                for f, v in b.items():
                    ctx.set(getattr(dut.banks[i], f), v)
            sel, en = rng.randrange(2), rng.random() < 0.7
            ctx.set(dut.bank, sel)
            ctx.set(dut.en, en)
            await ctx.tick()
            if en:
                prev = dict(_expected(banks[sel]), s2_bank=sel)
            if prev is None:
                continue
            for f, v in prev.items():
                got = ctx.get(getattr(dut, f))
                if f == "s1_is":
                    assert {k: getattr(got, k) for k in v} == v, (step, f)
                else:
                    assert got == v, (step, f, got, v)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
