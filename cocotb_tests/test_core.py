"""End-to-end programs on the whole core (``rtl.core.top.NeuronCore``), through the host
driver over AXI4-Lite, with cocotbext-axi's AXI RAM as external memory.

Every program is also run on the reference simulator (``sim.refsim``): the external-memory
results must be bit-exact. They are also compared with numpy float64 within a stated
tolerance (that checks the reference itself).
"""

import os

import cocotb
import ml_dtypes
import numpy as np

from cocotb_tests.common.config import dut_config
from cocotb_tests.common.core_env import (CoreEnv, attention_program, gemm_program, mlp_program,
                                          run_program, table_words)
from sim.asm import assemble
from sim.config import CoreConfig

MEM = 1 << 16


def _seed():
    return int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))


def _bf16_bits(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def _bf16_value(bits):
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)


def core_config(cfg=None):
    """The :class:`sim.config.CoreConfig` of a test configuration dict (``DUT_CONFIG`` by
    default): the one object that builds both the core and its reference simulator."""
    cfg = dut_config() if cfg is None else cfg
    return CoreConfig.from_dict({k: v for k, v in cfg.items() if k != "engine_domain"})


def _formats(cfg):
    return list(core_config(cfg).formats)


def _refsim(cfg, words, ext, **kwargs):
    """The program on the core's reference simulator (``CoreConfig.refsim``: the core's
    geometry, formats, record checks and the race check), run; it must neither trap, skip a
    record nor race."""
    ref = core_config(cfg).refsim(words, ext_bytes=MEM, **kwargs)
    ref.ext[:len(ext)] = np.frombuffer(bytes(ext), dtype=np.uint8)
    ref.run()
    assert not ref.error, f"reference simulator trapped: {ref.error:#x} at pc {ref.err_pc}"
    assert not ref.skipped, f"reference skipped records: {ref.skipped}"
    race = ref.races_error()
    if race is not None:
        raise race
    return ref


async def _gemm(dut, env, KT, MT, N, seed, data=None):
    """``W.T @ X`` of K = ``KT`` tiles, M = ``MT`` tiles and N columns through the core,
    bit-exact against RefSim and within the float64 bound; ``W`` and ``X`` standard normal,
    or ``data(K, M, N)`` -> (w, x) float arrays exact in BF16. Returns ``(cycles, result)``."""
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    rng = np.random.default_rng(seed)
    K, M = KT * P, MT * C
    wv, xv = ((rng.standard_normal((K, M)), rng.standard_normal((K, N))) if data is None
              else data(K, M, N))
    w, x = _bf16_bits(wv), _bf16_bits(xv)
    W_EXT, X_EXT, O_EXT = 0x1000, 0x3000, 0x6000
    text = gemm_program(P=P, C=C, KT=KT, MT=MT, N=N, w_ext=W_EXT, x_ext=X_EXT, o_ext=O_EXT)
    words = assemble(text)
    ext = bytearray(MEM)
    ext[W_EXT:W_EXT + w.nbytes] = w.tobytes()
    ext[X_EXT:X_EXT + x.nbytes] = x.tobytes()
    ref = _refsim(cfg, words, ext)

    env.write_mem(0, bytes(ext))
    host = env.host()
    await run_program(env, host, words)
    cycles = await host.read("PERF_CYCLES_LO")
    got = np.frombuffer(env.read_mem(O_EXT, M * N * 4), dtype=np.uint32).reshape(M, N)
    exp = ref.ext[O_EXT:O_EXT + M * N * 4].view(np.uint32).reshape(M, N)
    bad = np.argwhere(got != exp)
    assert len(bad) == 0, (f"seed {seed}: {len(bad)} mismatches vs refsim, first at "
                           f"{bad[0].tolist()}: got {got[tuple(bad[0])]:#x} exp "
                           f"{exp[tuple(bad[0])]:#x}")
    # float64 check: K products exact, K-1 FP32 roundings + PSUM adds: |err| <= K*2^-23*sum|p|.
    wf, xf = _bf16_value(w), _bf16_value(x)
    ref64 = wf.T @ xf
    bound = (K + 1) * 2.0 ** -23 * (np.abs(wf).T @ np.abs(xf))
    gotf = got.view(np.float32).astype(np.float64)
    assert np.all(np.abs(gotf - ref64) <= bound), f"seed {seed}: beyond the float64 bound"
    dut._log.info("GEMM K=%d M=%d N=%d on %dx%d: bit-exact, %d cycles", K, M, N, P, C, cycles)
    return cycles, got


@cocotb.test()
async def test_gemm_tiled(dut):
    """GEMM larger than the array: K = 2 tiles accumulated in PSUM, M = 2 tiles, N = 16."""
    seed = _seed()
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    await _gemm(dut, env, KT=2, MT=2, N=16, seed=seed)


@cocotb.test()
async def test_gemm_accumulation_mode(dut):
    """A column sum whose bits tell the accumulation apart: rows 0 and 1 give the products 1
    and p = (2**-12 * (1 + 2**-7))**2 = 2**-24 * (1 + 2**-6 + 2**-14), the other rows 0.
    Rounding to FP32 after every row (``fp32``) rounds 1 + p once, above half an ulp, to
    1 + 2**-23. Fused accumulation (``fused``) first aligns p to 26 fraction bits below the
    larger product by a floor (2**-24 exactly), then rounds that tie to even: 1.0."""
    def data(K, M, N):
        w, x = np.zeros((K, M)), np.zeros((K, N))
        w[0], x[0] = 1.0, 1.0
        w[1], x[1] = 2.0 ** -12 * (1 + 2.0 ** -7), 2.0 ** -12 * (1 + 2.0 ** -7)
        return w, x
    env = CoreEnv(dut, seed=_seed())
    await env.reset()
    _, got = await _gemm(dut, env, KT=1, MT=1, N=4, seed=0, data=data)
    fused = core_config().tensor_accumulate == "fused"
    want = 0x3F800000 if fused else 0x3F800001
    assert np.all(got == want), f"got {got[0, 0]:#x}, the {'fused' if fused else 'fp32'} " \
                                f"accumulation gives {want:#x}"


@cocotb.test()
async def test_gemm_axi_latency(dut):
    """The same GEMM with random AXI latency and back-pressure/idle cycles on every channel."""
    seed = _seed() + 1
    env = CoreEnv(dut, seed=seed, latency=(0, 5), pause=0.3)
    await env.reset()
    await _gemm(dut, env, KT=2, MT=1, N=8, seed=seed)


async def _mlp(dut, env, KT, MT, N, seed):
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    rng = np.random.default_rng(seed)
    K, M = KT * P, MT * C
    w = _bf16_bits(rng.standard_normal((K, M)) / np.sqrt(K))
    xt = _bf16_bits(rng.standard_normal((K, N)))
    b = (rng.standard_normal(M) * 0.5).astype(np.float32)
    tw = np.array(table_words("gelu", 0, cfg["lut_entries"]), dtype=np.uint32)
    T_EXT, W_EXT, X_EXT, B_EXT, Y_EXT = 0x8000, 0x1000, 0x3000, 0x5000, 0x6000
    text = mlp_program(P=P, C=C, KT=KT, MT=MT, N=N, t_ext=T_EXT, t_words=len(tw), w_ext=W_EXT,
                       x_ext=X_EXT, b_ext=B_EXT, y_ext=Y_EXT, seed=seed & 0xFFFFFFFF,
                       sbuf_depth=cfg["sbuf_depth"])
    words = assemble(text)
    ext = bytearray(MEM)
    for addr, arr in ((T_EXT, tw), (W_EXT, w), (X_EXT, xt), (B_EXT, b)):
        ext[addr:addr + arr.nbytes] = arr.tobytes()
    ref = _refsim(cfg, words, ext)
    env.write_mem(0, bytes(ext))
    host = env.host()
    await run_program(env, host, words)
    cycles = await host.read("PERF_CYCLES_LO")
    got = np.frombuffer(env.read_mem(Y_EXT, M * N * 2), dtype=np.uint16).reshape(M, N)
    exp = ref.ext[Y_EXT:Y_EXT + M * N * 2].view(np.uint16).reshape(M, N)
    bad = np.argwhere(got != exp)
    assert len(bad) == 0, (f"seed {seed}: {len(bad)} mismatches vs refsim, first at "
                           f"{bad[0].tolist()}: got {got[tuple(bad[0])]:#x} exp "
                           f"{exp[tuple(bad[0])]:#x}")
    # float64: gelu(W^T X^T + b); tolerance = 1 BF16 ulp (SR) + the table's error.
    from math import erf
    h = _bf16_value(w).T @ _bf16_value(xt) + b.astype(np.float64)[:, None]
    ref64 = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    gotf = _bf16_value(got)
    err = np.abs(gotf - ref64)
    tol = 2.0 ** -7 * np.abs(ref64) + 2e-3
    assert np.all(err <= tol), f"seed {seed}: max error {err.max():.3g} beyond tolerance"
    dut._log.info("MLP K=%d M=%d N=%d: bit-exact vs refsim, max |err| vs float64 %.3g, "
                  "%d cycles", K, M, N, err.max(), cycles)
    return cycles


@cocotb.test()
async def test_mlp_gelu_bf16_sr(dut):
    """gelu(X @ W + b) in BF16 with stochastic rounding (table loaded by TABLE_LD)."""
    seed = _seed() + 2
    env = CoreEnv(dut, seed=seed, latency=(0, 2), pause=0.1)
    await env.reset()
    await _mlp(dut, env, KT=2, MT=1, N=16, seed=seed)


async def _attention(dut, env, KT, seed):
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    d, Sq, Sk = C, C, KT * P
    rng = np.random.default_rng(seed)
    q = _bf16_bits(rng.standard_normal((Sq, d)))
    k = _bf16_bits(rng.standard_normal((Sk, d)))
    v = _bf16_bits(rng.standard_normal((Sk, d)))
    ew = np.array(table_words("exp", 0, cfg["lut_entries"]), dtype=np.uint32)
    rw = np.array(table_words("reciprocal", 1, cfg["lut_entries"]), dtype=np.uint32)
    E_EXT, R_EXT, Q_EXT, K_EXT, V_EXT, TMP, O_EXT = (0x8000, 0x9000, 0x1000, 0x1400, 0x1800,
                                                     0x2000, 0x4000)
    text = attention_program(P=P, C=C, KT=KT, d=d, e_ext=E_EXT, e_words=len(ew), r_ext=R_EXT,
                             r_words=len(rw), qt_ext=Q_EXT, kt_ext=K_EXT, v_ext=V_EXT,
                             tmp_ext=TMP, o_ext=O_EXT, sbuf_depth=cfg["sbuf_depth"])
    words = assemble(text)
    ext = bytearray(MEM)
    for addr, arr in ((E_EXT, ew), (R_EXT, rw), (Q_EXT, np.ascontiguousarray(q.T)),
                      (K_EXT, np.ascontiguousarray(k.T)), (V_EXT, v)):
        ext[addr:addr + arr.nbytes] = arr.tobytes()
    ref = _refsim(cfg, words, ext)
    env.write_mem(0, bytes(ext))
    host = env.host()
    await run_program(env, host, words)
    cycles = await host.read("PERF_CYCLES_LO")
    got = np.frombuffer(env.read_mem(O_EXT, d * Sq * 4), dtype=np.uint32).reshape(d, Sq)
    exp = ref.ext[O_EXT:O_EXT + d * Sq * 4].view(np.uint32).reshape(d, Sq)
    bad = np.argwhere(got != exp)
    assert len(bad) == 0, (f"seed {seed}: {len(bad)} mismatches vs refsim, first at "
                           f"{bad[0].tolist()}: got {got[tuple(bad[0])]:#x} exp "
                           f"{exp[tuple(bad[0])]:#x}")
    # float64 reference; tolerance: P rounded to BF16 (2^-8 relative), table errors ~1e-5.
    qf, kf, vf = _bf16_value(q), _bf16_value(k), _bf16_value(v)
    s = qf @ kf.T / np.sqrt(d)
    pr = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    ref64 = (pr @ vf).T
    gotf = got.view(np.float32).astype(np.float64)
    err = np.abs(gotf - ref64)
    tol = 2.0 ** -7 * (np.abs(pr) @ np.abs(vf)).T + 1e-4
    assert np.all(err <= tol), f"seed {seed}: max error {err.max():.3g} beyond tolerance"
    dut._log.info("attention Sq=%d Sk=%d d=%d: bit-exact vs refsim, max |err| vs float64 "
                  "%.3g, %d cycles", Sq, Sk, d, err.max(), cycles)
    return cycles


@cocotb.test()
async def test_attention_head(dut):
    """One attention head: QK^T, softmax (exp table, row sums, reciprocal table), times V."""
    seed = _seed() + 3
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    await _attention(dut, env, KT=2, seed=seed)


@cocotb.test()
async def test_lut_window_readback(dut):
    """The host's LUT window reads back what it wrote, in block and single reads, in both
    banks (the coefficient words c0..c2 of a few entries). A read goes through the vector
    engine's cfg port and takes the window's read_latency (4) cycles: with the register
    block's default of 1, every read returned the previous read's word."""
    env = CoreEnv(dut, seed=_seed() + 7)
    await env.reset()
    host = env.host()
    rng = np.random.default_rng(_seed())
    addrs = [bank * 1024 + 4 * e + j for bank in (0, 1) for e in range(4) for j in range(3)]
    words = [int(w) for w in rng.integers(0, 1 << 32, size=len(addrs), dtype=np.uint64)]
    for a, w in zip(addrs, words):
        await host.load_lut([w], base=a)
    got = [(await host.read_lut(1, base=a))[0] for a in addrs]
    assert got == words, [(a, hex(g), hex(w)) for a, g, w in zip(addrs, got, words) if g != w]
    block = await host.read_lut(3, base=4)                  # entry 1 of bank 0, one burst
    assert block == words[3:6], (block, words[3:6])


@cocotb.test()
async def test_axi_error_then_correct_run(dut):
    """An AXI SLVERR on a DMA read ends the program with DMA_AXI_READ (a Python exception
    naming it and the address); after CTRL.clear the same GEMM runs bit-exact. Then the same
    with a write error on the result store."""
    from sim.errors import ErrorCode
    from sim.host import AcceleratorError
    seed = _seed() + 4
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    for kind, lo, code in (("read", 0x3000, ErrorCode.DMA_AXI_READ),
                           ("write", 0x6000, ErrorCode.DMA_AXI_WRITE)):
        words = assemble(gemm_program(P=P, C=C, KT=1, MT=1, N=8, w_ext=0x1000, x_ext=0x3000,
                                      o_ext=0x6000))
        env.error_ranges = [(lo, lo + 0x100)]
        host = env.host()
        try:
            await run_program(env, host, words, timeout=50_000)
        except AcceleratorError as exc:
            assert exc.code == code, f"{kind}: got {exc!r}"
            dut._log.info("%s error reported as: %s", kind, exc)
        else:
            raise AssertionError(f"{kind} error response not reported")
        st = await host.status()
        assert not st["busy"], "core still busy after the error"
        await host.clear()
        env.error_ranges = []
        await _gemm(dut, env, KT=1, MT=1, N=8, seed=seed)


@cocotb.test()
async def test_reset_mid_program(dut):
    """Reset asserted while a GEMM runs (DMA bursts and matmuls in flight), then a correct
    run of the full GEMM."""
    seed = _seed() + 5
    env = CoreEnv(dut, seed=seed, latency=(0, 3), pause=0.2)
    await env.reset()
    cfg = dut_config()
    words = assemble(gemm_program(P=cfg["rows"], C=cfg["cols"], KT=2, MT=2, N=16,
                                  w_ext=0x1000, x_ext=0x3000, o_ext=0x6000))
    host = env.host()
    for i, (base, limit) in enumerate([(0, MEM - 1)]):
        await host.set_window(i, base, limit)
    from cocotb_tests.common.core_env import split_words
    await host.load_program_words(split_words(words))
    await host.start(0)
    await env.cycles(300 + seed % 200)
    st = await host.status()
    assert st["busy"], "program finished before the reset: make it longer"
    await env.reset()
    st = await host.status()
    assert not st["busy"] and not st["done"], f"status after reset: {st}"
    await _gemm(dut, env, KT=2, MT=2, N=16, seed=seed)


def illegal_programs(rows, cols, formats):
    """``(what, program text, pc of the offending instruction)``: engine instructions whose
    record the core must refuse with ILLEGAL_INSTRUCTION (sequencer bit ILLEGAL_FIELD)."""
    from sim.dtypes import Format
    other = next(f for f in ("fp16", "int8", "fp8_e4m3", "bf16")
                 if Format[f.upper()] not in formats)
    head = "li r20, 4\nli r21, 0\nnop\n"
    return [
        (f"matmul k={rows + 1} > rows", head + f"matmul r21, r21, r21, r20, k={rows + 1}, "
         f"m=1, fmt=bf16\nhalt\n", 3),
        ("matmul k=0", head + "matmul r21, r21, r21, r20, k=0, m=1, fmt=bf16\nhalt\n", 3),
        (f"matmul m={cols + 1} > cols", head + f"matmul r21, r21, r21, r20, k=1, "
         f"m={cols + 1}, fmt=bf16\nhalt\n", 3),
        ("matmul n=0", head + "matmul r21, r21, r21, r0, k=1, m=1, fmt=bf16\nhalt\n", 3),
        (f"matmul fmt={other} (not a format of this core)", head +
         f"matmul r21, r21, r21, r20, k=1, m=1, fmt={other}\nhalt\n", 3),
        ("tt b_space=psum", head + "tt r21, r21, r21, r20, alu=add, a_space=sbuf, "
         "b_space=psum, in_fmt=fp32, out_fmt=fp32\nhalt\n", 3),
        ("reduce alu=sub", head + "reduce r21, r21, r0, r20, alu=sub, in_fmt=fp32, "
         "out_fmt=fp32\nhalt\n", 3),
        ("ts alu=13", head + "ts r21, r21, r0, r20, alu=13, in_fmt=fp32, out_fmt=fp32\n"
         "halt\n", 3),
        ("copy rnd=3", head + "copy r21, r21, r0, r20, in_fmt=fp32, out_fmt=bf16, rnd=3\n"
         "halt\n", 3),
    ]


@cocotb.test()
async def test_illegal_records_then_correct_run(dut):
    """Invalid TENSOR/VECTOR fields (k, m, n, fmt; TT with b_space=psum, REDUCE with a
    non-reduction alu, alu/rnd out of range) end the program with ILLEGAL_INSTRUCTION at the
    instruction's PC and ERR_INFO = the ILLEGAL_FIELD bit, as the reference simulator
    (check=True) traps; the DMA issued before still completes; then a correct GEMM. The
    MATMUL cases again through a run-time routine that writes the checked slots last (its EMIT
    holds while their terms register), each followed by a legal record that must run."""
    from sim import isa
    from sim.errors import ErrorCode
    from sim.host import IllegalInstruction
    seed = _seed() + 6
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    cfg = dut_config()
    host = env.host()
    # Run-time opcode 0xF8: MATMUL's routine with the slots the check reads written last (the
    # shipped one writes them first), so its EMIT holds a cycle while their terms register
    # (sim.isa.CHECKED_SLOTS) and must not be trapped on the terms of the previous record.
    from rtl.core.top import UCODE_MAP_BASE
    from sim import microcode
    body = microcode._matmul_body()
    items = body[5:] + body[2:5] + body[:2] + [
        microcode.u(special=isa.USpecial.EMIT, eng=isa.Engine.TENSOR, **microcode.END)]
    base = microcode.used_words()
    words_uc, _ = microcode.link(items, base=base, labels=microcode.LABELS)
    await host.load_microcode([h for w in words_uc for h in (w & 0xFFFFFFFF, w >> 32)],
                              2 * base)
    await host.load_microcode([microcode.map_entry(base)], UCODE_MAP_BASE + 0xF8)
    late = []
    for what, text, pc in illegal_programs(cfg["rows"], cfg["cols"], _formats(cfg)):
        if "matmul" in what:
            w = assemble(text)
            w[pc] = (w[pc] & ~0xFF) | 0xF8
            late.append((what + " (checked slots written last)", w, pc))
    legal = assemble("li r20, 4\nli r21, 0\nnop\nmatmul r21, r21, r21, r20, k=1, m=1, "
                     "fmt=bf16\nhalt\n")
    legal[3] = (legal[3] & ~0xFF) | 0xF8
    cases = [(what, assemble(text), pc) for what, text, pc in
             illegal_programs(cfg["rows"], cfg["cols"], _formats(cfg))]
    # ... each right after an illegal record, then a legal one, whose terms are those of the
    # illegal record until they register: it must run.
    for case in late:
        cases += [case, ("legal matmul, checked slots written last", legal, None)]
    for what, words, pc in cases:
        if pc is None:
            await run_program(env, host, words, timeout=20_000)
            st = await host.status()
            assert not st["busy"] and not st["error"], f"{what}: {st}"
            continue
        ref_words = [(x & ~0xFF) | int(isa.Opcode.MATMUL) if (x & 0xFF) == 0xF8 else x
                     for x in words]
        ref = core_config(cfg).refsim(ref_words).run()
        assert ref.error == 1 << isa.ErrorBit.ILLEGAL_FIELD and ref.err_pc == pc, \
            f"{what}: refsim error {ref.error:#x} at {ref.err_pc}"
        try:
            await run_program(env, host, words, timeout=20_000)
        except IllegalInstruction as exc:
            assert (exc.code, exc.address, exc.info) == (
                ErrorCode.ILLEGAL_INSTRUCTION, pc, 1 << isa.ErrorBit.ILLEGAL_FIELD), \
                f"{what}: {exc!r}"
            dut._log.info("%s: %s (refsim: %s)", what, exc, ref.illegal)
        else:
            raise AssertionError(f"{what}: not rejected")
        st = await host.status()
        assert not st["busy"], f"{what}: core still busy after the error"
        await host.clear()
    await _gemm(dut, env, KT=1, MT=1, N=8, seed=seed)


def _to_ext(ext, addr, arr):
    ext[addr:addr + arr.nbytes] = np.ascontiguousarray(arr).tobytes()


@cocotb.test()
async def test_fused_matmul_act_runtime(dut):
    """The run-time microcode example ``fused_matmul_act`` (``sim/microcode.py``, docs/isa.md
    section 7) on the core right after reset, PSUM all zeros: relu(W.T @ X) bit-exact against
    the reference simulator, whose race check sees its MATMUL and ACT ordered. Without the
    routine's BARRIER the ACT would read the PSUM tile before the MATMUL writes it (zeros
    after reset)."""
    from rtl.core.top import UCODE_MAP_BASE
    from sim import isa, microcode
    from cocotb_tests.common.core_env import _li, _load_table
    seed = _seed() + 8
    env = CoreEnv(dut, seed=seed, latency=(0, 2), pause=0.1)
    await env.reset()
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    N = 8
    host = env.host()
    uc, base = microcode.fused_matmul_act()
    await host.load_microcode([h for w in uc for h in (w & 0xFFFFFFFF, w >> 32)], 2 * base)
    await host.load_microcode([microcode.map_entry(base)], UCODE_MAP_BASE +
                              microcode.FUSED_OPCODE)
    rng = np.random.default_rng(seed)
    w = _bf16_bits(rng.standard_normal((P, C)))
    x = _bf16_bits(rng.standard_normal((P, N)))
    tw = np.array(table_words("relu", 0, cfg["lut_entries"]), dtype=np.uint32)
    T_EXT, W_EXT, X_EXT, Y_EXT = 0x8000, 0x1000, 0x2000, 0x3000
    t_sb, w_sb, x_sb, y_sb = cfg["sbuf_depth"] - len(tw), 0, C, C + N
    L = []
    _load_table(L, ext=T_EXT, sb=t_sb, nwords=len(tw), sem=4)
    L += [_li(2, 2), _li(3, 0),
          _li(1, C | 1 << 16), _li(4, C * 2), _li(10, W_EXT), _li(11, w_sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, sem_en=1",
          _li(1, N | 1 << 16), _li(4, N * 2), _li(10, X_EXT), _li(11, x_sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, sem_en=1",
          "waiti 0, 2", _li(5, 0), _li(6, y_sb), _li(7, w_sb), _li(8, x_sb), _li(9, N)]
    words = assemble("\n".join(L))
    imm = isa.pack(isa.MATMUL_IMM, k=P, m=C, fmt=1, sem=1, sem_en=1)    # func 0: bank 0
    words.append(isa.encode(microcode.FUSED_OPCODE, rd=5, rs1=7, rs2=8, rs3=9, imm=imm))
    words += assemble("\n".join([
        "barrier",               # the ACT record has no semaphore
        _li(1, N | 1 << 16), _li(2, 4), _li(4, N * 4), _li(10, Y_EXT), _li(11, y_sb),
        f"dma_st r1, r10, r11, part_start=0, part_count={C}, fmt=fp32, sem=3, sem_en=1",
        "waiti 3, 1", "halt"]))
    ext = bytearray(MEM)
    for addr, arr in ((T_EXT, tw), (W_EXT, w), (X_EXT, x)):
        _to_ext(ext, addr, arr)
    ref = _refsim(cfg, words, ext,
                  extensions={microcode.FUSED_OPCODE: microcode.fused_matmul_act_ref})
    env.write_mem(0, bytes(ext))
    await run_program(env, host, words)
    got = np.frombuffer(env.read_mem(Y_EXT, C * N * 4), dtype=np.uint32).reshape(C, N)
    exp = ref.ext[Y_EXT:Y_EXT + C * N * 4].view(np.uint32).reshape(C, N)
    relu = np.maximum(_bf16_value(w).T @ _bf16_value(x), 0)
    assert np.count_nonzero(relu) > 0
    assert np.array_equal(got, exp), (f"seed {seed}: {np.count_nonzero(got != exp)} of "
                                      f"{got.size} outputs differ from refsim; got "
                                      f"{got.view(np.float32).tolist()}")
    assert np.allclose(got.view(np.float32), relu, rtol=2e-2, atol=1e-2)
    await host.load_microcode([0], UCODE_MAP_BASE + microcode.FUSED_OPCODE)
    dut._log.info("fused_matmul_act after reset: %d outputs bit-exact vs refsim, no race",
                  got.size)


def sr_program(*, P, n, x_ext, y_ext, seed=None):
    """FP32 -> BF16 with stochastic rounding (``ts ... alu=mul`` by 1.0) of ``n`` words per
    partition at ``x_ext``, stored at ``y_ext``; ``seed``: a ``seed_ld`` first (None: the
    generators as START leaves them)."""
    from cocotb_tests.common.core_env import _li, f32_bits
    L = [] if seed is None else [_li(30, seed), "seed_ld r30"]
    L += [_li(1, n | 1 << 16), _li(2, 4), _li(3, 0), _li(4, n * 4), _li(10, x_ext), _li(11, 0),
          f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=fp32, sem=0, sem_en=1",
          "waiti 0, 1", _li(20, n), _li(21, f32_bits(1.0)), _li(12, n),
          "ts r12, r0, r21, r20, alu=mul, in_fmt=fp32, out_fmt=bf16, rnd=sr, sem=2, sem_en=1",
          "waiti 2, 1", _li(2, 2), _li(4, n * 2), _li(10, y_ext),
          f"dma_st r1, r10, r12, part_start=0, part_count={P}, fmt=bf16, sem=3, sem_en=1",
          "waiti 3, 1", "halt"]
    return "\n".join(L) + "\n"


@cocotb.test()
async def test_sr_state_reset_at_start(dut):
    """Stochastic-rounding state does not leak from one program into the next: START reseeds
    every lane generator from the host's SEED register (docs/memory_map.md). A program with
    ``seed_ld`` and SR work, then one without ``seed_ld``, must equal a fresh reference
    simulator of the second (``host_seed`` = SEED, 0 after reset); the same after the host
    writes SEED."""
    seed = _seed() + 9
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    cfg = dut_config()
    P, n = cfg["rows"], 32
    host = env.host()
    rng = np.random.default_rng(seed)
    # Values halfway-ish between BF16 neighbours, so SR decisions vary with the random bits.
    x = (rng.standard_normal((P, n)) * (1 + 2.0 ** -9)).astype(np.float32)
    X_EXT, Y_EXT = 0x1000, 0x2000
    ext = bytearray(MEM)
    _to_ext(ext, X_EXT, x)
    env.write_mem(0, bytes(ext))
    first = assemble(sr_program(P=P, n=n, x_ext=X_EXT, y_ext=Y_EXT, seed=0x1234567))
    second = assemble(sr_program(P=P, n=n, x_ext=X_EXT, y_ext=Y_EXT))
    for host_seed in (0, 0xC0FFEE):
        if host_seed:
            await host.set_seed(host_seed)
        await run_program(env, host, first)
        await run_program(env, host, second)
        got = np.frombuffer(env.read_mem(Y_EXT, P * n * 2), dtype=np.uint16)
        ref = _refsim(cfg, second, ext, host_seed=host_seed)
        exp = ref.ext[Y_EXT:Y_EXT + P * n * 2].view(np.uint16)
        other = _refsim(cfg, second, ext, host_seed=host_seed + 1)
        assert not np.array_equal(exp, other.ext[Y_EXT:Y_EXT + P * n * 2].view(np.uint16)), \
            "the SR data does not depend on the seed: the test would see no leak"
        bad = int(np.count_nonzero(got != exp))
        assert bad == 0, (f"seed {seed}, SEED {host_seed:#x}: {bad} of {got.size} outputs of "
                          f"the second program differ from a fresh reference simulator")
    dut._log.info("SR after an earlier SR program: bit-exact vs a fresh refsim (SEED 0 and "
                  "0xC0FFEE)")


@cocotb.test()
async def test_counters_per_program(dut):
    """Every performance counter restarts at START (docs/memory_map.md): after a GEMM and
    then a single DMA load, the counters hold the second program's figures alone (DMA bytes,
    retired instructions, no tensor work); CTRL.clear_counters zeroes them all."""
    seed = _seed() + 10
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    cfg = dut_config()
    P, C = cfg["rows"], cfg["cols"]
    host = env.host()
    gemm = assemble(gemm_program(P=P, C=C, KT=1, MT=1, N=8, w_ext=0x1000, x_ext=0x3000,
                                 o_ext=0x6000))
    n = 12
    load = assemble(f"li r1, {n | 1 << 16}\nli r2, 4\nli r3, 0\nli r4, {4 * n}\n"
                    f"li r10, 0x1000\nli r11, 0\ndma_ld r1, r10, r11, part_start=0, "
                    f"part_count={P}, fmt=fp32, sem=0, sem_en=1\nwaiti 0, 1\nhalt\n")
    ext = bytearray(MEM)
    ref = _refsim(cfg, load, ext)
    await run_program(env, host, gemm)
    c1 = await host.counters()
    await run_program(env, host, load)
    c2 = await host.counters()
    dut._log.info("counters after the GEMM: %s; after the load: %s", c1, c2)
    assert c1["dma_rd_bytes"] > 0 and c1["dma_wr_bytes"] > 0 and c1["tensor_busy"] > 0
    assert c2["dma_rd_bytes"] == P * n * 4, c2
    assert c2["dma_wr_bytes"] == 0 and c2["tensor_busy"] == 0 and c2["vector_busy"] == 0, c2
    assert c2["instret"] == ref.retired, (c2["instret"], ref.retired)
    assert 0 < c2["dma_busy"] <= c2["cycles"] < c1["cycles"], (c1, c2)
    await host.clear_counters()
    c3 = await host.counters()
    assert all(v == 0 for v in c3.values()), f"after CTRL.clear_counters: {c3}"


#: The INT8 regression of the INT32 path out of PSUM: accumulations of one INT8 matmul.
INT8_REPEAT = 301


def int32_psum_program(*, P, C, N, repeat, w_ext, x_ext, o_ext, q_ext, scale, bias):
    """``repeat`` accumulating INT8 matmuls of one tile (``W[P, C].T @ X[P, N]``) into PSUM,
    then an INT32 -> INT32 copy of PSUM to SBUF and a requantization (``requant``: INT32 *
    ``scale`` + ``bias`` -> INT8, RNE) of it; both stored (INT32 at ``o_ext``, INT8 at
    ``q_ext``, row-major ``C x N``)."""
    li = lambda r, v: f"li r{r}, {int(v) & 0xFFFFFFFF:#x}"  # noqa: E731
    w_sb, x_sb, o_sb, q_sb = 0, C, C + N, C + 2 * N
    return "\n".join([
        li(2, 1), li(3, 0),
        li(1, C | 1 << 16), li(4, C), li(10, w_ext), li(11, w_sb),
        f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=int8, sem=0, sem_en=1",
        li(1, N | 1 << 16), li(4, N), li(10, x_ext), li(11, x_sb),
        f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=int8, sem=0, sem_en=1",
        "waiti 0, 2",
        li(12, w_sb), li(13, x_sb), li(14, 0), li(20, N),
        f"matmul r14, r12, r13, r20, k={P}, m={C}, fmt=int8, accumulate=0, sem=1, sem_en=1",
        li(21, repeat - 1),
        "loop r21, acc_end",
        f"matmul r14, r12, r13, r20, k={P}, m={C}, fmt=int8, accumulate=1, sem=1, sem_en=1",
        "acc_end: endloop",
        f"waiti 1, {repeat}",
        li(15, o_sb), li(16, q_sb), li(17, scale), li(18, bias),
        "copy r15, r14, r0, r20, a_space=psum, in_fmt=int32, out_fmt=int32, sem=2, sem_en=1",
        "requant r16, r14, r17, r20, a_space=psum, rnd=rne, sem=2, sem_en=1",
        "waiti 2, 2",
        li(1, N | 1 << 16), li(2, 4), li(4, 4 * N), li(10, o_ext),
        f"dma_st r1, r10, r15, part_start=0, part_count={C}, fmt=int32, sem=3, sem_en=1",
        li(2, 1), li(4, N), li(10, q_ext),
        f"dma_st r1, r10, r16, part_start=0, part_count={C}, fmt=int8, sem=3, sem_en=1",
        "waiti 3, 2",
        "halt",
    ]) + "\n"


@cocotb.test()
async def test_int32_psum_exact(dut):
    """INT32 results leave PSUM exactly: 301 accumulated INT8 matmuls (sums near 1.9e7, above
    2**24, where FP32 has no odd integers) copied PSUM -> SBUF as INT32 and stored, equal to
    numpy's int64 product; their requantization to INT8 (scale 0.9 * 2**-17, bias 0.5, RNE,
    saturating at both ends) equal to numpy's float32 arithmetic and np.rint; both equal to RefSim. A
    copy through FP32 (the INT32 -> FP32 -> INT32 conversion) rounds the odd sums to even.
    Runs on a core with INT8 matmuls (skipped otherwise)."""
    from sim.dtypes import Format
    cfg = dut_config()
    if Format.INT8 not in _formats(cfg):
        dut._log.info("the core has no INT8 matmul: skipped")
        return
    seed = _seed() + 11
    env = CoreEnv(dut, seed=seed)
    await env.reset()
    P, C, N = cfg["rows"], cfg["cols"], 8
    rng = np.random.default_rng(seed)
    # |w|, |x| in 120..127: every |sum| in 301 * P * (120**2 .. 127**2), above 2**24 for
    # P = 4 (1.73e7 .. 1.94e7); column 0 of W negative (saturation at -128 below)
    w = rng.integers(120, 128, size=(P, C)) * np.where(np.arange(C) == 0, -1, 1)
    x = rng.integers(120, 128, size=(P, N))
    W_EXT, X_EXT, O_EXT, Q_EXT = 0x1000, 0x2000, 0x3000, 0x4000
    scale, bias = 0.9 * 2.0 ** -17, 0.5             # 119 .. 134: some saturate at 127
    text = int32_psum_program(P=P, C=C, N=N, repeat=INT8_REPEAT, w_ext=W_EXT, x_ext=X_EXT,
                              o_ext=O_EXT, q_ext=Q_EXT, scale=_f32_bits(scale),
                              bias=_f32_bits(bias))
    words = assemble(text)
    ext = bytearray(MEM)
    ext[W_EXT:W_EXT + P * C] = w.astype(np.int8).tobytes()
    ext[X_EXT:X_EXT + P * N] = x.astype(np.int8).tobytes()
    ref = _refsim(cfg, words, ext)
    env.write_mem(0, bytes(ext))
    host = env.host()
    await run_program(env, host, words, timeout=2_000_000)
    exact = INT8_REPEAT * (w.T.astype(np.int64) @ x.astype(np.int64))        # (C, N)
    got = np.frombuffer(env.read_mem(O_EXT, C * N * 4), dtype=np.int32).reshape(C, N)
    exp_ref = ref.ext[O_EXT:O_EXT + C * N * 4].view(np.int32).reshape(C, N)
    odd = int(np.sum((np.abs(exact) > 1 << 24) & (exact % 2 == 1)))
    bad = np.argwhere(got != exact)
    assert len(bad) == 0, (f"seed {seed}: {len(bad)} of {C * N} INT32 outputs differ from "
                           f"numpy, first {bad[0].tolist()}: got {got[tuple(bad[0])]} exp "
                           f"{exact[tuple(bad[0])]}")
    assert np.array_equal(exp_ref, exact), f"seed {seed}: RefSim differs from numpy"
    xf = exact.astype(np.float32) * np.float32(scale) + np.float32(bias)
    q_exp = np.clip(np.rint(xf.astype(np.float64)), -128, 127).astype(np.int8)
    q_got = np.frombuffer(env.read_mem(Q_EXT, C * N), dtype=np.int8).reshape(C, N)
    q_ref = ref.ext[Q_EXT:Q_EXT + C * N].view(np.int8).reshape(C, N)
    assert np.array_equal(q_got, q_exp) and np.array_equal(q_ref, q_exp), (
        f"seed {seed}: requantized got {q_got.tolist()} ref {q_ref.tolist()} "
        f"numpy {q_exp.tolist()}")
    dut._log.info("%d INT8 matmuls: %d INT32 sums (%d odd above 2**24, max |%d|) and their "
                  "INT8 requantization exact", INT8_REPEAT, C * N, odd, np.abs(exact).max())


def _f32_bits(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


@cocotb.test()
async def test_lut_window_every_entry(dut):
    """The host's LUT window reaches every entry of the core's tables (LUT_PAGE supplies the
    cfg index bits above the window's own): c0..c2 of the last entry of both banks, of the
    entries on each side of every page boundary, written and read back through
    ``Host.write_lut`` / ``read_lut_cfg``, none aliasing another; DEPTH reads lut_entries;
    the engine's error flag stays clear."""
    from sim.vector import Status, coef_addr, status_addr
    cfg = dut_config()
    depth = cfg["lut_entries"]
    env = CoreEnv(dut, seed=_seed() + 13)
    await env.reset()
    host = env.host()
    rng = np.random.default_rng(_seed())
    entries = sorted({depth - 1, depth - 2, 0} | {e for p in range(64, depth, 64)
                                                  for e in (p - 1, p)})
    addrs = [coef_addr(bank, e, j) for bank in (0, 1) for e in entries for j in range(3)]
    words = [int(w) for w in rng.integers(0, 1 << 32, size=len(addrs), dtype=np.uint64)]
    await host.write_lut(zip(addrs, words))
    got = await host.read_lut_cfg(addrs)
    bad = [(hex(a), hex(g), hex(w)) for a, g, w in zip(addrs, got, words) if g != w]
    assert not bad, f"{len(bad)} of {len(addrs)} LUT words differ (addr, got, written): {bad[:6]}"
    assert await host.read_lut_cfg([status_addr(Status.DEPTH), status_addr(Status.ERROR)]) \
        == [depth, 0]
    assert await host.read("LUT_PAGE") == 0
    dut._log.info("LUT window: %d words of entries %s (of %d) in both banks read back",
                  len(addrs), entries[-3:], depth)


@cocotb.test()
async def test_table_paired(dut):
    """A random table of LUT writes (distinct coefficient words of both banks, random data, in
    random order) loaded by an unpaired TABLE (both words in partition 0) and by a paired one
    (``table_pair``: addresses in partition 0, data in partition 1, loaded across partitions
    by one DMA record), the LUT cleared in between: both leave the LUT as the reference
    simulator does, word for word, under random AXI latency and back-pressure. On SBUF words
    already in place (no DMA), the paired TABLE takes ``n`` cycles less than the unpaired one,
    as the cycle model's ``sim.cycles.table_cycles`` says."""
    from sim.vector import coef_addr
    seed = _seed() + 14
    cfg = dut_config()
    depth = cfg["lut_entries"]
    env = CoreEnv(dut, seed=seed, latency=(0, 2), pause=0.1)
    await env.reset()
    host = env.host()
    rng = np.random.default_rng(seed)
    n = int(rng.integers(24, 48))
    every = [coef_addr(b, e, j) for b in (0, 1) for e in range(depth) for j in range(3)]
    addrs = [int(a) for a in rng.choice(every, size=n, replace=False)]
    data = [int(d) for d in rng.integers(0, 1 << 32, size=n, dtype=np.uint64)]
    tw = np.array([w for a, d in zip(addrs, data) for w in (a, d)], dtype=np.uint32)
    T_EXT, u_sb, p_sb = 0x1000, 0x100, 0x200
    ext = bytearray(MEM)
    _to_ext(ext, T_EXT, tw)
    env.write_mem(0, bytes(ext))
    from cocotb_tests.common.core_env import _li
    # Unpaired: 2n words into partition 0. Paired: n columns of partitions 0 and 1, the pair's
    # words 4 bytes apart (across partitions), pairs 8 bytes apart.
    loads = [_li(1, 2 * n | 1 << 16), _li(2, 4), _li(3, 0), _li(4, 0), _li(10, T_EXT),
             _li(11, u_sb),
             "dma_ld r1, r10, r11, part_start=0, part_count=1, fmt=int32, sem=0, sem_en=1",
             _li(1, n | 1 << 16), _li(2, 8), _li(4, 4), _li(11, p_sb),
             "dma_ld r1, r10, r11, part_start=0, part_count=2, fmt=int32, sem=0, sem_en=1",
             "waiti 0, 2"]
    programs = {
        "unpaired": [_li(30, u_sb), _li(31, n), "table_ld r30, r31, sem=1, sem_en=1"],
        "paired": [_li(30, p_sb), _li(31, n), "table_pair r30, r31, sem=1, sem_en=1"],
    }
    got, cycles = {}, {}
    for name, body in programs.items():
        await host.write_lut([(a, 0) for a in addrs])
        words = assemble("\n".join(loads + body + ["waiti 1, 1", "halt"]))
        ref = _refsim(cfg, words, ext)
        want = [ref.vec.cfg_read(a) for a in addrs]
        assert want == data, f"seed {seed}: the reference's {name} TABLE"
        await run_program(env, host, words)
        got[name] = await host.read_lut_cfg(addrs)
        bad = [(hex(a), hex(g), hex(w)) for a, g, w in zip(addrs, got[name], want) if g != w]
        assert not bad, f"seed {seed}: {name} TABLE, {len(bad)} of {n} LUT words differ " \
                        f"(addr, got, want): {bad[:6]}"
        # The TABLE alone, its words in place: the same program without the loads.
        await host.write_lut([(a, 0) for a in addrs])
        await run_program(env, host, assemble("\n".join(body + ["waiti 1, 1", "halt"])))
        cycles[name] = await host.read("PERF_CYCLES_LO")
        assert await host.read_lut_cfg(addrs) == data, f"seed {seed}: {name} TABLE again"
    assert got["paired"] == got["unpaired"] == data
    # The cycle model's TABLE (``sim.cycles.table_cycles``): the same program cycles on both
    # layouts beyond the model's, so the TABLE records cost what it says.
    from sim.cycles import EngineCost, MicroSim
    model = {name: MicroSim(assemble("\n".join(body + ["waiti 1, 1", "halt"])),
                            cost=EngineCost()).run().cycle for name, body in programs.items()}
    assert model["unpaired"] - model["paired"] == n
    assert cycles["unpaired"] - model["unpaired"] == cycles["paired"] - model["paired"], \
        (seed, n, cycles, model)
    dut._log.info("TABLE of %d pairs: unpaired and paired LUT contents equal the reference; "
                  "%d vs %d cycles (TABLE alone)", n, cycles["unpaired"], cycles["paired"])


# ------------------------------------------------------------------------------------------
# pytest wrapper
# ------------------------------------------------------------------------------------------
CORE_CONFIG = {"rows": 4, "cols": 4, "sbuf_depth": 1024, "psum_depth": 64,
               "formats": ["bf16"], "lut_entries": 64}
#: The FPGA's core2 shape with its deeper tensor PEs (``tensor_add_stages=3``,
#: ``tensor_mul_stages=4``, which change the array's timing, not its results) and, as on an
#: FPGA, its engines in the ``engine`` domain reset by the soft-reset flip-flop alone
#: (``engine_domain``; the errors, aborts and reset of the tests exercise it): the same
#: programs, bit-exact against RefSim.
CORE_FPGA_CONFIG = {"rows": 2, "cols": 2, "sbuf_depth": 1024, "psum_depth": 64,
                    "formats": ["bf16"], "lut_entries": 64, "tensor_add_stages": 3,
                    "tensor_mul_stages": 4, "engine_domain": True}


#: CORE_CONFIG with INT8 matmuls and 1024-entry LUTs (the largest), for the tests that need
#: them (``WIDE_TESTS``: INT32 out of PSUM, every LUT entry through the host window).
CORE_WIDE_CONFIG = dict(CORE_CONFIG, formats=["bf16", "int8"], lut_entries=1024)
WIDE_TESTS = ["test_int32_psum_exact", "test_lut_window_every_entry"]

#: CORE_FPGA_CONFIG with fused column accumulation (``tensor_accumulate="fused"``, as core8c
#: builds it): a sum whose bits tell the accumulations apart, a tiled GEMM (also within its
#: float64 bound) and the MLP, bit-exact against RefSim with the same accumulation
#: (``FUSED_TESTS``).
CORE_FUSED_CONFIG = dict(CORE_FPGA_CONFIG, tensor_accumulate="fused")
FUSED_TESTS = ["test_gemm_accumulation_mode", "test_gemm_tiled", "test_mlp_gelu_bf16_sr"]


def core_factory(cfg):
    """A callable building the core of a test configuration dict (``core_config``'s
    CoreConfig plus ``engine_domain``) through ``NeuronCore.from_config``."""
    def make():
        from rtl.core.top import NeuronCore
        return NeuronCore.from_config(core_config(cfg), engine_domain=cfg.get("engine_domain"))
    return make


try:
    import pytest
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    # A core's Verilator build is most of its run, so Verilator is in the long set
    # (pytest -m long); the default run is the 2x2 FPGA core on Icarus. The 4x4 runs the same
    # programs on Icarus in the long set (the default run runs the 4x4 core on Verilator in
    # tests/test_kernels_rtl.py, the kernel library through the fast backend).
    @pytest.mark.parametrize("name, config, simulator", [
        pytest.param(n, c, s, id=f"{n}-{s}", marks=(pytest.mark.long,)
                     if s == "verilator" or n == "core4x4" else ())
        for n, c in (("core4x4", CORE_CONFIG), ("core2x2s3", CORE_FPGA_CONFIG))
        for s in ("icarus", "verilator")])
    def test_core(name, config, simulator):
        # A fresh seed per run (logged by cocotb; COCOTB_RANDOM_SEED reproduces one).
        seed = os.environ.get("COCOTB_RANDOM_SEED")
        run_cocotb(core_factory(config), name=name, config=config,
                   test_module="cocotb_tests.test_core", simulator=simulator,
                   seed=None if seed is None else int(seed))

    @pytest.mark.parametrize("simulator", [
        "icarus", pytest.param("verilator", marks=pytest.mark.long)])
    def test_core_wide(simulator):
        """The 4x4 core with INT8 matmuls and 1024-entry LUTs (``WIDE_TESTS``)."""
        seed = os.environ.get("COCOTB_RANDOM_SEED")
        run_cocotb(core_factory(CORE_WIDE_CONFIG), name="core4x4w", config=CORE_WIDE_CONFIG,
                   test_module="cocotb_tests.test_core", simulator=simulator,
                   testcase=WIDE_TESTS, seed=None if seed is None else int(seed))
    @pytest.mark.parametrize("simulator", [
        "icarus", pytest.param("verilator", marks=pytest.mark.long)])
    def test_core_fused(simulator):
        """The 2x2 core with fused column accumulation (``FUSED_TESTS``)."""
        seed = os.environ.get("COCOTB_RANDOM_SEED")
        run_cocotb(core_factory(CORE_FUSED_CONFIG), name="core2x2fused",
                   config=CORE_FUSED_CONFIG, test_module="cocotb_tests.test_core",
                   simulator=simulator, testcase=FUSED_TESTS,
                   seed=None if seed is None else int(seed))

    @pytest.mark.parametrize("simulator", [
        "icarus", pytest.param("verilator", marks=pytest.mark.long)])
    def test_core_table(simulator):
        """The 2x2 FPGA core's TABLE layouts alone (``test_table_paired``)."""
        seed = os.environ.get("COCOTB_RANDOM_SEED")
        run_cocotb(core_factory(CORE_FPGA_CONFIG), name="core2x2s3", config=CORE_FPGA_CONFIG,
                   test_module="cocotb_tests.test_core", simulator=simulator,
                   testcase=["test_table_paired"], seed=None if seed is None else int(seed))

except ImportError:     # imported by cocotb without pytest
    pass
