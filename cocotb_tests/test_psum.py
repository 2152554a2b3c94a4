"""cocotb tests of ``rtl.tensor.psum.PSUM`` against ``sim.tensor.PsumModel`` (bit-exact).

A writer drives groups of beats (overwrite or accumulate, FP32 or INT32, random addresses,
random idles); every ``sync`` beats it waits for ``idle`` and reads back the whole memory
through the ``rd`` port (with random gaps in ``en``) and compares it with the model. Hazard
tests accumulate repeatedly into the same words with groups shorter than the adder pipeline.
"""

import random

import numpy as np

import cocotb

from cocotb_tests.common.psum_readback import readback
from cocotb_tests.common.streams import StreamSource
from cocotb_tests.common.tb import logged_seed, pack_lanes
from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from sim import formats
from sim.dtypes import Format
from sim.tensor import PsumModel


def _values(rng, cols, is_int, mode):
    if is_int:
        return rng.integers(0, 1 << 32, size=cols, dtype=np.uint64).astype(np.uint32)
    if mode == "wide":
        return rng.integers(0, 1 << 32, size=cols, dtype=np.uint64).astype(np.uint32)
    v = rng.standard_normal(cols) * 2.0 ** rng.integers(-10, 10, size=cols)
    out = formats.f32_bits(v)
    if mode == "special":
        sp = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                       0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32)
        pick = rng.random(cols) < 0.3
        out = np.where(pick, rng.choice(sp, size=cols), out)
    return out.astype(np.uint32)


_MODEL = None


class Tb:
    def __init__(self, dut):
        self.dut = dut
        cfg = dut_config()
        self.cols, self.depth, self.abits = cfg["cols"], cfg["depth"], cfg["abits"]
        # The memory is not reset between the tests of one simulation: share one model.
        global _MODEL
        if _MODEL is None:
            _MODEL = PsumModel(self.cols, self.depth)
        self.model = _MODEL
        self.beats = 0
        self.cycles = 0
        self.stalls = 0

    async def start(self):
        start_clock(self.dut)
        self.dut.wr__valid.value = 0
        self.dut.wr_int.value = 0
        self.dut.rd__en.value = 0
        self.dut.rd__addr.value = 0
        await reset(self.dut)

    def payload(self, data, addr, acc, last):
        c = self.cols
        return (pack_lanes(data, 32) | (addr << (32 * c)) | (int(acc) << (32 * c + self.abits))
                | (int(last) << (32 * c + self.abits + 1)))

    async def write_group(self, rnd, rng, addr, n, acc, is_int, mode, idle_p):
        """``n`` beats at ``addr..addr+n-1``; returns the number of cycles ready was low."""
        vals = np.stack([_values(rng, self.cols, is_int, mode) for _ in range(n)], axis=1)
        src = StreamSource(self.dut, "wr", rng=rnd, idle_p=idle_p)
        for i in range(n):
            a = (addr + i) % self.depth
            await src.send(self.payload(vals[:, i], a, acc, i == n - 1), wr_int=int(is_int))
        self.cycles += src.cycles
        self.stalls += src.stall_cycles
        self.model.write(addr, vals, acc, Format.INT32 if is_int else Format.FP32)
        self.beats += n

    async def readback(self, rnd, gap_p=0.3):
        """Wait for idle, read every word with random gaps in ``en``, compare with the model."""
        return await readback(self.dut, self.model, rnd, gap_p)


@cocotb.test()
async def test_random_groups(dut):
    """Random groups: overwrite/accumulate, FP32/INT32, special values, random idles."""
    seed = logged_seed(dut)
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    tb = Tb(dut)
    await tb.start()
    for round_ in range(3):
        for _ in range(10):
            n = rnd.randint(1, tb.depth // 2)
            await tb.write_group(rnd, rng, rnd.randrange(tb.depth), n, rnd.random() < 0.6,
                                 rnd.random() < 0.4, rnd.choice(["normal", "special", "wide"]),
                                 idle_p=rnd.choice([0.0, 0.3]))
        bad = await tb.readback(rnd)
        assert not bad, f"seed {seed}, round {round_}: {len(bad)} words differ:\n" + \
            "\n".join(bad[:8])
    dut._log.info(f"seed {seed}: {tb.beats} beats bit-exact, {tb.stalls} hazard stalls")


@cocotb.test()
async def test_accumulation_groups(dut):
    """The tensor engine's pattern: a group overwrites a region, then several groups accumulate
    into it back to back; one beat per cycle when groups are longer than the adder pipeline."""
    seed = logged_seed(dut, 1)
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    tb = Tb(dut)
    await tb.start()
    stages = dut_config()["add_stages"]
    n = max(stages + 1, 8)
    start_stalls = tb.stalls
    for is_int in (False, True):
        base = rnd.randrange(tb.depth)
        for g in range(4):
            await tb.write_group(rnd, rng, base, n, g > 0, is_int, "normal", 0.0)
    assert tb.stalls == start_stalls, f"{tb.stalls - start_stalls} stalls with n={n} >= stages"
    bad = await tb.readback(rnd)
    assert not bad, f"seed {seed}: " + "\n".join(bad[:8])


@cocotb.test()
async def test_hazards(dut):
    """Short accumulating groups into the same words (read-after-write hazards) stay exact."""
    seed = logged_seed(dut, 2)
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    tb = Tb(dut)
    await tb.start()
    for _ in range(40):
        n = rnd.randint(1, 3)
        await tb.write_group(rnd, rng, rnd.randrange(4), n, rnd.random() < 0.8,
                             rnd.random() < 0.5, "normal", 0.0)
    bad = await tb.readback(rnd)
    assert not bad, f"seed {seed}: " + "\n".join(bad[:8])
    dut._log.info(f"seed {seed}: {tb.beats} beats, {tb.stalls} hazard stalls")


try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("cols,depth,banks,add_stages", [(4, 32, 2, 3), (8, 16, 1, 0)])
    def test_psum(simulator, cols, depth, banks, add_stages):
        def make():
            from rtl.tensor.psum import PSUM
            return PSUM(cols, depth, banks=banks, add_stages=add_stages)
        cfg = {"cols": cols, "depth": depth, "banks": banks, "add_stages": add_stages,
               "abits": (depth - 1).bit_length()}
        run_cocotb(make, name=f"psum_{cols}x{depth}_s{add_stages}", config=cfg,
                   test_module="cocotb_tests.test_psum", simulator=simulator)
