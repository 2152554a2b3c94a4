"""Neural-network kernels: softmax, layer norm, RMS norm, an attention head and conv2d.

Row-wise kernels put rows on partitions (tiles of ``rows`` rows) and reduce along the free
dimension with the vector engine; a per-row value is spread along the row by
:func:`kernels.broadcast` (a DMA round trip with a zero stride), since the vector engine's
scalar operands are per instruction, not per lane.
"""

import math

import numpy as np

import kernels as kl
from kernels.lang import KernelError, current
from kernels.lib.linalg import chunk_size, load_ktiles, project

__all__ = ["softmax", "layernorm", "rmsnorm", "attention", "conv2d"]


def _rows(x, what):
    if x.ndim != 2:
        raise KernelError(f"{what}: tensor must be 2-D [rows, features], not {x.shape}")
    P = current().config.rows
    return [(r0, min(P, x.shape[0] - r0)) for r0 in range(0, x.shape[0], P)]


#: Row tiles a row-wise kernel takes through each step together: one tile's broadcast (a DMA
#: round trip) overlaps the others' vector work.
GROUP = 4


def _groups(x, what):
    rows = _rows(x, what)
    return [rows[g:g + GROUP] for g in range(0, len(rows), GROUP)]


def _softmax_tiles(ts, out_dtype=kl.fp32):
    """Softmax of each row of every tile ``[p, F]`` of ``ts``: ``exp(x - max) / sum``, each
    step for every tile before the next step."""
    ts = [kl.cast(t, kl.fp32, name="xf") if t.dtype is not kl.fp32 else t for t in ts]
    mx = [kl.reduce("max", t, name="mx") for t in ts]
    mb = [kl.broadcast(m, t.f, name="mxb") for m, t in zip(mx, ts)]
    xc = [kl.tensor_tensor("subtract", t, b, name="xc") for t, b in zip(ts, mb)]
    es, ss = [], []
    for c in xc:
        ss.append(kl.sbuf_tile((c.parts, 1), kl.fp32, name="sum"))
        es.append(kl.activation("exp", c, reduce_res=ss[-1], name="e"))
    rs = [kl.activation("reciprocal", s, name="rcp") for s in ss]
    rb = [kl.broadcast(r, e.f, name="rb") for r, e in zip(rs, es)]
    return [kl.tensor_tensor("multiply", e, b, dtype=out_dtype, name="p")
            for e, b in zip(es, rb)]


@kl.kernel
def softmax(x):
    """Softmax along the last dimension of ``x [R, F]`` (FP32 or BF16 in, FP32 out), in
    groups of ``GROUP`` row tiles."""
    out = kl.ndarray(x.shape, kl.fp32, name="y")
    xl, ol = _row_layouts(x, out)
    for grp in _groups(x, "softmax"):
        ys = _softmax_tiles([kl.load(xl.rows(r0, p), name="x") for r0, p in grp])
        for (r0, p), y in zip(grp, ys):
            kl.store(ol.rows(r0, p), y)
    return out


def _row_layouts(x, out):
    """Layouts of a row-wise kernel's input and output (rows on partitions)."""
    P = current().config.rows
    return kl.Layout(x, P), kl.Layout(out, P)


def _row_vector(v, p, name):
    """A DRAM vector ``v [F]`` repeated on ``p`` partitions (one DMA, partition stride 0)."""
    return kl.load(v.as_strided((p, v.shape[0]), (0, v.strides[0])), name=name)


def _scaled_rows(ts, ss, F, eps):
    """``t * rsqrt(s / F + eps)`` for each tile ``t`` and its row sums ``s`` (step by step
    over the tiles)."""
    rstd = [kl.activation("rsqrt", s, scale=1.0 / F, bias=eps, name="rstd") for s in ss]
    rb = [kl.broadcast(r, F, name="rb") for r in rstd]
    return [kl.tensor_tensor("multiply", t, b, name="xn") for t, b in zip(ts, rb)]


@kl.kernel
def layernorm(x, gamma, beta, eps=1e-5):
    """Layer norm of each row of ``x [R, F]``: ``(x - mean) * rsqrt(var + eps) * gamma +
    beta`` (FP32; ``var`` the biased variance), in groups of ``GROUP`` row tiles."""
    R, F = x.shape
    out = kl.ndarray(x.shape, kl.fp32, name="y")
    xl, ol = _row_layouts(x, out)
    groups = _groups(x, "layernorm")
    # gamma and beta on every partition, loaded once (a partition stride of 0 moves one
    # element per cycle).
    p_max = max(p for g in groups for _, p in g)
    g_all, b_all = _row_vector(gamma, p_max, "g"), _row_vector(beta, p_max, "b")
    for grp in groups:
        ts = [kl.load(xl.rows(r0, p), name="x") for r0, p in grp]
        ss = [kl.reduce("add", t, name="s") for t in ts]
        means = [kl.tensor_scalar("multiply", s, 1.0 / F, name="mean") for s in ss]
        mb = [kl.broadcast(m, F, name="mb") for m in means]
        xc = [kl.tensor_tensor("subtract", t, b, name="xc") for t, b in zip(ts, mb)]
        sq = [kl.tensor_tensor("multiply", c, c, name="sq") for c in xc]
        vs = [kl.reduce("add", q, name="v") for q in sq]
        ys = _scaled_rows(xc, vs, F, eps)
        ys = [kl.tensor_tensor("multiply", y, g_all[0:y.parts, :], name="yg") for y in ys]
        ys = [kl.tensor_tensor("add", y, b_all[0:y.parts, :], name="y") for y in ys]
        for (r0, p), y in zip(grp, ys):
            kl.store(ol.rows(r0, p), y)
    return out


@kl.kernel
def rmsnorm(x, gamma, eps=1e-6):
    """RMS norm of each row of ``x [R, F]``: ``x * rsqrt(mean(x^2) + eps) * gamma`` (FP32),
    in groups of ``GROUP`` row tiles."""
    R, F = x.shape
    out = kl.ndarray(x.shape, kl.fp32, name="y")
    xl, ol = _row_layouts(x, out)
    groups = _groups(x, "rmsnorm")
    g_all = _row_vector(gamma, max(p for g in groups for _, p in g), "g")
    for grp in groups:
        ts = [kl.load(xl.rows(r0, p), name="x") for r0, p in grp]
        sq = [kl.tensor_tensor("multiply", t, t, name="sq") for t in ts]
        vs = [kl.reduce("add", q, name="v") for q in sq]
        ys = _scaled_rows(ts, vs, F, eps)
        ys = [kl.tensor_tensor("multiply", y, g_all[0:y.parts, :], name="y") for y in ys]
        for (r0, p), y in zip(grp, ys):
            kl.store(ol.rows(r0, p), y)
    return out


@kl.kernel
def attention(q, k, v):
    """One attention head ``softmax(q @ k.T / sqrt(d)) @ v``: ``q [S, d]``, ``k [T, d]``,
    ``v [T, d]`` in one tensor format (``d`` at most ``rows``, or a multiple of it: the
    scores accumulate over ``d / rows`` K tiles); FP32 out ``[S, d]``.

    Queries and keys go in tiles of ``b = min(rows, cols)``. Per query tile: the scores in
    PSUM, their row maximum (spread along the row by :func:`kernels.broadcast`) subtracted,
    ``e = exp(scale * (s - max))`` rounded to the inputs' format, ``e`` transposed key tile
    by key tile on the tensor engine (:func:`kernels.pe_transpose`), ``e @ [V | 1]`` (V with
    a column of ones per key tile, so that the row sums come out of the same matmuls) and
    the products times the reciprocal of the sums.

    The start: K and Q come in one record per K tile, K's and Q's alternating, so that the
    first score matmuls wait for their own tiles only; the exp table's words are loaded
    after them and its TABLE_LD (fenced from the DMA) follows the first tile's broadcast, so
    that the broadcast does not wait for the table; V follows the broadcast
    (:func:`kernels.dma_order`) and the reciprocal table the first products.

    The query tiles form a software pipeline. The tensor engine takes, per tile ``i``, the
    transposes of tile ``i`` interleaved with the scores of tile ``i+2`` (the sequencer
    issues two short transposes while the array streams one score matmul), then the products
    of tile ``i``; meanwhile the vector engine computes the row maxima of tile ``i+1`` (their
    broadcast in flight), the copy of tile ``i``'s transposes, the exponentials of tile
    ``i+1`` and the normalization of tile ``i-1``. Every matmul is a block of its own
    (:func:`kernels.new_block`), so that the scheduler can issue vector and DMA records
    between them."""
    cfg = current().config
    S, d = q.shape
    T = k.shape[0]
    P = cfg.rows
    if d > P and d % P:
        raise KernelError(f"attention: head size d = {d} (dimension 1 of q) must be at most "
                          f"rows = {P} or a multiple of it")
    dt = q.dtype
    B = min(P, cfg.cols)
    out = kl.ndarray((S, d), kl.fp32, name="o")
    ol, ql, kl_ = kl.Layout(out, cfg.cols), kl.Layout(q.T, P), kl.Layout(k.T, P)
    if d % P == 0:                                      # K tiles [P, T] and [P, S]
        kT_tiles, qT_all = [], []
        for t in range(d // P):
            kT_tiles.append(kl.load(kl_.rows(t * P, P), name="kT"))
            qT_all.append(kl.load(ql.rows(t * P, P), name="qT"))
    else:
        kT_tiles, qT_all = load_ktiles(kl_, "kT"), load_ktiles(ql, "qT")
    qts = [(s0, min(B, S - s0)) for s0 in range(0, S, B)]
    kts = [(t0, min(B, T - t0)) for t0 in range(0, T, B)]
    scale = 1.0 / math.sqrt(d)
    ident = kl.load(kl.constant(np.eye(B), dt, name="eye"), name="ident")
    # [V | 1] per key tile: the moving operand of e @ V, its last column the row sums (the
    # ones written as 0 * k + 1 by the vector engine, idle until the first scores).
    vl = kl.Layout(v, B) if T % B == 0 else kl.Layout.plain(v, B)
    vbuf = kl.sbuf_tile((B, len(kts) * (d + 1)), dt, name="v1")
    for j in range(len(kts)):
        c = j * (d + 1) + d
        kl.activation(None, kT_tiles[0][:, 0:1], scale=0.0, bias=1.0, out=vbuf[:, c:c + 1])
    # The exp table's words now; its TABLE_LD at the first exponentials.
    kl.preload_table("exp", stage=True)

    def matmul(*args, **kw):
        kl.new_block()
        kl.matmul(*args, **kw)

    def scores(i):
        """Tile ``i``'s score tile and the functions that each issue one of its matmuls."""
        s0, s = qts[i]
        qT_tiles = [t[:, s0:s0 + s] for t in qT_all]
        sc = kl.psum_tile((s, T), kl.fp32, name="scores")
        return sc, [lambda j=j, qt=qt, kt=kt: matmul(sc, qt, kt, accumulate=j > 0)
                    for j, (qt, kt) in enumerate(zip(qT_tiles, kT_tiles))]

    sc = {}
    for i in range(min(2, len(qts))):
        sc[i], mms = scores(i)
        for f in mms:
            f()

    def exps(i, between=None):
        """The exponentials of tile ``i``; ``between`` traces its work after the row
        maxima's broadcast and before the subtraction."""
        mx = kl.reduce("max", sc[i], name="mx")
        mxb = kl.broadcast(mx, T, name="mxb")
        if i == 0:
            kl.dma_order()           # V and the tables' words behind the first broadcast
        if between is not None:
            between()
        xc = kl.tensor_tensor("subtract", sc[i], mxb, name="xc")
        return kl.activation("exp", xc, scale=scale, dtype=dt, name="e")

    def products(i, e):
        """The transposes and products of tile ``i`` (the scores of tile ``i+2`` between
        them); returns the products' PSUM tile and the exponentials of tile ``i+1``."""
        s = qts[i][1]
        pT_ps = kl.psum_tile((B, len(kts) * s), kl.fp32, name="eT_ps")
        trans = [lambda j=j, t0=t0, tt=tt: (
            kl.new_block(), kl.pe_transpose(pT_ps[0:tt, j * s:(j + 1) * s],
                                            e[:, t0:t0 + tt], ident[0:s, 0:s]))
            for j, (t0, tt) in enumerate(kts)]
        later = []
        if i + 2 < len(qts):
            sc[i + 2], later = scores(i + 2)
        while trans:
            if later:
                later.pop(0)()
            trans.pop(0)()
            if trans:
                trans.pop(0)()
        full = [j for j, (_, tt) in enumerate(kts) if tt == B]
        stat = {}

        def copies():
            if full:
                eT = kl.copy(pT_ps[:, 0:len(full) * s], dtype=dt, name="eT")
                stat.update((j, eT[:, j * s:(j + 1) * s]) for j in full)
            if len(full) < len(kts):
                j, tt = len(kts) - 1, kts[-1][1]
                stat[j] = kl.copy(pT_ps[0:tt, j * s:(j + 1) * s], dtype=dt, name="eT_edge")
        if i + 1 < len(qts):
            nxt = exps(i + 1, between=copies)
        else:
            nxt = None
            copies()
        for f in later:                  # the rest of the scores while the copy runs
            f()
        o = kl.psum_tile((s, d + 1), kl.fp32, name="o_ps")
        for j, (t0, tt) in enumerate(kts):
            matmul(o, stat[j], vbuf[0:tt, j * (d + 1):(j + 1) * (d + 1)], accumulate=j > 0)
        return o, nxt

    def normalize(i, o):
        s0, s = qts[i]
        r = kl.activation("reciprocal", o[:, d:d + 1], name="rcp")
        y = kl.tensor_tensor("multiply", o[:, 0:d], kl.broadcast(r, d, name="rb"),
                             name="o_sb")
        kl.store(ol.rows(s0, s), y)

    e = exps(0)
    for j, (t0, tt) in enumerate(kts):
        kl.load(vl.rows(t0, tt), out=vbuf[0:tt, j * (d + 1):j * (d + 1) + d])
    pending = None
    for i in range(len(qts)):
        o, e = products(i, e)
        if i == 0:
            # The reciprocal table once the first products are queued, behind the
            # broadcasts traced before it.
            kl.dma_order()
            kl.preload_table("reciprocal")
        if pending is not None:
            normalize(*pending)
        pending = (i, o)
    normalize(*pending)
    return out


@kl.kernel
def conv2d(x, w):
    """2-D convolution (stride 1, no padding) by im2col: ``x [C, H, W]``, ``w [O, C, kh,
    kw]`` in one tensor format; FP32 out ``[O, H-kh+1, W-kw+1]``. Patch row ``(c, dy, dx)``
    is one partition of the moving operand; the DMA gathers it from ``x`` with 2-D strides."""
    cfg = current().config
    C, H, W = x.shape
    O, C2, kh, kw = w.shape
    if C2 != C:
        raise KernelError(f"conv2d: w has {C2} input channels (dimension 1), x has {C}")
    OH, OW = H - kh + 1, W - kw + 1
    if OH < 1 or OW < 1:
        raise KernelError(f"conv2d: kernel {kh}x{kw} larger than the image {H}x{W}")
    K = C * kh * kw
    out = kl.ndarray((O, OH, OW), kl.fp32, name="y")
    flat = out.reshape(O, OH * OW)
    wcol = w.reshape(O, K).T                            # [K, O]
    w_tiles = load_ktiles(wcol, "w")
    rows = [(c, dy, dx) for c in range(C) for dy in range(kh) for dx in range(kw)]
    # Output rows per chunk so that one chunk's columns fit a matmul's moving stream.
    rpc = max(1, chunk_size(OH * OW, cfg, limit=512) // OW)
    for y0 in range(0, OH, rpc):
        ny = min(rpc, OH - y0)
        tiles = []
        for i, k0 in enumerate(range(0, K, cfg.rows)):
            kk = min(cfg.rows, K - k0)
            t = kl.sbuf_tile((kk, ny * OW), x.dtype, name=f"patch{i}")
            j = 0
            while j < kk:
                c, dy, dx = rows[k0 + j]
                run = 1
                while j + run < kk and rows[k0 + j + run][:2] == (c, dy):
                    run += 1
                src = x.as_strided((run, ny, OW), (1, W, 1),
                                   c * H * W + (y0 + dy) * W + dx)
                kl.load(src, out=t[j:j + run, :])
                j += run
            tiles.append(t)

        def store(ps, m0, mm, y0=y0, ny=ny):
            kl.store(flat[m0:m0 + mm, y0 * OW:(y0 + ny) * OW], kl.copy(ps, name="o"))
        project(w_tiles, tiles, O, store)
    return out
