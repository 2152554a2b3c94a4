"""iCEBreaker (Lattice iCE40UP5K, 12 MHz oscillator, FT2232H channel B serial) board top.

``python -m fpga.build icebreaker --config <name>``; configurations in :data:`BOARD`. Yosys
maps multipliers to the SB_MAC16 DSPs only with ``synth_ice40 -dsp`` (set here).
"""

from amaranth_boards.icebreaker import ICEBreakerPlatform

from .boards import Board, Config
from .demo import DemoRegisters
from .pll import ICE40ClockGen, ice40_pll
from .tensor_demo import TensorDemo

__all__ = ["BOARD", "clockgen"]

FIN = 12e6


def clockgen(freq):
    """A factory of the ``sync`` domain at ``freq`` (nearest PLL setting) from the 12 MHz
    oscillator pad; ``.freq`` is the frequency actually produced."""
    params = ice40_pll(FIN, freq)

    def make(platform):
        return ICE40ClockGen(params, clk_pin="clk12")
    make.freq = params.fout
    make.params = params
    return make


def _tensor_int8(rows, cols):
    def make():
        from sim.dtypes import Format
        return TensorDemo(rows, cols, {Format.INT8})
    return make


def _core(formats, **kwargs):
    def make():
        from rtl.core.top import NeuronCore
        from sim.dtypes import Format
        return NeuronCore(formats=tuple(Format[f] for f in formats), **kwargs)
    return make


#: The smallest core that still has an FP path: 2x2, INT8 and the two OCP FP8 formats, one
#: vector evaluation unit shared by both lanes, a 32-bit DMA with one window, small SBUF/PSUM.
_CORE2C = {"rows": 2, "cols": 2, "sbuf_depth": 256, "psum_depth": 64,
           "formats": ["INT8", "FP8_E4M3", "FP8_E5M2"], "lut_entries": 16, "pmem_depth": 64,
           "dma_windows": 1, "vector_units": 1}


CONFIGS = {
    "demo": Config("demo", DemoRegisters, 24e6, pes=1,
                   description="AXI4-Lite register block (link test, one multiplier)"),
    # The UP5K has 8 SB_MAC16: at one DSP per PE, 8 PEs at most.
    "tensor4x2i": Config("tensor4x2i", _tensor_int8(4, 2), 24e6, pes=8,
                         description="4x2 tensor engine, INT8 only, behind registers",
                         params={"rows": 4, "cols": 2, "formats": ["INT8"]}),
    # The smallest core; it does NOT fit the UP5K: its two vector lanes alone need about
    # twice the LUT4 and ten times the SB_MAC16 of one lane synthesized for iCE40 (docs/fpga.md).
    "core2i": Config("core2i", _core(["INT8"], rows=2, sbuf_depth=256, psum_depth=64,
                                     lut_entries=16, pmem_depth=64, dma_windows=1),
                     24e6, pes=4,
                     description="NeuronCore 2x2, INT8 only, SBUF 2x256, PSUM 2x64, LUT 16 "
                                 "(does NOT fit a UP5K)",
                     params={"rows": 2, "cols": 2, "sbuf_depth": 256, "psum_depth": 64,
                             "formats": ["INT8"], "lut_entries": 16, "pmem_depth": 64,
                             "dma_windows": 1}, bench=False),
    # core2i with FP8 and the compact vector engine (vector_units=1). It does NOT fit: about ten
    # times the UP5K's logic cells, four times its flip-flops (docs/fpga.md).
    "core2c": Config("core2c", _core(**_CORE2C), 24e6, pes=4,
                     description="NeuronCore 2x2, INT8 + FP8 (E4M3, E5M2), compact vector "
                                 "engine (1 unit), SBUF 2x256, PSUM 2x64, LUT 16 "
                                 "(does NOT fit a UP5K)",
                     params=dict(_CORE2C), bench=False, route=False),
}

BOARD = Board(name="icebreaker", platform=ICEBreakerPlatform, family="ice40", fin=FIN,
              configs=CONFIGS, default_config="tensor4x2i", make_clockgen=clockgen,
              synth_opts="-dsp", ram_bytes=4096,
              capacity={"COMB": 5280, "DSP": 8, "BRAM": 30, "SPRAM": 4})
