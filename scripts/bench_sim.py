"""Simulation speed of the full core: simulated cycles per second on Icarus and Verilator.

    python -m scripts.bench sim [--json]

Runs the tiled GEMM of the core tests (4x4 core, host traffic over AXI4-Lite, AXI RAM, one
Python coroutine sampling the activity port every cycle) and divides the simulated cycles by the
wall-clock time of the run (the Verilog generation and the Verilator build are excluded and
reported separately when they happen). The Verilated model is compiled at ``-Os`` (Verilator's
own default; the test suite compiles at ``-O0``): ``VERILATOR_CXX_OPT`` overrides it.
"""

import os
import time

from scripts.profile import run_workload


def run(args):
    os.environ.setdefault("VERILATOR_CXX_OPT", "-Os")
    out = {"design": "NeuronCore 4x4 (bf16), GEMM K=8 M=8 N=16", "simulators": {},
           "verilator_cxx_opt": os.environ["VERILATOR_CXX_OPT"]}
    for sim in ("icarus", "verilator"):
        t0 = time.monotonic()
        rec = run_workload("gemm", 4, sim, {"KT": 2, "MT": 2, "N": 16})
        total = time.monotonic() - t0
        out["simulators"][sim] = {
            "sim_cycles": rec["sim_cycles"],
            "wall_s": round(rec["wall_s"], 2),
            "cycles_per_s": round(rec["sim_cycles"] / max(rec["wall_s"], 1e-9), 1),
            "total_wall_s_incl_build": round(total, 1),
        }
    return out
