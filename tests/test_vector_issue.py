"""The vector engine's sequencer (``rtl.vector.issue.VectorIssue``) on the Amaranth simulator,
against its contract: random instructions, random ``a``/``b`` valids and random credit
returns from a model of the pipeline; per instruction the elements, prologue beats and
read-out it injects, the credit bound, the summing gap and the drain."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.vector.issue import VectorIssue
from sim.vector import CMD_FIELDS, AccOp, Src

SEED = 20261129


@pytest.mark.parametrize("subs,acc_wait,credits", [(1, 3, 4), (1, 0, 2), (2, 3, 8), (4, 0, 4)])
def test_issue_contract(subs, acc_wait, credits):
    rng = np.random.default_rng(SEED + 10 * subs + acc_wait)
    dut = VectorIssue(subs, acc_wait, credits)
    cmds = []
    for _ in range(40):
        c = {name: int(rng.integers(0, 1 << w)) for name, w in CMD_FIELDS}
        c.update(count=int(rng.integers(0, 6)), src0=int(rng.integers(0, 3)),
                 src1=int(rng.integers(0, 3)), acc_op=int(rng.integers(0, 4)))
        cmds.append(c)
    log = []

    async def bench(ctx):
        flight = []                   # cycles left for each injected element in the pipeline
        held = 0                      # entries in the modelled FIFO
        k = 0
        cur = None
        last_inject = -100
        av = bv = False               # stream valids: held until taken
        for cyc in range(3000):
            cmd = cmds[k] if k < len(cmds) else None
            ctx.set(dut.cmd.valid, cmd is not None and rng.random() < 0.5)
            if cmd is not None:
                for name, v in cmd.items():
                    ctx.set(getattr(dut.cmd.payload, name), v)
            av, bv = av or rng.random() < 0.7, bv or rng.random() < 0.7
            ctx.set(dut.a_valid, av)
            ctx.set(dut.b_valid, bv)
            done = [f for f in flight if f[0] == 0]
            flight = [f for f in flight if f[0] > 0]
            ret_drop = sum(1 for f in done if not f[1])
            held += sum(1 for f in done if f[1])
            assert ret_drop <= 1
            ret_fifo = held > 0 and rng.random() < 0.5
            held -= int(ret_fifo)
            ctx.set(dut.ret_drop, ret_drop)
            ctx.set(dut.ret_fifo, ret_fifo)
            ctx.set(dut.empty, not flight)
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                assert ctx.get(dut.idle)
                cur = dict(cmd=cmd, inject=0, emit=0, subs=0, lane0=0, lane1=0, a=0, b=0)
                k += 1
            if cur is not None and not ctx.get(dut.idle):
                cur["lane0"] += ctx.get(dut.take_lane0)
                cur["lane1"] += ctx.get(dut.take_lane1)
                cur["a"] += av and ctx.get(dut.a_ready)
                cur["b"] += bv and ctx.get(dut.b_ready)
                cur["subs"] += ctx.get(dut.inject_sub)
                if ctx.get(dut.inject):
                    emit = ctx.get(dut.inject_emit)
                    cur["emit" if emit else "inject"] += 1
                    summing = (cur["cmd"]["acc_op"] == AccOp.SUM if subs == 1 else
                               cur["cmd"]["acc_op"] != AccOp.NONE)
                    if not emit and summing:
                        assert cyc - last_inject > acc_wait or last_inject < 0
                    if not emit:
                        last_inject = cyc if summing else -100
                    # one credit per element: at most ``credits`` in flight or held
                    assert len(flight) + held < credits
                    flight.append([int(rng.integers(1, 6)), bool(rng.random() < 0.6)])
            a_taken, b_taken = av and ctx.get(dut.a_ready), bv and ctx.get(dut.b_ready)
            await ctx.tick()
            av, bv = av and not a_taken, bv and not b_taken
            flight = [[f[0] - 1, f[1]] for f in flight]
            # at most one element leaves per cycle
            while sum(1 for f in flight if f[0] == 0) > 1:
                for f in flight:
                    if f[0] == 0:
                        f[0] = 1
                        break
            if cur is not None and ctx.get(dut.idle):
                log.append(cur)
                cur = None
        assert k == len(cmds), k

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(log) == len(cmds)
    for r in log:
        c = r["cmd"]
        assert r["inject"] == c["count"], r
        assert r["emit"] == c["emit_acc"], r
        assert r["subs"] == subs * c["count"] + c["emit_acc"], r      # the read-out: one slot
        assert r["lane0"] == subs * (c["src0"] == Src.LANE), r
        assert r["lane1"] == subs * (c["src1"] == Src.LANE), r
        need_b = Src.TENSOR in (c["src0"], c["src1"])
        assert r["a"] == c["count"], r
        assert r["b"] == c["count"] * need_b + (c["src0"] == Src.LANE) + \
            (c["src1"] == Src.LANE), r


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_issue_parameter_errors():
    with pytest.raises(ValueError, match=r"^subs must be an integer from 1 to 128, not 0$"):
        VectorIssue(0)
    with pytest.raises(TypeError, match=r"^acc_wait must be an integer, not 'x'$"):
        VectorIssue(1, "x")
