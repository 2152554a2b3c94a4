"""Runs one workload on the core and records the engines' activity every cycle (for
``scripts/profile.py``, ``scripts/bench_core.py`` and ``scripts/bench_sim.py``).

Environment: ``PROFILE_WORKLOAD`` (gemm, mlp, attention), ``PROFILE_OUT`` (JSON path),
``PROFILE_SHAPE`` (JSON dict of the workload's tiling, optional). The workload itself is checked
bit-exactly against the reference simulator, as in ``test_core.py``.
"""

import json
import os
import time

import cocotb
from cocotb.triggers import RisingEdge

from cocotb_tests.common.core_env import CoreEnv
from cocotb_tests.test_core import _attention, _gemm, _mlp, _seed

FIELDS = ("running", "seq_busy", "dma", "tensor", "vector", "aborting", "seq_wait")


@cocotb.test()
async def profile_run(dut):
    workload = os.environ.get("PROFILE_WORKLOAD", "mlp")
    out = os.environ.get("PROFILE_OUT", "build/profile.json")
    shape = json.loads(os.environ.get("PROFILE_SHAPE", "{}"))
    seed = _seed()
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    samples = []
    stop = {"flag": False}

    async def monitor():
        # One packed sample per cycle; bit i is FIELDS[i] (ACTIVITY_LAYOUT order).
        while not stop["flag"]:
            await RisingEdge(dut.clk)
            samples.append(int(dut.activity.value))

    cocotb.start_soon(monitor())
    t0 = time.monotonic()
    sim0 = cocotb.utils.get_sim_time("ns")
    if workload == "gemm":
        await _gemm(dut, env, seed=seed, **({"KT": 2, "MT": 2, "N": 16} | shape))
    elif workload == "mlp":
        await _mlp(dut, env, seed=seed, **({"KT": 2, "MT": 1, "N": 16} | shape))
    elif workload == "attention":
        await _attention(dut, env, seed=seed, **({"KT": 2} | shape))
    else:
        raise ValueError(f"PROFILE_WORKLOAD must be gemm, mlp or attention, not {workload!r}")
    wall = time.monotonic() - t0
    sim_cycles = int((cocotb.utils.get_sim_time("ns") - sim0) // 10)
    stop["flag"] = True
    host = env.host()
    perf = {}
    for name in ("CYCLES_LO", "TENSOR_BUSY", "VECTOR_BUSY", "DMA_BUSY", "DMA_RD_BYTES",
                 "DMA_WR_BYTES", "INSTRET", "SEM_WAIT"):
        perf[name.lower()] = await host.read(f"PERF_{name}")
    # Keep only the cycles of the program (running high), with their absolute index.
    first = next((i for i, s in enumerate(samples) if s & 1), 0)
    last = max((i for i, s in enumerate(samples) if s & 1), default=0)
    rec = {"workload": workload, "shape": shape, "seed": seed, "fields": FIELDS,
           "perf": perf, "wall_s": wall, "sim_cycles": sim_cycles,
           "start": first, "samples": samples[first:last + 1]}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rec, f)
    dut._log.info("%s: %d program cycles, perf %s, wall %.1f s", workload, last - first + 1,
                  perf, wall)
