"""Assembler and disassembler: encodings, labels, constants, error messages, round trips."""

import struct

import pytest

from cocotb_tests.test_sequencer_progs import DIRECTED, random_program
from sim import isa
from sim.asm import AsmError, assemble, disassemble, disassemble_one
from sim.dtypes import Format, RoundMode
from sim.isa import Opcode


def test_encoding_fields():
    (w,) = assemble("add r1, r2, r3")
    assert w == Opcode.ADD | 1 << 8 | 2 << 14 | 3 << 20
    (w,) = assemble("addi r63, r0, -1")
    assert w >> 32 == 0xFFFFFFFF and (w >> 8) & 63 == 63


def test_labels_constants_comments_and_floats():
    words = assemble("""
        .equ N, 7          ; a constant
    top:                   # a label on its own line
        li r1, N
    mid: li r2, 1.5        ; FP32 bit pattern
        jmp top
        bne mid
        loop r1, end
    end: endloop
    """)
    assert isa.decode(words[0])["imm"] == 7
    assert isa.decode(words[1])["imm"] == struct.unpack("<I", struct.pack("<f", 1.5))[0]
    assert isa.decode(words[2])["imm"] == 0 and isa.decode(words[3])["imm"] == 1
    assert isa.decode(words[4])["imm"] == 5


def test_engine_options_by_name():
    (w,) = assemble("act r1, r2, r3, r4, func=1, a_space=psum, in_fmt=fp32, out_fmt=bf16, "
                    "rnd=sr, acc=1, sem=9, sem_en=1, alu=max")
    o = isa.unpack(isa.VEC_IMM, isa.decode(w)["imm"])
    assert (o["func"], o["a_space"], o["in_fmt"], o["out_fmt"], o["rnd"], o["acc"], o["sem"],
            o["sem_en"], o["alu"]) == (1, 1, Format.FP32, Format.BF16, RoundMode.SR, 1, 9, 1,
                                       isa.VecAlu.MAX)
    (w,) = assemble("matmul r1, r2, r3, r4, k=128, m=64, fmt=e4m3")
    o = isa.unpack(isa.MATMUL_IMM, isa.decode(w)["imm"])
    assert (o["k"], o["m"], o["fmt"]) == (128, 64, Format.FP8_E4M3)
    (w,) = assemble("dma_ld r1, r2, r3")            # default part_count=1
    assert isa.unpack(isa.DMA_IMM, isa.decode(w)["imm"])["part_count"] == 1


@pytest.mark.parametrize("source, message", [
    ("nop\nmatmull r1, r2, r3, r4", "line 2: unknown mnemonic 'matmull'"),
    ("nop\n\n  jmp nowhere", "line 3: undefined label 'nowhere'"),
    ("add r1, r2", "line 1: add expects 3 operand(s) (rd, rs1, rs2), got 2"),
    ("li r64, 1", "line 1: register r64 out of range (r0..r63)"),
    ("li x1, 1", "line 1: expected a register r0..r63, got 'x1'"),
    ("dma_ld r1, r2, r3, colour=3", "line 1: unknown option 'colour' for dma_ld (options: "
                                    "part_start, part_count, fmt, sem, sem_en)"),
    ("matmul r1, r2, r3, r4, k=300", "line 1: matmul: k must be in 0..255, not 300"),
    ("a: nop\na: nop", "line 2: duplicate label 'a'"),
    ("li r1, 0x1_0000_0000", "line 1: immediate 4294967296 does not fit in 32 bits"),
    ("li r1, twelve", "line 1: bad immediate 'twelve'"),
    ("waiti 16, 1", "line 1: sem must be in 0..15, not 16"),
    ("add r1, r2, r3, fmt=1", "line 1: add takes no key=value options"),
])
def test_error_messages(source, message):
    with pytest.raises(AsmError) as exc:
        assemble(source)
    assert str(exc.value) == message


def test_disassemble_every_opcode_round_trip():
    for src in DIRECTED.values():
        words = assemble(src)
        assert assemble(disassemble(words)) == words
    covered = {isa.decode(w)["op"] for src in DIRECTED.values() for w in assemble(src)}
    assert {int(o) for o in Opcode} <= covered


def test_disassemble_random_programs_round_trip():
    for seed in range(300):
        words = assemble(random_program(seed))
        assert assemble(disassemble(words)) == words, seed


def test_non_canonical_words_stay_words():
    assert disassemble_one(0xF5) == ".word 0x00000000000000f5"
    # ADD with a non-zero (unused) imm is not canonical: it must not disassemble to "add".
    w = isa.encode(Opcode.ADD, 1, 2, 3, imm=5)
    assert disassemble_one(w).startswith(".word")
    assert assemble(disassemble([w])) == [w]
