"""The vector controller + SBUF against a behavioural vector engine (Amaranth simulator).

The engine model takes the opaque instruction word, consumes ``n`` beats of ``a`` (and of ``b``),
and produces either ``a + b`` per beat (mod 2**32), one beat with the sum of ``a``, or nothing;
so operand addressing (SBUF and PSUM), output placement, partition masks, completion order and
back-pressure are what is tested.
"""

import random

import pytest
from amaranth.hdl import Fragment, Module, Signal
from amaranth.hdl._ast import Assign, SignalDict, SignalSet
from amaranth.lib import data, fifo, memory, wiring

from amaranth_tb import send_commands, simulate, tick_until
from rtl.core.sbuf import SBUF
from rtl.core.vector_ctrl import (KIND_ENGINE, KIND_NOP, KIND_SEED, KIND_TABLE,
                                  VectorController, _entry_layout, _LookaheadFIFO)

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


def _rand_cmd(rng, zero_n=False):
    """A random command; ``zero_n``: engine commands and TABLEs may have ``n`` = 0."""
    mode = rng.choice([0, 0, 1, 2])
    n = rng.randint(0 if zero_n else 1, 6)
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
        c.update(kind=KIND_TABLE, n=2 * rng.randint(0 if zero_n else 1, 3), a_psum=0,
                 a_stride=1, b_en=0, parts=1,
                 o_n=0, op=0)
        if rng.random() < 0.5:    # paired: n beats of partitions 0 (address) and 1 (data)
            c.update(n=c["n"] // 2 + rng.randint(0, 1), parts=2)
    elif r < 0.25:
        c.update(kind=KIND_SEED, n=0, o_n=0, b_en=0, scalar=rng.randrange(1 << 32), op=0)
    elif r < 0.3:
        c.update(kind=KIND_NOP, n=0, o_n=0, b_en=0, op=0)
    return c


def _signals(frag, path):
    """The signals assigned in the subfragment at ``path`` (names) of ``frag``, by name."""
    for name in path:
        frag = next(f for f, n, _ in frag.subfragments if n == name)
    return {sig.name: sig for stmts in frag.statements.values() for st in stmts
            for sig in st._lhs_signals()}


# Enough seeds that a TABLE's last word meets a stalled cfg (the streamer's lookahead), and
# that the last command (seed 32: a TABLE without a semaphore) is taken in the cycle the
# others have completed (``busy`` in the cycle after a command is taken).
@pytest.mark.parametrize("seed", range(1, 41))
def test_vector_ctrl_random(seed):
    _run_random(seed)


# Commands with no operand beats (the a streamer's requests of count 0) and empty TABLEs.
# Seeds 2015, 2089, 2091, 2234 reach a command's last operand beat and a later command's empty
# request in one cycle (two increments of the no-output count); 1020, 2033, 2092 an empty
# TABLE that completes while its own op entry is at the op queue's head (a SEED's completion
# must not pop that entry).
@pytest.mark.parametrize("seed", [*range(1001, 1021), 2015, 2033, 2089, 2091, 2092, 2234])
def test_vector_ctrl_random_zero_n(seed):
    _run_random(seed, zero_n=True)


def _run_random(seed, zero_n=False):
    rng = random.Random(seed)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(LANES)]
    pinit = [[rng.randrange(1 << 32) for _ in range(PDEPTH)] for _ in range(COLS)]
    dut = Harness(init, pinit)
    ctrl = dut.ctrl
    # Elaborated here, so that the lockstep check below can read internal signals.
    frag = Fragment.get(dut, None)
    internal = _signals(frag, ["ctrl"])
    split = _signals(frag, ["ctrl", "a_split"])
    noout_u = _signals(frag, ["ctrl", "noout"])
    cq = _signals(frag, ["ctrl", "cpl_q"])
    head = data.View(_entry_layout(ctrl.cmd_layout), cq["r_data"])
    sa_o = _signals(frag, ["ctrl", "a_stream"])
    sa_valid = sa_o["o__valid"]
    sa_tag = data.View(data.StructLayout({"data": data.ArrayLayout(32, LANES), "last": 1,
                                          "tag": 4}), sa_o["o__payload"]).tag
    cmds = [_rand_cmd(rng, zero_n) for _ in range(8)]
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

    got["cfg"], got["seed"], got["cfg_ran"] = [], [], []

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
                got["cfg_ran"].append(got["ran"])

    async def lockstep(ctx):
        # Flip-flops computed from next-state lookahead must equal their combinational
        # definitions in every cycle: ``cfg_v``, a data beat of a TABLE or a paired TABLE's
        # beat on the a streamer's output (from the streamer's ``o_next_*``), ``pair_r``
        # while a write is offered, ``noout_nz`` and the completion queue's ``*_arm`` flags
        # (from the queue's next head, below).
        async for _, _, v, ov, tag, ph, pr, nz, ns in ctx.tick().sample(
                split["cfg_v"], sa_valid, sa_tag, split["phase"], split["pair_r"],
                noout_u["nz"], noout_u["count"]):
            if v != ov & (tag >> 2) & (ph | (tag >> 3)):
                got.setdefault("lockstep", []).append(("cfg_v", v, ov, tag, ph))
            if v and pr != tag >> 3:
                got.setdefault("lockstep", []).append(("pair_r", pr, tag))
            if nz != (ns != 0):
                got.setdefault("lockstep", []).append(("noout_nz", nz, ns))
            # The completion queue's arms (its read enable's flags of the head).
            hv = ctx.get(cq["r_rdy"])
            fence, started, left_one = (ctx.get(internal[n])
                                        for n in ("fence", "started", "left_one"))
            misc, noout, has_out, one = (ctx.get(getattr(head, n))
                                         for n in ("misc", "noout", "has_out", "o_n_one"))
            want = {"m_arm": hv & misc & ~fence & 1, "n_arm": hv & noout & fence,
                    "o_arm": hv & has_out & (left_one if started else one)}
            for name, w in want.items():
                if ctx.get(internal[name]) != w:
                    got.setdefault("lockstep", []).append((name, ctx.get(internal[name]), w))
            got["arms"] = got.get("arms", 0) + sum(want.values())

    async def wait(ctx):
        # Every command sent, every engine command run, every completion seen and the
        # controller idle (commands without a semaphore complete silently: waiting for the
        # completions alone checked SBUF before the last ones had run).
        n_engine = sum(c["kind"] == KIND_ENGINE for c in cmds)
        await tick_until(ctx, lambda: got["sent"] and got["ran"] == n_engine
                         and len(got["done"]) == sum(c["sem_en"] for c in cmds)
                         and not ctx.get(ctrl.busy), 2000,
                         lambda: f"seed {seed}: {len(got['done'])} done (semaphores "
                                 f"{got['done']}), {got['ran']} of {n_engine} engine "
                                 f"commands run, busy {ctx.get(ctrl.busy)}")
        for _ in range(3):
            await ctx.tick()
        # Model: apply every command in order on a copy of SBUF.
        sb = [list(r) for r in init]
        exp_cfg, exp_seed, exp_ran = [], [], []
        for i, c in enumerate(cmds):
            if c["kind"] == KIND_TABLE:
                words = [sb[0][(c["a_addr"] + j) % DEPTH] for j in range(c["n"])]
                if c["parts"] == 2:
                    writes = [(w & 0xFFFF, sb[1][(c["a_addr"] + j) % DEPTH], 1)
                              for j, w in enumerate(words)]
                else:
                    writes = [(words[j] & 0xFFFF, words[j + 1], 1)
                              for j in range(0, len(words), 2)]
                exp_cfg += writes
                # A TABLE starts once every earlier engine command has run.
                exp_ran += [sum(e["kind"] == KIND_ENGINE for e in cmds[:i])] * len(writes)
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
                outs = [[sum(aa[p] for aa in a) & 0xFFFFFFFF for p in range(LANES)]]
            else:
                outs = []
            for j, o in enumerate(outs):
                for p in range(c["parts"]):
                    sb[p][(c["o_addr"] + j * c["o_stride"]) % DEPTH] = o[p]
        got["sbuf"] = [[ctx.get(dut.sbuf.memories[p].data[a]) for a in range(DEPTH)]
                       for p in range(LANES)]
        got["expect_sbuf"] = sb
        got["expect_cfg"], got["expect_seed"], got["expect_ran"] = exp_cfg, exp_seed, exp_ran
    simulate(frag, wait, background=(feed, engine, mon, cfg_sink, lockstep))

    assert "lockstep" not in got, f"seed {seed}: {got['lockstep'][:4]}"
    assert got["arms"] > 0, f"seed {seed}: no completion armed"
    assert got["sbuf"] == got["expect_sbuf"], f"seed {seed}"
    assert got["cfg"] == got["expect_cfg"], f"seed {seed}"
    assert all(r >= e for r, e in zip(got["cfg_ran"], got["expect_ran"])), \
        f"seed {seed}: a TABLE started before an earlier command had run"
    assert got["seed"] == got["expect_seed"], f"seed {seed}"
    assert got["done"] == [c["sem"] for c in cmds if c["sem_en"]], f"seed {seed}"


def test_vector_ctrl_a_stream_has_skid():
    """The operand-a streamer has its skid register, so that the engine's ``a.ready`` and the
    LUT configuration register's ``ready`` reach none of its clock enables (nor, through
    them, PSUM's read-address register); operand b's has none."""
    dut = Harness([[0] * DEPTH] * LANES, [[0] * PDEPTH] * COLS)
    frag = Fragment.get(dut, None)
    assert "sk_full" in _signals(frag, ["ctrl", "a_stream"])
    assert "sk_full" not in _signals(frag, ["ctrl", "b_stream"])


def _comb_support(frag, sig):
    """The signals that ``sig`` depends on combinationally in ``frag`` (its own statements):
    through comb assignments (their right-hand sides and enclosing conditions) down to
    flip-flops and ports."""
    comb = SignalDict()

    def walk(stmts, conds):
        for st in stmts:
            if isinstance(st, Assign):
                for lhs in st._lhs_signals():
                    comb.setdefault(lhs, SignalSet()).update(st._rhs_signals() | conds)
            else:       # Switch: its test guards every statement in it
                for patterns, body, *_ in st.cases:
                    walk(body, conds | st.test._rhs_signals())

    walk(frag.statements.get("comb", []), SignalSet())
    seen, todo, leaves = SignalSet(), [sig], SignalSet()
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        if s in comb:
            todo += list(comb[s])
        else:
            leaves.add(s)
    return {s.name for s in leaves}


def test_vector_ctrl_cpl_read_enable_support():
    """The completion queue's read enable (and so its head register's clock enable) is a
    function of the head's ``*_arm`` flip-flops, ``table_done``, ``noout.nz`` (a flip-flop of
    ``PendingCount``) and the engine's and SBUF's handshake flags only: no head field,
    ``started``/``left_one`` multiplexer or ``fence`` in front of it (no path cpl_q's head ->
    ``quiet`` -> the read enable -> cpl_q's read data clock enables)."""
    dut = Harness([[0] * DEPTH] * LANES, [[0] * PDEPTH] * COLS)
    frag = Fragment.get(dut, None)
    ctrl = next(f for f, n, _ in frag.subfragments if n == "ctrl")
    cq = next(f for f, n, _ in ctrl.subfragments if n == "cpl_q")
    r_en = next(s for stmts in cq.statements.values() for st in stmts
                for s in st._rhs_signals() if s.name == "r_en")
    assert _comb_support(ctrl, r_en) == {"table_done", "e_idle", "m_arm", "n_arm",
                                         "nz", "o_arm", "e_o__valid",
                                         "o_sbuf__ready"}


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_lookahead_fifo(depth):
    """``_LookaheadFIFO`` against ``SyncFIFOBuffered`` of the same depth, under random writes
    and reads (also while full or empty): the same ``w_rdy``, ``r_rdy`` and ``r_data`` every
    cycle (``r_data`` also while not ``r_rdy``), and ``n_rdy``/``n_data`` equal to the next
    cycle's ``r_rdy``/``r_data``."""
    rng = random.Random(depth)
    m = Module()
    m.submodules.ref = ref = fifo.SyncFIFOBuffered(width=8, depth=depth)
    m.submodules.dut = dut = _LookaheadFIFO(width=8, depth=depth)
    w_data, w_en, r_en = Signal(8), Signal(), Signal()
    for f in (ref, dut):
        m.d.comb += [f.w_data.eq(w_data), f.w_en.eq(w_en), f.r_en.eq(r_en)]
    seen = {"reads": 0, "full": 0}

    async def bench(ctx):
        prev = None
        for cyc in range(3000):
            if cyc % 300 == 0:
                pw, pr = rng.choice([0.2, 0.5, 0.9]), rng.choice([0.2, 0.5, 0.9])
            ctx.set(w_data, rng.randrange(256))
            ctx.set(w_en, rng.random() < pw)
            ctx.set(r_en, rng.random() < pr)
            now = [ctx.get(x) for x in (dut.w_rdy, dut.r_rdy, dut.r_data)]
            assert now == [ctx.get(x) for x in (ref.w_rdy, ref.r_rdy, ref.r_data)], \
                f"depth {depth}, cycle {cyc}"
            if prev is not None:
                assert prev == now[1:], f"depth {depth}, cycle {cyc}: lookahead {prev}"
            prev = [ctx.get(dut.n_rdy), ctx.get(dut.n_data)]
            seen["reads"] += now[1] and ctx.get(r_en)
            seen["full"] += not now[0]
            await ctx.tick()

    simulate(m, bench)
    assert seen["reads"] > 300 and seen["full"] > 100, seen
