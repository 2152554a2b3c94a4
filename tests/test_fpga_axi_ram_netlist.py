"""The board RAM's block RAM output reaches only flip-flops in the ECP5 netlist (yosys
``synth_ecp5``, every port behind a register; a few seconds, in the default run): the R beats' and the
host's read words are registered straight out of the DP16KD, with no LUT after its 5.8 ns
clock-to-out (it was one LUT to the DMA's ``buf`` and the bridge's ``reply``, 10.91 / 10.14 ns
routed, core2 f2a5594 seed 2), and yosys maps the read enable onto the DP16KD's clock enable
instead of emulating it with a hold multiplexer on the output."""

import pytest


@pytest.mark.parametrize("data_width", [pytest.param(32, marks=pytest.mark.long), 64])
def test_block_ram_output_reaches_only_registers(data_width):
    from fpga.axi_ram import AxiRam
    from scripts.unit_fmax import unit_depth
    paths = unit_depth(lambda: AxiRam(16384, data_width=data_width, addr_width=32),
                       f"axi_ram_dw{data_width}")
    from_ram = [p for p in paths if p["path"] and p["path"][0].startswith("dut.mem.")]
    late = [(p["end"], p["path"]) for p in from_ram if len(p["path"]) > 1]
    assert not late, f"logic after the block RAM: {late[:4]}"
    # The R stage's and the host's registers: one per data bit each.
    assert len(from_ram) >= 2 * data_width
