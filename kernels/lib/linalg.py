"""Matrix kernels: GEMM of any shape, the linear layer, the MLP and their INT8 variants.

Layouts: the tensor engine computes ``stationary.T @ moving`` with the contraction dimension
``K`` on partitions. :func:`gemm_tn` is that form on DRAM tensors (``w [K, M]``,
``x [K, N]``); :func:`gemm` is ``a @ b`` (``a`` loaded transposed by the DMA). ``K`` beyond
the core's rows is accumulated in PSUM over K tiles (the first overwrites); ``M`` is tiled by
the core's cols, ``N`` in chunks that fit PSUM; edge tiles are smaller tiles.
"""

import numpy as np

import kernels as kl
from kernels.lang import KernelError, current

__all__ = ["gemm_tn", "gemm", "linear", "mlp", "gemm_int8", "linear_int8", "project",
           "chunk_size"]


#: Moving columns per matmul of a small GEMM on a wide DMA (:func:`_gemm_body`).
WIDE_CHUNK = 64


def chunk_size(n, cfg, limit=128):
    """Moving columns per matmul: at most ``limit`` and a quarter of PSUM, so that several
    PSUM tiles are in flight (the vector engine drains one while the array fills another)."""
    return max(1, min(n, limit, cfg.psum_depth // 4))


def load_ktiles(src, name, out=None, split=False):
    """``src [K, F]`` (a DRAM view, or a :class:`kernels.Layout` in blocks of ``rows``) as
    SBUF views of at most ``rows`` partitions (K tiles). The full K tiles come in one DMA
    record (``[rows, K // rows, F]``, one SBUF tile ``[rows, (K // rows) * F]``, or the view
    ``out`` of that shape), or with ``split`` one record each (so that the first matmul waits
    for the first tile only); an edge tile in a record of its own."""
    P = current().config.rows
    lay = src if isinstance(src, kl.Layout) else kl.Layout.plain(src, P)
    K, F = lay.shape
    kt = K // P
    views = []
    if split and out is None:
        views = [kl.load(lay.rows(t * P, P), name=name) for t in range(kt)]
    elif kt > 1:
        big = kl.load(lay.tiles(0, kt), out=out, name=name)
        views = [big[:, t * F:(t + 1) * F] for t in range(kt)]
    elif kt == 1:
        views = [kl.load(lay.rows(0, P), out=out, name=name)]
    if K % P:
        views.append(kl.load(lay.rows(kt * P, K % P), name=f"{name}_edge"))
    return views


def block_cut(kt):
    """Matmuls per block in a run of ``kt`` accumulating K tiles: a quarter of them (at least
    one), so that each block waits for its own operands and the scheduler issues DMA and
    vector records between blocks, while runs of four or more still roll into hardware
    loops (fewer instructions)."""
    return max(1, kt // 4)


def project(w_tiles, x_tiles, M, epilogue, acc_dtype=kl.fp32):
    """``epilogue(ps, m0, mm)`` after the matmuls of every M tile of ``W.T @ X``:
    ``w_tiles`` are K tiles ``[kk, M]``, ``x_tiles`` K tiles ``[kk, n]`` (same ``kk``), ``ps``
    the PSUM tile ``[mm, n]`` of rows ``m0 .. m0+mm-1``, its matmuls in blocks of
    :func:`block_cut`."""
    C = current().config.cols
    n = x_tiles[0].f
    cut = block_cut(len(w_tiles))
    for m0 in range(0, M, C):
        mm = min(C, M - m0)
        ps = kl.psum_tile((mm, n), acc_dtype, name="ps")
        for t, (w, x) in enumerate(zip(w_tiles, x_tiles)):
            if t % cut == 0:
                kl.new_block()
            kl.matmul(ps, w[:, m0:m0 + mm], x, accumulate=t > 0)
        epilogue(ps, m0, mm)


class _Columns:
    """A K tile of W held as several SBUF tiles of whole column groups: ``t[:, m0:m1]`` is the
    view of the group holding those columns."""

    def __init__(self, groups):
        self.groups = groups           # [(g0, g1, view [kk, g1 - g0])]

    def __getitem__(self, idx):
        _, cols = idx
        for g0, g1, view in self.groups:
            if g0 <= cols.start and cols.stop <= g1:
                return view[:, cols.start - g0:cols.stop - g0]
        raise KernelError(f"columns {cols.start}:{cols.stop} span two column groups of W")


def _column_groups(w, mt, after_first=None):
    """``w [K, M]`` (a :class:`kernels.Layout`) as K tiles of :class:`_Columns`, in groups
    of whole M tiles that make one block of the compiler (``kernels.compiler.BLOCK_RECORDS``
    matmuls per chunk); ``after_first()`` is called once the first group's loads are
    traced."""
    from kernels.compiler import BLOCK_RECORDS
    cfg = current().config
    K, M = w.shape
    kt = -(-K // cfg.rows)
    per = max(1, min(mt, BLOCK_RECORDS // kt))          # M tiles per group
    tiles = [[] for _ in range(kt)]
    for g0 in range(0, M, per * cfg.cols):
        g1 = min(M, g0 + per * cfg.cols)
        for t, view in enumerate(load_ktiles(w.cols(g0, g1 - g0), "w")):
            tiles[t].append((g0, g1, view))
        if g0 == 0 and after_first is not None:
            after_first()
    return [_Columns(g) for g in tiles]


def _check_2d(x, name, what):
    if x.ndim != 2:
        raise KernelError(f"{what}: tensor '{name}' must be 2-D, not shape {x.shape}")


def _gemm_grouped(w, x, out, nc, nx, out_dtype, acc_dtype):
    """``out = w.T @ x`` (``kernels.Layout`` of ``[K, M]``, ``[K, N]``, ``[M, N]``) in chunks
    of at most ``nc`` columns of X (sizes balanced, since a
    matmul of few columns is issued slower than the array takes them), every M tile of a
    chunk in one PSUM tile (two in flight), as a software pipeline: X streams through ``nx``
    SBUF buffers and the outputs through one, so the DMA loads chunk ``c+1`` and stores chunk
    ``c-1`` while the array works on chunk ``c``. W stays in SBUF, loaded in column groups
    after the first two chunks of X; those two chunks are computed group by group as W
    arrives, and with three X buffers the third chunk loads while they finish."""
    from kernels.compiler import BLOCK_RECORDS
    cfg = current().config
    P, C = cfg.rows, cfg.cols
    K, M = w.shape
    N = x.shape[1]
    mt = -(-M // C)
    mts = [(m0, min(C, M - m0)) for m0 in range(0, M, C)]
    nch = -(-N // nc)
    bounds = [N * i // nch for i in range(nch + 1)]
    chunks = [(a, b - a) for a, b in zip(bounds, bounds[1:])]
    nc = max(n for _, n in chunks)
    kfull = K // P
    xbufs = [kl.sbuf_tile((P, max(kfull, 1) * nc), x.dtype, name=f"xbuf{i}") if kfull
             else None for i in range(nx)]
    obuf = kl.sbuf_tile((min(C, M), mt * nc), out_dtype, name="obuf")

    def load_x(i):
        c0, n = chunks[i]
        buf = xbufs[i % nx]
        return load_ktiles(x.cols(c0, n), "x",
                           out=None if buf is None else buf[:, 0:max(kfull, 1) * n])

    def matmuls(ps, x_tiles, w_tiles, m_range):
        n = x_tiles[0].f
        for i in m_range:
            m0, mm = mts[i]
            view = ps[0:mm, i * n:(i + 1) * n]
            for t, (wt, xt) in enumerate(zip(w_tiles, x_tiles)):
                kl.matmul(view, wt[:, m0:m0 + mm], xt, accumulate=t > 0)

    def drain(ps, i, t0=0, t1=mt):
        """Copy M tiles ``t0 .. t1-1`` of chunk ``i`` out of PSUM and store them."""
        c0, n = chunks[i]
        o = kl.copy(ps[:, t0 * n:t1 * n], out=obuf[:, t0 * n:t1 * n], dtype=out_dtype)
        full = min(t1, M // C)
        if full > t0:
            kl.store(out.cols(c0, n).tiles(t0 * C, full - t0), o[0:C, 0:(full - t0) * n])
        if M % C and t1 > M // C:
            m0, e = M // C * C, M // C - t0
            kl.store(out.cols(c0, n).rows(m0, M - m0), o[0:M - m0, e * n:(e + 1) * n])

    head = min(2, len(chunks))
    x_head = [load_x(0)]
    # PSUM tiles all of the largest chunk's size, so that two of them rotate.
    psum = lambda i: kl.psum_tile((min(C, M), mt * nc), acc_dtype,
                                  name="ps")[:, 0:mt * chunks[i][1]]
    ps_head = [psum(i) for i in range(head)]
    w_groups = _column_groups(w, mt, lambda: x_head.extend(load_x(i) for i in range(1, head)))
    per = max(1, min(mt, BLOCK_RECORDS // len(w_groups)))
    for g0 in range(0, mt, per):
        for i in range(head):
            matmuls(ps_head[i], x_head[i], w_groups, range(g0, min(mt, g0 + per)))
    for i in range(head):
        drain(ps_head[i], i)
    for i in range(head, len(chunks)):
        x_tiles = load_x(i)
        ps = psum(i)
        # The last chunk is drained per W group, so that only its last group's copy and
        # store follow the last matmul.
        step = per if i == len(chunks) - 1 else mt
        for g0 in range(0, mt, step):
            matmuls(ps, x_tiles, w_groups, range(g0, min(mt, g0 + step)))
            drain(ps, i, g0, min(mt, g0 + step))


def _gemm_body(w, x, out_dtype, acc_dtype):
    cfg = current().config
    _check_2d(w, "w", "gemm")
    _check_2d(x, "x", "gemm")
    K, M = w.shape
    K2, N = x.shape
    if K != K2:
        raise KernelError(f"gemm: w has K = {K} rows (dimension 0), x has {K2}")
    C = cfg.cols
    out = kl.ndarray((M, N), out_dtype, name="out")
    # Partition-innermost layouts where the DMA is wide (kernels.Layout).
    wl, xl, ol = kl.Layout(w, cfg.rows), kl.Layout(x, cfg.rows), kl.Layout(out, C)
    mt = -(-M // C)
    # Long moving streams amortise each matmul's fill. The M tiles of a chunk share one PSUM
    # tile (one copy, one store, matmuls rolled as one block) when that still leaves 32
    # columns (or all of N) per matmul with two chunks in PSUM.
    nc = min(128, cfg.psum_depth // (2 * mt))
    # On a wide DMA a small GEMM (at most 64 M tiles x chunks) goes M tile by M tile in chunks
    # of WIDE_CHUNK columns: each tile's copy and store overlap the next tile's matmuls, where
    # the grouped form drains its chunks after their last M tile.
    small = kl.wide_dma() and mt * -(-N // WIDE_CHUNK) <= 64
    grouped = mt > 1 and nc >= min(N, 32) and not small
    if not grouped:
        nc = chunk_size(N, cfg)
    kt = -(-K // cfg.rows)
    free = cfg.sbuf_depth - kt * M
    if grouped:
        # SBUF left by W holds three X buffers and one output buffer (two X buffers if three
        # would leave fewer than 32 columns per chunk).
        nx = 3 if free // (3 * kt + mt + 1) >= min(N, 32) else 2
        nc = max(1, min(nc, free // (nx * kt + mt + 1)))
        _gemm_grouped(wl, xl, ol, nc, nx, out_dtype, acc_dtype)
        return out
    # SBUF left by W holds two chunks of X and their outputs.
    nc = max(1, min(nc, free // (2 * kt + 4)))
    if small:
        nc = min(nc, WIDE_CHUNK)
        if wl.blocked:
            _gemm_wide(wl, xl, ol, nc, out_dtype, acc_dtype)
            return out
    # The first chunk of X is loaded before W, so the array starts once W is in.
    first = load_ktiles(xl.cols(0, min(nc, N)), "x")
    w_tiles = load_ktiles(wl, "w")
    for c0 in range(0, N, nc):
        n = min(nc, N - c0)
        x_tiles = first if c0 == 0 else load_ktiles(xl.cols(c0, n), "x")

        def store(ps, m0, mm, c0=c0, n=n):
            kl.store(ol.cols(c0, n).rows(m0, mm), kl.copy(ps, dtype=out_dtype, name="o"))
        project(w_tiles, x_tiles, M, store, acc_dtype)
    return out


def _gemm_wide(w, x, out, nc, out_dtype, acc_dtype):
    """``out = w.T @ x`` (``kernels.Layout`` in blocks) M tile by M tile in chunks of ``nc``
    columns, W loaded M tile by M tile during the first chunk (every K tile of the tile's
    columns in one record) and the first chunk of X K tile by K tile: the array starts after
    the first M tile of W and the first K tile of X, and each tile's copy and store overlap
    the next tile's matmuls. Every matmul is a block of its own (``kernels.new_block``), so
    that each waits for its own K tile and the scheduler issues loads, copies and stores
    between them."""
    cfg = current().config
    P, C = cfg.rows, cfg.cols
    (K, M), N = w.shape, x.shape[1]
    kt = K // P
    w_cols = {}
    for c0, n in [(c0, min(nc, N - c0)) for c0 in range(0, N, nc)]:
        if c0 == 0:
            w_cols[0] = kl.load(w.cols(0, min(C, M)).tiles(0, kt), name="w")
        # The first chunk K tile by K tile, so that the array starts after the first M tile
        # of W and the first K tile of X.
        x_tiles = load_ktiles(x.cols(c0, n), "x", split=c0 == 0)
        for m0 in range(0, M, C):
            mm = min(C, M - m0)
            if m0 not in w_cols:
                w_cols[m0] = kl.load(w.cols(m0, mm).tiles(0, kt), name="w")   # [P, kt * mm]
            wt = w_cols[m0]
            ps = kl.psum_tile((mm, n), acc_dtype, name="ps")
            for t, xt in enumerate(x_tiles):
                kl.new_block()
                kl.matmul(ps, wt[:, t * mm:(t + 1) * mm], xt, accumulate=t > 0)
            kl.store(out.cols(c0, n).rows(m0, mm), kl.copy(ps, dtype=out_dtype, name="o"))


@kl.kernel
def gemm_tn(w, x):
    """``w.T @ x`` for ``w [K, M]``, ``x [K, N]`` in one tensor format; FP32 out."""
    return _gemm_body(w, x, kl.fp32, kl.fp32)


@kl.kernel
def gemm(a, b):
    """``a @ b`` for ``a [M, K]``, ``b [K, N]`` in one tensor format; FP32 out (``a`` is
    loaded transposed by the DMA)."""
    return _gemm_body(a.T, b, kl.fp32, kl.fp32)


@kl.kernel
def gemm_int8(w, x):
    """``w.T @ x`` for INT8 ``w [K, M]``, ``x [K, N]``; INT32 out (wrapping accumulation)."""
    return _gemm_body(w, x, kl.int32, kl.int32)


def _bias_tile(b, m0, mm, n, name="bias"):
    """``b[m0:m0+mm]`` (a DRAM vector) repeated along ``n`` columns: one DMA with a zero
    inner stride."""
    return kl.load(b.as_strided((mm, n), (b.strides[0], 0), m0 * b.strides[0]), name=name)


def _linear_t(xT_tiles, w, b, func, out_dtype, rnd, emit):
    """``emit(y_tile, m0, mm)`` for ``y.T = func(w.T @ x.T + b)`` by M tiles (``w`` a
    :class:`kernels.Layout`; ``xT_tiles`` the K tiles of ``x.T``, or a function that loads
    them, called once the first weights are traced)."""
    M = w.shape[1]
    cfg = current().config
    if w.blocked and w.shape[0] % cfg.rows == 0:
        _linear_blocked(xT_tiles, w, b, func, out_dtype, rnd, emit)
        return
    if callable(xT_tiles):
        xT_tiles = xT_tiles()
    n = xT_tiles[0].f
    w_tiles, k0 = [], 0
    for i, t in enumerate(xT_tiles):
        w_tiles.append(kl.load(w.rows(k0, t.parts), name=f"w{i}"))
        k0 += t.parts
    if k0 != w.shape[0]:
        raise KernelError(f"linear: w has K = {w.shape[0]} rows (dimension 0), x has {k0}")
    project(w_tiles, xT_tiles, M, _linear_epilogue(b, func, out_dtype, rnd, emit, n))


def _linear_epilogue(b, func, out_dtype, rnd, emit, n):
    def epi(ps, m0, mm):
        h = ps
        if b is not None:
            h = kl.tensor_tensor("add", ps, _bias_tile(b, m0, mm, n), name="h")
        y = kl.activation(func, h, dtype=out_dtype, rnd=rnd, name="y")
        emit(y, m0, mm)
    return epi


def _linear_blocked(xT_tiles, w, b, func, out_dtype, rnd, emit):
    """:func:`_linear_t` for ``w`` laid out in blocks and full K tiles: W loaded M tile by M
    tile (every K tile of its columns in one record), so that the first matmuls wait for one
    M tile's weights only."""
    cfg = current().config
    M, kt = w.shape[1], w.shape[0] // cfg.rows
    for m0 in range(0, M, cfg.cols):
        mm = min(cfg.cols, M - m0)
        wt = kl.load(w.cols(m0, mm).tiles(0, kt), name="w")        # [rows, kt * mm]
        if m0 == 0:
            if callable(xT_tiles):
                xT_tiles = xT_tiles()
            if len(xT_tiles) != kt or any(t.parts != cfg.rows for t in xT_tiles):
                raise KernelError(f"linear: w has K = {w.shape[0]} rows (dimension 0), x "
                                  f"has {sum(t.parts for t in xT_tiles)}")
            n = xT_tiles[0].f
            epi = _linear_epilogue(b, func, out_dtype, rnd, emit, n)
            # The table's fence now, not before the next M tiles' weights.
            from kernels.lang import preload_table
            preload_table(func)
        ps = kl.psum_tile((mm, n), kl.fp32, name="ps")
        for t, x in enumerate(xT_tiles):
            if t % block_cut(kt) == 0:
                kl.new_block()
            kl.matmul(ps, wt[:, t * mm:(t + 1) * mm], x, accumulate=t > 0)
        epi(ps, m0, mm)


def _linear_layouts(x, ws, out):
    """Layouts of a layer's ``x [N, K]`` (as ``x.T``, K on partitions), weights ``[K, M]``
    and output ``[N, M]`` (as its transpose, M on partitions)."""
    cfg = current().config
    return (kl.Layout(x.T, cfg.rows), [kl.Layout(w, cfg.rows) for w in ws],
            kl.Layout(out.T, cfg.cols))


def _linear_rows(x, w, out, epilogue, acc_dtype, before=None, split=False):
    """``out = epilogue(x @ w)`` with the rows of ``x [N, K]`` on the array's columns: per
    N tile of ``cols`` rows, ``x.T`` K tiles (stationary) against the K tiles of ``w [K, M]``
    (moving, ``M`` columns per matmul, in chunks that fit a quarter of PSUM), the PSUM tile
    ``[n, m]`` rows of the output. ``epilogue(ps, n0, nn, m0, mm)`` returns the SBUF tile
    stored at rows ``n0..``, columns ``m0..``; ``before()`` is called once the first loads
    are traced (a kernel's table load: it is fenced from the DMA); with ``split`` W comes in
    one record per K tile, so that the first matmul waits for the first only. Every matmul
    is a block of its own (:func:`kernels.new_block`): the sequencer, stalled while the
    tensor engine's queue is full, then issues DMA and vector records between them."""
    cfg = current().config
    N, K = x.shape
    M = w.shape[1]
    if w.shape[0] != K:
        raise KernelError(f"linear: w has K = {w.shape[0]} rows (dimension 0), x has {K}")
    C = cfg.cols
    xl, wl, ol = kl.Layout(x.T, cfg.rows), kl.Layout(w, cfg.rows), kl.Layout(out, C)
    xT = load_ktiles(xl, "xT")                          # K tiles [kk, N]
    w_tiles = load_ktiles(wl, "w", split=split)          # K tiles [kk, M]
    if before is not None:
        before()
    mc = max(1, min(M, 512, cfg.psum_depth // 4))
    for n0 in range(0, N, C):
        nn = min(C, N - n0)
        for m0 in range(0, M, mc):
            mm = min(mc, M - m0)
            ps = kl.psum_tile((nn, mm), acc_dtype, name="ps")
            for t, (xt, wt) in enumerate(zip(xT, w_tiles)):
                kl.new_block()
                kl.matmul(ps, xt[:, n0:n0 + nn], wt[:, m0:m0 + mm], accumulate=t > 0)
            y = epilogue(ps, n0, nn, m0, mm)
            dst = ol.cols(m0, mm)
            kl.store(dst.rows(n0, nn), y)


@kl.kernel
def linear(x, w, b, func="linear", out_dtype="fp32", rnd="rne"):
    """Linear layer ``func(x @ w + b)``: ``x [N, K]``, ``w [K, M]`` in one tensor format,
    ``b [M]`` FP32; ``func`` a LUT function (``linear``: none). Output ``[N, M]`` in
    ``out_dtype``, rounded with ``rnd``. The rows of ``x`` go on the array's columns
    (:func:`_linear_rows`), so that ``b`` is one tile ``[cols, M]`` for every N tile."""
    cfg = current().config
    N, K = x.shape
    M = w.shape[1]
    if b.shape != (M,) or b.dtype is not kl.fp32:
        raise KernelError(f"linear: b must be fp32 [{M}], not {b.dtype} {list(b.shape)}")
    out = kl.ndarray((N, M), out_dtype, name="y")
    P = min(cfg.cols, N)
    bias = {}

    def before():
        # b on every partition (partition stride 0), then the table.
        bias["t"] = kl.load(b.as_strided((P, M), (0, b.strides[0])), name="bias")
        kl.preload_table(func)

    def epi(ps, n0, nn, m0, mm):
        h = kl.tensor_tensor("add", ps, bias["t"][0:nn, m0:m0 + mm], name="h")
        return kl.activation(func, h, dtype=kl.as_dtype(out_dtype), rnd=rnd, name="y")
    _linear_rows(x, w, out, epi, kl.fp32, before)
    return out


@kl.kernel
def mlp(x, w1, b1, w2, b2, func="gelu", out_dtype="fp32"):
    """Two-layer MLP ``func(x @ w1 + b1) @ w2 + b2``: ``x [N, K]``, ``w1 [K, H]``,
    ``w2 [H, M]`` in one tensor format, biases FP32. The hidden activations stay in SBUF
    (transposed, ``H`` on partitions, in the weights' format) as the second layer's moving
    operand."""
    cfg = current().config
    N, K = x.shape
    H, M = w2.shape
    dt = w1.dtype
    out = kl.ndarray((N, M), out_dtype, name="y")
    xl, (w1l, w2l), ol = _linear_layouts(x, [w1, w2], out)
    nc = chunk_size(N, cfg)
    for c0 in range(0, N, nc):
        n = min(nc, N - c0)
        xT = lambda c0=c0, n=n: load_ktiles(xl.cols(c0, n), "xT", split=xl.blocked)
        hT = {}

        def keep(y, m0, mm):
            hT[m0] = y
        _linear_t(xT, w1l, b1, func, dt, "rne", keep)
        h_tiles = [hT[k] for k in sorted(hT)]

        def emit(y, m0, mm, c0=c0, n=n):
            kl.store(ol.cols(c0, n).rows(m0, mm), y)
        _linear_t(h_tiles, w2l, b2, "linear", kl.as_dtype(out_dtype), "rne", emit)
    return out


@kl.kernel
def linear_int8(x, w, scale, bias=0.0, rnd="rne"):
    """INT8 linear layer with INT32 accumulation and requantization:
    ``sat(round((x @ w) * scale + bias))`` to INT8, ``x [N, K]``, ``w [K, M]`` INT8 (the
    rows of ``x`` on the array's columns, :func:`_linear_rows`)."""
    N, K = x.shape
    M = w.shape[1]
    out = kl.ndarray((N, M), kl.int8, name="y")

    def epi(ps, n0, nn, m0, mm):
        return kl.requantize(ps, scale, bias, rnd=rnd, name="q")
    _linear_rows(x, w, out, epi, kl.int32, split=True)
    return out


def reference_gemm_tn(w, x, rows):
    """The tensor engine's result for ``w.T @ x`` (float formats), bit-exact: per K tile of
    ``rows`` the exact products summed top to bottom in FP32 (RNE), tiles accumulated in PSUM
    in order (as ``cocotb_tests.test_core_profile.stream_reference``)."""
    w = np.asarray(w).astype(np.float32)
    x = np.asarray(x).astype(np.float32)
    acc = None
    for t in range(0, w.shape[0], rows):
        s = None
        for k in range(t, min(t + rows, w.shape[0])):
            p = np.outer(w[k], x[k]).astype(np.float32)
            s = p if s is None else (s + p).astype(np.float32)
        acc = s if acc is None else (acc + s).astype(np.float32)
    return acc
