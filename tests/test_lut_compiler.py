"""The table compiler (sim/lut.py), the accuracy benchmark's measure on a few tables, and the
parameter checks of the vector engine's generators."""

import argparse
import math

import numpy as np
import pytest

from sim.lut import TableSpec, compile_table
from sim.tables import SHIPPED
from sim.vector import MAX_BINADES


def test_compile_errors():
    spec = SHIPPED["tanh"]
    with pytest.raises(TypeError, match="depth must be an integer, not 'x'"):
        compile_table(spec, depth="x")
    with pytest.raises(ValueError, match=r"depth must be in 4..4096, not 2"):
        compile_table(spec, depth=2)
    wide = TableSpec("wide", np.tanh, center=-40, top_neg=0, top_pos=0)
    with pytest.raises(ValueError, match=f"wide: a side can have 0..{MAX_BINADES} binades, not 40"):
        compile_table(wide)
    with pytest.raises(ValueError, match="do not fit in 8 entries"):
        compile_table(spec, depth=8)
    bad = TableSpec("bad", np.tanh, center=-8, top_neg=4, top_pos=4, under="sideways")
    with pytest.raises(ValueError, match="under/over must be 'linear', 'saturate'"):
        compile_table(bad)


def test_allocator_respects_budget_and_improves():
    spec = SHIPPED["tanh"]
    errs = []
    for budget in (32, 64, 128, 512):
        t = compile_table(spec, depth=512, budget=budget)
        assert t.used <= budget
        errs.append(t.est_error)
    assert errs == sorted(errs, reverse=True) and errs[-1] < 2.0 ** -16
    assert t.used < 512          # stops once every binade meets the target


def test_new_function_in_a_few_lines():
    """A function that is not shipped: arctan, saturating to +-pi/2."""
    spec = TableSpec("atan", np.arctan, center=-8, top_neg=5, top_pos=5, under=-math.pi / 2,
                     over=math.pi / 2, domain=(-31.0, 31.0))
    from scripts.bench_lut import measure
    r = measure(spec, compile_table(spec, depth=512))
    assert r["goal_met"], r


@pytest.mark.parametrize("name", ["exp", "reciprocal", "rsqrt", "log", "tanh", "identity"])
def test_bench_measure_goal(name):
    from scripts.bench_lut import measure
    from sim.tables import table
    r = measure(SHIPPED[name], table(name))
    assert r["goal_met"] and r["within_2ulp"] == 1.0, r


def test_bench_run_quick():
    from scripts.bench_lut import run
    out = run(argparse.Namespace(json=True, quick=True, sizes="64", functions="relu,sqrt",
                                 resources=False))
    assert out["summary"]["goal_met"] == ["relu", "sqrt"]


def test_engine_parameter_checks():
    from rtl.vector.engine import VectorEngine
    from rtl.vector.lut import Lut
    with pytest.raises(TypeError, match="lanes must be an integer, not '4'"):
        VectorEngine(lanes="4")
    with pytest.raises(ValueError, match="lanes must be an integer from 1 to 128, not 0"):
        VectorEngine(lanes=0)
    with pytest.raises(ValueError, match="depth must be a power of two from 8 to 1024, not 100"):
        VectorEngine(lanes=4, depth=100)
    with pytest.raises(TypeError, match="depth must be an integer, not 8.0"):
        Lut(lanes=4, depth=8.0)
    with pytest.raises(ValueError, match="n_rand must be an integer from 1 to 32, not 0"):
        VectorEngine(lanes=4, n_rand=0)
    assert VectorEngine(lanes=4, depth=64).depth == 64
    assert Lut(lanes=2).lanes == 2


def test_rtl_cmd_layout_matches_sim():
    from rtl.vector.engine import CMD_LAYOUT
    from sim.vector import CMD_BITS, CMD_FIELDS
    assert CMD_LAYOUT.size == CMD_BITS
    pos = 0
    for name, width in CMD_FIELDS:
        f = CMD_LAYOUT[name]
        assert (f.offset, f.width) == (pos, width), name
        pos += width
