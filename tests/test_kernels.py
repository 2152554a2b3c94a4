"""The kernel language and its compiler on the reference simulator: trace-time checks (the
messages name the tile, the dimension and the limit), allocation, the semaphores the compiler
inserts (the race checker finds nothing in compiled programs and finds races once the waits
are removed), overlap of DMA and compute, and every vector operation against numpy."""

import ml_dtypes
import numpy as np
import pytest

import kernels as kl
from sim.asm import assemble
from sim.config import CoreConfig
from sim.races import check_program

CFG = CoreConfig.preset("core4").replace(pmem_depth=1024)
BF = ml_dtypes.bfloat16


def _races(compiled, keep_waits=True):
    lines = compiled.asm.splitlines()
    if not keep_waits:
        lines = [ln for ln in lines if not ln.startswith("waiti")]
    return check_program(compiled.config, assemble("\n".join(lines) + "\n"))


@kl.kernel
def _add_one(x):
    out = kl.ndarray(x.shape, kl.fp32)
    kl.store(out, kl.tensor_scalar("add", kl.load(x), 1.0))
    return out


def test_first_kernel():
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    assert np.array_equal(_add_one(x, config=CFG), x + 1)
    run = _add_one.last_run
    assert run.outcome.backend == "refsim" and run.outcome.error is None
    assert run.compiled.program.waits == 2          # load -> add -> store


@pytest.mark.parametrize("body, msg", [
    (lambda: kl.sbuf_tile((5, 8)), "sbuf_tile 't' dimension 0 (partitions) is 5; the limit is "
                                   "the core's rows = 4"),
    (lambda: kl.sbuf_tile((4, 300)), "sbuf_tile 't' dimension 1 (free) is 300; the limit is "
                                     "sbuf_depth = 256"),
    (lambda: kl.psum_tile((4, 8), kl.bf16), "psum_tile 'ps': dtype must be fp32 or int32"),
    (lambda: kl.matmul(kl.psum_tile((4, 8)), kl.sbuf_tile((4, 6), kl.bf16, name="w"),
                       kl.sbuf_tile((4, 8), kl.bf16)),
     "matmul: stationary 'w' dimension 1 (M) is 6; the limit is cols = 4"),
    (lambda: kl.matmul(kl.psum_tile((4, 8)), kl.sbuf_tile((4, 4), kl.bf16, name="w"),
                       kl.sbuf_tile((3, 8), kl.bf16, name="x")),
     "matmul: stationary 'w' has K = 4 partitions, moving 'x' has 3"),
    (lambda: kl.matmul(kl.psum_tile((4, 8)), kl.sbuf_tile((4, 4), kl.fp32, name="w"),
                       kl.sbuf_tile((4, 8), kl.fp32)),
     "matmul: stationary 'w' is fp32; this core's tensor formats are"),
    (lambda: kl.tensor_tensor("add", kl.sbuf_tile((4, 8), name="a"),
                              kl.sbuf_tile((4, 9), name="b")),
     "tensor_tensor b: tile 'b' dimension 1 is 9, expected 8"),
    (lambda: kl.activation("cosh", kl.sbuf_tile((4, 8))), "func must be one of"),
    (lambda: kl.reduce("multiply", kl.sbuf_tile((4, 8))), "reduce: op must be add, max or min"),
    (lambda: kl.cast(kl.sbuf_tile((4, 8)), kl.bf16, rnd="nearest"), "rnd must be one of"),
    (lambda: kl.sbuf_tile((4, 8), name="z")[5, :], "tile 'z' dimension 0: index 5 out of range"),
])
def test_trace_errors_name_tile_dimension_limit(body, msg):
    @kl.kernel
    def k(x):
        body()
        return kl.ndarray((1, 1), kl.fp32)
    with pytest.raises(kl.KernelError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        k.compile(((4, 4), kl.fp32), config=CFG)


def test_sbuf_full_is_reported():
    @kl.kernel
    def k(x):
        tiles = [kl.load(x, name="big") for _ in range(3)]
        out = kl.ndarray(x.shape, kl.fp32)
        for t in tiles:
            kl.store(out, t)
        return out
    with pytest.raises(kl.KernelError, match="sbuf is full: tile 'big2' needs 100 words"):
        k.compile(((4, 100), kl.fp32), config=CFG)


def test_program_too_long_is_reported():
    from kernels.lib import gemm_tn
    with pytest.raises(kl.KernelError, match="the limit is pmem_depth = 16"):
        gemm_tn.compile(((8, 8), kl.bf16), ((8, 64), kl.bf16), config=CFG.replace(pmem_depth=16))


def test_waits_are_needed_and_sufficient():
    """Compiled programs are race-free; without their waits the checker finds races."""
    from kernels.lib import gemm_tn
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(BF)
    x = rng.standard_normal((8, 40)).astype(BF)
    gemm_tn(w, x, config=CFG)
    comp = gemm_tn.last_run.compiled
    assert _races(comp) == []
    assert len(_races(comp, keep_waits=False)) > 0


def test_loads_overlap_compute():
    """A streamed loop rotates its tiles through several buffers, and the next chunk's load is
    issued before the current chunk's matmul completes (no wait separates them)."""
    @kl.kernel
    def stream(x):
        out = kl.ndarray(x.shape, kl.fp32)
        ident = kl.load(kl.constant(np.eye(4), kl.bf16, "eye"))
        for c in range(0, x.shape[1], 8):
            t = kl.load(x[:, c:c + 8], name="x")
            ps = kl.psum_tile((4, 8))
            kl.matmul(ps, ident, t)
            kl.store(out[:, c:c + 8], kl.copy(ps))
        return out
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(BF)
    y = stream(x, config=CFG)
    assert np.array_equal(y, x.astype(np.float32))
    comp = stream.last_run.compiled
    xs = {b.addr for b in comp.trace.buffers if b.space == "sbuf" and b.name.startswith("x")}
    assert len(xs) >= 2                                   # rotating buffers
    order = [op.kind for op in comp.program.order]
    first_mm = order.index("matmul")
    assert order[:first_mm].count("dma_ld") >= 3          # loads run ahead of the array


@pytest.mark.parametrize("op, fn", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("max", np.maximum), ("min", np.minimum),
    ("greater", lambda a, b: (a > b).astype(np.float32))])
def test_tensor_tensor_and_scalar(op, fn):
    @kl.kernel
    def k(a, b):
        ta, tb = kl.load(a), kl.load(b)
        o1, o2 = kl.ndarray(a.shape, kl.fp32, "o1"), kl.ndarray(a.shape, kl.fp32, "o2")
        kl.store(o1, kl.tensor_tensor(op, ta, tb))
        kl.store(o2, kl.tensor_scalar(op, ta, 0.75))
        return o1, o2
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 12)).astype(np.float32)
    b = rng.standard_normal((4, 12)).astype(np.float32)
    y1, y2 = k(a, b, config=CFG)
    assert np.array_equal(y1, fn(a, b).astype(np.float32))
    assert np.array_equal(y2, fn(a, np.float32(0.75)).astype(np.float32))


def test_reductions_and_activation_reduce():
    @kl.kernel
    def k(a):
        t = kl.load(a)
        outs = [kl.ndarray((4, 1), kl.fp32, n) for n in ("s", "mx", "mn", "es")]
        for o, op in zip(outs, ("add", "max", "min")):
            kl.store(o, kl.reduce(op, t))
        s = kl.sbuf_tile((4, 1), name="es")
        kl.activation("exp", t, reduce_res=s)
        kl.store(outs[3], s)
        return tuple(outs)
    a = np.random.default_rng(3).standard_normal((4, 10)).astype(np.float32)
    s, mx, mn, es = k(a, config=CFG)
    ref = np.zeros(4, np.float32)
    for i in range(10):                       # element order, FP32
        ref = (ref + a[:, i]).astype(np.float32)
    assert np.array_equal(s[:, 0], ref)
    assert np.array_equal(mx[:, 0], a.max(1)) and np.array_equal(mn[:, 0], a.min(1))
    # exp LUT: within 2**-8 relative per element (docs/vector.md), sums of positive terms.
    assert np.allclose(es[:, 0], np.exp(a.astype(np.float64)).sum(1), rtol=2 ** -8)


@pytest.mark.parametrize("rnd", ["rne", "rtz", "sr"])
def test_cast_rounding(rnd):
    @kl.kernel
    def k(a):
        o = kl.ndarray(a.shape, kl.bf16)
        kl.store(o, kl.cast(kl.load(a), kl.bf16, rnd=rnd, seed=1234))
        return o
    a = np.random.default_rng(4).standard_normal((4, 32)).astype(np.float32)
    y = k(a, config=CFG).astype(np.float64)
    lo = a.astype(BF).astype(np.float64)
    if rnd == "rne":
        assert np.array_equal(y, lo)
    elif rnd == "rtz":
        assert np.all(np.abs(y) <= np.abs(a)) and np.all(np.abs(a - y) < 2 ** -7 * np.abs(a))
    else:
        assert np.all(np.abs(a - y) < 2 ** -7 * np.abs(a))
        assert np.array_equal(y, k(a, config=CFG).astype(np.float64))    # reproducible


def test_transposing_load_and_broadcast():
    @kl.kernel
    def k(a, v):
        o1 = kl.ndarray((a.shape[1], a.shape[0]), kl.fp32, "t")
        o2 = kl.ndarray((4, 6), kl.fp32, "b")
        kl.store(o1, kl.load(a.T))
        col = kl.load(v.reshape(4, 1))
        kl.store(o2, kl.broadcast(col, 6))
        return o1, o2
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.arange(4, dtype=np.float32)
    t, b = k(a, v, config=CFG)
    assert np.array_equal(t, a.T) and np.array_equal(b, np.repeat(v[:, None], 6, 1))


def test_streaming_gemm_keeps_the_tensor_engine_busy():
    """The compiled streaming GEMM of the benchmark (8x8, K = M = 192, N = 768, BF16) fits
    the program memory with its matmuls rolled into hardware loops, and the compiler's own
    estimate (its scheduling model, calibrated on the RTL) keeps the array streaming at least
    92.2 % of the cycles, as the hand-written program does on the RTL
    (``tests/test_kernels_rtl.py::test_streaming_gemm_on_rtl`` measures the RTL)."""
    from kernels.bench import workloads
    w = workloads(["gemm_stream"])[0]
    assert len(w.image.program) <= w.config.pmem_depth
    columns = w.macs // (w.config.rows * w.config.cols)
    assert columns / w.compiled.program.estimate >= 0.922


def test_bench_roofline_at_the_dma_width():
    """``kernels.bench``: the roofline is ``max(MACs / (rows * cols), DMA bytes / (width /
    8))`` cycles, at the configuration's DMA width (32 bits by default, 128 on request), the
    cycle model with the RTL's engine costs runs every record of the image, and the record
    names the busiest engine."""
    from kernels.bench import bus_bytes, measure, workloads
    w = workloads(["gemm"])[0]
    r = measure(w, "model")
    assert bus_bytes(w.config) == 4 == r["bus_bytes_per_cycle"]
    cells = w.config.rows * w.config.cols
    assert r["roofline_cycles"] == max(-(-w.macs // cells), -(-w.dma_bytes // 4))
    assert r["roofline_fraction"] == round(r["roofline_cycles"] / r["cycles"], 4) <= 1
    assert 0 < r["tensor_busy"] < 1 and r["dma_bytes_per_cycle"] <= 4
    assert 0 < r["vector_busy"] < 1 and 0 < r["dma_busy"] <= 1
    assert r["busiest"] == max(("tensor", "vector", "dma"), key=lambda e: r[f"{e}_busy"])
    wide = workloads(["gemm"], dma_data_width=128)[0]
    assert bus_bytes(wide.config) == 16
    assert wide.roofline_cycles == max(-(-w.macs // cells), -(-w.dma_bytes // 16))


@pytest.mark.parametrize("accumulate", ["fp32", "fused"])
def test_bench_tensor_latency_follows_the_engine(accumulate):
    """``RtlCost.tensor_latency``: the tensor engine's documented latency
    (``TensorEngine.latency``, with the column normalisers' registers when fused) plus the
    controller's and PSUM's fixed registers."""
    from kernels.bench import RtlCost
    from rtl.core.top import PSUM_ADD_STAGES
    from rtl.tensor.engine import TensorEngine
    cfg = CoreConfig(rows=4, cols=4, formats=("bf16", "fp8_e4m3"), tensor_add_stages=3,
                     tensor_mul_stages=4, tensor_accumulate=accumulate)
    engine = TensorEngine(4, 4, cfg.formats, mul_stages=4, add_stages=3, accumulate=accumulate)
    assert RtlCost.tensor_latency(cfg) == 3 + engine.latency + 2 + PSUM_ADD_STAGES


def test_tensor_engine_transpose():
    """``pe_transpose``: ``a.T`` through the array against an identity, exact for BF16
    values (FP32 in PSUM), and left out of the benchmark's MACs."""
    from kernels.bench import _stats

    @kl.kernel
    def k(a):
        out = kl.ndarray((a.shape[1], a.shape[0]), kl.fp32, "t")
        ident = kl.load(kl.constant(np.eye(a.shape[0]), kl.bf16, name="eye"))
        ps = kl.psum_tile((a.shape[1], a.shape[0]), kl.fp32)
        kl.pe_transpose(ps, kl.load(a), ident)
        kl.store(out, kl.copy(ps))
        return out
    a = np.random.default_rng(5).standard_normal((4, 3)).astype(BF)
    assert np.array_equal(k(a, config=CFG), a.T.astype(np.float32))
    assert _stats(k.last_run.compiled) == (0, 4 * 4 * 2 + 4 * 3 * 2 + 3 * 4 * 4)

    @kl.kernel
    def bad(a):
        ps = kl.psum_tile((a.shape[1], a.shape[0]), kl.fp32)
        kl.pe_transpose(ps, kl.load(a), kl.load(kl.constant(np.eye(3), kl.bf16), name="i3"))
        return kl.ndarray((1, 1), kl.fp32)
    with pytest.raises(kl.KernelError, match=r"identity 'i3' is \[3, 3\], expected \[4, 4\]"):
        bad(a, config=CFG)


def test_new_block_cuts_a_run_of_matmuls():
    """Consecutive matmuls with constant strides are rolled into one hardware loop; with
    ``new_block`` before each they are blocks of their own (no loop), and the result is the
    same."""
    def make(cut):
        @kl.kernel
        def k(w, x):
            out = kl.ndarray((4, 8), kl.fp32, "y")
            wt, xt = kl.load(w), kl.load(x)
            ps = kl.psum_tile((4, 8), kl.fp32)
            for i in range(4):
                if cut:
                    kl.new_block()
                kl.matmul(ps, wt[:, 4 * i:4 * i + 4], xt[:, 8 * i:8 * i + 8],
                          accumulate=i > 0)
            kl.store(out, kl.copy(ps))
            return out
        return k
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 16)).astype(BF)
    x = rng.standard_normal((4, 32)).astype(BF)
    rolled, cut = make(False), make(True)
    assert np.array_equal(rolled(w, x, config=CFG), cut(w, x, config=CFG))
    assert "loop" in rolled.last_run.compiled.asm
    assert "loop" not in cut.last_run.compiled.asm


def test_staged_tables_load_before_their_table_lds():
    """``preload_table(..., stage=True)`` traces the tables' DMA loads at once and their
    TABLE_LDs at the next ``preload_table()`` or, without one, at the first ``activation``
    through a staged table: both tables' loads precede both TABLE_LDs, and the results equal
    those of tables loaded on first use."""
    def make(stage, commit):
        @kl.kernel
        def k(x):
            out = kl.ndarray(x.shape, kl.fp32, "y")
            if stage:
                kl.preload_table("exp", "reciprocal", stage=True)
            t = kl.load(x)
            if commit:
                kl.preload_table()
            e = kl.activation("exp", t)
            kl.store(out, kl.activation("reciprocal", e))
            return out
        return k
    x = np.random.default_rng(7).standard_normal((4, 12)).astype(np.float32)
    plain = make(False, False)
    want = plain(x, config=CFG)
    for commit in (True, False):
        k = make(True, commit)
        assert np.array_equal(k(x, config=CFG), want)
        kinds = [op.kind for op in k.last_run.compiled.trace.ops]
        first = kinds.index("table_ld")
        assert kinds[:first].count("dma_ld") == 3          # both tables, then x
    kinds = [op.kind for op in plain.last_run.compiled.trace.ops]
    assert kinds[:kinds.index("table_ld")].count("dma_ld") == 2


def test_dma_order_keeps_later_loads_behind():
    """A load traced after ``dma_order()`` is issued after the DMA record traced before it
    (here a broadcast's load, which waits for a reduction), where without it the scheduler
    issues the ready load first; the results are the same."""
    def make(order):
        @kl.kernel
        def k(x, y):
            out = kl.ndarray((4, 12), kl.fp32, "o")
            t = kl.load(x)
            b = kl.broadcast(kl.reduce("max", t), 12)
            if order:
                kl.dma_order()
            u = kl.load(y, name="late")
            kl.store(out, kl.tensor_tensor("add", kl.tensor_tensor("subtract", t, b), u))
            return out
        return k
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((4, 12)).astype(np.float32) for _ in range(2))
    got = {}
    for order in (False, True):
        k = make(order)
        got[order] = k(x, y, config=CFG)
        ops = k.last_run.compiled.program.order
        dma = [op for op in ops if op.engine == "dma"]
        names = [op.args["tile"].name for op in dma]
        late = next(i for i, n in enumerate(names) if n.startswith("late"))
        bcast = next(i for i, n in enumerate(names) if n.startswith("bcast"))
        assert (late > bcast) == order
    assert np.array_equal(got[False], got[True])
