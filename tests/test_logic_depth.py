"""scripts.logic_depth on small hand-written netlists (levels, slice-local hops, carry chains,
block RAM starts, RTL lines, the command line), and (marked fpga_build) on a unit that yosys
synthesizes, against a shallower version of the same unit."""

import json

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from scripts.logic_depth import DELAYS, analyse, attach_routed, by_module, histogram, main

_FF = {"CLK": "input", "DI": "input", "M": "input", "CE": "input", "LSR": "input",
       "Q": "output"}
_LUT = {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"}


def _ff(d, q, src="rtl/x.py:1"):
    return {"type": "TRELLIS_FF", "port_directions": _FF,
            "connections": {"CLK": [2], "DI": [d], "Q": [q]}, "attributes": {"src": src}}


def _lut(ins, z):
    conn = {p: [b] for p, b in zip("ABCD", ins)}
    conn["Z"] = [z]
    return {"type": "LUT4", "port_directions": _LUT, "connections": conn, "attributes": {}}


def _netlist(cells):
    return {"modules": {"top": {"cells": cells}}}


def _chain(n, prefix="u.", first=10):
    """A register, ``n`` LUT4s in series, a register: ``n`` + 1 routed hops."""
    cells = {f"{prefix}q0": _ff("0", first)}
    bit = first
    for i in range(n):
        cells[f"{prefix}lut{i}"] = _lut([bit, "0", "0", "0"], bit + 1)
        bit += 1
    cells[f"{prefix}q1"] = _ff(bit, 1000 + first, src="rtl/x.py:9")
    return cells


def test_lut_chain_levels_and_estimate():
    ends = analyse(_netlist(_chain(3)))
    end = next(e for e in ends if e["end"] == "u.q1.DI")
    assert end["levels"] == 4                  # FF -> LUT -> LUT -> LUT -> FF: 4 routed nets
    assert end["path"] == ["u.q0", "u.lut0", "u.lut1", "u.lut2"]
    expect = DELAYS["clk_q"] + 4 * DELAYS["route"] + 3 * DELAYS["lut"] + DELAYS["setup"]
    assert end["estimate_ns"] == pytest.approx(expect, abs=0.01)
    assert end["rtl_lines"] == ["rtl/x.py:1", "rtl/x.py:9"]
    assert end["module"] == "u"


def test_start_filter(tmp_path, capsys):
    path = tmp_path / "n.json"
    path.write_text(json.dumps(_netlist({**_chain(2, "a.", 10), **_chain(5, "b.", 100)})))
    assert main([str(path), "--json", "--start", "a.q0"]) == 0
    assert [e["end"] for e in json.loads(capsys.readouterr().out)["ends"]] == ["a.q1.DI"]
    assert main([str(path), "--json", "--start", "nowhere"]) == 0
    assert json.loads(capsys.readouterr().out)["ends"] == []


def test_deepest_first_and_histogram():
    cells = {**_chain(2, "a.", 10), **_chain(5, "b.", 100)}
    ends = analyse(_netlist(cells))
    assert ends[0]["end"] == "b.q1.DI" and ends[0]["levels"] == 6
    assert histogram(ends)[6] == 1 and histogram(ends)[3] == 1
    groups = by_module(ends, 4)
    assert [g["module"] for g in groups] == ["b"]


def test_slice_local_hops_are_free():
    # LUT4 -> PFUMX (ALUT) inside one slice: the mux adds delay but no routed level.
    cells = _chain(1)
    cells["u.q1"]["connections"]["DI"] = [20]
    cells["u.mux"] = {"type": "PFUMX",
                      "port_directions": {"ALUT": "input", "BLUT": "input", "C0": "input",
                                          "Z": "output"},
                      "connections": {"ALUT": [11], "BLUT": ["0"], "C0": ["1"], "Z": [20]}}
    end = next(e for e in analyse(_netlist(cells)) if e["end"] == "u.q1.DI")
    assert end["levels"] == 2


def test_carry_chain_counts_one_level():
    ccu = {p: "input" for p in ("A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1", "CIN")}
    ccu.update(S0="output", S1="output", COUT="output")
    cells = {"q0": _ff("0", 10), "q1": _ff(40, 50)}
    cin = "0"
    for i in range(8):                         # a 16-bit carry chain fed by q0
        cells[f"c{i}"] = {"type": "CCU2C", "port_directions": ccu,
                          "connections": {"A0": [10], "CIN": [cin] if cin != "0" else ["0"],
                                          "S0": [200 + i], "S1": [300 + i],
                                          "COUT": [20 + i]}}
        cin = 20 + i
    cells["c7"]["connections"]["S1"] = [40]
    end = next(e for e in analyse(_netlist(cells)) if e["end"] == "q1.DI")
    assert end["levels"] == 2                  # q0 -> chain entry, chain exit -> q1
    assert end["estimate_ns"] > DELAYS["clk_q"] + 2 * DELAYS["route"] + 7 * DELAYS["carry"]


def test_block_ram_output_starts_late():
    ram = {"type": "DP16KD", "port_directions": {"CLKA": "input", "DOA0": "output",
                                                  "ADA0": "input"},
           "connections": {"CLKA": [2], "DOA0": [30], "ADA0": [10]}}
    cells = {"q0": _ff("0", 10), "ram": ram, "q1": _ff(30, 31)}
    ends = {e["end"]: e for e in analyse(_netlist(cells))}
    assert ends["q1.DI"]["estimate_ns"] == pytest.approx(
        DELAYS["bram_q"] + DELAYS["route"] + DELAYS["setup"], abs=0.01)
    assert ends["ram.ADA0"]["levels"] == 1     # a RAM address input is an end point


def test_dsp_with_input_registers_starts_and_ends_paths():
    """A MULT18X18D with its A and B inputs registered (``rtl.arith.dsp``) is where a path
    ends (its inputs) and starts (its product, ``dsp_q`` after the clock), as nextpnr times
    it; without the registers the block is combinational between its neighbours."""
    def dsp(registered):
        prm = {"REG_INPUTA_CLK": "CLK0", "REG_INPUTB_CLK": "CLK0"} if registered else {}
        return {"type": "MULT18X18D", "parameters": prm,
                "port_directions": {"A0": "input", "B0": "input", "CLK0": "input",
                                    "P0": "output"},
                "connections": {"A0": [11], "B0": ["0"], "CLK0": [2], "P0": [30]}}
    for registered in (True, False):
        cells = {"q0": _ff("0", 10), "lut": _lut([10, "0", "0", "0"], 11),
                 "m": dsp(registered), "q1": _ff(30, 31)}
        ends = {e["end"]: e for e in analyse(_netlist(cells))}
        if registered:
            assert ends["q1.DI"]["path"] == ["m"] and ends["q1.DI"]["levels"] == 1
            assert ends["q1.DI"]["estimate_ns"] == pytest.approx(
                DELAYS["dsp_q"] + DELAYS["route"] + DELAYS["setup"], abs=0.01)
            assert ends["m.A0"]["path"] == ["q0", "lut"] and ends["m.A0"]["levels"] == 2
        else:
            assert ends["q1.DI"]["path"] == ["q0", "lut", "m"]
            assert "m.A0" not in ends


def test_unknown_top_is_an_error():
    with pytest.raises(ValueError, match="no module 'core'"):
        analyse(_netlist({}), top="core")


def test_command_line(tmp_path, capsys):
    path = tmp_path / "top.json"
    path.write_text(json.dumps(_netlist({**_chain(2, "a.", 10), **_chain(5, "b.", 100)})))
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "levels: 3: 1, 6: 1" in out and "b.q1.DI" in out and "a.q1" not in out
    assert main([str(path), "--json", "--min-levels", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["end"] for e in data["ends"]] == ["b.q1.DI"]
    assert main([str(path), "--by-module"]) == 0
    assert "b" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing.json")])
    with pytest.raises(SystemExit):
        main([str(path), "--top", "0"])


def test_routed_arrivals_rank_the_ends(tmp_path, capsys):
    # The shallow chain routed slower than the deep one (placement decides): --routed ranks
    # by nextpnr's arrival, and --over keeps the late ones.
    path = tmp_path / "top.json"
    path.write_text(json.dumps(_netlist({**_chain(2, "a.", 10), **_chain(5, "b.", 100)})))
    timing = {"detailed_net_timings": [
        {"net": "x", "endpoints": [{"cell": "a.q1", "port": "DI", "delay": [1.0, 12.5]}]},
        {"net": "y", "endpoints": [{"cell": "b.q1", "port": "DI", "delay": [2.0, 9.0]},
                                   {"cell": "b.q1", "port": "CE", "delay": [2.0, 9.5]}]}]}
    cells = {**_chain(2, "a.", 10), **_chain(5, "b.", 100), **_chain(7, "c.", 200)}
    cells["b.q1"]["connections"]["CE"] = [10]          # a.q0 -> b.q1's CE: one hop
    routed = {("a.q1", "DI"): 12.5, ("b.q1", "DI"): 9.0, ("b.q1", "CE"): 9.5}
    ends = attach_routed(analyse(_netlist(cells)), routed)
    assert [(e["end"], e.get("routed_ns"), e.get("routed_port")) for e in ends] == \
        [("a.q1.DI", 12.5, "DI"), ("b.q1.DI", 9.5, "CE"), ("c.q1.DI", None, None)]
    # With the per-port figures the routed port's path is shown: CE, one level from a.q0.
    ends = attach_routed(analyse(_netlist(cells), per_port=True), routed)
    b = ends[1]
    assert (b["end"], b["levels"], b["path"]) == ("b.q1.CE", 1, ["a.q0"])
    assert ends[0]["path"] == ["a.q0", "a.lut0", "a.lut1"]
    # nextpnr may report a flip-flop's D at M where the netlist has DI: the DI path is shown.
    ends = attach_routed(analyse(_netlist(cells), per_port=True), {("a.q1", "M"): 12.5})
    assert (ends[0]["end"], ends[0]["routed_port"], ends[0]["levels"]) == ("a.q1.DI", "M", 3)
    tpath = tmp_path / "top.timing.json"
    tpath.write_text(json.dumps(timing))
    assert main([str(path), "--routed", str(tpath), "--over", "10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 end points later than 10.0 ns (routed; one per cell")
    assert "12.50 ns routed at DI" in out and "b.q1" not in out
    assert main([str(path), "--routed", str(tpath), "--over", "5", "--by-module"]) == 0
    out = capsys.readouterr().out
    assert " 12.50 ns      1 ends  a" in out and "  9.50 ns      1 ends  b" in out
    with pytest.raises(SystemExit):          # --over without --routed
        main([str(path), "--over", "10"])
    tpath.write_text(json.dumps({"detailed_net_timings": []}))
    with pytest.raises(SystemExit):          # no arrival matches the netlist
        main([str(path), "--routed", str(tpath)])


class _Adders(wiring.Component):
    """``a + b`` and ``c + d`` compared and mixed; ``split`` registers the two sums."""

    def __init__(self, split):
        self._split = split
        super().__init__({"a": In(24), "b": In(24), "c": In(24), "d": In(24), "o": Out(24)})

    def elaborate(self, platform):
        m = Module()
        ab, cd = Signal(24), Signal(24)
        domain = m.d.sync if self._split else m.d.comb
        domain += [ab.eq(self.a + self.b), cd.eq(self.c + self.d)]
        m.d.comb += self.o.eq(ab ^ (cd >> 3) ^ (ab < cd))
        return m


@pytest.mark.fpga_build
def test_unit_depth_sees_a_register_cut():
    from scripts.unit_fmax import unit_depth
    deep = unit_depth(lambda: _Adders(False), "adders_comb")
    shallow = unit_depth(lambda: _Adders(True), "adders_split")
    assert deep[0]["levels"] > shallow[0]["levels"]
