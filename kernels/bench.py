"""The library's kernels as benchmark workloads, and their cycles, tensor busy fraction and
roofline fraction.

    python -m kernels.bench [--backend model|rtl] [--workloads gemm_stream,softmax,...] [--json]

:func:`workloads` gives, for each workload, the compiled image (inputs in place), the core
configuration and the roofline inputs (MACs, DMA bytes); ``scripts/bench_core.py`` can run
those images on any backend. :func:`measure` runs one: ``model`` is the cycle model of the
sequencer and engines (``sim/cycles.py`` with :class:`RtlCost`, the engine costs the
compiler schedules with, measured on the RTL), ``rtl`` the fast Verilator backend (``PERF_*``
counters); the model's cycles include the RTL's fixed ``RUN_OVERHEAD`` of a program. The
roofline of a kernel is ``max(MACs / (rows * cols), DMA bytes / bus bytes per cycle)`` cycles
(the attainable ``min(peak MACs/cycle, bus bytes/cycle x MACs/byte)`` as cycles), with
``dma_data_width / 8`` bus bytes per cycle; the fraction reached is that over the cycles
taken.
"""

import argparse
import dataclasses
import json

import ml_dtypes
import numpy as np

from kernels import compiler as kc
from sim.config import CoreConfig
from sim.cycles import TABLE_SETUP, EngineCost, MicroSim
from sim.dtypes import STORAGE_BITS, Format
from sim.isa import Engine, VecOp

__all__ = ["Workload", "workloads", "simulate", "measure", "check", "stream_config",
           "wide_config", "bus_bytes", "RtlCost", "main"]


def bus_bytes(config):
    """External-memory bytes the DMA moves per cycle at best: one AXI beat of
    ``dma_data_width`` bits (32 where the configuration does not name a width)."""
    return getattr(config, "dma_data_width", 32) // 8


def stream_config():
    """The 8x8 core with the memories of the streaming GEMM benchmark
    (``cocotb_tests/test_core_profile.py`` ``stream_config``)."""
    return CoreConfig(rows=8, sbuf_depth=8192, psum_depth=2048, formats=["bf16"],
                      lut_entries=64, pmem_depth=2048)


def wide_config(dma_data_width=128):
    """The 8x8 core of the wide-DMA benchmarks: a ``dma_data_width``-bit DMA and memories of
    the size the compute-dominated shapes need (SBUF 16384 and PSUM 2048 words per
    partition, 2048 instructions, every format)."""
    return CoreConfig(rows=8, sbuf_depth=16384, psum_depth=2048, pmem_depth=2048,
                      dma_data_width=dma_data_width)


@dataclasses.dataclass
class Workload:
    """One compiled kernel call: ``name``, ``what``, ``config``, ``image`` (inputs placed),
    ``compiled`` (``kernels.Compiled``), ``macs`` (multiply-accumulates of its matmuls, not
    counting transposes on the array, ``kernels.pe_transpose``),
    ``dma_bytes`` (bytes its DMA records move), ``roofline_cycles``, ``args`` (the input
    arrays)."""

    name: str
    what: str
    config: object
    image: object
    compiled: object
    macs: int
    dma_bytes: int
    args: tuple = ()

    @property
    def roofline_cycles(self):
        c = self.config
        return max(-(-self.macs // (c.rows * c.cols)), -(-self.dma_bytes // bus_bytes(c)))


def _stats(compiled):
    macs = bytes_ = 0
    for op in compiled.trace.ops:
        a = op.args
        if op.kind == "matmul" and not a.get("transpose"):
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
        # Compute-dominated sizes (on the wide core's memories at every width).
        ("mlp_128", "gelu(x @ w1 + b1) @ w2 + b2, N=K=H=M=128, BF16", lib.mlp,
         (b(128, 128), b(128, 128), n(128), b(128, 128), n(128)), {}, wide_config(32)),
        ("attention_64", "attention head, S=T=64, d=64, BF16", lib.attention,
         (b(64, 64), b(64, 64), b(64, 64)), {}, wide_config(32)),
    ]


def workloads(names=None, dma_data_width=None):
    """The library's benchmark workloads (all, or those in ``names``), compiled; with
    ``dma_data_width``, for cores with that DMA bus width (bits): wider than 32 bits, every
    workload on :func:`wide_config`."""
    out = []
    for name, what, kern, args, params, cfg in _specs():
        if names is not None and name not in names:
            continue
        if dma_data_width is not None and dma_data_width > 32:
            cfg = wide_config(dma_data_width)
        elif dma_data_width is not None:
            cfg = cfg.replace(dma_data_width=dma_data_width)
        comp = kern.compile(*args, config=cfg, **params)
        macs, nbytes = _stats(comp)
        out.append(Workload(name, what, cfg, comp.image_for(*args), comp, macs, nbytes, args))
    return out


#: Cycles a program takes on the RTL beyond the sequencer's own (``PERF_CYCLES`` of a program
#: of one ``halt`` is 72 at every DMA width, the cycle model's 7): added to the model's count.
RUN_OVERHEAD = 65
#: Cycles of a TABLE record (LUT writes) on the RTL: per (address, data) pair of the unpaired
#: layout, of the paired one (``sim.isa.TABLE_FUNC_PAIRED``) and per record
#: (``sim.cycles.table_cycles``).
TABLE_PER_PAIR, TABLE_PAIRED_PER_PAIR = 2, 1
#: Cycles by which the vector engine takes a record before the one ahead of it is done (its
#: pipeline's drain overlaps the next record's fill): 9 to 11 measured on the 8x8 core for
#: pairs of REDUCE, TT, TS and COPY records of 1 to 64 elements.
VECTOR_OVERLAP = 10


class RtlCost(EngineCost):
    """``sim.cycles.EngineCost`` with the engine costs ``kernels.compiler`` schedules with
    (measured on the RTL): the DMA's records overlap as ``sim.dma_timing.DmaTimeline`` says
    at every width (the memory's latency ``kernels.compiler.DMA_LATENCY``; built without
    a ``dma_config``, a record moves one element per cycle, plus one cycle per contiguous row
    and a set-up, two cycles per element when its innermost stride is not one element, one
    record after another); a matmul keeps the array ``n``
    cycles (its moving columns) and is done ``m`` + :meth:`tensor_latency` cycles after
    that (its tile's load, the array's and PSUM's pipelines); a TABLE record
    ``TABLE_PER_PAIR`` (paired: ``TABLE_PAIRED_PER_PAIR``) cycles per pair plus
    ``TABLE_SETUP`` (``sim.cycles.table_cycles``); the other vector records as
    ``EngineCost``. Build it with :meth:`for_config`; ``ideal`` leaves engines' data out as
    ``EngineCost.ideal`` says (a DMA record without ``dma_config``: its set-up and one cycle
    per row)."""

    @staticmethod
    def tensor_latency(config):
        """Cycles from the array taking a matmul's last moving column to its done pulse, beside
        its stationary tile's load (``EngineCost.tensor_latency``): SBUF's read port register,
        the controller's stream and ``psum_wr`` pipeline registers (3), the array's fill and
        drain (``TensorEngine.latency``: ``mul_stages + rows * row_delay + norm_stages +
        cols``, ``norm_stages`` the column normalisers' registers of fused accumulation) and
        PSUM's write latency (``2 + PSUM_ADD_STAGES``), after which ``done`` pulses."""
        from rtl.core.top import PSUM_ADD_STAGES
        from rtl.tensor.fused import norm_stages
        from rtl.tensor.pe import row_delay
        fmts = config.formats
        norm = (norm_stages(config.tensor_add_stages)
                if getattr(config, "tensor_accumulate", "fp32") == "fused" else 0)
        engine = (config.tensor_mul_stages + config.rows * row_delay(fmts,
                  config.tensor_add_stages) + norm + config.cols)
        return 3 + engine + 2 + PSUM_ADD_STAGES

    @classmethod
    def for_config(cls, config, ideal=()):
        return cls(rows=config.rows, cols=config.cols, dma_bus_bytes=bus_bytes(config),
                   dma_config=config, dma_latency=kc.DMA_LATENCY,
                   vector_pipeline=kc.VECTOR_PIPELINE, vector_acc_wait=kc.VECTOR_ACC_WAIT,
                   tensor_latency=cls.tensor_latency(config), vector_overlap=VECTOR_OVERLAP,
                   vector_subs=config.rows // (getattr(config, "vector_units", None)
                                               or config.rows), ideal=ideal)

    def __call__(self, engine, r):
        if engine == Engine.DMA and self.dma_config is not None:
            return super().__call__(engine, r)
        if engine == Engine.DMA:
            elems = r["part_count"] * r["n0"] * r["n1"] * self.timed("dma")
            if r["ext_stride0"] == STORAGE_BITS[Format(r["fmt"])] // 8:
                return kc.DMA_SETUP + kc.DMA_RUN * r["part_count"] * r["n1"] + elems
            return kc.DMA_STRIDED_SETUP + kc.DMA_STRIDED * elems
        if engine == Engine.TENSOR:
            return self.columns(r)
        if engine == Engine.VECTOR and r["op"] == VecOp.TABLE:
            return self.table_cost(r, self.rows)
        return super().__call__(engine, r)


def simulate(w, ideal=()):
    """The cycle model's run (``sim.cycles.MicroSim``, finished) of workload ``w`` with
    :class:`RtlCost`, its engines idealized as ``ideal`` says (``sim.cycles.EngineCost.ideal``);
    its ``cycle`` leaves out ``RUN_OVERHEAD``."""
    return MicroSim(w.image.program, pmem_depth=w.config.pmem_depth,
                    cost=RtlCost.for_config(w.config, ideal=ideal)).run()


def measure(w, backend="model"):
    """Cycles, each engine's busy fraction, DMA bytes per cycle and roofline fraction of
    workload ``w`` on ``backend`` (``model`` or ``rtl``; the RTL's outcome is kept in
    ``w.outcome``).

    The busy fractions are the ``PERF_*_BUSY`` counters over the cycles (an engine is busy
    while it holds a record); ``busiest`` names the engine with the highest, the one that
    bounds a kernel below its roofline when the roofline's two terms (MACs and bus bytes) do
    not: the vector engine's element work and the DMA's per-record costs count in neither.
    """
    if backend == "model":
        ms = simulate(w)
        cycles = ms.cycle + RUN_OVERHEAD
        busy = {e: ms.perf[e]["busy"] for e in Engine}
        moved = w.dma_bytes
    elif backend == "rtl":
        from kernels.backends import run_rtl
        out, _ = run_rtl(w.config, w.image)
        if out.error is not None:
            raise out.error
        w.outcome = out
        cycles = out.cycles
        busy = {e: out.counters[f"{e.name.lower()}_busy"] for e in Engine}
        moved = out.counters["dma_rd_bytes"] + out.counters["dma_wr_bytes"]
    else:
        raise ValueError(f"backend must be model or rtl, not {backend!r}")
    return {"what": w.what, "backend": backend, "cycles": cycles,
            "tensor_busy": round(busy[Engine.TENSOR] / cycles, 4),
            "vector_busy": round(busy[Engine.VECTOR] / cycles, 4),
            "dma_busy": round(busy[Engine.DMA] / cycles, 4),
            "busiest": max(Engine, key=lambda e: busy[e]).name.lower(),
            "macs": w.macs, "dma_bytes": w.dma_bytes,
            "dma_bytes_per_cycle": round(moved / cycles, 4),
            "bus_bytes_per_cycle": bus_bytes(w.config), "roofline_cycles": w.roofline_cycles,
            "roofline_fraction": round(w.roofline_cycles / cycles, 4),
            "instructions": len(w.image.program), "estimate": w.compiled.program.estimate}


def check(w):
    """Whether the outputs of workload ``w``'s RTL run (``w.outcome``, after
    :func:`measure` on ``rtl``) are bit-identical to the reference: the reference simulator's
    outputs, or for ``gemm_stream`` the tensor engine's accumulation emulated in numpy
    (``kernels.lib.linalg.reference_gemm_tn``; its 450,000 cycles are slow on the reference
    simulator). Returns a sentence."""
    got = w.compiled.outputs_from(w.outcome)
    if w.name == "gemm_stream":
        from kernels.lib.linalg import reference_gemm_tn
        want, what = [reference_gemm_tn(*w.args, w.config.rows)], "the numpy emulation"
    else:
        from kernels.backends import run as run_backend
        out, _ = run_backend("refsim", w.config, w.image, races=False)
        want, what = w.compiled.outputs_from(out), "refsim"
    same = all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
               for a, b in zip(got, want))
    return f"bit-exact vs {what}" if same else f"FAILED: differs from {what}"


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
        print(f"{'workload':12} {'cycles':>8} {'tensor':>7} {'vector':>7} {'dma':>7} "
              f"{'roofline':>8}  what")
        for k, r in res.items():
            print(f"{k:12} {r['cycles']:8d} {r['tensor_busy']:7.3f} {r['vector_busy']:7.3f} "
                  f"{r['dma_busy']:7.3f} {r['roofline_fraction']:8.3f}  {r['what']}")
    return res


if __name__ == "__main__":
    main()
