"""Element-wise, row and requantization kernels the importer needs beside ``kernels.lib``.

Every kernel takes 2-D DRAM tensors ``[R, F]``: rows go on partitions in tiles of the core's
``rows``, the free dimension in chunks of at most :data:`CHUNK` elements, so any shape fits
SBUF. Arithmetic is the vector engine's (FP32 inside, ``docs/vector.md``).
"""

import kernels as kl
from kernels.lang import current

__all__ = ["CHUNK", "unary", "binary", "scalar", "reduce_rows", "requant", "quantize",
           "to_fp32"]

#: Free-dimension elements per tile.
CHUNK = 128


def _tiles(x):
    P = current().config.rows
    R, F = x.shape
    for r0 in range(0, R, P):
        for f0 in range(0, F, CHUNK):
            yield slice(r0, min(R, r0 + P)), slice(f0, min(F, f0 + CHUNK))


@kl.kernel
def unary(x, func="relu", scale=1.0, bias=0.0):
    """``func(x * scale + bias)`` element-wise (a LUT function or ``linear``), FP32 out."""
    out = kl.ndarray(x.shape, kl.fp32, name="y")
    for rs, fs in _tiles(x):
        t = kl.load(x[rs, fs], name="x")
        kl.store(out[rs, fs], kl.activation(func, t, scale=scale, bias=bias, dtype=kl.fp32,
                                            name="y"))
    return out


@kl.kernel
def binary(a, b, op="add"):
    """``a op b`` element-wise (same shape and dtype), FP32 out."""
    out = kl.ndarray(a.shape, kl.fp32, name="y")
    for rs, fs in _tiles(a):
        ta = kl.load(a[rs, fs], name="a")
        tb = kl.load(b[rs, fs], name="b")
        kl.store(out[rs, fs], kl.tensor_tensor(op, ta, tb, dtype=kl.fp32, name="y"))
    return out


@kl.kernel
def scalar(a, op="multiply", value=1.0):
    """``a op value`` element-wise with an FP32 constant, FP32 out."""
    out = kl.ndarray(a.shape, kl.fp32, name="y")
    for rs, fs in _tiles(a):
        t = kl.load(a[rs, fs], name="a")
        kl.store(out[rs, fs], kl.tensor_scalar(op, t, value, dtype=kl.fp32, name="y"))
    return out


@kl.kernel
def to_fp32(a):
    """``a`` converted to FP32 (exact from INT8, the FP8 formats, BF16 and FP16)."""
    out = kl.ndarray(a.shape, kl.fp32, name="y")
    for rs, fs in _tiles(a):
        t = kl.load(a[rs, fs], name="a")
        kl.store(out[rs, fs], kl.copy(t, dtype=kl.fp32, name="y"))
    return out


@kl.kernel
def reduce_rows(x, op="add", scale=1.0):
    """Each row of ``x [R, F]`` reduced (``add``, ``max`` or ``min``) and multiplied by
    ``scale``: FP32 ``[R, 1]``. Chunks of a long row are combined in order."""
    P = current().config.rows
    R, F = x.shape
    out = kl.ndarray((R, 1), kl.fp32, name="y")
    for r0 in range(0, R, P):
        p = min(P, R - r0)
        acc = None
        for f0 in range(0, F, CHUNK):
            t = kl.load(x[r0:r0 + p, f0:min(F, f0 + CHUNK)], name="x")
            part = kl.reduce(op, t, name="part")
            acc = part if acc is None else kl.tensor_tensor(op, acc, part, name="acc")
        if scale != 1.0:
            acc = kl.tensor_scalar("multiply", acc, scale, name="scaled")
        kl.store(out[r0:r0 + p, :], acc)
    return out


@kl.kernel
def requant(a, scale=1.0, bias=0.0):
    """``sat(rne(a * scale + bias))`` from INT32 to INT8 (the vector engine's requantize)."""
    out = kl.ndarray(a.shape, kl.int8, name="q")
    for rs, fs in _tiles(a):
        t = kl.load(a[rs, fs], name="a")
        kl.store(out[rs, fs], kl.requantize(t, scale, bias, name="q"))
    return out


@kl.kernel
def quantize(a, scale=1.0, bias=0.0):
    """``sat(rne(a * scale + bias))`` from FP32 to INT8 (the activation path without a
    LUT, rounding and saturating on its INT8 output)."""
    out = kl.ndarray(a.shape, kl.int8, name="q")
    for rs, fs in _tiles(a):
        t = kl.load(a[rs, fs], name="a")
        kl.store(out[rs, fs], kl.activation(None, t, scale=scale, bias=bias, dtype=kl.int8,
                                            name="q"))
    return out
