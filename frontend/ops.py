"""The supported ONNX operators: for each, a check (run before anything executes) and a
handler that computes the node on the core through the kernel library.

Where the work is arithmetic it runs on the core: matrix products on the tensor engine
(``kernels.lib.gemm``/``gemm_int8``/``conv2d``), everything else on the vector engine
(``frontend.kernels``, ``kernels.lib.softmax``/``layernorm``). Pure layout (Transpose, Reshape,
Flatten, Concat, broadcasting, padding, gathering pooling windows) is done by the host on the
DRAM tensors, as a DMA access pattern would: it costs no core cycles here.

``--dtype`` chooses the tensor engine's input format: ``bf16`` and ``fp8`` (E4M3) round the
operands of every matrix product (FP32 accumulation); ``int8`` quantizes them per tensor
(symmetric, scale ``max|x| / 127`` measured on the data) and accumulates in INT32 exactly.
QuantizeLinear, DequantizeLinear and QLinearMatMul run in INT8 whatever ``--dtype`` says.
"""

import math

import ml_dtypes
import numpy as np

import kernels as kl
from frontend import kernels as fk
from kernels import lib

__all__ = ["SUPPORTED", "HANDLERS", "LUT_OPS"]

#: Element-wise operators evaluated by an activation-table function.
LUT_OPS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp"}
_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply"}


def _f32(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


def _2d(x):
    x = np.asarray(x)
    if x.ndim == 0:
        return x.reshape(1, 1)
    return x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)


#: Rows per kernel launch of the row-wise kernels, in tiles of the core's rows: it bounds the
#: program's length (program memory) whatever the tensor's size.
ROW_TILES = 16


def _rowwise(ctx, node, kern, *arrays, **params):
    """``kern`` on ``arrays`` (2-D, the same rows) in launches of at most ``ROW_TILES`` tiles
    of rows, concatenated."""
    R = arrays[0].shape[0]
    step = ROW_TILES * ctx.config.rows
    if R <= step:
        return ctx.call(node, kern, *arrays, **params)
    parts = [ctx.call(node, kern, *[np.ascontiguousarray(a[r0:r0 + step]) for a in arrays],
                      **params) for r0 in range(0, R, step)]
    return np.concatenate(parts, axis=0)


def _elementwise(ctx, node, kern, x, **params):
    x = np.asarray(x)
    if x.size == 0:
        dt = np.int8 if kern in (fk.quantize, fk.requant) else np.float32
        return np.zeros(x.shape, dt)
    if x.dtype not in (np.int8, np.int32):
        x = _f32(x)
    y = _rowwise(ctx, node, kern, np.ascontiguousarray(_2d(x)), **params)
    return y.reshape(x.shape)


# -- matrix products -----------------------------------------------------------------------

def _quant_sym(x):
    """Per-tensor symmetric INT8: ``(q, scale)`` with ``x ~= q * scale``."""
    m = float(np.max(np.abs(x))) if x.size else 0.0
    scale = m / 127.0 if m > 0 else 1.0
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8), scale


#: Words of SBUF per partition a GEMM launch's stationary operand may take (the rest holds
#: the moving chunks and their outputs).
GEMM_SBUF_SHARE = 0.5


def _blocked(ctx, launch, w, x):
    """``launch(w [K, M], x [K, N])`` (a ``W.T @ X`` kernel call) in launches that fit the
    core: the stationary ``M`` in blocks whose K tiles take at most :data:`GEMM_SBUF_SHARE`
    of SBUF, then halves of ``M`` or ``N`` while a launch exceeds a memory or program memory.
    Each output element is one launch's in-order accumulation over all of ``K``."""
    cfg = ctx.config
    K, M = w.shape
    kt = -(-K // cfg.rows)
    mb = max(cfg.cols, int(cfg.sbuf_depth * GEMM_SBUF_SHARE) // kt // cfg.cols * cfg.cols)
    if M > mb:
        return np.concatenate([_blocked(ctx, launch, w[:, m0:m0 + mb], x)
                               for m0 in range(0, M, mb)], axis=0)
    try:
        return launch(w, x)
    except kl.KernelError as e:
        if not any(k in str(e) for k in ("sbuf_depth", "psum_depth", "pmem_depth")):
            raise
        N = x.shape[1]
        if M > cfg.cols and (M >= N or N <= 1):
            h = -(-M // 2 // cfg.cols) * cfg.cols
            return np.concatenate([_blocked(ctx, launch, w[:, :h], x),
                                   _blocked(ctx, launch, w[:, h:], x)], axis=0)
        if N <= 1:
            raise
        h = N // 2
        return np.concatenate([_blocked(ctx, launch, w, x[:, :h]),
                               _blocked(ctx, launch, w, x[:, h:])], axis=1)


def _int8_launch(ctx, node):
    def launch(w, x):
        return ctx.call(node, lib.gemm_int8, np.ascontiguousarray(w), np.ascontiguousarray(x))
    return launch


def _matmul2(ctx, node, a, b):
    """``a [M, K] @ b [K, N]`` in FP32 with the run's tensor format."""
    a, b = _f32(a), _f32(b)
    if ctx.dtype == "int8":
        qa, sa = _quant_sym(a)
        qb, sb = _quant_sym(b)
        acc = _blocked(ctx, _int8_launch(ctx, node), qa.T, qb)
        return _rowwise(ctx, node, fk.scalar, acc, op="multiply", value=sa * sb)
    dt = {"bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn}[ctx.dtype]

    def launch(w, x):
        # a's rows are loaded transposed by the DMA (lib.gemm).
        return ctx.call(node, lib.gemm, np.ascontiguousarray(w.T), np.ascontiguousarray(x))
    return _blocked(ctx, launch, a.astype(dt).T, b.astype(dt))


def _matmul(ctx, node, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 1:
        y = _matmul(ctx, node, a[None, :], b)
        return y[..., 0, :] if b.ndim > 1 else y[..., 0]
    if b.ndim == 1:
        return _matmul(ctx, node, a, b[:, None])[..., 0]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.zeros(batch + (a.shape[-2], b.shape[-1]), np.float32)
    for idx in np.ndindex(*batch):
        out[idx] = _matmul2(ctx, node, a[idx], b[idx])
    return out


def _h_matmul(ctx, node, a, b):
    return [_matmul(ctx, node, a, b)]


def _h_gemm(ctx, node, a, b, c=None):
    at = node.attrs
    a = np.asarray(a).T if at.get("transA", 0) else np.asarray(a)
    b = np.asarray(b).T if at.get("transB", 0) else np.asarray(b)
    y = _matmul2(ctx, node, a, b)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        y = ctx.call(node, fk.scalar, y, op="multiply", value=alpha)
    if c is not None and beta != 0.0:
        cb = _f32(np.broadcast_to(np.asarray(c, np.float32), y.shape))
        if beta != 1.0:
            cb = ctx.call(node, fk.scalar, cb, op="multiply", value=beta)
        y = _rowwise(ctx, node, fk.binary, y, cb, op="add")
    return [y]


def _conv_pads(node, x_hw, k_hw):
    at = node.attrs
    strides = list(at.get("strides", [1, 1]))
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-x_hw[i] // strides[i])
            total = max((out - 1) * strides[i] + k_hw[i] - x_hw[i], 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads[i], pads[i + 2] = lo, total - lo
        return pads, strides
    if auto == "VALID":
        return [0, 0, 0, 0], strides
    return list(at.get("pads", [0, 0, 0, 0])), strides


def _check_conv(node, consts):
    at = node.attrs
    if any(d != 1 for d in at.get("dilations", [1, 1])):
        return f"dilations = {list(at['dilations'])}: only 1 is supported"
    if len(at.get("kernel_shape", [1, 1])) != 2 or len(at.get("strides", [1, 1])) != 2:
        return "only 2-D convolutions are supported"
    return None


def _conv_band(ctx, node, x, w, y0, ny):
    """Output rows ``y0 .. y0+ny-1`` of the stride-1 convolution of ``x [C, H, W]``: one
    kernel launch, or halves of the filters (when their K tiles overflow SBUF or PSUM) or of
    the rows (when the program would not fit program memory)."""
    kh = w.shape[2]
    C = ctx.config.cols
    try:
        return ctx.call(node, lib.conv2d, np.ascontiguousarray(x[:, y0:y0 + ny + kh - 1]), w)
    except kl.KernelError as e:
        memory = any(k in str(e) for k in ("sbuf_depth", "psum_depth"))
        if not memory and "pmem_depth" not in str(e):
            raise
        if (memory and w.shape[0] > C) or ny == 1:
            if w.shape[0] == 1:
                raise
            h = max(C, w.shape[0] // 2 // C * C) if w.shape[0] > C else w.shape[0] // 2
            return np.concatenate([_conv_band(ctx, node, x, w[:h], y0, ny),
                                   _conv_band(ctx, node, x, w[h:], y0, ny)])
    h = ny // 2
    return np.concatenate([_conv_band(ctx, node, x, w, y0, h),
                           _conv_band(ctx, node, x, w, y0 + h, ny - h)], axis=1)


def _conv_strided(ctx, node, x, w, strides):
    """A strided convolution of ``x [C, H, W]`` (padded) as one GEMM: the host gathers each
    output's window into a column (im2col, a strided DMA pattern per window),
    ``w [O, C, kh, kw]`` flattened is the stationary operand; only the kept outputs are
    computed."""
    O, _, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
    win = win[:, ::strides[0], ::strides[1]]
    OH, OW = win.shape[1:3]
    cols = np.ascontiguousarray(win.transpose(0, 3, 4, 1, 2).reshape(-1, OH * OW))
    wcol = np.ascontiguousarray(w.reshape(O, -1).T)

    def launch(wb, xb):
        return ctx.call(node, lib.gemm_tn, np.ascontiguousarray(wb), np.ascontiguousarray(xb))
    return _blocked(ctx, launch, wcol, cols).reshape(O, OH, OW)


def _h_conv(ctx, node, x, w, b=None):
    x, w = _f32(x), _f32(w)
    if x.ndim != 4:
        raise ValueError(f"Conv '{node.name}': input must be N x C x H x W, not {x.shape}")
    pads, strides = _conv_pads(node, x.shape[2:], w.shape[2:])
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    # conv2d is a float-format kernel: an INT8 run convolves in BF16.
    dt = {"bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
          "int8": ml_dtypes.bfloat16}[ctx.dtype]
    kh = w.shape[2]
    groups = int(node.attrs.get("group", 1))
    if x.shape[1] % groups or w.shape[0] % groups or w.shape[1] * groups != x.shape[1]:
        raise ValueError(f"Conv '{node.name}': {x.shape[1]} input channels and weights "
                         f"{w.shape} do not split into group = {groups}")
    ci, co = x.shape[1] // groups, w.shape[0] // groups
    outs = []
    for n in range(x.shape[0]):
        # A grouped convolution is one convolution per group of channels.
        if strides[0] > 1 or strides[1] > 1:
            y = np.concatenate([
                _conv_strided(ctx, node, xp[n, g * ci:(g + 1) * ci].astype(dt),
                              w[g * co:(g + 1) * co].astype(dt), strides)
                for g in range(groups)])
        else:
            y = np.concatenate([
                _conv_band(ctx, node, xp[n, g * ci:(g + 1) * ci].astype(dt),
                           w[g * co:(g + 1) * co].astype(dt), 0, xp.shape[2] - kh + 1)
                for g in range(groups)])
        outs.append(y)
    y = np.stack(outs)
    if b is not None:
        bb = _f32(np.broadcast_to(np.asarray(b, np.float32)[None, :, None, None], y.shape))
        y = _rowwise(ctx, node, fk.binary, _2d(_f32(y)), _2d(bb), op="add").reshape(y.shape)
    return [y]


# -- element-wise --------------------------------------------------------------------------

def _h_lut(ctx, node, x):
    return [_elementwise(ctx, node, fk.unary, x, func=LUT_OPS[node.op])]


def _h_relu(ctx, node, x):
    """``max(x, 0)`` on the vector ALU: exact, as the two-segment table is, at a twelfth of
    its cost on the reference simulator."""
    return [_elementwise(ctx, node, fk.scalar, x, op="max", value=0.0)]


def _h_gelu(ctx, node, x):
    approx = node.attrs.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    return [_elementwise(ctx, node, fk.unary, x, func="gelu_tanh" if approx == "tanh"
                         else "gelu")]


def _check_gelu(node, consts):
    approx = node.attrs.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    return None if approx in ("none", "tanh") else f"approximate = {approx!r}"


def _h_binary(ctx, node, a, b):
    op = _BINARY[node.op]
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    shape = np.broadcast_shapes(a.shape, b.shape)
    if b.size == 1 and a.shape == shape:
        v = float(b.reshape(()))
        return [_elementwise(ctx, node, fk.scalar, a, op=op, value=v)]
    if a.size == 1 and b.shape == shape and op != "subtract":
        return [_elementwise(ctx, node, fk.scalar, b, op=op, value=float(a.reshape(())))]
    if 0 in shape:
        return [np.zeros(shape, np.float32)]
    ab, bb = _f32(np.broadcast_to(a, shape)), _f32(np.broadcast_to(b, shape))
    y = _rowwise(ctx, node, fk.binary, _2d(ab), _2d(bb), op=op)
    return [y.reshape(shape)]


def _check_div(node, consts):
    for i in (0, 1):
        dt = consts.dtype(node.inputs[i])
        if dt not in (None, np.dtype(np.float32)):
            return f"input {i} type {dt} is not supported (float32 division only)"
    return None


def _h_div(ctx, node, a, b):
    b = np.asarray(b, np.float32)
    a = np.asarray(a, np.float32)
    shape = np.broadcast_shapes(a.shape, b.shape)
    if node.inputs[1] in ctx.constants:
        # A constant divisor: its FP32 reciprocal, computed once by the host.
        recip = (np.float32(1) / b).astype(np.float32)
    else:
        # A computed divisor: the reciprocal activation function (within a BF16 ULP).
        recip = _elementwise(ctx, node, fk.unary, b, func="reciprocal")
    if recip.size == 1 and a.shape == shape:
        return [_elementwise(ctx, node, fk.scalar, a, op="multiply",
                             value=float(recip.reshape(())))]
    ab, rb = _f32(np.broadcast_to(a, shape)), _f32(np.broadcast_to(recip, shape))
    return [_rowwise(ctx, node, fk.binary, _2d(ab), _2d(rb), op="multiply").reshape(shape)]


# -- reductions and normalisations ---------------------------------------------------------

def _axes(node, x, axes_in, default_all=True):
    axes = node.attrs.get("axes")
    if axes is None and axes_in is not None:
        axes = np.asarray(axes_in).reshape(-1).tolist()
    if axes is None or len(axes) == 0:
        return list(range(x.ndim)) if default_all else []
    return sorted(a % x.ndim for a in axes)


def _check_reduce(node, consts):
    return None


def _h_reduce(ctx, node, x, axes_in=None):
    x = _f32(x)
    empty = node.attrs.get("axes") is None and (axes_in is None or np.size(axes_in) == 0)
    if empty and node.attrs.get("noop_with_empty_axes", 0):
        return [x]
    axes = _axes(node, x, axes_in)
    if x.size == 0:
        # Nothing to add: the sum of an empty set is 0 (ReduceMean of one is NaN).
        fill = np.nan if node.op == "ReduceMean" else 0.0
        y = np.full([1 if a in axes else x.shape[a] for a in range(x.ndim)], fill, np.float32)
        return [y if node.attrs.get("keepdims", 1) else y.reshape(
            [x.shape[a] for a in range(x.ndim) if a not in axes])]
    keep = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, keep + axes)
    R = int(np.prod([x.shape[a] for a in keep])) if keep else 1
    F = int(np.prod([x.shape[a] for a in axes]))
    scale = 1.0 / F if node.op == "ReduceMean" else 1.0
    y = _rowwise(ctx, node, fk.reduce_rows, _f32(moved.reshape(R, F)), op="add", scale=scale)
    out_shape = [1 if a in axes else x.shape[a] for a in range(x.ndim)]
    y = y.reshape([x.shape[a] for a in keep]) if keep else y.reshape(())
    if node.attrs.get("keepdims", 1):
        y = y.reshape(out_shape)
    return [y]


def _softmax_rows(ctx, node, x):
    """Softmax of each row of ``x [R, F]``: ``kernels.lib.softmax``, or for a row longer than
    SBUF holds its steps as row kernels (in chunks of ``frontend.kernels.CHUNK``): the row's
    max, ``exp(x - max)``, their sum, its reciprocal (the same tables) and the product."""
    try:
        return _rowwise(ctx, node, lib.softmax, x)
    except kl.KernelError as e:
        if "sbuf_depth" not in str(e):
            raise
    F = x.shape[1]

    def spread(v):
        return _f32(np.broadcast_to(v, x.shape))
    mx = _rowwise(ctx, node, fk.reduce_rows, x, op="max")
    e = _rowwise(ctx, node, fk.binary, x, spread(mx), op="subtract")
    e = _rowwise(ctx, node, fk.unary, e, func="exp")
    r = _rowwise(ctx, node, fk.unary, _rowwise(ctx, node, fk.reduce_rows, e, op="add"),
                 func="reciprocal")
    return _rowwise(ctx, node, fk.binary, e, spread(r), op="multiply").reshape(-1, F)


def _h_softmax(ctx, node, x):
    x = _f32(x)
    if node.opset is not None and node.opset < 13 and x.ndim:
        # Before opset 13 Softmax sees its input as 2-D, [prod(shape[:axis]),
        # prod(shape[axis:])] (axis 1 by default), and normalizes each row.
        axis = node.attrs.get("axis", 1) % x.ndim
        rows = int(np.prod(x.shape[:axis]))
        return [_softmax_rows(ctx, node, x.reshape(rows, -1)).reshape(x.shape)]
    axis = node.attrs.get("axis", -1) % x.ndim if x.ndim else 0
    moved = np.moveaxis(x, axis, -1)
    y = _softmax_rows(ctx, node, _f32(_2d(moved)))
    return [np.moveaxis(y.reshape(moved.shape), -1, axis)]


def _check_layernorm(node, consts):
    if node.attrs.get("stash_type", 1) != 1:
        return "stash_type must be 1 (float32)"
    return None


def _rowwise_norm(ctx, node, x, g, b, eps):
    step = ROW_TILES * ctx.config.rows
    return np.concatenate([ctx.call(node, lib.layernorm, np.ascontiguousarray(x[r0:r0 + step]),
                                    g, b, eps=eps) for r0 in range(0, x.shape[0], step)])


def _h_layernorm(ctx, node, x, scale, bias=None):
    x = _f32(x)
    axis = node.attrs.get("axis", -1) % x.ndim
    eps = float(node.attrs.get("epsilon", 1e-5))
    R = int(np.prod(x.shape[:axis]))
    F = int(np.prod(x.shape[axis:]))
    g = _f32(np.broadcast_to(np.asarray(scale, np.float32), x.shape[axis:]).reshape(F))
    b = (np.zeros(F, np.float32) if bias is None else
         _f32(np.broadcast_to(np.asarray(bias, np.float32), x.shape[axis:]).reshape(F)))
    x2 = _f32(x.reshape(R, F))
    y = _rowwise_norm(ctx, node, x2, g, b, eps)
    outs = [y.reshape(x.shape)]
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        # Mean and InvStdDev as the kernel computes them: mean, centred squares, rsqrt.
        stat_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
        mean = _rowwise(ctx, node, fk.reduce_rows, x2, op="add", scale=1.0 / F)
        xc = _rowwise(ctx, node, fk.binary, x2, _f32(np.broadcast_to(mean, x2.shape)),
                      op="subtract")
        sq = _rowwise(ctx, node, fk.binary, xc, xc, op="multiply")
        var = _rowwise(ctx, node, fk.reduce_rows, sq, op="add")
        inv = _rowwise(ctx, node, fk.unary, var, func="rsqrt", scale=1.0 / F, bias=eps)
        outs += [mean.reshape(stat_shape), inv.reshape(stat_shape)]
    return outs


# -- pooling -------------------------------------------------------------------------------

def _check_pool(node, consts):
    at = node.attrs
    if len(at.get("kernel_shape", [])) != 2:
        return "only 2-D pooling is supported"
    if at.get("ceil_mode", 0):
        return "ceil_mode = 1 is not supported"
    if any(d != 1 for d in at.get("dilations", [1, 1])):
        return f"dilations = {list(at['dilations'])}: only 1 is supported"
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        return "the Indices output is not supported"
    if at.get("storage_order", 0):
        return "storage_order = 1 is not supported"
    return None


def _h_pool(ctx, node, x):
    x = _f32(x)
    k = list(node.attrs["kernel_shape"])
    pads, strides = _conv_pads(node, x.shape[2:], k)
    is_max = node.op == "MaxPool"
    fill = -np.inf if is_max else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:], np.float32), ((pads[0], pads[2]), (pads[1], pads[3])))
    N, C, H, W = xp.shape
    OH = (H - k[0]) // strides[0] + 1
    OW = (W - k[1]) // strides[1] + 1
    # The host gathers every window into a row (a 2-D strided DMA pattern per window).
    win = np.lib.stride_tricks.sliding_window_view(xp, k, axis=(2, 3))
    win = win[:, :, ::strides[0], ::strides[1]][:, :, :OH, :OW]
    rows = _f32(win.reshape(-1, k[0] * k[1]))
    if is_max:
        rows = np.where(np.isneginf(rows), np.float32(-3.4028235e38), rows).astype(np.float32)
        y = _rowwise(ctx, node, fk.reduce_rows, rows, op="max")
        return [y.reshape(N, C, OH, OW)]
    s = _rowwise(ctx, node, fk.reduce_rows, rows, op="add").reshape(N, C, OH, OW)
    if node.attrs.get("count_include_pad", 0):
        counts = np.full((OH, OW), k[0] * k[1], np.float32)
    else:
        cw = np.lib.stride_tricks.sliding_window_view(ones, k)[::strides[0], ::strides[1]]
        counts = cw[:OH, :OW].sum(axis=(2, 3)).astype(np.float32)
    recip = _f32(np.broadcast_to((np.float32(1) / counts).astype(np.float32), s.shape))
    y = _rowwise(ctx, node, fk.binary, _2d(_f32(s)), _2d(recip), op="multiply")
    return [y.reshape(s.shape)]


# -- layout (host) -------------------------------------------------------------------------

def _h_transpose(ctx, node, x):
    perm = node.attrs.get("perm")
    return [np.ascontiguousarray(np.transpose(np.asarray(x), perm))]


def _h_reshape(ctx, node, x, shape):
    x = np.asarray(x)
    shape = [int(s) for s in np.asarray(shape).tolist()]
    if not node.attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


def _h_flatten(ctx, node, x):
    x = np.asarray(x)
    axis = node.attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(int(np.prod(x.shape[:axis])), -1)]


def _h_concat(ctx, node, *xs):
    return [np.concatenate([np.asarray(x) for x in xs], axis=node.attrs["axis"])]


def _h_identity(ctx, node, x, *rest):
    """Identity, and Dropout at inference (its optional mask output is all ones)."""
    x = np.asarray(x)
    return [x, np.ones(x.shape, bool)] if len(node.outputs) > 1 else [x]


def _check_dropout(node, consts):
    if len(node.inputs) > 2 and node.inputs[2]:
        t = consts.get(node.inputs[2])
        if t is None or bool(np.asarray(t).reshape(())):
            return "training_mode is not supported (inference only)"
    return None


def _h_unsqueeze(ctx, node, x, axes=None):
    x = np.asarray(x)
    axes = node.attrs.get("axes") if axes is None else np.asarray(axes).reshape(-1).tolist()
    out_rank = x.ndim + len(axes)
    shape = list(x.shape)
    for a in sorted(int(a) % out_rank for a in axes):
        shape.insert(a, 1)
    return [x.reshape(shape)]


def _h_constant_of_shape(ctx, node, shape):
    """A constant tensor: folded by the host at import (no core work)."""
    from onnx import numpy_helper
    value = node.attrs.get("value")
    v = numpy_helper.to_array(value).reshape(()) if value is not None else np.float32(0)
    return [np.full([int(d) for d in np.asarray(shape).tolist()], v, dtype=v.dtype)]


def _h_sum(ctx, node, *xs):
    y = np.asarray(xs[0], np.float32)
    for x in xs[1:]:
        node_add = type(node)("Add", node.name, [], [], {}, node.index)
        y = _h_binary(ctx, node_add, y, x)[0]
    return [y]


def _check_batchnorm(node, consts):
    if node.attrs.get("training_mode", 0):
        return "training_mode = 1 is not supported (inference only)"
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        return "only the first output (Y) is supported"
    for i in (1, 2, 3, 4):
        if node.inputs[i] not in consts:
            return f"input {i} ({node.inputs[i]}) must be a constant"
    return None


def _h_batchnorm(ctx, node, x, scale, b, mean, var):
    """``(x - mean) * scale / sqrt(var + eps) + b`` per channel: the constants are folded by
    the host into one multiplier and one offset per channel (FP32), applied on the core."""
    x = _f32(x)
    eps = np.float32(node.attrs.get("epsilon", 1e-5))
    a = (np.asarray(scale, np.float32) / np.sqrt(np.asarray(var, np.float32) + eps)).astype(
        np.float32)
    c = (np.asarray(b, np.float32) - np.asarray(mean, np.float32) * a).astype(np.float32)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    am = _f32(np.broadcast_to(a.reshape(shape), x.shape))
    cm = _f32(np.broadcast_to(c.reshape(shape), x.shape))
    y = _rowwise(ctx, node, fk.binary, _2d(x), _2d(am), op="multiply")
    y = _rowwise(ctx, node, fk.binary, y, _2d(cm), op="add")
    return [y.reshape(x.shape)]


def _h_global_average_pool(ctx, node, x):
    x = _f32(x)
    F = int(np.prod(x.shape[2:]))
    y = _rowwise(ctx, node, fk.reduce_rows, _f32(x.reshape(-1, F)), op="add", scale=1.0 / F)
    return [y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))]


# -- INT8 ----------------------------------------------------------------------------------

def _zp(z, like=np.int8):
    return np.int32(0) if z is None else np.asarray(z).astype(np.int32)


def _check_per_tensor(node, consts, names):
    for i in names:
        if len(node.inputs) > i and node.inputs[i]:
            if consts.size(node.inputs[i]) != 1:
                return (f"input {i} ({node.inputs[i]}) must be per tensor (one value of a "
                        f"known shape)")
    return None


def _check_quant(node, consts):
    why = _check_per_tensor(node, consts, (1, 2))
    if why:
        return why
    if node.attrs.get("block_size", 0):
        return "blocked quantization is not supported (per tensor only)"
    ok = (np.dtype(np.int8), np.dtype(np.uint8))
    if node.op == "QuantizeLinear":
        z = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        dt = consts.dtype(z) if z else {None: np.dtype(np.uint8), 0: np.dtype(np.uint8),
                                        2: np.dtype(np.uint8), 3: np.dtype(np.int8)}.get(
                                            node.attrs.get("output_dtype"))
        if dt not in ok:
            return f"output type {dt} is not supported (int8 or uint8)"
        if consts.dtype(node.inputs[0]) not in (None, np.dtype(np.float32)):
            return f"input type {consts.dtype(node.inputs[0])} is not supported (float32)"
    else:
        dt = consts.dtype(node.inputs[0])
        if dt not in ok:
            return f"input type {dt} is not supported (int8 or uint8)"
        if consts.dtype(node.inputs[1]) not in (None, np.dtype(np.float32)):
            return f"scale type {consts.dtype(node.inputs[1])} is not supported (float32)"
    return None


def _h_quantize(ctx, node, x, scale, zp=None):
    x = _f32(x)
    s = float(np.asarray(scale).reshape(()))
    unsigned = zp is None or np.asarray(zp).dtype == np.uint8
    z = int(np.asarray(zp).reshape(())) if zp is not None else 0
    # uint8 q = int8 q' + 128 with the zero point moved by -128.
    bias = float(z - 128) if unsigned else float(z)
    q = _elementwise(ctx, node, fk.quantize, x, scale=1.0 / s, bias=bias).astype(np.int8)
    if unsigned:
        return [(q.astype(np.int16) + 128).astype(np.uint8)]
    return [q]


def _h_dequantize(ctx, node, x, scale, zp=None):
    x = np.asarray(x)
    s = float(np.asarray(scale).reshape(()))
    z = int(np.asarray(zp).reshape(())) if zp is not None else 0
    if x.dtype == np.uint8:
        x8, z = (x.astype(np.int16) - 128).astype(np.int8), z - 128
    else:
        x8 = x.astype(np.int8)
    xf = _rowwise(ctx, node, fk.to_fp32, np.ascontiguousarray(_2d(x8))).reshape(x.shape)
    if z:
        xf = _elementwise(ctx, node, fk.scalar, xf, op="subtract", value=float(z))
    return [_elementwise(ctx, node, fk.scalar, xf, op="multiply", value=s)]


def _split8(v):
    """``v`` (int32, |v| <= 383) as a sum of INT8 parts: the first saturates ``v`` to INT8, each
    next one saturates what is left (255 = 127 + 127 + 1); parts that are zero are left out."""
    parts, rest = [], np.asarray(v, np.int32)
    while not parts or np.any(rest):
        p = np.clip(rest, -128, 127)
        parts.append(p.astype(np.int8))
        rest = rest - p
    return [p for p in parts if np.any(p)] or parts[:1]


def _h_qlinearmatmul(ctx, node, a, sa, za, b, sb, zb, sy, zy):
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim > 2 or b.ndim > 2:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
        outs = [_h_qlinearmatmul(ctx, node, a[i], sa, za, b[i], sb, zb, sy, zy)[0]
                for i in np.ndindex(*batch)]
        return [np.stack(outs).reshape(batch + outs[0].shape)]
    ai = a.astype(np.int32) - _zp(za)
    bi = b.astype(np.int32) - _zp(zb)
    acc = None
    # Zero-point-shifted operands span up to 9 bits: each is split into INT8 parts whose
    # products the tensor engine accumulates exactly in INT32.
    for pa in _split8(ai):
        for pb in _split8(bi):
            part = _blocked(ctx, _int8_launch(ctx, node), pa.T, pb)
            acc = part if acc is None else (acc.astype(np.int64) + part).astype(np.int32)
    scale = float(np.asarray(sa).reshape(())) * float(np.asarray(sb).reshape(())) / \
        float(np.asarray(sy).reshape(()))
    unsigned = np.asarray(zy).dtype == np.uint8
    z = int(np.asarray(zy).reshape(()))
    bias = float(z - 128) if unsigned else float(z)
    q = _rowwise(ctx, node, fk.requant, np.ascontiguousarray(acc), scale=scale, bias=bias)
    if unsigned:
        return [(q.astype(np.int16) + 128).astype(np.uint8)]
    return [q]


def _check_qlinearmatmul(node, consts):
    why = _check_per_tensor(node, consts, (1, 2, 4, 5, 6, 7))
    if why:
        return why
    for i in (0, 3, 7):
        dt = consts.dtype(node.inputs[i])
        if dt not in (None, np.dtype(np.int8), np.dtype(np.uint8)):
            return f"input {i} type {dt} is not supported (int8 or uint8)"
    for i in (1, 4, 6):
        dt = consts.dtype(node.inputs[i])
        if dt not in (None, np.dtype(np.float32)):
            return f"scale input {i} type {dt} is not supported (float32)"
    return None


def _ok(node, consts):
    return None


#: ``{op_type: (check, handler)}``.
HANDLERS = {
    "MatMul": (_ok, _h_matmul), "Gemm": (_ok, _h_gemm),
    "Add": (_ok, _h_binary), "Sub": (_ok, _h_binary), "Mul": (_ok, _h_binary),
    "Div": (_check_div, _h_div),
    "Relu": (_ok, _h_relu), **{op: (_ok, _h_lut) for op in LUT_OPS},
    "Gelu": (_check_gelu, _h_gelu),
    "Softmax": (_ok, _h_softmax), "LayerNormalization": (_check_layernorm, _h_layernorm),
    "ReduceMean": (_check_reduce, _h_reduce), "ReduceSum": (_check_reduce, _h_reduce),
    "Transpose": (_ok, _h_transpose), "Reshape": (_ok, _h_reshape),
    "Flatten": (_ok, _h_flatten), "Concat": (_ok, _h_concat), "Identity": (_ok, _h_identity),
    "Dropout": (_check_dropout, _h_identity), "Unsqueeze": (_ok, _h_unsqueeze),
    "ConstantOfShape": (_ok, _h_constant_of_shape),
    "Sum": (_ok, _h_sum), "BatchNormalization": (_check_batchnorm, _h_batchnorm),
    "GlobalAveragePool": (_ok, _h_global_average_pool),
    "Conv": (_check_conv, _h_conv),
    "MaxPool": (_check_pool, _h_pool), "AveragePool": (_check_pool, _h_pool),
    "QuantizeLinear": (_check_quant, _h_quantize),
    "DequantizeLinear": (_check_quant, _h_dequantize),
    "QLinearMatMul": (_check_qlinearmatmul, _h_qlinearmatmul),
}

#: ``{op_type: check}`` for :func:`frontend.graph.plan`.
SUPPORTED = {op: check for op, (check, _) in HANDLERS.items()}
