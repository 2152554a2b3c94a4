"""The tensor controller + SBUF against a behavioural tensor engine (Amaranth simulator).

The engine model here follows docs/interfaces.md section 6 (stationary tile of M beats, moving
group of N beats, result N beats); products are plain integers so that addresses, masks,
strides, PSUM tags and back-pressure are what is tested, not arithmetic.
"""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from amaranth_tb import send_commands, simulate, tick_until
from rtl.core.sbuf import SBUF
from rtl.core.tensor_ctrl import TensorController

ROWS, COLS, DEPTH, PDEPTH = 4, 4, 64, 64


class Harness(wiring.Component):
    def __init__(self, init):
        self.ctrl = TensorController(ROWS, COLS, DEPTH, PDEPTH, done_delay=1)
        self.sbuf = SBUF(ROWS, DEPTH, read_ports=("stat", "mov"), write_ports=(), init=init)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = self.ctrl
        m.submodules.sbuf = self.sbuf
        wiring.connect(m, self.ctrl.stat_rd, self.sbuf.r_stat)
        wiring.connect(m, self.ctrl.mov_rd, self.sbuf.r_mov)
        return m


def _rand_cmd(rng):
    return dict(fmt=6, k=rng.randint(1, ROWS), m=rng.randint(1, COLS), n=rng.randint(1, 9),
                stat_addr=rng.randrange(DEPTH), stat_stride=rng.choice([1, 2, DEPTH - 1]),
                mov_addr=rng.randrange(DEPTH), mov_stride=rng.choice([1, 3]) ,
                psum_addr=rng.randrange(PDEPTH), accumulate=rng.randint(0, 1),
                sem=rng.randrange(16), sem_en=int(rng.random() < 0.75))


def _expect(init, c):
    stat = [[init[r][(c["stat_addr"] + j * c["stat_stride"]) % DEPTH] & 0xFFFF
             if r < c["k"] else 0 for r in range(ROWS)] for j in range(c["m"])]
    mov = [[init[r][(c["mov_addr"] + j * c["mov_stride"]) % DEPTH] & 0xFFFF
            if r < c["k"] else 0 for r in range(ROWS)] for j in range(c["n"])]
    res = []
    for j in range(c["n"]):
        col = [sum(stat[mm][r] * mov[j][r] for r in range(ROWS)) & 0xFFFFFFFF
               if mm < c["m"] else 0 for mm in range(COLS)]
        res.append(((c["psum_addr"] + j) % PDEPTH, c["accumulate"], col, j == c["n"] - 1))
    return stat, mov, res


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tensor_ctrl_random(seed):
    rng = random.Random(seed)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(ROWS)]
    dut = Harness(init)
    ctrl = dut.ctrl
    cmds = [_rand_cmd(rng) for _ in range(12)]
    exp = [_expect(init, c) for c in cmds]
    got = {"stat": [], "mov": [], "psum": [], "done": [], "last_at": [], "done_at": []}

    async def feed(ctx):
        await send_commands(ctx, ctrl.cmd, cmds, gap=lambda: rng.randint(0, 3))

    async def engine(ctx):
        # Behavioural engine: take a whole stationary tile, then stream moving -> result.
        for _ in cmds:
            tile = []
            while True:
                ctx.set(ctrl.stationary.ready, rng.random() < 0.7)
                _, _, v, r, d, last = await ctx.tick().sample(
                    ctrl.stationary.valid, ctrl.stationary.ready,
                    ctrl.stationary.p.data, ctrl.stationary.p.last)
                if v and r:
                    tile.append([int(x) for x in d])
                    if last:
                        break
            ctx.set(ctrl.stationary.ready, 0)
            got["stat"].append(tile)
            movs = []
            while True:
                ctx.set(ctrl.moving.ready, rng.random() < 0.7)
                _, _, v, r, d, last = await ctx.tick().sample(
                    ctrl.moving.valid, ctrl.moving.ready, ctrl.moving.p.data, ctrl.moving.p.last)
                if v and r:
                    movs.append([int(x) for x in d])
                    if last:
                        break
            ctx.set(ctrl.moving.ready, 0)
            got["mov"].append(movs)
            for j, mv in enumerate(movs):
                col = [sum(tile[mm][r] * mv[r] for r in range(ROWS)) & 0xFFFFFFFF
                       if mm < len(tile) else 0 for mm in range(COLS)]
                for x in range(COLS):
                    ctx.set(ctrl.result.p.data[x], col[x])
                ctx.set(ctrl.result.p.last, j == len(movs) - 1)
                ctx.set(ctrl.result.valid, 1)
                await ctx.tick().until(ctrl.result.ready)
                ctx.set(ctrl.result.valid, 0)

    async def sink(ctx):
        cycle = 0
        while True:
            cycle += 1
            ctx.set(ctrl.psum_wr.ready, rng.random() < 0.6)
            _, _, v, r, a, acc, d, last, done, sem = await ctx.tick().sample(
                ctrl.psum_wr.valid, ctrl.psum_wr.ready, ctrl.psum_wr.p.addr,
                ctrl.psum_wr.p.accumulate, ctrl.psum_wr.p.data, ctrl.psum_wr.p.last,
                ctrl.done, ctrl.done_sem)
            if v and r:
                got["psum"].append((a, acc, [int(x) for x in d], bool(last)))
                if last:
                    got["last_at"].append(cycle)
            if done:
                got["done"].append(sem)
                got["done_at"].append(cycle)

    async def wait(ctx):
        await tick_until(ctx, lambda: len(got["psum"]) == sum(c["n"] for c in cmds)
                         and not ctx.get(ctrl.busy), 3000,
                         lambda: f"seed {seed}: {len(got['psum'])} psum beats")
        for _ in range(3):
            await ctx.tick()
    simulate(dut, wait, foreground=(feed, engine), background=(sink,))

    assert got["stat"] == [e[0] for e in exp], f"seed {seed}"
    assert got["mov"] == [e[1] for e in exp], f"seed {seed}"
    assert got["psum"] == [x for e in exp for x in e[2]], f"seed {seed}"
    assert got["done"] == [c["sem"] for c in cmds if c["sem_en"]], f"seed {seed}"
    # Completion waits for PSUM: done_delay (1) cycles after PSUM accepted the last beat.
    want_at = [t + 1 for t, c in zip(got["last_at"], cmds) if c["sem_en"]]
    assert got["done_at"] == want_at, f"seed {seed}"


class PairHarness(wiring.Component):
    """Two controllers, each with SBUF and PSUM: PSUM with its combinational hazard compare
    (``lookahead=0``), and PSUM computing it a cycle ahead from ``psum_wr_next``
    (``lookahead=3``, as the core). Driven alike, they must agree in every cycle."""

    def __init__(self, init, add_stages):
        from rtl.tensor.psum import PSUM
        from sim.dtypes import Format
        self.units = []
        for la in (0, 3):
            psum = PSUM(COLS, PDEPTH, add_stages=add_stages, formats=(Format.INT32,),
                        lookahead=la)
            ctrl = TensorController(ROWS, COLS, DEPTH, PDEPTH, done_delay=psum.latency)
            sbuf = SBUF(ROWS, DEPTH, read_ports=("stat", "mov"), write_ports=(), init=init)
            self.units.append((ctrl, sbuf, psum))
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        for i, (ctrl, sbuf, psum) in enumerate(self.units):
            m.submodules[f"ctrl{i}"], m.submodules[f"sbuf{i}"] = ctrl, sbuf
            m.submodules[f"psum{i}"] = psum
            wiring.connect(m, ctrl.stat_rd, sbuf.r_stat)
            wiring.connect(m, ctrl.mov_rd, sbuf.r_mov)
            m.d.comb += [psum.wr.valid.eq(ctrl.psum_wr.valid),
                         psum.wr.payload.eq(ctrl.psum_wr.payload),
                         ctrl.psum_wr.ready.eq(psum.wr.ready),
                         psum.wr_int.eq(ctrl.psum_wr_int)]
            if psum.lookahead:
                m.d.comb += psum.wr_next.eq(ctrl.psum_wr_next)
        return m


@pytest.mark.parametrize("add_stages", [0, 1, 3])
@pytest.mark.parametrize("seed", [1, 2])
def test_tensor_ctrl_psum_lookahead(seed, add_stages):
    """Back-to-back accumulating beats into the same words and into words 1 .. latency beats
    apart, with result idles (a producer's stalls) and beats held on a hazard that clears
    while held: the lookahead PSUM accepts every beat in the same cycle as the combinational
    one, with the same data, the same ``done`` pulses and the same memory."""
    rng = random.Random(seed * 10 + add_stages)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(ROWS)]
    dut = PairHarness(init, add_stages)
    (c0, _, p0), (c1, _, p1) = dut.units
    cmds = []
    for _ in range(40):
        c = _rand_cmd(rng)
        c.update(psum_addr=rng.randrange(4), n=rng.randint(1, 5), accumulate=rng.random() < 0.8)
        cmds.append(c)
    stats = {"beats": 0, "hazard": 0, "held_clear": 0}

    async def feed(ctx):
        for c in cmds:
            for ctrl in (c0, c1):
                for k, v in c.items():
                    ctx.set(getattr(ctrl.cmd.p, k), v)
                ctx.set(ctrl.cmd.valid, 1)
            while True:
                _, _, r0, r1 = await ctx.tick().sample(c0.cmd.ready, c1.cmd.ready)
                assert r0 == r1, f"seed {seed}: cmd.ready differs"
                if r0:
                    break
            for ctrl in (c0, c1):
                ctx.set(ctrl.cmd.valid, 0)

    async def engine(ctx):
        # Both controllers see the same readies and results; one model answers for both.
        while True:
            sr, mr = rng.random() < 0.8, rng.random() < 0.8
            rv = rng.random() < 0.7
            data = [rng.randrange(1 << 32) for _ in range(COLS)]
            last = rng.random() < 0.3
            for ctrl in (c0, c1):
                ctx.set(ctrl.stationary.ready, sr)
                ctx.set(ctrl.moving.ready, mr)
                ctx.set(ctrl.result.valid, rv)
                ctx.set(ctrl.result.p.last, last)
                for x in range(COLS):
                    ctx.set(ctrl.result.p.data[x], data[x])
            await ctx.tick()

    async def check(ctx):
        cycle, held = 0, False
        while True:
            await ctx.tick()
            cycle += 1
            for a, b in ((c0.psum_wr.valid, c1.psum_wr.valid), (p0.wr.ready, p1.wr.ready),
                         (c0.done, c1.done), (c0.done_sem, c1.done_sem),
                         (c0.result.ready, c1.result.ready), (c0.busy, c1.busy),
                         (p0.idle, p1.idle)):
                assert ctx.get(a) == ctx.get(b), f"seed {seed}: cycle {cycle}: {a!r} differs"
            if ctx.get(c0.psum_wr.valid):
                assert ctx.get(c0.psum_wr.payload.as_value()) == \
                    ctx.get(c1.psum_wr.payload.as_value()), f"seed {seed}: cycle {cycle}"
                if ctx.get(p0.wr.ready):
                    stats["beats"] += 1
                    stats["held_clear"] += held
                    held = False
                else:
                    stats["hazard"] += 1
                    held = True

    async def wait(ctx):
        await ctx.tick().repeat(1500)
        for a in range(PDEPTH):
            for p in (p0, p1):
                ctx.set(p.rd.addr, a)
                ctx.set(p.rd.en, 1)
            await ctx.tick()
            assert ctx.get(p0.rd.data.as_value()) == ctx.get(p1.rd.data.as_value()), \
                f"seed {seed}: PSUM word {a} differs"
    simulate(dut, wait, foreground=(feed,), background=(engine, check))
    # Hazards are rare at latency 2 (a stall of one cycle at most).
    want = 1 if add_stages == 0 else 3
    assert stats["beats"] > 60 and stats["hazard"] >= want and stats["held_clear"] >= want, stats
