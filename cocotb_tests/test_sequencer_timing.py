"""cocotb test of the cycle model ``sim/cycles.py`` against the sequencer RTL.

The engines are serial servers with a known cost per record (as ``MicroSim`` assumes). For each
program the RTL's performance counters (running cycles, per-engine busy / semaphore-wait / idle
/ blocked cycles) must equal the model's, and every record's acceptance and completion cycle
must equal the predicted timeline (up to one constant offset: the start-up).
"""


import cocotb

from cocotb_tests.common.config import dut_config
from cocotb_tests.test_sequencer import _setup
from cocotb_tests.test_sequencer_progs import DIRECTED, random_program
from sim.asm import assemble
from sim.cycles import MicroSim
from sim.isa import Engine


def test_cost(engine, r):
    """Small, record-dependent costs (real DMA sizes in random programs are huge)."""
    n = r.get("n", r.get("n0", 0))
    return 1 + (n & 15) + 3 * int(engine)


test_cost.__test__ = False   # not a pytest test


async def _timed(h, words, label):
    cfg = dut_config()
    model = MicroSim(words, pmem_depth=cfg["pmem_depth"], cost=test_cost).run()
    await h.run(words)
    hw = await h.state()
    assert hw["cycles"] == model.cycle, f"{label}: cycles hardware {hw['cycles']} model " \
                                        f"{model.cycle}"
    for e in Engine:
        want = [model.perf[e][k] for k in ("busy", "semwait", "idle", "blocked")]
        assert hw["perf"][e] == want, f"{label}: {e.name} counters {hw['perf'][e]} model {want}"
    firsts = [(h.accepted_at[e][0], model.timeline[e][0].accept) for e in Engine
              if h.accepted_at[e]]
    if firsts:
        offset = firsts[0][0] - firsts[0][1]
        for e in Engine:
            got = [(a - offset, d - offset) for a, d in zip(h.accepted_at[e], h.done_at[e])]
            want = [(r.accept, r.done) for r in model.timeline[e]]
            assert got == want, f"{label}: {e.name} timeline {got[:4]} model {want[:4]}"
    return hw, model


#: Traps whose cycle of detection the model must place exactly (the random programs hit them
#: only by chance): an illegal opcode (trapped in EXEC's first cycle, after the opcode map's
#: output is registered), a deadlocked WAIT, a WAIT satisfied at once.
TRAPS = {
    "illegal opcode": "li r1, 3\n.word 0xF5\nhalt\n",
    "deadlock": "li r1, 3\nwaiti 1, 1\nhalt\n",
    "wait satisfied": "waiti 1, 0\nhalt\n",
}


@cocotb.test()
async def test_cycle_model(dut):
    """Directed and random programs: counters and record timeline equal the cycle model."""
    h, rng = await _setup(dut, 10)
    h.cost = test_cost
    n_records = 0
    for name, src in {**DIRECTED, **TRAPS}.items():
        hw, model = await _timed(h, assemble(src), name)
        n_records += sum(len(t) for t in model.timeline.values())
        dut._log.info("%s: %d cycles (model %d)", name, hw["cycles"], model.cycle)
    base = rng.randrange(1 << 30)
    for i in range(8):
        hw, model = await _timed(h, assemble(random_program(base + i)), f"random {base + i}")
        n_records += sum(len(t) for t in model.timeline.values())
    dut._log.info("CYCLE MODEL: %d programs, %d records, timelines equal (base seed %d)",
                  len(DIRECTED) + len(TRAPS) + 8, n_records, base)


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_sequencer_timing(simulator):
        from rtl.control.sequencer import Sequencer
        run_cocotb(lambda: Sequencer(pmem_depth=256), name="sequencer",
                   config={"pmem_depth": 256}, test_module="cocotb_tests.test_sequencer_timing",
                   simulator=simulator)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
