"""Simulation speed of the full core: simulated cycles per second on Icarus + cocotb,
Verilator + cocotb and the fast backend (``fastsim``, Verilator with a C++ harness), on the
4x4 and 8x8 cores, in one run.

    python -m scripts.bench sim [--json] [--quick] [--rows 4,8] [--paths icarus,verilator,fastsim]
                                [--skip verilator-8x8]
    python -m scripts.bench sim --json --rows 8 --paths fastsim --rounds 3 \
        --cxx-opts=-O2+clang+merge,-Os+clang+merge,-O2+clang+merge+V-O3   # fastsim variants
    python -m scripts.bench sim --json --rows 8 --paths fastsim --rounds 3 \
        --cxx-opts=-O2+clang,-O2+clang+falleval+rstinput   # the harness's defaults / not

The workload is the tiled GEMM of the core tests (K = 2 tiles, M = 2 tiles, N = 16, BF16):
under cocotb with the host traffic over AXI4-Lite, the AXI RAM and one coroutine sampling the
activity port every cycle (``cocotb_tests/test_core_profile.py``); on fastsim the same program
as a ``sim.image.Image`` with the activity port recorded every cycle by the harness, repeated
``--repeat`` times for a stable wall time. cycles/s is simulated cycles (host traffic
included) over the wall time of the run, and over the CPU time of the simulating process
(the cocotb simulator, or fastsim's harness): on a machine shared with other jobs the wall
rate measures the share a process got, the CPU rate is that of an unshared core, and the
ratios are given for both. Verilog generation and builds are excluded from the rates and
reported separately: ``build_s`` (fastsim: the compile of the model as recorded beside it,
``built_now`` says whether this run built it; cocotb: the run's wall time outside the
simulation, which is the build on a cache miss). The record notes the load average before and
after. The cocotb Verilator model is compiled at ``-Os`` (``VERILATOR_CXX_OPT`` overrides it:
``-O0`` builds the 8x8 model in a fraction of the time, and the cocotb path's rate is set by
its Python side), fastsim's with its defaults (``fastsim.build``). ``--quick``: the 4x4 core
only. ``--cxx-opts`` compares fastsim builds (level, compiler, PGO, structure, Verilator
options): all are built first, then timed in turn ``--rounds`` times, and each reports the
min / median / max cycles per CPU second, its C++ and machine-code bytes and the hash of its
Verilog.
"""

import os
import time

#: The GEMM shape of every path.
SHAPE = {"KT": 2, "MT": 2, "N": 16}


def add_arguments(parser):
    parser.add_argument("--rows", default="4,8", help="comma-separated core sizes (4, 8)")
    parser.add_argument("--paths", default="icarus,verilator,fastsim",
                        help="comma-separated subset of icarus, verilator, fastsim")
    parser.add_argument("--skip", default="",
                        help="comma-separated path-core pairs not to run, e.g. verilator-8x8 "
                             "(reported as skipped)")
    parser.add_argument("--repeat", type=int, default=50,
                        help="fastsim: runs of the workload timed together (default 50)")
    parser.add_argument("--cxx-opts", default="",
                        help="fastsim only: measure build time and cycles/s at each of these "
                             "C++ optimisation levels, e.g. -O1,-Os,-O1+pgo,-O2+clang (+pgo: "
                             "with profile-guided optimisation; +gcc, +clang: that compiler; "
                             "+merge, +pe, +add: that model structure, fastsim.build.HIER; "
                             "+V<option>: that Verilator option, ':' for a space, e.g. "
                             "-O2+clang+V-fno-expand; +falleval, +fallcheck: the harness "
                             "evaluates the falling clock edge, fastsim.core.FALLING; "
                             "+rstinput: the reset stays an input of the model; +gate, "
                             "+gatev, +gatet, +nogate: gated clocks of both engines, the "
                             "vector engine, the tensor engine, none, fastsim.gate)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --cxx-opts: rounds over the variants, each round timing "
                             "every variant once in turn (min / median / max reported)")


def _cocotb(rows, simulator):
    from scripts.profile import run_workload
    t0 = time.monotonic()
    rec = run_workload("gemm", rows, simulator, dict(SHAPE))
    total = time.monotonic() - t0
    out = {"sim_cycles": rec["sim_cycles"], "program_cycles": rec["perf"]["cycles_lo"],
           "wall_s": round(rec["wall_s"], 3),
           "cycles_per_s": round(rec["sim_cycles"] / max(rec["wall_s"], 1e-9), 1),
           "build_s": round(total - rec["wall_s"], 1),
           "total_wall_s_incl_build": round(total, 1)}
    if "cpu_s" in rec:
        out["cpu_s"] = round(rec["cpu_s"], 3)
        out["cycles_per_cpu_s"] = round(rec["sim_cycles"] / max(rec["cpu_s"], 1e-9), 1)
    return out


def _cpu_s(core):
    """CPU seconds (user + system) of the harness process so far: its speed on a machine
    shared with other jobs, where wall time measures the share it got."""
    fields = open(f"/proc/{core._proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _open(rows, cxx_opt=None, pgo=None, compiler=None, hier=None, verilator_args=(),
          falling="skip", reset_register=True, gate=None):
    """Build (or find) a fastsim model of the ``rows`` x ``rows`` core, start it and run the
    GEMM once, checked against the reference simulator; return (core, image, record)."""
    from fastsim import FastCore, workloads
    from fastsim.build import build, build_info
    from scripts.profile import core_config
    from sim.config import CoreConfig
    cfg = CoreConfig.from_dict(core_config(rows))
    t0, started = time.monotonic(), time.time()
    exe = build(cfg, cxx_opt=cxx_opt, pgo=pgo, compiler=compiler, hier=hier,
                verilator_args=verilator_args, reset_register=reset_register, gate=gate)
    built_now = exe.stat().st_mtime >= started
    core = FastCore(cfg, exe=exe, falling=falling)
    startup = time.monotonic() - t0
    image, check = workloads.build("gemm", cfg, seed=1, **SHAPE)
    core.record_activity(True)
    out = core.run_image(image)             # warm-up, checked against refsim
    check(out)
    info = build_info(core.exe)
    return core, image, {
        "program_cycles": out.cycles, "startup_s_incl_build": round(startup, 1),
        "build_s": info.get("build_s"), "verilog_s": info.get("verilog_s"),
        "built_now": built_now, "compiler": info.get("compiler", "gcc"),
        "cxx_opt": info.get("cxx_opt"), "pgo": info.get("pgo", False),
        "hier": info.get("hier", "none"), "cpp_bytes": info.get("cpp_bytes"),
        "verilator_args": list(verilator_args), "falling": falling,
        "reset_register": reset_register, "gate": list(info.get("gate", [])),
        "code_bytes": _text_size(exe), "verilog_sha256": _sha(info.get("verilog")),
        "checked": "bit-exact vs refsim"}


def _sha(path):
    """First 12 hex digits of the SHA-256 of a file (None when it is gone)."""
    import hashlib
    import pathlib
    if path is None or not pathlib.Path(path).exists():
        return None
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:12]


def _text_size(exe):
    """Bytes of machine code (the ``.text`` section) of an executable, None without
    binutils."""
    import subprocess
    try:
        out = subprocess.run(["size", "-A", str(exe)], capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == ".text":
            return int(f[1])
    return None


def _time(core, image, repeat):
    """Run ``image`` ``repeat`` times on ``core``; return cycles, wall and CPU seconds."""
    c0, t1, u0 = core.cycle, time.monotonic(), _cpu_s(core)
    for _ in range(repeat):
        core.run_image(image)
        core.activity()
    return core.cycle - c0, time.monotonic() - t1, _cpu_s(core) - u0


def _fastsim(rows, repeat, cxx_opt=None, pgo=None, compiler=None):
    core, image, rec = _open(rows, cxx_opt, pgo, compiler)
    with core:
        cycles, wall, cpu = _time(core, image, repeat)
    return {"sim_cycles": cycles // repeat, "repeat": repeat,
            "wall_s": round(wall, 3), "cycles_per_s": round(cycles / max(wall, 1e-9), 1),
            "cpu_s": round(cpu, 3), "cycles_per_cpu_s": round(cycles / max(cpu, 1e-9), 1),
            **rec}


def _variant(opt):
    """(cxx_opt, pgo, compiler, hier, verilator_args, falling, reset_register) of a
    ``--cxx-opts`` item such as ``-O1+clang+pe``, ``-O2+clang+V-fno-expand+V--inline-mult:0``
    or ``-O2+clang+falleval+rstinput`` (``+fall<mode>``: ``FastCore(falling=<mode>)``;
    ``+rstinput``: ``build(reset_register=False)``); its gate is :func:`_gate`'s."""
    from fastsim.build import HIER
    from fastsim.core import FALLING
    level, *extra = opt.split("+")
    vargs = [a for e in extra if e.startswith("V") and len(e) > 1 for a in e[1:].split(":")]
    extra = [e for e in extra if not (e.startswith("V") and len(e) > 1)]
    falls = [e[4:] for e in extra if e.startswith("fall")]
    extra = [e for e in extra if not e.startswith("fall")]
    rstinput = extra.count("rstinput")
    extra = [e for e in extra if e != "rstinput"]
    gate = [e for e in extra if e in _GATES]
    extra = [e for e in extra if e not in _GATES]
    compilers = [e for e in extra if e in ("gcc", "clang")]
    hiers = [e for e in extra if e in HIER]
    if (len(compilers) > 1 or extra.count("pgo") > 1 or len(hiers) > 1 or
            len(extra) != len(compilers) + len(hiers) + extra.count("pgo") or
            not all(vargs) or len(falls) > 1 or not set(falls) <= set(FALLING) or
            rstinput > 1 or len(gate) > 1):
        raise ValueError(f"cxx-opts items must be a level with an optional +pgo, +gcc or "
                         f"+clang, one of +{', +'.join(HIER)}, one of "
                         f"+fall{', +fall'.join(FALLING)}, +rstinput, one of +gate, +gatev, "
                         f"+gatet, +nogate and +V<Verilator "
                         f"option>s, "
                         f"not {opt!r}")
    return (level, "pgo" in extra, compilers[0] if compilers else None,
            hiers[0] if hiers else None, tuple(vargs), falls[0] if falls else "skip",
            not rstinput)


#: ``--cxx-opts`` gate items: ``build(gate=)``.
_GATES = {"gate": ("vector", "tensor"), "gatev": ("vector",), "gatet": ("tensor",),
          "nogate": ()}


def _gate(opt):
    """``build(gate=)`` of a ``--cxx-opts`` item: that of its ``+gate``, ``+gatev``,
    ``+gatet`` or ``+nogate``, None (the default) without one."""
    gate = [_GATES[e] for e in opt.split("+")[1:] if e in _GATES]
    return gate[0] if gate else None


def _sweep(rows_list, opts, repeat, rounds):
    """Every variant of ``opts`` on every core size: built one after the other, then timed
    in ``rounds`` rounds, each timing every variant once in turn, so that a change of the
    machine's load falls on all of them."""
    import statistics
    sweep = {}
    for rows in rows_list:
        opened = {}
        try:
            for opt in opts:
                opened[opt] = _open(rows, *_variant(opt), gate=_gate(opt))
            rates = {opt: [] for opt in opts}
            walls = {opt: [] for opt in opts}
            for _ in range(rounds):
                for opt, (core, image, _) in opened.items():
                    cycles, wall, cpu = _time(core, image, repeat)
                    rates[opt].append(cycles / max(cpu, 1e-9))
                    walls[opt].append(cycles / max(wall, 1e-9))
            for opt, (_, _, rec) in opened.items():
                r, w = sorted(rates[opt]), walls[opt]
                sweep[f"{rows}x{rows} {opt}"] = {
                    "build_s": rec["build_s"], "built_now": rec["built_now"],
                    "hier": rec["hier"], "cpp_bytes": rec["cpp_bytes"],
                    "compiler": rec["compiler"], "cxx_opt": rec["cxx_opt"],
                    "verilator_args": rec["verilator_args"], "falling": rec["falling"],
                    "reset_register": rec["reset_register"], "gate": rec["gate"],
                    "code_bytes": rec["code_bytes"],
                    "program_cycles": rec["program_cycles"],
                    "verilog_sha256": rec["verilog_sha256"],
                    "cycles_per_cpu_s": {"min": round(r[0], 1),
                                         "median": round(statistics.median(r), 1),
                                         "max": round(r[-1], 1)},
                    "cycles_per_s_median": round(statistics.median(w), 1)}
        finally:
            for core, _, _ in opened.values():
                core.close()
        # The RTL may change between the builds of one run: say whether it did.
        sweep[f"{rows}x{rows} same_verilog"] = len(
            {rec["verilog_sha256"] for _, _, rec in opened.values()}) == 1
    return sweep


def run(args):
    os.environ.setdefault("VERILATOR_CXX_OPT", "-Os")
    rows_list = [4] if getattr(args, "quick", False) else \
        [int(r) for r in str(getattr(args, "rows", "4,8")).split(",")]
    paths = str(getattr(args, "paths", "icarus,verilator,fastsim")).split(",")
    for p in paths:
        if p not in ("icarus", "verilator", "fastsim"):
            raise ValueError(f"paths must be a subset of icarus, verilator, fastsim, not {p!r}")
    skip = {s for s in str(getattr(args, "skip", "") or "").split(",") if s}
    for s in skip:
        if s.split("-")[0] not in ("icarus", "verilator", "fastsim"):
            raise ValueError(f"skip must name path-core pairs such as verilator-8x8, not {s!r}")
    repeat = int(getattr(args, "repeat", 50))
    opts = [o for o in str(getattr(args, "cxx_opts", "") or "").split(",") if o]
    if opts:
        for opt in opts:
            _variant(opt)
        rounds = int(getattr(args, "rounds", 1))
        if rounds < 1:
            raise ValueError(f"rounds must be a positive integer, not {rounds}")
        return {"design": f"NeuronCore (bf16), GEMM K=2 tiles M=2 tiles N={SHAPE['N']}",
                "repeat": repeat, "rounds": rounds,
                "load_average_before": [round(x, 2) for x in os.getloadavg()],
                "fastsim_cxx_opt_sweep": _sweep(rows_list, opts, repeat, rounds),
                "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    out = {"design": f"NeuronCore (bf16), GEMM K=2 tiles M=2 tiles N={SHAPE['N']}",
           "verilator_cxx_opt": os.environ["VERILATOR_CXX_OPT"],
           "load_average_before": [round(x, 2) for x in os.getloadavg()], "simulators": {},
           "ratios": {}, "ratios_cpu": {}}
    for rows in rows_list:
        got = {}
        for path in paths:
            if f"{path}-{rows}x{rows}" in skip:
                out["simulators"][f"{path}-{rows}x{rows}"] = "skipped (--skip)"
                continue
            got[path] = _fastsim(rows, repeat) if path == "fastsim" else _cocotb(rows, path)
            out["simulators"][f"{path}-{rows}x{rows}"] = got[path]
        for a, b in (("fastsim", "verilator"), ("fastsim", "icarus"), ("verilator", "icarus")):
            if a in got and b in got:
                out["ratios"][f"{a}/{b}-{rows}x{rows}"] = round(
                    got[a]["cycles_per_s"] / max(got[b]["cycles_per_s"], 1e-9), 1)
                if "cycles_per_cpu_s" in got[a] and "cycles_per_cpu_s" in got[b]:
                    out["ratios_cpu"][f"{a}/{b}-{rows}x{rows}"] = round(
                        got[a]["cycles_per_cpu_s"] / max(got[b]["cycles_per_cpu_s"], 1e-9), 1)
        cyc = {p: r["program_cycles"] for p, r in got.items()}
        out[f"program_cycles_{rows}x{rows}"] = cyc
        out[f"cycles_agree_{rows}x{rows}"] = len(set(cyc.values())) == 1
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out
