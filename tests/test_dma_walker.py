"""The DMA's address walker (``rtl.dma.walker.AddressWalker``), Amaranth simulator, against a
Python list of the positions it must visit.

Random counts and strides (two's complement, modulo 2**32), random step patterns with idle
cycles, starts held for several cycles with steps beside them, restarts in the middle of a
walk and steps past the end. Checked every cycle: the position (``addr``, ``p``, ``sidx``,
``last_j``, ``last``) and ``done`` equal the model's, ``update`` is a start or a step before
``done``, and after an update the registers hold the ``next_addr`` / ``next_last_j`` shown
before the edge (the DMA's lookahead registers use them). After the last step the walker holds
the last position. The registers are enabled in groups (position in the row, row, partition),
so a group enabled on a wrong step shows as a wrong position here.
"""

import random

import pytest

from amaranth_tb import simulate
from rtl.dma.walker import AddressWalker

M32 = (1 << 32) - 1


def _positions(base, ps, si, sj, np_, ni, nj):
    """(addr, p, sidx, last_j, last) of every position, in walking order."""
    return [((base + p * ps + i * si + j * sj) & M32, p, i * nj + j, j == nj - 1,
             (p, i, j) == (np_ - 1, ni - 1, nj - 1))
            for p in range(np_) for i in range(ni) for j in range(nj)]


def _run(seed, walks=12):
    rng = random.Random(seed)
    dut = AddressWalker()

    async def bench(ctx):
        for walk in range(walks):
            np_, ni, nj = rng.randrange(1, 4), rng.randrange(1, 5), rng.randrange(1, 6)
            strides = [rng.choice([0, 4, -8, rng.getrandbits(32)]) & M32 for _ in range(3)]
            base = rng.getrandbits(32)
            for sig, v in ((dut.base, base), (dut.ps, strides[0]), (dut.si, strides[1]),
                           (dut.sj, strides[2]), (dut.np, np_), (dut.ni, ni), (dut.nj, nj)):
                ctx.set(sig, v)
            pos = _positions(base, *strides, np_, ni, nj)
            # ``start`` is held one to three cycles, with ``step`` random beside it (the
            # window check holds it for three with ``step`` at 1): it wins over ``step``.
            ctx.set(dut.start, 1)
            for _ in range(rng.randrange(1, 4)):
                ctx.set(dut.step, rng.random() < 0.5)
                await ctx.tick()
                assert ctx.get(dut.addr) == pos[0][0] and ctx.get(dut.done) == 0, \
                    f"seed {seed} walk {walk}: start"
            ctx.set(dut.start, 0)
            # A walk is cut short by the next start now and then (as the window check's is
            # when a record fails), else stepped a few times past its end.
            stop = (rng.randrange(len(pos)) if rng.random() < 0.2
                    else len(pos) + rng.randrange(1, 4))
            k = 0                                # steps taken
            for _ in range(4 * stop + 8):
                if k >= stop:
                    break
                step = rng.random() < 0.7
                ctx.set(dut.step, step)
                done = k >= len(pos)
                want = pos[min(k, len(pos) - 1)]
                got = tuple(ctx.get(s) for s in (dut.addr, dut.p, dut.sidx, dut.last_j,
                                                 dut.last))
                where = f"seed {seed} walk {walk} ({np_}, {ni}, {nj}) step {k}"
                assert got == want, f"{where}: position {got} != {want}"
                assert ctx.get(dut.done) == done, f"{where}: done {ctx.get(dut.done)}"
                assert ctx.get(dut.update) == (step and not done), f"{where}: update"
                nxt = ctx.get(dut.next_addr), ctx.get(dut.next_last_j)
                await ctx.tick()
                if step and not done:
                    assert (ctx.get(dut.addr), ctx.get(dut.last_j)) == nxt, \
                        f"{where}: next_addr / next_last_j"
                k += step
            ctx.set(dut.step, 0)

    simulate(dut, bench)


@pytest.mark.parametrize("seed", range(6))
def test_walker_random(seed):
    _run(seed)
