"""Benchmarks: ``python -m scripts.bench <name> [--json] [--quick]`` or ``python -m scripts.bench all``.

Each benchmark is a module ``scripts/bench_<name>.py`` with ``run(args) -> dict`` (and optionally
``add_arguments(parser)``). ``all`` runs every benchmark whose module exists, writes one JSON per
benchmark to ``results/<name>.json``, prints a progress line per benchmark, then draws the plots
and the results table (``scripts.report``: ``results/*.png``, ``results/RESULTS.md`` and the table
in ``README.md``). Speed and area are
measured here, never asserted by tests.
"""

import argparse
import importlib
import json
import pathlib
import platform
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
#: The order ``all`` runs them in; fpga last (it needs minutes per board).
BENCHMARKS = ("sr", "tensor", "lut", "core", "sim", "fpga")


def _machine():
    import os
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                       f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def _load(name):
    try:
        return importlib.import_module(f"scripts.bench_{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"scripts.bench_{name}":
            return None
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.bench", description=__doc__.split("\n")[0])
    parser.add_argument("name", help=f"one of {', '.join(BENCHMARKS)}, or all")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quick", action="store_true", help="smaller sweeps (for a smoke run)")
    parser.add_argument("--out", default=str(RESULTS), help="results directory for 'all'")
    known, _ = parser.parse_known_args(argv)
    names = BENCHMARKS if known.name == "all" else (known.name,)
    modules = {}
    for name in names:
        if name not in BENCHMARKS:
            parser.error(f"benchmark must be one of {', '.join(BENCHMARKS)} or all, not {name!r}")
        module = _load(name)
        if module is None:
            if known.name != "all":
                parser.error(f"benchmark {name!r} is not implemented yet (no scripts/bench_{name}.py)")
            continue
        if hasattr(module, "add_arguments") and known.name != "all":
            module.add_arguments(parser)
        modules[name] = module
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    failures = 0
    for i, (name, module) in enumerate(modules.items(), 1):
        if known.name == "all":
            print(f"[{i}/{len(modules)}] {name} ...", file=sys.stderr, flush=True)
        start = time.time()
        try:
            result = module.run(args)
        except Exception:
            failures += 1
            traceback.print_exc()
            result = {"error": traceback.format_exc(limit=3)}
        result = {"benchmark": name, **_machine(), "wall_s": round(time.time() - start, 1), **result}
        if known.name == "all":
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
            print(f"[{i}/{len(modules)}] {name} done in {result['wall_s']} s", file=sys.stderr)
        elif args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            for key, value in result.items():
                print(f"{key}: {value}")
    if known.name == "all":
        # Plots, results/RESULTS.md and (for the project's own results/) the README table.
        from scripts import report
        print("[report] plots and results table ...", file=sys.stderr, flush=True)
        report.main(["--results", str(out)]
                    + (["--readme"] if out.resolve() == RESULTS.resolve() else []))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
