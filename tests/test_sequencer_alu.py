"""The sequencer's ALU (``rtl/control/alu.py``) and micro-word decoder
(``rtl/control/micro_decode.py``) in the Amaranth simulator, against ``sim.refsim``'s ALU and
the micro-word's fields."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.control.alu import MicroAlu
from rtl.control.micro_decode import MicroDecoder
from sim import isa
from sim.isa import Engine, UAlu, UCond, UDst, USeq, USpecial
from sim.refsim import _alu

MASK = 0xFFFF_FFFF
_MO = isa.field_offsets(isa.MICRO_FIELDS)
_TT = {UAlu.AND: 0b1000, UAlu.OR: 0b1110, UAlu.XOR: 0b0110, UAlu.PASSA: 0b1100,
       UAlu.PASSB: 0b1010}


def _run(dut, bench, clock=False):
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _model(op, a, b):
    if op == UAlu.PASSA:
        return a
    if op == UAlu.PASSB:
        return b
    return _alu(op.name.lower(), a, b)


def _operands(rng):
    special = [0, 1, 31, 32, 0x7FFF_FFFF, 0x8000_0000, MASK]
    return [rng.choice(special) if rng.random() < 0.3 else rng.getrandbits(32)
            for _ in range(2)]


@pytest.mark.parametrize("seed", [1, 2])
def test_alu_matches_model(seed):
    rng = random.Random(seed)
    dut = MicroAlu()

    async def bench(ctx):
        for _ in range(400):
            op = rng.choice(list(UAlu))
            a, b = _operands(rng)
            neg = op in (UAlu.SUB, UAlu.SLT, UAlu.SLTU)
            flags = {"alu_arith": op in (UAlu.ADD, UAlu.SUB), "alu_neg": neg,
                     "alu_slt": op == UAlu.SLT, "alu_sltu": op == UAlu.SLTU,
                     "alu_shl": op == UAlu.SHL, "alu_rsh": op in (UAlu.SHR, UAlu.SRA),
                     "alu_sra": op == UAlu.SRA}
            for n, v in flags.items():
                ctx.set(getattr(dut, n), int(v))
            ctx.set(dut.alu_tt, _TT.get(op, 0))
            sem, wr_sem, fwd_sem, neg_next = (rng.getrandbits(isa.SEM_VALUE_BITS),
                                              rng.getrandbits(1), rng.getrandbits(1),
                                              rng.getrandbits(1))
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.b_n, b ^ (MASK if neg else 0))
            ctx.set(dut.sem_cur, sem)
            ctx.set(dut.wr_sem, wr_sem)
            ctx.set(dut.fwd_sem, fwd_sem)
            ctx.set(dut.neg_next, neg_next)
            await ctx.delay(1e-9)
            want = _model(op, a, b)
            what = f"{op.name} a={a:#x} b={b:#x} (seed {seed})"
            assert ctx.get(dut.res) == want, what
            assert ctx.get(dut.wr_data) == (sem if wr_sem else want), what
            fwd = sem if fwd_sem else want
            assert ctx.get(dut.fwd) == fwd, what
            assert ctx.get(dut.fwd_n) == fwd ^ (MASK if neg_next else 0), what
            sa, sb = (x - (1 << 32) if x >> 31 else x for x in (a, b))
            assert (ctx.get(dut.eq), ctx.get(dut.lt), ctx.get(dut.ltu)) == (
                int(a == b), int(sa < sb), int(a < b)), what

    _run(dut, bench)


def _word(rng, **fields):
    word = rng.getrandbits(64)
    for name, value in fields.items():
        lo, w = _MO[name]
        word = word & ~(((1 << w) - 1) << lo) | (int(value) << lo)
    return word


def _fields(word):
    return {n: word >> lo & ((1 << w) - 1) for n, (lo, w) in _MO.items()}


def _expect(word):
    """The decoder's flags as the micro-word's fields define them (a selection)."""
    f = _fields(word)
    emit = f["special"] == USpecial.EMIT
    names = {Engine.DMA: "dma", Engine.TENSOR: "tensor", Engine.VECTOR: "vector"}
    d = {"alu_" + v.name.lower(): f["alu"] == v for v in UAlu}
    d.update({"end": f["seq"] == USeq.END, "ret": f["seq"] == USeq.RET,
              "zbranch": f["seq"] == USeq.BRANCH and f["cond"] in (UCond.Z, UCond.NZ),
              "br_always": f["seq"] == USeq.RET or (f["seq"] == USeq.BRANCH and
                                                    f["cond"] == UCond.ALWAYS),
              "br_flags": f["seq"] == USeq.BRANCH and f["cond"] in isa.FLAG_CONDS,
              "wait": f["special"] == USpecial.WAIT,
              "loop_top": f["special"] in (USpecial.LOOP_STEP, USpecial.LOOP_POP),
              "dst_t01": f["dst"] in (UDst.T0, UDst.T1),
              "wr_sem": f["special"] == USpecial.SEMRD and f["dst"] not in (UDst.RD,
                                                                            UDst.AGREG)})
    for e, n in names.items():
        d["emit_" + n] = emit and f["eng"] == e
        d["slot_" + n] = not emit and f["dst"] == UDst.SLOT and f["eng"] == e
    for j in range(isa.NUM_AG):
        d[f"dst_agreg_k{j}"] = f["dst"] == UDst.AGREG and f["const"] & 3 == j
    d["seminc_plain"] = (f["special"] == USpecial.SEMINC and f["seq"] not in (
        USeq.TRAP, USeq.RET, USeq.CALL, USeq.ULOOP, USeq.BRANCH)) or (
        f["special"] == USpecial.SEMINC and f["seq"] == USeq.BRANCH and
        f["cond"] not in (UCond.Z, UCond.NZ, UCond.LOOP_MORE) + isa.FLAG_CONDS)
    return {n: int(v) for n, v in d.items()}


def test_decoder_flags_and_x_register():
    rng = random.Random(3)
    dut = MicroDecoder()

    async def bench(ctx):
        x_word = None
        for i in range(300):
            word = _word(rng, seq=rng.choice(list(USeq)), cond=rng.choice(list(UCond)),
                         alu=rng.randrange(16), dst=rng.randrange(16),
                         special=rng.randrange(16), eng=rng.randrange(4))
            load = rng.random() < 0.6
            ctx.set(dut.word, word)
            ctx.set(dut.load, load)
            await ctx.delay(1e-9)
            for n, v in _expect(word).items():
                assert ctx.get(dut.r[n]) == v, f"r.{n} of {word:#018x}"
            await ctx.tick()
            if load:
                x_word = word
            if x_word is not None:      # ``x`` holds the flags of the last word loaded
                for n, v in _expect(x_word).items():
                    assert ctx.get(dut.x[n]) == v, f"x.{n} of {x_word:#018x} (step {i})"

    _run(dut, bench, clock=True)
