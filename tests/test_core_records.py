"""The engines' record adapters (rtl/core/vector_record.py, rtl/core/tensor_record.py)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.core.tensor_ctrl import tensor_cmd_layout
from rtl.core.tensor_record import TENSOR_RECORD_FIELDS, TensorRecordAdapter
from rtl.core.vector_ctrl import (KIND_ENGINE, KIND_NOP, KIND_SEED, KIND_TABLE,
                                  vector_cmd_layout)
from rtl.core.vector_record import VectorRecordAdapter
from rtl.vector.engine import CMD_LAYOUT
from sim.isa import VecAlu, VecOp
from sim.vector import AccOp, AluOp, Src, unpack_cmd

PARTS = 4
VCMD = vector_cmd_layout(CMD_LAYOUT.size, PARTS, 256, 64)


def _vector_expected(rec):
    """The commands of one VECTOR record: (kind, n, o_n, parts, b_en, sem_en, engine fields)."""
    op, n = rec["op"], rec["n"]
    eng = dict(fmt_a=rec["in_fmt"], fmt_b=rec["in_fmt"], fmt_o=rec["out_fmt"],
               rmode=rec["rnd"], count=n, emit=1)
    base = dict(kind=KIND_ENGINE, n=n, o_n=n, parts=PARTS, b_en=0, sem_en=1)
    if op == VecOp.ACT:
        eng.update(op0=AluOp.MUL, imm0=rec["scalar"], op1=AluOp.ADD, imm1=rec["bias"],
                   lut=~rec["func"] >> 1 & 1, bank=rec["func"] & 1,
                   acc_op=AccOp.SUM if rec["acc"] else AccOp.NONE)
    elif op == VecOp.TT:
        eng.update(op0=rec["alu"], src0=Src.TENSOR)
        base.update(b_en=1)
    elif op == VecOp.TS:
        eng.update(op0=rec["alu"], imm0=rec["scalar"])
    elif op == VecOp.REDUCE:
        acc = {VecAlu.ADD: AccOp.SUM, VecAlu.MAX: AccOp.MAX, VecAlu.MIN: AccOp.MIN}
        eng.update(emit=0, acc_reset=1, emit_acc=1, acc_op=acc[rec["alu"]])
        base.update(o_n=1)
    elif op == VecOp.TABLE:
        base.update(kind=KIND_TABLE, n=n << 1, o_n=0, parts=1)
    elif op == VecOp.SEED:
        base.update(kind=KIND_SEED, n=0, o_n=0)
    elif op == VecOp.ACC_RD:
        first = dict(base, n=0, o_n=1, sem_en=0)
        second = dict(base, n=0, o_n=0)
        return [(first, dict(eng, emit=0, count=0, emit_acc=1)),
                (second, dict(eng, emit=0, count=0, acc_op=AccOp.SUM, acc_reset=1))]
    elif op != VecOp.COPY:
        base.update(kind=KIND_NOP, n=0, o_n=0)
    return [(base, eng)]


def _record(rng, op):
    alu = rng.choice([VecAlu.ADD, VecAlu.MAX, VecAlu.MIN]) if op == VecOp.REDUCE else \
        rng.randrange(13)
    return dict(op=op, alu=alu, func=rng.randrange(4), a_space=rng.randrange(2),
                in_fmt=rng.randrange(8), out_fmt=rng.randrange(8), rnd=rng.randrange(3),
                acc=rng.randrange(2), sem=rng.randrange(16), a_addr=rng.randrange(256),
                b_addr=rng.randrange(256), dst_addr=rng.randrange(256),
                n=rng.randrange(1, 64), scalar=rng.randrange(1 << 32),
                bias=rng.randrange(1 << 32))


@pytest.mark.parametrize("seed", [1, 2])
def test_vector_record_adapter(seed):
    """Random records of every op, with random gaps and back-pressure: the commands in order,
    ACC_RD as two, each field as the translation in the adapter's docstring."""
    rng = random.Random(seed)
    dut = VectorRecordAdapter(PARTS, VCMD, CMD_LAYOUT)
    recs = [_record(rng, op) for _ in range(6) for op in VecOp]
    rng.shuffle(recs)
    got = []

    async def source(ctx):
        for rec in recs:
            while rng.random() < 0.3:
                await ctx.tick()
            for f, v in rec.items():
                if f in ("scalar", "bias") or hasattr(dut.rec.payload, f):
                    ctx.set(getattr(dut.rec.payload, f), v)
            ctx.set(dut.rec.valid, 1)
            await ctx.tick().until(dut.rec.ready)
            ctx.set(dut.rec.valid, 0)

    async def sink(ctx):
        want = sum(len(_vector_expected(r)) for r in recs)
        while len(got) < want:
            ready = rng.random() < 0.6
            ctx.set(dut.cmd.ready, ready)
            await ctx.delay(1e-9)
            if ready and ctx.get(dut.cmd.valid):
                got.append(ctx.get(dut.cmd.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    exp = [c for r in recs for c in _vector_expected(r)]
    assert len(got) == len(exp)
    i = 0
    for rec in recs:
        for base, eng in _vector_expected(rec):
            c, what = got[i], f"seed {seed}, record {rec}, command {i}"
            i += 1
            for f, v in base.items():
                assert getattr(c, f) == v, (what, f)
            if base["kind"] == KIND_ENGINE:
                assert (c.a_psum, c.a_addr, c.b_addr, c.o_addr, c.sem) == (
                    rec["a_space"], rec["a_addr"], rec["b_addr"], rec["dst_addr"],
                    rec["sem"]), what
                e = unpack_cmd(c.op)
                for f, v in eng.items():
                    assert e[f] == int(v), (what, f)


def test_tensor_record_adapter():
    """Each field of a record reaches the command in the same cycle, with ``sem_en``."""
    dut = TensorRecordAdapter(tensor_cmd_layout(4, 4, 256, 64))
    rng = random.Random(3)

    async def bench(ctx):
        for _ in range(20):
            vals = {f: rng.randrange(1 << min(len(getattr(dut.cmd.payload, f)), 8))
                    for f in TENSOR_RECORD_FIELDS}
            for f, v in vals.items():
                ctx.set(getattr(dut.rec.payload, f), v)
            valid, ready = rng.randrange(2), rng.randrange(2)
            ctx.set(dut.rec.valid, valid)
            ctx.set(dut.cmd.ready, ready)
            c = ctx.get(dut.cmd.payload)
            assert (ctx.get(dut.cmd.valid), ctx.get(dut.rec.ready)) == (valid, ready)
            assert c.sem_en == 1
            for f, v in vals.items():
                assert getattr(c, f) == v, f
            await ctx.delay(1e-9)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_vector_record_adapter_parts_checked():
    with pytest.raises(ValueError, match="parts must be an integer from 1 to 1024, not 0"):
        VectorRecordAdapter(0, VCMD, CMD_LAYOUT)
