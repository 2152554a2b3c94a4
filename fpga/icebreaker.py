"""iCEBreaker (Lattice iCE40UP5K, 12 MHz oscillator, FT2232H channel B serial) board top.

``python -m fpga.build icebreaker --config <name>``; configurations in :data:`BOARD`. Yosys
maps multipliers to the SB_MAC16 DSPs only with ``synth_ice40 -dsp`` (set here).
"""

from amaranth_boards.icebreaker import ICEBreakerPlatform

from .boards import Board, Config
from .demo import DemoRegisters
from .pll import ICE40ClockGen, ice40_pll

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


CONFIGS = {
    "demo": Config("demo", DemoRegisters, 24e6, pes=1,
                   description="AXI4-Lite register block (link test, one multiplier)"),
}

BOARD = Board(name="icebreaker", platform=ICEBreakerPlatform, family="ice40", fin=FIN,
              configs=CONFIGS, default_config="demo", make_clockgen=clockgen,
              synth_opts="-dsp", ram_bytes=8192)
