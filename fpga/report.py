"""Parse the logs of a build into one report: Fmax after routing, the critical path's start and
end, and the resources (yosys cell counts and nextpnr's device utilisation).

* ``<name>.tim`` (nextpnr's ``--log``): the last ``Max frequency for clock`` line per clock is
  the post-route figure; the last ``Critical path report for clock`` block names the path;
  ``Device utilisation`` gives the placed cells.
  The last ``Slack histogram`` (printed after routing) gives every timing end point's slack at
  the constrained clock, in bins; :func:`endpoints_slower_than` reads from it how many end
  points a faster clock would fail (a range, because a ``+`` in a bin stands for 1 to
  ``legend - 1`` end points).
* ``<name>.timing.json`` (nextpnr's ``--report`` with ``--detailed-timing-report``, which
  the board builds ask for): the routed arrival time of every timing end point (flip-flop,
  block RAM, DSP and distributed RAM inputs), from which :func:`endpoint_arrivals` and
  :func:`endpoint_summary` count exactly the end points a faster clock would fail, and name
  them by module.
* ``<name>.rpt`` (yosys' ``-l``): the cell counts of the ``stat`` at the end of synthesis.
"""

import json
import re

__all__ = ["GOALS_MHZ", "parse_nextpnr_log", "parse_slack_histogram", "endpoints_slower_than",
           "endpoint_arrivals", "endpoint_summary", "module_of", "parse_yosys_log",
           "make_report"]

#: Fmax goals of issue 9 for a board's default core, post-route, by FPGA family.
GOALS_MHZ = {"ecp5": 100.0, "ice40": 24.0}

_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz\s+\((PASS|FAIL) "
                   r"at ([\d.]+) MHz\)")
_UTIL = re.compile(r"^Info:\s+([A-Za-z0-9_$]+):\s+(\d+)/\s*(\d+)\s+(\d+)%")
_CRIT = re.compile(r"Critical path report for clock '([^']+)' \(posedge -> posedge\)")
_PATH_LINE = re.compile(r"^Info:\s+(\S+)\s+([\d.-]+)\s+([\d.-]+)\s+(Source|Net)\s+(\S+)")
_HIST_LEGEND = re.compile(r"^Info:\s+legend: \* represents (\d+) endpoint")
_HIST_BIN = re.compile(r"^Info:\s+\[\s*(-?\d+),\s*(-?\d+)\)\s+\|(\**)(\+?)\s*$")


def parse_slack_histogram(text):
    """The last slack histogram of a nextpnr log as ``[(lo_ps, hi_ps, min_count, max_count)]``
    (slack in ``[lo_ps, hi_ps)`` at the constrained clock, ascending), or ``[]`` if the log
    has none. Each ``*`` stands for ``legend`` end points and a trailing ``+`` for 1 to
    ``legend - 1`` more, so a bin's count is known to within ``legend - 1``."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if "Slack histogram" in line]
    if not starts:
        return []
    bins, legend = [], None
    for line in lines[starts[-1] + 1:]:
        mo = _HIST_LEGEND.match(line)
        if mo:
            legend = int(mo.group(1))
            continue
        mo = _HIST_BIN.match(line)
        if mo and legend is not None:
            stars, plus = len(mo.group(3)), 1 if mo.group(4) else 0
            bins.append((int(mo.group(1)), int(mo.group(2)), stars * legend,
                         stars * legend + plus * (legend - 1)))
        elif bins:
            break
        elif legend is not None and "represents [" not in line:
            break
    return bins


def endpoints_slower_than(bins, period_ns, delay_ns):
    """``(at_least, at_most)`` end points whose path is longer than ``delay_ns``, from the slack
    histogram ``bins`` taken at a clock of ``period_ns`` (an end point's path is the period
    less its slack). Bins entirely below the threshold slack count in both bounds; a bin
    that straddles it counts in ``at_most`` only."""
    limit_ps = round((period_ns - delay_ns) * 1000)     # slack below this: slower
    at_least = sum(lo_n for lo, hi, lo_n, hi_n in bins if hi <= limit_ps)
    at_most = sum(hi_n for lo, hi, lo_n, hi_n in bins if lo < limit_ps)
    return at_least, at_most


def parse_nextpnr_log(text):
    """Return ``{"clocks": {clk: {fmax_mhz, target_mhz, pass}}, "utilisation": {cell: (used,
    total)}, "critical_path": {...} or None}`` from a nextpnr log."""
    clocks = {}
    for clk, fmax, verdict, target in _FMAX.findall(text):
        clocks[clk] = {"fmax_mhz": float(fmax), "target_mhz": float(target),
                       "pass": verdict == "PASS"}

    util = {}
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if "Device utilisation" in line]
    if starts:
        for line in lines[starts[-1] + 1:]:
            mo = _UTIL.match(line)
            if mo:
                util[mo.group(1)] = (int(mo.group(2)), int(mo.group(3)))
            elif util and not line.strip("Info: \t"):
                break

    path = None
    crit = [i for i, line in enumerate(lines) if _CRIT.search(line)]
    if crit:
        first = crit[-1]
        clock = _CRIT.search(lines[first]).group(1)
        steps, sinks, sources_in_rtl = [], [], []
        logic = routing = None
        defined = False
        for line in lines[first + 1:]:
            body = line[5:].strip() if line.startswith("Info:") else None
            if body is None or body.startswith("Critical path") or body.startswith("Max "):
                break
            mo = _PATH_LINE.match(line)
            if mo:
                steps.append({"type": mo.group(1), "delay_ns": float(mo.group(2)),
                              "total_ns": float(mo.group(3)), "kind": mo.group(4),
                              "name": mo.group(5)})
                defined = False
                continue
            mo = re.match(r"Sink (\S+)", body)
            if mo:
                sinks.append(mo.group(1))
                defined = False
                continue
            if body.startswith("Defined in:"):
                defined = True
                continue
            mo = re.match(r"([\d.]+) ns logic, ([\d.]+) ns routing", body)
            if mo:
                logic, routing = float(mo.group(1)), float(mo.group(2))
                continue
            if defined and body and "/share/" not in body and body not in sources_in_rtl:
                sources_in_rtl.append(body)
        sources = [s["name"] for s in steps if s["kind"] == "Source"]
        if sources:
            path = {"clock": clock, "start": sources[0],
                    "end": sources[-1] if steps[-1]["type"] == "setup" else
                    (sinks[-1] if sinks else sources[-1]),
                    "total_ns": steps[-1]["total_ns"], "logic_ns": logic,
                    "routing_ns": routing,
                    "cells": sources, "rtl_lines": sources_in_rtl}
    return {"clocks": clocks, "utilisation": util, "critical_path": path,
            "slack_histogram": parse_slack_histogram(text)}


def endpoint_arrivals(timing):
    """``{(cell, port): ns}``: the latest routed arrival at every timing end point of the clock
    domains in ``timing`` (nextpnr's ``--report`` JSON, parsed, written with
    ``--detailed-timing-report``: each net lists its end points with ``[min, max]`` arrival
    times from the launching clock edge, set-up not included). Empty without the detail."""
    out = {}
    for net in timing.get("detailed_net_timings", ()):
        for ep in net.get("endpoints", ()):
            delay = ep.get("delay")
            ns = max(delay) if isinstance(delay, (list, tuple)) else delay
            if ns is None:
                continue
            key = (ep["cell"], ep["port"])
            if ns > out.get(key, float("-inf")):
                out[key] = float(ns)
    return out


def module_of(cell):
    """The Amaranth module of a netlist cell: its name up to the last ``.`` before yosys'
    suffixes (``link.payload.dma.addr_TRELLIS_FF_Q_3`` -> ``link.payload.dma``)."""
    base = re.split(r"[$_](?:TRELLIS|LUT4|CCU2C|PFUMX|L6MUX|DP16KD|MULT18|DPRAM)", cell)[0]
    return base.rsplit(".", 1)[0] if "." in base else ""


def endpoint_summary(arrivals, limit_ns, top=30):
    """The end points of ``arrivals`` (:func:`endpoint_arrivals`) later than ``limit_ns``:
    ``{"limit_ns", "endpoints" (all), "over" (how many later), "by_module" ({module: count},
    most first), "slowest" ([{"ns", "end", "module"}], ``top`` latest)}``."""
    late = sorted(((ns, f"{c}.{p}", module_of(c)) for (c, p), ns in arrivals.items()
                   if ns > limit_ns), reverse=True)
    counts = {}
    for _, _, mod in late:
        counts[mod] = counts.get(mod, 0) + 1
    return {"limit_ns": limit_ns, "endpoints": len(arrivals), "over": len(late),
            "by_module": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
            "slowest": [{"ns": round(ns, 3), "end": end, "module": mod}
                        for ns, end, mod in late[:top]]}


def parse_yosys_log(text):
    """Cell counts (including submodules) of the last ``stat`` in a yosys log. Yosys 0.5x+
    prints ``<count>   <cell>`` under ``cells``/``submodules``; older ones ``<cell>  <count>``
    after ``Number of cells``."""
    cells = {}
    marks = [m.end() for m in re.finditer(r"=== design hierarchy ===", text)]
    if marks:
        tail = text[marks[-1]:]
        for line in tail.splitlines():
            if re.match(r"^\d+\.\d+\. Executing", line.strip()):
                break
            mo = re.match(r"^\s+(\d+)\s{2,}(\$?[A-Za-z_][\w$]*)\s*$", line)
            if mo:
                cells[mo.group(2)] = cells.get(mo.group(2), 0) + int(mo.group(1))
        if cells:
            return cells
    blocks = [m.start() for m in re.finditer(r"Number of cells", text)]
    if not blocks:
        return {}
    for line in text[blocks[-1]:].splitlines()[1:]:
        mo = re.match(r"^\s+(\$?[A-Za-z_][\w$]*)\s+(\d+)\s*$", line)
        if mo:
            cells[mo.group(1)] = int(mo.group(2))
        elif cells and not line.strip():
            break
    return cells


_FAMILY_CELLS = {
    # report key: (yosys cells summed, nextpnr utilisation cell)
    "ecp5": {"LUT4": (("LUT4",), None), "FF": (("TRELLIS_FF",), "TRELLIS_FF"),
             "DSP": (("MULT18X18D",), "MULT18X18D"), "BRAM": (("DP16KD",), "DP16KD"),
             "LUTRAM": (("TRELLIS_DPR16X4",), None), "COMB": ((), "TRELLIS_COMB")},
    "ice40": {"LUT4": (("SB_LUT4",), None),
              "FF": (("SB_DFF", "SB_DFFE", "SB_DFFSR", "SB_DFFR", "SB_DFFS", "SB_DFFESR",
                      "SB_DFFER", "SB_DFFES", "SB_DFFSS", "SB_DFFESS", "SB_DFFN"), None),
              "DSP": (("SB_MAC16",), "ICESTORM_DSP"), "BRAM": (("SB_RAM40_4K",), "ICESTORM_RAM"),
              "SPRAM": (("SB_SPRAM256KA",), "ICESTORM_SPRAM"), "COMB": ((), "ICESTORM_LC")},
}


def make_report(*, family, board, config, nextpnr_text, yosys_text, target_mhz, pes,
                extra=None, timing=None):
    """The report dict written to ``report.json``. ``timing``: nextpnr's parsed ``--report``
    JSON with the detailed net timings, for ``goal_endpoints`` (the end points whose routed
    path is longer than the family's goal period, :data:`GOALS_MHZ`)."""
    pnr = parse_nextpnr_log(nextpnr_text)
    cells = parse_yosys_log(yosys_text)
    resources = {}
    for key, (ycells, pcell) in _FAMILY_CELLS[family].items():
        if pcell and pcell in pnr["utilisation"]:
            used, total = pnr["utilisation"][pcell]
            resources[key] = used
            resources[f"{key}_total"] = total
        elif ycells:
            resources[key] = sum(cells.get(c, 0) for c in ycells)
    # The sync clock: the constrained one with the lowest Fmax (the PLL output).
    fmax = None
    sync = None
    for clk, info in pnr["clocks"].items():
        if fmax is None or info["fmax_mhz"] < fmax:
            fmax, sync = info["fmax_mhz"], clk
    report = {
        "board": board, "config": config, "family": family,
        "target_mhz": target_mhz,
        "fmax_mhz": fmax,
        "timing_met": None if fmax is None else fmax >= target_mhz,
        "clock": sync,
        "critical_path": pnr["critical_path"],
        "slack_histogram": [list(b) for b in pnr["slack_histogram"]],
        "resources": resources,
        "yosys_cells": cells,
        "pes": pes,
        "peak_macs_per_s": None if fmax is None else round(pes * fmax * 1e6),
        "peak_macs_per_s_at_target": round(pes * target_mhz * 1e6),
    }
    arrivals = endpoint_arrivals(timing) if timing else {}
    if arrivals:
        report["goal_endpoints"] = {"goal_mhz": GOALS_MHZ[family],
                                    **endpoint_summary(arrivals, 1e3 / GOALS_MHZ[family])}
    if extra:
        report.update(extra)
    return report


if __name__ == "__main__":  # pragma: no cover - convenience: re-parse a build directory
    import pathlib
    import sys
    d = pathlib.Path(sys.argv[1])
    print(json.dumps(parse_nextpnr_log((d / "top.tim").read_text()), indent=2))
