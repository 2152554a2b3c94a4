"""Tensor engine benchmark: ``python -m scripts.bench tensor [--json] [--quick]``.

Throughput is measured in a cocotb simulation of the generated Verilog (the ``bench`` test of
``cocotb_tests/test_tensor.py``): for each point of a sweep, ``tiles`` full K x M tiles
(K = rows, M = cols) with N moving columns each are streamed back to back (weights reloaded for
every tile, no input idles, output always ready) and the cycles are recorded:

* ``total_cycles``: first stationary beat accepted to last result beat, inclusive;
* ``ideal_cycles``: ``tiles x N`` (every PE busy every cycle);
* ``utilization`` = ideal / total, and ``steady_utilization`` = ideal / (last result - first
  result + 1), the figure without pipeline fill and drain;
* ``load_cycles``: first stationary beat to first moving beat (the first tile's load, not
  hidden), ``fill_latency``: first moving beat to first result, ``drain_latency``: last moving
  beat to last result.

Results are also checked bit-exact against ``sim.tensor`` in the same run.

Resources: ``scripts.synth.ecp5_resources`` (yosys ``synth_ecp5``) of the whole engine for 4x4 and
8x8, INT8-only and BF16-only, and of one (non-top-row) PE of each; per-PE figures are the
whole engine divided by rows x cols (skew, de-skew and control included) and the lone PE.
"""

import contextlib
import json
import os
import pathlib
import sys
import tempfile
import time

__all__ = ["run", "add_arguments", "CONFIGS"]

#: name -> (rows, cols, formats, mul_stages, add_stages, sweep format)
CONFIGS = {
    "8x8_int8": (8, 8, ["INT8"], 1, 1, "INT8"),
    "8x8_fp": (8, 8, ["INT8", "FP8_E4M3", "BF16", "FP16"], 1, 2, "BF16"),
}

N_SWEEP = (1, 8, 16, 32, 64, 128, 256, 512)


def add_arguments(parser):
    parser.add_argument("--simulator", default="verilator", choices=("icarus", "verilator"),
                        help="simulator for the throughput runs (default verilator)")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated subset of {', '.join(CONFIGS)}")
    parser.add_argument("--tiles", type=int, default=4, help="tiles back to back per point")
    parser.add_argument("--no-resources", action="store_true", help="skip yosys synthesis")


@contextlib.contextmanager
def _stdout_to_stderr():
    """The simulator's log goes to stderr so that ``--json`` output stays parseable."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _throughput(name, simulator, tiles, n_sweep):
    from cocotb_tests.common.runner import run_cocotb
    from cocotb_tests.test_tensor import engine_factory
    rows, cols, formats, ms, as_, fmt = CONFIGS[name]
    cfg = {"rows": rows, "cols": cols, "formats": formats, "mul_stages": ms, "add_stages": as_}
    sweep = [{"tiles": tiles, "N": n, "fmt": fmt} for n in n_sweep]
    with tempfile.TemporaryDirectory() as tmp, _stdout_to_stderr():
        out = pathlib.Path(tmp) / "bench.json"
        run_cocotb(engine_factory(rows, cols, formats, ms, as_), name=f"tensor_bench_{name}",
                   config=cfg, test_module="cocotb_tests.test_tensor", simulator=simulator,
                   testcase="bench", extra_env={"TENSOR_BENCH_OUT": str(out),
                                                "TENSOR_BENCH_SWEEP": json.dumps(sweep)})
        points = json.loads(out.read_text())
    from rtl.tensor.pe import row_delay
    from sim.dtypes import Format
    D = row_delay({Format[f] for f in formats}, as_)
    latency, drain = ms + rows * D + cols, (rows - 1) * D + cols   # as TensorEngine documents
    rows_out = []
    for p in points:
        ideal = p["tiles"] * p["N"]
        total = p["last_result"] - p["first_stationary"] + 1
        steady = p["last_result"] - p["first_result"] + 1
        rows_out.append({
            "tiles": p["tiles"], "K": rows, "M": cols, "N": p["N"], "fmt": p["fmt"],
            "total_cycles": total, "ideal_cycles": ideal,
            "utilization": round(ideal / total, 4),
            "steady_cycles": steady, "steady_utilization": round(ideal / steady, 4),
            "load_cycles": p["first_moving"] - p["first_stationary"],
            "fill_latency": p["first_result"] - p["first_moving"],
            "drain_latency": p["last_result"] - p["last_moving"],
            "bit_exact": p["checked"],
        })
    return {"rows": rows, "cols": cols, "formats": formats, "mul_stages": ms,
            "add_stages": as_, "row_delay": D, "documented_latency": latency,
            "drain_before_reload": drain, "no_bubble_when_N_ge": drain + cols,
            "simulator": simulator, "points": rows_out}


def _resources(quick):
    from rtl.tensor.engine import TensorEngine
    from rtl.tensor.pe import ProcessingElement
    from scripts.synth import ecp5_resources
    from sim.dtypes import Format
    out = {}
    sizes = ((4, 4),) if quick else ((4, 4), (8, 8))
    for fmt in (Format.INT8, Format.BF16):
        key = fmt.name.lower()
        pe = ecp5_resources(
            lambda: ProcessingElement({fmt}, mul_stages=1, add_stages=2, int_bits=19),
            f"tensor_pe_{key}")
        out[f"pe_{key}"] = {k: pe.get(k, 0) for k in ("LUT4", "TRELLIS_FF", "CCU2C",
                                                        "MULT18X18D")}
        for rows, cols in sizes:
            t0 = time.time()
            r = ecp5_resources(lambda: TensorEngine(rows, cols, {fmt}, mul_stages=1,
                                                    add_stages=2),
                               f"tensor_{rows}x{cols}_{key}")
            n = rows * cols
            out[f"engine_{rows}x{cols}_{key}"] = {
                "LUT4": r.get("LUT4", 0), "TRELLIS_FF": r.get("TRELLIS_FF", 0),
                "CCU2C": r.get("CCU2C", 0), "MULT18X18D": r.get("MULT18X18D", 0),
                "LUT4_per_PE": round(r.get("LUT4", 0) / n, 1),
                "FF_per_PE": round(r.get("TRELLIS_FF", 0) / n, 1),
                "CCU2C_per_PE": round(r.get("CCU2C", 0) / n, 1),
                "MULT18X18D_per_PE": round(r.get("MULT18X18D", 0) / n, 2),
                "synth_s": round(time.time() - t0, 1),
            }
    out["note"] = ("mul_stages=1, add_stages=2; per-PE = whole engine / (rows x cols), "
                   "skew/de-skew/control included; pe_* = one PE with an adder "
                   "(INT8: as in row 7, a 19-bit partial sum)")
    return out


def run(args):
    quick = getattr(args, "quick", False)
    simulator = getattr(args, "simulator", "verilator")
    names = getattr(args, "configs", ",".join(CONFIGS)).split(",")
    if quick:
        names = ["8x8_int8"]
    tiles = getattr(args, "tiles", 4)
    n_sweep = (8, 64, 256) if quick else N_SWEEP
    result = {"throughput": {}}
    for name in names:
        if name not in CONFIGS:
            raise ValueError(f"configs must be among {', '.join(CONFIGS)}, not {name!r}")
        t0 = time.time()
        result["throughput"][name] = _throughput(name, simulator, tiles, n_sweep)
        result["throughput"][name]["wall_s"] = round(time.time() - t0, 1)
    goal = []
    for name, r in result["throughput"].items():
        for p in r["points"]:
            if p["N"] >= 8 * r["rows"]:
                goal.append(p["steady_utilization"])
    result["steady_utilization_min_N_ge_8rows"] = min(goal) if goal else None
    result["goal_98pct_met"] = bool(goal) and min(goal) >= 0.98
    if not getattr(args, "no_resources", False):
        result["ecp5"] = _resources(quick)
    return result
