"""The kernel language: DRAM tensors, SBUF/PSUM tiles and the operations a kernel records.

A kernel body runs once, at trace time, on :class:`DRAMTensor` handles (shape and dtype of the
host's numpy arrays). Every call below appends one operation (:class:`Op`) to the trace; Python
loops unroll. Shapes, partitions and formats are checked here, and a mistake raises
:class:`KernelError` naming the tile, the dimension and the limit.

Memory model (``docs/kernels.md``):

* an SBUF tile ``[p, f]`` puts row ``i`` on partition ``i`` (``p <= rows``), one element per
  32-bit word, ``f`` words per partition;
* a PSUM tile ``[m, n]`` holds FP32 (or INT32) words, row ``i`` on PSUM partition ``i``
  (``m <= cols``);
* the vector engine works on all ``rows`` lanes at once: a vector operation's destination
  must cover its tile's partitions, and sources start at partition 0;
* ``matmul(dst, stationary, moving)`` is ``dst = stationary.T @ moving`` with the contraction
  dimension on the partitions of both operands (starting at partition 0).
"""

import contextlib
import math

import numpy as np

from kernels.dtypes import as_dtype, fp32, int32

__all__ = ["KernelError", "DRAMTensor", "Tile", "Buffer", "Op", "Trace", "current",
           "ndarray", "constant", "sbuf_tile", "psum_tile", "load", "store", "matmul",
           "activation", "tensor_tensor", "tensor_scalar", "reduce", "cast", "copy",
           "seed", "broadcast", "transpose", "pe_transpose", "new_block", "requantize",
           "ALU_OPS", "FUNCTIONS", "ROUNDING",
           "Layout", "wide_dma", "preload_table"]


class KernelError(ValueError):
    """A kernel that cannot run on the core: the message names the tile (or tensor), the
    dimension and the limit."""


#: Vector ALU operations by name (``sim.isa.VecAlu``).
ALU_OPS = {"bypass": 0, "add": 1, "subtract": 2, "rsub": 3, "multiply": 4, "max": 5,
           "min": 6, "equal": 7, "not_equal": 8, "less": 9, "less_equal": 10,
           "greater": 11, "greater_equal": 12}
_ALU_ALIASES = {"sub": "subtract", "mul": "multiply", "eq": "equal", "ne": "not_equal",
                "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}

#: Rounding modes of every narrowing write (``sim.dtypes.RoundMode``).
ROUNDING = {"rne": 0, "rtz": 1, "sr": 2}


def _functions():
    from sim.tables import SHIPPED
    return tuple(SHIPPED)


#: LUT functions ``activation`` accepts (``sim.tables.SHIPPED``).
FUNCTIONS = _functions()


# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------

class Buffer:
    """One allocation: a DRAM region (bytes) or an SBUF/PSUM range of words across all
    partitions. ``addr`` is set by the compiler."""

    def __init__(self, space, name, size, dtype, data=None, kind="scratch"):
        self.space = space        # "dram", "sbuf", "psum"
        self.name = name
        self.size = size          # bytes (DRAM) or words per partition
        self.dtype = dtype
        self.data = data          # DRAM contents known at compile time (constants)
        self.kind = kind          # DRAM: "input", "output", "constant", "scratch"
        self.addr = None
        self.index = None         # argument / output position
        #: DRAM: element ``i`` of the buffer's bytes holds element ``perm[i]`` of the host's
        #: row-major array (None: row-major); set by :class:`Layout`.
        self.perm = None

    def __repr__(self):
        return f"{self.space}:{self.name}"


class DRAMTensor:
    """A strided view of a DRAM buffer (element offset and strides).

    Index with integers and slices (``x[0:8, 16:32]``, steps allowed); ``.T`` reverses the
    dimensions; ``broadcast(dim, n)`` repeats a dimension of size 1 (stride 0), as a DMA with
    a zero stride reads it.
    """

    def __init__(self, buffer, shape, strides, offset=0, physical=False):
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        #: The strides address the buffer's bytes as laid out (a :class:`Layout`'s view), not
        #: the host's row-major array.
        self.physical = physical

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def name(self):
        return self.buffer.name

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def T(self):
        return DRAMTensor(self.buffer, self.shape[::-1], self.strides[::-1], self.offset,
                          physical=self.physical)

    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) > self.ndim:
            raise KernelError(f"tensor '{self.name}': {len(idx)} indices for {self.ndim} "
                              f"dimensions")
        shape, strides, off = [], [], self.offset
        for d, (n, st) in enumerate(zip(self.shape, self.strides)):
            if d >= len(idx):
                shape.append(n)
                strides.append(st)
                continue
            i = idx[d]
            if isinstance(i, slice):
                start, stop, step = i.indices(n)
                if step <= 0:
                    raise KernelError(f"tensor '{self.name}' dimension {d}: steps must be "
                                      f"positive, not {step}")
                cnt = max(0, -(-(stop - start) // step))
                if cnt == 0:
                    raise KernelError(f"tensor '{self.name}' dimension {d}: empty slice "
                                      f"{start}:{stop} of size {n}")
                off += start * st
                shape.append(cnt)
                strides.append(st * step)
            else:
                i = int(i)
                if not -n <= i < n:
                    raise KernelError(f"tensor '{self.name}' dimension {d}: index {i} out of "
                                      f"range for size {n}")
                off += (i % n) * st
        return DRAMTensor(self.buffer, shape, strides, off, physical=self.physical)

    def as_strided(self, shape, strides, offset=0):
        """A view of the same buffer with ``shape`` and ``strides`` (elements) from this
        view's first element plus ``offset`` elements (bounds are checked)."""
        v = DRAMTensor(self.buffer, shape, strides, self.offset + offset,
                       physical=self.physical)
        lo, hi = v.byte_range()
        if lo < 0 or hi > self.buffer.size:
            raise KernelError(f"tensor '{self.name}': view {tuple(shape)} with strides "
                              f"{tuple(strides)} leaves the tensor")
        return v

    def reshape(self, *shape):
        """A view with another shape (the view must be contiguous, row-major)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if math.prod(shape) != math.prod(self.shape):
            raise KernelError(f"tensor '{self.name}': cannot reshape {self.shape} to {shape}")
        if self.strides != _row_major(self.shape):
            raise KernelError(f"tensor '{self.name}': reshape needs a contiguous view")
        return DRAMTensor(self.buffer, shape, _row_major(shape), self.offset,
                          physical=self.physical)

    def broadcast(self, dim, n):
        """Repeat dimension ``dim`` (of size 1) ``n`` times with stride 0."""
        if self.shape[dim] != 1:
            raise KernelError(f"tensor '{self.name}' dimension {dim}: broadcast needs size 1, "
                              f"not {self.shape[dim]}")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(n), 0
        return DRAMTensor(self.buffer, shape, strides, self.offset, physical=self.physical)

    def byte_range(self):
        """``(lo, hi)`` byte offsets within the buffer that the view can touch."""
        eb = self.dtype.nbytes
        lo = hi = self.offset
        for n, st in zip(self.shape, self.strides):
            if st >= 0:
                hi += (n - 1) * st
            else:
                lo += (n - 1) * st
        return lo * eb, (hi + 1) * eb

    def __repr__(self):
        return f"DRAMTensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def _row_major(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def wide_dma(config=None):
    """Whether the kernels lay tensors out partition-innermost (:class:`Layout`) for the DMA
    of ``config`` (default: the traced kernel's core). At every width from 32 to 512 bits a
    record across partitions moves a beat of elements per cycle (4 bytes at 32 bits), one
    along a partition one element (2 bytes in BF16, 1 in INT8; ``docs/dma.md``), so the
    answer is yes; in a trace it is no when the kernel is traced again with plain layouts
    because its program with blocked ones does not fit in program memory
    (:meth:`kernels.Kernel.compile`)."""
    if config is None:
        return current().blocked
    return True


class Layout:
    """A 2-D DRAM tensor ``view [R, C]`` as the DMA moves it, ``block`` rows (one SBUF tile's
    partitions) at a time.

    Where :func:`wide_dma` says so (every core, unless the program does not fit), when
    ``view`` is a kernel argument or output covering its whole buffer, not accessed yet, and
    ``R`` is a multiple of ``block``, the buffer is laid out partition-innermost as
    ``[R // block, C, block]``: element ``[r, c]`` is element ``((r // block) * C + c) *
    block + r % block`` of the buffer. A block's load or store is then one
    across-partitions record with contiguous rows (full-width beats). The host writes and
    reads the buffer in that order (``Compiled.image_for``, ``Compiled.outputs_from``), and
    the buffer is accessed only through this layout (a plain view of it raises). Otherwise
    the views are those of ``view``.

    Members
    -------
    shape : (int, int)
        ``(R, n)``: the rows and the columns of this layout (:meth:`cols` narrows them).
    blocked : bool
        Whether the buffer is laid out in blocks.
    """

    def __init__(self, view, block):
        if view.ndim != 2:
            raise KernelError(f"Layout: tensor '{view.name}' must be 2-D, not {view.shape}")
        self.view, self.block = view, int(block)
        self.c0, self.shape = 0, view.shape
        self.blocked = self._claim(view, self.block)

    @classmethod
    def plain(cls, view, block):
        """The layout of ``view`` as it is (never blocked)."""
        out = object.__new__(cls)
        out.view, out.block, out.blocked = view, int(block), False
        out.c0, out.shape = 0, view.shape
        return out

    @staticmethod
    def _claim(view, block):
        b = view.buffer
        R, C = view.shape
        if (view.physical or not wide_dma() or b.kind not in ("input", "output") or
                R % block or R * C * view.dtype.nbytes != b.size):
            return False
        r = np.arange(R)[:, None]
        c = np.arange(C)[None, :]
        flat = view.offset + r * view.strides[0] + c * view.strides[1]
        perm = np.empty(R * C, np.int64)
        perm[(((r // block) * C + c) * block + r % block).ravel()] = flat.ravel()
        if not np.array_equal(np.sort(perm), np.arange(R * C)):
            return False
        if b.perm is not None:
            if not np.array_equal(b.perm, perm):
                raise KernelError(f"tensor '{view.name}' is already laid out in another "
                                  f"Layout")
            return True
        tr = current()
        if any(acc[0] is b for op in tr.ops for acc in op.reads + op.writes):
            return False
        b.perm = perm
        return True

    @property
    def dtype(self):
        return self.view.dtype

    def cols(self, c0, n):
        """The columns ``c0 .. c0+n-1`` of this layout (a :class:`Layout` of shape
        ``(R, n)``)."""
        if c0 < 0 or n < 1 or c0 + n > self.shape[1]:
            raise KernelError(f"Layout of '{self.view.name}': columns {c0}:{c0 + n} out of "
                              f"{self.shape[1]}")
        out = object.__new__(Layout)
        out.view, out.block, out.blocked = self.view, self.block, self.blocked
        out.c0, out.shape = self.c0 + c0, (self.shape[0], n)
        return out

    def rows(self, r0, p):
        """The view ``[p, n]`` of rows ``r0 .. r0+p-1`` (within one block when blocked)."""
        B, n = self.block, self.shape[1]
        if not self.blocked:
            return self.view[r0:r0 + p, self.c0:self.c0 + n]
        if r0 % B + p > B:
            raise KernelError(f"Layout of '{self.view.name}': rows {r0}:{r0 + p} span two "
                              f"blocks of {B}")
        C = self.view.shape[1]
        return DRAMTensor(self.view.buffer, (p, n), (1, B),
                          (r0 // B * C + self.c0) * B + r0 % B, physical=True)

    def tiles(self, r0, nb):
        """The view ``[block, nb, n]`` of ``nb`` whole blocks from row ``r0`` (a multiple of
        ``block``): block ``t``'s row ``p`` is ``[p, t]``."""
        B, n = self.block, self.shape[1]
        if not self.blocked:
            v = self.view[r0:r0 + nb * B, self.c0:self.c0 + n]
            s0, s1 = v.strides
            return v.as_strided((B, nb, n), (s0, B * s0, s1))
        C = self.view.shape[1]
        return DRAMTensor(self.view.buffer, (B, nb, n), (1, C * B, B),
                          (r0 // B * C + self.c0) * B, physical=True)


class Tile:
    """A view ``[p, f]`` of an SBUF or PSUM buffer: partitions ``p0 .. p0+p-1``, words
    ``f0 .. f0+f-1`` of each. Index with two slices (``t[:, 0:16]``, unit steps)."""

    def __init__(self, buffer, parts, p0, f, f0=0):
        self.buffer = buffer
        self.p0, self.parts, self.f0, self.f = p0, parts, f0, f

    @property
    def space(self):
        return self.buffer.space

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def name(self):
        return self.buffer.name

    @property
    def shape(self):
        return (self.parts, self.f)

    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx, slice(None))
        if len(idx) != 2:
            raise KernelError(f"tile '{self.name}': index with [partitions, free]")
        out = []
        for d, (i, n) in enumerate(zip(idx, self.shape)):
            if isinstance(i, slice):
                start, stop, step = i.indices(n)
                if step != 1 or stop <= start:
                    raise KernelError(f"tile '{self.name}' dimension {d}: slices must be "
                                      f"non-empty with step 1, not {i}")
                out.append((start, stop - start))
            else:
                i = int(i)
                if not -n <= i < n:
                    raise KernelError(f"tile '{self.name}' dimension {d}: index {i} out of "
                                      f"range for size {n}")
                out.append((i % n, 1))
        (ps, pn), (fs, fn) = out
        return Tile(self.buffer, pn, self.p0 + ps, fn, self.f0 + fs)

    def full_partitions(self):
        return self.p0 == 0 and self.parts == self.buffer.parts

    def __repr__(self):
        return (f"Tile({self.name!r}, {self.space}, [{self.p0}:{self.p0 + self.parts}, "
                f"{self.f0}:{self.f0 + self.f}], {self.dtype})")


# ---------------------------------------------------------------------------------------------
# Trace
# ---------------------------------------------------------------------------------------------

class Op:
    """One engine record of the trace.

    ``engine`` (``dma``, ``tensor``, ``vector``), ``kind`` (the assembly mnemonic), ``args``
    (views and options for code generation), ``reads``/``writes``: lists of
    ``(buffer, p_lo, p_hi, lo, hi)`` (words, or bytes for DRAM; partitions ignored for DRAM).
    """

    def __init__(self, engine, kind, args, reads, writes):
        self.engine, self.kind, self.args = engine, kind, args
        self.reads, self.writes = reads, writes
        self.index = None
        #: A DMA record this one issues after (``dma_order``), or None.
        self.after = None

    def __repr__(self):
        return f"Op({self.index}, {self.kind})"


class Trace:
    """What tracing a kernel produces: buffers, operations, inputs and outputs."""

    def __init__(self, config):
        self.config = config
        self.buffers = []
        self.ops = []
        self.inputs = []
        self.outputs = []
        self.names = {}
        self.tables = {}              # LUT bank -> function name, as the vector engine has it
        self.acc_dirty = True         # the vector engine's accumulators may hold a value
        self.table_uses = []
        self.cut = False              # the next matmul starts a block (new_block)
        self.staged = []              # tables loaded, TABLE_LDs not traced (preload_table)
        self.dma_after = None         # the DMA op later DMA ops issue after (dma_order)
        self.blocked = True           # Layout may lay buffers out in blocks (wide_dma)

    def unique(self, name):
        n = self.names.get(name, 0)
        self.names[name] = n + 1
        return name if n == 0 else f"{name}{n}"

    def buffer(self, *args, **kwargs):
        b = Buffer(*args, **kwargs)
        if b.space == "sbuf":
            b.partitions = self.config.rows
        elif b.space == "psum":
            b.partitions = self.config.cols
        self.buffers.append(b)
        return b

    def add(self, op):
        if op.engine == "dma":
            op.after = self.dma_after
        op.index = len(self.ops)
        self.ops.append(op)
        return op


_STACK = []


def current():
    """The trace being recorded (raises outside a kernel)."""
    if not _STACK:
        raise KernelError("kernel operations can only be called while a kernel is traced")
    return _STACK[-1]


@contextlib.contextmanager
def tracing(trace):
    _STACK.append(trace)
    try:
        yield trace
    finally:
        _STACK.pop()


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------

def ndarray(shape, dtype, name="out"):
    """A DRAM output tensor of the kernel (return it from the kernel body)."""
    tr = current()
    dt = as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if not shape or min(shape) < 1:
        raise KernelError(f"tensor '{name}': shape must be positive, not {shape}")
    b = tr.buffer("dram", tr.unique(name), math.prod(shape) * dt.nbytes, dt, kind="output")
    return DRAMTensor(b, shape, _row_major(shape))


def constant(array, dtype, name="const"):
    """A DRAM tensor with contents known when the kernel is compiled (weights of a fixed
    identity, an im2col pattern...)."""
    tr = current()
    dt = as_dtype(dtype)
    a = np.ascontiguousarray(np.asarray(array))
    b = tr.buffer("dram", tr.unique(name), a.size * dt.nbytes, dt,
                  data=dt.bits(a).tobytes(), kind="constant")
    return DRAMTensor(b, a.shape, _row_major(a.shape))


def _scratch(shape, dtype, name):
    tr = current()
    b = tr.buffer("dram", tr.unique(name), math.prod(shape) * dtype.nbytes, dtype)
    return DRAMTensor(b, shape, _row_major(shape))


def sbuf_tile(shape, dtype=fp32, name="t"):
    """An SBUF tile ``[partitions, free]``; ``partitions <= rows``."""
    tr = current()
    dt = as_dtype(dtype)
    p, f = _shape2(shape, name)
    if p > tr.config.rows:
        raise KernelError(f"sbuf_tile '{name}' dimension 0 (partitions) is {p}; the limit is "
                          f"the core's rows = {tr.config.rows}")
    if f > tr.config.sbuf_depth:
        raise KernelError(f"sbuf_tile '{name}' dimension 1 (free) is {f}; the limit is "
                          f"sbuf_depth = {tr.config.sbuf_depth}")
    b = tr.buffer("sbuf", tr.unique(name), f, dt)
    b.parts = p
    return Tile(b, p, 0, f)


def psum_tile(shape, dtype=fp32, name="ps"):
    """A PSUM tile ``[partitions, free]`` of FP32 (float matmuls) or INT32 (INT8 matmuls);
    ``partitions <= cols``."""
    tr = current()
    dt = as_dtype(dtype)
    if dt not in (fp32, int32):
        raise KernelError(f"psum_tile '{name}': dtype must be fp32 or int32, not {dt}")
    p, f = _shape2(shape, name)
    if p > tr.config.cols:
        raise KernelError(f"psum_tile '{name}' dimension 0 (partitions) is {p}; the limit is "
                          f"the core's cols = {tr.config.cols}")
    if f > tr.config.psum_depth:
        raise KernelError(f"psum_tile '{name}' dimension 1 (free) is {f}; the limit is "
                          f"psum_depth = {tr.config.psum_depth}")
    b = tr.buffer("psum", tr.unique(name), f, dt)
    b.parts = p
    return Tile(b, p, 0, f)


def _shape2(shape, name):
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise KernelError(f"tile '{name}': shape must be [partitions, free], not {shape}")
    if min(shape) < 1:
        raise KernelError(f"tile '{name}': dimensions must be positive, not {shape}")
    return shape


def _acc(view):
    """The access tuple of a tile view or DRAM view."""
    if isinstance(view, DRAMTensor):
        if view.buffer.perm is not None and not view.physical:
            raise KernelError(f"tensor '{view.name}' is laid out in blocks (kernels.Layout); "
                              f"access it through its Layout")
        lo, hi = view.byte_range()
        return (view.buffer, 0, 1, lo, hi)
    return (view.buffer, view.p0, view.p0 + view.parts, view.f0, view.f0 + view.f)


def _all_lanes(view):
    """A vector operation touches every lane of the view's words."""
    return (view.buffer, 0, view.buffer.partitions, view.f0, view.f0 + view.f)


# ---------------------------------------------------------------------------------------------
# DMA
# ---------------------------------------------------------------------------------------------

def _dma_shape(src, what):
    if src.ndim == 2:
        p, n0 = src.shape
        n1 = 1
        st0, st1 = src.strides[1], 0
    elif src.ndim == 3:
        p, n1, n0 = src.shape
        st1, st0 = src.strides[1], src.strides[2]
    else:
        raise KernelError(f"{what}: tensor '{src.name}' view must have 2 or 3 dimensions "
                          f"[partitions, ...], not shape {src.shape}")
    for n, d in ((n0, src.ndim - 1), (n1, 1)):
        if n > 65535:
            raise KernelError(f"{what}: tensor '{src.name}' dimension {d} is {n}; the limit "
                              f"of a DMA is 65535")
    return p, n1, n0, st1, st0


def load(src, out=None, name=None):
    """Copy a DRAM view ``[p, f]`` (or ``[p, a, b]``, flattened to ``f = a*b``) into an SBUF
    tile (``out``, or a new one). Strides are free: ``load(x.T)`` transposes."""
    tr = current()
    p, n1, n0, st1, st0 = _dma_shape(src, "load")
    if out is None:
        out = sbuf_tile((p, n1 * n0), src.dtype, name or f"{src.name}_t")
    _check_sbuf(out, "load")
    if out.shape != (p, n1 * n0):
        raise KernelError(f"load: tile '{out.name}' is {list(out.shape)}, tensor "
                          f"'{src.name}' view is {list(src.shape)}")
    if out.dtype is not src.dtype:
        raise KernelError(f"load: tile '{out.name}' is {out.dtype}, tensor '{src.name}' is "
                          f"{src.dtype} (the DMA does not convert; use cast)")
    if out.p0 + p > tr.config.rows:
        raise KernelError(f"load: tile '{out.name}' partitions {out.p0}..{out.p0 + p - 1} "
                          f"exceed rows = {tr.config.rows}")
    eb = src.dtype.nbytes
    args = dict(dram=src, tile=out, p=p, n1=n1, n0=n0, stride0=st0 * eb, stride1=st1 * eb,
                pstride=src.strides[0] * eb, store=False)
    tr.add(Op("dma", "dma_ld", args, [_acc(src)], [_acc(out)]))
    return out


def store(dst, src):
    """Copy an SBUF tile view into a DRAM view of the same shape (``[p, f]`` or
    ``[p, a, b]``)."""
    tr = current()
    p, n1, n0, st1, st0 = _dma_shape(dst, "store")
    _check_sbuf(src, "store")
    if src.shape != (p, n1 * n0):
        raise KernelError(f"store: tile '{src.name}' is {list(src.shape)}, tensor "
                          f"'{dst.name}' view is {list(dst.shape)}")
    if dst.dtype is not src.dtype:
        raise KernelError(f"store: tile '{src.name}' is {src.dtype}, tensor '{dst.name}' is "
                          f"{dst.dtype} (the DMA does not convert; use cast)")
    eb = dst.dtype.nbytes
    args = dict(dram=dst, tile=src, p=p, n1=n1, n0=n0, stride0=st0 * eb, stride1=st1 * eb,
                pstride=dst.strides[0] * eb, store=True)
    tr.add(Op("dma", "dma_st", args, [_acc(src)], [_acc(dst)]))


def _check_sbuf(t, what):
    if not isinstance(t, Tile) or t.space != "sbuf":
        raise KernelError(f"{what}: expected an SBUF tile, not {t!r}")


# ---------------------------------------------------------------------------------------------
# Tensor engine
# ---------------------------------------------------------------------------------------------

def matmul(dst, stationary, moving, accumulate=False):
    """``dst = stationary.T @ moving`` (``accumulate=True``: ``dst +=``).

    ``stationary [K, M]`` and ``moving [K, N]`` are SBUF views starting at partition 0 in
    one tensor-engine format of the core; ``dst [M, N]`` is a PSUM view (FP32, or INT32 for
    INT8). ``K <= rows``, ``M <= cols``."""
    tr = current()
    cfg = tr.config
    for t, role in ((stationary, "stationary"), (moving, "moving")):
        _check_sbuf(t, f"matmul {role}")
        if t.p0 != 0:
            raise KernelError(f"matmul: {role} tile '{t.name}' starts at partition {t.p0}; "
                              f"the contraction dimension must start at partition 0")
    if not isinstance(dst, Tile) or dst.space != "psum":
        raise KernelError(f"matmul: dst must be a PSUM tile, not {dst!r}")
    K, M = stationary.shape
    K2, N = moving.shape
    if K != K2:
        raise KernelError(f"matmul: stationary '{stationary.name}' has K = {K} partitions, "
                          f"moving '{moving.name}' has {K2}")
    if K > cfg.rows:
        raise KernelError(f"matmul: stationary '{stationary.name}' dimension 0 (K) is {K}; "
                          f"the limit is rows = {cfg.rows}")
    if M > cfg.cols:
        raise KernelError(f"matmul: stationary '{stationary.name}' dimension 1 (M) is {M}; "
                          f"the limit is cols = {cfg.cols}")
    if N > 65535:
        raise KernelError(f"matmul: moving '{moving.name}' dimension 1 (N) is {N}; the limit "
                          f"is 65535")
    if dst.shape != (M, N) or dst.p0 != 0:
        raise KernelError(f"matmul: dst '{dst.name}' is [{dst.p0}:{dst.p0 + dst.parts}, "
                          f"{dst.f}], the result is [0:{M}, {N}]")
    dt = stationary.dtype
    if moving.dtype is not dt:
        raise KernelError(f"matmul: stationary '{stationary.name}' is {dt}, moving "
                          f"'{moving.name}' is {moving.dtype}")
    if dt.fmt not in cfg.formats:
        allowed = ", ".join(f.name.lower() for f in cfg.formats)
        raise KernelError(f"matmul: stationary '{stationary.name}' is {dt}; this core's "
                          f"tensor formats are {allowed}")
    want = int32 if dt.is_int else fp32
    if dst.dtype is not want:
        raise KernelError(f"matmul: dst '{dst.name}' must be {want} for {dt} operands, not "
                          f"{dst.dtype}")
    reads = [_acc(stationary), _acc(moving)] + ([_acc(dst)] if accumulate else [])
    args = dict(dst=dst, stat=stationary, mov=moving, k=K, m=M, n=N, fmt=dt,
                accumulate=bool(accumulate), cut=tr.cut)
    tr.cut = False
    tr.add(Op("tensor", "matmul", args, reads, [_acc(dst)]))
    return dst


def dma_order():
    """DMA records traced from now on are issued after the last one traced before (the
    scheduler otherwise moves a load that is ready ahead of an earlier one that waits, such
    as a broadcast's store behind its vector result)."""
    tr = current()
    tr.dma_after = next((op for op in reversed(tr.ops) if op.engine == "dma"), tr.dma_after)


def new_block():
    """Start a new block of matmuls at the next ``matmul``. The compiler rolls consecutive
    matmuls into one block, which the sequencer issues as one operation once every input of
    the block is ready; a kernel cuts a run where its second part waits for a later input
    (a vector result) than its first."""
    current().cut = True


def pe_transpose(dst, a, identity):
    """``dst = a.T`` on the tensor engine: ``a [p, f]`` (SBUF, a tensor format, ``f <= cols``)
    is the stationary operand and ``identity [p, p]`` (the same format, ones on the diagonal)
    the moving one, so ``dst [f, p]`` (PSUM) holds each element times one plus zeros: exact
    for finite values. Its multiply-accumulates move data: the operation is marked
    ``transpose`` (``kernels.bench`` leaves it out of a workload's MACs)."""
    if identity.shape != (a.parts, a.parts):
        raise KernelError(f"pe_transpose: identity '{identity.name}' is "
                          f"{list(identity.shape)}, expected [{a.parts}, {a.parts}]")
    matmul(dst, a, identity)
    current().ops[-1].args["transpose"] = True
    return dst


# ---------------------------------------------------------------------------------------------
# Vector engine
# ---------------------------------------------------------------------------------------------

def _f32(x):
    import struct
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def _rnd(rnd):
    if rnd not in ROUNDING:
        raise KernelError(f"rnd must be one of {', '.join(ROUNDING)}, not {rnd!r}")
    return rnd


def _alu(op):
    op = _ALU_ALIASES.get(op, op)
    if op not in ALU_OPS:
        raise KernelError(f"op must be one of {', '.join(ALU_OPS)}, not {op!r}")
    return op


def _vsrc(t, what, n=None):
    if not isinstance(t, Tile):
        raise KernelError(f"{what}: expected a tile, not {t!r}")
    if t.p0 != 0:
        raise KernelError(f"{what}: tile '{t.name}' starts at partition {t.p0}; vector "
                          f"operands start at partition 0 (lane p is partition p)")
    if n is not None and t.f != n:
        raise KernelError(f"{what}: tile '{t.name}' dimension 1 is {t.f}, expected {n}")
    if t.f > 65535:
        raise KernelError(f"{what}: tile '{t.name}' dimension 1 is {t.f}; the limit is 65535")
    return t


def _vdst(out, shape, dtype, name, what):
    if out is None:
        return sbuf_tile(shape, dtype or fp32, name)
    _check_sbuf(out, what)
    if not out.full_partitions():
        raise KernelError(f"{what}: destination '{out.name}' must cover partitions "
                          f"0..{out.buffer.partitions - 1} of its tile (the vector engine "
                          f"writes every lane)")
    if out.f != shape[1]:
        raise KernelError(f"{what}: destination '{out.name}' dimension 1 is {out.f}, "
                          f"expected {shape[1]}")
    return out


def _vector_op(kind, dst, a, b=None, **opts):
    tr = current()
    reads = [_all_lanes(a)] + ([_all_lanes(b)] if b is not None else [])
    args = dict(dst=dst, a=a, b=b, **opts)
    return tr.add(Op("vector", kind, args, reads, [_all_lanes(dst)]))


#: (address, data) pairs per TABLE_LD record when loading a LUT function (None: an eighth of
#: SBUF's words, at most 1024: a function of up to 1024 pairs in one record, so one DMA and one
#: fence per table). A table is laid out paired (``sim.isa.TABLE_FUNC_PAIRED``): addresses in
#: partition 0, data in partition 1, one LUT write per cycle.
TABLE_PIECE = None

#: ``func`` of an ACT without the LUT (``sim.isa.ACT_FUNC_LINEAR``): ``data * scale + bias``.
_LINEAR = 2


def preload_table(*funcs, stage=False):
    """Load the LUT functions ``funcs`` now, those no bank holds (``activation`` would on
    first use).

    A TABLE_LD is fenced from the DMA: it waits for every DMA record traced before it, and
    every DMA record traced after it waits for it. So a kernel loads its tables after its
    first loads and before the loads of its loop. With ``stage=True`` only the tables' DMA
    loads are traced now (they overlap the kernel's first loads, traced next); their
    TABLE_LDs follow at the next ``preload_table()`` (no functions: it commits the staged
    tables) or at the first ``activation`` through a staged table. The tables' loads all come
    before their TABLE_LDs."""
    tr = current()
    for func in funcs:
        if func not in (None, "linear") and not any(f == func for f in tr.tables.values()):
            _stage_table(func)
    if not stage:
        _commit_tables()


def _stage_table(func):
    """Claim a bank for ``func`` (the one used least recently) and trace its table's first
    DMA load; the TABLE_LDs wait in ``Trace.staged`` for :func:`_commit_tables`."""
    tr = current()
    if func not in FUNCTIONS:
        raise KernelError(f"activation: func must be one of {', '.join(FUNCTIONS)}, not "
                          f"{func!r}")
    bank = 0
    if 0 in tr.tables:
        bank = 1 if 1 not in tr.tables else (
            0 if max((i for i, b in enumerate(tr.table_uses) if b == 0), default=-1) <
            max((i for i, b in enumerate(tr.table_uses) if b == 1), default=-1) else 1)
    if any(b == bank for b, *_ in tr.staged):
        raise KernelError(f"preload_table: '{func}' would evict a table not loaded yet (the "
                          f"LUT has two banks)")
    from sim.tables import table
    pairs = [(int(a), int(d) & 0xFFFFFFFF)
             for a, d in table(func, tr.config.lut_entries).writes(bank)]
    # In DRAM the pairs stay interleaved (address, data, ...); the transposed view [2, pairs]
    # (partition stride one element) is an across-partitions load: a pair per SBUF cycle.
    src = constant(np.array(pairs, np.uint32).view(np.int32), int32, f"lut_{func}").T
    # In pieces that leave most of SBUF to the kernel.
    step = TABLE_PIECE or max(1, min(1024, tr.config.sbuf_depth // 8))
    # One SBUF tile for every piece: each piece's load waits for the previous TABLE_LD, so the
    # table's DMA writes and the vector engine's TABLE reads never overlap in time.
    t = sbuf_tile((2, min(step, len(pairs))), int32, f"lut_{func}_sb")
    pieces = [(w0, min(step, len(pairs) - w0)) for w0 in range(0, len(pairs), step)]
    load(src[:, 0:pieces[0][1]], out=t[:, 0:pieces[0][1]])
    tr.tables[bank] = func
    tr.table_uses.append(bank)
    tr.staged.append((bank, src, t, pieces))
    return bank


def _commit_tables():
    """The TABLE_LDs of the staged tables (and the loads of their later pieces)."""
    tr = current()
    for _, src, t, pieces in tr.staged:
        for i, (w0, n) in enumerate(pieces):
            if i:
                load(src[:, w0:w0 + n], out=t[:, 0:n])
            tr.add(Op("vector", "table_ld", dict(tile=t, n=n), [_acc(t[:, 0:n])], []))
    tr.staged = []


def _ensure_table(func):
    """The LUT bank holding ``func``, loading it (DMA + TABLE_LD) if neither bank has it."""
    tr = current()
    for bank, f in tr.tables.items():
        if f == func:
            if any(b == bank for b, *_ in tr.staged):
                _commit_tables()
            tr.table_uses.append(bank)
            return bank
    bank = _stage_table(func)
    _commit_tables()
    return bank


def activation(func, data, scale=1.0, bias=0.0, reduce_res=None, out=None, dtype=None,
               rnd="rne", name="act"):
    """``out = func(data * scale + bias)`` with a LUT function of ``sim.tables`` (``exp``,
    ``gelu``, ``rsqrt``...; ``None`` or ``"linear"``: no LUT), ``scale``/``bias`` FP32
    constants. ``data`` is an SBUF or PSUM
    view; ``reduce_res`` (an SBUF ``[P, 1]`` view) receives each partition's sum of the
    outputs (FP32, before the output's rounding). The two LUT banks are loaded as needed."""
    tr = current()
    _vsrc(data, "activation")
    rnd = _rnd(rnd)
    bank = _LINEAR if func in (None, "linear") else _ensure_table(func)
    if reduce_res is not None and tr.acc_dirty:
        _clear_acc()
    out = _vdst(out, (data.parts, data.f), dtype, name, "activation")
    _vector_op("act", out, data, func=bank, scale=_f32(scale), bias=_f32(bias), rnd=rnd,
               acc=reduce_res is not None)
    if reduce_res is not None:
        _acc_read(reduce_res, "activation reduce_res")
    return out


def requantize(data, scale, bias=0.0, rnd="rne", out=None, dtype=None, name="q"):
    """``sat(round(data * scale + bias))``: an INT32 view (SBUF or PSUM) to INT8 (or another
    ``dtype``) through the vector engine without the LUT (``requant`` in ``docs/isa.md``)."""
    from kernels.dtypes import int8
    if not isinstance(data, Tile) or data.dtype is not int32:
        raise KernelError(f"requantize: data must be an int32 tile, not {data!r}")
    return activation(None, data, scale=scale, bias=bias, out=out, dtype=dtype or int8,
                      rnd=rnd, name=name)


def _clear_acc():
    tr = current()
    junk = sbuf_tile((tr.config.rows, 1), fp32, "acc_junk")
    _acc_read(junk, "clear")


def _acc_read(res, what):
    tr = current()
    _check_sbuf(res, what)
    if res.f != 1 or not res.full_partitions():
        raise KernelError(f"{what}: '{res.name}' must be a [P, 1] view over all partitions, "
                          f"not {list(res.shape)} at partition {res.p0}")
    tr.add(Op("vector", "acc_rd", dict(dst=res, rnd="rne"), [], [_all_lanes(res)]))
    tr.acc_dirty = False


def tensor_tensor(op, a, b, out=None, dtype=None, rnd="rne", name="tt"):
    """``out = a op b`` elementwise (``op`` in :data:`ALU_OPS`: add, subtract, multiply,
    max, min, comparisons...). ``a`` in SBUF or PSUM, ``b`` in SBUF, same dtype and size."""
    tr = current()
    op = _alu(op)
    _vsrc(a, "tensor_tensor a")
    _vsrc(b, "tensor_tensor b", a.f)
    if b.space != "sbuf":
        raise KernelError(f"tensor_tensor: b '{b.name}' must be in SBUF (the core reads only "
                          f"a from PSUM)")
    if a.dtype is not b.dtype:
        raise KernelError(f"tensor_tensor: a '{a.name}' is {a.dtype}, b '{b.name}' is "
                          f"{b.dtype}; both are decoded with one format")
    out = _vdst(out, (a.parts, a.f), dtype, name, "tensor_tensor")
    _vector_op("tt", out, a, b, alu=op, rnd=_rnd(rnd))
    return out


def tensor_scalar(op, a, scalar, out=None, dtype=None, rnd="rne", name="ts"):
    """``out = a op scalar`` with an FP32 constant ``scalar``."""
    tr = current()
    op = _alu(op)
    _vsrc(a, "tensor_scalar")
    out = _vdst(out, (a.parts, a.f), dtype, name, "tensor_scalar")
    _vector_op("ts", out, a, alu=op, scalar=_f32(scalar), rnd=_rnd(rnd))
    return out


def reduce(op, a, out=None, dtype=None, name="red"):
    """Per-partition reduction of ``a`` along its free dimension into ``out [P, 1]`` (``op``
    add, max or min; in element order, FP32)."""
    tr = current()
    op = _alu(op)
    if op not in ("add", "max", "min"):
        raise KernelError(f"reduce: op must be add, max or min, not {op!r}")
    _vsrc(a, "reduce")
    out = _vdst(out, (a.parts, 1), dtype, name, "reduce")
    _vector_op("reduce", out, a, alu=op, rnd="rne")
    tr.acc_dirty = True
    return out


def cast(a, dtype, rnd="rne", seed=None, out=None, name="cast"):
    """``a`` converted to ``dtype`` with rounding ``rnd`` (rne, rtz, sr). ``seed`` (SR)
    re-seeds every lane's generator first, so the result is reproducible."""
    tr = current()
    _vsrc(a, "cast")
    if seed is not None:
        globals()["seed"](seed)
    out = _vdst(out, (a.parts, a.f), as_dtype(dtype), name, "cast")
    if out.dtype is not as_dtype(dtype):
        raise KernelError(f"cast: out '{out.name}' is {out.dtype}, not {as_dtype(dtype)}")
    _vector_op("copy", out, a, rnd=_rnd(rnd))
    return out


def copy(a, out=None, dtype=None, rnd="rne", name="copy"):
    """``a`` copied (PSUM to SBUF, or SBUF to SBUF), converted to ``out``'s dtype."""
    tr = current()
    _vsrc(a, "copy")
    out = _vdst(out, (a.parts, a.f), dtype or a.dtype, name, "copy")
    _vector_op("copy", out, a, rnd=_rnd(rnd))
    return out


def seed(value):
    """Re-seed every lane's stochastic-rounding generator (``sim/prng.py``)."""
    tr = current()
    from sim.config import check_int
    check_int("seed", int(value), 0, 0xFFFFFFFF)
    tr.add(Op("vector", "seed_ld", dict(seed=int(value)), [], []))


def broadcast(col, n, name="bcast"):
    """A ``[P, n]`` SBUF tile whose every column is ``col`` (an SBUF ``[P, 1]`` view), made by
    a DMA round trip through DRAM (a store, then a load with a zero inner stride)."""
    tr = current()
    _check_sbuf(col, "broadcast")
    if col.f != 1:
        raise KernelError(f"broadcast: tile '{col.name}' dimension 1 is {col.f}, expected 1")
    tmp = _scratch((col.parts, 1), col.dtype, f"{name}_dram")
    store(tmp, col)
    out = sbuf_tile((col.parts, n), col.dtype, name)
    load(tmp.broadcast(1, n), out=out)
    return out


def transpose(a, out=None, name="tr"):
    """``a.T`` through DRAM: a store of ``a [p, f]`` and a transposing load ``[f, p]``
    (``f <= rows``)."""
    _check_sbuf(a, "transpose")
    tr = current()
    if a.f > tr.config.rows:
        raise KernelError(f"transpose: tile '{a.name}' dimension 1 is {a.f}; the limit is "
                          f"rows = {tr.config.rows}")
    tmp = _scratch(a.shape, a.dtype, f"{name}_dram")
    store(tmp, a)
    return load(tmp.T, out=out, name=name)

