"""Programs for the sequencer tests: directed ones (every instruction, loops, calls, errors) and
a generator of random valid programs for differential testing against ``sim/refsim.py``.

Plain Python (no cocotb, no pytest fixtures): imported by ``cocotb_tests/test_sequencer.py`` and
``tests/test_refsim.py``.
"""

import random

from sim import isa
from sim.dtypes import RoundMode
from sim.isa import VecAlu

__all__ = ["DIRECTED", "HANG_REGRESSIONS", "random_program"]

_VEC_OPTS = "alu={alu}, func={func}, a_space={asp}, b_space={bsp}, in_fmt={inf}, " \
            "out_fmt={outf}, rnd={rnd}, acc={acc}, sem={sem}, sem_en={sem_en}"

DIRECTED = {
    "scalar": """
        li   r1, 0x12345678
        li   r2, -5
        add  r3, r1, r2
        sub  r4, r1, r2
        and  r5, r1, r2
        or   r6, r1, r2
        xor  r7, r1, r2
        li   r8, 35              ; shift amounts use the low 5 bits
        shl  r9, r1, r8
        shr  r10, r2, r8
        sra  r11, r2, r8
        slt  r12, r2, r1
        sltu r13, r2, r1
        addi r14, r1, -1
        andi r15, r1, 0xFF00
        ori  r16, r1, 1
        xori r17, r1, -1
        shli r18, r2, 4
        shri r19, r2, 28
        li   r0, 99              ; r0 stays 0
        add  r20, r0, r0
        nop
        halt
    """,
    "branches": """
        li   r1, 5
        li   r2, -3
        cmp  r1, r2
        blt  bad                 ; 5 < -3 signed is false
        bltu good1               ; 5 < 0xFFFFFFFD unsigned
        jmp  bad
    good1:
        addi r10, r10, 1
        cmpi r1, 5
        bne  bad
        beq  good2
        jmp  bad
    good2:
        addi r10, r10, 1
        cmp  r2, r1
        bge  bad
        bgeu good3
        jmp  bad
    good3:
        addi r10, r10, 1
        call sub1
        addi r10, r10, 100
        halt
    bad:
        li   r11, 0xBAD
        halt
    sub1:
        addi r12, r12, 7
        call sub2
        ret
    sub2:
        addi r13, r13, 9
        ret
    """,
    "loops": """
        li   r1, 3
        li   r2, 0
        li   r3, 4
        li   r6, 10               ; AG strides
        li   r7, 1
        ag   0, r5, r6, 1         ; r5 = base + 10*i + j
        ag   1, r5, r7, 2
        li   r5, 1000
        loop r1, outer_end
          addi r20, r20, 1
          loop r3, inner_end
            add  r21, r21, r5     ; sum of r5 over (i, j)
            addi r22, r22, 1
        inner_end:
          endloop
          loop r2, zero_end       ; zero-trip: skipped
            li r30, 0xBAD
        zero_end:
          endloop
    outer_end:
        endloop
        add  r23, r5, r0          ; r5 restored to 1000
        li   r4, 2
        loop r4, l3
          loop r4, l2
            loop r4, l1
              loop r4, l0
                addi r24, r24, 1  ; depth 4 = LOOP_DEPTH: 16 passes
        l0:   endloop
        l1:   endloop
        l2:   endloop
    l3: endloop
        ag   0, r0, r0, 0
        ag   1, r0, r0, 0
        halt
    """,
    "ag_shared": """
        li   r1, 3
        li   r6, 10
        li   r7, 1
        ag   0, r5, r6, 1         ; two generators on r5 at one level: ENDLOOP's step of
        ag   1, r5, r7, 1         ; generator 1 reads r5 as generator 0's step writes it
        li   r5, 100
        loop r1, shared_end
          add  r21, r21, r5       ; 100 + 111 + 122
    shared_end:
        endloop
        add  r23, r5, r0          ; restored to 100
        ag   0, r0, r0, 0
        ag   1, r0, r0, 0
        halt
    """,
    "engines": """
        li   r1, 0x30004          ; n0 = 4, n1 = 3
        li   r2, 2                ; ext_stride0
        li   r3, 64               ; ext_stride1
        li   r4, 1024             ; ext_part_stride
        li   r10, 0x100           ; ext address
        li   r11, 0x20            ; SBUF address
        dma_ld r1, r10, r11, part_start=1, part_count=4, fmt=bf16, sem=1, sem_en=1
        dma_st r1, r10, r11, part_count=8, fmt=fp32
        waiti 1, 1
        li   r12, 0x40            ; moving
        li   r13, 0x10            ; PSUM
        li   r14, 16              ; N
        matmul r13, r11, r12, r14, k=8, m=8, fmt=bf16, accumulate=1, sem=2, sem_en=1
        wait  2, r7               ; r7 = 0: passes at once
        li   r20, 1.5
        li   r21, -0.25
        act  r11, r13, r20, r14, func=3, a_space=psum, in_fmt=fp32, out_fmt=bf16, rnd=sr, acc=1
        tt   r11, r11, r12, r14, alu=max, in_fmt=bf16, out_fmt=bf16, sem=3, sem_en=1
        ts   r11, r11, r20, r14, alu=mul, in_fmt=bf16, out_fmt=fp8_e4m3, rnd=rtz
        reduce r12, r11, r0, r14, alu=add, in_fmt=bf16, out_fmt=fp32
        copy r12, r11, r0, r14, in_fmt=bf16, out_fmt=fp16
        table_ld r11, r14, func=5
        seed_ld r20
        acc_rd r12, out_fmt=fp32
        seminc 4
        seminc 4
        semset 5, 77
        barrier
        semrd r30, 3
        semrd r31, 4
        semrd r32, 5
        waiti 4, 2
        halt
    """,
}


#: Random programs that hung the sequencer testbench (cocotb seeds 13 and 1795322362), each
#: right after its predecessor in the sweep (program seed - 1), which traps with VECTOR records
#: still in the sequencer's queue: the harness dropped their completions, so the next
#: program's first BARRIER waited forever (a testbench bug, fixed; see docs/core.md).
HANG_REGRESSIONS = (274751540, 1027915099)


def _r(rng, lo=1):
    return f"r{rng.randrange(lo, isa.NUM_REGS)}"


def _vec_opts(rng, sem_en):
    return _VEC_OPTS.format(
        alu=rng.choice(list(VecAlu)).name.lower(), func=rng.randrange(16),
        asp=rng.randrange(2), bsp=rng.randrange(2), inf=rng.randrange(8), outf=rng.randrange(8),
        rnd=rng.choice(list(RoundMode)).name.lower(), acc=rng.randrange(2),
        sem=rng.randrange(isa.NUM_SEMS), sem_en=sem_en)


def random_program(seed, length=40, errors=True):
    """Assembly text of a random program that terminates (HALT or a deterministic error).

    Only forward branches; loops with counts 0..3 nested at most 3 deep; subroutines after the
    HALT that only call later subroutines; SEMSET/SEMRD only right after a BARRIER (their
    result would otherwise depend on engine timing, see docs/isa.md).
    """
    rng = random.Random(seed)
    # About a third of the programs may end in a (deterministic) error.
    errors = errors and rng.random() < 0.35
    lines = []
    label_n = [0]

    def new_label():
        label_n[0] += 1
        return f"L{label_n[0]}"

    n_subs = rng.randrange(0, 4)
    sub_names = [f"sub{i}" for i in range(n_subs)]

    def block(n, depth, sub_index=None):
        out = []
        i = 0
        while i < n:
            i += 1
            kind = rng.choices(
                ["alu", "alui", "li", "branch", "loop", "ag", "engine", "sem", "call", "misc",
                 "error"],
                [12, 8, 6, 5, 4 if depth < 3 else 0, 3, 10, 5, 3 if sub_names else 0, 2,
                 1 if errors else 0])[0]
            if kind == "alu":
                op = rng.choice(["add", "sub", "and", "or", "xor", "shl", "shr", "sra", "slt",
                                 "sltu"])
                out.append(f"{op} {_r(rng)}, {_r(rng, 0)}, {_r(rng, 0)}")
            elif kind == "alui":
                op = rng.choice(["addi", "andi", "ori", "xori", "shli", "shri"])
                out.append(f"{op} {_r(rng)}, {_r(rng, 0)}, {rng.randrange(-2**31, 2**32)}")
            elif kind == "li":
                out.append(f"li {_r(rng)}, {rng.choice([0, 1, 2, 3, rng.randrange(2**32)])}")
            elif kind == "branch":
                lab = new_label()
                if rng.random() < 0.5:
                    out.append(f"cmp {_r(rng, 0)}, {_r(rng, 0)}")
                else:
                    out.append(f"cmpi {_r(rng, 0)}, {rng.randrange(-4, 4)}")
                out.append(f"{rng.choice(['beq', 'bne', 'blt', 'bge', 'bltu', 'bgeu', 'jmp'])} "
                           f"{lab}")
                out += block(rng.randrange(0, 3), depth)
                out.append(f"{lab}:")
            elif kind == "loop":
                lab = new_label()
                reg = _r(rng)
                out.append(f"li {reg}, {rng.choice([0, 1, 2, 3])}")
                ag_reg = None
                if rng.random() < 0.6:
                    # An affine generator for this loop level, used inside the body.
                    ag_reg, stride = _r(rng), _r(rng)
                    while stride == reg:     # the stride must not overwrite the loop count
                        stride = _r(rng)
                    out.append(f"li {stride}, {rng.choice([1, 4, 100, rng.randrange(2**32)])}")
                    out.append(f"ag {rng.randrange(isa.NUM_AG)}, {ag_reg}, {stride}, {depth + 1}")
                out.append(f"loop {reg}, {lab}")
                if ag_reg:
                    acc = _r(rng)
                    out.append(f"add {acc}, {acc}, {ag_reg}")
                    out.append(f"ts {_r(rng, 0)}, {ag_reg}, {_r(rng, 0)}, {_r(rng, 0)}, "
                               f"{_vec_opts(rng, 0)}")
                out += block(rng.randrange(1, 4), depth + 1)
                out.append(f"{lab}: endloop")
            elif kind == "ag":
                out.append(f"ag {rng.randrange(isa.NUM_AG)}, {_r(rng, 0)}, {_r(rng, 0)}, "
                           f"{rng.randrange(0, 5)}")
            elif kind == "engine":
                which = rng.randrange(9)
                sem, sem_en = rng.randrange(isa.NUM_SEMS), rng.randrange(2)
                if which == 0:
                    op = rng.choice(["dma_ld", "dma_st"])
                    out.append(f"{op} {_r(rng, 0)}, {_r(rng, 0)}, {_r(rng, 0)}, "
                               f"part_start={rng.randrange(256)}, "
                               f"part_count={rng.randrange(256)}, fmt={rng.randrange(8)}, "
                               f"sem={sem}, sem_en={sem_en}")
                elif which == 1:
                    out.append(f"matmul {_r(rng, 0)}, {_r(rng, 0)}, {_r(rng, 0)}, {_r(rng, 0)}, "
                               f"k={rng.randrange(256)}, m={rng.randrange(256)}, "
                               f"fmt={rng.randrange(8)}, accumulate={rng.randrange(2)}, "
                               f"sem={sem}, sem_en={sem_en}")
                else:
                    op = rng.choice(["act", "tt", "ts", "reduce", "copy"])
                    if which == 7:
                        out.append(f"{rng.choice(['table_ld'])} {_r(rng, 0)}, {_r(rng, 0)}, "
                                   f"{_vec_opts(rng, sem_en)}")
                    elif which == 8:
                        op = rng.choice(["seed_ld", "acc_rd"])
                        out.append(f"{op} {_r(rng, 0)}, {_vec_opts(rng, sem_en)}")
                    else:
                        out.append(f"{op} {_r(rng, 0)}, {_r(rng, 0)}, {_r(rng, 0)}, "
                                   f"{_r(rng, 0)}, {_vec_opts(rng, sem_en)}")
            elif kind == "sem":
                s = rng.randrange(isa.NUM_SEMS)
                c = rng.randrange(5)
                if c == 0:
                    out.append(f"seminc {s}")
                elif c == 1:
                    out.append(f"waiti {s}, {rng.choice([0, 0, 1] if errors else [0])}")
                elif c == 2:
                    out.append(f"wait {s}, r0")
                elif c == 3:
                    out += ["barrier", f"semset {s}, {rng.randrange(4)}"]
                else:
                    out += ["barrier", f"semrd {_r(rng)}, {s}"]
            elif kind == "call":
                lo = 0 if sub_index is None else sub_index + 1
                if lo < n_subs:
                    out.append(f"call {sub_names[rng.randrange(lo, n_subs)]}")
            elif kind == "misc":
                out.append(rng.choice(["nop", "barrier"]))
            elif kind == "error":
                out.append(rng.choice([".word 0xF5", ".word 0x7F", "endloop", "ret",
                                       "waiti 15, 60000"]))
        return out

    lines += block(length, 0)
    lines.append("halt")
    for i, name in enumerate(sub_names):
        lines.append(f"{name}:")
        lines += block(rng.randrange(1, 6), 0, sub_index=i)
        lines.append("ret")
    return "\n".join(lines) + "\n"
