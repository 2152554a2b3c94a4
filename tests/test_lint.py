"""verilator --lint-only -Wall on generated units: no warning of a rule without a justified waiver
(scripts/lint.py). The big designs (core, tensor, vector) take minutes: marked long; their
figures are in docs/core.md and the README."""

import pytest

from scripts.lint import WAIVERS, lint_component

SMALL = ["pe", "encoder", "decoder", "fp32_add", "prng", "sequencer", "dma", "watchdog",
         "axi_lite", "uart_bridge"]
BIG = ["core", "tensor", "vector", "psum", "rounding"]


@pytest.mark.parametrize("name", SMALL)
def test_lint_clean(name, tmp_path):
    counts, unwaived = lint_component(name, out_dir=tmp_path)
    assert unwaived == [], "\n".join(unwaived[:20])
    assert set(counts) <= set(WAIVERS)


@pytest.mark.long
@pytest.mark.parametrize("name", BIG)
def test_lint_clean_big(name, tmp_path):
    counts, unwaived = lint_component(name, out_dir=tmp_path)
    assert unwaived == [], "\n".join(unwaived[:20])


def test_undefined_value_detector():
    """The x-literal check finds yosys's spellings of an undefined value and nothing else."""
    from scripts.lint import undefined_values
    for bad in ("assign a = 4'bxx01;", "assign a = 8'hx;", "x = 'x;", "assign b = 1'bx;"):
        assert undefined_values(bad), bad
    for good in ("assign a = 32'd5;", "assign xs = 1'h0;", "wire [7:0] x8;",
                 "a = 16'h00ff; // 'x", '(* src = "a\'x" *)', "assign \\x$1 = 8'hff;"):
        assert not undefined_values(good), good


@pytest.mark.parametrize("rows,cols", [(2, 2), (3, 2)])
def test_tensor_has_no_undefined_value(rows, cols):
    """No x literal in the floating-point tensor engine (every format): a value the netlist
    left undefined would be resolved arbitrarily by Verilator's --x-assign or by synthesis."""
    from amaranth.back import verilog
    from rtl.tensor.engine import TensorEngine
    from scripts.lint import undefined_values
    from sim.dtypes import Format
    formats = {Format.INT8, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4, Format.BF16,
               Format.FP16}
    text = verilog.convert(TensorEngine(rows, cols, formats, mul_stages=1, add_stages=2),
                           name="top", emit_src=False)
    assert undefined_values(text) == []


@pytest.mark.parametrize("mul_stages,add_stages", [(0, 0), (1, 2), (4, 3)])
def test_lint_clean_fused_tensor(mul_stages, add_stages, tmp_path):
    """The tensor engine with fused column accumulation (row decoders, fused PEs, column
    normalisers) at three pipeline depths: no warning outside the waivers, no x literal."""
    from amaranth.back import verilog
    from rtl.tensor.engine import TensorEngine
    from scripts.lint import lint_file
    from sim.dtypes import Format
    formats = {Format.INT8, Format.FP8_E4M3, Format.FP8_E5M2, Format.BF16}
    path = tmp_path / "lint_fused.v"
    path.write_text(verilog.convert(
        TensorEngine(3, 2, formats, mul_stages=mul_stages, add_stages=add_stages,
                     accumulate="fused"), name="lint_fused", emit_src=False))
    counts, unwaived = lint_file(path, "lint_fused")
    assert unwaived == [], "\n".join(unwaived[:20])
    assert set(counts) <= set(WAIVERS)
