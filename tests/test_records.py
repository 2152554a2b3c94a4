"""``sim.records``, the model of the engines' record adapters, against its own contract, and the
reference simulator executing VECTOR records through it."""

from sim import isa
from sim.isa import Engine, VecAlu, VecOp
from sim.records import KIND_ENGINE, KIND_NOP, vector_commands
from sim.refsim import RefSim


def _record(**fields):
    rec = {n: 0 for n, _ in isa.VECTOR_RECORD if not n.startswith("_")}
    rec.update(fields)
    return rec


def test_reduce_alus():
    """REDUCE with ADD, MAX or MIN is one engine command with one output beat; with any other
    ALU op it is one NOP (no operand read, no output)."""
    for alu in range(16):
        cmds = vector_commands(_record(op=VecOp.REDUCE, alu=alu, n=5), 4)
        assert len(cmds) == 1
        c = cmds[0]
        if alu in (VecAlu.ADD, VecAlu.MAX, VecAlu.MIN):
            assert (c["kind"], c["n"], c["o_n"]) == (KIND_ENGINE, 5, 1)
        else:
            assert (c["kind"], c["n"], c["o_n"]) == (KIND_NOP, 0, 0)


def test_refsim_skips_nop_records():
    """Without the record check, a REDUCE the adapter turns into a NOP leaves SBUF unchanged
    and is listed in ``skipped``."""
    sim = RefSim([], partitions=2, sbuf_depth=16, psum_depth=16, check=False, races=False)
    sim.sbuf[:] = 0x3F800000
    bad = next(a for a in range(16) if a not in (VecAlu.ADD, VecAlu.MAX, VecAlu.MIN))
    rec = _record(op=VecOp.REDUCE, alu=bad, n=4, dst_addr=8)
    sim._vector(rec)
    assert (sim.sbuf == 0x3F800000).all()
    assert sim.skipped == [(Engine.VECTOR, rec)]
