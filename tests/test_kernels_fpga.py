"""The ``fpga`` backend without a board: ``kernels.backends.loopback_host`` puts the board's
serial protocol (``fpga/host_serial.py`` ``SerialTransport`` and ``BoardMemory``, the bytes of
``docs/fpga.md``) in front of a fast core, so a kernel call goes through the same byte stream
as on a board (program, inputs, polls of STATUS, counters and outputs, one frame per word).
Its outputs are bit-exact against the reference simulator and its cycle count equals the
direct RTL run's. Skipped where the fast backend cannot be built."""

import ml_dtypes
import numpy as np
import pytest

from kernels.backends import BridgeLoopback, fast_backend, loopback_host
from kernels.lib import gemm_tn
from sim.config import CoreConfig

_NO_FAST = pytest.mark.skipif(fast_backend() is None, reason="fastsim not available")

#: The small core of tests/test_fastsim.py (one cached build serves both).
SMALL = CoreConfig(rows=2, sbuf_depth=1024, psum_depth=64, formats=("bf16",))


@_NO_FAST
def test_kernel_over_the_serial_protocol():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    ref = gemm_tn.run(w, x, config=SMALL)
    host = loopback_host(SMALL)
    try:
        run = gemm_tn.run(w, x, backend="fpga", host=host, config=SMALL)
    finally:
        host.port.core.close()
    assert run.outcome.backend == "fpga" and run.outcome.error is None
    assert np.array_equal(run.outputs[0].view(np.uint32), ref.outputs[0].view(np.uint32))
    # Every word crossed the link as a frame: the program and inputs in, the outputs out.
    port = host.port
    assert port.bytes_in >= 9 * (len(run.compiled.image.program) + w.size // 2)
    assert port.bytes_out >= 5 * ref.outputs[0].size
    direct = gemm_tn.run(w, x, backend="rtl", config=SMALL)
    assert run.cycles == direct.cycles > 0


class _Core:
    """A stand-in for a fast core that records what the bridge asks of it."""

    def __init__(self):
        from sim.host import BusError
        self.regs, self.ram, self.ran = {}, {}, 0
        bus_error = BusError
        core = self

        class T:
            def read32(self, addr):
                if addr == 0xFFFC:
                    raise bus_error(addr, 2, write=False)
                return core.regs.get(addr, 0)

            def write32(self, addr, value):
                core.regs[addr] = value

        class M:
            def read(self, addr, n):
                return bytes(core.ram.get(addr + i, 0) for i in range(n))

            def write(self, addr, data):
                for i, b in enumerate(data):
                    core.ram[addr + i] = b
        self.transport, self.memory = T(), M()

    def run(self, cycles):
        self.ran += cycles


def test_bridge_loopback_decodes_frames():
    from fpga.host_serial import RAM_WINDOW, BusError, SerialTransport
    core = _Core()
    port = BridgeLoopback(core, clocks_per_byte=10)
    link = SerialTransport(port)
    assert link.ping() == 1
    link.write32(0x10, 0xDEADBEEF)
    assert core.regs[0x10] == 0xDEADBEEF and link.read32(0x10) == 0xDEADBEEF
    link.write_block(RAM_WINDOW + 8, [1, 2, 3])
    assert core.ram[12] == 2 and link.read_block(RAM_WINDOW + 8, 3) == [1, 2, 3]
    with pytest.raises(BusError, match="SLVERR"):
        link.read32(0xFFFC)
    with pytest.raises(BusError, match="DECERR"):
        link.write32(0x10000, 1)
    assert link.ping() == 1
    assert core.ran == 10 * (port.bytes_in + port.bytes_out)
    with pytest.raises(OverflowError, match="overflow the bridge's 64-byte receive buffer"):
        port.write(bytes(65))
    with pytest.raises(ValueError, match="clocks_per_byte"):
        BridgeLoopback(core, clocks_per_byte=0)
