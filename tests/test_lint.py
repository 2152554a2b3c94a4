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
