"""The SBUF's shared write port (rtl/core/sbuf.py), Amaranth simulator.

Random writers (random address, partition mask, data, start probability and hold) compete for
the one write port; a golden dict model applies exactly the writes that were taken (mask and
``ready`` both 1 at a clock edge), in the order they were taken. Checked every cycle: at most
one write is taken, one is taken whenever any is requested (no idle cycle under contention),
a writer alone is ready, a waiting writer is served within ``writers - 1`` grants of others,
every requested word holds the model's value (a refused write must not reach the memory), and
at the end the whole memory, through a read port, equals the model. Every write carries
unique data, so a lost or duplicated write cannot hide.
"""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from amaranth_tb import send_commands, simulate, tick_until
from rtl.core.sbuf import SBUF

P, DEPTH = 4, 16


class Harness(wiring.Component):
    def __init__(self, writers):
        self.sbuf = SBUF(P, DEPTH, read_ports=("dbg",), write_ports=writers)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.sbuf = self.sbuf
        return m


def _run(seed, writers, start_prob, cycles=600, withdraw=0.0):
    """Drive ``writers`` (names) with per-writer start probabilities ``start_prob``; return
    the per-writer count of taken writes and the longest wait (cycles) of a held request."""
    rng = random.Random(seed)
    dut = Harness(writers)
    sb = dut.sbuf
    ports = [getattr(sb, f"w_{n}") for n in writers]
    init_model = {(p, a): 0 for p in range(P) for a in range(DEPTH)}
    model = dict(init_model)
    stats = {"taken": [0] * len(writers), "max_wait": 0, "cycles": 0}
    tag = [0]

    def new_write(i):
        tag[0] += 1
        mask = rng.choice([(1 << P) - 1, rng.randrange(1, 1 << P), 1 << rng.randrange(P)])
        # Unique data: writer, running tag and a random part.
        data = [(i << 28 | tag[0] << 12 | rng.randrange(1 << 12)) & 0xFFFFFFFF
                for _ in range(P)]
        return {"addr": rng.randrange(DEPTH), "mask": mask, "data": data, "wait": 0}

    async def bench(ctx):
        pending = [None] * len(writers)
        for cyc in range(cycles):
            for i, port in enumerate(ports):
                if pending[i] is not None and rng.random() < withdraw:
                    pending[i] = None                     # allowed: the arbiter keeps no state
                if pending[i] is None and rng.random() < start_prob[i]:
                    pending[i] = new_write(i)
                w = pending[i]
                if w is None:
                    # Idle writer: mask 0, garbage address and data (must not be written).
                    ctx.set(port.mask, 0)
                    ctx.set(port.addr, rng.randrange(DEPTH))
                    for p in range(P):
                        ctx.set(port.data[p], rng.randrange(1 << 32))
                else:
                    ctx.set(port.mask, w["mask"])
                    ctx.set(port.addr, w["addr"])
                    for p in range(P):
                        ctx.set(port.data[p], w["data"][p])
            sampled = await ctx.tick().sample(*[port.ready for port in ports])
            ready = [int(r) for r in sampled[2:]]
            req = [w is not None for w in pending]
            taken = [i for i in range(len(writers)) if req[i] and ready[i]]
            requested = [w for w in pending if w is not None]
            assert len(taken) <= 1, f"seed {seed} cycle {cyc}: two writes taken {taken}"
            if any(req):
                assert len(taken) == 1, f"seed {seed} cycle {cyc}: requests {req}, none taken"
            for i in range(len(writers)):
                if req[i] and sum(req) == 1:
                    assert ready[i], f"seed {seed} cycle {cyc}: writer {i} alone not ready"
            for i in taken:
                w = pending[i]
                for p in range(P):
                    if w["mask"] >> p & 1:
                        model[p, w["addr"]] = w["data"][p]
                stats["taken"][i] += 1
                pending[i] = None
            for i, w in enumerate(pending):
                if w is not None:
                    w["wait"] += 1
                    stats["max_wait"] = max(stats["max_wait"], w["wait"])
                    assert w["wait"] <= len(writers) - 1, \
                        f"seed {seed} cycle {cyc}: writer {i} waited {w['wait']} cycles"
            # Every word a request pointed at (taken or not) holds the model's value.
            for w in requested:
                for p in range(P):
                    got = ctx.get(sb.memories[p].data[w["addr"]])
                    assert got == model[p, w["addr"]], \
                        f"seed {seed} cycle {cyc}: part {p} addr {w['addr']} {got:#x}"
        for port in ports:
            ctx.set(port.mask, 0)
        # Whole memory through the read port (latency 1: data after the edge that saw addr).
        ctx.set(sb.r_dbg.en, 1)
        for a in range(DEPTH):
            ctx.set(sb.r_dbg.addr, a)
            await ctx.tick()
            for p in range(P):
                got = ctx.get(sb.r_dbg.data[p])
                assert got == model[p, a], f"seed {seed}: part {p} addr {a}: {got:#x}"
        stats["cycles"] = cycles

    simulate(dut, bench)
    return stats


@pytest.mark.parametrize("seed", range(4))
def test_two_writers_random(seed):
    """DMA-like and vector-like writers with random request rates and masks."""
    rng = random.Random(seed)
    probs = [rng.choice([0.3, 0.6, 0.9]), rng.choice([0.3, 0.6, 0.9])]
    stats = _run(seed, ("dma", "vector"), probs)
    assert min(stats["taken"]) > 0


def test_two_writers_every_cycle():
    """Both write every cycle: they alternate, one write per cycle in all, neither starves."""
    cycles = 400
    stats = _run(10, ("dma", "vector"), [1.0, 1.0], cycles=cycles)
    assert sum(stats["taken"]) == cycles
    assert abs(stats["taken"][0] - stats["taken"][1]) <= 1
    assert stats["max_wait"] == 1


def test_one_writer_full_rate():
    """A writer alone keeps one write per cycle whatever the arbiter's turn."""
    cycles = 200
    stats = _run(11, ("dma", "vector"), [1.0, 0.0], cycles=cycles)
    assert stats["taken"] == [cycles, 0] and stats["max_wait"] == 0
    stats = _run(12, ("only",), [1.0], cycles=cycles)
    assert stats["taken"] == [cycles]


@pytest.mark.parametrize("seed", range(2))
def test_three_writers_with_withdrawal(seed):
    """Round robin over three writers; requests sometimes withdrawn before being taken."""
    stats = _run(20 + seed, ("a", "b", "c"), [0.8, 0.5, 1.0], withdraw=0.1)
    assert min(stats["taken"]) > 0


# ---- the vector controller's write path under SBUF back-pressure ----------------------------

LANES, COLS, VDEPTH, PDEPTH = 4, 2, 64, 16
OPBITS = 24          # the behavioural engine's instruction: n | b_en << 16


class VectorHarness(wiring.Component):
    """VectorController + SBUF whose write port is shared with a competing writer ``x``."""

    def __init__(self, init):
        from rtl.core.vector_ctrl import VectorController
        self.ctrl = VectorController(LANES, COLS, VDEPTH, PDEPTH, OPBITS)
        self.sbuf = SBUF(LANES, VDEPTH, read_ports=("a", "b"), write_ports=("x", "v"),
                         init=init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = c = self.ctrl
        m.submodules.sbuf = self.sbuf
        wiring.connect(m, c.a_sbuf, self.sbuf.r_a)
        wiring.connect(m, c.b_sbuf, self.sbuf.r_b)
        wiring.connect(m, c.o_sbuf, self.sbuf.w_v)
        return m


@pytest.mark.parametrize("seed, contend", [(1, 0.5), (2, 0.9), (3, 1.0)])
def test_vector_ctrl_output_backpressure(seed, contend):
    """Elementwise ``a + b`` commands: every output beat lands once at its address although a
    competing writer (probability ``contend`` per cycle, words 48..63) takes the SBUF write
    port in many of the cycles the engine offers a beat."""
    from rtl.core.vector_ctrl import KIND_ENGINE
    rng = random.Random(seed)
    init = [[rng.randrange(1 << 32) for _ in range(VDEPTH)] for _ in range(LANES)]
    dut = VectorHarness(init)
    ctrl, sb = dut.ctrl, dut.sbuf
    cmds = []
    for k in range(8):
        n = rng.randint(1, 6)
        b_en = rng.randint(0, 1)
        cmds.append(dict(kind=KIND_ENGINE, scalar=0, op=n | b_en << 16, n=n, a_psum=0,
                         a_addr=rng.randrange(8), a_stride=rng.choice([1, 2]), b_en=b_en,
                         b_addr=rng.randrange(8), b_stride=1, o_n=n,
                         o_addr=rng.randrange(16, 26), o_stride=rng.choice([1, 3]),
                         parts=rng.randint(1, LANES), sem=k, sem_en=1))
    model = {(p, a): init[p][a] for p in range(LANES) for a in range(VDEPTH)}
    got = {"done": [], "x_taken": 0, "v_stalled": 0}

    async def feed(ctx):
        await send_commands(ctx, ctrl.cmd, cmds)

    async def take(ctx, s):
        ctx.set(s.ready, 1)
        while True:
            _, _, v, d = await ctx.tick().sample(s.valid, s.payload)
            if v:
                ctx.set(s.ready, 0)
                return d

    async def engine(ctx):
        # Commands complete in order and their outputs use disjoint words only within one
        # command, so the model applies each command's outputs in order.
        for c in cmds:
            op = int(await take(ctx, ctrl.e_cmd))
            n, b_en = op & 0xFFFF, op >> 16 & 1
            ctx.set(ctrl.e_idle, 0)
            outs = []
            for _ in range(n):
                a = [int(x) for x in await take(ctx, ctrl.e_a)]
                b = [int(x) for x in await take(ctx, ctrl.e_b)] if b_en else [0] * LANES
                outs.append([(x + y) & 0xFFFFFFFF for x, y in zip(a, b)])
            for j, o in enumerate(outs):
                for i in range(LANES):
                    ctx.set(ctrl.e_o.payload[i], o[i])
                ctx.set(ctrl.e_o.valid, 1)
                while True:
                    _, _, r = await ctx.tick().sample(ctrl.e_o.ready)
                    if r:
                        break
                    got["v_stalled"] += 1
                ctx.set(ctrl.e_o.valid, 0)
                for p in range(c["parts"]):
                    model[p, (c["o_addr"] + j * c["o_stride"]) % VDEPTH] = o[p]
                if rng.random() < 0.3:
                    await ctx.tick()
            ctx.set(ctrl.e_idle, 1)

    async def contender(ctx):
        w = None
        while True:
            if w is None and rng.random() < contend:
                w = (rng.randrange(48, VDEPTH), rng.randrange(1, 1 << LANES),
                     [rng.randrange(1 << 32) for _ in range(LANES)])
            ctx.set(sb.w_x.mask, 0 if w is None else w[1])
            if w is not None:
                ctx.set(sb.w_x.addr, w[0])
                for p in range(LANES):
                    ctx.set(sb.w_x.data[p], w[2][p])
            _, _, r = await ctx.tick().sample(sb.w_x.ready)
            if w is not None and r:
                for p in range(LANES):
                    if w[1] >> p & 1:
                        model[p, w[0]] = w[2][p]
                got["x_taken"] += 1
                w = None

    async def mon(ctx):
        async for _, _, done, sem in ctx.tick().sample(ctrl.done, ctrl.done_sem):
            if done:
                got["done"].append(sem)

    async def wait(ctx):
        await tick_until(ctx, lambda: len(got["done"]) == len(cmds) and not ctx.get(ctrl.busy),
                         3000, lambda: f"seed {seed}: {len(got['done'])} done")
        # Stop the contender after its pending write (if any) lands: wait a few cycles.
        for _ in range(4):
            await ctx.tick()
        got["sbuf"] = {(p, a): ctx.get(sb.memories[p].data[a])
                       for p in range(LANES) for a in range(VDEPTH)}
    simulate(dut, wait, background=(feed, engine, contender, mon))

    bad = [(k, hex(v), hex(model[k])) for k, v in got["sbuf"].items() if v != model[k]]
    assert not bad, f"seed {seed}: {bad[:6]}"
    assert got["done"] == list(range(len(cmds))), f"seed {seed}"
    assert got["v_stalled"] > 0 and got["x_taken"] > 0, got
