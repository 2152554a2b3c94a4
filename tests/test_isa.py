"""The ISA description: field widths, record layouts, shipped microcode and the sequencer's
parameter checks."""

import pytest

from sim import isa, microcode
from sim.isa import Opcode


def test_widths():
    assert isa.layout_width(isa.INSTR_FIELDS) == isa.INSTR_BITS == 64
    assert isa.layout_width(isa.MICRO_FIELDS) == 64
    for lay in (isa.DMA_IMM, isa.MATMUL_IMM, isa.VEC_IMM, isa.AG_IMM, isa.SEM_IMM):
        assert isa.layout_width(lay) == 32
    for e, lay in isa.RECORDS.items():
        assert isa.layout_width(lay) % 32 == 0
        names = [n for n, _ in lay]
        assert "sem" in names and "sem_en" in names


def test_imm_layouts_match_record_slots():
    # The microcode copies these bits unchanged; the layouts must agree field by field.
    mm = isa.field_offsets(isa.MATMUL_IMM)
    tr = isa.field_offsets(isa.TENSOR_RECORD)
    for name in ("k", "m", "fmt", "accumulate", "sem", "sem_en"):
        assert tr[name] == (mm[name][0] + 96, mm[name][1])
    vi = isa.field_offsets(isa.VEC_IMM)
    vr = isa.field_offsets(isa.VECTOR_RECORD)
    for name in ("alu", "func", "in_fmt", "out_fmt", "rnd", "acc", "sem", "sem_en"):
        assert vr[name] == vi[name]


def test_pack_unpack():
    w = isa.pack(isa.DMA_RECORD, ext_addr=0xDEADBEEF, n1=3, sem=15, sem_en=1)
    f = isa.unpack(isa.DMA_RECORD, w)
    assert f["ext_addr"] == 0xDEADBEEF and f["n1"] == 3 and f["sem"] == 15
    with pytest.raises(ValueError, match="n0 must be in 0..65535, not 65536"):
        isa.pack(isa.DMA_RECORD, n0=65536)
    with pytest.raises(ValueError, match="unknown field 'bogus'"):
        isa.pack(isa.DMA_RECORD, bogus=1)


def test_vec_alu_matches_vector_engine():
    from sim import vector
    for a in isa.VecAlu:
        assert vector.AluOp[a.name] == a


def test_shipped_microcode():
    store = microcode.control_store()
    assert len(store) == isa.UCODE_DEPTH
    omap = microcode.opcode_map()
    for op in Opcode:
        assert omap[op] >> isa.UADDR_BITS == 1, op
    for op in isa.USER_OPCODES:
        assert omap[op] == 0
    assert microcode.used_words() < isa.UCODE_DEPTH // 2
    # Unused words trap rather than run off into garbage.
    assert isa.unpack(isa.MICRO_FIELDS, store[-1])["seq"] == isa.USeq.TRAP


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"pmem_depth": 1000}, ValueError,
     "pmem_depth must be a power of two from 16 to 65536, not 1000"),
    ({"pmem_depth": 8}, ValueError, "pmem_depth must be a power of two from 16 to 65536, not 8"),
    ({"pmem_depth": "big"}, TypeError, "pmem_depth must be an integer, not 'big'"),
    ({"queue_depth": 0}, ValueError, "queue_depth must be an integer from 1 to 16, not 0"),
    ({"max_outstanding": 65}, ValueError,
     "max_outstanding must be an integer from 1 to 64, not 65"),
])
def test_sequencer_parameters(kwargs, exc, message):
    from rtl.control.sequencer import Sequencer
    with pytest.raises(exc) as e:
        Sequencer(**kwargs)
    assert str(e.value) == message


def test_record_check_constants_match_the_engines():
    """The record-check limits (sim.isa, used by the core's RTL check and refsim) follow the
    vector engine's op codes and the rounding modes."""
    from sim import vector
    from sim.dtypes import RoundMode
    assert isa.VEC_ALU_MAX == max(vector.AluOp) == isa.VecAlu.GE
    assert isa.VEC_RND_MAX == max(RoundMode)
    assert isa.VEC_REDUCE_ALUS == (vector.AluOp.ADD, vector.AluOp.MAX, vector.AluOp.MIN)
    assert set(isa.VEC_CHECKED_OPS) == set(isa.VecOp) - {isa.VecOp.TABLE, isa.VecOp.SEED}


def test_assembler_alu_names_are_the_engine_codes():
    from sim import asm, vector
    word = asm.assemble("tt r1, r2, r3, r4, alu=add")[0]
    imm = isa.unpack(isa.VEC_IMM, isa.decode(word)["imm"])
    assert imm["alu"] == vector.AluOp.ADD == 1


def test_record_errors():
    t = dict(k=8, m=8, n=1, fmt=4)
    assert isa.tensor_record_error(t, 8, 8, [4]) is None
    assert "k must be in 1..8, not 9" in isa.tensor_record_error({**t, "k": 9}, 8, 8, [4])
    assert "m must be in 1..4, not 8" in isa.tensor_record_error(t, 8, 4, [4])
    assert "fmt" in isa.tensor_record_error(t, 8, 8, [0])
    v = dict(op=isa.VecOp.TT, alu=1, rnd=0, b_space=0)
    assert isa.vector_record_error(v) is None
    assert "b_space" in isa.vector_record_error({**v, "b_space": 1})
    assert isa.vector_record_error({**v, "op": isa.VecOp.TABLE, "alu": 15, "rnd": 3}) is None
    assert "op must be" in isa.vector_record_error({**v, "op": 8})


def test_paired_table_is_legal_on_every_core():
    """The paired TABLE (``func`` bit ``TABLE_FUNC_PAIRED``) reads partitions 0 and 1: no
    core has fewer than two partitions (the configuration and the core refuse ``rows=1``),
    so the record check accepts the form; its commands read ``n`` beats of two partitions
    (unpaired: ``2n`` words of one), and the assembler's ``table_pair`` sets the bit."""
    from rtl.core.top import NeuronCore
    from sim.asm import assemble
    from sim.config import CoreConfig
    from sim.records import vector_commands
    with pytest.raises(ValueError, match="rows must be an integer from 2 to 128, not 1"):
        CoreConfig(rows=1)
    with pytest.raises(ValueError, match="rows must be an integer from 2 to 128, not 1"):
        NeuronCore(rows=1)
    rec = dict(op=isa.VecOp.TABLE, alu=0, rnd=0, b_space=0, func=isa.TABLE_FUNC_PAIRED,
               scalar=0, bias=0, n=7, a_space=0, a_addr=3, b_addr=0, dst_addr=0, in_fmt=0,
               out_fmt=0, acc=0, sem=0)
    assert isa.vector_record_error(rec) is None
    (c,) = vector_commands(rec, 2)
    assert (c["n"], c["parts"], c["a_addr"]) == (7, 2, 3)
    (c,) = vector_commands({**rec, "func": 0}, 8)
    assert (c["n"], c["parts"]) == (14, 1)
    word = assemble("table_pair r1, r2")[0]
    assert isa.unpack(isa.VEC_IMM, isa.decode(word)["imm"])["func"] == isa.TABLE_FUNC_PAIRED


def test_isa_doc_tables_up_to_date():
    """docs/isa.md's encoding tables are generated from sim/isa.py."""
    from scripts.gen_isa import main
    assert main(["--check"]) == 0, "run python -m scripts.gen_isa"


def test_isa_doc_tables_follow_the_layouts():
    """A field renamed in a layout changes the generated table (the tables are not copies)."""
    from scripts import gen_isa
    text = gen_isa.DOC.read_text()
    saved = isa.INSTR_FIELDS[1]
    isa.INSTR_FIELDS[1] = ("rdx", 6)
    try:
        assert "`rdx`" in gen_isa.render(text)
    finally:
        isa.INSTR_FIELDS[1] = saved
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        gen_isa.render(text + "\n<!-- generated: nope -->\n<!-- end generated -->\n")
    with pytest.raises(ValueError, match="no '<!-- end generated -->'"):
        gen_isa.render(text + "\n<!-- generated: opcodes -->\n")
