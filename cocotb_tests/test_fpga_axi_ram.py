"""cocotb tests of the board RAM behind AXI4 (fpga/axi_ram.py), driven by cocotbext-axi's
AxiMaster against a bytearray model: random INCR bursts (full width and narrow), unaligned
starts, random back-pressure on W, B and R, concurrent reads and writes, DECERR above the end."""

import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from cocotb_tests.common.clock import reset, settle_comb, start_clock
from cocotb_tests.common.config import dut_config


def pauses(rng, p):
    while True:
        yield int(rng.random() < p)


async def setup(dut, rng, pause):
    from cocotbext.axi import AxiBus, AxiMaster
    await settle_comb(dut)
    start_clock(dut)
    master = AxiMaster(AxiBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
    if pause:
        master.write_if.aw_channel.set_pause_generator(pauses(rng, pause))
        master.write_if.w_channel.set_pause_generator(pauses(rng, pause))
        master.write_if.b_channel.set_pause_generator(pauses(rng, pause))
        master.read_if.ar_channel.set_pause_generator(pauses(rng, pause))
        master.read_if.r_channel.set_pause_generator(pauses(rng, pause))
    await reset(dut)
    return master


@cocotb.test(timeout_time=20, timeout_unit="ms")   # a lost beat fails, never hangs
@cocotb.parametrize(pause=[0.0, 0.5])
async def test_random_bursts(dut, pause):
    """Random write and read bursts compared with a bytearray model."""
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    rng = random.Random(cocotb.RANDOM_SEED + int(10 * pause))
    dut._log.info(f"seed {cocotb.RANDOM_SEED} pause={pause}")
    master = await setup(dut, rng, pause)
    # The memory keeps its contents from earlier tests of the same run: clear it first.
    await master.write(0, bytes(size))
    model = bytearray(size)
    for i in range(30):
        length = rng.choice([1, 2, 3, nbytes, 4 * nbytes, 17 * nbytes + 3, 64])
        addr = rng.randrange(0, size - length)
        if rng.random() < 0.5:
            data = rng.randbytes(length)
            await master.write(addr, data)
            dut._log.debug(f"write {length} at 0x{addr:x}")
            model[addr:addr + length] = data
        else:
            got = (await master.read(addr, length)).data
            assert got == bytes(model[addr:addr + length]), \
                f"read {length} at 0x{addr:x}: got {got.hex()} want {model[addr:addr + length].hex()}"
    # Narrow transfers: byte-wide beats.
    for i in range(4):
        addr = rng.randrange(0, size - 8)
        data = rng.randbytes(6)
        await master.write(addr, data, size=0)
        model[addr:addr + 6] = data
        got = (await master.read(addr, 6, size=0)).data
        assert got == data


@cocotb.test(timeout_time=20, timeout_unit="ms")   # a lost beat fails, never hangs
async def test_concurrent_and_decerr(dut):
    """Reads and writes issued together all complete and agree with the model; a burst above
    the end answers DECERR and does not write."""
    from cocotbext.axi import AxiResp
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    master = await setup(dut, rng, 0.3)
    base = rng.randrange(0, size // 2, nbytes)
    blocks = [rng.randbytes(8 * nbytes) for _ in range(4)]
    writes = [cocotb.start_soon(master.write(base + 8 * nbytes * i, b))
              for i, b in enumerate(blocks)]
    for w in writes:
        await w
    reads = [cocotb.start_soon(master.read(base + 8 * nbytes * i, 8 * nbytes))
             for i in range(4)]
    writes2 = [cocotb.start_soon(master.write(base + size // 4 + 8 * i, bytes([i] * 8)))
               for i in range(4)]
    for r, b in zip(reads, blocks):
        assert (await r).data == b
    for w in writes2:
        await w
    for i in range(4):
        assert (await master.read(base + size // 4 + 8 * i, 8)).data == bytes([i] * 8)
    resp = await master.write(size, b"\x55" * nbytes)
    assert resp.resp == AxiResp.DECERR
    got = await master.read(size, nbytes)
    assert got.resp == AxiResp.DECERR
    assert (await master.read(0, nbytes)).resp == AxiResp.OKAY


@cocotb.test(timeout_time=20, timeout_unit="ms")   # a lost beat fails, never hangs
async def test_host_port(dut):
    """The AXI4-Lite host port reads what bursts wrote and vice versa, with byte strobes,
    while AXI4 bursts run at the same time; DECERR above the end."""
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    rng = random.Random(cocotb.RANDOM_SEED + 2)
    master = await setup(dut, rng, 0.3)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "host_"), dut.clk, dut.rst)
    await master.write(0, bytes(size))
    model = bytearray(size)
    # Host writes words (some with partial strobes), bursts read them back.
    for i in range(12):
        addr = rng.randrange(0, size // 2, 4)
        data = rng.randbytes(rng.choice([1, 2, 4]))
        await host.write(addr, data)
        model[addr:addr + len(data)] = data
    got = (await master.read(0, size // 2)).data
    assert got == bytes(model[:size // 2])
    # Bursts in the upper half while the host reads and writes the lower half.
    upper = rng.randbytes(size // 4)
    burst = cocotb.start_soon(master.write(size // 2, upper))
    for i in range(8):
        addr = rng.randrange(0, size // 2, 4)
        word = rng.randbytes(4)
        await host.write(addr, word)
        model[addr:addr + 4] = word
        assert (await host.read(addr, 4)).data == word
    await burst
    model[size // 2:size // 2 + len(upper)] = upper
    for addr in (size // 2, size // 2 + 4 * rng.randrange(len(upper) // 4)):
        assert (await host.read(addr, 4)).data == bytes(model[addr:addr + 4])
    assert (await master.read(0, size)).data == bytes(model)
    assert (await host.write(size, b"\x01\x02\x03\x04")).resp == AxiResp.DECERR
    assert (await host.read(size + 4, 4)).resp == AxiResp.DECERR



# --- R channel driven cycle by cycle: back-pressure patterns and latency -------------------

def _documented(pattern):
    """A number stated in AxiRam's docstring (so that the tests measure what it promises)."""
    import re

    from fpga.axi_ram import AxiRam
    found = re.search(pattern, " ".join(AxiRam.__doc__.split()))
    assert found, f"no {pattern!r} in the AxiRam docstring"
    return int(found.group(1))


def _rready(rng, pattern):
    """``rready`` per cycle: always high, random, mostly low, long low and high runs, or
    toggling every cycle."""
    if pattern == "always":
        while True:
            yield 1
    elif pattern in ("random", "sparse"):
        p = 0.5 if pattern == "random" else 0.1
        while True:
            yield int(rng.random() < p)
    elif pattern == "runs":
        while True:
            yield from [0] * rng.randint(1, 40)
            yield from [1] * rng.randint(1, 20)
    elif pattern == "toggle":
        while True:
            yield 1
            yield 0
    raise ValueError(pattern)


async def _direct_setup(dut):
    """Clock, reset, the AR/R and host inputs idle; the memory filled with a distinct word
    per address (written through AXI4 W bursts). Returns (word list, host master)."""
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiMasterWrite, AxiWriteBus
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    await settle_comb(dut)
    start_clock(dut)
    for name in ("arvalid", "araddr", "arlen", "arsize", "arburst", "arid", "arlock",
                 "arcache", "arprot", "rready"):
        getattr(dut, f"axi__{name}").value = 0
    writer = AxiMasterWrite(AxiWriteBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "host_"), dut.clk, dut.rst)
    await reset(dut)
    words = [(0x9E3779B1 * (i + 1) ^ (i << 7)) & ((1 << 8 * nbytes) - 1)
             for i in range(size // nbytes)]
    await writer.write(0, b"".join(w.to_bytes(nbytes, "little") for w in words))
    return words, host


def _burst_beats(words, nbytes, size, addr, length, arsize, fixed, arid):
    """The R beats (rdata, rid, rresp, rlast) of one burst: the bus word at each beat's
    address (narrow beats too), 0 with DECERR at or above the end."""
    beats = []
    for k in range(length):
        a = addr if fixed else addr + k * (1 << arsize)
        err = a >= size
        beats.append((0 if err else words[a // nbytes], arid, 3 if err else 0,
                      int(k == length - 1)))
    return beats


def _random_bursts(rng, n, size, nbytes, addr_width):
    """(addr, beats, arsize, fixed, id): in range, above the end, across the end, FIXED,
    narrow, lengths 1 to 256."""
    top = 1 << addr_width
    bursts = []
    for _ in range(n):
        length = rng.choice([1, 1, 2, 3, 4, 7, 16, 17, 33, 256])
        arsize = rng.choice([(nbytes - 1).bit_length()] * 4 + [0, 1])
        step = 1 << arsize
        fixed = rng.random() < 0.15
        span = step if fixed else length * step
        kind = rng.random()
        if kind < 0.7:
            addr = rng.randrange(0, size - span + 1, step)
        elif kind < 0.85 or span <= step:
            addr = rng.randrange(size, top - span + 1, step)
        else:
            addr = size - step * rng.randint(1, length - 1)
        bursts.append((addr, length, arsize, fixed, rng.getrandbits(1)))
    return bursts


async def _read_bursts(dut, rng, words, bursts, rready_gen, p_ar, log=None):
    """Drive AR with ``bursts`` (arvalid held until taken, back to back when ``p_ar`` is 1)
    and R with ``rready_gen``; every beat is checked against the model in order, and R must
    hold still while rvalid is high and rready low. Returns the cycle of each AR handshake and
    of each R handshake."""
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    total = sum(b[1] for b in bursts)
    pending = list(bursts)
    expected = []
    ar = None
    held = None            # the beat shown last cycle with rready low: must still be there
    ar_cycles, r_cycles = [], []
    cycle = 0
    while len(r_cycles) < total:
        cycle += 1
        assert cycle < 300 * total + 1000, \
            f"stuck: {len(r_cycles)} of {total} beats after {cycle} cycles"
        if ar is None and pending and rng.random() < p_ar:
            ar = pending.pop(0)
        if ar is not None:
            addr, length, arsize, fixed, arid = ar
            dut.axi__araddr.value = addr
            dut.axi__arlen.value = length - 1
            dut.axi__arsize.value = arsize
            dut.axi__arburst.value = 0 if fixed else 1
            dut.axi__arid.value = arid
        dut.axi__arvalid.value = int(ar is not None)
        rready = next(rready_gen)
        dut.axi__rready.value = rready
        await ReadOnly()
        if ar is not None and dut.axi__arready.value:
            expected += _burst_beats(words, nbytes, size, *ar)
            ar_cycles.append(cycle)
            ar = None
        if dut.axi__rvalid.value:
            beat = (int(dut.axi__rdata.value), int(dut.axi__rid.value),
                    int(dut.axi__rresp.value), int(dut.axi__rlast.value))
            assert held is None or beat == held, \
                f"cycle {cycle}: R changed from {held} to {beat} while rready was low"
            if rready:
                n = len(r_cycles)
                assert n < len(expected), f"cycle {cycle}: beat {beat} with no burst"
                assert beat == expected[n], \
                    f"cycle {cycle}: beat {n} is {beat}, want {expected[n]}"
                r_cycles.append(cycle)
            held = None if rready else beat
        else:
            assert held is None, f"cycle {cycle}: rvalid fell before the beat {held} was taken"
        await RisingEdge(dut.clk)
    dut.axi__arvalid.value = 0
    dut.axi__rready.value = 0
    return ar_cycles, r_cycles


async def _host_traffic(dut, host, rng, words, done):
    """Host reads (some out of range) and writes of the words already there, until
    ``done``: the host port shares the read port and address register with the bursts."""
    from cocotbext.axi import AxiResp
    cfg = dut_config()
    size, nbytes = cfg["size_bytes"], cfg["data_width"] // 8
    count = 0
    while not done[0]:
        if rng.random() < 0.2:
            addr = rng.randrange(size, size + 1024, 4)
            got = await host.read(addr, 4)
            assert got.resp == AxiResp.DECERR and got.data == bytes(4), f"host read 0x{addr:x}"
        else:
            addr = rng.randrange(0, size, 4)
            word = words[addr // nbytes] >> (8 * (addr % nbytes)) & 0xFFFFFFFF
            if rng.random() < 0.3:
                await host.write(addr, word.to_bytes(4, "little"))
            else:
                got = await host.read(addr, 4)
                assert got.resp == AxiResp.OKAY and got.data == word.to_bytes(4, "little"), \
                    f"host read 0x{addr:x}: {got.data.hex()}, want {word:08x}"
        count += 1
    return count


@cocotb.test(timeout_time=50, timeout_unit="ms")   # a lost beat fails, never hangs
@cocotb.parametrize(rready=["always", "random", "sparse", "runs", "toggle"],
                    p_ar=[1.0, 0.1], with_host=[False, True])
async def test_r_backpressure(dut, rready, p_ar, with_host):
    """Random bursts (in range, above and across the end, FIXED, narrow, 1-256 beats) issued
    back to back or with gaps, under each rready pattern, with or without host reads and
    writes in between: every beat once, in order, with its ID, resp and rlast; R held while
    stalled; one beat per cycle within a burst while rready stays high."""
    cfg = dut_config()
    seed = cocotb.RANDOM_SEED + 1000 * ["always", "random", "sparse", "runs",
                                        "toggle"].index(rready) + int(10 * p_ar) + with_host
    rng = random.Random(seed)
    dut._log.info(f"seed {cocotb.RANDOM_SEED} (stream seed {seed}) rready={rready} "
                  f"p_ar={p_ar} host={with_host}")
    words, host = await _direct_setup(dut)
    bursts = _random_bursts(rng, 40, cfg["size_bytes"], cfg["data_width"] // 8,
                            cfg["addr_width"])
    done = [False]
    traffic = (cocotb.start_soon(_host_traffic(dut, host, random.Random(seed + 7), words, done))
               if with_host else None)
    ar_cycles, r_cycles = await _read_bursts(dut, rng, words, bursts, _rready(rng, rready), p_ar)
    done[0] = True
    if traffic is not None:
        dut._log.info(f"{await traffic} host transactions")
    if rready == "always":
        k = 0
        for addr, length, *_ in bursts:
            beats = r_cycles[k:k + length]
            assert beats == list(range(beats[0], beats[0] + length)), \
                f"burst at 0x{addr:x}: beats in cycles {beats}, not one per cycle"
            k += length


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_read_latency(dut):
    """The first R beat comes as many cycles after the AR handshake as the docstring says,
    then one per cycle; back-to-back bursts; the host read's latency likewise."""
    axi_latency = _documented(r"first read beat is valid (\d+) cycles after the AR handshake")
    host_latency = _documented(r"Read latency (\d+) cycles")
    cfg = dut_config()
    nbytes = cfg["data_width"] // 8
    words, host = await _direct_setup(dut)
    await ClockCycles(dut.clk, 3)
    rng = random.Random(cocotb.RANDOM_SEED)
    size_log = (nbytes - 1).bit_length()
    bursts = [(0x40, 4, size_log, False, 1), (0x100, 3, size_log, False, 0)]
    ar_cycles, r_cycles = await _read_bursts(dut, rng, words, bursts, _rready(rng, "always"),
                                             1.0)
    dut._log.info(f"AR handshakes in cycles {ar_cycles}, R beats in {r_cycles}")
    assert r_cycles[0] - ar_cycles[0] == axi_latency
    assert r_cycles[4] - ar_cycles[1] == axi_latency
    assert r_cycles[:4] == list(range(r_cycles[0], r_cycles[0] + 4))
    # Back to back: the second AR is taken once the first burst's last beat has left the
    # read port, so its first beat follows the first burst's last one after a gap.
    dut._log.info(f"gap between bursts: {r_cycles[4] - r_cycles[3]} cycles")
    assert r_cycles[4] - r_cycles[3] == _documented(
        r"(\d+) cycles between their beats when back to back")
    # The host port, through cocotbext-axi's master (rready high), timed by a monitor.
    seen = {}

    async def monitor():
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            if dut.host__arvalid.value and dut.host__arready.value:
                seen.setdefault("ar", cycle)
            if dut.host__rvalid.value and dut.host__rready.value:
                seen.setdefault("r", cycle)

    watch = cocotb.start_soon(monitor())
    got = await host.read(0x84, 4)
    watch.cancel()
    assert got.data == (words[0x84 // nbytes] & 0xFFFFFFFF).to_bytes(4, "little")
    dut._log.info(f"host: AR in cycle {seen['ar']}, R in cycle {seen['r']}")
    assert seen["r"] - seen["ar"] == host_latency


if not cocotb.is_simulation:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIG = {"size_bytes": 4096, "data_width": 32, "addr_width": 16}

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fpga_axi_ram(simulator):
        import hashlib
        import pathlib

        from fpga.axi_ram import AxiRam
        # The runner's Verilog cache key covers rtl/ and sim/ only: add this unit's source.
        src = pathlib.Path(__file__).resolve().parents[1] / "fpga" / "axi_ram.py"
        config = dict(CONFIG, src=hashlib.sha256(src.read_bytes()).hexdigest()[:12])
        run_cocotb(lambda: AxiRam(CONFIG["size_bytes"], data_width=CONFIG["data_width"],
                                  addr_width=CONFIG["addr_width"]),
                   name="fpga_axi_ram", config=config,
                   test_module="cocotb_tests.test_fpga_axi_ram", simulator=simulator)
