"""ULX3S (Lattice ECP5 LFE5U-85F, 25 MHz oscillator, FT231X USB serial) board top.

``python -m fpga.build ulx3s --config <name>``; configurations in :data:`BOARD`.
"""

from amaranth_boards.ulx3s import ULX3S_85F_Platform

from .boards import Board, Config
from .demo import DemoRegisters
from .pll import ECP5ClockGen, ecp5_pll
from .tensor_demo import TensorDemo

__all__ = ["BOARD", "clockgen"]

FIN = 25e6


def clockgen(freq):
    """A factory of the ``sync`` domain at ``freq`` (nearest PLL setting) from the 25 MHz
    oscillator; ``.freq`` is the frequency actually produced."""
    params = ecp5_pll(FIN, freq)

    def make(platform):
        return ECP5ClockGen(params, clk_pin="clk25")
    make.freq = params.fout
    make.params = params
    return make


def _tensor(rows, cols, formats=None):
    def make():
        from rtl.tensor.pe import ENGINE_FORMATS
        return TensorDemo(rows, cols, ENGINE_FORMATS if formats is None else formats)
    return make


def _int8():
    from sim.dtypes import Format
    return {Format.INT8}


def _core(**kwargs):
    def make():
        from rtl.core.top import NeuronCore
        return NeuronCore(**kwargs)
    return make


CONFIGS = {
    "demo": Config("demo", DemoRegisters, 100e6, pes=1,
                   description="AXI4-Lite register block (link test, one multiplier)"),
    "tensor8i": Config("tensor8i", lambda: _tensor(8, 8, _int8())(), 100e6, pes=64,
                       description="8x8 tensor engine, INT8 only, behind registers",
                       params={"rows": 8, "cols": 8, "formats": ["INT8"]}),
    "tensor8": Config("tensor8", _tensor(8, 8), 100e6, pes=64,
                      description="8x8 tensor engine, all formats, behind registers",
                      params={"rows": 8, "cols": 8, "formats": "all"}, bench=False),
    # The largest core by multipliers: one vector lane per row, so 4 rows (104 of 156
    # MULT18X18D after synthesis). It does NOT fit as built: its SBUF becomes 131,072
    # flip-flops (see core4s) and yosys failed in ABC9 (docs/fpga.md). 15 MHz because the
    # lanes' FP32 units are combinational.
    "core4": Config("core4", _core(rows=4, sbuf_depth=1024, psum_depth=256), 15e6, pes=16,
                    description="NeuronCore 4x4, all formats, SBUF 4x1024, PSUM 4x256 "
                                "(does NOT fit an 85F as built)",
                    params={"rows": 4, "cols": 4, "sbuf_depth": 1024, "psum_depth": 256},
                    bench=False),
    # core4 with a 64-word SBUF: the SBUF's partition memories have two write ports (DMA,
    # vector) and five read ports, which yosys cannot put into DP16KD, so they become flip-flops
    # (core4: 4 x 1024 x 32 = 131,072 of them, more than the 83,640 of an 85F; docs/fpga.md).
    "core4s": Config("core4s", _core(rows=4, sbuf_depth=64, psum_depth=256), 15e6, pes=16,
                     description="NeuronCore 4x4, all formats, SBUF 4x64 (flip-flops), PSUM 4x256",
                     params={"rows": 4, "cols": 4, "sbuf_depth": 64, "psum_depth": 256}),
    # Does not fit: 8 vector lanes need about 8 x 30 + 64 = 304 MULT18X18D (156 on the 85F).
    "core8": Config("core8", _core(rows=8, sbuf_depth=1024, psum_depth=256), 100e6, pes=64,
                    description="NeuronCore 8x8, all formats (does NOT fit an 85F)",
                    params={"rows": 8, "cols": 8, "sbuf_depth": 1024, "psum_depth": 256},
                    bench=False),
}

BOARD = Board(name="ulx3s", platform=ULX3S_85F_Platform, family="ecp5", fin=FIN,
              configs=CONFIGS, default_config="tensor8i", make_clockgen=clockgen,
              ram_bytes=65536)
