"""The host windows of the core: CodeWindows (``rtl/core/code_windows.py``: PROG and UCODE to
the sequencer's write ports) and LutWindow (``rtl/core/lut_window.py``: the LUT window and the
TABLE writes to the vector engine's configuration port), against models written from their
docstrings, with random accesses and random stalls on every stream."""

import random

import pytest

from rtl.core.code_windows import UCODE_MAP_BASE, CodeWindows
from rtl.core.lut_window import LutWindow
from sim import isa
from sim.memmap import lut_cfg_address

from amaranth_tb import simulate


@pytest.mark.parametrize("pmem_depth", [16, 256])
def test_code_windows_random(pmem_depth):
    dut = CodeWindows(pmem_depth)
    rng = random.Random(pmem_depth)
    prog_words = 1 << len(dut.prog.addr)
    ucode_words = 1 << len(dut.ucode.addr)
    writes = {"pmem": 0, "ucode": 0, "map": 0}

    async def main(ctx):
        lo = {"prog": 0, "ucode": 0}
        for cycle in range(3000):
            acc = {}
            for name, words in (("prog", prog_words), ("ucode", ucode_words)):
                port = getattr(dut, name)
                edge = [0, 1, 2 * pmem_depth - 1, 2 * pmem_depth, 2 * isa.UCODE_DEPTH - 1,
                        UCODE_MAP_BASE, UCODE_MAP_BASE + 255, UCODE_MAP_BASE + 256, words - 1]
                addr = rng.choice(edge) if rng.random() < 0.3 else rng.randrange(words)
                addr = min(addr, words - 1)
                we = int(rng.random() < 0.5)
                wdata = rng.getrandbits(32)
                for sig, v in ((port.addr, addr), (port.we, we), (port.wdata, wdata),
                               (port.wstrb, 0xF), (port.re, rng.getrandbits(1))):
                    ctx.set(sig, v)
                acc[name] = (addr, we, wdata)
                assert ctx.get(port.rdata) == 0
            addr, we, wdata = acc["prog"]
            want = {"pmem_wr_en": int(we and addr & 1 and addr >> 1 < pmem_depth)}
            if want["pmem_wr_en"]:
                want.update(pmem_wr_addr=addr >> 1, pmem_wr_data=lo["prog"] | wdata << 32)
            uaddr, uwe, udata = acc["ucode"]
            want["ucode_wr_en"] = int(uwe and uaddr & 1 and uaddr < 2 * isa.UCODE_DEPTH)
            if want["ucode_wr_en"]:
                want.update(ucode_wr_addr=uaddr >> 1, ucode_wr_data=lo["ucode"] | udata << 32)
            want["map_wr_en"] = int(uwe and UCODE_MAP_BASE <= uaddr < UCODE_MAP_BASE + 256)
            if want["map_wr_en"]:
                want.update(map_wr_addr=uaddr & 0xFF,
                            map_wr_data=udata & ((1 << isa.MAP_BITS) - 1))
            for name, value in want.items():
                got = ctx.get(getattr(dut, name))
                assert got == value, f"cycle {cycle}: {name} {got:#x} != {value:#x}"
            for k in writes:
                writes[k] += want[k + "_wr_en"]
            for name, (a, w, d) in acc.items():
                if w and not a & 1:
                    lo[name] = d
            await ctx.tick()

    simulate(dut, main)
    assert all(writes.values()), writes


@pytest.mark.parametrize("seed", [1, 2])
def test_lut_window_random(seed):
    """Window accesses and TABLE writes at random, ``cfg.ready`` stalls at random: every
    access taken while none is held reaches ``cfg`` once, after the TABLE writes offered
    meanwhile; one while an access is held is ignored; read data is held for the window."""
    dut = LutWindow()
    rng = random.Random(seed)
    words = 1 << len(dut.window.addr)
    counts = {"window": 0, "table": 0, "ignored": 0}

    async def main(ctx):
        pend = None                     # the held access: (addr, data, write)
        rdata = 0
        table = None                    # the TABLE write offered: (addr, data)
        for cycle in range(3000):
            page = rng.getrandbits(len(dut.page))
            a = rng.randrange(words)
            we = int(rng.random() < 0.2)
            re = int(not we and rng.random() < 0.2)
            wdata = rng.getrandbits(32)
            for sig, v in ((dut.page, page), (dut.window.addr, a), (dut.window.we, we),
                           (dut.window.re, re), (dut.window.wdata, wdata)):
                ctx.set(sig, v)
            # a TABLE write stays offered until taken (stream rules)
            if table is None and rng.random() < 0.3:
                table = (rng.getrandbits(16), rng.getrandbits(32))
            ctx.set(dut.table.valid, table is not None)
            if table is not None:
                ctx.set(dut.table.p.addr, table[0])
                ctx.set(dut.table.p.data, table[1])
                ctx.set(dut.table.p.write, 1)
            ready = int(rng.random() < 0.6)
            ctx.set(dut.cfg.ready, ready)
            rv = int(rng.random() < 0.1)
            rd = rng.getrandbits(32)
            ctx.set(dut.rdata.valid, rv)
            ctx.set(dut.rdata.payload, rd)

            assert ctx.get(dut.rdata.ready) == 1
            assert ctx.get(dut.window.rdata) == rdata, f"seed {seed} cycle {cycle}: rdata"
            assert ctx.get(dut.table.ready) == ready
            want = (table[0], table[1], 1) if table is not None else pend
            assert ctx.get(dut.cfg.valid) == (want is not None), f"cycle {cycle}: cfg.valid"
            if want is not None:
                got = tuple(ctx.get(s) for s in (dut.cfg.p.addr, dut.cfg.p.data, dut.cfg.p.write))
                assert got == want, f"seed {seed} cycle {cycle}: cfg {got} != {want}"
            was = pend
            if ready and table is not None:
                table = None
                counts["table"] += 1
            elif ready and pend is not None:
                pend = None
                counts["window"] += 1
            if was is not None and (we or re):
                counts["ignored"] += 1
            if (we or re) and was is None:
                pend = (lut_cfg_address(page, a), wdata, we)
            if rv:
                rdata = rd
            await ctx.tick()

    simulate(dut, main)
    assert all(counts.values()), counts
