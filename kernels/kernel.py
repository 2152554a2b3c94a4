"""``@kernel``: trace a Python function over DRAM tensors, compile it to an ``Image`` and run
it on a backend.

    @kernels.kernel
    def add_one(x):
        out = kernels.ndarray(x.shape, x.dtype)
        t = kernels.load(x)
        kernels.store(out, kernels.tensor_scalar("add", t, 1.0))
        return out

    y = add_one(np.ones((8, 16), np.float32))                  # reference simulator
    run = add_one.run(x, backend="rtl", config=CoreConfig.preset("core8"))
    run.outputs, run.cycles, run.counters
"""

import dataclasses

import numpy as np

from kernels import backends
from kernels.compiler import ProgramTooLong, compile_trace
from kernels.dtypes import as_dtype
from kernels.lang import DRAMTensor, KernelError, Trace, _row_major, tracing

__all__ = ["kernel", "Kernel", "Compiled", "Run", "default_config"]


def default_config():
    """The 8x8 core of the benchmarks with a 2048-instruction program memory."""
    from sim.config import CoreConfig
    return CoreConfig.preset("core8").replace(pmem_depth=2048)


@dataclasses.dataclass
class Compiled:
    """A kernel compiled for one set of argument shapes and one core.

    Members
    -------
    image : sim.image.Image
        Program, DRAM contents (inputs are filled in per call) and readback regions.
    program : kernels.compiler.Program
        Assembly, schedule and DRAM layout.
    inputs, outputs : list of kernels.lang.Buffer
        DRAM buffers of the arguments and of the returned tensors.
    out_shapes : list of tuple
    config : sim.config.CoreConfig
    """

    image: object
    program: object
    inputs: list
    outputs: list
    out_shapes: list
    config: object
    trace: object
    single: bool

    @property
    def asm(self):
        return self.program.asm

    def image_for(self, *arrays):
        """The image with the arguments' bytes placed in DRAM."""
        mem = [(b.addr, b.data) for b in self.trace.buffers
               if b.space == "dram" and b.kind == "constant"]
        for b, a in zip(self.inputs, arrays):
            bits = b.dtype.bits(np.ascontiguousarray(a)).ravel()
            mem.append((b.addr, (bits if b.perm is None else bits[b.perm]).tobytes()))
        return dataclasses.replace(self.image, memory=mem)

    def outputs_from(self, outcome):
        outs = []
        for b, shape, data in zip(self.outputs, self.out_shapes, outcome.memory):
            raw = np.frombuffer(bytes(data), dtype=b.dtype.np)
            if b.perm is not None:
                flat = np.empty_like(raw)
                flat[b.perm] = raw
                raw = flat
            outs.append(raw.reshape(shape).copy())
        return outs


@dataclasses.dataclass
class Run:
    """One kernel call: ``outputs`` (numpy), ``outcome`` (``sim.image.Outcome``: cycles,
    counters, error), the ``compiled`` kernel and, where the backend records it, the engine
    ``timeline``."""

    outputs: list
    outcome: object
    compiled: Compiled
    timeline: object = None

    @property
    def cycles(self):
        return self.outcome.cycles

    @property
    def counters(self):
        return self.outcome.counters


class Kernel:
    """A traced-on-call kernel (see :func:`kernel`)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = fn.__doc__
        self._cache = {}
        self.last_run = None

    def _split(self, kwargs):
        """Kernel parameters (keyword arguments the body takes) and backend options."""
        import inspect
        names = set(inspect.signature(self.fn).parameters)
        params = {k: v for k, v in kwargs.items() if k in names}
        return params, {k: v for k, v in kwargs.items() if k not in names}

    def trace(self, *specs, config=None, **params):
        """Trace for argument specs (numpy arrays, or ``(shape, dtype)`` pairs) and kernel
        parameters (keyword arguments of the body: constants of the trace)."""
        return self._trace(specs, config, params, blocked=True)

    def _trace(self, specs, config, params, blocked):
        cfg = config or default_config()
        tr = Trace(cfg)
        tr.blocked = blocked
        args = []
        with tracing(tr):
            for i, s in enumerate(specs):
                if isinstance(s, np.ndarray):
                    shape, dt = s.shape, as_dtype(s.dtype, f"argument {i}")
                else:
                    shape, dt = tuple(s[0]), as_dtype(s[1], f"argument {i}")
                if not shape:
                    raise KernelError(f"argument {i}: scalars are not tensors; pass an array")
                import math
                b = tr.buffer("dram", tr.unique(f"arg{i}"), math.prod(shape) * dt.nbytes, dt,
                              kind="input")
                b.index = i
                tr.inputs.append(b)
                args.append(DRAMTensor(b, shape, _row_major(shape)))
            result = self.fn(*args, **params)
        single = not isinstance(result, (tuple, list))
        results = [result] if single else list(result)
        for r in results:
            if not isinstance(r, DRAMTensor) or r.buffer.kind != "output":
                raise KernelError(f"kernel {self.__name__} must return tensors made with "
                                  f"kernels.ndarray, not {r!r}")
        tr.outputs = [r.buffer for r in results]
        return tr, results, single

    def compile(self, *specs, config=None, **params):
        """Trace and compile for these argument specs and parameters; cached per shapes,
        dtypes, parameters and core."""
        cfg = config or default_config()
        key = (tuple((tuple(s.shape), str(s.dtype)) if isinstance(s, np.ndarray) else
                     (tuple(s[0]), str(as_dtype(s[1]))) for s in specs), cfg,
               tuple(sorted((k, repr(v)) for k, v in params.items())))
        if key in self._cache:
            return self._cache[key]
        from sim.image import Image
        tr, results, single = self.trace(*specs, config=cfg, **params)
        try:
            prog = compile_trace(tr)
        except ProgramTooLong:
            # Blocked layouts (kernels.Layout) can take more register set-ups than plain
            # ones: a program that does not fit with them is traced again without.
            if all(b.perm is None for b in tr.buffers):
                raise
            tr, results, single = self._trace(specs, cfg, params, blocked=False)
            prog = compile_trace(tr)
        image = Image(program=prog.words,
                      readback=[(r.buffer.addr, r.buffer.size) for r in results],
                      max_cycles=5_000_000)
        c = Compiled(image=image, program=prog, inputs=tr.inputs,
                     outputs=[r.buffer for r in results], out_shapes=[r.shape for r in results],
                     config=cfg, trace=tr, single=single)
        self._cache[key] = c
        return c

    def run(self, *arrays, backend="refsim", config=None, races=True, **options):
        """Run on ``backend`` (``refsim``, ``rtl`` or ``fpga``); returns a :class:`Run`.

        ``races`` (refsim) runs the race checker on the program and raises if two engines
        can touch the same word unordered. Keyword arguments that the kernel body takes are
        its parameters; the others go to the backend (``rtl``: ``simulator=``; ``fpga``:
        ``host=`` a ``sim.host.SyncHost``)."""
        params, options = self._split(options)
        arrays = [np.asarray(a) for a in arrays]
        comp = self.compile(*arrays, config=config, **params)
        image = comp.image_for(*arrays)
        outcome, timeline = backends.run(backend, comp.config, image, races=races, **options)
        if outcome.error is not None:
            raise outcome.error
        run = Run(outputs=comp.outputs_from(outcome), outcome=outcome, compiled=comp,
                  timeline=timeline)
        self.last_run = run
        return run

    def __call__(self, *arrays, backend="refsim", config=None, **options):
        """Run and return the output array (or a tuple of them)."""
        run = self.run(*arrays, backend=backend, config=config, **options)
        return run.outputs[0] if run.compiled.single else tuple(run.outputs)


def kernel(fn):
    """Decorate a kernel body: a function of DRAM tensors (one per numpy argument) that
    returns the tensors it made with :func:`kernels.ndarray`."""
    return Kernel(fn)
