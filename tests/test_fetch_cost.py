"""scripts.fetch_cost: the events counted by the cycle model, on programs whose counts are known
from their text."""

from scripts.fetch_cost import estimate, main
from sim.asm import assemble
from sim.cycles import MicroSim


def _cost(rec):
    return 4


def test_counts_macro_instructions_and_redirects():
    # three macro instructions (li, li, halt); a loop of three passes over one instruction
    straight = "li r1, 1\nli r2, 2\nhalt\n"
    looped = "li r1, 3\nloop r1, end\naddi r2, r2, 1\nend: endloop\nhalt\n"
    r = estimate({"straight": straight, "looped": looped}, cost=_cost)
    s = r["programs"]["straight"]
    assert s["macro"] == 3 and s["jumps"] == 0 and s["redirects"] == 0
    assert s["added"] == 3
    lp = r["programs"]["looped"]
    assert lp["macro"] == 1 + 1 + 3 * 2 + 1      # li, loop, 3 x (addi, endloop), halt
    # counting does not change the model's cycles
    assert lp["cycles"] == MicroSim(assemble(looped), pmem_depth=1024, cost=_cost).run().cycle
    t = r["total"]
    assert t["cycles"] == s["cycles"] + lp["cycles"]
    assert t["added_pct"] == round(100 * t["added"] / t["cycles"], 1)


def test_command_line(capsys):
    assert main(["--random", "1", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"added_pct"' in out


def test_counts_shifts():
    # SHLI's routine is one SHL micro-instruction, ADDI's one ADD: one shift more
    base = "li r1, 1\naddi r2, r1, 3\nhalt\n"
    shifted = "li r1, 1\nshli r2, r1, 3\nhalt\n"
    r = estimate({"base": base, "shifted": shifted}, cost=_cost)["programs"]
    assert r["shifted"]["shifts"] == r["base"]["shifts"] + 1
    looped = "li r1, 3\nloop r1, end\nshli r2, r2, 1\nend: endloop\nhalt\n"
    lp = estimate({"looped": looped}, cost=_cost)["programs"]["looped"]
    assert lp["shifts"] == r["base"]["shifts"] + 3     # li's shifts, then one per pass
