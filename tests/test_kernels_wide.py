"""The kernel library on a core with a 128-bit DMA (``kernels.Layout``: tensors laid out
partition-innermost so that loads and stores move across partitions, full-width beats).

Every benchmark kernel's outputs on the reference simulator (race checker on) are
bit-identical at 32 and 128 bits (the 32-bit outputs are checked against numpy in
``tests/test_kernels_lib.py``), and at both widths the large transfers are across-partitions
records with contiguous rows (at 32 bits such a record moves 4 bytes per cycle, one along a
partition 2 in BF16 and 1 in INT8).
"""

import ml_dtypes
import numpy as np
import pytest

import kernels as kl
from kernels import bench as kb
from kernels.backends import run as run_backend
from kernels.compiler import dma_record
from kernels.lang import KernelError
from sim.config import CoreConfig
from sim.dma_timing import across_partitions

NAMES = ["gemm", "gemm_int8", "linear_gelu", "linear_int8", "mlp", "softmax", "layernorm",
         "rmsnorm", "attention", "conv2d"]


def _outputs(w):
    out, _ = run_backend("refsim", w.config, w.image, races=True)
    assert out.error is None, out.error
    return w.compiled.outputs_from(out)


def _wide_bytes(w):
    """Bytes moved by across-partitions DMA records of ``w`` with contiguous rows."""
    cfg, total = w.config, 0
    for op in w.compiled.trace.ops:
        if op.engine != "dma":
            continue
        a, r = op.args, dma_record(op.args)
        es = a["dram"].dtype.nbytes
        if (across_partitions(r, data_width=cfg.dma_data_width, sbuf_depth=cfg.sbuf_depth) and
                a["stride0"] == a["p"] * es):
            total += a["p"] * a["n0"] * a["n1"] * es
    return total


@pytest.mark.parametrize("name", NAMES)
def test_bit_identical_at_32_and_128_bits(name):
    narrow = kb.workloads([name])[0]
    wide = kb.workloads([name], dma_data_width=128)[0]
    assert wide.config.dma_data_width == 128 and narrow.config.dma_data_width == 32
    for a, b in zip(_outputs(narrow), _outputs(wide)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
    if name != "conv2d":                 # im2col gathers along partitions
        assert _wide_bytes(narrow) >= 0.25 * narrow.dma_bytes, name
        assert _wide_bytes(wide) >= 0.25 * wide.dma_bytes, name


def test_layout_places_and_reads_blocks():
    """``Layout``: element ``[r, c]`` of a ``[R, C]`` argument at ``((r // B) * C + c) * B +
    r % B`` of its buffer; a transposed view of an argument the same way; the output read
    back in the host's order."""
    cfg = CoreConfig(rows=4, sbuf_depth=256, psum_depth=64, dma_data_width=128)

    @kl.kernel
    def tr(x):
        out = kl.ndarray((x.shape[1], x.shape[0]), x.dtype, name="y")
        xl, ol = kl.Layout(x.T, 4), kl.Layout(out, 4)
        assert xl.blocked == ol.blocked == kl.wide_dma()
        for r0 in range(0, x.shape[1], 4):
            kl.store(ol.rows(r0, 4), kl.load(xl.rows(r0, 4)))
        return out

    x = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    comp = tr.compile(x, config=cfg)
    placed = np.frombuffer(comp.image_for(x).memory[-1][1], np.uint32)
    r, c = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")     # x.T [8, 6]
    want = np.empty(48, np.uint32)
    want[((r // 4) * 6 + c) * 4 + r % 4] = x.T.view(np.uint32)[r, c]
    assert np.array_equal(placed, want)
    assert np.array_equal(tr(x, config=cfg), x.T)
    assert np.array_equal(tr(x, config=cfg.replace(dma_data_width=32)), x.T)


def test_layout_falls_back_and_guards_the_buffer():
    """No blocks for a row count not a multiple of the block or for a tensor already
    accessed, blocks at 32 bits as at 128; a plain view of a blocked tensor is refused."""
    cfg = CoreConfig(rows=4, sbuf_depth=256, psum_depth=64, dma_data_width=128)
    seen = {}

    @kl.kernel
    def k(x, y):
        out = kl.ndarray(x.shape, x.dtype, name="o")
        seen["odd"] = kl.Layout(y, 4).blocked            # 6 rows
        t = kl.load(x[0:4, :])
        seen["touched"] = kl.Layout(x, 4).blocked
        ol = kl.Layout(out, 4)
        seen["out"] = ol.blocked
        kl.store(ol.rows(0, 4), t)
        kl.store(ol.rows(4, 4), kl.load(x[4:8, :]))
        if seen["out"]:
            with pytest.raises(KernelError, match="laid out in blocks"):
                kl.store(out[0:4, :], t)
        return out

    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    y = np.zeros((6, 8), np.float32)
    assert np.array_equal(k(x, y, config=cfg), x)
    assert seen == {"odd": False, "touched": False, "out": True}
    assert np.array_equal(k(x, y, config=cfg.replace(dma_data_width=32)), x)
    assert seen["out"] is True


def test_blocked_program_too_long_falls_back_to_plain_layouts():
    """The 128 x 128 MLP at 32 bits takes more instructions with blocked layouts than the
    program memory holds (its schedule interleaves more records, each with its register
    set-up): ``Kernel.compile`` traces it again with plain layouts; at 128 bits it stays
    blocked."""
    w32 = kb.workloads(["mlp_128"], dma_data_width=32)[0]
    w128 = kb.workloads(["mlp_128"], dma_data_width=128)[0]
    assert all(b.perm is None for b in w32.compiled.trace.buffers)
    assert not w32.compiled.trace.blocked
    assert any(b.perm is not None for b in w128.compiled.trace.buffers)
    assert len(w32.image.program) <= w32.config.pmem_depth


def test_scheduler_takes_the_wide_dma_timing():
    """The compiler's estimate and the cycle model use ``sim.dma_timing`` at every width:
    the compute-dominated MLP's estimate at 128 bits is well below its 32-bit one, agrees
    with the cycle model, and keeps the tensor engine at least 80 % busy; at 32 bits the
    estimate is within 10 % of the cycle model."""
    w32 = kb.workloads(["mlp_128"], dma_data_width=32)[0]
    w128 = kb.workloads(["mlp_128"], dma_data_width=128)[0]
    assert w128.compiled.program.estimate < 0.8 * w32.compiled.program.estimate
    r32 = kb.measure(w32, "model")
    assert abs(r32["cycles"] - w32.compiled.program.estimate) <= 0.1 * r32["cycles"]
    r = kb.measure(w128, "model")
    assert abs(r["cycles"] - w128.compiled.program.estimate) <= 0.02 * r["cycles"]
    assert r["tensor_busy"] >= 0.8


@pytest.mark.parametrize("K, M, N", [(64, 20, 100), (24, 17, 150), (16, 16, 200), (20, 13, 37)])
def test_gemm_tn_bit_exact_at_128_bits(K, M, N):
    """GEMM on the wide core with edge tiles in M, N and K (the blocked path needs whole K
    tiles; an output with an edge M tile stays row-major), against the tensor engine's
    accumulation order."""
    from kernels.lib import gemm_tn
    from kernels.lib.linalg import reference_gemm_tn
    rng = np.random.default_rng(K * 1000 + M * 10 + N)
    w = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    cfg = kb.wide_config(128)
    y = gemm_tn(w, x, config=cfg)
    want = reference_gemm_tn(w, x, cfg.rows)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


def test_bench_core_dma_width():
    """``bench core --dma-width 128``: every kernel on the wide core, its roofline at 16 bus
    bytes per cycle; a width that is not a power of two from 32 to 512 is refused."""
    import argparse
    from scripts import bench_core
    args = argparse.Namespace(quick=True, kernels="gemm", dma_width=128, widths="")
    rec = bench_core.run_kernels(args)["gemm"]
    assert rec["config"] == kb.wide_config(128).to_dict()
    assert rec["model"]["bus_bytes_per_cycle"] == 16
    assert 0 < rec["model"]["roofline_fraction"] <= 1
    narrow = bench_core.run_kernels(argparse.Namespace(quick=True, kernels="gemm",
                                                       dma_width=32, widths=""))["gemm"]
    assert narrow["config"]["dma_data_width"] == 32
    assert narrow["model"]["bus_bytes_per_cycle"] == 4
    with pytest.raises(ValueError, match="dma_width"):
        bench_core.run_kernels(argparse.Namespace(quick=True, kernels="gemm", dma_width=96,
                                                  widths=""))


def test_bench_core_bounds():
    """``bench core --bounds``: the cycle model alone, each kernel's bounds no longer than its
    cycles, the floor the shortest, ``floor_fraction`` the roofline over the floor, and the
    floor's parts (the sequencer's issue, its waits per engine, its blocked EMITs, BARRIERs
    and ``RUN_OVERHEAD``) adding up to it; a bad ``--dma-width`` is refused."""
    import argparse
    from scripts import bench_core
    args = argparse.Namespace(bounds=True, kernels="softmax,gemm", dma_width=128)
    rec = bench_core.run(args)
    assert rec["dma_width"] == 128 and sorted(rec["bounds"]) == ["gemm", "softmax"]
    for name, r in rec["bounds"].items():
        assert r["config"] == kb.wide_config(128).to_dict()
        assert r["floor"] <= min(r["no_dma"], r["no_vector"], r["no_dma_vector"])
        assert max(r["no_dma"], r["no_vector"], r["no_dma_vector"]) <= r["model_cycles"]
        assert r["floor_fraction"] == round(r["roofline_cycles"] / r["floor"], 4)
        for bound in ("floor", "no_dma_vector"):
            p = r[f"{bound}_parts"]
            total = p["run_overhead"] + p["issue"] + sum(p["wait"].values()) + \
                sum(p["emit"].values()) + p["barrier"]
            assert total == r[bound], (name, bound, p)
            assert p["issue"] > 0 and p["instructions"] > 0
    span = rec["bounds"]["gemm"]["no_dma_vector_array"]
    assert span["columns"] == 8192 and span["gaps"] >= 0          # 64 x 64 x 128 / 64
    assert sum(span.values()) + kb.RUN_OVERHEAD == rec["bounds"]["gemm"]["no_dma_vector"]
    assert rec["bounds"]["softmax"]["no_dma_vector_array"] is None
    assert rec["bounds"]["softmax"]["roofline_bound"] == "dma"
    assert rec["bounds"]["softmax"]["floor_parts"]["records"]["tensor"] == 0
    assert rec["bounds"]["gemm"]["roofline_bound"] == "compute"
    with pytest.raises(ValueError, match="dma_width"):
        bench_core.run(argparse.Namespace(bounds=True, kernels="gemm", dma_width=100))


@pytest.mark.long
@pytest.mark.parametrize("width", [128, 32])
def test_cycle_model_follows_the_rtl(width):
    """``kernels.bench.RtlCost`` in ``sim.cycles.MicroSim`` against the RTL (fastsim) on every
    benchmark workload but the streaming GEMM: cycles within 2 %, and tensor busy within 2
    points; every output bit-exact against the reference simulator. Builds the fast core of
    each configuration when it is not cached (minutes)."""
    from kernels.backends import fast_backend
    if fast_backend() is None:
        pytest.skip("fastsim not available")
    names = [n for n in NAMES + ["mlp_128", "attention_64"]]
    for w in kb.workloads(names, dma_data_width=width):
        model, rtl = kb.measure(w, "model"), kb.measure(w, "rtl")
        assert abs(model["cycles"] - rtl["cycles"]) <= 0.02 * rtl["cycles"], (w.name, model,
                                                                               rtl)
        assert abs(model["tensor_busy"] - rtl["tensor_busy"]) <= 0.02, w.name
        assert kb.check(w).startswith("bit-exact"), w.name
