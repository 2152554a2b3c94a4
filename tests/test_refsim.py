"""The reference simulator: control flow, DMA access patterns, matmul and vector records, checked
against numpy / ml_dtypes references written here (not against the simulator's own helpers)."""

import ml_dtypes
import numpy as np
import pytest

from cocotb_tests.test_sequencer_progs import DIRECTED, random_program
from sim.asm import assemble
from sim.isa import Engine, ErrorBit
from sim.refsim import RefSim


def run(src, **kw):
    return RefSim(assemble(src), **kw).run()


def test_directed_programs_independent_expectations():
    s = run(DIRECTED["loops"], execute=False)
    assert s.regs[21] == sum(1000 + 10 * i + j for i in range(3) for j in range(4))
    assert s.regs[5] == 1000 and s.regs[24] == 16 and s.regs[30] == 0 and s.error == 0
    s = run(DIRECTED["branches"], execute=False)
    assert (s.regs[10], s.regs[11], s.regs[12], s.regs[13]) == (103, 0, 7, 9)
    s = run(DIRECTED["scalar"], execute=False)
    a, b = 0x12345678, (-5) & 0xFFFFFFFF
    assert s.regs[3] == (a + b) & 0xFFFFFFFF and s.regs[9] == (a << 3) & 0xFFFFFFFF
    assert s.regs[11] == 0xFFFFFFFF and s.regs[12] == 1 and s.regs[13] == 0
    assert s.regs[0] == 0


@pytest.mark.parametrize("src, bit, pc", [
    (".word 0xF5", ErrorBit.ILLEGAL_OPCODE, 0),
    ("nop\nret", ErrorBit.CALL_UNDERFLOW, 1),
    ("endloop", ErrorBit.LOOP_UNDERFLOW, 0),
    ("waiti 0, 1", ErrorBit.DEADLOCK, 0),
    ("jmp 5000", ErrorBit.PC_RANGE, 5000),
    ("f: call f", ErrorBit.CALL_OVERFLOW, 0),
])
def test_traps(src, bit, pc):
    s = run(src, execute=False)
    assert s.error == 1 << bit and s.err_pc == pc and s.done


def _ext_with(values, fmt_bytes, base, size=1 << 16):
    ext = np.zeros(size, dtype=np.uint8)
    raw = np.asarray(values, dtype=f"<u{fmt_bytes}").view(np.uint8)
    ext[base:base + raw.size] = raw
    return ext


def test_dma_load_store_strided():
    rng = np.random.default_rng(1)
    # A (4 partitions, 3 rows, 5 cols) view of a BF16 tensor with element stride 2 and row
    # pitch 64 bytes, partition pitch 1024 bytes.
    src = rng.integers(0, 1 << 16, size=4096, dtype=np.uint16)
    base = 0x200
    prog = """
        li r1, 0x30005      ; n0 = 5, n1 = 3
        li r2, 4            ; stride0: every other BF16 element
        li r3, 64
        li r4, 1024
        li r10, 0x200
        li r11, 7
        dma_ld r1, r10, r11, part_start=2, part_count=4, fmt=bf16
        li r12, 0x8000      ; store back, contiguous rows
        li r2, 2
        li r3, 10
        li r4, 30
        dma_st r1, r12, r11, part_start=2, part_count=4, fmt=bf16
        halt
    """
    s = RefSim(assemble(prog), partitions=8)
    s.ext[:] = _ext_with(src, 2, 0)
    s.run()
    ext16 = src
    for p in range(4):
        for i in range(3):
            for j in range(5):
                e = (base + p * 1024 + i * 64 + j * 4) // 2
                assert s.sbuf[2 + p, 7 + i * 5 + j] == ext16[e]
    out = s.ext[0x8000:0x8000 + 4 * 30].view("<u2")
    expect = np.array([[ext16[(base + p * 1024 + i * 64 + j * 4) // 2] for i in range(3)
                        for j in range(5)] for p in range(4)])
    assert np.array_equal(out.reshape(4, 15), expect)
    assert s.sbuf[0].sum() == 0 and s.sbuf[6:].sum() == 0   # untouched partitions


def test_matmul_against_numpy():
    """BF16 small integers: every product and sum is exact, so float64 numpy is the reference."""
    rng = np.random.default_rng(2)
    K, M, N, P = 8, 6, 10, 8
    st = rng.integers(-8, 8, size=(K, M)).astype(ml_dtypes.bfloat16)
    mv = rng.integers(-8, 8, size=(K, N)).astype(ml_dtypes.bfloat16)
    prog = f"""
        li r1, 0x10
        li r2, 0x40
        li r3, 0x5
        li r4, {N}
        matmul r3, r1, r2, r4, k={K}, m={M}, fmt=bf16
        matmul r3, r1, r2, r4, k={K}, m={M}, fmt=bf16, accumulate=1
        halt
    """
    s = RefSim(assemble(prog), partitions=P, cols=P)
    s.sbuf[:K, 0x10:0x10 + M] = st.view(np.uint16)
    s.sbuf[:K, 0x40:0x40 + N] = mv.view(np.uint16)
    s.run()
    want = 2 * (st.astype(np.float64).T @ mv.astype(np.float64))
    got = s.psum[:M, 5:5 + N].view(np.float32)
    assert np.array_equal(got, want.astype(np.float32))
    assert not s.skipped


def test_vector_copy_cast_and_tensor_ops():
    """COPY FP32 -> BF16 (RNE) against ml_dtypes, TT add and REDUCE max against numpy."""
    rng = np.random.default_rng(3)
    P, n = 8, 12
    x = rng.standard_normal((P, n)).astype(np.float32)
    y = rng.standard_normal((P, n)).astype(np.float32)
    prog = f"""
        li r1, 0           ; x
        li r2, 100         ; y
        li r3, 200         ; dst
        li r4, {n}
        li r5, 300
        li r6, 400
        copy r3, r1, r0, r4, in_fmt=fp32, out_fmt=bf16, rnd=rne
        tt   r5, r1, r2, r4, alu=add, in_fmt=fp32, out_fmt=fp32
        reduce r6, r1, r0, r4, alu=max, in_fmt=fp32, out_fmt=fp32
        halt
    """
    s = RefSim(assemble(prog), partitions=P, cols=P, sbuf_depth=1024)
    s.sbuf[:, 0:n] = x.view(np.uint32)
    s.sbuf[:, 100:100 + n] = y.view(np.uint32)
    s.run()
    assert not s.skipped
    bf = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(s.sbuf[:, 200:200 + n], bf.astype(np.uint32))
    assert np.array_equal(s.sbuf[:, 300:300 + n].view(np.float32), x + y)
    assert np.array_equal(s.sbuf[:, 400].view(np.float32), x.max(axis=1))


def test_semaphores_sequential_semantics():
    s = run("""
        li r1, 0x10001
        dma_ld r1, r0, r0, sem=3, sem_en=1
        dma_ld r1, r0, r0, sem=3, sem_en=1
        dma_ld r1, r0, r0, sem=3
        waiti 3, 2
        seminc 3
        semrd r5, 3
        semset 3, 9
        semrd r6, 3
        halt
    """)
    assert (s.regs[5], s.regs[6], s.sems[3]) == (3, 9, 9) and s.error == 0
    assert len(s.trace[Engine.DMA]) == 3


def test_random_programs_terminate():
    errors = 0
    for seed in range(100):
        s = RefSim(assemble(random_program(seed)), execute=False).run(max_steps=100_000)
        assert s.done
        errors += bool(s.error)
    assert errors < 50


def test_check_traps_illegal_records_at_the_instruction():
    """check=True: every invalid TENSOR/VECTOR record of cocotb_tests/test_core.py's list traps
    ILLEGAL_FIELD at its instruction, nothing is issued; check=False issues and skips it."""
    from cocotb_tests.test_core import illegal_programs
    from sim.dtypes import Format
    progs = illegal_programs(4, 4, [Format.BF16])
    assert len(progs) == 9
    for what, text, pc in progs:
        s = RefSim(assemble(text), partitions=4, cols=4, check=True,
                   formats=[Format.BF16]).run()
        assert s.error == 1 << ErrorBit.ILLEGAL_FIELD and s.err_pc == pc, what
        assert s.illegal and not s.trace[Engine.TENSOR] and not s.trace[Engine.VECTOR], what
        s = RefSim(assemble(text), partitions=4, cols=4).run()
        assert s.error == 0 and len(s.order) == 1, what


def test_check_accepts_the_limits():
    """The largest legal fields pass: k = rows, m = cols, TT with b from SBUF, REDUCE MIN,
    alu GE, rnd SR; and a format the core has."""
    from sim.dtypes import Format
    s = RefSim(assemble("""
        li r20, 2
        matmul r0, r0, r0, r20, k=4, m=2, fmt=fp16
        tt r0, r0, r0, r20, alu=ge, a_space=psum, b_space=sbuf, in_fmt=fp32, out_fmt=fp32
        reduce r0, r0, r0, r20, alu=min, in_fmt=fp32, out_fmt=fp32, rnd=sr
        halt
    """), partitions=4, cols=2, check=True, formats=[Format.FP16]).run()
    assert s.error == 0 and len(s.order) == 3 and not s.skipped


def test_refsim_defaults_match_the_core():
    """RefSim's defaults are the default core's (``CoreConfig()``, whose defaults are
    NeuronCore's): geometry, program memory, formats and the vector-engine parameters (a
    different ``n_rand`` made about 1 in 256 stochastic-rounding decisions differ)."""
    import inspect
    from rtl.core.top import NeuronCore
    from sim.config import CoreConfig
    core = {k: p.default for k, p in inspect.signature(NeuronCore).parameters.items()}
    s = RefSim([])
    got = dict(rows=s.P, cols=s.cols, sbuf_depth=s.sbuf_depth, psum_depth=s.psum_depth,
               pmem_depth=s.pmem_depth, lut_entries=s.lut_entries, n_rand=s.n_rand)
    for name, value in got.items():
        want = core[name] if core[name] is not None else core["rows"]
        assert value == want == getattr(CoreConfig(), name), name
    assert set(s.formats) == {int(f) for f in core["formats"]}
    assert not s.check and not s.race_checker     # the bare sequencer's semantics
    c = RefSim([], config=CoreConfig.preset("core8"))
    assert (c.P, c.sbuf_depth, c.psum_depth, c.check) == (8, 1024, 256, True)
    assert c.race_checker is not None


def test_refsim_sr_uses_the_configured_random_bits():
    """RefSim hands ``n_rand`` and ``lut_entries`` to the vector model, and the number of random
    bits changes SR results (so a mismatch with the core would be visible)."""
    from sim.dtypes import Format, RoundMode
    from sim.rounding import RoundingUnitModel
    s = RefSim(assemble("li r1, 7\nseed_ld r1\nhalt"), partitions=4, cols=4,
               n_rand=8, lut_entries=64).run()
    assert (s.vec.ru.n_rand, s.vec.depth) == (8, 64)
    m8, m16 = RoundingUnitModel(4, 8, seed=5), RoundingUnitModel(4, 16, seed=5)
    x = np.full(4, 0x3c9d4c5c, dtype=np.uint32)
    diff = sum(int(np.any(m8.convert(x, Format.BF16, RoundMode.SR)
                          != m16.convert(x, Format.BF16, RoundMode.SR))) for _ in range(2048))
    assert diff > 0
