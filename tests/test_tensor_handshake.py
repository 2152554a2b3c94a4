"""The tensor engine's tile bookkeeping, cycle by cycle, against the protocol of its docstring
(Amaranth simulator): random stationary and moving traffic, ``moving_keep`` and result
back-pressure; ``stationary.ready`` and ``moving.ready`` must be exactly what the spec's
state (the two banks' ``full`` flags, the load and use pointers, the drain counters) gives in
every cycle, so a flag that rises a cycle late (e.g. a registered copy computed from the
wrong next state) fails here even where the data still comes out right."""

import random

import pytest

from amaranth_tb import simulate
from rtl.tensor.engine import TensorEngine
from sim.dtypes import Format


class BankModel:
    """docs/interfaces.md section 6 / the engine's docstring: a tile of up to ``cols`` beats
    loads into the free bank; a group streams through the loaded bank; the group's last beat
    (without ``moving_keep``) releases its bank, which may be reloaded ``drain`` advancing
    cycles later."""

    def __init__(self, cols, drain):
        self.cols, self.drain = cols, drain
        self.full, self.hold = [0, 0], [0, 0]
        self.load_bank = self.use_bank = self.ptr = 0

    def readies(self, en):
        lb, ub = self.load_bank, self.use_bank
        return int(not self.full[lb] and self.hold[lb] == 0), int(en and self.full[ub])

    def step(self, en, st_take, st_last, mv_take, mv_last, keep):
        lb, ub = self.load_bank, self.use_bank
        if st_take:
            if st_last or self.ptr == self.cols - 1:
                self.ptr, self.full[lb], self.load_bank = 0, 1, lb ^ 1
            else:
                self.ptr += 1
        for b in range(2):
            if en and self.hold[b]:
                self.hold[b] -= 1
        if mv_take and mv_last and not keep:
            self.full[ub], self.hold[ub], self.use_bank = 0, self.drain, ub ^ 1


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("add_stages", [1, 3])
def test_tensor_bank_handshake(seed, add_stages):
    rng = random.Random(seed * 7 + add_stages)
    dut = TensorEngine(2, 3, {Format.INT8}, mul_stages=1, add_stages=add_stages)
    model = BankModel(3, dut.drain)
    stats = {"st": 0, "mv": 0, "release": 0}

    async def main(ctx):
        for cycle in range(3000):
            # Phases of heavy and light traffic, so that banks fill, drain and wait.
            busy = (cycle // 200) % 2 == 0
            st_valid = rng.random() < (0.9 if busy else 0.3)
            st_last = rng.random() < 0.3
            mv_valid = rng.random() < (0.9 if busy else 0.5)
            mv_last = rng.random() < 0.25
            keep = rng.random() < 0.2
            res_ready = rng.random() < 0.7
            ctx.set(dut.stationary.valid, st_valid)
            ctx.set(dut.stationary.p.last, st_last)
            ctx.set(dut.moving.valid, mv_valid)
            ctx.set(dut.moving.p.last, mv_last)
            ctx.set(dut.moving_keep, keep)
            ctx.set(dut.result.ready, res_ready)
            en = (not ctx.get(dut.result.valid)) or res_ready
            want = model.readies(en)
            got = (ctx.get(dut.stationary.ready), ctx.get(dut.moving.ready))
            assert got == want, (f"seed {seed}: cycle {cycle}: (stationary.ready, "
                                 f"moving.ready) = {got}, the spec gives {want}")
            st_take, mv_take = st_valid and got[0], mv_valid and got[1]
            stats["st"] += st_take
            stats["mv"] += mv_take
            rel = mv_take and mv_last and not keep
            stats["release"] += rel
            model.step(en, st_take, st_last, mv_take, mv_last, keep)
            await ctx.tick()

    simulate(dut, main)
    assert stats["st"] > 500 and stats["mv"] > 500 and stats["release"] > 100, stats
