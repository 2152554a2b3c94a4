"""The cocotb runner's own checks (no simulation): bad simulator names and bad Verilator
C++ optimisation flags are refused before any Verilog is generated."""

import pytest

from cocotb_tests.common.runner import run_cocotb


def _never_built():
    raise AssertionError("the design must not be elaborated when the arguments are bad")


def test_unknown_simulator():
    with pytest.raises(ValueError, match="simulator must be one of icarus, verilator"):
        run_cocotb(_never_built, name="x", test_module="x", simulator="xsim")


@pytest.mark.parametrize("flag", ["-O9", "O0", "-O0 -g", "-march=native"])
def test_bad_cxx_opt(monkeypatch, flag):
    monkeypatch.setenv("VERILATOR_CXX_OPT", flag)
    with pytest.raises(ValueError, match="VERILATOR_CXX_OPT must be a C\\+\\+ optimisation"):
        run_cocotb(_never_built, name="x", test_module="x", simulator="verilator")

