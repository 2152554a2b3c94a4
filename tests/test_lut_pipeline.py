"""The vector LUT (``rtl.vector.lut.Lut``) alone on the Amaranth simulator against the golden
``sim.vector.lut_eval`` and the cfg map of ``sim.vector.VectorEngineModel``: a table of every
range mode loaded through ``cfg`` (the next one into the other bank while the current one runs),
FP32 edge cases, specials and seeded random elements under a random ``en`` with bypassed beats
among them, then the hit/underflow/overflow counters and a read-back of the cfg map (random
``rdata.ready``); and a header write to the bank in use, which waits for ``lock`` to fall. The
cocotb engine tests run the same tables through the whole engine; this one reaches the LUT's
own ports (``bypass``, ``count``, ``lock``, ``en``) directly and runs in seconds."""

import copy
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.lut import Lut
from sim.lut import compile_table
from sim.tables import SHIPPED
from sim.vector import (MAX_BINADES, Hdr, Region, Status, VectorEngineModel, coef_addr,
                        desc_addr, hdr_addr, lut_eval, status_addr)

LANES = 2
DEPTH = 64                      # core2's LUT
SEED = 20261130
#: One shipped function per range mode: EXP2, RECIP, RSQRT, SQRT, LOG, NONE.
FUNCS = ["exp", "reciprocal", "rsqrt", "sqrt", "log", "tanh"]
EDGES = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0xBF000000, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
    0x7FC00000, 0x7F800001, 0xFFC00000, 0xFF800001, 0x40490FDB, 0xC0490FDB, 0x42FF0000,
    0xC2FF0000, 0x42FEFFFF, 0x43000000, 0xC3000000, 0x43050000, 0xC3050000, 0x3EFFFFFF,
    0x3F400000, 0xBF400000, 0x3FC00000, 0x40700000, 0x3F7FFFFF, 0x4B000001, 0xCB7FFFFF,
    0x3A83126F, 0x7149F2CA, 0x34000000,
]


def _values(rng, n):
    """Edge cases, then random values over the binades the tables cover and beyond."""
    out = list(EDGES)
    for _ in range(n):
        e = rng.choice([rng.randint(96, 140), rng.randint(0, 255), rng.randint(120, 134)])
        out.append(rng.getrandbits(1) << 31 | e << 23 | rng.getrandbits(23))
    while len(out) % LANES:
        out.append(0x3F800000)
    return out


def run_lut(deep, seed):
    """Run every table of ``FUNCS``; returns a list of mismatch descriptions (empty: pass)."""
    rng = random.Random(seed)
    dut = Lut(LANES, DEPTH, deep=deep)
    latency = dut.latency
    model = VectorEngineModel(LANES, DEPTH)
    tables = [compile_table(SHIPPED[f], depth=DEPTH, budget=48) for f in FUNCS]
    bad = []
    counts = {Status.HITS: 0, Status.UNDERS: 0, Status.OVERS: 0}
    rdata = []

    async def rdata_sink(ctx):
        while True:
            ready = rng.random() < 0.6
            ctx.set(dut.rdata.ready, ready)
            valid, payload = ctx.get(dut.rdata.valid), ctx.get(dut.rdata.payload)
            await ctx.tick()
            if valid and ready:
                rdata.append(payload)

    async def bench(ctx):
        pending = list(tables[0].writes(0))
        for w in pending:
            model.cfg_write(*w)
        cfg_queue = [(a, d, 1) for a, d in pending]

        def drive_cfg():
            if cfg_queue:
                a, d, wr = cfg_queue[0]
                ctx.set(dut.cfg.payload.addr, a)
                ctx.set(dut.cfg.payload.data, d)
                ctx.set(dut.cfg.payload.write, wr)
                ctx.set(dut.cfg.valid, 1)
                return ctx.get(dut.cfg.ready)
            ctx.set(dut.cfg.valid, 0)
            return False

        async def drain_cfg():
            """The queued beats, then until the last one has left the cfg register (a write
            to the bank in use would wait there while ``lock`` is high): ``ready`` is high
            once the register is empty or its beat is carried out in this cycle."""
            while cfg_queue:
                taken = drive_cfg()
                await ctx.tick()
                if taken:
                    cfg_queue.pop(0)
            ctx.set(dut.cfg.valid, 0)
            while not ctx.get(dut.cfg.ready):
                await ctx.tick()
            await ctx.tick()

        await drain_cfg()           # the first table alone
        for i, tab in enumerate(tables):
            bank = i & 1
            st = model.banks[bank]
            # Meanwhile the next table goes into the other bank (double buffering).
            if i + 1 < len(tables):
                nxt = tables[i + 1].writes(1 - bank)
                cfg_queue.extend((a, d, 1) for a, d in nxt)
            vals = _values(rng, 60)
            beats = [vals[j:j + LANES] for j in range(0, len(vals), LANES)]
            byp = [rng.random() < 0.2 for _ in beats]
            cnt = [rng.random() < 0.9 for _ in beats]
            got = []
            ctx.set(dut.bank, bank)
            ctx.set(dut.lock, 1)
            # The registered copies of the header (the pre-scale, the mode) are taken on
            # enabled cycles: one enabled cycle with the new bank before its first element
            # (the engine's ``en`` is always high).
            ctx.set(dut.bypass, 1)
            ctx.set(dut.count, 0)
            ctx.set(dut.en, 1)
            await ctx.tick()
            nxt_beat = enabled = 0
            while len(got) < len(beats):
                taken = drive_cfg()
                en = rng.random() < 0.7
                if en and nxt_beat < len(beats):
                    z, b, c = beats[nxt_beat], byp[nxt_beat], cnt[nxt_beat]
                elif en:
                    z, b, c = [rng.getrandbits(32) for _ in range(LANES)], 1, 0
                else:           # not taken: anything
                    z = [rng.getrandbits(32) for _ in range(LANES)]
                    b, c = rng.getrandbits(1), rng.getrandbits(1)
                for lane in range(LANES):
                    ctx.set(dut.z[lane], z[lane])
                ctx.set(dut.bypass, b)
                ctx.set(dut.count, c)
                ctx.set(dut.en, en)
                await ctx.tick()
                if taken:
                    cfg_queue.pop(0)
                if en:
                    nxt_beat += 1
                    enabled += 1
                    if enabled >= latency:
                        got.append([ctx.get(dut.y[lane]) for lane in range(LANES)])
            ctx.set(dut.en, 0)
            ctx.set(dut.lock, 0)
            for j, (z, b, c, y) in enumerate(zip(beats, byp, cnt, got)):
                if b:
                    exp = z
                else:
                    out, region = lut_eval(np.array(z, dtype=np.uint32), st)
                    exp = [int(x) for x in out]
                    if c:
                        for reg, code in ((Status.HITS, Region.HIT),
                                          (Status.UNDERS, Region.UNDER),
                                          (Status.OVERS, Region.OVER)):
                            counts[reg] += int(np.sum(region == code))
                if y != exp:
                    bad.append(f"{FUNCS[i]} (bank {bank}, deep {deep}, seed {seed}) beat {j}"
                               f" bypass {b}: z {[hex(x) for x in z]} y {[hex(x) for x in y]}"
                               f" expected {[hex(x) for x in exp]}")
            for w in (tables[i + 1].writes(1 - bank) if i + 1 < len(tables) else []):
                model.cfg_write(*w)
            await drain_cfg()   # the rest of the next table
        # Counters (the region register is one cycle late: idle a few cycles first), then a
        # read-back of both banks' headers, descriptors and a sample of coefficient words, in
        # a random order; then one counter cleared.
        for _ in range(4):
            await ctx.tick()
        model.counters.update(counts)
        addrs = [status_addr(reg) for reg in (Status.HITS, Status.UNDERS, Status.OVERS,
                                              Status.ERROR, Status.DEPTH)]
        for bank in range(2):
            addrs += [hdr_addr(bank, reg) for reg in Hdr]
            addrs += [desc_addr(bank, side, b) for side in (0, 1) for b in range(0, MAX_BINADES, 3)]
            addrs += [coef_addr(bank, e, w) for e in range(0, DEPTH, 5) for w in range(3)]
        rng.shuffle(addrs)          # (back-to-back reads of different rows and kinds)
        exp = [model.cfg_read(a) for a in addrs]
        cfg_queue.extend((a, 0, 0) for a in addrs)
        await drain_cfg()
        for _ in range(200):
            if len(rdata) == len(addrs):
                break
            await ctx.tick()
        # Clearing one counter (a write) leaves the others; a read clears nothing and writes
        # nothing (the headers, read above, read again: a header write lands from registers).
        counter = [status_addr(reg) for reg in (Status.HITS, Status.UNDERS, Status.OVERS)]
        phase2 = [(counter[0], 0, 0), (counter[1], 0, 1)] + [(a, 0, 0) for a in counter]
        phase2 += [(hdr_addr(bank, reg), 0, 0) for bank in range(2) for reg in Hdr]
        for a, d, wr in phase2:
            if wr:
                model.cfg_write(a, d)
            else:
                addrs.append(a)
                exp.append(model.cfg_read(a))
        cfg_queue.extend(phase2)
        await drain_cfg()
        for _ in range(200):
            if len(rdata) == len(addrs):
                break
            await ctx.tick()
        if rdata != exp:
            diff = [(hex(a), hex(g), hex(e)) for a, g, e in zip(addrs, rdata, exp) if g != e]
            bad.append(f"cfg read-back (deep {deep}, seed {seed}): {len(rdata)} of "
                       f"{len(addrs)} beats, (addr, got, expected) {diff[:6]}")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(rdata_sink, background=True)
    sim.add_testbench(bench)
    sim.run()
    return bad, counts


@pytest.mark.parametrize("deep", [pytest.param(True, marks=pytest.mark.long), False])
def test_lut_vs_golden(deep):
    bad, counts = run_lut(deep, SEED)
    assert not bad, "\n".join(bad[:8])
    # The elements reach every region (so the counters are tested).
    assert all(v > 0 for v in counts.values()), counts


def run_hdr_lock(deep, seed):
    """A header write to the bank in use while ``lock`` holds, and one to the other bank, during
    a run of elements; returns a list of failure descriptions (empty: pass).

    Bank 0 holds ``exp`` and bank 1 ``reciprocal``; the lanes run on bank 0 with ``lock`` high
    while the host writes bank 1's PRE, reads it back, writes bank 0's PRE and reads it back.
    The bank-1 write must land at once (its read is taken the cycle after it and returns the
    new word before ``lock`` falls); the bank-0 write must wait in the cfg register (``ready``
    low, its read not taken) until ``lock`` falls, so that every element of the run is computed
    with bank 0's old header. Then both new headers are read back and in effect: a run on each
    bank against ``lut_eval`` with the new PRE."""
    rng = random.Random(seed)
    dut = Lut(LANES, DEPTH, deep=deep)
    latency = dut.latency
    model = VectorEngineModel(LANES, DEPTH)
    tables = [compile_table(SHIPPED[f], depth=DEPTH, budget=48) for f in ("exp", "reciprocal")]
    # PRE of exp is log2(e): 1.0 makes it 2**z; reciprocal's 1.0 becomes 2.0 (1 / 2z).
    new_pre = {0: 0x3F800000, 1: 0x40000000}
    assert all(tables[b].pre != new_pre[b] for b in range(2))
    bad = []

    async def bench(ctx):
        cyc = 0
        queue = []              # (addr, data, write) beats still to offer on ``cfg``
        accepted = []           # the cycle each beat was accepted (``cfg.valid & cfg.ready``)
        ready_low = []          # the cycles ``cfg.ready`` was low
        rdata = []              # (cycle, payload)
        ctx.set(dut.rdata.ready, 1)

        async def tick():
            nonlocal cyc
            if queue:
                a, d, wr = queue[0]
                ctx.set(dut.cfg.payload.addr, a)
                ctx.set(dut.cfg.payload.data, d)
                ctx.set(dut.cfg.payload.write, wr)
            ctx.set(dut.cfg.valid, bool(queue))
            ready = ctx.get(dut.cfg.ready)
            rv, rp = ctx.get(dut.rdata.valid), ctx.get(dut.rdata.payload)
            await ctx.tick()
            cyc += 1
            if not ready:
                ready_low.append(cyc)
            if queue and ready:
                queue.pop(0)
                accepted.append(cyc)
            if rv:
                rdata.append((cyc, rp))

        async def drain():
            for _ in range(4000):
                if not queue and ctx.get(dut.cfg.ready):
                    break
                await tick()

        async def run(bank, st, label):
            """Elements on ``bank`` with ``lock`` high, compared with ``lut_eval`` on ``st``;
            ``lock`` stays high."""
            vals = _values(rng, 40)
            beats = [vals[j:j + LANES] for j in range(0, len(vals), LANES)]
            ctx.set(dut.bank, bank)
            ctx.set(dut.lock, 1)
            ctx.set(dut.bypass, 1)      # one enabled cycle: the header's registered copies
            ctx.set(dut.count, 0)
            ctx.set(dut.en, 1)
            await tick()
            got = []
            nxt_beat = enabled = 0
            while len(got) < len(beats):
                en = rng.random() < 0.7
                if en and nxt_beat < len(beats):
                    z, b = beats[nxt_beat], 0
                else:
                    z, b = [rng.getrandbits(32) for _ in range(LANES)], 1
                for lane in range(LANES):
                    ctx.set(dut.z[lane], z[lane])
                ctx.set(dut.bypass, b)
                ctx.set(dut.en, en)
                await tick()
                if en:
                    nxt_beat += 1
                    enabled += 1
                    if enabled >= latency:
                        got.append([ctx.get(dut.y[lane]) for lane in range(LANES)])
            ctx.set(dut.en, 0)
            wrong = 0
            for j, (z, y) in enumerate(zip(beats, got)):
                exp = [int(x) for x in lut_eval(np.array(z, dtype=np.uint32), st)[0]]
                if y != exp:
                    wrong += 1
                    if wrong <= 3:
                        bad.append(f"{label} (deep {deep}, seed {seed}) beat {j}: z "
                                   f"{[hex(x) for x in z]} y {[hex(x) for x in y]} expected "
                                   f"{[hex(x) for x in exp]}")
            if wrong > 3:
                bad.append(f"{label} (deep {deep}, seed {seed}): {wrong} of {len(beats)} beats "
                           f"wrong")

        for bank in range(2):
            for w in tables[bank].writes(bank):
                model.cfg_write(*w)
                queue.append((*w, 1))
        await drain()
        accepted.clear()
        old = copy.deepcopy(model.banks[0])
        for bank in (1, 0):
            model.cfg_write(hdr_addr(bank, Hdr.PRE), new_pre[bank])
            queue += [(hdr_addr(bank, Hdr.PRE), new_pre[bank], 1),
                      (hdr_addr(bank, Hdr.PRE), 0, 0)]
        start = cyc
        await run(0, old, "bank 0 with the old PRE, its write waiting")
        end = cyc
        # (a) Bank 1's write and read taken in consecutive cycles (the register streams a beat
        # per cycle; the read is carried out a cycle later than the write), bank 0's write taken
        # into the cfg register and held there: ``ready`` low from then to the end of the run,
        # its read never taken. (That is ``take``'s lock test; the header registers' own,
        # ``hdr_we``'s, is checked by the elements above: without it the waiting write lands.)
        if len(accepted) != 3 or accepted[1] - accepted[0] != 1:
            bad.append(f"during the run (deep {deep}): beats accepted at cycles "
                       f"{[c - start for c in accepted]}, expected 3, the second the cycle "
                       f"after the first")
        elif any(c not in ready_low for c in range(accepted[2] + 1, end + 1)):
            bad.append(f"during the run (deep {deep}): cfg.ready high with bank 0's write "
                       f"waiting (cycles {accepted[2] - start}..{end - start})")
        if [d for c, d in rdata] != [new_pre[1]] or rdata[0][0] > end:
            got = [(c - start, hex(d)) for c, d in rdata]
            bad.append(f"during the run (deep {deep}): rdata (cycle, word) {got}, expected "
                       f"bank 1's new PRE {new_pre[1]:#x} before lock falls")
        # (c) Once ``lock`` falls, the write is taken and lands: its read is taken and returns
        # the new PRE.
        ctx.set(dut.lock, 0)
        await drain()
        for _ in range(8):
            await tick()
        if len(accepted) != 4 or accepted[3] - end > 4:
            bad.append(f"after lock fell at cycle {end - start} (deep {deep}): beats accepted "
                       f"at {[c - start for c in accepted]}")
        if [d for c, d in rdata] != [new_pre[1], new_pre[0]]:
            bad.append(f"after lock fell (deep {deep}): rdata {[hex(d) for c, d in rdata]}, "
                       f"expected {[hex(new_pre[b]) for b in (1, 0)]}")
        # Then the new headers are the ones the lanes use, on each bank.
        await run(0, model.banks[0], "bank 0 with the new PRE")
        ctx.set(dut.lock, 0)
        await run(1, model.banks[1], "bank 1 with the new PRE")
        ctx.set(dut.lock, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return bad


@pytest.mark.parametrize("deep", [True, False])
def test_hdr_write_waits_for_lock(deep):
    """A header write to the bank the lanes are using waits for ``lock`` (the elements in
    flight keep the old header); one to the other bank lands at once."""
    bad = run_hdr_lock(deep, SEED)
    assert not bad, "\n".join(bad[:8])


def _rtlil_cells(text, module):
    """``(type, parameters, connections)`` of every cell of ``module`` in RTLIL ``text``."""
    body = text.split(f"\nmodule {module}\n", 1)[1].split("\nend\n", 1)[0]
    cells = []
    for block in body.split("\n  cell ")[1:]:
        block = block.split("\n  end", 1)[0]
        lines = block.split("\n")
        params = dict(ln.split()[1:3] for ln in lines if ln.strip().startswith("parameter "))
        conns = {ln.split()[1]: ln.split(None, 2)[2] for ln in lines
                 if ln.strip().startswith("connect ")}
        cells.append((lines[0].split()[0], params, conns))
    return body, cells


def test_coef_ram_ports():
    """The coefficient RAM as yosys must see it to map it without collision logic: marked
    ``no_rw_check``, read through asynchronous ports (yosys applies the mark when it merges
    the register after such a port; a synchronous Amaranth port keeps read-before-write),
    written from registers (``LutConfig``'s ``wr_*``: the write's enable does not wait for the
    lock check)."""
    from amaranth.back import rtlil
    text = rtlil.convert(Lut(LANES, DEPTH), ports=None)
    body, cells = _rtlil_cells(text, "\\top")
    mem = body.split("memory width 96", 1)[0].rsplit("\n\n", 1)[-1]
    assert "attribute \\no_rw_check 1" in mem, mem
    coef = [(t, p, c) for t, p, c in cells if p.get("\\MEMID") == '"\\\\coef"']
    reads = [p for t, p, c in coef if t == "$memrd_v2"]
    assert len(reads) == LANES + 1, reads
    assert all(p["\\CLK_ENABLE"] == "0" for p in reads), reads
    registers = {c["\\Q"].split()[0] for t, p, c in cells if t.startswith(("$dff", "$sdff"))}
    # The cfg port (``LutConfig``) drives the write port from its registers, through its
    # outputs: the top's wires connected to an output that is a register there count.
    _, cfg_cells = _rtlil_cells(text, "\\top.config")
    cfg_regs = {c["\\Q"].split()[0] for t, p, c in cfg_cells if t.startswith(("$dff", "$sdff"))}
    (cfg_cell,) = [c for t, p, c in cells if t == "\\top.config"]
    registers |= {outer.split()[0] for inner, outer in cfg_cell.items() if inner in cfg_regs}
    (write,) = [c for t, p, c in coef if t == "$memwr_v2"]
    for port in ("\\EN", "\\ADDR", "\\DATA"):
        wires = {w for w in write[port].replace("{", " ").replace("}", " ").split()
                 if w.startswith(("\\", "$"))}
        assert wires and wires <= registers, (port, write[port])
