"""The fast Verilator backend (``fastsim/``): bit-exact with the cocotb path, robust to bad
input and to a crash of the model.

On a 2x2 BF16 core (its build takes about a minute the first time, cached afterwards; the
default build, with gated engine clocks, ``fastsim.gate``):

* every workload of ``fastsim.workloads`` passes its own check (reference simulator or float32
  emulation) and gives the same readback, error, cycle count and counters as the same Image
  run under cocotb on Icarus (``cocotb_tests/test_image_run.py``, AxiRam without latency);
  one with read / write latency too;
* random whole-core programs: a short fuzz against the reference simulator (the long one,
  100,000 programs, is in the long set) and a few programs against cocotb;
* a program that never finishes stops at the cycle limit with STATUS in the message; bad
  arguments raise naming the parameter; a killed or hung model is a ``FastSimError``.
"""

import os
import signal

import pytest

import fastsim
from fastsim import FastCore, FastSimError, fuzz, workloads
from fastsim.compare import compare, run_cocotb_image
from sim.asm import assemble
from sim.config import CoreConfig
from sim.image import Image

pytestmark = pytest.mark.skipif(not fastsim.available(), reason="needs Verilator and g++")

#: The small core of the bit-exactness tests.
SMALL = CoreConfig(rows=2, sbuf_depth=1024, psum_depth=64, formats=("bf16",))
#: The same with a 128-bit DMA bus (the harness's memory then moves VlWide<4> beats).
WIDE = CoreConfig(rows=2, sbuf_depth=1024, psum_depth=64, formats=("bf16",),
                  dma_data_width=128)


@pytest.fixture(scope="module")
def core():
    with FastCore(SMALL) as c:
        yield c


# -- arguments (no build) -------------------------------------------------------------------
def test_bad_arguments():
    with pytest.raises(TypeError, match="config must be a sim.config.CoreConfig"):
        FastCore({"rows": 2})
    with pytest.raises(ValueError, match="wave_window needs waves="):
        FastCore(SMALL, wave_window=(0, 10))
    with pytest.raises(ValueError, match="wave_window must be"):
        FastCore(SMALL, waves="x.fst", wave_window=(10, 5))
    with pytest.raises(ValueError, match="read latency must be an integer from 0"):
        FastCore(SMALL, latency=(-1, 0))
    with pytest.raises(ValueError, match="cxx_opt must be one of"):
        FastCore(SMALL, cxx_opt="-O9")
    with pytest.raises(ValueError, match="threads must be one of 1, 2, not 3"):
        FastCore(SMALL, threads=3)
    with pytest.raises(TypeError, match="pgo must be a bool, not 1"):
        FastCore(SMALL, pgo=1)
    with pytest.raises(ValueError, match="exe must be an executable harness"):
        FastCore(SMALL, exe="/nonexistent/Vharness")
    with pytest.raises(ValueError, match="compiler must be one of gcc, clang, not 'icc'"):
        FastCore(SMALL, compiler="icc")
    with pytest.raises(ValueError, match="hier must be one of none, merge, pe, add, lane, not 'x'"):
        FastCore(SMALL, hier="x")
    with pytest.raises(ValueError, match="pgo needs hier='none' or 'merge', not 'pe'"):
        FastCore(SMALL, hier="pe", pgo=True)
    with pytest.raises(ValueError, match="pgo needs compiler='gcc', not 'clang'"):
        FastCore(SMALL, pgo=True, compiler="clang")
    with pytest.raises(ValueError, match="workload must be one of"):
        workloads.build("nope", SMALL)
    with pytest.raises(TypeError, match="config must be"):
        fuzz.run("core4", 1, 1)


def test_default_compiler(monkeypatch):
    """g++ unless FASTSIM_COMPILER says clang; g++ always for PGO and traced builds."""
    from fastsim.build import default_compiler
    monkeypatch.delenv("FASTSIM_COMPILER", raising=False)
    assert default_compiler() == "gcc"
    monkeypatch.setenv("FASTSIM_COMPILER", "clang")
    assert (default_compiler(), default_compiler(pgo=True), default_compiler(trace=True)) == \
        ("clang", "gcc", "gcc")
    monkeypatch.setenv("FASTSIM_COMPILER", "icc")
    with pytest.raises(ValueError, match="FASTSIM_COMPILER must be one of gcc, clang, not 'icc'"):
        default_compiler()


def test_build_arguments():
    """Build options are checked before anything is built."""
    from fastsim.build import build
    with pytest.raises(TypeError, match="verilator_args must be a sequence of option strings"):
        build(SMALL, verilator_args="-fno-expand")
    with pytest.raises(TypeError, match="verilator_args must be a sequence of option strings"):
        build(SMALL, verilator_args=("-fno-expand", ""))
    with pytest.raises(ValueError, match="cxx_opt must be one of -O0, -O1, -O2, -O3, -Os, -Oz"):
        build(SMALL, cxx_opt="-Ofast")


@pytest.mark.parametrize("level", ["-O1", "-O3", "-Oz"])
def test_clang_gets_the_level(tmp_path, level):
    """A clang build compiles at its own level: zig's driver maps -O1 and -O3 to clang's -O2
    and -Oz to -Os, and the build's compiler script hands the level to clang itself."""
    import subprocess
    from fastsim.build import _cxx, clang_available
    if not clang_available():
        pytest.skip("needs the ziglang wheel")
    assert _cxx("gcc", tmp_path, level) is None
    src = tmp_path / "t.cpp"
    # A text of its own, so that zig's cache cannot skip the compile (and its -v line).
    src.write_text(f"int f(int x) {{ return x * {tmp_path.stat().st_ino % 9973}; }}\n")
    out = subprocess.run([str(_cxx("clang", tmp_path, level)), level, "-v", "-c", str(src),
                          "-o", str(tmp_path / "t.o")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    cc1 = [line.split() for line in out.stderr.splitlines() if " -cc1 " in line]
    assert cc1, out.stderr
    assert [a for a in cc1[0] if a[:2] == "-O" and len(a) == 3][-1] == level


# -- bit-exact with cocotb ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_workload_matches_cocotb(core, name):
    image, check = workloads.build(name, SMALL, seed=5)
    fast = core.run_image(image)
    check(fast)
    slow = run_cocotb_image(SMALL, image, simulator="icarus")
    check(slow)
    assert compare(slow, fast) == [], (name, compare(slow, fast))
    assert fast.cycles == slow.cycles and fast.cycles > 0


@pytest.mark.parametrize("latency", [1, 3])
def test_latency_matches_cocotb(core, latency):
    image, check = workloads.build("gemm", SMALL, seed=6, KT=2, MT=1, N=8)
    core.set_latency(latency, latency)
    try:
        fast = core.run_image(image)
    finally:
        core.set_latency(0, 0)
    check(fast)
    slow = run_cocotb_image(SMALL, image, simulator="icarus", latency=latency)
    assert compare(slow, fast) == []
    base = core.run_image(image)
    assert fast.cycles > base.cycles        # the latency is really there


@pytest.mark.long
def test_wide_dma_matches_cocotb():
    """A 128-bit DMA bus: full-width read beats, strobed write beats, with and without
    latency, cycle for cycle as AxiRam."""
    image, check = workloads.build("gemm", WIDE, seed=7, KT=2, MT=1, N=8)
    with FastCore(WIDE) as core:
        for latency in (0, 2):
            core.set_latency(latency, latency)
            fast = core.run_image(image)
            check(fast)
            slow = run_cocotb_image(WIDE, image, simulator="icarus", latency=latency)
            assert compare(slow, fast) == [], (latency, compare(slow, fast))


def test_random_programs_match_cocotb(core):
    """Whole-core random programs (the fuzz's), one Image each, on both paths."""
    import numpy as np
    for ps in (11, 12, 13):
        words = assemble(fuzz.core_program(ps, SMALL))
        mem = np.random.default_rng(ps).integers(0, 256, 0x4000, dtype=np.uint8).tobytes()
        image = Image(program=words, memory=[(0, mem)], readback=[(0, 0x4000)],
                      max_cycles=200_000)
        # SBUF and PSUM zero, as after the reset of the cocotb run.
        core.run_image(fuzz.scrub_image(SMALL))
        fast = core.run_image(image)
        slow = run_cocotb_image(SMALL, image, simulator="icarus")
        # Cycle-exact, so even a program with a race leaves the same memory on both.
        assert compare(slow, fast) == [], (ps, compare(slow, fast))


def test_falling_edge_not_evaluated(core):
    """The harness does not evaluate the model at the falling clock edge (the default): the
    same executable evaluating it (``falling="eval"``) gives the same outcome and activity,
    cycle for cycle, and evaluating it changes none of the outputs the harness reads
    (``falling="check"`` stops the harness if one changes) on every workload, with memory
    latency, and on random programs."""
    exe = core.exe      # fresh processes of the fixture's executable: the same history
    with FastCore(SMALL, exe=exe) as fast, FastCore(SMALL, exe=exe, falling="eval") as ref, \
            FastCore(SMALL, exe=exe, falling="check", latency=(2, 1)) as checked:
        for name in workloads.WORKLOADS:
            image, check = workloads.build(name, SMALL, seed=3)
            outs = []
            for c in (fast, ref, checked):
                c.record_activity(True)
                outs.append((c.run_image(image), c.activity()))
                c.record_activity(False)
            (a, act_a), (b, act_b), (lat, _) = outs
            if check is not None:
                check(a)
                check(lat)
            assert compare(b, a) == [] and a.cycles == b.cycles and act_a == act_b, name
        runs = [fuzz.run(SMALL, seed=17, count=20, core=c) for c in (fast, ref, checked)]
        assert all(r["mismatch_count"] == 0 for r in runs), runs
        assert runs[0]["cycles"] == runs[1]["cycles"]
    with pytest.raises(ValueError, match="falling must be one of skip, eval, check, not 'x'"):
        FastCore(SMALL, exe=exe, falling="x")


# -- the fuzz --------------------------------------------------------------------------------
def test_fuzz_short():
    # A fresh core: the fuzz's reference runs assume the state of a core that ran nothing
    # but the fuzz (docs/simulation.md, Fuzz).
    rec = fuzz.run(SMALL, seed=int(os.environ.get("FASTSIM_FUZZ_SEED", "7")), count=200)
    assert rec["mismatch_count"] == 0, rec["mismatches"]
    assert rec["compared_memory"] > 50 and rec["errors"] > 10, rec


def test_fuzz_on_a_used_core(core):
    """The fuzz on a core that ran other images first: the streaming GEMM leaves its X at
    ``fuzz.ZEROS`` in external memory (kept across START and reset), so a scrub that did not
    write its own zeros loaded them into SBUF (program 7000029 differed)."""
    image, check = workloads.build("gemm_stream", SMALL, seed=5)
    check(core.run_image(image))
    assert any(core.memory.read(fuzz.ZEROS, 4 * SMALL.sbuf_depth))
    rec = fuzz.run(SMALL, seed=7, count=30, core=core)
    assert rec["mismatch_count"] == 0, rec["mismatches"]


@pytest.mark.long
def test_fuzz_long():
    """100,000 random programs against the reference simulator, 0 mismatches."""
    rec = fuzz.run(SMALL, seed=int(os.environ.get("FASTSIM_FUZZ_SEED", "100")),
                   count=100_000)
    assert rec["mismatch_count"] == 0, rec["mismatches"]


def test_fuzz_is_a_pure_function():
    a = fuzz.run(SMALL, seed=3, count=20)
    b = fuzz.run(SMALL, seed=3, count=20)
    for r in (a, b):
        r.pop("wall_s")
    assert a == b


# -- bad input and crashes --------------------------------------------------------------------
def test_never_finishes_stops_at_cycle_limit(core):
    image = Image(program=assemble("li r5, 0x7FFFFFFF\nloop r5, L\nnop\nL: endloop\nhalt\n"),
                  max_cycles=5_000)
    c0 = core.cycle
    with pytest.raises(TimeoutError, match="STATUS 0x"):
        core.run_image(image)
    assert core.cycle - c0 < 20_000
    host = core.host()
    assert host.status()["busy"]
    host.abort()
    core.run(2_000)
    assert not host.status()["busy"]
    image, check = workloads.build("gemm", SMALL, seed=2, KT=1, MT=1, N=4)
    check(core.run_image(image))            # the core is usable afterwards


def test_reset_takes_effect_at_once(core):
    """``reset(1)`` of a busy core: one cycle of reset, then one without, and the core is idle
    (the model's reset is a register the harness writes and settles, fastsim.reset: a
    reset the next-state logic saw late would leave the core busy)."""
    image = Image(program=assemble("li r5, 0x7FFFFFFF\nloop r5, L\nnop\nL: endloop\nhalt\n"),
                  max_cycles=2_000)
    with pytest.raises(TimeoutError, match="STATUS 0x"):
        core.run_image(image)
    host = core.host()
    assert host.status()["busy"]
    c0 = core.cycle
    core.reset(1)
    assert core.cycle - c0 == 2
    assert not host.status()["busy"]
    image, check = workloads.build("gemm", SMALL, seed=2, KT=1, MT=1, N=4)
    check(core.run_image(image))


def test_bad_transport_arguments(core):
    t = core.transport
    with pytest.raises(ValueError, match="addr must be an integer from 0 to 65535"):
        t.read32(0x10000)
    with pytest.raises(ValueError, match="addr must be an integer from 0 to 4294967295"):
        core.memory.write(-4, b"x")
    with pytest.raises(ValueError, match="cycles must be an integer"):
        core.run(-1)


def test_crash_is_an_exception():
    with FastCore(SMALL) as c:
        os.kill(c._proc.pid, signal.SIGSEGV)
        with pytest.raises(FastSimError, match=r"exited with signal 11 during cycle"):
            c.cycle
        with pytest.raises(FastSimError, match="closed"):
            c.cycle


def test_hang_is_an_exception():
    with FastCore(SMALL, timeout=0.5) as c:
        with pytest.raises(FastSimError, match="did not answer run"):
            c.run(10 ** 12)


@pytest.mark.long
def test_waves_window(tmp_path):
    """An FST of a window of cycles (a separate build with tracing)."""
    path = tmp_path / "w.fst"
    with FastCore(SMALL, waves=path, wave_window=(100, 300)) as c:
        image, check = workloads.build("gemm", SMALL, seed=2, KT=1, MT=1, N=4)
        check(c.run_image(image))
    assert path.exists() and path.stat().st_size > 1000


@pytest.mark.long
def test_pgo_build_is_cycle_exact():
    """The profile-guided build (compiled twice around its training run) gives the same
    outcome, cycle for cycle, as the plain build on workloads outside its training set."""
    from fastsim.build import build_info
    image, check = workloads.build("gemm", SMALL, seed=8, KT=2, MT=1, N=8)
    with FastCore(SMALL, pgo=True) as pgo, FastCore(SMALL, pgo=False) as plain:
        info = build_info(pgo.exe)
        assert info["pgo"] and info["training_cycles"] > 10_000, info
        a, b = pgo.run_image(image), plain.run_image(image)
        check(a)
        assert compare(b, a) == [] and a.cycles == b.cycles
        ra, rb = (fuzz.run(SMALL, seed=9, count=30, core=c) for c in (pgo, plain))
        assert ra["mismatch_count"] == 0, ra["mismatches"]
        assert ra["cycles"] == rb["cycles"]


@pytest.mark.long
def test_compilers_are_cycle_exact():
    """A model compiled by g++ and one compiled by clang give the same outcome, cycle for
    cycle, on a workload and on random programs."""
    from fastsim.build import build_info, clang_available
    if not clang_available():
        pytest.skip("needs the ziglang wheel")
    image, check = workloads.build("attention", SMALL, seed=8)
    with FastCore(SMALL, compiler="gcc") as gcc, FastCore(SMALL, compiler="clang") as clang:
        assert (build_info(gcc.exe)["compiler"], build_info(clang.exe)["compiler"]) == \
            ("gcc", "clang")
        a, b = clang.run_image(image), gcc.run_image(image)
        check(a)
        assert compare(b, a) == [] and a.cycles == b.cycles
        ra, rb = (fuzz.run(SMALL, seed=11, count=30, core=c) for c in (clang, gcc))
        assert ra["mismatch_count"] == 0, ra["mismatches"]
        assert ra["cycles"] == rb["cycles"]


@pytest.mark.long
def test_reset_register_is_cycle_exact():
    """The model with the reset made a register (the default, fastsim.reset) and the model of
    the reset input give the same outcome, activity and cycle counts on a workload, on random
    programs and across a reset of a busy core (the cycles after it show when the core saw
    it)."""
    from fastsim.build import build, build_info
    image, check = workloads.build("attention", SMALL, seed=8)
    spin = Image(program=assemble("li r5, 0x7FFFFFFF\nloop r5, L\nnop\nL: endloop\nhalt\n"),
                 max_cycles=1_000)
    exe = build(SMALL, reset_register=False)
    assert build_info(exe)["reset_register"] is False
    with FastCore(SMALL) as new, FastCore(SMALL, exe=exe) as plain:
        runs = []
        for c in (new, plain):
            c.record_activity(True)
            out = c.run_image(image)
            with pytest.raises(TimeoutError):
                c.run_image(spin)
            c.activity()
            c0 = c.cycle
            c.reset(3)
            c.run(40)
            runs.append((out, c.activity(), c.cycle - c0, c.host().status()))
            c.record_activity(False)
        (a, act_a, n_a, st_a), (b, act_b, n_b, st_b) = runs
        check(a)
        assert compare(b, a) == [] and a.cycles == b.cycles
        assert act_a == act_b and n_a == n_b == 44 and st_a == st_b and not st_a["busy"]
        ra, rb = (fuzz.run(SMALL, seed=13, count=30, core=c) for c in (new, plain))
        assert ra["mismatch_count"] == 0, ra["mismatches"]
        assert ra["cycles"] == rb["cycles"]


@pytest.mark.long
@pytest.mark.parametrize("hier", ["merge", "pe", "add", "lane"])
def test_structures_are_cycle_exact(hier):
    """A model of merged modules, with or without hierarchy blocks, gives the same outcome,
    cycle for cycle, as the model of Amaranth's Verilog, on a workload and on random
    programs."""
    from fastsim.build import build_info
    image, check = workloads.build("attention", SMALL, seed=8)
    with FastCore(SMALL, hier=hier) as new, FastCore(SMALL, hier="none") as plain:
        assert build_info(new.exe)["hier"] == hier
        a, b = new.run_image(image), plain.run_image(image)
        check(a)
        assert compare(b, a) == [] and a.cycles == b.cycles
        ra, rb = (fuzz.run(SMALL, seed=13, count=30, core=c) for c in (new, plain))
        assert ra["mismatch_count"] == 0, ra["mismatches"]
        assert ra["cycles"] == rb["cycles"]
