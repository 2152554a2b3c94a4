"""``python -m scripts.bench all``: every benchmark's record written, failures counted, the
report drawn once, with one job and with two (benchmarks replaced by instant stand-ins)."""

import json
import re
import types

import pytest

from scripts import bench, report


def _fake(name, fail=False):
    def run(args):
        if fail:
            raise RuntimeError(f"{name} broke")
        return {"value": name.upper(), "quick": args.quick}
    return types.SimpleNamespace(run=run)


@pytest.fixture
def fakes(monkeypatch):
    mods = {"aa": _fake("aa"), "bb": _fake("bb"), "cc": _fake("cc", fail=True)}
    monkeypatch.setattr(bench, "BENCHMARKS", tuple(mods))
    monkeypatch.setattr(bench, "LONGEST_FIRST", ("cc", "bb", "aa"))
    monkeypatch.setattr(bench, "_load", lambda name: mods.get(name))
    calls = []
    monkeypatch.setattr(report, "main", lambda argv: calls.append(argv))
    return calls


@pytest.mark.parametrize("jobs", [1, 2])
def test_all_writes_every_record(tmp_path, fakes, jobs):
    rc = bench.main(["all", "--out", str(tmp_path), "--jobs", str(jobs), "--quick"])
    assert rc == 1                                   # cc failed
    for name in ("aa", "bb"):
        rec = json.loads((tmp_path / f"{name}.json").read_text())
        assert rec["benchmark"] == name and rec["value"] == name.upper()
        assert rec["quick"] is True and rec["jobs"] == jobs
        assert "date" in rec and "machine" in rec and rec["wall_s"] >= 0
        assert rec["commit"] is None or len(rec["commit"]) >= 7
    bad = json.loads((tmp_path / "cc.json").read_text())
    assert "cc broke" in bad["error"]
    assert fakes == [["--results", str(tmp_path), "--training"]]   # not our README


def test_jobs_must_be_positive(tmp_path, fakes):
    with pytest.raises(SystemExit):
        bench.main(["all", "--out", str(tmp_path), "--jobs", "0"])


def test_unknown_benchmark_is_an_error(capsys):
    with pytest.raises(SystemExit):
        bench.main(["nosuch"])
    assert "benchmark must be one of" in capsys.readouterr().err


def test_every_benchmark_has_a_place_in_the_parallel_order():
    """``all --jobs N`` runs the benchmarks of LONGEST_FIRST: each of BENCHMARKS is there."""
    assert sorted(bench.LONGEST_FIRST) == sorted(bench.BENCHMARKS)


def test_bench_sim_variants():
    """``bench sim --cxx-opts`` items: level, compiler, PGO, model structure, Verilator
    options (``+V``, ``:`` for a space), the harness's falling edge (``+fall<mode>``) and
    the reset input (``+rstinput``); anything else is an error naming the item."""
    from scripts.bench_sim import _variant
    assert _variant("-O1") == ("-O1", False, None, None, (), "skip", True)
    assert _variant("-Oz+clang+merge") == ("-Oz", False, "clang", "merge", (), "skip", True)
    assert _variant("-O1+pgo+gcc+none") == ("-O1", True, "gcc", "none", (), "skip", True)
    assert _variant("-O2+clang+V-fno-expand+V--x-assign:fast") == \
        ("-O2", False, "clang", None, ("-fno-expand", "--x-assign", "fast"), "skip", True)
    assert _variant("-O2+falleval+rstinput") == ("-O2", False, None, None, (), "eval", False)
    for bad in ("-O1+V", "-O1+V-x:", "-O1+icc", "-O1+gcc+clang", "-O1+merge+pe",
                "-O1+fallnever", "-O1+falleval+fallcheck", "-O1+rstinput+rstinput"):
        with pytest.raises(ValueError, match="cxx-opts items must be .*not " +
                           re.escape(repr(bad))):
            _variant(bad)


def test_bench_sim_bad_arguments():
    from scripts import bench_sim
    args = types.SimpleNamespace(rows="8", paths="icarus,xcelium", skip="", repeat=1,
                                 cxx_opts="", rounds=1)
    with pytest.raises(ValueError, match="paths must be a subset of icarus, verilator, "
                                         "fastsim, not 'xcelium'"):
        bench_sim.run(args)
    args.paths, args.cxx_opts, args.rounds = "fastsim", "-O1", 0
    with pytest.raises(ValueError, match="rounds must be a positive integer, not 0"):
        bench_sim.run(args)
