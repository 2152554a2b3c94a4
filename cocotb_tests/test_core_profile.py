"""Runs one workload on the core and records the engines' activity every cycle (for
``scripts/profile.py``, ``scripts/bench_core.py`` and ``scripts/bench_sim.py``).

Environment: ``PROFILE_WORKLOAD`` (gemm, mlp, attention, gemm_stream), ``PROFILE_OUT`` (JSON
path), ``PROFILE_SHAPE`` (JSON dict of the workload's tiling, optional). gemm, mlp and attention
are the programs of ``test_core.py``, checked bit-exactly against the reference simulator.
gemm_stream is the software-pipelined large GEMM below: too long for the reference simulator
(about 0.1 s per matmul record, 13,824 records), it is checked bit-exactly against
:func:`stream_reference`, a float32 numpy emulation of the tensor engine's accumulation order
that ``tests/test_core_stream.py`` checks bit-exactly against the reference simulator on
smaller shapes, and against numpy float64 within the usual bound.
"""

import json
import logging
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from cocotb_tests.common.core_env import CoreEnv, _li
from cocotb_tests.test_core import _attention, _gemm, _mlp, _seed


def gemm_stream_layout(*, P, C, KT, MT, NC, G):
    """SBUF/PSUM word addresses of :func:`gemm_stream_program` and the depths it needs."""
    M = MT * C
    MG = MT // G
    w_sb = 0
    x_sb = [KT * M + b * KT * NC for b in range(2)]
    o_sb = [x_sb[1] + KT * NC + b * MT * NC for b in range(2)]
    p_ps = [b * MT * NC for b in range(2)]
    return {"M": M, "MG": MG, "w_sb": w_sb, "x_sb": x_sb, "o_sb": o_sb, "p_ps": p_ps,
            "sbuf_words": o_sb[1] + MT * NC, "psum_words": 2 * MT * NC}


def gemm_stream_program(*, P, C, KT, MT, NC, NCH, G, w_ext, x_ext, o_ext):
    """Software-pipelined ``O[M, N] = W[K, M].T @ X[K, N]`` (BF16 in, FP32 out) with
    ``K = KT*P``, ``M = MT*C``, ``N = NCH*NC``, written so that the DMA, the tensor engine and
    the vector engine run concurrently:

    * W stays in SBUF for the whole run, loaded once in ``G`` column groups after X chunks 0
      and 1; chunks 0 and 1 are computed group by group as W arrives;
    * X streams through SBUF in chunks of ``NC`` columns, double-buffered: the DMA loads
      chunk ``c+1`` while the array works on chunk ``c``;
    * PSUM is double-buffered too: while the matmuls of chunk ``c`` accumulate (K tiles, in
      PSUM) into one half, the vector engine copies chunk ``c-1`` out of the other half and
      the DMA stores it.

    Every matmul reuses its stationary W tile for ``NC`` moving columns; the inner loops use
    hardware loops and affine generators (one ``matmul`` + ``endloop`` per tile). Semaphores:
    0 X chunks loaded, 5 W groups loaded, 1 matmuls done, 2 copies done, 3 stores done.
    """
    L = gemm_stream_layout(P=P, C=C, KT=KT, MT=MT, NC=NC, G=G)
    M, MG = L["M"], L["MG"]
    N = NCH * NC
    assert MT % G == 0, "G must divide MT"
    eb = 2
    A = []
    # Descriptors: X chunk (r1..r4), O chunk (r5..r8), W group (r40..r43).
    A += [_li(1, NC | KT << 16), _li(2, eb), _li(3, P * N * eb), _li(4, N * eb),
          _li(5, NC | MT << 16), _li(6, 4), _li(7, C * N * 4), _li(8, N * 4),
          _li(40, MG * C | KT << 16), _li(41, eb), _li(42, P * M * eb), _li(43, M * eb),
          _li(20, NC), _li(31, KT - 1), _li(30, MG),
          _li(32, C), _li(33, NC), _li(34, MG * C), _li(35, NC),
          "ag 0, r12, r32, 1", "ag 1, r14, r33, 1", "ag 2, r22, r34, 2", "ag 3, r23, r35, 2"]

    def x_load(c):
        return [_li(10, x_ext + c * NC * eb), _li(11, L["x_sb"][c % 2]),
                f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, "
                f"sem_en=1"]

    def copy(c):
        return [_li(15, L["p_ps"][c % 2]), _li(16, L["o_sb"][c % 2]), _li(17, MT * NC),
                "copy r16, r15, r0, r17, a_space=psum, in_fmt=fp32, out_fmt=fp32, sem=2, "
                "sem_en=1"]

    def store(c):
        return [_li(10, o_ext + c * NC * 4), _li(11, L["o_sb"][c % 2]),
                f"dma_st r5, r10, r11, part_start=0, part_count={C}, fmt=fp32, sem=3, "
                f"sem_en=1"]

    def compute(c, g, lbl):
        b = c % 2
        return [_li(12, L["w_sb"] + g * KT * MG * C), _li(13, L["x_sb"][b]),
                _li(23, L["x_sb"][b] + NC), _li(14, L["p_ps"][b] + g * MG * NC),
                f"loop r30, mt_end{lbl}",
                f"matmul r14, r12, r13, r20, k={P}, m={C}, fmt=bf16, accumulate=0, sem=1, "
                f"sem_en=1",
                f"addi r22, r12, {MG * C}",
                f"loop r31, kt_end{lbl}",
                f"matmul r14, r22, r23, r20, k={P}, m={C}, fmt=bf16, accumulate=1, sem=1, "
                f"sem_en=1",
                f"kt_end{lbl}: endloop",
                f"mt_end{lbl}: endloop"]

    state = {"copied": 0, "stored": 0, "lbl": 0}

    def do_copy(c):
        # O buffer c%2 was last stored by chunk c-2.
        out = [f"waiti 3, {c - 1}"] if c >= 2 else []
        state["copied"] = c + 1
        return out + copy(c)

    def do_stores():
        out = []
        if state["stored"] < state["copied"]:
            out.append(f"waiti 2, {state['copied']}")
            for c in range(state["stored"], state["copied"]):
                out += store(c)
            state["stored"] = state["copied"]
        return out

    def block(c, g):
        state["lbl"] += 1
        return compute(c, g, state["lbl"])

    # Phase A: X0, X1 and W (in G column groups) load; chunks 0 and 1 are computed group by
    # group as W arrives, so the array works while the rest of W streams in.
    first = min(NCH, 2)

    def w_load(g):
        return [_li(10, w_ext + g * MG * C * eb), _li(11, L["w_sb"] + g * KT * MG * C),
                f"dma_ld r40, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=5, "
                f"sem_en=1"]

    for c in range(first):
        A += x_load(c)
    # W group g+1 is queued just before waiting for group g: the sequencer's DMA queue holds
    # two records, and a third EMIT would stall it (and the matmuls behind it).
    A += w_load(0) + [f"waiti 0, {first}"]       # X chunks 0 (and 1) in SBUF
    done = 0                                     # matmuls issued so far (sem 1 target)
    ends = {}                                    # chunk -> sem 1 count when it is done
    for g in range(G):
        if g + 1 < G:
            A += w_load(g + 1)
        A.append(f"waiti 5, {g + 1}")
        for c in range(first):
            A += block(c, g)
            done += MG * KT
            ends[c] = done
    if NCH > 2:
        A.append(f"waiti 1, {ends[0]}")          # chunk 0 done: copy it, refill its X buffer
        A += do_copy(0) + x_load(2)
    # Steady state: chunk c's matmuls go first (its X buffer and PSUM half are free); once
    # its first group is queued, chunk c-1 (done by then) is copied out of PSUM and chunk c+1
    # is loaded into chunk c-1's X buffer; after the second group chunk c-1 is stored.
    for c in range(2, NCH):
        A += [f"waiti 0, {c + 1}", f"waiti 2, {c - 1}"]   # X chunk c in; PSUM half free
        for g in range(G):
            A += block(c, g)
            done += MG * KT
            if g == 0:
                A.append(f"waiti 1, {ends[c - 1]}")      # chunk c-1 done
                A += do_copy(c - 1)
                if c + 1 < NCH:
                    A += x_load(c + 1)
            if g == min(1, G - 1):
                A += do_stores()
        ends[c] = done
    A.append(f"waiti 1, {done}")
    for c in range(state["copied"], NCH):
        A += do_copy(c)
    A += do_stores() + [f"waiti 3, {NCH}", "halt"]
    return "\n".join(A) + "\n"


def stream_reference(w_bits, x_bits, P):
    """``W.T @ X`` for BF16 bit patterns ``w_bits`` [K, M], ``x_bits`` [K, N] as FP32 bit
    patterns, in the tensor engine's order (``sim/tensor.py``): per K tile of ``P`` rows the
    exact products are summed top to bottom with FP32 round-to-nearest-even, and the tiles are
    accumulated in PSUM in order (FP32 RNE). numpy's float32 adds are IEEE RNE; the golden
    model's FP32 add also flushes subnormals, which random normal data never produce (the
    test compares the two on random tiles)."""
    import ml_dtypes
    w = np.asarray(w_bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    x = np.asarray(x_bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    K = w.shape[0]
    acc = None
    for t in range(0, K, P):
        s = None
        for k in range(t, t + P):
            p = np.outer(w[k], x[k]).astype(np.float32)   # exact: 8x8-bit significands
            s = p if s is None else (s + p).astype(np.float32)
        acc = s if acc is None else (acc + s).astype(np.float32)
    return acc.view(np.uint32)


#: The large streaming GEMM's default shape (8x8 core, K = M = 192, N = 768).
STREAM_SHAPE = {"KT": 24, "MT": 24, "NC": 32, "NCH": 24, "G": 4}


def stream_config(rows, shape=None):
    """Core configuration (SBUF/PSUM/program depths) for :func:`gemm_stream_program`: sized
    for :data:`STREAM_SHAPE` so that smaller shapes run on the same build."""
    need = []
    for sh in (STREAM_SHAPE, {**STREAM_SHAPE, **(shape or {})}):
        need.append(gemm_stream_layout(P=rows, C=rows, KT=sh["KT"], MT=sh["MT"], NC=sh["NC"],
                                       G=sh["G"]))
    pow2 = lambda n: 1 << max(4, (n - 1).bit_length())
    return {"rows": rows, "cols": rows,
            "sbuf_depth": pow2(max(n["sbuf_words"] for n in need)),
            "psum_depth": pow2(max(n["psum_words"] for n in need)), "formats": ["bf16"],
            "lut_entries": 64, "pmem_depth": 2048}


async def _gemm_stream(dut, env, seed, KT, MT, NC, NCH, G):
    from cocotb_tests.common.config import dut_config
    from cocotb_tests.common.core_env import run_program
    from sim.asm import assemble
    import ml_dtypes
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    K, M, N = KT * P, MT * C, NCH * NC
    rng = np.random.default_rng(seed)
    bf = lambda a: np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    w, x = bf(rng.standard_normal((K, M))), bf(rng.standard_normal((K, N)))
    W_EXT = 0
    X_EXT = (w.nbytes + 0xFFFF) & ~0xFFFF
    O_EXT = (X_EXT + x.nbytes + 0xFFFF) & ~0xFFFF
    assert O_EXT + M * N * 4 <= env.ram.size, "external memory too small"
    words = assemble(gemm_stream_program(P=P, C=C, KT=KT, MT=MT, NC=NC, NCH=NCH, G=G,
                                         w_ext=W_EXT, x_ext=X_EXT, o_ext=O_EXT))
    # Too long for the reference simulator's data path, not for its race check.
    from cocotb_tests.test_core import core_config
    from sim.races import RaceError, check_program
    races = check_program(core_config(cfg), words)
    if races:
        raise RaceError(races)
    env.write_mem(W_EXT, w.tobytes())
    env.write_mem(X_EXT, x.tobytes())
    host = env.host()
    await run_program(env, host, words, timeout=5_000_000)
    got = np.frombuffer(env.read_mem(O_EXT, M * N * 4), dtype=np.uint32).reshape(M, N)
    exp = stream_reference(w, x, P)
    bad = np.argwhere(got != exp)
    assert len(bad) == 0, (f"seed {seed}: {len(bad)} mismatches, first at {bad[0].tolist()}: "
                           f"got {got[tuple(bad[0])]:#x} exp {exp[tuple(bad[0])]:#x}")
    wf = w.view(ml_dtypes.bfloat16).astype(np.float64)
    xf = x.view(ml_dtypes.bfloat16).astype(np.float64)
    bound = (K + 1) * 2.0 ** -23 * (np.abs(wf).T @ np.abs(xf))
    assert np.all(np.abs(got.view(np.float32) - wf.T @ xf) <= bound), "beyond float64 bound"
    dut._log.warning("streaming GEMM K=%d M=%d N=%d: bit-exact vs the float32 emulation",
                     K, M, N)


FIELDS = ("running", "seq_busy", "dma", "tensor", "vector", "aborting", "seq_wait")


@cocotb.test()
async def profile_run(dut):
    workload = os.environ.get("PROFILE_WORKLOAD", "mlp")
    out = os.environ.get("PROFILE_OUT", "build/profile.json")
    shape = json.loads(os.environ.get("PROFILE_SHAPE", "{}"))
    seed = _seed()
    if workload == "gemm_stream":
        # Hundreds of thousands of cycles: keep the AXI models' per-transaction INFO logs out.
        for name in ("cocotb.top.axi_", "cocotb.top.axil_"):
            logging.getLogger(name).setLevel(logging.WARNING)
    env = CoreEnv(dut, seed=seed, mem_size=1 << 21 if workload == "gemm_stream" else 1 << 20)
    await env.reset()
    samples = []
    stop = {"flag": False}

    async def monitor():
        # One packed sample per cycle; bit i is FIELDS[i] (ACTIVITY_LAYOUT order).
        while not stop["flag"]:
            await RisingEdge(dut.clk)
            samples.append(int(dut.activity.value))

    cocotb.start_soon(monitor())
    t0, cpu0 = time.monotonic(), time.process_time()
    sim0 = cocotb.utils.get_sim_time("ns")
    check_failed = None
    try:
        if workload == "gemm":
            await _gemm(dut, env, seed=seed, **({"KT": 2, "MT": 2, "N": 16} | shape))
        elif workload == "mlp":
            await _mlp(dut, env, seed=seed, **({"KT": 2, "MT": 1, "N": 16} | shape))
        elif workload == "attention":
            await _attention(dut, env, seed=seed, **({"KT": 2} | shape))
        elif workload == "gemm_stream":
            await _gemm_stream(dut, env, seed=seed, **(STREAM_SHAPE | shape))
        else:
            raise ValueError(f"PROFILE_WORKLOAD must be gemm, mlp, attention or gemm_stream, "
                             f"not {workload!r}")
    except AssertionError as exc:
        # A result check failed after the program ran: keep the record (the counters are
        # valid), say so in it, and fail the test below.
        check_failed = str(exc)
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    sim_cycles = int((cocotb.utils.get_sim_time("ns") - sim0) // 10)
    stop["flag"] = True
    host = env.host()
    perf = {}
    for name in ("CYCLES_LO", "TENSOR_BUSY", "VECTOR_BUSY", "DMA_BUSY", "DMA_RD_BYTES",
                 "DMA_WR_BYTES", "INSTRET", "SEM_WAIT"):
        perf[name.lower()] = await host.read(f"PERF_{name}")
    # Keep only the cycles of the program (running high), with their absolute index.
    first = next((i for i, s in enumerate(samples) if s & 1), 0)
    last = max((i for i, s in enumerate(samples) if s & 1), default=0)
    rec = {"workload": workload, "shape": shape, "seed": seed, "fields": FIELDS,
           "perf": perf, "wall_s": wall, "cpu_s": cpu, "sim_cycles": sim_cycles,
           "start": first, "samples": samples[first:last + 1], "check_failed": check_failed}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rec, f)
    dut._log.info("%s: %d program cycles, perf %s, wall %.1f s", workload, last - first + 1,
                  perf, wall)
    assert check_failed is None, check_failed
