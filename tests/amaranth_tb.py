"""Idioms shared by the Amaranth-simulator tests of the core's controllers
(``test_core_sbuf.py``, ``test_core_tensor_ctrl.py``, ``test_core_vector_ctrl.py``) and of the
tensor engine (``test_tensor_params.py``, ``test_tensor_fused.py``)."""

import random

from amaranth.sim import Simulator

__all__ = ["send_commands", "tick_until", "simulate", "run_tensor_engine"]


async def send_commands(ctx, cmd, cmds, gap=None):
    """Drive each dict of ``cmds`` onto the stream ``cmd`` (payload fields by name), one
    handshake per command, then ``gap()`` idle cycles (none when ``gap`` is None)."""
    for c in cmds:
        for k, v in c.items():
            ctx.set(getattr(cmd.payload, k), v)
        ctx.set(cmd.valid, 1)
        await ctx.tick().until(cmd.ready)
        ctx.set(cmd.valid, 0)
        for _ in range(gap() if gap else 0):
            await ctx.tick()


async def tick_until(ctx, cond, limit, what):
    """Tick until ``cond()`` holds after an edge; after ``limit`` cycles an AssertionError
    naming ``what`` (a string, or a callable giving one at that time)."""
    for _ in range(limit):
        await ctx.tick()
        if cond():
            return
    raise AssertionError(f"{what() if callable(what) else what}: timeout after {limit} cycles")


def simulate(dut, main, background=(), foreground=(), period=1e-8):
    """Run ``main`` (and ``foreground`` testbenches) to completion beside the ``background``
    testbenches, with one clock of ``period`` seconds."""
    sim = Simulator(dut)
    sim.add_clock(period)
    for tb in foreground:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)
    sim.add_testbench(main)
    sim.run()


def run_tensor_engine(dut, prog, seed, *, accumulate="fp32", ready_p=0.7, idle_p=0.2):
    """Run ``prog`` (a list of ``(fmt, stationary[K, M], moving[K, N])``) through the
    ``TensorEngine`` ``dut`` with random idle cycles on both inputs and back-pressure on the
    result (``ready`` with probability ``ready_p``); every result beat and its ``last`` flag
    against ``sim.tensor.column_sums(..., accumulate=accumulate)``. Returns the beats
    checked."""
    from sim.dtypes import Format
    from sim.tensor import column_sums
    rows, cols = dut.rows, dut.cols
    rnd = random.Random(seed)
    got = []
    total = sum(mv.shape[1] for _, st, mv in prog)

    def column(x, j):
        return [int(x[k, j]) if k < x.shape[0] else 0 for k in range(rows)]

    def idle():
        n = 0
        while rnd.random() < idle_p:
            n += 1
        return n

    async def stationary(ctx):
        await send_commands(ctx, dut.stationary, [
            {"data": column(st, m), "fmt": fmt, "last": m == st.shape[1] - 1}
            for fmt, st, mv in prog for m in range(st.shape[1])], gap=idle)

    async def moving(ctx):
        await send_commands(ctx, dut.moving, [
            {"data": column(mv, n), "last": n == mv.shape[1] - 1}
            for fmt, st, mv in prog for n in range(mv.shape[1])], gap=idle)

    async def result(ctx):
        while len(got) < total:
            ctx.set(dut.result.ready, rnd.random() < ready_p)
            _, _, v, r, d, last = await ctx.tick().sample(
                dut.result.valid, dut.result.ready, dut.result.p.data, dut.result.p.last)
            if v and r:
                got.append(([int(x) for x in d], int(last)))

    simulate(dut, result, background=(stationary, moving))
    i = 0
    for fmt, st, mv in prog:
        exp = column_sums(st, mv, fmt, rows=rows, cols=cols, accumulate=accumulate)
        for n in range(mv.shape[1]):
            lanes, last = got[i]
            i += 1
            assert lanes == [int(x) for x in exp[:, n]], \
                f"seed {seed} fmt {Format(fmt).name} beat {n}: {lanes} vs {exp[:, n].tolist()}"
            assert last == int(n == mv.shape[1] - 1)
    return i
