"""ULX3S (Lattice ECP5 LFE5U-85F, 25 MHz oscillator, FT231X USB serial) board top.

``python -m fpga.build ulx3s --config <name>``; configurations in :data:`BOARD`.
"""

from amaranth_boards.ulx3s import ULX3S_85F_Platform

from .boards import Board, Config
from .demo import DemoRegisters
from .pll import ECP5ClockGen, ecp5_pll

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


CONFIGS = {
    "demo": Config("demo", DemoRegisters, 100e6, pes=1,
                   description="AXI4-Lite register block (link test, one multiplier)"),
}

BOARD = Board(name="ulx3s", platform=ULX3S_85F_Platform, family="ecp5", fin=FIN,
              configs=CONFIGS, default_config="demo", make_clockgen=clockgen,
              ram_bytes=65536)
