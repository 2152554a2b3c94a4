"""The engines' record adapters (rtl/core/vector_record.py, rtl/core/tensor_record.py) against
their model (``sim.records``)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.core.tensor_ctrl import tensor_cmd_layout
from rtl.core.tensor_record import TensorRecordAdapter
from rtl.core.vector_ctrl import vector_cmd_layout
from rtl.core.vector_record import VectorRecordAdapter
from rtl.vector.engine import CMD_LAYOUT
from sim.isa import VECTOR_RECORD, VecAlu, VecOp
from sim.records import (KIND_ENGINE, KIND_NOP, TENSOR_RECORD_FIELDS, tensor_command,
                         vector_commands)
from sim.vector import unpack_cmd

PARTS = 4
VCMD = vector_cmd_layout(CMD_LAYOUT.size, PARTS, 256, 64)


def _record(rng, op, alu=None):
    if alu is None:
        alu = rng.choice([VecAlu.ADD, VecAlu.MAX, VecAlu.MIN]) if op == VecOp.REDUCE else \
            rng.randrange(13)
    return dict(op=op, alu=alu, func=rng.randrange(4), a_space=rng.randrange(2),
                in_fmt=rng.randrange(8), out_fmt=rng.randrange(8), rnd=rng.randrange(3),
                acc=rng.randrange(2), sem=rng.randrange(16), a_addr=rng.randrange(256),
                b_addr=rng.randrange(256), dst_addr=rng.randrange(256),
                n=rng.randrange(1, 64), scalar=rng.randrange(1 << 32),
                bias=rng.randrange(1 << 32))


def _check_vector_adapter(recs, rng, seed, adapter=VectorRecordAdapter):
    """Stream ``recs`` through the adapter with random gaps and back-pressure; its commands
    must be ``vector_commands`` of each record, in order, field by field."""
    dut = adapter(PARTS, VCMD, CMD_LAYOUT)
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
        want = sum(len(vector_commands(r, PARTS)) for r in recs)
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
    exp = [(r, c) for r in recs for c in vector_commands(r, PARTS)]
    assert len(got) == len(exp)
    for i, (c, (rec, want)) in enumerate(zip(got, exp)):
        what = f"seed {seed}, record {rec}, command {i}"
        for f, v in want.items():
            if f != "op":
                assert getattr(c, f) == v, (what, f)
        if want["kind"] == KIND_ENGINE:
            assert unpack_cmd(c.op) == want["op"], what


@pytest.mark.parametrize("seed", [1, 2])
def test_vector_record_adapter(seed):
    """Random records of every op, with random gaps and back-pressure: the commands in order,
    ACC_RD as two, each field as the translation in the adapter's docstring."""
    rng = random.Random(seed)
    recs = [_record(rng, op) for _ in range(6) for op in VecOp]
    rng.shuffle(recs)
    _check_vector_adapter(recs, rng, seed)


def test_vector_record_adapter_reduce_alu_and_unknown_ops():
    """A REDUCE with every value of the 4-bit ALU field (ADD, MAX, MIN reduce; every other op,
    named or not, is one NOP) and every op value outside ``VecOp``, each one NOP: the adapter
    gives the model's commands, between records of every op."""
    rng = random.Random(4)
    width = dict(VECTOR_RECORD)
    reduces = [_record(rng, VecOp.REDUCE, alu) for alu in range(1 << width["alu"])
               for _ in range(2)]
    unknown = [_record(rng, op) for op in range(1 << width["op"]) if op not in list(VecOp)
               for _ in range(2)]
    assert unknown
    for rec in reduces + unknown:
        kinds = [c["kind"] for c in vector_commands(rec, PARTS)]
        nop = rec["op"] != VecOp.REDUCE or rec["alu"] not in (VecAlu.ADD, VecAlu.MAX, VecAlu.MIN)
        assert kinds == ([KIND_NOP] if nop else [KIND_ENGINE]), rec
    recs = reduces + unknown + [_record(rng, op) for op in VecOp]
    rng.shuffle(recs)
    _check_vector_adapter(recs, rng, 4)


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
            for f, v in tensor_command(vals).items():
                assert getattr(c, f) == v, f
            await ctx.delay(1e-9)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_vector_record_adapter_parts_checked():
    with pytest.raises(ValueError, match="parts must be an integer from 1 to 1024, not 0"):
        VectorRecordAdapter(0, VCMD, CMD_LAYOUT)
