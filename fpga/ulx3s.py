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
        from sim.config import ENGINE_FORMATS
        return TensorDemo(rows, cols, ENGINE_FORMATS if formats is None else formats)
    return make


def _int8():
    from sim.dtypes import Format
    return {Format.INT8}


def _formats(*names):
    from sim.dtypes import Format
    return tuple(Format[n] for n in names)


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
    # The largest core by multipliers: one vector lane per row, so 4 rows. With the SBUF in
    # block RAM (one write port per partition, 92 DP16KD in all) yosys finishes, but it does
    # NOT fit: 65,980 LUT4 + 9,409 CCU2C = 92,148 TRELLIS_COMB of 83,640 (110 %), the four
    # vector lanes being about 55k of them (docs/fpga.md). 15 MHz because the lanes' FP32
    # units are combinational.
    "core4": Config("core4", _core(rows=4, sbuf_depth=1024, psum_depth=256), 15e6, pes=16,
                    description="NeuronCore 4x4, all formats, SBUF 4x1024, PSUM 4x256 "
                                "(does NOT fit an 85F: 110 % of the logic cells)",
                    params={"rows": 4, "cols": 4, "sbuf_depth": 1024, "psum_depth": 256},
                    bench=False),
    # core4 with a 64-word SBUF: the same logic, so it does not fit either.
    "core4s": Config("core4s", _core(rows=4, sbuf_depth=64, psum_depth=256), 15e6, pes=16,
                     description="NeuronCore 4x4, all formats, SBUF 4x64, PSUM 4x256",
                     params={"rows": 4, "cols": 4, "sbuf_depth": 64, "psum_depth": 256},
                     bench=False),
    # The core that fits: two rows = two vector lanes (about 27k logic cells), a 2x2 tensor
    # array with all six formats and three-stage PE multipliers and adders (for the clock:
    # 9 routed levels instead of 13 with two stages, scripts.logic_depth; the longer drain
    # costs nothing at 2 rows), SBUF 2 x 1024 words in block RAM. 50 MHz: a clock that any
    # placement of the core meets; ``--freq 100 --tmg-ripup`` with a seed sweep is the
    # 100 MHz build (docs/fpga.md).
    "core2": Config("core2", _core(rows=2, sbuf_depth=1024, psum_depth=256,
                                   tensor_add_stages=3, tensor_mul_stages=4), 50e6, pes=4,
                    description="NeuronCore 2x2, all formats, SBUF 2x1024, PSUM 2x256",
                    params={"rows": 2, "cols": 2, "sbuf_depth": 1024, "psum_depth": 256,
                            "tensor_add_stages": 3, "tensor_mul_stages": 4}),
    # The compact vector engine (``vector_units=1``: the lanes share one set of evaluation
    # units, each element beat takes ``rows`` cycles in the vector engine), with core2's
    # pipeline stages in the PEs: a 4x4 all-format core for the 85F.
    "core4c": Config("core4c", _core(rows=4, sbuf_depth=1024, psum_depth=256,
                                     tensor_add_stages=3, tensor_mul_stages=4, vector_units=1),
                     100e6, pes=16,
                     description="NeuronCore 4x4, all formats, compact vector engine (1 unit)",
                     params={"rows": 4, "cols": 4, "sbuf_depth": 1024, "psum_depth": 256,
                             "tensor_add_stages": 3, "tensor_mul_stages": 4,
                             "vector_units": 1}),
    # The 8x8 core with the compact vector engine, BF16 and FP8 operands, fused column
    # accumulation (``tensor_accumulate="fused"``: one FP32 normaliser per column instead of an
    # FP32 adder per PE; docs/tensor.md), core2's PE stages. Not routed by default
    # (``route=False``): its place and route takes longer than a benchmark run (docs/fpga.md).
    "core8c": Config("core8c", _core(rows=8, sbuf_depth=1024, psum_depth=256,
                                     formats=_formats("BF16", "FP8_E4M3", "FP8_E5M2"),
                                     tensor_add_stages=3, tensor_mul_stages=4, vector_units=1,
                                     tensor_accumulate="fused"),
                     100e6, pes=64,
                     description="NeuronCore 8x8, BF16 + FP8 (E4M3, E5M2), fused column "
                                 "accumulation, compact vector engine (1 unit)",
                     params={"rows": 8, "cols": 8, "sbuf_depth": 1024, "psum_depth": 256,
                             "formats": ["BF16", "FP8_E4M3", "FP8_E5M2"],
                             "tensor_add_stages": 3, "tensor_mul_stages": 4,
                             "vector_units": 1, "tensor_accumulate": "fused"},
                     bench=False, route=False),
    # Does not fit: 8 vector lanes need about 8 x 30 + 64 = 304 MULT18X18D (156 on the 85F).
    "core8": Config("core8", _core(rows=8, sbuf_depth=1024, psum_depth=256), 100e6, pes=64,
                    description="NeuronCore 8x8, all formats (does NOT fit an 85F)",
                    params={"rows": 8, "cols": 8, "sbuf_depth": 1024, "psum_depth": 256},
                    bench=False),
}

#: nextpnr's HeAP placer weighs timing 3x its default (30, criticality exponent 3 instead of
#: 2), which routes the core's netlists faster on the same seeds than the defaults (the
#: measurements are in results/fpga/HISTORY.md).
PLACER_OPTS = "--placer-heap-timingweight 30 --placer-heap-critexp 3"

BOARD = Board(name="ulx3s", platform=ULX3S_85F_Platform, family="ecp5", fin=FIN,
              configs=CONFIGS, default_config="core2", make_clockgen=clockgen,
              nextpnr_opts="--timing-allow-fail", ram_bytes=65536,
              placer_opts={"heap": PLACER_OPTS}, default_placer="heap",
              capacity={"COMB": 83640, "DSP": 156, "BRAM": 208})
