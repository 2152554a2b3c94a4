"""Every deep register-to-register path of a synthesized ECP5 netlist, in seconds instead of
a 30-minute place and route.

    python -m scripts.logic_depth build/fpga/ulx3s-core2/top.json            # worst 30 ends
    python -m scripts.logic_depth top.json --top 100 --min-levels 8 --by-module
    python -m scripts.logic_depth top.json --json > depth.json

nextpnr names one critical path per build, and each build takes half an hour, so fixing paths
one build at a time does not converge. This reads the netlist yosys wrote for nextpnr
(``synth_ecp5 ... ; write_json top.json``, which every board build keeps) and computes, for
every timing end point (a flip-flop's D/M/CE/LSR input, a block RAM or distributed RAM write
input, a DSP input), the deepest path that reaches it from a timing start point (a flip-flop's
Q, a block RAM's data out, an I/O or the PLL).

Two figures per path:

* ``levels``: the routed nets on the path, i.e. the hops nextpnr must route between slices.
  Nets that stay inside a slice are free: a LUT4 into the PFUMX / L6MUX21 of its slice and a
  carry chain (``COUT`` -> ``CIN``). This is the figure to cut: on the core's routed builds a
  hop costs 0.8-1.4 ns of routing (paths are 75-80 % routing), so a 100 MHz clock (10 ns) on
  the ECP5-85F at speed grade 6 allows about 6 levels and the 55 MHz builds have 12-16.
* ``estimate_ns``: a rough delay with :data:`DELAYS` (ECP5 speed grade 6 cell delays of the
  order nextpnr reports, plus a fixed routing delay per hop). It ranks paths; it is not a
  timing sign-off (placement decides the routing).

The netlist's cell names carry the Amaranth hierarchy (``link.payload.dma.addr$158_...``), so
``--by-module`` shows which unit owns the deep ends.

After a place and route, ``--routed top.timing.json`` (nextpnr's ``--report`` with
``--detailed-timing-report``, which every board build writes) ranks the end points by their
routed arrival instead of the estimate, each with the netlist path that leads to it, and
``--over NS`` keeps those later than NS (10 for the 100 MHz goal): one routed build names
every path to cut, not just nextpnr's one critical path.

    python -m scripts.logic_depth top.json --routed top.timing.json --over 10 --by-module
"""

import argparse
import collections
import json
import pathlib
import re
import sys

from fpga.report import endpoint_arrivals, module_of

__all__ = ["DELAYS", "analyse", "attach_routed", "by_module", "by_module_routed", "histogram",
           "histogram_line", "end_line", "main"]

#: Delay model in ns. ``route``: one routed hop; ``lut``: LUT4 input to output; ``mux``: a
#: PFUMX / L6MUX21 stage; ``carry_in``/``carry``/``carry_out``: a CCU2C entered from a LUT
#: input, passed along the chain, left through a sum; ``clk_q``: flip-flop clock to output;
#: ``bram_q``: DP16KD clock to data out (no output register); ``dpram``: distributed RAM read;
#: ``dsp``: MULT18X18D input to product without registers; ``dsp_q``: clock to product of a
#: MULT18X18D whose A and B inputs are registered in the block (``rtl.arith.dsp``; nextpnr,
#: speed 6: 3.86 ns), which starts paths and whose A/B inputs end them; ``setup``: end point
#: set-up time.
#: ``bram_q`` is what nextpnr reported on the core (r5 build: 5.83 ns clock to DOB on a DP16KD
#: without its output register), so a block RAM output should go straight into a register.
DELAYS = {"route": 1.0, "lut": 0.45, "mux": 0.25, "carry_in": 0.45, "carry": 0.14,
          "carry_out": 0.35, "clk_q": 0.55, "bram_q": 5.8, "dpram": 0.6, "dsp": 3.6,
          "dsp_q": 3.9, "setup": 0.1}

# cell type -> (output ports, {input port: kind of delay}) for the combinational cells.
_COMB = {
    "LUT4": (("Z",), {p: "lut" for p in "ABCD"}),
    "PFUMX": (("Z",), {"ALUT": "mux", "BLUT": "mux", "C0": "mux"}),
    "L6MUX21": (("Z",), {"D0": "mux", "D1": "mux", "SD": "mux"}),
}
# Inputs that are fed from inside the slice (no routed hop).
_LOCAL_IN = {("PFUMX", "ALUT"), ("PFUMX", "BLUT"), ("L6MUX21", "D0"), ("L6MUX21", "D1"),
             ("CCU2C", "CIN")}


def _hier(name):
    """The Amaranth hierarchy of a netlist cell name (``fpga.report.module_of``, the same
    rule for nextpnr's names): everything before the last ``.`` that precedes yosys' own
    suffixes."""
    return module_of(name.lstrip("\\"))


def analyse(netlist, top="top", delays=DELAYS, per_port=False):
    """Arrival levels and delay estimates for every end point of ``netlist`` (a parsed yosys
    JSON). Returns a list of dicts, deepest first: ``end`` (cell and port), ``module``,
    ``levels``, ``estimate_ns``, ``path`` (cell names from start to end), ``rtl_lines`` (the
    source lines of the path's flip-flops and carry chains, start to end). ``per_port``: each
    end point also has ``ports``, the same figures for the deepest bit of each of its ports
    (for :func:`attach_routed`, where the routed port may not be the estimate's)."""
    d = delays
    try:
        cells = netlist["modules"][top]["cells"]
    except KeyError:
        raise ValueError(f"netlist has no module {top!r}") from None
    driver = {}      # bit -> (cell name, port)
    for name, cell in cells.items():
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if dirs.get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = (name, port)
    fanout = collections.Counter()
    for cell in cells.values():
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if dirs.get(port) == "input":
                for b in bits:
                    if isinstance(b, int):
                        fanout[b] += 1

    memo = {}        # bit -> (levels, ns, previous bit or None, cell name)

    def dsp_registered(cell):
        """A MULT18X18D whose A and B inputs are both registered inside it."""
        prm = cell.get("parameters", {})
        return cell["type"] == "MULT18X18D" and all(
            str(prm.get(f"REG_INPUT{x}_CLK", "NONE")).strip() not in ("NONE", "")
            for x in "AB")

    def start(bit):
        name, port = driver[bit]
        typ = cells[name]["type"]
        if typ == "DP16KD":
            return (0, d["bram_q"], None, name)
        if typ == "MULT18X18D":
            return (0, d["dsp_q"], None, name)
        return (0, d["clk_q"], None, name)

    def inputs_of(name, out_port):
        """(input bit, delay kind, routed) for the inputs that reach ``out_port``."""
        cell = cells[name]
        typ, conn = cell["type"], cell["connections"]
        if typ in _COMB:
            for port, kind in _COMB[typ][1].items():
                for b in conn.get(port, ()):
                    yield b, d[kind], (typ, port) not in _LOCAL_IN
        elif typ == "CCU2C":
            half = out_port[-1] if out_port in ("S0", "S1") else "1"
            lanes = ("0", "1") if out_port == "COUT" or half == "1" else ("0",)
            for lane in lanes:
                for p in "ABCD":
                    for b in conn.get(p + lane, ()):
                        yield b, d["carry_in"] + (d["carry_out"] if out_port != "COUT" else 0), True
            for b in conn.get("CIN", ()):
                yield b, d["carry"] if out_port == "COUT" else d["carry_out"], False
        elif typ == "TRELLIS_DPR16X4":
            for b in conn.get("RAD", ()):
                yield b, d["dpram"], True
        elif typ == "MULT18X18D":
            for p, bits in conn.items():
                if p[0] in "AB" and p[1:].isdigit():
                    for b in bits:
                        yield b, d["dsp"], True

    def comb(name):
        typ = cells[name]["type"]
        if typ == "MULT18X18D":
            return not dsp_registered(cells[name])
        return typ in _COMB or typ in ("CCU2C", "TRELLIS_DPR16X4")

    def arrival(bit):
        if not isinstance(bit, int) or bit not in driver:
            return (0, 0.0, None, None)
        if bit in memo:
            return memo[bit]
        # Iterative depth-first evaluation (carry chains and deep logic overflow recursion).
        stack = [bit]
        while stack:
            b = stack[-1]
            if b in memo:
                stack.pop()
                continue
            name, port = driver[b]
            if not comb(name):
                memo[b] = start(b)
                stack.pop()
                continue
            pending = [i for i, _, _ in inputs_of(name, port)
                       if isinstance(i, int) and i in driver and i not in memo]
            if pending:
                stack.extend(pending)
                continue
            best = (0, 0.0, None, name)
            for i, delay, routed in inputs_of(name, port):
                if not isinstance(i, int) or i not in driver:
                    continue
                lv, ns, _, _ = memo[i]
                cand = (lv + routed, ns + delay + (d["route"] if routed else 0.0), i, name)
                if (cand[1], cand[0]) > (best[1], best[0]):
                    best = cand
            memo[b] = best
            stack.pop()
        return memo[bit]

    def rtl_lines(names):
        """The Amaranth source lines of the cells on a path (yosys keeps ``src`` on flip-flops
        and carry chains; ABC's LUTs have none), in path order, without the techmap files."""
        out = []
        for n in names:
            for loc in cells[n].get("attributes", {}).get("src", "").split("|"):
                if loc and "/share/" not in loc:
                    loc = re.sub(r"^.*?/(rtl|fpga)/", r"\1/", loc)
                    if loc not in out:
                        out.append(loc)
        return out

    def trace(bit):
        names = []
        while isinstance(bit, int) and bit in memo:
            lv, ns, prev, name = memo[bit]
            if not names or names[-1] != name:
                names.append(name)
            bit = prev
        return names[::-1]

    ends = []
    for name, cell in cells.items():
        typ, conn = cell["type"], cell["connections"]
        if typ == "TRELLIS_FF":
            ports = ("DI", "M", "CE", "LSR")
        elif typ == "DP16KD":
            ports = tuple(p for p in conn if p[:2] in ("AD", "DI", "WE", "CE", "CS"))
        elif typ == "TRELLIS_DPR16X4":
            ports = ("WAD", "DI", "WRE")
        elif dsp_registered(cell):
            ports = tuple(p for p in conn if p[0] in "AB" and p[1:].isdigit())
        else:
            continue
        worst, per = None, {}
        for port in ports:
            for b in conn.get(port, ()):
                if not isinstance(b, int) or b not in driver:
                    continue
                lv, ns, _, _ = arrival(b)
                cand = (ns, lv, port, b)
                if worst is None or cand > worst:
                    worst = cand
                if port not in per or cand > per[port]:
                    per[port] = cand
        if worst is None:
            continue

        def figures(cand):
            ns, lv, port, b = cand
            path = trace(b)
            return {"levels": lv + 1, "estimate_ns": round(ns + d["route"] + d["setup"], 2),
                    "path": [n.lstrip("\\") for n in path],
                    "rtl_lines": rtl_lines(path + [name])}
        ports = {port: figures(cand) for port, cand in per.items()} if per_port else None
        end = {"end": f"{name.lstrip(chr(92))}.{worst[2]}", "module": _hier(name), "type": typ,
               **(ports[worst[2]] if per_port else figures(worst))}    # worst: its port's
        if per_port:
            end["ports"] = ports
        ends.append(end)
    ends.sort(key=lambda e: (-e["estimate_ns"], -e["levels"], e["end"]))
    return ends


def by_module(ends, min_levels):
    """Per module: the number of end points at ``min_levels`` or deeper, and the deepest."""
    groups = {}
    for e in ends:
        if e["levels"] < min_levels:
            continue
        g = groups.setdefault(e["module"], {"module": e["module"], "ends": 0,
                                              "levels": 0, "estimate_ns": 0.0})
        g["ends"] += 1
        g["levels"] = max(g["levels"], e["levels"])
        g["estimate_ns"] = max(g["estimate_ns"], e["estimate_ns"])
    return sorted(groups.values(), key=lambda g: (-g["estimate_ns"], -g["ends"]))


_D_ALIAS = {"M": "DI", "DI": "M"}


def attach_routed(ends, arrivals):
    """``ends`` (:func:`analyse`) with ``routed_ns`` and ``routed_port``: the latest routed
    arrival among the end point's ports in ``arrivals`` (``{(cell, port): ns}``, from
    ``fpga.report.endpoint_arrivals``), latest first; end points without one go last. Where
    ``analyse`` ran with ``per_port``, the end's path and figures become the routed port's."""
    per_cell = {}
    for (cell, port), ns in arrivals.items():
        if ns > per_cell.get(cell, (float("-inf"), ""))[0]:
            per_cell[cell] = (ns, port)
    out = []
    for e in ends:
        cell = e["end"].rsplit(".", 1)[0]
        e = dict(e)
        if cell in per_cell:
            e["routed_ns"], e["routed_port"] = round(per_cell[cell][0], 3), per_cell[cell][1]
            # nextpnr may feed a flip-flop's D through M where the netlist has DI.
            port = next((p for p in (e["routed_port"], _D_ALIAS.get(e["routed_port"]))
                         if p in e.get("ports", {})), None)
            if port is not None:
                e.update(e["ports"][port], end=f"{cell}.{port}")
        out.append(e)
    out.sort(key=lambda e: (-e.get("routed_ns", float("-inf")), -e["estimate_ns"], e["end"]))
    return out


def by_module_routed(ends):
    """Per module: the number of ``ends`` and the latest routed arrival among them."""
    groups = {}
    for e in ends:
        g = groups.setdefault(e["module"], {"module": e["module"], "ends": 0, "routed_ns": 0.0})
        g["ends"] += 1
        g["routed_ns"] = max(g["routed_ns"], e.get("routed_ns", 0.0))
    return sorted(groups.values(), key=lambda g: (-g["ends"], -g["routed_ns"]))


def histogram(ends):
    """End points per number of levels."""
    return dict(sorted(collections.Counter(e["levels"] for e in ends).items()))


def histogram_line(ends):
    """One line: end points per number of routed levels."""
    return _levels_line(histogram(ends))


def _levels_line(levels):
    return "levels: " + ", ".join(f"{k}: {v}" for k, v in levels.items())


def end_line(e):
    """One line per end point: (routed arrival and port,) estimate, levels, end and start."""
    routed = f"{e['routed_ns']:6.2f} ns routed at {e['routed_port']}, " \
        if "routed_ns" in e else ""
    return (f"{routed}{e['estimate_ns']:6.2f} ns {e['levels']:3d} lv  {e['end']}  <-  "
            f"{e['path'][0]}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.logic_depth",
                                     description="The deepest register-to-register paths of "
                                                 "a synthesized ECP5 netlist (yosys JSON).")
    parser.add_argument("netlist", type=pathlib.Path, help="yosys JSON (top.json of a build)")
    parser.add_argument("--top", type=int, default=30, help="paths to show (default 30)")
    parser.add_argument("--min-levels", type=int, default=0,
                        help="only end points at this many routed levels or more")
    parser.add_argument("--by-module", action="store_true",
                        help="group the end points by Amaranth module")
    parser.add_argument("--match", help="only end points whose name contains this text")
    parser.add_argument("--start", help="only end points whose shown path (the latest one) "
                                        "starts at a cell whose name contains this text "
                                        "(e.g. seq.ucode: paths from the control store)")
    parser.add_argument("--path", action="store_true", help="print each path's cells")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--routed", type=pathlib.Path,
                        help="nextpnr's --report JSON with --detailed-timing-report (a "
                             "build's top.timing.json): rank by routed arrival")
    parser.add_argument("--over", type=float, default=None, metavar="NS",
                        help="with --routed: only end points that arrive later than NS")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top must be a positive integer, not {args.top}")
    if args.over is not None and args.routed is None:
        parser.error("--over needs --routed")
    try:
        netlist = json.loads(args.netlist.read_text())
        ends = analyse(netlist, per_port=args.routed is not None)
        levels = histogram(ends)          # of the estimate, before any routed port's path
        if args.routed is not None:
            ends = attach_routed(ends, endpoint_arrivals(json.loads(args.routed.read_text())))
            if not any("routed_ns" in e for e in ends):
                raise ValueError(f"{args.routed}: no end point of the netlist has a routed "
                                 f"arrival (not written with --detailed-timing-report, or "
                                 f"another netlist)")
    except (OSError, ValueError) as e:
        parser.exit(1, f"logic_depth: {e}\n")
    shown = [e for e in ends if e["levels"] >= args.min_levels
             and (args.match is None or args.match in e["end"])
             and (args.start is None or args.start in e["path"][0])
             and (args.over is None or e.get("routed_ns", 0.0) > args.over)]
    if args.routed is not None and not args.json:
        print(f"{len(shown)} end points" + (f" later than {args.over} ns" if args.over
                                            is not None else "") +
              " (routed; one per cell, at its latest port)")
        if args.by_module:
            for g in by_module_routed(shown)[:args.top]:
                print(f"{g['routed_ns']:6.2f} ns {g['ends']:6d} ends  {g['module']}")
            return 0
    if args.json:
        shown = [{k: v for k, v in e.items() if k != "ports"} for e in shown]
        print(json.dumps({"histogram": levels,
                          "by_module": by_module(ends, args.min_levels),
                          "ends": shown[:args.top]}, indent=1))
        return 0
    print(_levels_line(levels))
    if args.by_module:
        for g in by_module(ends, args.min_levels)[:args.top]:
            print(f"{g['estimate_ns']:6.2f} ns {g['levels']:3d} lv {g['ends']:6d} ends  "
                  f"{g['module']}")
        return 0
    for e in shown[:args.top]:
        print(end_line(e))
        if args.path:
            for n in e["path"]:
                print(f"        {n}")
        else:
            print(f"        {' '.join(e['rtl_lines'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
