"""What a registered control store would cost in cycles: an estimate from the cycle model.

The sequencer's fetch loop reads the control store (a DP16KD block RAM on the ECP5, its word
5.83 ns after the clock at speed grade 6) and picks the next micro-address and R's register
indices from that word in the same cycle (docs/fpga.md, "Why the core stops near 90 MHz").
The block RAM's output register (0.95 ns clock-to-out) would take the RAM out of those paths
at one more cycle of fetch latency: one more fill cycle per macro instruction, one more bubble
per JUMP or CALL (its target is known a cycle later) and per redirect (a taken BRANCH, a ULOOP,
a RET). This counts those events with ``sim.cycles.MicroSim`` on the sequencer's directed
timing programs and seeded random programs, and reports the added cycles as an upper bound:
every added cycle is counted as if the engines waited for the sequencer.

It also counts the shifts (micro-instructions whose ALU op is SHL, SHR or SRA): the cycles a
two-cycle shift in X would add, the other way past the X stage's ALU loop (``x_prev`` ->
shifters -> the result's registers, 8 LUT levels, docs/fpga.md).

    python -m scripts.fetch_cost [--random N] [--seed S] [--json]
"""

import argparse
import json
import sys

from sim import isa
from sim.asm import assemble
from sim.cycles import MicroSim
from sim.isa import UAlu, USeq

_SHIFTS = (UAlu.SHL, UAlu.SHR, UAlu.SRA)

__all__ = ["count_events", "estimate"]


class _Counting(MicroSim):
    """``MicroSim`` that counts the micro-instructions that go with a JUMP or CALL ``seq``,
    those that redirect (two bubbles in the model) and the shifts."""
    jumps = 0
    redirects = 0
    shifts = 0

    def _micro(self, w, *args, **kwargs):
        out = super()._micro(w, *args, **kwargs)
        if out[0] == "ok":
            u = isa.unpack(isa.MICRO_FIELDS, w)
            self.jumps += u["seq"] in (USeq.JUMP, USeq.CALL)
            self.shifts += u["alu"] in _SHIFTS
            self.redirects += out[5] == 2
        return out


def count_events(words, *, cost, pmem_depth=1024):
    """Cycles, macro instructions retired, JUMP/CALLs, redirects and shifts of one program."""
    m = _Counting(words, pmem_depth=pmem_depth, cost=cost).run()
    return {"cycles": m.cycle, "macro": m.retired, "jumps": m.jumps,
            "redirects": m.redirects, "shifts": m.shifts}


def estimate(programs, *, cost):
    """Per program and in total: the events and ``added`` = macro + jumps + redirects, the
    cycles a registered control store would add at most (``shifts``: a two-cycle shift)."""
    rows = {}
    total = {"cycles": 0, "macro": 0, "jumps": 0, "redirects": 0, "shifts": 0}
    for name, src in programs.items():
        ev = count_events(assemble(src), cost=cost)
        ev["added"] = ev["macro"] + ev["jumps"] + ev["redirects"]
        rows[name] = ev
        for k in total:
            total[k] += ev[k]
    total["added"] = total["macro"] + total["jumps"] + total["redirects"]
    total["added_pct"] = round(100 * total["added"] / max(total["cycles"], 1), 1)
    total["shifts_pct"] = round(100 * total["shifts"] / max(total["cycles"], 1), 1)
    return {"programs": rows, "total": total}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.fetch_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=20,
                        help="seeded random programs besides the directed ones (default 20)")
    parser.add_argument("--seed", type=int, default=1000, help="first random seed")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if args.random < 0:
        parser.error(f"--random must be 0 or more, not {args.random}")
    from cocotb_tests.test_sequencer_progs import random_program
    from cocotb_tests.test_sequencer_timing import DIRECTED, test_cost
    programs = dict(DIRECTED)
    programs.update({f"random {args.seed + i}": random_program(args.seed + i)
                     for i in range(args.random)})
    result = estimate(programs, cost=test_cost)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for name, ev in result["programs"].items():
        print(f"{name:>14}: {ev['cycles']:6d} cycles, {ev['macro']:4d} macro, "
              f"{ev['jumps']:3d} jumps, {ev['redirects']:4d} redirects: +{ev['added']}; "
              f"{ev['shifts']:4d} shifts")
    t = result["total"]
    print(f"{'total':>14}: {t['cycles']:6d} cycles, +{t['added']} ({t['added_pct']} %, an "
          f"upper bound) with a registered control store; +{t['shifts']} "
          f"({t['shifts_pct']} %) with a two-cycle shift")
    return 0


if __name__ == "__main__":
    sys.exit(main())
