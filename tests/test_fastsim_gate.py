"""Gated engine clocks of the fast backend (``fastsim/gate.py``): the vector and tensor engines
clocked only when they may change state give the outcome of the ungated model, cycle for
cycle.

The gated and the ungated runs use one executable (``FastCore.gate(enabled=False)`` clocks
every engine at every edge), so only the gating differs: memory, error, cycle counts,
performance counters and the per-cycle activity port must be identical on every workload, on
random programs and across a reset of a busy core. A gate without its drain count
(``drain=0``) must differ, and the gated clocks must really be idle for most of a GEMM's
cycles.
"""

import dataclasses

import pytest

import fastsim
from fastsim import FastCore, fuzz, workloads
from fastsim.compare import compare
from fastsim.gate import ENGINES, drain_cycles, gate_clocks, gate_terms
from sim.asm import assemble
from sim.config import CoreConfig
from sim.image import Image

#: The bit of each engine in the activity port (``rtl.core.top.ACTIVITY_LAYOUT``).
ACTIVITY_BIT = {"tensor": 3, "vector": 4}
#: The small core of the bit-exactness tests (as tests/test_fastsim.py).
SMALL = CoreConfig(rows=2, sbuf_depth=1024, psum_depth=64, formats=("bf16",))

_TOP = """module top(a, clk, rst_d, o);
  input clk;
  wire clk;
  reg rst = 1'h0;
  wire \\busy$1 ;
  wire v;
  wire idle;
  wire [3:0] d;
  output o;
  \\top.vector  vector (
    .busy(\\busy$1 ),
    .clk(clk),
    .cmd__valid(v),
    .cmd__payload(d),
    .idle_q(idle),
    .reset(1'h0),
    .\\rst$140 (rst)
  );
endmodule
"""


def test_gate_rewrite():
    """The instance gets its own clock; the gate ORs its valid, busy and reset ports and the
    inverse of idle_q (a constant 0 port is left out, a payload never taken)."""
    assert gate_terms(_TOP, "vector") == [("\\busy$1", False), ("v", False), ("idle", True),
                                          ("rst", False)]
    text = gate_clocks(_TOP, ("vector",), {"vector": 7})
    assert "module top(a, clk, rst_d, o, clk_vector, gate_vector, gate_vector_drain);" in text
    assert ".clk(clk_vector)" in text and ".clk(clk)" not in text
    assert "assign gate_vector = \\busy$1  | v  | ~idle  | rst ;" in text
    assert "assign gate_vector_drain = 16'd7;" in text
    with pytest.raises(ValueError, match="no instance 'tensor'"):
        gate_clocks(_TOP, ("tensor",), {"tensor": 1})
    with pytest.raises(ValueError, match="engines must be a subset"):
        gate_clocks(_TOP, ("dma",), {})
    with pytest.raises(ValueError, match="4 bits wide"):
        gate_terms(_TOP.replace(".cmd__payload(d)", ".\\cmd__valid$2 (d)"), "vector")
    with pytest.raises(TypeError, match="config must be"):
        drain_cycles({"rows": 2}, "vector")
    with pytest.raises(ValueError, match="engine must be one of"):
        drain_cycles(SMALL, "dma")


def test_default_gate(monkeypatch):
    """FASTSIM_GATE chooses the gated engines of a build unless told."""
    from fastsim.build import DEFAULT_GATE, default_gate
    monkeypatch.delenv("FASTSIM_GATE", raising=False)
    assert default_gate() == DEFAULT_GATE
    monkeypatch.setenv("FASTSIM_GATE", "none")
    assert default_gate() == ()
    monkeypatch.setenv("FASTSIM_GATE", "tensor, vector")
    assert default_gate() == ("tensor", "vector")
    monkeypatch.setenv("FASTSIM_GATE", "dma")
    with pytest.raises(ValueError, match="FASTSIM_GATE must be one of vector, tensor"):
        default_gate()


pytestmark_build = pytest.mark.skipif(not fastsim.available(), reason="needs Verilator and g++")


@pytest.fixture(scope="module")
def cores():
    """Two processes of one gated executable with the same history: gated, and ungated
    (``gate(enabled=False)``)."""
    with FastCore(SMALL, gate=ENGINES) as gated:
        with FastCore(SMALL, exe=gated.exe) as plain:
            plain.gate(enabled=False)
            yield gated, plain


def _run(core, image):
    """Outcome, activity, the gated clocks' edges and the status registers after ``image``
    on ``core``."""
    before = core.gate()["edges"]
    core.record_activity(True)
    try:
        out = core.run_image(image)
        act = core.activity()
    finally:
        core.record_activity(False)
    after = core.gate()
    edges = {e: after["edges"][e] - before[e] for e in after["engines"]}
    return out, act, edges, core.host().status()


def _same(a, b, what):
    (out_a, act_a, _, st_a), (out_b, act_b, _, st_b) = a, b
    assert compare(out_b, out_a) == [], (what, compare(out_b, out_a))
    assert out_a.cycles == out_b.cycles and out_a.counters == out_b.counters, what
    assert act_a == act_b and st_a == st_b, what


@pytestmark_build
def test_gate_reports_its_engines(cores):
    gated, plain = cores
    g = gated.gate()
    assert g["engines"] == ["vector", "tensor"] and g["enabled"]
    assert g["drain"] == {e: drain_cycles(SMALL, e) for e in ENGINES}
    assert not plain.gate()["enabled"]
    with pytest.raises(ValueError, match="drain needs enabled"):
        gated.gate(drain=3)
    with pytest.raises(TypeError, match="enabled"):
        gated.gate(enabled=1)


@pytestmark_build
@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_gated_workload_is_cycle_exact(cores, name):
    """Every workload: the same outcome, counters, cycles and activity gated and ungated;
    the ungated engines are clocked at every edge."""
    image, check = workloads.build(name, SMALL, seed=5)
    a, b = (_run(c, image) for c in cores)
    check(a[0])
    _same(a, b, name)
    c0, c1 = cores[1].gate()["cycles"], cores[0].gate()["cycles"]
    assert c0 == c1
    assert all(n >= len(b[1]) for n in b[2].values())


@pytestmark_build
def test_gate_idles_the_engines(cores):
    """The gated clocks rise in every cycle the activity port shows an engine busy, and a
    GEMM (host traffic included) leaves the vector engine's clock idle for most of its
    cycles (so the gate is not inert)."""
    image, _ = workloads.build("gemm_stream", SMALL, seed=3, NC=8, NCH=8)
    a, b = (_run(c, image) for c in cores)
    _same(a, b, "gemm_stream")
    act, edges = a[1], a[2]
    busy = {e: sum(x >> ACTIVITY_BIT[e] & 1 for x in act) for e in ENGINES}
    assert busy["vector"] <= edges["vector"] < 0.5 * len(act), (busy, edges, len(act))
    assert busy["tensor"] <= edges["tensor"] < len(act), (busy, edges, len(act))


@pytestmark_build
def test_gated_random_programs_are_cycle_exact(cores):
    """Random whole-core programs (the fuzz's): gated agrees with the reference simulator and
    with the ungated run, cycle for cycle."""
    ra, rb = (fuzz.run(SMALL, seed=21, count=40, core=c) for c in cores)
    assert ra["mismatch_count"] == 0, ra["mismatches"]
    assert ra["cycles"] == rb["cycles"]


@pytestmark_build
def test_gated_reset_of_a_busy_core(cores):
    """A reset while a program runs: the cycles after it and the status agree."""
    spin = Image(program=assemble("li r5, 0x7FFFFFFF\nloop r5, L\nnop\nL: endloop\nhalt\n"),
                 max_cycles=1_000)
    image, _ = workloads.build("attention", SMALL, seed=8)
    runs = []
    for c in cores:
        with pytest.raises(TimeoutError):
            c.run_image(spin)
        c.reset(3)
        runs.append(_run(c, image))
    _same(*runs, "reset")


@pytestmark_build
def test_gate_without_drain_differs(cores):
    """The drain count is needed: with none, the gated engines stop before their pipelines
    and generators have settled, and the run differs from the ungated one (or never
    finishes)."""
    image, _ = workloads.build("attention", SMALL, seed=8)
    with FastCore(SMALL, exe=cores[0].exe) as short, FastCore(SMALL, exe=cores[0].exe) as plain:
        short.gate(enabled=True, drain=0)
        plain.gate(enabled=False)
        b, act_b, _, _ = _run(plain, image)
        image = dataclasses.replace(image, max_cycles=2 * b.cycles)
        try:
            a, act_a, _, _ = _run(short, image)
        except TimeoutError:
            return
    assert compare(b, a) != [] or a.cycles != b.cycles or act_a != act_b


@pytestmark_build
def test_gate_outputs_settled_before_the_edge(cores):
    """The gate outputs the harness reads before an edge are those of the settled model:
    evaluating the falling edge (``falling="check"``, with memory latency) changes none of
    them outside host transactions, and the outcome is that of the ungated model."""
    exe = cores[0].exe
    with FastCore(SMALL, exe=exe, falling="check", latency=(2, 1)) as checked, \
            FastCore(SMALL, exe=exe, latency=(2, 1)) as plain:
        plain.gate(enabled=False)
        for name in workloads.WORKLOADS:
            image, check = workloads.build(name, SMALL, seed=4)
            a, b = (_run(c, image) for c in (checked, plain))
            if check is not None:
                check(a[0])
            _same(a, b, name)
        ra, rb = (fuzz.run(SMALL, seed=19, count=20, core=c) for c in (checked, plain))
        assert ra["mismatch_count"] == 0 and ra["cycles"] == rb["cycles"], ra["mismatches"]


@pytest.mark.long
@pytestmark_build
def test_gated_build_matches_ungated_build():
    """The gated model and a model built with every engine on ``clk`` (``gate=()``, not the
    runtime switch) give the same outcome, counters, status, cycles and activity on every
    workload and on random programs."""
    from fastsim.build import build, build_info
    exe = build(SMALL, gate=())
    assert build_info(exe)["gate"] == []
    with FastCore(SMALL, gate=ENGINES) as gated, FastCore(SMALL, exe=exe) as plain:
        assert plain.gate()["engines"] == []
        for name in workloads.WORKLOADS:
            image, check = workloads.build(name, SMALL, seed=6)
            a, b = (_run(c, image) for c in (gated, plain))
            if check is not None:
                check(a[0])
            _same(a, b, name)
        ra, rb = (fuzz.run(SMALL, seed=23, count=40, core=c) for c in (gated, plain))
        assert ra["mismatch_count"] == 0 and ra["cycles"] == rb["cycles"], ra["mismatches"]
