"""CoreCounters (``rtl/core/counters.py``) against a cycle model written from its docstring: a
fake sequencer debug port whose counters move at random, random starts, clears and activity."""

import random

import pytest

from rtl.core.counters import DEBUG_SAMPLES, CoreCounters

from amaranth_tb import simulate

M32 = 0xFFFFFFFF


class Model:
    def __init__(self):
        self.cycles = 0
        self.busy = {"tensor": 0, "vector": 0, "dma": 0}
        self.dsel = 0
        self.dvals = [0, 0, 0, 0]
        self.seq_wait = 0
        self.sem_wait = self.instret_base = self.sem_wait_base = 0
        self.instret = self.sem_wait_out = 0

    def tick(self, i, dbg_data):
        if i["start"] or i["clear"]:
            self.cycles = 0
            self.busy = dict.fromkeys(self.busy, 0)
        elif i["running"]:
            self.cycles += 1
            for k in self.busy:
                self.busy[k] = (self.busy[k] + i[k + "_busy"]) & M32
        self.instret = (self.dvals[0] - self.instret_base) & M32
        self.sem_wait_out = (self.sem_wait - self.sem_wait_base) & M32
        if i["start"]:
            self.instret_base = self.sem_wait_base = 0
        elif i["clear"]:
            self.instret_base, self.sem_wait_base = self.dvals[0], self.sem_wait
        self.sem_wait = (self.dvals[1] + self.dvals[2] + self.dvals[3]) & M32
        if self.dsel:
            self.seq_wait = int(dbg_data != self.dvals[self.dsel])
        self.dvals[self.dsel] = dbg_data
        self.dsel = (self.dsel + 1) % 4


@pytest.mark.parametrize("seed", [1, 2])
def test_counters_random(seed):
    dut = CoreCounters()
    model = Model()
    rng = random.Random(seed)
    # The fake sequencer's counters behind its debug port.
    seq = {a: rng.getrandbits(32) for a in DEBUG_SAMPLES}
    moved = {"seq_wait": 0, "clear": 0}

    async def main(ctx):
        for cycle in range(2000):
            i = {"start": int(rng.random() < 0.01), "clear": int(rng.random() < 0.02),
                 "running": int(rng.random() < 0.8), "tensor_busy": rng.getrandbits(1),
                 "vector_busy": rng.getrandbits(1), "dma_busy": rng.getrandbits(1)}
            for name, value in i.items():
                ctx.set(getattr(dut, name), value)
            addr = ctx.get(dut.dbg_addr)
            assert addr == DEBUG_SAMPLES[model.dsel], f"seed {seed} cycle {cycle}: dbg_addr"
            data = seq.get(addr, 0)
            ctx.set(dut.dbg_data, data)
            want = {"cycles": model.cycles, "tensor_cycles": model.busy["tensor"],
                    "vector_cycles": model.busy["vector"], "dma_cycles": model.busy["dma"],
                    "instret": model.instret, "sem_wait": model.sem_wait_out,
                    "seq_wait": model.seq_wait}
            for name, value in want.items():
                got = ctx.get(getattr(dut, name))
                assert got == value, f"seed {seed} cycle {cycle}: {name} {got} != {value}"
            moved["seq_wait"] += model.seq_wait
            moved["clear"] += i["clear"]
            model.tick(i, data)
            await ctx.tick()
            for a in seq:
                if rng.random() < 0.2:
                    seq[a] = (seq[a] + 1) & M32

    simulate(dut, main)
    assert all(moved.values()), moved
