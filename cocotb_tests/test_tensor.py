"""cocotb tests of ``rtl.tensor.engine.TensorEngine`` against ``sim.tensor`` (bit-exact).

A stationary driver, a moving driver and a result monitor run concurrently, each sampling its
handshake in the ReadOnly phase of a cycle; drivers insert random idle cycles and the monitor
random back-pressure. Every result beat (all ``cols`` lanes, including the zero lanes >= M) is
compared with ``sim.tensor.column_sums`` in the hardware's accumulation order. Failures print
the seed, the instruction and the operands.

The pytest wrapper at the bottom runs the module on Icarus and Verilator for a few array
configurations; ``python -m scripts.bench tensor`` runs the ``bench`` test (skipped otherwise).
"""

import json
import os
import random

import numpy as np

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.streams import StreamMonitor, StreamSink, StreamSource
from cocotb_tests.common.tb import logged_seed, pack_lanes, unpack_lanes
from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from sim.dtypes import Format
from sim.tensor import column_sums, random_operands

LANE = 16


def _cfg():
    cfg = dut_config()
    cfg["formats"] = [Format[f] for f in cfg["formats"]]
    D = max(cfg["add_stages"], 1) if any(f != Format.INT8 for f in cfg["formats"]) else 1
    cfg["row_delay"] = D
    cfg.setdefault("accumulate", "fp32")
    fused = cfg["accumulate"] == "fused" and any(f != Format.INT8 for f in cfg["formats"])
    # Fused accumulation: the column normalisers' min(add_stages, 2) registers.
    norm = min(cfg["add_stages"], 2) if fused else 0
    cfg["latency"] = cfg["mul_stages"] + cfg["rows"] * D + norm + cfg["cols"]
    cfg["drain"] = (cfg["rows"] - 1) * D + cfg["cols"]
    return cfg


class Instr:
    """One matmul: operands, and whether its moving group keeps the tile for the next one."""

    def __init__(self, fmt, st, mv, reuse=False, mode="normal"):
        self.fmt, self.st, self.mv, self.reuse, self.mode = Format(fmt), st, mv, reuse, mode
        self.keep = False          # set when the next instruction reuses this tile
        self.K, self.M = st.shape
        self.N = mv.shape[1]

    def __repr__(self):
        return (f"Instr(fmt={self.fmt.name}, K={self.K}, M={self.M}, N={self.N}, "
                f"reuse={self.reuse}, keep={self.keep}, mode={self.mode})")


def make_instr(rng, cfg, fmt=None, K=None, M=None, N=None, mode=None, prev=None, reuse=False,
               n_max=64):
    """A random instruction; with ``reuse`` it takes ``prev``'s tile (and K, M, fmt)."""
    if reuse:
        fmt, st = prev.fmt, prev.st
        K = st.shape[0]
    else:
        fmt = Format(fmt if fmt is not None else int(rng.choice(cfg["formats"])))
        K = K or int(rng.integers(1, cfg["rows"] + 1))
        M = M or int(rng.integers(1, cfg["cols"] + 1))
    mode = mode or str(rng.choice(["normal", "normal", "special", "wide"]))
    if not reuse:
        st = random_operands(rng, fmt, (K, M), mode)
    N = N or int(rng.integers(1, n_max + 1))
    mv = random_operands(rng, fmt, (K, N), mode)
    ins = Instr(fmt, st, mv, reuse=reuse, mode=mode)
    if reuse:
        prev.keep = True
    return ins


def make_program(rng, cfg, count, n_max=64, reuse_p=0.2):
    prog = []
    for _ in range(count):
        reuse = bool(prog) and rng.random() < reuse_p
        prog.append(make_instr(rng, cfg, prev=prog[-1] if prog else None, reuse=reuse,
                               n_max=n_max))
    return prog


async def drive_stationary(dut, cfg, prog, rnd, idle_p):
    """The stationary columns of every instruction that loads a tile, with random idles."""
    rows = cfg["rows"]
    src = StreamSource(dut, "stationary", rng=rnd, idle_p=idle_p)
    for ins in prog:
        if ins.reuse:
            continue
        for m in range(ins.M):
            col = [int(ins.st[k, m]) if k < ins.K else 0 for k in range(rows)]
            await src.send(pack_lanes(col, LANE) | (int(ins.fmt) << (LANE * rows))
                           | (int(m == ins.M - 1) << (LANE * rows + 3)))


async def drive_moving(dut, cfg, prog, rnd, idle_p):
    """The moving columns of every instruction (``moving_keep`` with the last beat of a group
    whose tile the next instruction reuses), with random idles."""
    rows = cfg["rows"]
    src = StreamSource(dut, "moving", rng=rnd, idle_p=idle_p)
    for ins in prog:
        for n in range(ins.N):
            col = [int(ins.mv[k, n]) if k < ins.K else 0 for k in range(rows)]
            last = n == ins.N - 1
            await src.send(pack_lanes(col, LANE) | (int(last) << (LANE * rows)),
                           moving_keep=int(last and ins.keep))
    dut.moving_keep.value = 0


async def monitor_result(dut, cfg, total, rnd, ready_p, out, times=None):
    """Collect ``total`` result beats as (lanes, last) with random back-pressure, checking
    the stream protocol; ``times`` gets the cycle of each."""
    cols = cfg["cols"]
    monitor = StreamMonitor(dut, "result")
    sink = StreamSink(dut, "result", rng=rnd, ready_p=ready_p)
    beats = await sink.collect(total, times=times)
    monitor.stop()
    monitor.check()
    out.extend((unpack_lanes(v, 32, cols), (v >> (32 * cols)) & 1) for v in beats)


def check(cfg, prog, got, seed):
    rows, cols = cfg["rows"], cfg["cols"]
    i = 0
    bad = []
    for j, ins in enumerate(prog):
        exp = column_sums(ins.st, ins.mv, ins.fmt, rows=rows, cols=cols,
                          accumulate=cfg["accumulate"])
        for n in range(ins.N):
            lanes, last = got[i]
            i += 1
            want = [int(x) for x in exp[:, n]]
            if lanes != want or last != int(n == ins.N - 1):
                bad.append(f"instr {j} {ins} beat {n}: got "
                           f"{[hex(x) for x in lanes]} last={last}, expected "
                           f"{[hex(x) for x in want]} last={int(n == ins.N - 1)}; "
                           f"moving[:, n]={[hex(int(x)) for x in ins.mv[:, n]]} "
                           f"stationary={[[hex(int(x)) for x in r] for r in ins.st]}")
    assert len(got) == i, f"{len(got)} beats received, {i} expected"
    assert not bad, (f"seed {seed}: {len(bad)} of {i} beats mismatch:\n" + "\n".join(bad[:5]))
    return i


async def start(dut):
    """Start the clock and reset the engine with its streams idle."""
    start_clock(dut)
    dut.stationary__valid.value = 0
    dut.moving__valid.value = 0
    dut.moving_keep.value = 0
    dut.result__ready.value = 0
    await reset(dut)


async def run_program(dut, cfg, prog, seed, st_idle=0.0, mv_idle=0.0, ready_p=1.0):
    rnd = random.Random(seed)
    await start(dut)
    got = []
    total = sum(ins.N for ins in prog)
    cocotb.start_soon(drive_stationary(dut, cfg, prog, random.Random(seed + 1), st_idle))
    cocotb.start_soon(drive_moving(dut, cfg, prog, random.Random(seed + 2), mv_idle))
    await monitor_result(dut, cfg, total, rnd, ready_p, got)
    n = check(cfg, prog, got, seed)
    fmts = sorted({ins.fmt.name for ins in prog})
    dut._log.info(f"seed {seed}: {len(prog)} instructions, {n} beats bit-exact ({', '.join(fmts)})")
    return n


@cocotb.test()
async def test_random_stress(dut):
    """Random shapes and formats, random idles on both inputs and random back-pressure."""
    cfg = _cfg()
    seed = logged_seed(dut)
    rng = np.random.default_rng(seed)
    prog = make_program(rng, cfg, cfg.get("n_instr", 12), n_max=cfg.get("n_max", 40))
    await run_program(dut, cfg, prog, seed, st_idle=0.3, mv_idle=0.2, ready_p=0.6)


@cocotb.test()
async def test_every_format(dut):
    """Every configured format, full and partial tiles, one long group (N in the hundreds)."""
    cfg = _cfg()
    seed = logged_seed(dut, 11)
    rng = np.random.default_rng(seed)
    rows, cols = cfg["rows"], cfg["cols"]
    prog = []
    for fmt in cfg["formats"]:
        for mode in ("normal", "special", "wide"):
            prog.append(make_instr(rng, cfg, fmt=fmt, K=rows, M=cols, N=int(rng.integers(1, 9)),
                                   mode=mode))
        prog.append(make_instr(rng, cfg, fmt=fmt, K=1, M=1, N=1, mode="normal"))
    if Format.INT8 in cfg["formats"]:
        # Largest column sums: (-128) x (-128) and (-128) x 127 in every row.
        prog.append(Instr(Format.INT8, np.full((rows, cols), 0x80, np.uint64),
                          np.array([[0x80, 0x7F, 0x80, 0x01]] * rows, np.uint64)))
    prog.append(make_instr(rng, cfg, K=rows, M=cols, N=cfg.get("n_long", 300), mode="normal"))
    await run_program(dut, cfg, prog, seed, st_idle=0.1, mv_idle=0.1, ready_p=0.8)


@cocotb.test()
async def test_heavy_backpressure(dut):
    """Output ready 15% of the time: the array must stall without loss or duplication, and
    tile loads must respect the bank still in use."""
    cfg = _cfg()
    seed = logged_seed(dut, 22)
    rng = np.random.default_rng(seed)
    prog = make_program(rng, cfg, 6, n_max=12, reuse_p=0.3)
    await run_program(dut, cfg, prog, seed, st_idle=0.0, mv_idle=0.0, ready_p=0.15)


@cocotb.test()
async def test_back_to_back(dut):
    """Full tiles back to back (with reloads, then reusing the tile), N = 8 x rows, no idles and
    no back-pressure: after the first result, one result beat every cycle (no bubble), and
    the first result ``latency`` cycles after the first moving beat."""
    cfg = _cfg()
    seed = logged_seed(dut, 33)
    rng = np.random.default_rng(seed)
    rows, cols = cfg["rows"], cfg["cols"]
    N = 8 * rows
    assert N >= cfg["drain"] + cols, "configuration too deep for the no-bubble claim"
    prog = [make_instr(rng, cfg, fmt=cfg["formats"][i % len(cfg["formats"])], K=rows, M=cols,
                       N=N, mode="normal") for i in range(4)]
    prog.append(make_instr(rng, cfg, N=N, prev=prog[-1], reuse=True, mode="normal"))
    prog.append(make_instr(rng, cfg, N=N, prev=prog[-1], reuse=True, mode="normal"))
    await start(dut)
    got, times = [], []
    total = sum(ins.N for ins in prog)
    cocotb.start_soon(drive_stationary(dut, cfg, prog, random.Random(seed), 0.0))
    first_in = []

    async def watch_first():
        cycle = 0
        while not first_in:
            await ReadOnly()
            if dut.moving__valid.value and dut.moving__ready.value:
                first_in.append(cycle)
            await RisingEdge(dut.clk)
            cycle += 1

    cocotb.start_soon(watch_first())
    cocotb.start_soon(drive_moving(dut, cfg, prog, random.Random(seed), 0.0))
    await monitor_result(dut, cfg, total, random.Random(seed), 1.0, got, times)
    check(cfg, prog, got, seed)
    span = times[-1] - times[0] + 1
    assert span == total, f"{span} cycles for {total} beats: {span - total} bubbles"
    assert times[0] - first_in[0] == cfg["latency"], \
        f"first result after {times[0] - first_in[0]} cycles, documented {cfg['latency']}"
    dut._log.info(f"seed {seed}: {total} beats in {span} cycles, latency {cfg['latency']}")


@cocotb.test()
async def test_reset_midstream(dut):
    """Reset during a group forgets tiles and in-flight beats; the next program is exact."""
    cfg = _cfg()
    seed = logged_seed(dut, 44)
    rng = np.random.default_rng(seed)
    await start(dut)
    junk = make_program(rng, cfg, 2, n_max=20, reuse_p=0)
    t1 = cocotb.start_soon(drive_stationary(dut, cfg, junk, random.Random(seed), 0.0))
    t2 = cocotb.start_soon(drive_moving(dut, cfg, junk, random.Random(seed), 0.0))
    for _ in range(cfg["cols"] + 5):
        await RisingEdge(dut.clk)
    t1.cancel()
    t2.cancel()
    prog = make_program(rng, cfg, 3, n_max=20)
    await run_program(dut, cfg, prog, seed, st_idle=0.2, mv_idle=0.2, ready_p=0.7)


@cocotb.test(skip=os.environ.get("TENSOR_BENCH_OUT") is None)
async def bench(dut):
    """Benchmark (run by scripts/bench_tensor.py): for each (K-tiles, N) in the sweep, stream
    ``tiles`` full tiles back to back and record cycles from the first moving beat to the last
    result beat. No checking of values here beyond the count (the tests above do that)."""
    cfg = _cfg()
    sweep = json.loads(os.environ["TENSOR_BENCH_SWEEP"])
    rng = np.random.default_rng(1)
    rows, cols = cfg["rows"], cfg["cols"]
    results = []
    start_clock(dut)
    for point in sweep:
        tiles, N, fmt = point["tiles"], point["N"], Format[point["fmt"]]
        dut.stationary__valid.value = 0
        dut.moving__valid.value = 0
        dut.moving_keep.value = 0
        dut.result__ready.value = 1
        await reset(dut)
        prog = [make_instr(rng, cfg, fmt=fmt, K=rows, M=cols, N=N, mode="normal")
                for _ in range(tiles)]
        got, times = [], []
        first_in, first_st, last_in = [], [], [0]
        cycle = [0]

        async def watch():
            while True:
                await ReadOnly()
                if dut.moving__valid.value and dut.moving__ready.value:
                    if not first_in:
                        first_in.append(cycle[0])
                    last_in[0] = cycle[0]
                if not first_st and dut.stationary__valid.value and dut.stationary__ready.value:
                    first_st.append(cycle[0])
                await RisingEdge(dut.clk)
                cycle[0] += 1

        w = cocotb.start_soon(watch())
        cocotb.start_soon(drive_stationary(dut, cfg, prog, random.Random(1), 0.0))
        cocotb.start_soon(drive_moving(dut, cfg, prog, random.Random(1), 0.0))
        await monitor_result(dut, cfg, tiles * N, random.Random(1), 1.0, got, times)
        w.cancel()
        check(cfg, prog, got, 1)        # raises on any mismatch
        ok = True
        results.append({**point, "first_stationary": first_st[0], "first_moving": first_in[0],
                        "last_moving": last_in[0], "first_result": times[0],
                        "last_result": times[-1], "checked": ok})
    with open(os.environ["TENSOR_BENCH_OUT"], "w") as f:
        json.dump(results, f)


# --- pytest wrapper (not collected by cocotb) -------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - cocotb's import of this module in the simulator
    pytest = None

if pytest is not None:
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    #: (rows, cols, formats, mul_stages, add_stages, marks)
    CONFIGS = {
        "4x4": (4, 4, ["INT8", "FP8_E4M3", "FP8_E5M2", "FP8_E3M4", "BF16", "FP16"], 1, 2, ()),
        "8x8i": (8, 8, ["INT8"], 1, 1, ()),
        # the FPGA core2's array: every multiplier step and three adder steps registered
        "2x2s43": (2, 2, ["INT8", "FP8_E4M3", "FP8_E5M2", "FP8_E3M4", "BF16", "FP16"], 4, 3,
                   ()),
        "8x8": (8, 8, ["INT8", "FP8_E4M3", "FP8_E5M2", "FP8_E3M4", "BF16", "FP16"], 0, 0,
                (pytest.mark.long,)),
        "16x8": (16, 8, ["INT8", "FP8_E4M3", "FP8_E5M2", "BF16", "FP16"], 2, 3,
                 (pytest.mark.long,)),
    }
    TESTS = ["test_random_stress", "test_every_format", "test_heavy_backpressure",
             "test_back_to_back", "test_reset_midstream"]

    #: The MULT18X18D model that an ECP5 netlist (``ecp5=True`` below) is simulated with.
    MULT18X18D_MODEL = os.path.join(os.path.dirname(__file__), "..", "fpga", "sim",
                                    "MULT18X18D.v")

    def engine_factory(rows, cols, formats, mul_stages, add_stages, *, dsp_regs=False,
                       ecp5=False, accumulate="fp32"):
        """The engine; with ``ecp5`` elaborated as for an ECP5 (``rtl.arith.dsp``: the
        multipliers' registers in MULT18X18D instances, simulated with
        :data:`MULT18X18D_MODEL`)."""
        def make():
            from rtl.tensor.engine import TensorEngine
            engine = TensorEngine(rows, cols, {Format[f] for f in formats},
                                  mul_stages=mul_stages, add_stages=add_stages,
                                  dsp_regs=dsp_regs, accumulate=accumulate)
            return _OnECP5(engine) if ecp5 else engine
        return make

    from amaranth.hdl import Fragment, Module
    from amaranth.lib import wiring

    class _OnECP5(wiring.Component):
        """``inner`` (a Component) elaborated for the ECP5 whatever the platform, behind
        ports of the same names."""

        def __init__(self, inner):
            self._inner = inner
            super().__init__(inner.signature)

        def elaborate(self, platform):
            from rtl.arith.dsp import ECP5_TARGET
            m = Module()
            inner = self._inner
            m.submodules.inner = Fragment.get(inner, ECP5_TARGET)
            for (_, member, outer), (_, _, value) in zip(self.signature.flatten(self),
                                                         inner.signature.flatten(inner)):
                if member.flow == wiring.In:
                    m.d.comb += value.eq(outer)
                else:
                    m.d.comb += outer.eq(value)
            return m

    def config_of(name, **extra):
        rows, cols, formats, ms, as_, _ = CONFIGS[name]
        return {"rows": rows, "cols": cols, "formats": formats, "mul_stages": ms,
                "add_stages": as_, **extra}

    #: Configurations whose Verilator run (mostly its build) is in the long set: the same
    #: formats run on Verilator by default in 2x2s43, the 4x4 on Icarus.
    LONG_ON_VERILATOR = {"4x4"}

    @pytest.mark.parametrize("simulator, name", [
        pytest.param(s, n, marks=(pytest.mark.long,) if s == "verilator"
                     and n in LONG_ON_VERILATOR else c[5], id=f"{n}-{s}")
        for n, c in CONFIGS.items() for s in SIMULATORS])
    def test_tensor_engine(simulator, name):
        rows, cols, formats, ms, as_, _ = CONFIGS[name]
        cfg = config_of(name)
        if simulator == "icarus" and rows * cols > 16:
            cfg.update(n_instr=8, n_long=200)
        run_cocotb(engine_factory(rows, cols, formats, ms, as_), name=f"tensor_{name}",
                   config=cfg, test_module="cocotb_tests.test_tensor", simulator=simulator,
                   testcase=TESTS)

    #: Fused accumulation (``accumulate="fused"``): (rows, cols, formats, mul_stages,
    #: add_stages, ecp5, marks); the first has core8c's formats and stages (and INT8), the
    #: second core2c's shape with one format (Verilator: long); ``ecp5``: the ECP5 netlist
    #: (one MULT18X18D per PE with its input and output registers, the behavioural model).
    FUSED_CONFIGS = {
        "4x4f": (4, 4, ["INT8", "FP8_E4M3", "FP8_E5M2", "BF16"], 4, 3, False, ()),
        "2x2bf": (2, 2, ["BF16"], 4, 3, False, ()),
        "4x4f_ecp5": (4, 4, ["INT8", "FP8_E4M3", "FP8_E5M2", "BF16"], 4, 3, True, ()),
        "2x2f_ecp5": (2, 2, ["FP8_E4M3", "BF16"], 1, 1, True, ()),
        "8x8f": (8, 8, ["INT8", "FP8_E4M3", "FP8_E5M2", "FP8_E3M4", "BF16", "FP16"], 1, 2,
                 False, (pytest.mark.long,)),
    }

    @pytest.mark.parametrize("simulator, name", [
        pytest.param(s, n, marks=c[6] if n == "4x4f" or s == "icarus" else (pytest.mark.long,),
                     id=f"{n}-{s}")
        for n, c in FUSED_CONFIGS.items() for s in SIMULATORS])
    def test_tensor_engine_fused(simulator, name):
        """Fused column accumulation: bit-exact against ``sim.tensor`` (``accumulate=
        "fused"``), latency ``norm_stages`` longer."""
        rows, cols, formats, ms, as_, ecp5, _ = FUSED_CONFIGS[name]
        cfg = {"rows": rows, "cols": cols, "formats": formats, "mul_stages": ms,
               "add_stages": as_, "accumulate": "fused", "ecp5": ecp5}
        if rows * cols <= 16:
            cfg.update(n_instr=6, n_long=60)
        elif simulator == "icarus":
            cfg.update(n_instr=8, n_long=200)
        run_cocotb(engine_factory(rows, cols, formats, ms, as_, accumulate="fused", ecp5=ecp5),
                   name=f"tensor_{name}", config=cfg, test_module="cocotb_tests.test_tensor",
                   simulator=simulator, testcase=TESTS,
                   extra_sources=[MULT18X18D_MODEL] if ecp5 else ())

    #: Every stage count and netlist on Icarus; on Verilator by default the fabric netlist
    #: without multiplier stages and the ECP5 one with two, the other four in the long set.
    DSP_REGS_VERILATOR = {(0, False), (2, True)}

    @pytest.mark.parametrize("simulator, ecp5, mul_stages", [
        pytest.param(s, e, ms, id=f"{ms}-{'ecp5' if e else 'fabric'}-{s}",
                     marks=(pytest.mark.long,) if s == "verilator"
                     and (ms, e) not in DSP_REGS_VERILATOR else ())
        for ms in (0, 1, 2) for e in (False, True) for s in SIMULATORS])
    def test_tensor_engine_dsp_regs(simulator, ecp5, mul_stages):
        """8x8 INT8 with ``dsp_regs``: bit-exact and the same latency as without; ``ecp5``
        simulates the ECP5 netlist (the DSP blocks' input and output registers in the
        behavioural MULT18X18D, stalls through their clock enables)."""
        name = f"8x8i_dsp_s{mul_stages}" + ("_ecp5" if ecp5 else "")
        cfg = {"rows": 8, "cols": 8, "formats": ["INT8"], "mul_stages": mul_stages,
               "add_stages": 1, "dsp_regs": True, "ecp5": ecp5}
        if simulator == "icarus":
            cfg.update(n_instr=8, n_long=200)
        run_cocotb(engine_factory(8, 8, ["INT8"], mul_stages, 1, dsp_regs=True, ecp5=ecp5),
                   name=f"tensor_{name}", config=cfg, test_module="cocotb_tests.test_tensor",
                   simulator=simulator, testcase=TESTS,
                   extra_sources=[MULT18X18D_MODEL] if ecp5 else ())

    def _unused(component):
        component._MustUse__silence = True          # only its parameters are read
        return component

    @pytest.mark.parametrize("mul_stages, out_reg", [(0, "NONE"), (1, "CLK0"), (3, "CLK0")])
    def test_dsp_regs_netlist(mul_stages, out_reg):
        """``dsp_regs``: one MULT18X18D per PE on the ECP5, with its output register when
        there is a product stage for it; none elsewhere; the latency is unchanged."""
        import re
        from amaranth.back import verilog
        from rtl.arith.dsp import ECP5_TARGET
        from rtl.tensor.engine import TensorEngine
        make = engine_factory(2, 3, ["INT8"], mul_stages, 1, dsp_regs=True)
        text = verilog.convert(make(), name="top", platform=ECP5_TARGET)
        assert text.count("MULT18X18D ") == 6
        assert set(re.findall(r'REG_OUTPUT_CLK\("(\w+)"\)', text)) == {out_reg}
        assert "MULT18X18D" not in verilog.convert(make(), name="top")
        plain = _unused(TensorEngine(2, 3, {Format.INT8}, mul_stages=mul_stages))
        dsp = _unused(make())
        assert (dsp.latency, dsp.drain) == (plain.latency, plain.drain)

    def test_dsp_regs_parameter():
        import gc
        import warnings
        from amaranth.hdl import UnusedElaboratable
        from rtl.tensor.array import SystolicArray
        from rtl.tensor.engine import TensorEngine
        from rtl.tensor.pe import ProcessingElement
        int8, fp = {Format.INT8}, {Format.INT8, Format.BF16}
        units = ((ProcessingElement, ()), (SystolicArray, (2, 2)), (TensorEngine, (2, 2)))
        for cls, args in units:
            assert _unused(cls(*args, int8)).dsp_regs is False
            assert _unused(cls(*args, int8, dsp_regs=True)).dsp_regs is True
        with warnings.catch_warnings():      # (the refused components are never elaborated)
            warnings.simplefilter("ignore", UnusedElaboratable)
            for cls, args in units:
                with pytest.raises(TypeError, match=r"^dsp_regs must be a bool, not 1$"):
                    cls(*args, int8, dsp_regs=1)
                with pytest.raises(ValueError, match=r"^dsp_regs must be False when formats "
                                                     r"include a floating-point format"):
                    cls(*args, fp, dsp_regs=True)
            gc.collect()
