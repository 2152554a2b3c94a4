"""The LUT's sub-components alone in the Amaranth simulator: the cfg port
(``rtl/vector/lut_config.py``) against the cfg map of ``sim.vector.VectorEngineModel`` with
random ready/valid patterns and the bank lock, and one evaluation lane
(``rtl/vector/lut_lane.py``) against ``sim.vector.lut_eval`` on a compiled table, with a
random ``en`` (the whole ``Lut``: ``tests/test_lut_pipeline.py``)."""

import random

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from rtl.vector.lut_config import LutConfig
from rtl.vector.lut_header import LutHeader
from rtl.vector.lut_lane import LutLane, latency_of
from sim.lut import compile_table
from sim.tables import SHIPPED
from sim.vector import (DESC_BASE_BITS, MAX_BINADES, Hdr, Status, VectorEngineModel, coef_addr,
                        desc_addr, hdr_addr, lut_eval, status_addr)

DEPTH = 64


def _sim(top, benches, background=()):
    sim = Simulator(top)
    sim.add_clock(1e-6)
    for b in background:
        sim.add_testbench(b, background=True)
    for b in benches:
        sim.add_testbench(b)
    sim.run()


class _ConfigWithTables(Elaboratable):
    """``LutConfig`` with the table memories wired as the ``Lut`` wires them."""

    def __init__(self):
        self.cfg = LutConfig(2, DEPTH)

    def elaborate(self, platform):
        m = Module()
        m.submodules.cfg = c = self.cfg
        m.submodules.coef = coef = Memory(shape=96, depth=2 * DEPTH, init=[])
        m.submodules.desc = desc = Memory(shape=DESC_BASE_BITS, depth=4 * MAX_BINADES, init=[])
        m.submodules.desc_k = desc_k = Memory(shape=3, depth=4 * MAX_BINADES, init=[])
        wp, rp = coef.write_port(granularity=32), coef.read_port(domain="comb")
        m.d.comb += [wp.en.eq(c.coef_wr_en), wp.addr.eq(c.coef_wr_addr),
                     wp.data.eq(c.coef_wr_data), rp.addr.eq(c.coef_rd_addr),
                     c.coef_rd_data.eq(rp.data)]
        for mem, data_, back in ((desc, c.desc_wr_base, c.desc_rd_base),
                                 (desc_k, c.desc_wr_k, c.desc_rd_k)):
            wp, rp = mem.write_port(), mem.read_port(domain="comb")
            m.d.comb += [wp.en.eq(c.desc_wr_en), wp.addr.eq(c.desc_wr_addr), wp.data.eq(data_),
                         rp.addr.eq(c.desc_rd_addr), back.eq(rp.data)]
        return m



def _rdata_sink(c, rng, p_ready, got):
    """A testbench process taking the cfg port ``c``'s read data into ``got``, ``ready`` high
    with probability ``p_ready`` in each cycle."""
    async def sink(ctx):
        while True:
            ready = rng.random() < p_ready
            ctx.set(c.rdata.ready, ready)
            valid, payload = ctx.get(c.rdata.valid), ctx.get(c.rdata.payload)
            await ctx.tick()
            if valid and ready:
                got.append(payload)
    return sink


@pytest.mark.parametrize("seed", [1, 2])
def test_lut_config_matches_the_cfg_map(seed):
    """Random writes and reads of every region (bad addresses too) read back as the model's
    cfg map says; the counters add ``inc_*`` and clear on a write; a write to the locked bank
    waits until ``lock`` falls; ``header`` shows the header registers."""
    rng = random.Random(seed)
    top = _ConfigWithTables()
    c = top.cfg
    model = VectorEngineModel(2, DEPTH)
    got, want = [], []
    state = {"lock": 0, "bank": 0}

    def beat():
        """``(addr, value, write, bank)``: ``bank`` for a banked region's word, else None."""
        bank, kind = rng.getrandbits(1), rng.random()
        if kind < 0.3:
            addr = coef_addr(bank, rng.randrange(DEPTH), rng.randrange(3))
            value = rng.getrandbits(32)
        elif kind < 0.5:
            addr = desc_addr(bank, rng.getrandbits(1), rng.randrange(MAX_BINADES))
            value = rng.randrange(1 << DESC_BASE_BITS) | rng.randrange(8) << 16
        elif kind < 0.75:
            reg = rng.choice(list(Hdr))
            addr, value = hdr_addr(bank, reg), rng.getrandbits(32)
        elif kind < 0.95:
            addr, value, bank = status_addr(rng.choice(list(Status))), 0, None
        else:
            addr, value, bank = rng.getrandbits(16), rng.getrandbits(32), None
        return addr, value, rng.random() < 0.6, bank

    sink = _rdata_sink(c, rng, 0.6, got)

    async def bench(ctx):
        incs = {Status.HITS: c.inc_hits, Status.UNDERS: c.inc_unders, Status.OVERS: c.inc_overs}
        for i in range(300):
            addr, value, write, bank = beat()
            if not write and addr == status_addr(Status.DEPTH) and rng.random() < 0.5:
                write = True                       # a write to DEPTH is bad
            locked = state["lock"] and bank == state["bank"]
            ctx.set(c.cfg.payload.addr, addr)
            ctx.set(c.cfg.payload.data, value)
            ctx.set(c.cfg.payload.write, write)
            ctx.set(c.cfg.valid, 1)
            await ctx.tick().until(c.cfg.ready)
            ctx.set(c.cfg.valid, 0)
            # The beat is in the register; a locked write waits there until ``lock`` falls.
            for _ in range(3):
                await ctx.tick()
            if write and locked:
                assert not ctx.get(c.cfg.ready), f"beat {i}: a locked write was carried out"
                ctx.set(c.lock, 0)
                state["lock"] = 0
            while not ctx.get(c.cfg.ready):
                await ctx.tick()
            if write:
                model.cfg_write(addr, value)
            else:
                want.append(model.cfg_read(addr))
            for _ in range(4):                  # the read's result and the write have landed
                await ctx.tick()
            if rng.random() < 0.2:              # counted elements from the lanes
                n = {reg: rng.randrange(3) for reg in incs}
                for reg, sig in incs.items():
                    ctx.set(sig, n[reg])
                await ctx.tick()
                for reg, sig in incs.items():
                    ctx.set(sig, 0)
                    model.counters[reg] += n[reg]
            if rng.random() < 0.1:
                state.update(lock=1, bank=rng.getrandbits(1))
                ctx.set(c.lock, 1)
                ctx.set(c.bank, state["bank"])
            for bank in range(2):
                st = model.banks[bank]
                for reg in Hdr:
                    assert ctx.get(c.header[bank][reg.name.lower()]) == st.header_word(reg), \
                        f"beat {i}: bank {bank} {reg.name} (seed {seed})"
            assert ctx.get(c.error) == model.error, f"beat {i}: error (seed {seed})"
        while len(got) < len(want):
            await ctx.tick()
        assert got == want, f"seed {seed}: cfg reads"

    _sim(top, [bench], [sink])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lut_config_streams_a_beat_per_cycle(seed):
    """Beats offered back to back (random gaps, ``rdata.ready`` and ``lock`` at random), few
    addresses so that reads follow writes of the same word: ``ready`` never depends on
    ``valid``, reads return the cfg map's value after every earlier beat, and a run of
    writes to an unlocked bank is taken at one beat per cycle."""
    rng = random.Random(seed)
    top = _ConfigWithTables()
    c = top.cfg
    model = VectorEngineModel(2, DEPTH)
    addrs = [coef_addr(b, e, w) for b in (0, 1) for e in (0, 1) for w in range(3)]
    addrs += [desc_addr(b, 0, 1) for b in (0, 1)] + [hdr_addr(b, Hdr.PRE) for b in (0, 1)]
    got, want = [], []
    stats = {"b2b": 0}

    sink = _rdata_sink(c, rng, 0.7, got)

    async def bench(ctx):
        now, last_take = 0, -2
        for i in range(400):
            addr = rng.choice(addrs)
            value = rng.getrandbits(32)
            if addr in (desc_addr(0, 0, 1), desc_addr(1, 0, 1)):
                value = rng.randrange(1 << DESC_BASE_BITS) | rng.randrange(8) << 16
            write = rng.random() < 0.7
            ctx.set(c.cfg.payload.addr, addr)
            ctx.set(c.cfg.payload.data, value)
            ctx.set(c.cfg.payload.write, write)
            ctx.set(c.cfg.valid, 0)
            idle_ready = ctx.get(c.cfg.ready)
            ctx.set(c.cfg.valid, 1)
            assert ctx.get(c.cfg.ready) == idle_ready, f"beat {i}: ready follows valid"
            while True:
                if rng.random() < 0.05:
                    ctx.set(c.lock, rng.random() < 0.3)
                    ctx.set(c.bank, rng.getrandbits(1))
                if ctx.get(c.cfg.ready):
                    break
                await ctx.tick()
                now += 1
            if write:
                model.cfg_write(addr, value)
            else:
                want.append(model.cfg_read(addr))
            await ctx.tick()
            stats["b2b"] += last_take == now - 1
            last_take = now
            now += 1
            if rng.random() < 0.3:
                ctx.set(c.cfg.valid, 0)
                for _ in range(rng.randint(1, 2)):
                    await ctx.tick()
                    now += 1
        ctx.set(c.cfg.valid, 0)
        ctx.set(c.lock, 0)
        for _ in range(6):
            await ctx.tick()
        while len(got) < len(want):
            await ctx.tick()
        assert got == want, f"seed {seed}: cfg reads"
        for bank in range(2):
            assert ctx.get(c.header[bank].pre) == model.banks[bank].header_word(Hdr.PRE)
        assert stats["b2b"] > 100, stats

    _sim(top, [bench], [sink])


class _LaneWithTable(Elaboratable):
    """A ``LutLane`` reading memories that hold ``st`` (one model bank) as bank 0, with the
    header registered by ``LutHeader`` as in the ``Lut``."""

    def __init__(self, st, deep):
        self.lane = LutLane(DEPTH, deep=deep)
        self.header = LutHeader()
        self.st = st

    def elaborate(self, platform):
        m = Module()
        st = self.st
        m.submodules.lane, m.submodules.header = ln, hs = self.lane, self.header
        rows = [int(st.coef[e, 0]) | int(st.coef[e, 1]) << 32 | int(st.coef[e, 2]) << 64
                for e in range(DEPTH)]
        descs = [int(d) for d in st.desc] * 2
        m.submodules.coef = coef = Memory(shape=96, depth=2 * DEPTH, init=rows + [0] * DEPTH)
        m.submodules.desc = desc = Memory(
            shape=DESC_BASE_BITS, depth=4 * MAX_BINADES,
            init=[d & ((1 << DESC_BASE_BITS) - 1) for d in descs])
        m.submodules.desc_k = desc_k = Memory(shape=3, depth=4 * MAX_BINADES,
                                              init=[d >> 16 & 7 for d in descs])
        m.submodules.desc_low = desc_low = Memory(shape=7, depth=4 * MAX_BINADES,
                                                  init=[0x7F >> (d >> 16 & 7) for d in descs])
        for half in range(2):
            rp = desc_k.read_port(domain="comb")
            m.d.comb += [rp.addr.eq(ln.k_addr[half]), ln.k_data[half].eq(rp.data)]
        drp, lrp = desc.read_port(domain="comb"), desc_low.read_port(domain="comb")
        crp = coef.read_port(domain="comb")
        m.d.comb += [drp.addr.eq(ln.desc_addr), lrp.addr.eq(ln.desc_addr),
                     ln.desc_base.eq(drp.data), ln.desc_low.eq(lrp.data),
                     crp.addr.eq(ln.coef_addr), ln.coef_data.eq(crp.data)]
        for reg, name in ((Hdr.MODE, "mode"), (Hdr.E_LO, "e_lo"), (Hdr.NB_NEG, "nb_neg"),
                          (Hdr.NB_POS, "nb_pos"), (Hdr.PRE, "pre"), (Hdr.POST, "post")):
            m.d.comb += getattr(hs.banks[0], name).eq(st.header_word(reg))
        m.d.comb += [hs.en.eq(ln.en), ln.s2_count.eq(1)]
        m.d.comb += [getattr(ln, n).eq(getattr(hs, n)) for n in (
            "s1_mode", "s1_is", "s1_sq", "fin_scaled", "fin_recip", "fin_log", "pre_q",
            "post_q", "s2_bank", "s2_e_lo", "s2_hi_neg", "s2_hi_pos")]
        return m


@pytest.mark.parametrize("func, deep", [("exp", False), ("reciprocal", True), ("log", False),
                                        ("rsqrt", True), ("tanh", False)])
def test_lut_lane_matches_lut_eval(func, deep):
    """A lane's results, ``latency_of(deep)`` enabled cycles after each element, under a random
    ``en``, are ``lut_eval``'s; a bypassed element leaves unchanged."""
    rng = random.Random(func)
    model = VectorEngineModel(1, DEPTH)
    model.load_table(0, compile_table(SHIPPED[func], depth=DEPTH, budget=48).writes(0))
    st = model.banks[0]
    top = _LaneWithTable(st, deep)
    ln = top.lane
    lat = latency_of(deep)
    zs = [rng.getrandbits(1) << 31 | rng.choice([rng.randint(110, 135), rng.randint(0, 255)])
          << 23 | rng.getrandbits(23) for _ in range(150)]
    byp = [rng.random() < 0.1 for _ in zs]
    want = [z if b else int(lut_eval(np.array([z], dtype=np.uint32), st)[0][0])
            for z, b in zip(zs, byp)]

    async def bench(ctx):
        ctx.set(ln.en, 1)                     # the header's registers take the bank first
        await ctx.tick()
        ys, i = [], 0                         # ``y`` after each enabled cycle
        while len(ys) < len(zs) + lat:
            en = rng.random() < 0.7
            ctx.set(ln.en, en)
            ctx.set(ln.z, zs[i] if i < len(zs) else 0)
            ctx.set(ln.bypass, byp[i] if i < len(zs) else 1)
            await ctx.tick()
            if en:
                ys.append(ctx.get(ln.y))
                i += 1
        for i, w in enumerate(want):
            g = ys[i + lat - 1]
            assert g == w, f"{func} deep={deep}: z={zs[i]:#010x} got {g:#010x} want {w:#010x}"

    _sim(top, [bench])
