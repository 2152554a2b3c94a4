"""Plots and the results table from the benchmark JSONs: ``python -m scripts.report``.

Reads ``results/<benchmark>.json`` (written by ``python -m scripts.bench all``, which calls this
module at the end) and writes:

* ``results/tensor_utilization.png``: utilization (overall and steady state) against N per
  tensor-engine configuration;
* ``results/lut_error.png``: per shipped function, the fraction of BF16 inputs within 1 ULP and
  the maximum error in ULP;
* ``results/fpga.png``: Fmax and LUT4 per board and configuration;
* ``results/sr_training.png``: loss curves FP32 / BF16-RNE / BF16-SR (``scripts.sr_training``),
  made again only when missing or with ``--training``;
* ``results/RESULTS.md``: one markdown table of the headline figures, each with the JSON file
  and key it comes from, and the date and machine of the run (the README links it).

A benchmark whose JSON is missing or holds an ``error`` is listed as "not measured"; nothing
here invents a figure.
"""

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"

__all__ = ["load", "plots", "table", "main"]


def load(results=RESULTS):
    """``{benchmark: dict}`` of every readable ``results/*.json`` benchmark record."""
    out = {}
    for path in sorted(pathlib.Path(results).glob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and "benchmark" in rec:
            out[rec["benchmark"]] = rec
    return out


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ok(rec):
    return rec is not None and "error" not in rec


def plot_tensor(rec, path):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, r in rec.get("throughput", {}).items():
        pts = sorted(r["points"], key=lambda p: p["N"])
        ns = [p["N"] for p in pts]
        ax.plot(ns, [100 * p["utilization"] for p in pts], "o-",
                label=f"{name} overall (fill, drain, first load)")
        ax.plot(ns, [100 * p["steady_utilization"] for p in pts], "s--",
                label=f"{name} steady state")
    ax.axhline(98, color="grey", lw=0.8, ls=":", label="goal 98 % (steady, N >= 8 x rows)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (moving columns per tile), tiles streamed back to back")
    ax.set_ylabel("PE utilization (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Tensor engine: utilization vs matrix shape (cocotb, generated Verilog)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _lut_rows(rec):
    rows = []
    for fn, sizes in rec.get("functions", {}).items():
        size = max(sizes, key=int)
        r = sizes[size]
        rows.append((fn, int(size), r))
    return rows


def plot_lut(rec, path):
    plt = _plt()
    rows = _lut_rows(rec)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    names = [f"{fn}\n({r['entries']})" for fn, _, r in rows]
    x = range(len(rows))
    ax1.bar(x, [100 * r["within_1ulp"] for _, _, r in rows], color="tab:blue")
    ax1.axhline(99, color="grey", lw=0.8, ls=":")
    ax1.set_ylabel("inputs within 1 ULP (%)")
    ax1.set_ylim(95, 100.5)
    ax2.bar(x, [r["max_ulp"] for _, _, r in rows], color="tab:orange")
    ax2.axhline(2, color="grey", lw=0.8, ls=":")
    ax2.set_ylabel("max error (BF16 ULP)")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, rotation=60, fontsize=7)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("Activation LUT vs correctly rounded BF16, every finite BF16 input in range "
                 "(table entries in brackets)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _fpga_rows(rec):
    """(board, config, row) of every routed build in the ``results`` list that
    ``scripts.bench_fpga.run`` writes."""
    return [(r["board"], r["config"], r) for r in rec.get("results") or []
            if isinstance(r, dict) and r.get("fmax_mhz") and "board" in r and "config" in r]


def plot_fpga(rec, path):
    rows = _fpga_rows(rec)
    if not rows:
        return False
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    labels = [f"{b}\n{c}" for b, c, _ in rows]
    x = range(len(rows))
    ax1.bar(x, [r["fmax_mhz"] for _, _, r in rows], color="tab:green")
    ax1.set_ylabel("Fmax (MHz, nextpnr)")
    ax2.bar(x, [r.get("lut4", 0) for _, _, r in rows], color="tab:purple")
    ax2.set_ylabel("LUT4")
    for ax in (ax1, ax2):
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("FPGA builds (yosys + nextpnr from PyPI)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plots(recs, results=RESULTS, training=None):
    """Write every plot whose data is there; return the list of files written.

    ``training``: True re-runs the SR training demo, None runs it only when its plot is
    missing, False never (tests)."""
    results = pathlib.Path(results)
    written = []
    if _ok(recs.get("tensor")) and recs["tensor"].get("throughput"):
        plot_tensor(recs["tensor"], results / "tensor_utilization.png")
        written.append("tensor_utilization.png")
    if _ok(recs.get("lut")) and recs["lut"].get("functions"):
        plot_lut(recs["lut"], results / "lut_error.png")
        written.append("lut_error.png")
    if _ok(recs.get("fpga")) and plot_fpga(recs["fpga"], results / "fpga.png"):
        written.append("fpga.png")
    if training or (training is None and not (results / "sr_training.png").exists()):
        from scripts import sr_training
        sr_training.main(["--out", str(results / "sr_training.png")])
        written.append("sr_training.png")
    return written


def _get(rec, *keys):
    for k in keys:
        if not isinstance(rec, dict) or k not in rec:
            return None
        rec = rec[k]
    return rec


def _pct(v):
    return "n/a" if v is None else f"{100 * v:.1f} %"


def table(recs):
    """The headline figures as markdown lines (figure, value, source)."""
    lines = ["| area | figure | value | source |", "|---|---|---|---|"]

    def row(area, what, value, src):
        lines.append(f"| {area} | {what} | {value} | `{src}` |")

    t = recs.get("tensor")
    if _ok(t):
        for name, r in t.get("throughput", {}).items():
            pts = sorted(r["points"], key=lambda p: p["N"])
            big = pts[-1]
            row("tensor", f"{name}: utilization at N={big['N']} ({big['tiles']} tiles), "
                f"steady state", f"{_pct(big['utilization'])}, {_pct(big['steady_utilization'])}",
                f"tensor.json throughput.{name}")
            row("tensor", f"{name}: fill / drain latency (cycles)",
                f"{big['fill_latency']} / {big['drain_latency']}", f"tensor.json throughput.{name}")
        for key, r in (t.get("ecp5") or {}).items():
            if key.startswith("engine_") and isinstance(r, dict):
                row("tensor", f"ECP5 {key[7:]} per PE: LUT4 / FF / MULT18X18D",
                    f"{r['LUT4_per_PE']} / {r['FF_per_PE']} / {r['MULT18X18D_per_PE']}",
                    f"tensor.json ecp5.{key}")
    else:
        row("tensor", "throughput", "not measured", "tensor.json")
    s = recs.get("sr")
    if _ok(s):
        v = s.get("fp16_1024_plus_half_x2048", {})
        row("rounding", "FP16 1024 + 0.5 x 2048 (exact 2048): RNE, SR mean",
            f"{v.get('rne')}, {v.get('sr_mean')}", "sr.json fp16_1024_plus_half_x2048")
        h = s.get("harmonic_rne_stagnation", {})
        row("rounding", "harmonic series stagnates under RNE (FP16, BF16)",
            f"{_get(h, 'fp16', 'value')}, {_get(h, 'bf16', 'value')}",
            "sr.json harmonic_rne_stagnation")
    else:
        row("rounding", "SR statistics", "not measured", "sr.json")
    lu = recs.get("lut")
    if _ok(lu):
        rows = _lut_rows(lu)
        if rows:
            worst1 = min(r["within_1ulp"] for _, _, r in rows)
            worst = max(r["max_ulp"] for _, _, r in rows)
            row("vector", f"LUT: {len(rows)} functions, worst fraction within 1 BF16 ULP, "
                "worst max ULP", f"{_pct(worst1)}, {worst}", "lut.json functions")
        d = lu.get("default")
        if isinstance(d, dict):
            mx = d.get("max_ulp", {})
            worst_fn = max(mx, key=mx.get) if mx else None
            row("vector", f"LUT at the default core's {d['lut_entries']} entries: functions "
                "meeting the goal, worst fraction within 1 ULP, worst max ULP",
                f"{len(d['goal_met'])} of {len(d['goal_met']) + len(d['goal_missed'])}, "
                f"{_pct(d['worst_within_1ulp'])}, "
                + (f"{mx[worst_fn]} ({worst_fn})" if worst_fn else "1"), "lut.json default")
        else:
            row("vector", "LUT accuracy", "not measured", "lut.json functions")
        for key, lanes in (("ecp5_1_lane", "1 lane"), ("ecp5_8_lanes", "8 lanes")):
            res = lu.get(key)
            if isinstance(res, dict):
                cells = res.get("cells", res)
                row("vector", f"ECP5 {lanes}: LUT4 / CCU2C / MULT18X18D / DP16KD",
                    f"{cells.get('LUT4')} / {cells.get('CCU2C')} / {cells.get('MULT18X18D')} / "
                    f"{cells.get('DP16KD')}", f"lut.json {key}.cells")
    else:
        row("vector", "LUT accuracy", "not measured", "lut.json")
    c = recs.get("core")
    if _ok(c):
        for name, r in (c.get("workloads") or {}).items():
            if isinstance(r, dict) and r.get("cycles") is not None:
                row("core", f"{c.get('core', '')} {name} ({r.get('simulator')}): cycles, "
                    "tensor busy, DMA B/cycle", f"{r['cycles']}, "
                    f"{_pct(r.get('tensor_busy_fraction'))}, {r.get('dma_bytes_per_cycle')}",
                    f"core.json workloads.{name}")
    else:
        row("core", "end-to-end workloads", "not measured", "core.json")
    m = recs.get("sim")
    if _ok(m):
        for simname, r in (m.get("simulators") or {}).items():
            rate = r.get("cycles_per_s") if isinstance(r, dict) else None
            if rate:
                row("simulation", f"{simname}: simulated core cycles per second "
                    f"({m.get('design', 'core')})", f"{rate:.0f}",
                    f"sim.json simulators.{simname}")
    else:
        row("simulation", "cycles per second", "not measured", "sim.json")
    f = recs.get("fpga")
    if _ok(f) and _fpga_rows(f):
        for board, cfg, r in _fpga_rows(f):
            row("fpga", f"{board} {cfg}: Fmax, LUT4, FF, DSP, BRAM",
                f"{r['fmax_mhz']} MHz, {r.get('lut4')}, {r.get('ff')}, {r.get('dsp')}, "
                f"{r.get('bram')}", f"fpga.json results[{board}/{cfg}]")
    else:
        row("fpga", "bitstreams", "not measured", "fpga.json")
    dates = sorted({f"{r.get('date')} on {r.get('machine')}"
                    + (f", commit {r['commit']}" if r.get("commit") else "")
                    for r in recs.values() if isinstance(r, dict) and r.get("date")})
    head = ["From the benchmark records in `results/*.json` (written by `python -m scripts.bench "
            "all`, or one benchmark's `--json` output saved there); runs of " +
            "; ".join(dates or ["no run yet"]) + ". Plots: `results/*.png`.", ""]
    return head + lines


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m scripts.report", description=__doc__.split("\n")[0])
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--training", action="store_true", help="re-run the SR training demo")
    args = p.parse_args(argv)
    recs = load(args.results)
    written = plots(recs, args.results, training=True if args.training else None)
    lines = table(recs)
    (pathlib.Path(args.results) / "RESULTS.md").write_text(
        "# Results\n\n" + "\n".join(lines) + "\n")
    print(json.dumps({"plots": written, "table": str(pathlib.Path(args.results) / "RESULTS.md")},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
