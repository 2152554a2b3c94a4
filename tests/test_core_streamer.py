"""The read streamer (rtl/core/streamer.py), Amaranth simulator.

Two streamers, one without and one with the skid register, read the same memories under the
same per-cycle ``o.ready`` pattern, each from its own copy of one request list (random address,
stride, count including 0, parts, tag, and arrival times). Checked: each emits exactly the words
of a plain-Python model of the requests (lanes at or above ``parts`` zeroed, ``last`` on each
request's final word, the tag); ``o_next_valid``/``o_next_tag`` equal the next cycle's
``o.valid``/``o.payload.tag`` every cycle (the vector controller keeps its ``cfg.valid``
flip-flop from them); ``o.payload`` holds while stalled; the skid streamer offers the same
words in the same cycles as the plain one when requests come back to back (no latency, no lost
cycle after a stall) and is never later otherwise.
"""

import random

import pytest
from amaranth.hdl import Fragment, Module, Value
from amaranth.hdl._ast import Assign, SignalSet
from amaranth.lib import memory, wiring

from amaranth_tb import simulate
from rtl.core.streamer import ReadStreamer

LANES, ABITS, NBITS, DEPTH, TAGB = 3, 5, 6, 32, 3


class Harness(wiring.Component):
    """``streamers`` (one per ``skid`` flag), each on its own read port of ``LANES``
    memories of ``DEPTH`` words (and with ``alt_lanes``, of ``alt_lanes`` more memories,
    ``init[LANES:]``, on ``rd_alt``)."""

    def __init__(self, init, skids, data_width=32, alt_lanes=0):
        self.init, self.alt_lanes = init, alt_lanes
        self.dut = [ReadStreamer(LANES, ABITS, NBITS, data_width, TAGB, skid=s,
                                 alt_lanes=alt_lanes) for s in skids]
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        for k, s in enumerate(self.dut):
            m.submodules[f"s{k}"] = s
        for r in range(LANES + self.alt_lanes):
            mem = m.submodules[f"mem{r}"] = memory.Memory(shape=32, depth=DEPTH,
                                                          init=self.init[r])
            for s in self.dut:
                rp = mem.read_port()
                rd = s.rd_data[r] if r < LANES else s.rd_alt[r - LANES]
                m.d.comb += [rp.addr.eq(s.rd_addr), rp.en.eq(s.rd_en), rd.eq(rp.data)]
        return m


def _requests(rng, n, min_count=0):
    reqs, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, 0, 1, 3])
        reqs.append({"addr": rng.randrange(DEPTH), "stride": rng.choice([1, 1, 2, 31]),
                     "count": rng.choice([min_count, 1, 2, rng.randint(max(1, min_count), 9)]),
                     "parts": rng.randint(0, LANES), "tag": rng.randrange(1 << TAGB),
                     "avail": t})
    return reqs


def _expect(init, reqs, data_width=32, alt_lanes=0):
    """With ``alt_lanes``, requests with tag bit 0 read ``init[LANES:]`` (lanes at or above
    ``alt_lanes`` zero)."""
    mask = (1 << data_width) - 1

    def word(r, a, tag):
        if alt_lanes and tag & 1:
            return init[LANES + r][a] if r < alt_lanes else 0
        return init[r][a]

    words = []
    for q in reqs:
        for j in range(q["count"]):
            a = (q["addr"] + j * q["stride"]) % DEPTH
            words.append(([word(r, a, q["tag"]) & mask if r < q["parts"] else 0
                           for r in range(LANES)], int(j == q["count"] - 1), q["tag"]))
    return words


def _run(seed, skids, reqs, ready_p, cycles, data_width=32, alt_lanes=0):
    """Per streamer: the words taken, and per cycle (o.valid, o.payload, o_next_valid,
    o_next_tag, o.ready)."""
    rng = random.Random(seed)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(LANES)]
    # (the second port's words from their own generator: the ready pattern is the same)
    alt = random.Random(seed + 7919)
    init += [[alt.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(alt_lanes)]
    dut = Harness(init, skids, data_width, alt_lanes)
    got = {"taken": [[] for _ in skids], "trace": [[] for _ in skids], "init": init}

    async def bench(ctx):
        queues = [list(reqs) for _ in skids]
        for cyc in range(cycles):
            ready = int(rng.random() < ready_p)
            for k, s in enumerate(dut.dut):
                ctx.set(s.o.ready, ready)
                q = queues[k]
                if q and q[0]["avail"] <= cyc:
                    for f in ("addr", "stride", "count", "parts", "tag"):
                        ctx.set(getattr(s.req.payload, f), q[0][f])
                    ctx.set(s.req.valid, 1)
                else:
                    ctx.set(s.req.valid, 0)
            taken = []
            for k, s in enumerate(dut.dut):
                v = ctx.get(s.o.valid)
                word = ([int(x) for x in ctx.get(s.o.payload.data)], ctx.get(s.o.payload.last),
                        ctx.get(s.o.payload.tag))
                got["trace"][k].append((v, word if v else None, ctx.get(s.o_next_valid),
                                        ctx.get(s.o_next_tag), ready, ctx.get(s.busy)))
                if v and ready:
                    got["taken"][k].append(word)
                taken.append(ctx.get(s.req.valid) and ctx.get(s.req.ready))
            await ctx.tick()
            for k, t in enumerate(taken):
                if t:
                    queues[k].pop(0)
        got["left"] = [len(q) for q in queues]

    simulate(dut, bench)
    return got


def _check_lookahead(trace, what):
    for c in range(len(trace) - 1):
        v, word, nv, ntag = trace[c][:4]
        v1, word1 = trace[c + 1][:2]
        assert nv == v1, f"{what}: cycle {c}: o_next_valid {nv}, o.valid next {v1}"
        if v1:
            assert ntag == word1[2], f"{what}: cycle {c}: o_next_tag {ntag}, tag next {word1[2]}"
        if v and not trace[c][4]:
            assert v1 and word1 == word, f"{what}: cycle {c}: stalled word not held"
        assert trace[c][5] or not v, f"{what}: cycle {c}: a word offered while not busy"


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ready_p", [1.0, 0.7, 0.3])
def test_streamer_random(seed, ready_p):
    rng = random.Random(1000 + seed)
    reqs = _requests(rng, 40)
    got = _run(seed, (False, True), reqs, ready_p, 1200)
    exp = _expect(got["init"], reqs)
    for k, skid in enumerate((False, True)):
        what = f"seed {seed}, ready {ready_p}, skid {skid}"
        assert got["left"][k] == 0, f"{what}: requests left"
        assert got["taken"][k] == exp, what
        _check_lookahead(got["trace"][k], what)
        assert not got["trace"][k][-1][5], f"{what}: busy at the end"
    # The skid streamer runs one word ahead during a stall, so it may take a request (and
    # with it a request of count 0, or one arriving during the stall) a cycle earlier and
    # leave out a bubble; it is never later.
    plain, skid = ([t[0] and t[4] for t in tr] for tr in got["trace"])
    for c in range(len(plain)):
        assert sum(skid[:c + 1]) >= sum(plain[:c + 1]), f"seed {seed}, ready {ready_p}: late"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("ready_p", [0.8, 0.5, 0.2])
def test_streamer_same_cycles(seed, ready_p):
    """Requests of at least one word, offered back to back: the skid streamer offers the same
    words in the same cycles as the plain one (no latency added, no cycle lost after a
    stall)."""
    rng = random.Random(2000 + seed)
    reqs = [dict(r, avail=0) for r in _requests(rng, 10, min_count=1)]
    got = _run(seed, (False, True), reqs, ready_p, 400)
    plain, skid = ([t[:2] for t in tr] for tr in got["trace"])
    assert got["taken"][0] == _expect(got["init"], reqs)
    assert plain == skid, f"seed {seed}, ready {ready_p}: the skid streamer's o differs"


@pytest.mark.parametrize("skid", [False, True])
def test_streamer_throughput(skid):
    """Requests back to back: the first word two cycles after the first request is taken,
    then no cycle without a word until the last (one word per cycle while ``o.ready``; a
    stall costs exactly its own cycles)."""
    rng = random.Random(5)
    reqs = [dict(r, avail=0) for r in _requests(rng, 6, min_count=1)]
    n = sum(r["count"] for r in reqs)
    for ready_p in (1.0, 0.5):
        got = _run(7, (skid,), reqs, ready_p, 200)
        tr = got["trace"][0]
        assert got["taken"][0] == _expect(got["init"], reqs)
        first = [c for c, t in enumerate(tr) if t[0]][0]
        assert first == 3       # taken at the end of cycle 0
        last = max(c for c, t in enumerate(tr) if t[0] and t[4])
        assert all(t[0] for t in tr[first:last + 1]), f"ready {ready_p}: a bubble"
        if ready_p == 1.0:
            assert last == first + n - 1


def test_streamer_data_width():
    rng = random.Random(3)
    reqs = _requests(rng, 6)
    got = _run(3, (True,), reqs, 0.6, 300, data_width=9)
    assert got["taken"][0] == _expect(got["init"], reqs, data_width=9)


@pytest.mark.parametrize("skid", [False, True])
def test_streamer_ready_reaches_no_enable(skid):
    """With the skid register, ``o.ready`` reaches neither ``req.ready`` nor the read port's
    enable in the same cycle (they come from flip-flops); without it, it does on a stall."""
    rng = random.Random(9)
    init = [[rng.randrange(1 << 32) for _ in range(DEPTH)] for _ in range(LANES)]
    dut = Harness(init, (skid,))
    s = dut.dut[0]
    seen = {"depends": 0, "stalls": 0}

    async def bench(ctx):
        ctx.set(s.req.payload.count, 3)
        ctx.set(s.req.payload.parts, LANES)
        ctx.set(s.req.payload.stride, 1)
        ctx.set(s.req.valid, 1)
        for _ in range(200):
            ready = rng.random() < 0.5
            probe = []
            for r in (0, 1):
                ctx.set(s.o.ready, r)
                probe.append((ctx.get(s.req.ready), ctx.get(s.rd_en)))
            seen["stalls"] += ctx.get(s.o.valid)
            seen["depends"] += probe[0] != probe[1]
            ctx.set(s.o.ready, ready)
            await ctx.tick()

    simulate(dut, bench)
    assert seen["stalls"] > 50
    assert (seen["depends"] == 0) == skid, seen


@pytest.mark.parametrize("alt_lanes", [1, LANES])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ready_p", [1.0, 0.5])
def test_streamer_alt_port(alt_lanes, seed, ready_p):
    """A second read port (``alt_lanes``): requests with tag bit 0 stream its words (lanes
    at or above ``alt_lanes`` and ``parts`` zeroed), the others ``rd_data``'s; with and
    without the skid register, in the same cycles as the streamer without the port, with
    the lookahead outputs intact."""
    rng = random.Random(3000 + seed)
    reqs = _requests(rng, 30)
    got = _run(seed, (False, True), reqs, ready_p, 1000, alt_lanes=alt_lanes)
    exp = _expect(got["init"], reqs, alt_lanes=alt_lanes)
    assert any(w[2] & 1 and any(w[0]) for w in exp) and any(not w[2] & 1 for w in exp)
    for k, skid in enumerate((False, True)):
        what = f"seed {seed}, ready {ready_p}, alt_lanes {alt_lanes}, skid {skid}"
        assert got["left"][k] == 0, f"{what}: requests left"
        assert got["taken"][k] == exp, what
        _check_lookahead(got["trace"][k], what)
        # (the same requests and ready pattern without the port: same cycles)
        ref = _run(seed, (skid,), reqs, ready_p, 1000)
        assert [t[0] for t in ref["trace"][0]] == [t[0] for t in got["trace"][k]], what


def test_streamer_alt_port_data_reaches_registers_only():
    """With ``alt_lanes``, each read port's word goes straight into a register: ``rd_data`` and
    ``rd_alt`` appear only as whole right-hand sides of synchronous assignments (a block RAM
    output then reaches a flip-flop through no logic of the streamer, and the choice between
    them is made after the registers)."""
    dut = ReadStreamer(LANES, ABITS, NBITS, 32, TAGB, skid=True, alt_lanes=2)
    frag = Fragment.get(dut, None)
    ports = SignalSet([Value.cast(dut.rd_data), Value.cast(dut.rd_alt)])
    uses = []

    def walk(stmts, domain):
        for st in stmts:
            if isinstance(st, Assign):
                if st.rhs._rhs_signals() & ports:
                    uses.append((domain, st))
            else:
                assert not (st.test._rhs_signals() & ports)
                for _, body, *_ in st.cases:
                    walk(body, domain)

    for domain, stmts in frag.statements.items():
        walk(stmts, domain)
    assert len(uses) == LANES + 2
    for domain, st in uses:
        assert domain == "sync", st
        assert st.rhs._rhs_signals() == (st.rhs._rhs_signals() & ports), st  # nothing else


def test_streamer_alt_lanes_checked():
    with pytest.raises(TypeError, match="alt_lanes must be an integer, not '2'"):
        ReadStreamer(LANES, ABITS, NBITS, alt_lanes="2")
    with pytest.raises(ValueError, match="alt_lanes must be an integer from 0 to 3, not 4"):
        ReadStreamer(LANES, ABITS, NBITS, alt_lanes=4)
    with pytest.raises(ValueError, match="n_bits must be an integer from 1 to 32, not 0"):
        ReadStreamer(LANES, ABITS, 0)
    with pytest.raises(TypeError, match="skid must be a bool, not 1"):
        ReadStreamer(LANES, ABITS, NBITS, skid=1)
