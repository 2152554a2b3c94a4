"""Models from outside: an ONNX importer that runs a graph on the core through the kernel
library (``docs/onnx.md``).

    import frontend
    model = frontend.Model("mlp.onnx")                 # checked and planned: nothing runs yet
    result = model.run({"x": x}, backend="refsim", dtype="bf16")
    result.outputs["y"], result.layers                 # per-node cycles and engine busy

or ``python -m frontend run mlp.onnx --input x.npy --backend refsim --dtype bf16``.

A model with an operator the core cannot run is refused when it is loaded, before anything
runs, by :class:`frontend.graph.UnsupportedModel` (each such node's operator, its name and the
supported list); a malformed model raises :class:`frontend.graph.ModelError` with the ONNX
checker's message.
"""

import dataclasses
import sys
import time

import numpy as np

from frontend.graph import ModelError, UnsupportedModel, load, plan
from frontend import tolerance
from frontend.ops import HANDLERS, SUPPORTED

__all__ = ["default_config", "Model", "Result", "LayerStats", "ModelError", "UnsupportedModel",
           "SUPPORTED", "DTYPES", "BACKENDS", "supported_ops"]

#: Tensor-engine input formats of a run (``--dtype``).
DTYPES = ("bf16", "fp8", "int8")
#: Where kernels run (``kernels.backends``).
BACKENDS = ("refsim", "rtl", "fpga")


def default_config():
    """The core models run on: ``kernels.default_config()`` (the 8x8 core, 2048 program
    words) with 256-entry activation tables, where every table function is within 1 BF16
    ULP (``docs/vector.md``)."""
    import kernels
    return kernels.default_config().replace(lut_entries=256)


def supported_ops():
    """The operator types the importer accepts, sorted."""
    return sorted(SUPPORTED)


@dataclasses.dataclass
class LayerStats:
    """One node's cost: ``kernels`` launched, ``cycles`` (None on the reference simulator,
    which has no clock, unless the run asks for the cycle model) and the engines' busy cycles
    summed over its kernels; ``macs`` and ``dma_bytes`` of its kernels' programs and
    ``roofline_cycles``, the sum over its kernels of ``max(MACs / (rows cols), DMA bytes /
    bus bytes per cycle)``."""

    name: str
    op: str
    kernels: int = 0
    cycles: int = None
    tensor_busy: int = 0
    vector_busy: int = 0
    dma_busy: int = 0
    seconds: float = 0.0
    macs: int = 0
    dma_bytes: int = 0
    roofline_cycles: int = 0

    def busy(self, engine):
        """Fraction of the node's cycles ``engine`` (tensor, vector, dma) was busy."""
        if not self.cycles:
            return None
        return getattr(self, f"{engine}_busy") / self.cycles


@dataclasses.dataclass
class Result:
    """``outputs`` (graph output name -> numpy array), ``layers`` (a :class:`LayerStats`
    per node, in order) and ``values`` (every value of the graph by name)."""

    outputs: dict
    layers: list
    values: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def cycles(self):
        c = [s.cycles for s in self.layers if s.cycles is not None]
        return sum(c) if c else None

    def total(self, field):
        """``field`` of :class:`LayerStats` summed over the layers."""
        return sum(getattr(s, field) or 0 for s in self.layers)

    def table(self):
        """The per-layer report as text."""
        lines = [f"{'node':<28} {'op':<18} {'kernels':>7} {'cycles':>10} {'tensor':>7} "
                 f"{'vector':>7} {'dma':>7}"]
        for s in self.layers:
            def pct(e):
                b = s.busy(e)
                return "-" if b is None else f"{100 * b:.1f}%"
            cyc = "-" if s.cycles is None else f"{s.cycles:,}"
            lines.append(f"{s.name[:28]:<28} {s.op[:18]:<18} {s.kernels:>7} {cyc:>10} "
                         f"{pct('tensor'):>7} {pct('vector'):>7} {pct('dma'):>7}")
        total = self.cycles
        lines.append(f"total cycles: {'-' if total is None else f'{total:,}'}")
        return "\n".join(lines)


#: The cycle model's figures per compiled kernel: ``{id: (compiled, cycles, counters)}``.
_CYCLES = {}


def _program_stats(compiled):
    """``(MACs, DMA bytes)`` of a compiled kernel's program (as ``kernels.bench`` counts)."""
    from kernels.bench import _stats
    return _stats(compiled)


def _model_cycles(compiled):
    """Cycles and busy counters of ``compiled`` on the cycle model of the sequencer and
    engines (``sim/cycles.py``), computed once per compiled kernel."""
    hit = _CYCLES.get(id(compiled))
    if hit is None or hit[0] is not compiled:
        from sim.cycles import EngineCost, MicroSim
        from sim.isa import Engine
        cfg = compiled.config
        ms = MicroSim(compiled.image.program, pmem_depth=cfg.pmem_depth,
                      cost=EngineCost(rows=cfg.rows, cols=cfg.cols)).run()
        counters = {f"{e}_busy": ms.perf[getattr(Engine, e.upper())]["busy"]
                    for e in ("tensor", "vector", "dma")}
        hit = _CYCLES[id(compiled)] = (compiled, ms.cycle, counters)
    return hit[1], hit[2]


class _Context:
    """What a handler sees: the run's options and :meth:`call` to launch a kernel."""

    def __init__(self, backend, dtype, config, constants, options, cycle_model=False,
                 op_backends=None):
        self.backend, self.dtype, self.config = backend, dtype, config
        self.op_backends = dict(op_backends or {})
        self.constants = constants
        self.options = options
        self.cycle_model = cycle_model
        self.stats = None

    def call(self, node, kern, *arrays, **params):
        backend = self.op_backends.get(node.op, self.backend)
        run = kern.run(*[np.ascontiguousarray(a) for a in arrays], backend=backend,
                       config=self.config, **params, **self.options)
        s = self.stats
        s.kernels += 1
        macs, nbytes = _program_stats(run.compiled)
        cfg = run.compiled.config
        bus = getattr(cfg, "dma_data_width", 32) // 8
        s.macs += macs
        s.dma_bytes += nbytes
        s.roofline_cycles += max(-(-macs // (cfg.rows * cfg.cols)), -(-nbytes // bus))
        cycles, counters = run.cycles, run.counters
        if backend == "refsim" and self.cycle_model:
            cycles, counters = _model_cycles(run.compiled)
        if cycles is not None:
            s.cycles = (s.cycles or 0) + cycles
            c = counters or {}
            s.tensor_busy += c.get("tensor_busy", 0)
            s.vector_busy += c.get("vector_busy", 0)
            s.dma_busy += c.get("dma_busy", 0)
        out = run.outputs[0] if run.compiled.single else tuple(run.outputs)
        return out


class Model:
    """An ONNX model, checked and planned for the core.

    Parameters
    ----------
    model : path, bytes or onnx.ModelProto
    """

    def __init__(self, model):
        self.proto = load(model)
        self.plan = plan(self.proto, SUPPORTED)

    @property
    def inputs(self):
        return list(self.plan.inputs)

    @property
    def outputs(self):
        return list(self.plan.outputs)

    def run(self, inputs, *, backend="refsim", dtype="bf16", config=None, progress=None,
            cycle_model=False, op_backends=None, **options):
        """Run the graph; returns a :class:`Result`.

        Parameters
        ----------
        inputs : dict or sequence of numpy arrays
            By graph input name, or in graph input order.
        backend : str
            ``refsim``, ``rtl`` or ``fpga`` (``kernels.backends``; ``options`` go to it, e.g.
            ``host=`` for ``fpga``).
        dtype : str
            The tensor engine's input format: ``bf16``, ``fp8`` (E4M3) or ``int8``.
        config : sim.config.CoreConfig, optional
            The core (default: ``kernels.default_config()``).
        progress : file or None
            Where a line per node is written (``sys.stderr`` from the command line).
        cycle_model : bool
            On the reference simulator (no clock), take each kernel's cycles and engine busy
            counts from the cycle model (``sim/cycles.py``).
        op_backends : dict, optional
            ``{op_type: backend}``: where that operator's kernels run instead (the RTL is
            bit-exact with the reference simulator, so ``{"Conv": "rtl"}`` gives the
            reference simulator's result for a model whose convolutions it is too slow for).
        """
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        if not isinstance(inputs, dict):
            inputs = list(inputs)
            if len(inputs) != len(self.plan.inputs):
                raise ValueError(f"the model takes {len(self.plan.inputs)} inputs "
                                 f"({', '.join(self.plan.inputs)}), not {len(inputs)}")
            inputs = dict(zip(self.plan.inputs, inputs))
        missing = [n for n in self.plan.inputs if n not in inputs]
        if missing:
            raise ValueError(f"missing model input(s): {', '.join(missing)}")
        if config is None:
            config = default_config()
        values = dict(self.plan.constants)
        values.update({k: np.asarray(v) for k, v in inputs.items()})
        for op, b in (op_backends or {}).items():
            if b not in BACKENDS:
                raise ValueError(f"op_backends[{op!r}] must be one of {', '.join(BACKENDS)}, "
                                 f"not {b!r}")
        ctx = _Context(backend, dtype, config, self.plan.constants, options,
                       cycle_model=cycle_model, op_backends=op_backends)
        layers = []
        total = len(self.plan.nodes)
        for i, node in enumerate(self.plan.nodes):
            args = [values[n] if n else None for n in node.inputs]
            ctx.stats = LayerStats(node.name, node.op)
            t0 = time.monotonic()
            outs = HANDLERS[node.op][1](ctx, node, *args)
            ctx.stats.seconds = time.monotonic() - t0
            for name, v in zip(node.outputs, outs):
                if name:
                    values[name] = v
            layers.append(ctx.stats)
            if progress is not None:
                cyc = "" if ctx.stats.cycles is None else f", {ctx.stats.cycles:,} cycles"
                print(f"[{i + 1}/{total}] {node.op} '{node.name}': {ctx.stats.kernels} "
                      f"kernel(s){cyc}, {ctx.stats.seconds:.1f} s", file=progress,
                      flush=True)
        return Result(outputs={n: values[n] for n in self.plan.outputs}, layers=layers,
                      values=values)
