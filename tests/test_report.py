"""scripts/report.py: the results table, the README markers and the plots from benchmark JSONs."""

import json

import pytest

from scripts import report


def _records():
    point = lambda n: {"N": n, "tiles": 4, "utilization": 0.5 + n / 2048,      # noqa: E731
                       "steady_utilization": 1.0, "fill_latency": 17, "drain_latency": 17}
    return {
        "tensor": {"benchmark": "tensor", "date": "2026-01-01", "machine": "m",
                   "throughput": {"8x8_int8": {"points": [point(n) for n in (8, 64, 512)]}},
                   "ecp5": {"engine_8x8_int8": {"LUT4_per_PE": 17.5, "FF_per_PE": 71,
                                                "MULT18X18D_per_PE": 1}}},
        "lut": {"benchmark": "lut", "date": "2026-01-01", "machine": "m",
                "ecp5_8_lanes": {"cells": {"LUT4": 123, "CCU2C": 4, "MULT18X18D": 5,
                                           "DP16KD": 6}}},
        "core": {"benchmark": "core", "error": "Traceback ..."},
        "sim": {"benchmark": "sim", "design": "NeuronCore 4x4",
                "simulators": {"icarus": {"cycles_per_s": 73.0}}},
    }


def test_table_reads_core_and_sim_records_as_the_benchmarks_write_them():
    core = {"benchmark": "core", "core": "8x8", "simulator": "per workload",
            "workloads": {"gemm_stream": {"cycles": 479854, "tensor_busy_fraction": 0.923,
                                          "dma_bytes_per_cycle": 1.9974,
                                          "simulator": "verilator"}}}
    text = "\n".join(report.table({"core": core, "sim": _records()["sim"]}))
    assert "8x8 gemm_stream (verilator)" in text and "479854, 92.3 %, 1.9974" in text
    assert "icarus: simulated core cycles per second (NeuronCore 4x4) | 73 |" in text


def test_table_reports_only_measured_figures(tmp_path):
    for name, rec in _records().items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    (tmp_path / "junk.json").write_text("{not json")
    recs = report.load(tmp_path)
    assert set(recs) == {"tensor", "lut", "core", "sim"}
    text = "\n".join(report.table(recs))
    assert "utilization at N=512" in text and "75.0 %, 100.0 %" in text
    assert "123 / 4 / 5 / 6" in text                    # 8-lane cells read from "cells"
    assert "| vector | LUT accuracy | not measured |" in text         # no functions
    assert "| core | end-to-end workloads | not measured |" in text   # error -> not measured
    assert "| fpga | bitstreams | not measured |" in text             # missing -> not measured
    assert "2026-01-01 on m" in text


def test_project_readme_links_the_generated_table():
    text = (report.ROOT / "README.md").read_text()
    assert "results/RESULTS.md" in text


def test_plots_written_for_present_records(tmp_path):
    pytest.importorskip("matplotlib")
    recs = {k: v for k, v in _records().items() if k == "tensor"}
    written = report.plots(recs, tmp_path, training=False)
    assert any(str(w).endswith("tensor_utilization.png") for w in written)
    assert (tmp_path / "tensor_utilization.png").stat().st_size > 1000


def test_table_and_plot_read_the_fpga_record_as_bench_fpga_writes_it(tmp_path):
    pytest.importorskip("matplotlib")
    rec = {"benchmark": "fpga", "results": [
        {"board": "ulx3s", "config": "core2", "fmax_mhz": 17.67, "lut4": 33986, "ff": 9869,
         "dsp": 36, "bram": 66, "target_mhz": 15.0, "peak_gmacs_at_fmax": 0.071}]}
    text = "\n".join(report.table({"fpga": rec}))
    assert "ulx3s core2: Fmax, LUT4, FF, DSP, BRAM | 17.67 MHz, 33986, 9869, 36, 66" in text
    assert report.plot_fpga(rec, tmp_path / "fpga.png")
