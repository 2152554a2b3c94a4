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
from sim import isa, microcode
from sim.cycles import MicroSim
from sim.isa import Engine, UCond, UDst, USeq, USpecial, USrc


def test_cost(engine, r):
    """Small, record-dependent costs (real DMA sizes in random programs are huge)."""
    n = r.get("n", r.get("n0", 0))
    return 1 + (n & 15) + 3 * int(engine)


test_cost.__test__ = False   # not a pytest test


async def _timed(h, words, label, control_store=None, opcode_map=None):
    cfg = dut_config()
    model = MicroSim(words, pmem_depth=cfg["pmem_depth"], cost=test_cost,
                     control_store=control_store, opcode_map=opcode_map).run()
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
#: output is registered), a PC beyond the program memory (trapped in DECODE, on the compare
#: registered in FETCH), a deadlocked WAIT, a WAIT satisfied at once.
TRAPS = {
    "illegal opcode": "li r1, 3\n.word 0xF5\nhalt\n",
    "pc range": "li r1, 3\njmp 300\n",
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

    # Run-time microcode for the holds the shipped routines barely reach: a ULOOP right after
    # its UCTR write (REP_SEMINC; an EMIT on the ULOOP, which must push once per pass, not in
    # the held cycle), a BRANCH on LOOP_MORE right after the LOOP_PUSH (with a SEMINC or an
    # EMIT, which must act once) and one a cycle later, a BRANCH on Z/NZ with an EMIT.
    u, end = microcode.u, microcode.END
    routines = {
        0xF4: microcode.rep_seminc,
        0xF5: [u(a=USrc.RS1, dst=UDst.UCTR), "tm_a:",
               u(special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.ULOOP, target="tm_a"),
               u(**end)],
        0xF6: [u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
               u(special=USpecial.SEMINC, seq=USeq.BRANCH, cond=UCond.LOOP_MORE,
                 target="tm_b"),
               u(special=USpecial.SEMINC), "tm_b:",
               u(special=USpecial.LOOP_POP),
               u(a=USrc.RS2, special=USpecial.LOOP_PUSH), u(),
               u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target="tm_c"),
               u(special=USpecial.SEMINC), "tm_c:",
               u(special=USpecial.LOOP_POP),
               u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
               u(special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.BRANCH,
                 cond=UCond.LOOP_MORE, target="tm_e"),
               u(special=USpecial.SEMINC), "tm_e:",
               u(special=USpecial.LOOP_POP, **end)],
        0xF7: [u(special=USpecial.EMIT, eng=Engine.DMA),
               u(a=USrc.RS1, special=USpecial.EMIT, eng=Engine.DMA, seq=USeq.BRANCH,
                 cond=UCond.Z, target="tm_d"),
               u(special=USpecial.SEMINC), "tm_d:", u(**end)],
        # An EMIT right after a write of a slot its check reads (isa.CHECKED_SLOTS) holds a
        # cycle; after another slot's write, or a cycle later, it does not.
        0xF8: [u(a=USrc.RS1, dst=UDst.SLOT, eng=Engine.TENSOR, slot=2),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.TENSOR, slot=3, const=0x111),
               u(special=USpecial.EMIT, eng=Engine.TENSOR),
               u(a=USrc.RS1, dst=UDst.SLOT, eng=Engine.TENSOR, slot=2),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.TENSOR, slot=3, const=0x111),
               u(a=USrc.RS2, dst=UDst.SLOT, eng=Engine.TENSOR, slot=0),
               u(special=USpecial.EMIT, eng=Engine.TENSOR),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.VECTOR, slot=0, const=1),
               u(special=USpecial.EMIT, eng=Engine.VECTOR),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.VECTOR, slot=0, const=1), u(),
               u(special=USpecial.EMIT, eng=Engine.VECTOR),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.VECTOR, slot=0, const=1),
               u(a=USrc.CONST, dst=UDst.SLOT, eng=Engine.TENSOR, slot=3, const=0x111),
               u(special=USpecial.EMIT, eng=Engine.VECTOR, **end)],
        # A BRANCH on LOOP_MORE and a LOOP_STEP right after a LOOP_STEP or LOOP_POP hold a
        # cycle (the new top count lands in W), with SEMINCs on both outcomes.
        0xF9: [u(a=USrc.RS1, special=USpecial.LOOP_PUSH),
               u(special=USpecial.LOOP_STEP),
               u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target="tm_f"),
               u(special=USpecial.SEMINC), "tm_f:",
               u(special=USpecial.LOOP_STEP),
               u(special=USpecial.LOOP_STEP),
               u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target="tm_g"),
               u(special=USpecial.SEMINC), "tm_g:",
               u(a=USrc.RS2, special=USpecial.LOOP_PUSH),
               u(special=USpecial.LOOP_POP),
               u(special=USpecial.LOOP_STEP),
               u(seq=USeq.BRANCH, cond=UCond.LOOP_MORE, target="tm_h"),
               u(special=USpecial.SEMINC), "tm_h:",
               u(special=USpecial.LOOP_POP, **end)],
        # A BRANCH on a flag right after a FLAGS write holds a cycle (the flags land in W), a
        # cycle later it does not; with a SEMINC on the branch, which must act once.
        0xFA: [u(a=USrc.RS1, b=USrc.RS2, dst=UDst.FLAGS),
               u(seq=USeq.BRANCH, cond=UCond.LT, target="tm_i"),
               u(special=USpecial.SEMINC), "tm_i:",
               u(a=USrc.RS2, b=USrc.RS1, dst=UDst.FLAGS), u(),
               u(seq=USeq.BRANCH, cond=UCond.GEU, target="tm_j"),
               u(special=USpecial.SEMINC), "tm_j:",
               u(a=USrc.RS1, b=USrc.RS1, dst=UDst.FLAGS),
               u(special=USpecial.SEMINC, seq=USeq.BRANCH, cond=UCond.NE, target="tm_k"),
               u(special=USpecial.SEMINC), "tm_k:", u(**end)],
    }
    store, omap = microcode.control_store(), microcode.opcode_map()
    base = microcode.fused_matmul_act()[1]
    for op, items in routines.items():
        if callable(items):                          # REP_SEMINC: linked at ``base``
            items = items(base)
        else:
            items, _ = microcode.link(items, base=base, labels=microcode.LABELS)
        store[base:base + len(items)] = items
        await h.load_microcode(base, items)
        omap[op] = microcode.map_entry(base)
        await h.write_map(op, omap[op])
        base += len(items)
    words = assemble("li r1, 3\nli r2, 1")
    words += [isa.encode(op, rs1=1, rs2=2, imm=5) for op in routines]
    words += assemble("li r1, 1\nli r2, 0")
    words += [isa.encode(op, rs1=2, rs2=1, imm=6) for op in routines]
    words += assemble("halt")
    hw, model = await _timed(h, words, "run-time microcode holds", store, omap)
    assert hw["sems"] == model.sems, f"semaphores {hw['sems']} model {model.sems}"
    assert hw["err_status"] == 0, f"errors {hw['err_status']:#x}"
    dut._log.info("run-time microcode holds: %d cycles (model %d), %d DMA records, sems 5/6 "
                  "= %d/%d", hw["cycles"], model.cycle, len(model.timeline[Engine.DMA]),
                  hw["sems"][5], hw["sems"][6])
    for op in routines:
        await h.write_map(op, 0)

    # SEMRD writes the semaphore as it was in its second cycle in X (registered; it holds two
    # cycles): a record whose completion increments the semaphore while SEMRDs poll it, for
    # completion costs that move the increment across every cycle of a SEMRD (9 cycles per
    # ``semrd``: at least 9 consecutive costs whose completion the polls see); the registers
    # must equal the model's.
    seen = []
    for n in range(1, 24):
        src = f"li r2, {n}\nmatmul r0, r0, r0, r2, k=1, m=1, sem=1, sem_en=1\n"
        src += "".join(f"semrd r{10 + i}, 1\n" for i in range(4)) + "waiti 1, 1\nhalt\n"
        hw, model = await _timed(h, assemble(src), f"semrd poll n={n}")
        got, want = hw["regs"][10:14], model.regs[10:14]
        assert got == want, f"semrd poll n={n}: registers {got} model {want}"
        seen.append(want != [want[0]] * 4)
    run = max(len(r) for r in "".join("x" if v else " " for v in seen).split())
    assert run >= 9, f"semrd poll: the polls saw the completion for {run} consecutive costs"


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
