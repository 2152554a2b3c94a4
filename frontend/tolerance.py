"""How close a model's output on the core must be to an exact reference, per operator and
tensor format, and why (``docs/onnx.md``, section Tolerances).

The core is bit-exact against its reference simulator; against a float reference (onnxruntime,
the ONNX node test cases' expected outputs) it differs by the rounding the formats and the
activation tables introduce. Each bound below follows from that rounding:

* ``u_in``: unit roundoff of the tensor engine's input format (BF16 2^-8, FP8 E4M3 2^-4);
  both operands of a product are rounded, so a product is off by at most ``2 u_in``.
* FP32 accumulation of ``K`` products in order adds at most ``K 2^-24`` of the absolute sum.
* A table function is within 1 BF16 ULP at 128-512 entries (``python -m scripts.bench lut
  --json``); models run with 256-entry tables (``frontend.default_config``). One BF16 ULP is
  at most ``2^-7`` of the value, and the input's own rounding adds about as much: ``2^-6``.
* Vector-engine FP32 arithmetic rounds once per operation (RNE), flushes subnormals.
"""

import numpy as np

__all__ = ["U_IN", "LUT_RTOL", "FP32_RTOL", "TINY", "ELEMENTWISE", "check_close", "loosest"]

#: Unit roundoff of the tensor engine's input formats.
U_IN = {"bf16": 2.0 ** -8, "fp8": 2.0 ** -4, "int8": 2.0 ** -8}
#: Two BF16 ULPs, relative: an activation table's error bound.
LUT_RTOL = 2.0 ** -6
#: A few FP32 roundings.
FP32_RTOL = 2.0 ** -21
#: Subnormals are flushed to zero by the vector engine.
TINY = 2.0 ** -125

#: ``{op: (rtol, atol_rel, why)}`` for operators whose error is relative to the output
#: (``atol_rel`` is relative to the largest magnitude of the expected output).
ELEMENTWISE = {
    "Transpose": (0.0, 0.0, "layout only: exact"),
    "Reshape": (0.0, 0.0, "layout only: exact"),
    "Flatten": (0.0, 0.0, "layout only: exact"),
    "Concat": (0.0, 0.0, "layout only: exact"),
    "Identity": (0.0, 0.0, "layout only: exact"),
    "Add": (FP32_RTOL, 0.0, "one FP32 rounding"),
    "Sub": (FP32_RTOL, 2.0 ** -22, "one FP32 rounding (cancellation: relative to the inputs)"),
    "Mul": (FP32_RTOL, 0.0, "one FP32 rounding"),
    "Div": (LUT_RTOL + FP32_RTOL, 0.0, "by a constant: its FP32 reciprocal (two roundings); "
            "by a tensor: the reciprocal table (2 BF16 ULP)"),
    "Relu": (0.0, 0.0, "exact (max(x, 0) on the vector ALU)"),
    "Sigmoid": (LUT_RTOL, 2.0 ** -12, "table function"),
    "Tanh": (LUT_RTOL, 2.0 ** -12, "table function"),
    "Erf": (LUT_RTOL, 2.0 ** -12, "table function"),
    "Exp": (LUT_RTOL, 2.0 ** -20, "table function"),
    "Gelu": (LUT_RTOL, 2.0 ** -10, "table function"),
    "Softmax": (4 * 2.0 ** -7, 2.0 ** -20, "exp and reciprocal tables (2 ULP each) and the "
                "FP32 sum: 4 BF16 ULP"),
    "LayerNormalization": (2 * LUT_RTOL, 2 * LUT_RTOL, "the rsqrt table on the normalised "
                           "value; relative to the largest output where beta cancels it"),
    "ReduceSum": (FP32_RTOL, 2.0 ** -20, "FP32 sum in order: n 2^-24 of the absolute sum"),
    "ReduceMean": (FP32_RTOL, 2.0 ** -20, "FP32 sum in order, times 1/n"),
    "MaxPool": (0.0, 0.0, "exact (a maximum)"),
    "AveragePool": (FP32_RTOL, 2.0 ** -20, "FP32 sum and a reciprocal count"),
    "DequantizeLinear": (FP32_RTOL, 0.0, "one FP32 product"),
}


def loosest(ops, last):
    """The operator whose bound a model of several operators (``ops``) is checked with: the
    matrix products' if any (their bound grows with the data), else the largest relative
    bound of :data:`ELEMENTWISE`; ``last`` (the output's producer) breaks ties."""
    for op in ("MatMul", "Gemm", "Conv"):
        if op == last:
            return op
    best = last
    for op in ops:
        if op in ELEMENTWISE and ELEMENTWISE[op][0] + ELEMENTWISE[op][1] > \
                ELEMENTWISE.get(best, (0, 0))[0] + ELEMENTWISE.get(best, (0, 0))[1]:
            best = op
    return best


def check_close(op, got, expected, *, inputs=(), dtype="bf16", attrs=None):
    """Return None if ``got`` is within the bound of ``op``, else a message with the worst
    element. ``inputs`` (numpy arrays, the node's) size the matrix-product bounds."""
    got = np.asarray(got)
    exp = np.asarray(expected)
    if got.shape != exp.shape:
        return f"shape {got.shape}, expected {exp.shape}"
    if exp.size == 0:
        return None
    if exp.dtype.kind in "iu":
        # Requantization rounds x * (1/s) where the reference divides by s: a tie may round
        # the other way, by one step.
        diff = np.abs(got.astype(np.int64) - exp.astype(np.int64))
        limit = 0 if op not in ("QuantizeLinear", "QLinearMatMul") else 1
        if diff.max() > limit:
            i = np.unravel_index(int(np.argmax(diff)), diff.shape)
            return f"{op}: off by {int(diff.max())} at {i} (limit {limit})"
        return None
    g, e = got.astype(np.float64), exp.astype(np.float64)
    nan = np.isnan(e)
    if np.any(np.isnan(g) != nan):
        return f"{op}: NaN where the reference has none (or the reverse)"
    g, e = np.where(nan, 0, g), np.where(nan, 0, e)
    if op in ("MatMul", "Gemm", "Conv"):
        bound = _product_bound(op, inputs, e, dtype, attrs or {})
    else:
        rtol, atol, _ = ELEMENTWISE.get(op, (LUT_RTOL, LUT_RTOL, ""))
        scale = np.max(np.abs(e[np.isfinite(e)])) if np.any(np.isfinite(e)) else 0.0
        if op in ("Sub", "ReduceSum", "ReduceMean", "AveragePool") and len(inputs):
            scale = max(scale, max(float(np.max(np.abs(np.asarray(x, np.float64)), initial=0))
                                   for x in inputs if np.asarray(x).dtype.kind == "f"))
            if op != "Sub":
                n = max(1, int(np.asarray(inputs[0]).size // max(1, e.size)))
                atol = max(atol, n * 2.0 ** -24)
        bound = rtol * np.abs(e) + atol * scale + TINY
    inf = np.isinf(e)
    bad = np.where(inf, g != e, np.abs(g - e) > bound)
    if np.any(bad):
        i = np.unravel_index(int(np.argmax(np.where(bad, np.abs(g - e) - bound, -np.inf))),
                             e.shape)
        b = float(np.broadcast_to(bound, e.shape)[i])
        return f"{op}: got {g[i]!r}, expected {e[i]!r} at {i} (bound {b:.3g})"
    return None


def _product_bound(op, inputs, e, dtype, attrs):
    """``(2 u_in + (K + 2) 2^-24) K max|a| max|b|`` plus the bias's FP32 rounding: a bound on
    any dot product of length ``K`` whose operands are rounded to the input format."""
    a, b = (np.asarray(x, np.float64) for x in inputs[:2])
    if op == "MatMul":
        K = a.shape[-1]
    elif op == "Gemm":
        K = a.shape[0] if attrs.get("transA", 0) else a.shape[-1]
    else:
        K = int(np.prod(b.shape[1:]))
    amax = float(np.max(np.abs(a), initial=0))
    bmax = float(np.max(np.abs(b), initial=0))
    alpha = abs(float(attrs.get("alpha", 1.0)))
    u = U_IN[dtype]
    bound = (2 * u + u * u + (K + 2) * 2.0 ** -24) * K * amax * bmax * alpha
    return bound + FP32_RTOL * np.abs(e) + TINY
