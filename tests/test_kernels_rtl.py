"""The kernel library on the RTL (the fast Verilator backend, ``fastsim``) for small shapes:
every output bit-exact against the reference simulator's run of the same image, so the
compiled semaphores order the concurrent engines as the model assumes. Skipped where the fast
backend cannot be built (a cocotb fallback covers the RTL path in ``kernels.backends``).

A TABLE_LD directly followed by an ACT through the table (gelu, softmax's reciprocal of the
exp row sums, :func:`test_gelu_on_rtl`) completes with the golden model's results (see
docs/vector.md, the LUT's double buffering).
"""

import ml_dtypes
import numpy as np
import pytest

from kernels.backends import fast_backend
from kernels.lib import (attention, conv2d, gemm, gemm_int8, gemm_tn, layernorm, linear,
                         linear_int8, mlp, rmsnorm, softmax)
from sim.config import CoreConfig

_NO_FAST = pytest.mark.skipif(fast_backend() is None, reason="fastsim not available")

BF = ml_dtypes.bfloat16
CFG = CoreConfig.preset("core4").replace(pmem_depth=1024)


def _cases():
    rng = np.random.default_rng(2024)
    n = lambda *s: rng.standard_normal(s).astype(np.float32)
    b = lambda *s: rng.standard_normal(s).astype(BF)
    i8 = lambda *s: rng.integers(-128, 128, s).astype(np.int8)
    return {
        "gemm_tn": (gemm_tn, (b(10, 6), b(10, 20)), {}),
        "gemm_fp8": (gemm, (n(5, 7).astype(ml_dtypes.float8_e4m3fn),
                            n(7, 9).astype(ml_dtypes.float8_e4m3fn)), {}),
        "gemm_int8": (gemm_int8, (i8(9, 5), i8(9, 7)), {}),
        "linear_sigmoid": (linear, (b(6, 8), b(8, 5), n(5)), {"func": "sigmoid"}),
        "linear_sr": (linear, (b(4, 4), b(4, 4), n(4)), {"out_dtype": "bf16", "rnd": "sr"}),
        "linear_int8": (linear_int8, (i8(5, 8), i8(8, 4)), {"scale": 0.02, "bias": 1.0}),
        "mlp": (mlp, (b(5, 8), b(8, 6), n(6), b(6, 3), n(3)), {"func": "sigmoid"}),
        "softmax": (softmax, (n(6, 12),), {}),
        "layernorm": (layernorm, (n(4, 10), n(10), n(10)), {}),
        "rmsnorm": (rmsnorm, (n(4, 10), n(10)), {}),
        "attention": (attention, (b(4, 4), b(8, 4), b(8, 4)), {}),
        "conv2d": (conv2d, (b(2, 5, 5), b(3, 2, 2, 2)), {}),
    }


#: Kernels whose RTL run does not complete (none).
RTL_HANGS = {}


@_NO_FAST
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(
    reason=RTL_HANGS[n], strict=False)) if n in RTL_HANGS else n for n in _cases()])
def test_library_kernel_on_rtl(name):
    kern, args, params = _cases()[name]
    ref = kern.run(*args, config=CFG, **params)
    run = kern.run(*args, backend="rtl", config=CFG, **params)
    assert run.outcome.backend == "rtl-fast" and run.cycles > 0
    for got, exp in zip(run.outputs, ref.outputs):
        assert np.array_equal(got.view(np.uint8), exp.view(np.uint8)), name


@_NO_FAST
def test_gelu_on_rtl():
    import dataclasses
    import kernels as kl
    from kernels.backends import run_rtl

    @kl.kernel
    def k(x):
        out = kl.ndarray(x.shape, kl.fp32)
        kl.store(out, kl.activation("gelu", kl.load(x)))
        return out
    x = np.linspace(0.5, 3.0, 32, dtype=np.float32).reshape(4, 8)
    c = k.compile(x, config=CFG)
    out, _ = run_rtl(CFG, dataclasses.replace(c.image_for(x), max_cycles=100_000))
    assert np.array_equal(c.outputs_from(out)[0], k(x, config=CFG))


@pytest.mark.long
def test_cocotb_fallback_icarus():
    """The RTL backend's cocotb path (``kernels/cocotb_image.py`` on Icarus) runs the same
    image bit-exactly (minutes: it builds the core for Icarus)."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 4)).astype(BF)
    x = rng.standard_normal((8, 8)).astype(BF)
    ref = gemm_tn(w, x, config=CFG)
    run = gemm_tn.run(w, x, backend="rtl", config=CFG, simulator="icarus")
    assert run.outcome.backend == "rtl-icarus" and run.cycles > 0
    assert np.array_equal(run.outputs[0].view(np.uint32), ref.view(np.uint32))


@_NO_FAST
@pytest.mark.long
def test_streaming_gemm_on_rtl():
    """The compiled streaming GEMM (8x8, K = M = 192, N = 768, BF16; ``kernels.bench``) on
    the RTL: bit-exact, free of races, and the tensor engine at least 92.2 % busy
    (``PERF_TENSOR_BUSY / PERF_CYCLES``, as the hand-written program of
    ``cocotb_tests/test_core_profile.py``). Minutes: it builds the 8x8 core of
    ``kernels.bench.stream_config``."""
    from kernels.bench import _specs, measure, workloads
    from kernels.lib.linalg import reference_gemm_tn
    from sim.races import check_program
    w = workloads(["gemm_stream"])[0]
    assert check_program(w.config, w.image.program) == []
    r = measure(w, "rtl")
    assert r["tensor_busy"] >= 0.922, r
    wa, xa = next(s[3] for s in _specs() if s[0] == "gemm_stream")
    got = w.compiled.outputs_from(w.outcome)[0]
    assert np.array_equal(got.view(np.uint32), reference_gemm_tn(wa, xa, 8).view(np.uint32))
