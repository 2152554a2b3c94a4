"""Benchmarks: ``python -m scripts.bench <name> [--json] [--quick]`` or ``python -m scripts.bench all``.

Each benchmark is a module ``scripts/bench_<name>.py`` with ``run(args) -> dict`` (and optionally
``add_arguments(parser)``). ``all`` runs every benchmark whose module exists, writes one JSON per
benchmark to ``results/<name>.json``, prints a progress line per benchmark, then draws the plots
(the SR training demo included) and the results table (``scripts.report``: ``results/*.png``,
``results/RESULTS.md``, which the README links). Speed and area are measured here, never
asserted by tests.

With ``--json`` only the JSON record is printed on stdout; the benchmark's own output and that
of the simulators it runs go to stderr.

``all --jobs N`` (default: the number of cores, at most 2) runs N benchmarks at a time in
separate processes, the longest first (fpga, dma, tensor, core, models, sim, sr, lut): on a
2-core machine the FPGA builds run beside the simulations instead of after them. Each record notes ``jobs``, since
the simulation-speed figures of ``sim`` share the machine with the other job.
"""

import argparse
import concurrent.futures
import importlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
#: The order ``all`` runs them in; fpga last (it needs minutes per board).
BENCHMARKS = ("sr", "tensor", "lut", "core", "sim", "models", "dma", "fpga")
#: The order ``all --jobs N`` (N > 1) starts them in: longest first.
LONGEST_FIRST = ("fpga", "dma", "tensor", "core", "models", "sim", "sr", "lut")


def _commit():
    """The checkout's commit (``-dirty`` with uncommitted changes), or None outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def _machine():
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
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
    parser.add_argument("--jobs", "-j", type=int, default=min(2, os.cpu_count() or 1),
                        help="'all': benchmarks run at a time (default: cores, at most 2)")
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
    if known.name != "all":
        name, module = next(iter(modules.items()))
        if args.json:
            # Only the JSON goes to stdout: everything the benchmark (and the simulators it
            # starts) prints goes to stderr.
            with _stdout_to_stderr():
                result = _run_one(name, module, args)
        else:
            result = _run_one(name, module, args)
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            for key, value in result.items():
                print(f"{key}: {value}")
        return 1 if "error" in result else 0
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, not {args.jobs}")
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    total = len(modules)
    start_all = time.time()

    def finished(done, name, result):
        nonlocal failures
        failures += "error" in result
        result["jobs"] = args.jobs
        (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
        state = "FAILED" if "error" in result else "done"
        print(f"[{done}/{total}] {name} {state} in {result['wall_s']} s "
              f"({time.time() - start_all:.0f} s elapsed)", file=sys.stderr, flush=True)

    if args.jobs == 1:
        for i, (name, module) in enumerate(modules.items(), 1):
            print(f"[{i}/{total}] {name} ...", file=sys.stderr, flush=True)
            finished(i, name, _run_one(name, module, args))
    else:
        order = [n for n in LONGEST_FIRST if n in modules]
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {}
            for name in order:
                futures[pool.submit(_run_by_name, name, args)] = name
            print(f"[all] {total} benchmarks, {args.jobs} at a time: {', '.join(order)}",
                  file=sys.stderr, flush=True)
            for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                name = futures[future]
                try:
                    result = future.result()
                except Exception:         # the worker process itself died
                    result = {"benchmark": name, **_machine(), "wall_s": None,
                              "error": traceback.format_exc(limit=3)}
                finished(done, name, result)
    # Plots and results/RESULTS.md, which the README links.
    from scripts import report
    print("[report] plots and results table ...", file=sys.stderr, flush=True)
    report.main(["--results", str(out), "--training"])
    print(f"[all] {total - failures}/{total} benchmarks done, {failures} failed, "
          f"{time.time() - start_all:.0f} s", file=sys.stderr, flush=True)
    return 1 if failures else 0


class _stdout_to_stderr:
    """Point file descriptor 1 at stderr for the duration (child processes included)."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


def _run_one(name, module, args):
    """One benchmark's record: machine, date, wall time, and its result (or the error)."""
    start = time.time()
    try:
        result = module.run(args)
    except Exception:
        traceback.print_exc()
        result = {"error": traceback.format_exc(limit=3)}
    return {"benchmark": name, **_machine(), "wall_s": round(time.time() - start, 1), **result}


def _run_by_name(name, args):
    """``_run_one`` in a worker process (modules are imported there, not pickled)."""
    return _run_one(name, _load(name), args)


if __name__ == "__main__":
    sys.exit(main())
