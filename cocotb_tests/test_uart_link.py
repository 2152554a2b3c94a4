"""The board top without clock and pins (fpga/top.py HostLink: UART bridge, address decode,
on-chip RAM, payload) driven through its serial lines by the unchanged host transport
(fpga/host_serial.py SerialTransport and BoardMemory, blocking code in a cocotb bridge thread),
exactly as a host drives a board. The payload is the tensor engine behind registers
(fpga/tensor_demo.py, 4x4 INT8): an INT8 matmul computed through the link is compared with
numpy."""

import random

import cocotb
import numpy as np
from cocotb.task import bridge

from cocotb_tests.common.clock import reset, settle_comb, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.tb import logged_seed
from cocotb_tests.test_uart import PERIOD_NS, UartLine, gap_pattern
from cocotb_tests.test_uart_bridge import SimSerialPort
from fpga.host_serial import RAM_WINDOW, BoardMemory, BusError, SerialTransport

TENSOR_DEMO_ID = 0x4E43_5444
INT8 = 6
CTRL, STATUS = 0x008, 0x00C


def matmul_over_link(link, stationary, moving, rows, cols):
    """stationary[K, M].T @ moving[K, N] through the register interface of TensorDemo."""
    K, M = stationary.shape
    N = moving.shape[1]

    def stage(vec):
        words = [0] * rows
        for k, v in enumerate(vec):
            words[k] = int(v) & 0xFF          # INT8 low-aligned in a 16-bit lane
        link.write_block(0x100, words)

    for m in range(M):
        stage(stationary[:, m])
        link.write32(CTRL, 1 | (int(m == M - 1) << 1) | (INT8 << 4))
    result = np.zeros((cols, N), dtype=np.int64)
    n_out = 0
    for n in range(N):
        stage(moving[:, n])
        link.write32(CTRL, 4 | (int(n == N - 1) << 3))
        # Drain results as they appear (the engine freezes while one waits).
        while n_out < N and link.read32(STATUS) & 4:
            result[:, n_out] = link.read_block(0x200, cols)
            link.write32(CTRL, 1 << 8)
            n_out += 1
    for _ in range(200):
        if n_out == N:
            break
        if link.read32(STATUS) & 4:
            result[:, n_out] = link.read_block(0x200, cols)
            link.write32(CTRL, 1 << 8)
            n_out += 1
    assert n_out == N, f"only {n_out} of {N} result beats arrived"
    return result.astype(np.uint32).view(np.int32)[:M]


@cocotb.test()
async def test_link_end_to_end(dut):
    """ID/shape registers, the on-chip RAM through BoardMemory (unaligned, DECERR past its
    end), and INT8 matmuls on the tensor engine, all over the simulated serial line."""
    cfg = dut_config()
    seed = logged_seed(dut)
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed % (1 << 32))
    await settle_comb(dut)
    start_clock(dut, PERIOD_NS)
    dut.rx.value = 1
    await reset(dut)
    line = UartLine(dut.clk, dut.rx, dut.tx, cfg["divisor"], rng=rng,
                    gap=gap_pattern("random"))
    cocotb.start_soon(line.monitor())
    port = SimSerialPort(line, timeout_bits=2000)
    rows = cols = cfg["rows"]
    ram = cfg["ram_bytes"]
    blob = rng.randbytes(61)
    tiles = [(nrng.integers(-128, 128, (rows, cols)), nrng.integers(-128, 128, (rows, cfg["n"])))
             for _ in range(cfg["tiles"])]
    tiles[0][0][0, 0], tiles[0][1][0, 0] = -128, -128        # the extreme product

    def host_program():
        link = SerialTransport(port, window=cfg["rx_depth"], frame_timeout=0)
        out = {"version": link.ping(), "id": link.read32(0), "shape": link.read32(4)}
        mem = BoardMemory(link)
        mem.write(3, blob)
        out["blob"] = mem.read(3, len(blob))
        try:
            link.read32(RAM_WINDOW + ram)
        except BusError as e:
            out["decerr"] = e.resp
        out["results"] = [matmul_over_link(link, s, mv, rows, cols) for s, mv in tiles]
        return out

    out = await bridge(host_program)()
    assert out["version"] == 1
    assert out["id"] == TENSOR_DEMO_ID
    assert out["shape"] & 0xFFFF == (rows - 1) | ((cols - 1) << 8)
    assert out["blob"] == blob
    assert out["decerr"] == 3
    for (s, mv), got in zip(tiles, out["results"]):
        want = (s.T.astype(np.int64) @ mv.astype(np.int64)).astype(np.int32)
        assert np.array_equal(got, want), f"stationary\n{s}\nmoving\n{mv}\ngot\n{got}\nwant\n{want}"
    assert not line.errors, line.errors
    assert int(dut.link_error.value) == 0


if not cocotb.is_simulation:
    import hashlib
    import pathlib

    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIG = {"divisor": 6, "rows": 4, "ram_bytes": 1024, "rx_depth": 64, "timeout": 2000,
              "tiles": 1, "n": 2}

    def _link(cfg):
        from fpga.tensor_demo import TensorDemo
        from fpga.top import HostLink
        from sim.dtypes import Format
        return HostLink(TensorDemo(cfg["rows"], cfg["rows"], {Format.INT8}),
                        divisor=cfg["divisor"], timeout=cfg["timeout"],
                        ram_bytes=cfg["ram_bytes"], rx_depth=cfg["rx_depth"])

    def _run(simulator, config):
        # The runner's Verilog cache key covers rtl/ and sim/ only: add fpga/'s sources.
        root = pathlib.Path(__file__).resolve().parents[1] / "fpga"
        h = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(root.glob("*.py"))))
        run_cocotb(lambda: _link(config), name="uart_link",
                   config=dict(config, src=h.hexdigest()[:12]),
                   test_module="cocotb_tests.test_uart_link", simulator=simulator)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_uart_link(simulator):
        _run(simulator, CONFIG)

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_uart_link_long(simulator):
        _run(simulator, dict(CONFIG, tiles=3, n=7))
