"""The sequencer-hang regression programs (``HANG_REGRESSIONS``) still are what they were.

``cocotb_tests/test_sequencer.py::test_trap_with_records_queued`` replays each program after
its predecessor (seed - 1), which must trap once VECTOR records are issued; if the random
generator changed, the seeds would name other programs and the regression would test nothing.
The reference simulator is the judge (no hardware numbers here).
"""

import pytest

from cocotb_tests.test_sequencer_progs import HANG_REGRESSIONS, random_program
from sim.asm import assemble
from sim.isa import Engine, ErrorBit
from sim.refsim import RefSim


def _run(seed):
    return RefSim(assemble(random_program(seed)), pmem_depth=256, execute=False).run(
        max_steps=200_000)


@pytest.mark.parametrize("seed", HANG_REGRESSIONS)
def test_predecessor_traps_after_vector_records(seed):
    ref = _run(seed - 1)
    assert ref.error == 1 << ErrorBit.CALL_UNDERFLOW, f"program seed {seed - 1}: {ref.error:#x}"
    assert ref.trace[Engine.VECTOR], f"program seed {seed - 1} issues no VECTOR record"


@pytest.mark.parametrize("seed, retired", [(274751540, 75), (1027915099, 83)])
def test_regression_program_completes(seed, retired):
    assert seed in HANG_REGRESSIONS
    ref = _run(seed)
    assert ref.error == 0 and ref.retired == retired
    assert "barrier" in random_program(seed)   # what the lost completion blocked
