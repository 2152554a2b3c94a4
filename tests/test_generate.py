"""The command-line generator: help, list, one-line errors, Verilog + JSON output."""

import json
import subprocess
import sys

import pytest

from rtl.generate import COMPONENTS, main


def run(*args):
    return subprocess.run([sys.executable, "-m", "rtl.generate", *args],
                          capture_output=True, text=True, timeout=300)


def test_help():
    proc = run("--help")
    assert proc.returncode == 0
    assert "--list" in proc.stdout and "--out" in proc.stdout and "--name" in proc.stdout


def test_list_names_every_component():
    proc = run("--list")
    assert proc.returncode == 0
    for name in COMPONENTS:
        assert name in proc.stdout


@pytest.mark.parametrize("args, needle", [
    (["--rows", "x"], "--rows: must be an integer"),
    (["--rows", "-1"], "--rows: must be a non-negative integer"),
    (["--formats", "int9"], "unknown format 'int9'"),
    (["nosuchunit"], "component must be one of"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_option_is_one_line(args, needle):
    proc = run(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_option_that_does_not_apply(capsys):
    assert main(["fp32_add", "--rows", "4", "--out", "build/test-generate"]) == 2
    err = capsys.readouterr().err
    assert "--rows does not apply to 'fp32_add'" in err


def test_emits_verilog_and_json(tmp_path):
    proc = run("tensor", "--rows", "2", "--cols", "2", "--out", str(tmp_path), "--name", "te")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "te.v").read_text()
    assert "module te" in text
    desc = json.loads((tmp_path / "te.json").read_text())
    assert desc["config"]["rows"] == 2 and desc["config"]["cols"] == 2
    names = {p["name"] for p in desc["ports"]}
    assert "clk" in names or any(n.startswith("moving") for n in names)


def test_core_pipeline_options(tmp_path):
    """The FPGA core2 shape from the command line: the stage options reach NeuronCore."""
    assert main(["core", "--rows", "2", "--cols", "2", "--formats", "bf16", "--add-stages", "2",
                 "--mul-stages", "2", "--out", str(tmp_path), "--name", "c2"]) == 0
    desc = json.loads((tmp_path / "c2.json").read_text())
    assert desc["config"]["tensor_add_stages"] == 2
    assert desc["config"]["tensor_mul_stages"] == 2
    proc = run("core", "--mul-stages", "5", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "tensor_mul_stages must be an integer from 1 to 4, not 5" in proc.stderr
