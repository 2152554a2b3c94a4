"""The sequencer's engine dispatch (``rtl/control/dispatch.py``) in the Amaranth simulator
against a Python model: X's slot writes, EMITs (held while the queue is full or a checked
slot's write is pending) and random ``ready`` and completions on every engine, with stalls on
X; the streams carry each EMIT's record in order, and each completion increments the oldest
outstanding record's semaphore."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.control.dispatch import CHECKED_ENGINES, EngineDispatch
from rtl.control.micro_decode import ENGINES, NAMES
from sim import isa


def _sem_of(engine, record):
    offs = isa.field_offsets(isa.RECORDS[engine])
    if not record >> offs["sem_en"][0] & 1:
        return 0
    return 1 << (record >> offs["sem"][0] & ((1 << offs["sem"][1]) - 1))


@pytest.mark.parametrize("seed, depth, max_outstanding", [(1, 2, 4), (2, 1, 1), (3, 4, 2)])
def test_dispatch_model(seed, depth, max_outstanding):
    rng = random.Random(seed)
    dut = EngineDispatch(queue_depth=depth, max_outstanding=max_outstanding, check_terms=2)
    counts = {e: 0 for e in ENGINES}

    async def bench(ctx):
        slots = {e: {} for e in ENGINES}      # slot -> value, written since the last EMIT
        w = None                              # (engine, slot) whose value lands this cycle
        sent = {e: [] for e in ENGINES}       # pushed, not yet taken by the engine
        taken = {e: [] for e in ENGINES}      # [record, completion cycle], not completed
        op, hold = None, 0
        for cycle in range(1500):
            res_q = rng.getrandbits(32)
            if w is not None:
                slots[w[0]][w[1]] = res_q
            ctx.set(dut.res_q, res_q)
            clear = op is None and w is None and rng.random() < 0.01
            ctx.set(dut.clear, clear)
            if op is None and not clear:
                e = rng.choice(ENGINES)
                op = (rng.choice(["write", "write", "emit"]), e,
                      rng.randrange(isa.RECORD_SLOTS[e]))
                hold = rng.choice([0, 0, 1, 3])
            flags = {}
            go = push = False
            if op is not None:
                kind, e, slot = op
                name = NAMES[e]
                flags["slot_" + name if kind == "write" else "emit_" + name] = 1
                if kind == "write" and e in CHECKED_ENGINES and rng.random() < 0.5:
                    flags["slot_chk_" + name] = 1
                ready = ctx.get(dut.can_emit) >> e & 1 and not ctx.get(dut.chk_pend) >> e & 1
                go = hold == 0 and (kind == "write" or ready)
                push = go and kind == "emit"
                ctx.set(dut.slot, slot)
            ctx.set(dut.x_live, op is not None)
            ctx.set(dut.go, go)
            ctx.set(dut.flags.as_value(), sum(
                1 << i for i, f in enumerate(dut.flags.shape().members) if flags.get(f)))
            ctx.set(dut.push, push << op[1] if push else 0)
            for e in ENGINES:
                name = NAMES[e]
                stream = getattr(dut, name)
                ctx.set(stream.ready, rng.random() < 0.5)
                done = bool(taken[e]) and taken[e][0][1] <= cycle
                ctx.set(getattr(dut, name + "_done"), done)
                await ctx.delay(1e-9)
                assert ctx.get(stream.valid) == bool(sent[e]), (cycle, name)
                if sent[e]:
                    assert ctx.get(stream.payload.as_value()) == sent[e][0], (cycle, name)
                assert ctx.get(dut.outstanding) >> e & 1 == bool(sent[e] or taken[e]), cycle
                want = _sem_of(e, taken[e][0][0]) if done else 0
                assert ctx.get(getattr(dut, "inc_" + name)) == want, (cycle, name)
                if done:
                    taken[e].pop(0)
                if sent[e] and ctx.get(stream.ready):
                    last = taken[e][-1][1] if taken[e] else cycle
                    taken[e].append([sent[e].pop(0), max(last, cycle) + rng.randint(1, 8)])
            record = None
            if push:
                e = op[1]
                record = sum(v << 32 * s for s, v in slots[e].items())
                counts[e] += 1
            await ctx.tick()
            w = None
            if clear:
                slots = {e: {} for e in ENGINES}
            if go:
                kind, e, slot = op
                if kind == "write":
                    w = (e, slot)
                else:
                    slots[e] = {}
                    sent[e].append(record)
                op = None
            elif op is not None:
                hold = max(0, hold - 1)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert all(counts[e] > 20 for e in ENGINES), counts


def test_dispatch_parameters():
    with pytest.raises(ValueError, match="queue_depth must be an integer from 1 to 16, not 0"):
        EngineDispatch(queue_depth=0)
    with pytest.raises(TypeError, match="check_terms must be an integer, not None"):
        EngineDispatch(check_terms=None)
