"""cocotb tests of the board RAM behind AXI4 (fpga/axi_ram.py), driven by cocotbext-axi's
AxiMaster against a bytearray model: random INCR bursts (full width and narrow), unaligned
starts, random back-pressure on W, B and R, concurrent reads and writes, DECERR above the end."""

import random

import cocotb

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
