"""The vector controller + SBUF against a behavioural vector engine (Amaranth simulator).

The engine model takes the opaque instruction word, consumes ``n`` beats of ``a`` (and of ``b``),
and produces either ``a + b`` per beat (mod 2**32), one beat with the sum of ``a``, or nothing;
so operand addressing (SBUF and PSUM), output placement, partition masks, completion order and
back-pressure are what is tested.
"""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import memory, wiring

from amaranth_tb import send_commands, simulate, tick_until
from rtl.core.sbuf import SBUF
from rtl.core.vector_ctrl import (KIND_ENGINE, KIND_NOP, KIND_SEED, KIND_TABLE,
                                  VectorController)

LANES, COLS, DEPTH, PDEPTH = 4, 2, 64, 32
OPBITS = 24  # n[15:0] | b_en << 16 | mode << 17 (0: elementwise, 1: sum, 2: none)


class Harness(wiring.Component):
    def __init__(self, init, pinit):
        self.ctrl = VectorController(LANES, COLS, DEPTH, PDEPTH, OPBITS)
        self.sbuf = SBUF(LANES, DEPTH, read_ports=("a", "b", "dbg"), write_ports=("v",),
                         init=init)
        self.pinit = pinit
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = c = self.ctrl
        m.submodules.sbuf = self.sbuf
        wiring.connect(m, c.a_sbuf, self.sbuf.r_a)
        wiring.connect(m, c.b_sbuf, self.sbuf.r_b)
        wiring.connect(m, c.o_sbuf, self.sbuf.w_v)
        for p in range(COLS):
            mem = memory.Memory(shape=32, depth=PDEPTH, init=self.pinit[p])
            m.submodules[f"psum{p}"] = mem
            rp = mem.read_port()
            m.d.comb += [rp.addr.eq(c.a_psum.addr), rp.en.eq(c.a_psum.en),
                         c.a_psum.data[p].eq(rp.data)]
        return m


def _rand_cmd(rng):
    mode = rng.choice([0, 0, 1, 2])
    n = rng.randint(1, 6)
    c = dict(n=n, a_psum=rng.randint(0, 1), a_addr=rng.randrange(PDEPTH // 2),
             a_stride=rng.choice([1, 2]), b_en=rng.randint(0, 1) if mode == 0 else 0,
             b_addr=rng.randrange(DEPTH // 2 - 8), b_stride=1,
             o_n={0: n, 1: 1, 2: 0}[mode],
             # Outputs land in the upper half, operands come from the lower half: commands
             # overlap in the controller, so a read-after-write needs a semaphore (not tested).
             o_addr=rng.randrange(DEPTH // 2, DEPTH - 20), o_stride=rng.choice([1, 3]),
             parts=rng.randint(1, LANES), sem=rng.randrange(16), sem_en=rng.randint(0, 1))
    c["op"] = n | (c["b_en"] << 16) | (mode << 17)
    c["kind"] = KIND_ENGINE
    c["scalar"] = 0
    r = rng.random()
    if r < 0.15:      # TABLE: n words of partition 0 as (address, data) pairs
        c.update(kind=KIND_TABLE, n=2 * rng.randint(1, 3), a_psum=0, a_stride=1, b_en=0,
                 o_n=0, op=0)
    elif r < 0.25:
        c.update(kind=KIND_SEED, n=0, o_n=0, b_en=0, scalar=rng.randrange(1 << 32), op=0)
    elif r < 0.3:
        c.update(kind=KIND_NOP, n=0, o_n=0, b_en=0, op=0)
    return c


# Enough seeds that a TABLE's last word meets a stalled cfg (the streamer's lookahead).
@pytest.mark.parametrize("seed", range(1, 21))
def test_vector_ctrl_random(seed):
    rng = random.Random(seed)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(LANES)]
    pinit = [[rng.randrange(1 << 32) for _ in range(PDEPTH)] for _ in range(COLS)]
    dut = Harness(init, pinit)
    ctrl = dut.ctrl
    cmds = [_rand_cmd(rng) for _ in range(8)]
    got = {"done": [], "sent": False, "ran": 0}

    async def feed(ctx):
        await send_commands(ctx, ctrl.cmd, cmds, gap=lambda: rng.randint(0, 2))
        got["sent"] = True

    async def take(ctx, s):
        while True:
            ctx.set(s.ready, rng.random() < 0.7)
            _, _, v, r, d = await ctx.tick().sample(s.valid, s.ready, s.payload)
            if v and r:
                ctx.set(s.ready, 0)
                return d

    async def engine(ctx):
        for _ in [c for c in cmds if c["kind"] == KIND_ENGINE]:
            op = int(await take(ctx, ctrl.e_cmd))
            n, b_en, mode = op & 0xFFFF, (op >> 16) & 1, op >> 17
            ctx.set(ctrl.e_idle, 0)
            acc = [0] * LANES
            outs = []
            for _ in range(n):
                a = [int(x) for x in await take(ctx, ctrl.e_a)]
                b = [int(x) for x in await take(ctx, ctrl.e_b)] if b_en else [0] * LANES
                outs.append([(x + y) & 0xFFFFFFFF for x, y in zip(a, b)])
                acc = [(x + y) & 0xFFFFFFFF for x, y in zip(acc, a)]
            if mode == 1:
                outs = [acc]
            elif mode == 2:
                outs = []
            for o in outs:
                for i in range(LANES):
                    ctx.set(ctrl.e_o.payload[i], o[i])
                ctx.set(ctrl.e_o.valid, 1)
                await ctx.tick().until(ctrl.e_o.ready)
                ctx.set(ctrl.e_o.valid, 0)
            for _ in range(rng.randint(0, 2)):
                await ctx.tick()
            ctx.set(ctrl.e_idle, 1)
            got["ran"] += 1

    got["cfg"], got["seed"] = [], []

    async def mon(ctx):
        async for _, _, done, sem, sl, sd in ctx.tick().sample(ctrl.done, ctrl.done_sem,
                                                                ctrl.seed_load, ctrl.seed):
            if done:
                got["done"].append(sem)
            if sl:
                got["seed"].append(sd)

    async def cfg_sink(ctx):
        while True:
            ctx.set(ctrl.cfg.ready, rng.random() < 0.6)
            _, _, v, r, a, d, w = await ctx.tick().sample(
                ctrl.cfg.valid, ctrl.cfg.ready, ctrl.cfg.p.addr, ctrl.cfg.p.data,
                ctrl.cfg.p.write)
            if v and r:
                got["cfg"].append((a, d, w))

    async def wait(ctx):
        # Every command sent, every engine command run, every completion seen and the
        # controller idle (commands without a semaphore complete silently: waiting for the
        # completions alone checked SBUF before the last ones had run).
        n_engine = sum(c["kind"] == KIND_ENGINE for c in cmds)
        await tick_until(ctx, lambda: got["sent"] and got["ran"] == n_engine
                         and len(got["done"]) == sum(c["sem_en"] for c in cmds)
                         and not ctx.get(ctrl.busy), 2000,
                         lambda: f"seed {seed}: {len(got['done'])} done")
        for _ in range(3):
            await ctx.tick()
        # Model: apply every command in order on a copy of SBUF.
        sb = [list(r) for r in init]
        exp_cfg, exp_seed = [], []
        for c in cmds:
            if c["kind"] == KIND_TABLE:
                words = [sb[0][(c["a_addr"] + j) % DEPTH] for j in range(c["n"])]
                exp_cfg += [(words[j] & 0xFFFF, words[j + 1], 1)
                            for j in range(0, len(words), 2)]
                continue
            if c["kind"] == KIND_SEED:
                exp_seed.append(c["scalar"])
            if c["kind"] != KIND_ENGINE:
                continue
            src = pinit if c["a_psum"] else sb
            depth = PDEPTH if c["a_psum"] else DEPTH
            rows = COLS if c["a_psum"] else LANES
            a = [[src[p][(c["a_addr"] + j * c["a_stride"]) % depth]
                  if p < min(rows, c["parts"]) else 0 for p in range(LANES)]
                 for j in range(c["n"])]
            b = [[sb[p][(c["b_addr"] + j) % DEPTH] if (c["b_en"] and p < c["parts"]) else 0
                  for p in range(LANES)] for j in range(c["n"])]
            mode = c["op"] >> 17
            if mode == 0:
                outs = [[(x + y) & 0xFFFFFFFF for x, y in zip(aa, bb)] for aa, bb in zip(a, b)]
            elif mode == 1:
                outs = [[sum(col) & 0xFFFFFFFF for col in zip(*a)]]
            else:
                outs = []
            for j, o in enumerate(outs):
                for p in range(c["parts"]):
                    sb[p][(c["o_addr"] + j * c["o_stride"]) % DEPTH] = o[p]
        got["sbuf"] = [[ctx.get(dut.sbuf.memories[p].data[a]) for a in range(DEPTH)]
                       for p in range(LANES)]
        got["expect_sbuf"] = sb
        got["expect_cfg"], got["expect_seed"] = exp_cfg, exp_seed
    simulate(dut, wait, background=(feed, engine, mon, cfg_sink))

    assert got["sbuf"] == got["expect_sbuf"], f"seed {seed}"
    assert got["cfg"] == got["expect_cfg"], f"seed {seed}"
    assert got["seed"] == got["expect_seed"], f"seed {seed}"
    assert got["done"] == [c["sem"] for c in cmds if c["sem_en"]], f"seed {seed}"
