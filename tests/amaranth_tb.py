"""Idioms shared by the Amaranth-simulator tests of the core's controllers
(``test_core_sbuf.py``, ``test_core_tensor_ctrl.py``, ``test_core_vector_ctrl.py``)."""

from amaranth.sim import Simulator

__all__ = ["send_commands", "tick_until", "simulate"]


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
