"""The race checker (``sim/races.py``): small programs that race and that do not, for every
pair of engines and both orders (read after write, write after read, write after write), the
semaphore rules (counting to N, one short, increments of several engines, SEMSET with
increments in flight), the report, every hand-written program of the tests and benchmarks, and
the checker's ordering claims against the cycle model's record timeline."""

import random

import pytest

from cocotb_tests.common.core_env import (attention_program, gemm_program, mlp_program,
                                          table_words)
from cocotb_tests.test_sequencer_progs import DIRECTED, random_program
from sim import isa, microcode
from sim.asm import assemble
from sim.config import CoreConfig
from sim.cycles import MicroSim
from sim.isa import Engine, Space
from sim.races import RaceError, check_program
from sim.refsim import RefSim, record_fields

CFG = CoreConfig(rows=4, sbuf_depth=1024, psum_depth=64)

#: Instructions of each engine at SBUF words 0x10..0x13 (all partitions) or PSUM words 0..3.
HEAD = ("li r1, 0x10004\nli r2, 4\nli r3, 0\nli r4, 16\nli r5, 0x10\nli r6, 0\nli r7, 4\n"
        "li r12, 0x80\n")
OPS = {
    "dma_ld": "dma_ld r1, r3, r5, part_start=0, part_count=4, fmt=fp32, sem=0, sem_en=1",
    "dma_st": "dma_st r1, r3, r5, part_start=0, part_count=4, fmt=fp32, sem=0, sem_en=1",
    "matmul_rd": "matmul r6, r5, r5, r7, k=4, m=4, fmt=bf16, sem=1, sem_en=1",
    "matmul_acc": "matmul r6, r5, r5, r7, k=4, m=4, fmt=bf16, accumulate=1, sem=1, sem_en=1",
    "ts_wr": "ts r5, r6, r0, r7, alu=add, in_fmt=fp32, out_fmt=fp32, sem=2, sem_en=1",
    "ts_rd": "ts r6, r5, r0, r7, alu=add, in_fmt=fp32, out_fmt=fp32, sem=2, sem_en=1",
    "copy_psum": "copy r12, r6, r0, r7, a_space=psum, in_fmt=fp32, out_fmt=fp32, sem=2, "
                 "sem_en=1",
    "table": "table_ld r5, r2, sem=2, sem_en=1",
}
SEM = {"dma_ld": 0, "dma_st": 0, "matmul_rd": 1, "matmul_acc": 1, "ts_wr": 2, "ts_rd": 2,
       "copy_psum": 2, "table": 2}


def races(text, **kw):
    return check_program(CFG, assemble(HEAD + text + "\nhalt\n"), **kw)


# (first, second, space of the race): every engine pair, both orders.
RACY = [
    ("dma_ld", "matmul_rd", Space.SBUF),      # DMA writes what the tensor engine reads
    ("matmul_rd", "dma_ld", Space.SBUF),      # ... overwrites what it still reads
    ("dma_ld", "ts_rd", Space.SBUF),
    ("ts_rd", "dma_ld", Space.SBUF),
    ("ts_wr", "dma_st", Space.SBUF),          # vector writes what the DMA stores
    ("dma_st", "ts_wr", Space.SBUF),
    ("dma_ld", "ts_wr", Space.SBUF),          # write after write
    ("dma_ld", "table", Space.SBUF),
    ("ts_wr", "matmul_rd", Space.SBUF),
    ("matmul_rd", "ts_wr", Space.SBUF),
    ("matmul_rd", "copy_psum", Space.PSUM),   # PSUM: matmul writes, vector reads
    ("copy_psum", "matmul_rd", Space.PSUM),
    ("copy_psum", "matmul_acc", Space.PSUM),
]


@pytest.mark.parametrize("first, second, space", RACY)
def test_unordered_pair_races(first, second, space):
    found = races(f"{OPS[first]}\n{OPS[second]}")
    assert len(found) == 1, found
    r = found[0]
    assert r.first.engine != r.second.engine
    assert r.space == space and (r.first.pc, r.second.pc) == (8, 9)
    assert r.first.text == assemble_text(OPS[first])
    assert r.second.text == assemble_text(OPS[second])


def test_paired_table_reads_partition_one():
    """A paired TABLE reads its ``n`` words of partitions 0 and 1; an unpaired one ``2n``
    words of partition 0: a DMA load into partition 1 only races with the paired one, a load
    into partition 0 beyond ``n`` words only with the unpaired one."""
    p1 = "dma_ld r1, r3, r5, part_start=1, part_count=1, fmt=fp32, sem=0, sem_en=1"
    beyond = "li r13, 0x14\ndma_ld r1, r3, r13, part_start=0, part_count=1, fmt=fp32"
    pair = "table_pair r5, r2, sem=2, sem_en=1"
    assert len(races(f"{p1}\n{pair}")) == 1
    assert races(f"{p1}\n{OPS['table']}") == []
    assert races(f"{beyond}\n{pair}") == []
    assert len(races(f"{beyond}\n{OPS['table']}")) == 1


@pytest.mark.parametrize("first, second, space", RACY)
def test_pair_ordered_by_wait_or_barrier(first, second, space):
    assert not races(f"{OPS[first]}\nwaiti {SEM[first]}, 1\n{OPS[second]}")
    assert not races(f"{OPS[first]}\nbarrier\n{OPS[second]}")
    assert not races(f"li r20, 1\n{OPS[first]}\nwait {SEM[first]}, r20\n{OPS[second]}")
    # One short: a wait on a count the semaphore already had orders nothing.
    assert len(races(f"seminc {SEM[first]}\n{OPS[first]}\nwaiti {SEM[first]}, 1\n"
                     f"{OPS[second]}")) == 1


def assemble_text(line):
    from sim.asm import disassemble_one
    return disassemble_one(assemble(line)[0]).strip()


@pytest.mark.parametrize("text", [
    f"{OPS['dma_ld']}\n{OPS['dma_st']}",               # one engine: ordered by its queue
    f"{OPS['matmul_rd']}\n{OPS['matmul_acc']}",
    f"{OPS['ts_wr']}\n{OPS['ts_rd']}",
    f"{OPS['dma_st']}\n{OPS['matmul_rd']}",            # both read
    f"{OPS['matmul_rd']}\n{OPS['ts_rd']}\n{OPS['table']}",
    # disjoint words, disjoint partitions
    f"{OPS['dma_ld']}\nli r9, 0x20\nmatmul r6, r9, r9, r7, k=4, m=4, fmt=bf16",
    "li r8, 0x40\ndma_ld r1, r3, r8, part_start=1, part_count=3, fmt=fp32\n"
    "table_ld r8, r2",
    # the vector reads PSUM partitions < cols only; a matmul writes all of them
    f"{OPS['copy_psum']}\nli r9, 8\nmatmul r9, r5, r5, r7, k=4, m=4, fmt=bf16",
])
def test_no_race(text):
    assert races(text) == []


def test_counting_semaphore_orders_every_increment_before_the_wait():
    """Counting to N orders every record that incremented the semaphore before the wait;
    N - 1 leaves one (of the other engine) unordered; the DMA's own queue order makes one
    wait for its second load order its first too."""
    loads = "li r8, 0x20\n" + OPS["dma_ld"] + "\n" + OPS["dma_ld"].replace("r5,", "r8,")
    assert not races(loads + "\nwaiti 0, 1\n" + OPS["matmul_rd"])           # the first load
    assert len(races(loads + "\nwaiti 0, 1\nli r9, 0x20\n"
                     "matmul r6, r9, r9, r7, k=4, m=4, fmt=bf16")) == 1   # not the second
    # Two engines incrementing sem 3: one completion could be either, two are both.
    two = (OPS["dma_ld"].replace("sem=0", "sem=3") + "\n" +
           OPS["ts_wr"].replace("sem=2", "sem=3").replace("r5, r6", "r9, r6") + "\n")
    pre = "li r9, 0x30\n"
    assert len(races(pre + two + "waiti 3, 1\n" + OPS["matmul_rd"])) == 1
    assert not races(pre + two + "waiti 3, 2\n" + OPS["matmul_rd"])
    # A SEMINC counted with them: still two records needed for 3.
    assert len(races(pre + "seminc 3\n" + two + "waiti 3, 2\n" + OPS["matmul_rd"])) == 1
    assert not races(pre + "seminc 3\n" + two + "waiti 3, 3\n" + OPS["matmul_rd"])


def test_semset_with_increments_in_flight():
    """A SEMSET does not cancel increments in flight: they may land after it and satisfy a
    later wait, which then proves nothing about them."""
    text = OPS["dma_ld"] + "\nsemset 0, 0\nseminc 0\nwaiti 0, 1\n" + OPS["matmul_rd"]
    assert len(races(text)) == 1
    assert not races(OPS["dma_ld"] + "\nbarrier\nsemset 0, 0\nseminc 0\nwaiti 0, 1\n"
                     + OPS["matmul_rd"])
    # A new increment after the SEMSET, waited for: the old one may have landed instead.
    text = (OPS["dma_ld"] + "\nsemset 0, 0\nli r8, 0x30\n" +
            OPS["ts_wr"].replace("sem=2", "sem=0").replace("r5, r6", "r8, r6") +
            "\nwaiti 0, 1\nmatmul r6, r8, r8, r7, k=4, m=4, fmt=bf16")
    assert len(races(text)) == 1


def test_race_error_names_both_instructions():
    sim = CFG.refsim(assemble(HEAD + OPS["dma_ld"] + "\n" + OPS["matmul_rd"] + "\nhalt\n"),
                     execute=False).run()
    err = sim.races_error()
    assert isinstance(err, RaceError) and err.races == sim.races
    msg = str(err)
    assert "pc 8 DMA" in msg and "pc 9 TENSOR" in msg and "SBUF" in msg
    assert "dma_ld r1, r3, r5" in msg and "matmul r6, r5, r5, r7" in msg
    assert "words 0x10..0x13" in msg and "partitions 0..3" in msg
    ok = CFG.refsim(assemble(HEAD + "halt"), execute=False).run()
    assert ok.races == [] and ok.races_error() is None
    # Off unless asked for (the bare sequencer's reference) or built from a configuration.
    assert RefSim(assemble(HEAD + "halt")).race_checker is None
    assert CFG.refsim([]).race_checker is not None


def _fused_words(extra=""):
    imm = isa.pack(isa.MATMUL_IMM, k=4, m=4, fmt=1, sem=1, sem_en=1)
    return assemble(HEAD + "li r8, 0x40\n") + [
        isa.encode(microcode.FUSED_OPCODE, rd=6, rs1=5, rs2=5, rs3=7, imm=imm)] + \
        assemble("barrier\nhalt")


def test_fused_matmul_act_example_is_ordered():
    """The shipped run-time example issues its ACT after a BARRIER: no race. The same two
    records without it (what the example did) race on the PSUM tile, both named by the
    fused instruction's PC."""
    ext = {microcode.FUSED_OPCODE: microcode.fused_matmul_act_ref}
    assert check_program(CFG, _fused_words(), extensions=ext) == []

    def unordered(sim, f):
        sim.issue(Engine.TENSOR, record_fields(Engine.TENSOR, isa.Opcode.MATMUL, f, sim.r,
                                               sim.r))
        sim.issue(Engine.VECTOR, dict(op=isa.VecOp.ACT, a_space=1, a_addr=sim.r(f["rd"]),
                                      dst_addr=sim.r(f["rd"] + 1), n=sim.r(f["rs3"])))
    found = check_program(CFG, _fused_words(), extensions={microcode.FUSED_OPCODE: unordered})
    assert len(found) == 1 and found[0].space == Space.PSUM
    assert found[0].first.pc == found[0].second.pc == 9
    uc = microcode.fused_matmul_act()[0]
    barrier = [isa.unpack(isa.MICRO_FIELDS, w)["special"] for w in uc].index(
        isa.USpecial.BARRIER)
    emits = [i for i, w in enumerate(uc)
             if isa.unpack(isa.MICRO_FIELDS, w)["special"] == isa.USpecial.EMIT]
    assert emits[0] < barrier < emits[1]       # MATMUL, BARRIER, ACT


# -- every hand-written program of the tests and benchmarks ---------------------------------

def _core_programs(P, sbuf_depth):
    tw = len(table_words("gelu", 0, 64))
    yield "gemm", gemm_program(P=P, C=P, KT=2, MT=2, N=16, w_ext=0x1000, x_ext=0x3000,
                               o_ext=0x6000)
    yield "mlp", mlp_program(P=P, C=P, KT=2, MT=2, N=16, t_ext=0x8000, t_words=tw,
                             w_ext=0x1000, x_ext=0x3000, b_ext=0x5000, y_ext=0x6000, seed=1,
                             sbuf_depth=sbuf_depth)
    yield "attention", attention_program(P=P, C=P, KT=2, d=P, e_ext=0x8000, e_words=tw,
                                         r_ext=0x9000, r_words=tw, qt_ext=0x1000,
                                         kt_ext=0x1400, v_ext=0x1800, tmp_ext=0x2000,
                                         o_ext=0x4000, sbuf_depth=sbuf_depth)


@pytest.mark.parametrize("preset", ["core4", "core8", "core2"])
def test_core_programs_are_race_free(preset):
    cfg = CoreConfig.preset(preset).replace(sbuf_depth=1024)
    pairs = 0
    for name, text in _core_programs(cfg.rows, cfg.sbuf_depth):
        sim = cfg.refsim(assemble(text), execute=False).run()
        assert sim.error == 0, name
        assert sim.races == [], (name, sim.races_error())
        pairs += sim.race_checker.checked_pairs
    assert pairs > 0            # the check saw records of different engines in flight at once


@pytest.mark.parametrize("shape", [dict(KT=2, MT=4, NC=8, NCH=5, G=2),
                                   dict(KT=4, MT=4, NC=16, NCH=4, G=2), "bench"])
def test_streaming_gemm_is_race_free(shape):
    """The software-pipelined GEMM of ``python -m scripts.bench core`` (full size: 13,824
    matmuls) and the shapes of tests/test_core_stream.py; each of its waits is needed: without
    most of them it races."""
    from cocotb_tests.test_core_profile import (STREAM_SHAPE, gemm_stream_program,
                                                stream_config)
    shape = STREAM_SHAPE if shape == "bench" else shape
    sc = stream_config(8, shape)
    cfg = CoreConfig(rows=8, sbuf_depth=sc["sbuf_depth"], psum_depth=sc["psum_depth"],
                     pmem_depth=sc["pmem_depth"], formats=("bf16",))
    text = gemm_stream_program(P=8, C=8, w_ext=0, x_ext=0x80000, o_ext=0x200000, **shape)
    sim = cfg.refsim(assemble(text), execute=False).run()
    assert sim.error == 0 and sim.races == [], sim.races_error()
    if shape is not STREAM_SHAPE:
        waits = sorted({ln for ln in text.splitlines() if ln.startswith("waiti")})
        racy = sum(bool(check_program(cfg, assemble(text.replace(w + "\n", "", 1))))
                   for w in waits)
        assert racy >= len(waits) // 2, (racy, len(waits))


def test_directed_sequencer_programs():
    """The sequencer's directed programs run on engine models without memory; those that
    synchronise their engines are race-free; the 'engines' program, which issues one of each
    record back to back on overlapping registers, is not (its records are only traced)."""
    flagged = {name for name, src in DIRECTED.items()
               if RefSim(assemble(src), execute=False, races=True).run(100_000).races}
    assert flagged <= {"engines", "sems"}, flagged


# -- the checker's ordering claims against a timeline --------------------------------------

def _claims_hold(words, rng):
    """Run ``words`` on the cycle model with random engine costs; every ordering the race
    checker claims (record b issued when record a was known complete) must hold: a's done
    cycle before b's accept cycle. Returns (claims, races, overlapping races)."""
    cost = lambda e, r: rng.randint(1, 40)           # noqa: E731
    m = MicroSim(words, pmem_depth=256, cost=cost).run()
    ref = RefSim(words, execute=False, pmem_depth=256, races=True).run(100_000)
    rc = ref.race_checker
    claims = 0
    for f in Engine:
        for i, known in enumerate(rc.frontier[f]):
            b = m.timeline[f][i]
            for e in Engine:
                if e != f and known[e] > 0:
                    a = m.timeline[e][known[e] - 1]
                    assert a.done < b.accept, (e, known[e] - 1, f, i, a, b)
                    claims += 1
    overlap = 0
    for race in ref.races:
        a = m.timeline[race.first.engine][race.first.index]
        b = m.timeline[race.second.engine][race.second.index]
        overlap += a.accept <= b.done and b.accept <= a.done
    return claims, len(ref.races), overlap


def test_ordering_claims_hold_on_the_cycle_model():
    """Random programs (``cocotb_tests/test_sequencer_progs.py``): every ordering the checker
    derives from semaphores and barriers holds in the cycle model's timeline with random
    engine latencies (the sequencer fuzz checks the same against the RTL), and some of the
    races it reports do overlap in time there (it is not vacuous)."""
    rng = random.Random(5)
    total = [0, 0, 0]
    for seed in range(300):
        words = assemble(random_program(30_000 + seed))
        for i, v in enumerate(_claims_hold(words, rng)):
            total[i] += v
    claims, found, overlap = total
    assert claims > 1000 and found > 10 and overlap > 0, total
