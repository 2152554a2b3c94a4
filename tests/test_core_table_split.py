"""TableSplit (``rtl/core/table_split.py``) and PendingCount (``rtl/core/pending_count.py``),
the vector controller's units, against models written from their docstrings: seeded random
words with bubbles, random stalls on both outputs."""

import random

import pytest

from rtl.core.pending_count import PendingCount
from rtl.core.table_split import TableSplit

from amaranth_tb import simulate

LANES = 2


def _words(rng, requests):
    """Engine requests (``table`` 0), unpaired TABLE requests (address, data, ... words) and
    paired ones (one beat per write: address lane 0, data lane 1): ``(data, table, last,
    pair)``."""
    out = []
    for _ in range(requests):
        table = rng.random() < 0.6
        pair = table and rng.random() < 0.5
        n = rng.randint(1, 5) if pair or not table else 2 * rng.randint(1, 4)
        for k in range(n):
            data = [rng.getrandbits(32) for _ in range(LANES)]
            if table and (pair or k % 2 == 0):
                data[0] = rng.getrandbits(16)
            out.append((data, int(table), int(k == n - 1), int(pair)))
    return out


def _writes(words):
    """The LUT writes of ``words`` (the docstring's rule)."""
    out, k = [], 0
    while k < len(words):
        data, table, _, pair = words[k]
        if table and pair:
            out.append((data[0], data[1]))
        elif table:
            out.append((data[0], words[k + 1][0][0]))
            k += 1
        k += 1
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_table_split_random(seed):
    dut = TableSplit(LANES)
    rng = random.Random(seed)
    words = _words(rng, 150)
    want_a = [d for d, t, *_ in words if not t]
    want_cfg = _writes(words)
    assert any(w[3] for w in words) and any(w[1] and not w[3] for w in words)
    got = {"a": [], "cfg": [], "fin": 0}

    async def main(ctx):
        pos, valid = 0, False
        for cycle in range(4000):
            if pos == len(words):
                break
            word = words[pos]
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.p.data, word[0])
            ctx.set(dut.i.p.table, word[1])
            ctx.set(dut.i.p.last, word[2])
            ctx.set(dut.i.p.pair, word[3])
            a_ready, cfg_ready = rng.random() < 0.6, rng.random() < 0.6
            ctx.set(dut.a.ready, a_ready)
            ctx.set(dut.cfg.ready, cfg_ready)
            taken = valid and ctx.get(dut.i.ready)
            nxt = pos + taken
            nvalid = (valid and not taken) or (nxt < len(words) and rng.random() < 0.7)
            ctx.set(dut.next_valid, nvalid)
            ctx.set(dut.next_table, nxt < len(words) and words[nxt][1])
            ctx.set(dut.next_pair, nxt < len(words) and words[nxt][3])
            # the contract, cycle by cycle
            assert ctx.get(dut.a.valid) == (valid and not word[1])
            if ctx.get(dut.a.valid):
                assert ctx.get(dut.a.payload) == word[0]
                assert ctx.get(dut.i.ready) == a_ready
            if ctx.get(dut.cfg.valid):
                assert valid and word[1], f"seed {seed} cycle {cycle}: cfg.valid without data"
                assert ctx.get(dut.i.ready) == cfg_ready
                if cfg_ready:
                    got["cfg"].append((ctx.get(dut.cfg.p.addr), ctx.get(dut.cfg.p.data)))
                assert ctx.get(dut.cfg.p.write) == 1
            if ctx.get(dut.a.valid) and a_ready:
                got["a"].append(word[0])
            assert ctx.get(dut.table_fin) == int(bool(taken and word[1] and word[2]))
            got["fin"] += ctx.get(dut.table_fin)
            pos, valid = nxt, nvalid
            await ctx.tick()
        assert pos == len(words), f"seed {seed}: stuck at word {pos}"

    simulate(dut, main)
    assert got["a"] == want_a
    assert got["cfg"] == want_cfg
    assert got["fin"] == sum(1 for d, t, last, _ in words if t and last)


@pytest.mark.parametrize("limit", [1, 5])
def test_pending_count_random(limit):
    dut = PendingCount(limit)
    rng = random.Random(limit)
    seen = set()

    async def main(ctx):
        count = 0
        for cycle in range(1500):
            dec = int(count > 0 and rng.random() < 0.5)
            inc_a = int(count - dec < limit and rng.random() < 0.5)
            inc_b = int(count - dec + inc_a < limit and rng.random() < 0.5)
            for sig, v in ((dut.inc_a, inc_a), (dut.inc_b, inc_b), (dut.dec, dec)):
                ctx.set(sig, v)
            assert ctx.get(dut.nz) == (count != 0), f"limit {limit} cycle {cycle}"
            count += inc_a + inc_b - dec
            seen.add((inc_a, inc_b, dec, count))
            await ctx.tick()

    simulate(dut, main)
    assert ((1, 1, 1) if limit > 1 else (1, 0, 1)) in {s[:3] for s in seen}
    assert limit in {s[3] for s in seen}


def test_parameters():
    with pytest.raises(ValueError, match="lanes must be an integer from 1 to 1024, not 0"):
        TableSplit(0)
    with pytest.raises(ValueError, match="limit must be an integer from 1 to 65535, not 0"):
        PendingCount(0)
