"""Benchmark of the whole core: the MLP layer and the attention head on an 8x8 core.

    python -m scripts.bench core [--json] [--quick] [--simulator icarus|verilator]

For each workload: total cycles of the program (``PERF_CYCLES``), the tensor engine's busy
fraction (``PERF_TENSOR_BUSY / PERF_CYCLES``: cycles with a matmul in its controller, array or
PSUM pipeline), and DMA bytes per cycle (``(PERF_DMA_RD_BYTES + PERF_DMA_WR_BYTES) /
PERF_CYCLES``). The programs are the ones of ``cocotb_tests/test_core.py`` (bit-exact against
the reference simulator in the same run), written for clarity (each phase waits for the
previous one), not yet software-pipelined for overlap.
"""

from scripts.profile import run_workload, summary

#: Workload shapes on an 8x8 core (``--quick``: the 4x4 test core).
SHAPES = {
    8: {"mlp": {"KT": 4, "MT": 2, "N": 32}, "attention": {"KT": 2}},
    4: {"mlp": {"KT": 2, "MT": 1, "N": 16}, "attention": {"KT": 2}},
}


def add_arguments(parser):
    parser.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))


def _describe(rows, workload, shape):
    if workload == "mlp":
        return (f"gelu(X @ W + b): K={shape['KT'] * rows}, M={shape['MT'] * rows}, "
                f"N={shape['N']}, BF16 in, FP32 accumulate, BF16 out with SR")
    return (f"attention head: Sq={rows}, Sk={shape['KT'] * rows}, d={rows}, BF16, "
            f"softmax via exp/reciprocal tables")


def run(args):
    rows = 4 if getattr(args, "quick", False) else 8
    sim = getattr(args, "simulator", "icarus")
    out = {"core": f"{rows}x{rows}", "simulator": sim, "workloads": {}}
    for workload, shape in SHAPES[rows].items():
        rec = run_workload(workload, rows, sim, shape)
        p = rec["perf"]
        cyc = max(p["cycles_lo"], 1)
        out["workloads"][workload] = {
            "what": _describe(rows, workload, shape),
            "cycles": p["cycles_lo"],
            "tensor_busy_fraction": round(p["tensor_busy"] / cyc, 4),
            "vector_busy_fraction": round(p["vector_busy"] / cyc, 4),
            "dma_busy_fraction": round(p["dma_busy"] / cyc, 4),
            "dma_bytes_per_cycle": round((p["dma_rd_bytes"] + p["dma_wr_bytes"]) / cyc, 4),
            "dma_bytes": p["dma_rd_bytes"] + p["dma_wr_bytes"],
            "instructions": p["instret"],
            "timeline_fractions": summary(rec),
            "bit_exact_vs_refsim": True,
        }
    return out
