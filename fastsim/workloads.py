"""The core workloads as ``sim.image.Image`` objects, for every backend: the GEMM, MLP and
attention programs of ``cocotb_tests/test_core.py``, the streaming GEMM of
``cocotb_tests/test_core_profile.py``, protection faults (a DMA window violation, an
illegal instruction, a watchdog timeout) and the whole-core random programs of
:mod:`fastsim.fuzz`.

Every image writes each region it reads back, so it gives the same outcome on a core that ran
other images before. Each builder takes the ``CoreConfig`` and a seed and returns
``(image, check)``: ``check``
is a function of the outcome that raises ``AssertionError`` unless its readback is what the
workload must produce (the reference simulator's bytes, or for the streaming GEMM its float32
emulation), or None where only backends are compared.
"""

import numpy as np

from sim.asm import assemble
from sim.image import Image, run_refsim

__all__ = ["WORKLOADS", "gemm", "mlp", "attention", "gemm_stream", "window_violation",
           "illegal_instruction", "watchdog_timeout", "build"]


def _bf16(a):
    import ml_dtypes
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def _refsim_check(config, image):
    ref = run_refsim(config, image)

    def check(out):
        for i, (got, exp) in enumerate(zip(out.memory, ref.memory)):
            if got != exp:
                k = next(j for j in range(len(exp)) if got[j] != exp[j])
                raise AssertionError(f"readback {i} differs from the reference simulator "
                                     f"from byte {k}")
        if (out.error is None) != (ref.error is None):
            raise AssertionError(f"error {out.error!r}, reference {ref.error!r}")
    return check


def gemm(config, seed=1, KT=2, MT=2, N=16):
    """Tiled BF16 GEMM ``W.T @ X`` (``core_env.gemm_program``), checked against refsim."""
    from cocotb_tests.common.core_env import gemm_program
    P, C = config.rows, config.cols
    rng = np.random.default_rng(seed)
    w, x = _bf16(rng.standard_normal((KT * P, MT * C))), _bf16(rng.standard_normal((KT * P, N)))
    W, X, O = 0x1000, 0x1000 + w.nbytes, 0x1000 + w.nbytes + x.nbytes
    O = (O + 0xFF) & ~0xFF
    words = assemble(gemm_program(P=P, C=C, KT=KT, MT=MT, N=N, w_ext=W, x_ext=X, o_ext=O))
    image = Image(program=words, memory=[(W, w.tobytes()), (X, x.tobytes())],
                  readback=[(O, MT * C * N * 4)])
    return image, _refsim_check(config, image)


def mlp(config, seed=1, KT=2, MT=1, N=16):
    """``gelu(W.T X + b)`` in BF16 with stochastic rounding (``core_env.mlp_program``)."""
    from cocotb_tests.common.core_env import mlp_program, table_words
    P, C = config.rows, config.cols
    rng = np.random.default_rng(seed)
    K, M = KT * P, MT * C
    w = _bf16(rng.standard_normal((K, M)) / np.sqrt(K))
    xt = _bf16(rng.standard_normal((K, N)))
    b = (rng.standard_normal(M) * 0.5).astype(np.float32)
    tw = np.array(table_words("gelu", 0, config.lut_entries), dtype=np.uint32)
    T, W, X, B, Y = 0x8000, 0x1000, 0x3000, 0x5000, 0x6000
    words = assemble(mlp_program(P=P, C=C, KT=KT, MT=MT, N=N, t_ext=T, t_words=len(tw),
                                 w_ext=W, x_ext=X, b_ext=B, y_ext=Y, seed=seed & 0xFFFFFFFF,
                                 sbuf_depth=config.sbuf_depth))
    image = Image(program=words, memory=[(T, tw.tobytes()), (W, w.tobytes()),
                                         (X, xt.tobytes()), (B, b.tobytes())],
                  readback=[(Y, M * N * 2)])
    return image, _refsim_check(config, image)


def attention(config, seed=1, KT=2):
    """One attention head (``core_env.attention_program``), checked against refsim."""
    from cocotb_tests.common.core_env import attention_program, table_words
    P, C = config.rows, config.cols
    d, Sq, Sk = C, C, KT * P
    rng = np.random.default_rng(seed)
    q, k, v = (_bf16(rng.standard_normal(s)) for s in ((Sq, d), (Sk, d), (Sk, d)))
    ew = np.array(table_words("exp", 0, config.lut_entries), dtype=np.uint32)
    rw = np.array(table_words("reciprocal", 1, config.lut_entries), dtype=np.uint32)
    E, R, Q, K, V, TMP, O = 0x8000, 0x9000, 0x1000, 0x1400, 0x1800, 0x2000, 0x4000
    words = assemble(attention_program(P=P, C=C, KT=KT, d=d, e_ext=E, e_words=len(ew),
                                       r_ext=R, r_words=len(rw), qt_ext=Q, kt_ext=K, v_ext=V,
                                       tmp_ext=TMP, o_ext=O, sbuf_depth=config.sbuf_depth))
    image = Image(program=words, memory=[(E, ew.tobytes()), (R, rw.tobytes()),
                                         (Q, np.ascontiguousarray(q.T).tobytes()),
                                         (K, np.ascontiguousarray(k.T).tobytes()),
                                         (V, v.tobytes())],
                  readback=[(O, d * Sq * 4)])
    return image, _refsim_check(config, image)


def gemm_stream(config, seed=1, KT=2, MT=2, NC=8, NCH=4, G=2):
    """The software-pipelined streaming GEMM (``test_core_profile.gemm_stream_program``),
    checked against its float32 emulation ``stream_reference`` (bit-exact with refsim)."""
    from cocotb_tests.test_core_profile import gemm_stream_program, stream_reference
    P, C = config.rows, config.cols
    K, M, N = KT * P, MT * C, NCH * NC
    rng = np.random.default_rng(seed)
    w, x = _bf16(rng.standard_normal((K, M))), _bf16(rng.standard_normal((K, N)))
    W = 0
    X = (w.nbytes + 0xFFFF) & ~0xFFFF
    O = (X + x.nbytes + 0xFFFF) & ~0xFFFF
    words = assemble(gemm_stream_program(P=P, C=C, KT=KT, MT=MT, NC=NC, NCH=NCH, G=G,
                                         w_ext=W, x_ext=X, o_ext=O))
    image = Image(program=words, memory=[(W, w.tobytes()), (X, x.tobytes())],
                  readback=[(O, M * N * 4)], max_cycles=50_000_000)

    def check(out):
        got = np.frombuffer(out.memory[0], dtype=np.uint32).reshape(M, N)
        exp = stream_reference(w, x, P)
        bad = np.argwhere(got != exp)
        if len(bad):
            raise AssertionError(f"streaming GEMM: {len(bad)} mismatches vs the float32 "
                                 f"emulation, first at {bad[0].tolist()}")
    return image, check


_COPY = """
    li r1, 0x10010          ; n0 = 16, n1 = 1
    li r2, 4
    li r3, 0
    li r4, 64
    li r10, {src}
    li r11, 0
    dma_ld r1, r10, r11, part_start=0, part_count=2, fmt=fp32, sem=0, sem_en=1
    waiti 0, 1
    li r12, {dst}
    dma_st r1, r12, r11, part_start=0, part_count=2, fmt=fp32, sem=1, sem_en=1
    waiti 1, 1
    halt
"""


def window_violation(config, seed=1):
    """A DMA store outside the writable window: ends in DMA_WINDOW, nothing written."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 128, dtype=np.uint8).tobytes()
    before = rng.integers(0, 256, 128, dtype=np.uint8).tobytes()
    image = Image(program=assemble(_COPY.format(src=0x1000, dst=0x5000)),
                  memory=[(0x1000, data), (0x5000, before)],
                  readback=[(0x1000, 128), (0x5000, 128)],
                  windows=[(0x1000, 0x1FFF, True, True), (0x5000, 0x50FF, True, False)])

    def check(out):
        if out.error is None or int(out.error.code) != 2 or out.error.address != 0x5000:
            raise AssertionError(f"expected DMA_WINDOW at 0x5000, got {out.error!r}")
        if out.memory[1] != before:
            raise AssertionError("the refused store wrote memory")
    return image, check


def illegal_instruction(config, seed=1):
    """A matmul with k beyond the array: ILLEGAL_INSTRUCTION at its address."""
    text = "li r1, 0\nli r2, 8\nmatmul r1, r1, r1, r2, k=255, m=1, fmt=bf16, accumulate=0\nhalt\n"
    image = Image(program=assemble(text), memory=[(0, bytes(16))], readback=[(0, 16)])

    def check(out):
        if out.error is None or int(out.error.code) != 1 or out.error.address != 2:
            raise AssertionError(f"expected ILLEGAL_INSTRUCTION at 2, got {out.error!r}")
    return image, check


def watchdog_timeout(config, seed=1):
    """An endless loop stopped by the watchdog after 2,000 cycles."""
    text = "li r5, 0x7FFFFFFF\nloop r5, L\nnop\nL: endloop\nhalt\n"
    image = Image(program=assemble(text), watchdog=2000, memory=[(0, bytes(16))],
                  readback=[(0, 16)])

    def check(out):
        if out.error is None or int(out.error.code) != 5:
            raise AssertionError(f"expected WATCHDOG, got {out.error!r}")
    return image, check


#: name -> builder(config, seed) -> (Image, check)
WORKLOADS = {"gemm": gemm, "mlp": mlp, "attention": attention, "gemm_stream": gemm_stream,
             "window_violation": window_violation, "illegal_instruction": illegal_instruction,
             "watchdog_timeout": watchdog_timeout}


def build(name, config, seed=1, **shape):
    """``WORKLOADS[name](config, seed, **shape)`` with a clear error for an unknown name."""
    try:
        builder = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}, not {name!r}") \
            from None
    return builder(config, seed, **shape)
