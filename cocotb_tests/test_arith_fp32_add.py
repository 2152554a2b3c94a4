"""cocotb tests of ``rtl.arith.fp32_add.FP32Adder`` against ``sim.formats.fp32_add``.

Edge cases (every pair of ``F32_EDGES``: NaN, Inf, +-0, subnormals, max finite, ties around
1.0) and a seeded random mix (``add_stimulus``: alignment, half-ULP ties, cancellation, FTZ and
overflow regions), through a wrapper of ``lanes`` adders; pipelined configurations run with
``en`` low on random cycles and check the output on every cycle.
"""

import numpy as np

import cocotb

from cocotb_tests.common.config import dut_config
from cocotb_tests.test_arith_common import LANES, add_stimulus, check_vectors, edge_pairs, seed
from sim.formats import fp32_add


def _run(dut, a, b, label, rng):
    cfg = dut_config()
    return check_vectors(dut, lanes=cfg["lanes"], stages=cfg["stages"],
                         inputs={"a": (a, 32), "b": (b, 32)}, expected=fp32_add(a, b),
                         en_prob=cfg.get("en_prob", 1.0), rng=rng, label=label)


@cocotb.test()
async def fp32_add_edges(dut):
    """Every ordered pair of FP32 edge values."""
    a, b = edge_pairs()
    n = await _run(dut, a, b, "edges", np.random.default_rng(seed()))
    cocotb.log.info("fp32_add edges: %d vectors, 0 mismatches", n)


@cocotb.test()
async def fp32_add_random(dut):
    """Seeded random operand mix (``n_random`` vectors)."""
    s = seed()
    rng = np.random.default_rng(s)
    a, b = add_stimulus(rng, dut_config()["n_random"])
    n = await _run(dut, a, b, f"random(seed={s})", rng)
    cocotb.log.info("fp32_add random: %d vectors, 0 mismatches", n)


def _wrapper(lanes, stages):
    from rtl.arith.fp32_add import FP32Adder
    from rtl.arith.lanes import ArithLanes
    return ArithLanes(lambda: FP32Adder(stages), lanes, inputs={"a": 32, "b": 32},
                      outputs={"o": 32}, shared={"en": 1})


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    def _test(simulator, stages, n_random, en_prob):
        lanes = LANES[simulator]
        cfg = {"lanes": lanes, "stages": stages, "n_random": n_random, "en_prob": en_prob}
        run_cocotb(lambda: _wrapper(lanes, stages), name=f"fp32_add_l{lanes}_s{stages}",
                   config=cfg, test_module="cocotb_tests.test_arith_fp32_add",
                   simulator=simulator)

    @pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=pytest.mark.long),
                                           "verilator"])
    def test_fp32_add(simulator):
        """Edge pairs and 100,000 seeded random pairs, 2 stages, en low 25% of cycles."""
        _test(simulator, 2, 100_000, 0.75)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fp32_add_s3(simulator):
        """The 3-stage cut placement: edge pairs and 5,000 random pairs, en low half the time."""
        _test(simulator, 3, 5_000, 0.5)

    @pytest.mark.long
    @pytest.mark.parametrize("stages", [0, 1, 4])
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_fp32_add_long(simulator, stages):
        _test(simulator, stages, 1_000_000, 0.8)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
