"""AXI4LiteReadMux against the memory map: seeded random addresses (registers, unmapped words
inside and past the register block, windows) and random register values every cycle; ``resp``
one cycle and ``data`` two cycles after the address, as its contract states."""

import random

from amaranth.sim import Simulator

from rtl.bus.axi import RESP_DECERR, RESP_OKAY
from rtl.bus.axi_lite_read_mux import AXI4LiteReadMux, read_sources
from sim.memmap import MEMORY_MAP

SEED = 5703
CYCLES = 3000


def _model(mm, addr, values):
    """(data, resp) the map gives for a read of ``addr`` with register inputs ``values``."""
    for reg in mm.registers:
        if reg.offset >> 2 == (addr % (1 << mm.addr_width)) >> 2:
            if reg.access == "wo":
                return 0, RESP_OKAY
            if reg.access == "ro" and reg.value is not None:
                return reg.value, RESP_OKAY
            return values[reg.port] & ((1 << reg.width) - 1), RESP_OKAY
    return 0, RESP_DECERR


def test_read_mux_matches_map():
    mm = MEMORY_MAP
    rng = random.Random(SEED)
    dut = AXI4LiteReadMux(mm)
    sources = read_sources(mm)
    offsets = [reg.offset for reg in mm.registers]
    top = max(offsets) + 4
    fails = []

    async def tb(ctx):
        history = []
        for cycle in range(CYCLES):
            r = rng.random()
            if r < 0.7:
                addr = rng.choice(offsets)
            elif r < 0.85:
                addr = rng.randrange(top)
            else:
                addr = rng.randrange(1 << mm.addr_width)
            addr |= rng.getrandbits(2)
            values = {reg.port: rng.getrandbits(32) for reg in sources}
            ctx.set(dut.addr, addr)
            for reg in sources:
                ctx.set(getattr(dut, reg.port), values[reg.port] & ((1 << reg.width) - 1))
            await ctx.tick()
            history.append(_model(mm, addr, values))
            got_data, got_resp = ctx.get(dut.data), ctx.get(dut.resp)
            if got_resp != history[-1][1]:
                fails.append((cycle, hex(addr), "resp", got_resp, history[-1][1]))
            if len(history) >= 2 and got_data != history[-2][0]:
                fails.append((cycle, "data", hex(got_data), hex(history[-2][0])))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert not fails, f"seed {SEED}: {len(fails)} mismatches, first {fails[:3]}"
