"""The library's kernels as benchmark workloads, and their cycles, tensor busy fraction and
roofline fraction.

    python -m kernels.bench [--backend model|rtl] [--workloads gemm_stream,softmax,...] [--json]

:func:`workloads` gives, for each workload, the compiled image (inputs in place), the core
configuration and the roofline inputs (MACs, DMA bytes); ``scripts/bench_core.py`` can run
those images on any backend. :func:`measure` runs one: ``model`` is the cycle model of the
sequencer and engines (``sim/cycles.py``: serial engines with estimated costs), ``rtl`` the
fast Verilator backend (``PERF_*`` counters). The roofline of a kernel is
``max(MACs / (rows * cols), DMA bytes / bus bytes per cycle)`` cycles; the fraction reached
is that over the cycles taken.
"""

import argparse
import dataclasses
import json

import ml_dtypes
import numpy as np

from sim.config import CoreConfig

__all__ = ["Workload", "workloads", "measure", "stream_config", "BUS_BYTES", "main"]

#: External-memory bytes the DMA moves per cycle at best (one 64-bit AXI beat).
BUS_BYTES = 8


def stream_config():
    """The 8x8 core with the memories of the streaming GEMM benchmark
    (``cocotb_tests/test_core_profile.py`` ``stream_config``)."""
    return CoreConfig(rows=8, sbuf_depth=8192, psum_depth=2048, formats=["bf16"],
                      lut_entries=64, pmem_depth=2048)


@dataclasses.dataclass
class Workload:
    """One compiled kernel call: ``name``, ``what``, ``config``, ``image`` (inputs placed),
    ``compiled`` (``kernels.Compiled``), ``macs`` (multiply-accumulates of its matmuls),
    ``dma_bytes`` (bytes its DMA records move), ``roofline_cycles``."""

    name: str
    what: str
    config: object
    image: object
    compiled: object
    macs: int
    dma_bytes: int

    @property
    def roofline_cycles(self):
        c = self.config
        return max(-(-self.macs // (c.rows * c.cols)), -(-self.dma_bytes // BUS_BYTES))


def _stats(compiled):
    macs = bytes_ = 0
    for op in compiled.trace.ops:
        a = op.args
        if op.kind == "matmul":
            macs += a["k"] * a["m"] * a["n"]
        elif op.kind in ("dma_ld", "dma_st"):
            bytes_ += a["p"] * a["n0"] * a["n1"] * a["dram"].dtype.nbytes
    return macs, bytes_


def _specs():
    from kernels import lib
    rng = np.random.default_rng(53)
    bf = ml_dtypes.bfloat16
    n = lambda *s: rng.standard_normal(s).astype(np.float32)
    b = lambda *s: rng.standard_normal(s).astype(bf)
    i8 = lambda *s: rng.integers(-128, 128, s).astype(np.int8)
    core8 = CoreConfig.preset("core8").replace(pmem_depth=2048)
    return [
        ("gemm_stream", "W.T @ X, K=M=192, N=768, BF16 in, FP32 out", lib.gemm_tn,
         (b(192, 192), b(192, 768)), {}, stream_config()),
        ("gemm", "W.T @ X, K=M=64, N=128, BF16", lib.gemm_tn, (b(64, 64), b(64, 128)), {},
         core8),
        ("gemm_int8", "W.T @ X, K=M=64, N=128, INT8 in, INT32 out", lib.gemm_int8,
         (i8(64, 64), i8(64, 128)), {}, core8),
        ("linear_gelu", "gelu(x @ w + b), N=32, K=64, M=64, BF16", lib.linear,
         (b(32, 64), b(64, 64), n(64)), {"func": "gelu"}, core8),
        ("linear_int8", "requant(x @ w), N=32, K=64, M=64, INT8", lib.linear_int8,
         (i8(32, 64), i8(64, 64)), {"scale": 0.01}, core8),
        ("mlp", "gelu(x @ w1 + b1) @ w2 + b2, N=32, K=32, H=32, M=16, BF16", lib.mlp,
         (b(32, 32), b(32, 32), n(32), b(32, 16), n(16)), {}, core8),
        ("softmax", "row softmax, 16 x 64 FP32", lib.softmax, (n(16, 64),), {}, core8),
        ("layernorm", "layer norm, 16 x 64 FP32", lib.layernorm, (n(16, 64), n(64), n(64)),
         {}, core8),
        ("rmsnorm", "RMS norm, 16 x 64 FP32", lib.rmsnorm, (n(16, 64), n(64)), {}, core8),
        ("attention", "attention head, S=8, T=32, d=8, BF16", lib.attention,
         (b(8, 8), b(32, 8), b(32, 8)), {}, core8),
        ("conv2d", "conv2d 4x10x10 * 8x4x3x3, BF16", lib.conv2d, (b(4, 10, 10), b(8, 4, 3, 3)),
         {}, core8),
    ]


def workloads(names=None):
    """The library's benchmark workloads (all, or those in ``names``), compiled."""
    out = []
    for name, what, kern, args, params, cfg in _specs():
        if names is not None and name not in names:
            continue
        comp = kern.compile(*args, config=cfg, **params)
        macs, nbytes = _stats(comp)
        out.append(Workload(name, what, cfg, comp.image_for(*args), comp, macs, nbytes))
    return out


def measure(w, backend="model"):
    """Cycles, tensor busy fraction and roofline fraction of workload ``w``."""
    if backend == "model":
        from sim.cycles import EngineCost, MicroSim
        from sim.isa import Engine
        ms = MicroSim(w.image.program, pmem_depth=w.config.pmem_depth,
                      cost=EngineCost(rows=w.config.rows, cols=w.config.cols)).run()
        cycles, busy = ms.cycle, ms.perf[Engine.TENSOR]["busy"]
    elif backend == "rtl":
        from kernels.backends import run_rtl
        out, _ = run_rtl(w.config, w.image)
        if out.error is not None:
            raise out.error
        w.outcome = out
        cycles, busy = out.cycles, out.counters["tensor_busy"]
    else:
        raise ValueError(f"backend must be model or rtl, not {backend!r}")
    return {"what": w.what, "backend": backend, "cycles": cycles,
            "tensor_busy": round(busy / cycles, 4), "macs": w.macs, "dma_bytes": w.dma_bytes,
            "roofline_cycles": w.roofline_cycles,
            "roofline_fraction": round(w.roofline_cycles / cycles, 4),
            "instructions": len(w.image.program)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kernels.bench", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--backend", default="model", choices=("model", "rtl"))
    ap.add_argument("--workloads", default=None, help="comma-separated names")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    names = args.workloads.split(",") if args.workloads else None
    res = {w.name: measure(w, args.backend) for w in workloads(names)}
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"{'workload':12} {'cycles':>8} {'tensor':>7} {'roofline':>8}  what")
        for k, r in res.items():
            print(f"{k:12} {r['cycles']:8d} {r['tensor_busy']:7.3f} "
                  f"{r['roofline_fraction']:8.3f}  {r['what']}")
    return res


if __name__ == "__main__":
    main()
