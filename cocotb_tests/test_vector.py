"""cocotb tests of the vector/activation engine (rtl/vector/engine.py) against the golden model
``sim.vector.VectorEngineModel``, bit for bit.

Every stream has a driver or sink with seeded random idle cycles (``valid`` gaps) and
back-pressure (``ready`` low); the seed is ``COCOTB_RANDOM_SEED`` and is logged with every
mismatch. Tables are compiled by ``sim.lut.compile_table`` and loaded through ``cfg`` at run
time: a function that is not shipped is loaded and used without regenerating the Verilog.
"""

import math
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.config import dut_config
from cocotb_tests.common.streams import (Scoreboard, StreamMonitor, StreamSink, StreamSource,
                                         seeded_rng)
from cocotb_tests.common.tb import pack_lanes, random_seed, unpack_lanes
from sim.dtypes import Format, RoundMode
from sim.lut import TableSpec, compile_table
from sim.tables import SHIPPED
from sim.vector import (AccOp, AluOp, Hdr, Src, Status, VectorEngineModel, coef_addr,
                        desc_addr, element_cycles, hdr_addr, pack_cmd, status_addr, unpack_cmd)

F32_EDGES = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0x40000000, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
    0x7FC00000, 0x7F800001, 0xFFC00000, 0x40400000, 0x3A83126F, 0x7149F2CA, 0x42C80000,
    0xC2C80000, 0x42B16666, 0xC2AF0000, 0x42FF0000, 0xC3000000, 0x43000000, 0x3EFFFFFF,
    0xBF000000, 0x3FC00000, 0x40490FDB, 0xC0490FDB, 0x41800000, 0xC1800000, 0x3C000000,
    0x34000000, 0x4B000001, 0xCB7FFFFF,
]


def rand_f32(rng, lo_exp=110, hi_exp=140):
    s = rng.getrandbits(1)
    e = rng.randint(lo_exp, hi_exp)
    return (s << 31) | (e << 23) | rng.getrandbits(23)


def beats_of(values, lanes):
    values = list(values)
    while len(values) % lanes:
        values.append(values[len(values) % lanes])
    return [values[i:i + lanes] for i in range(0, len(values), lanes)]


class Tb:
    def __init__(self, dut, rng, seed, idle=0.3, stall=0.3):
        self.dut = dut
        self.cfg = dut_config()
        self.lanes = self.cfg["lanes"]
        self.depth = self.cfg["depth"]
        self.rng = rng
        self.seed = seed
        self.idle = idle
        self.stall = stall
        self.model = VectorEngineModel(self.lanes, self.depth, seed=0)
        self.sources = {n: StreamSource(dut, n, rng=rng) for n in ("cmd", "a", "b", "cfg")}
        for n in self.sources:
            getattr(dut, f"{n}__payload").value = 0
        self.sinks = {n: StreamSink(dut, n, rng=rng) for n in ("o", "rdata")}
        self.monitors = [StreamMonitor(dut, n) for n in ("o", "rdata")]
        dut.seed.value = 0
        dut.seed_load.value = 0

    async def source(self, name, beats):
        """Send ``beats`` on stream ``name`` with idle cycles of probability ``idle``."""
        src = self.sources[name]
        src.idle_p = self.idle
        await src.send_all(beats)

    async def sink(self, name, n, out, timeout=20000, hold=0):
        """Take ``n`` beats into ``out``, ready low for the first ``hold`` cycles, then low with
        probability ``stall``."""
        snk = self.sinks[name]
        snk.ready_p = 1.0 - self.stall
        if hold:
            snk.ready.value = 0
            await ClockCycles(self.dut.clk, hold)
        out.extend(await snk.collect(n, timeout=timeout))

    async def cfg_write(self, writes):
        beats = [(a & 0xFFFF) | ((d & 0xFFFFFFFF) << 16) | (1 << 48) for a, d in writes]
        await self.source("cfg", beats)
        for a, d in writes:
            self.model.cfg_write(a, d)

    async def cfg_read(self, addrs):
        beats = [a & 0xFFFF for a in addrs]
        got = []
        snk = cocotb.start_soon(self.sink("rdata", len(addrs), got))
        await self.source("cfg", beats)
        await snk
        exp = [self.model.cfg_read(a) for a in addrs]
        return got, exp

    async def load(self, table, bank):
        await self.cfg_write(table.writes(bank))

    async def run(self, cmd, a_vals=(), b_pro=(), b_vals=(), what="", hold=0):
        """Run one instruction: a_vals / b_vals are flat lists of raw values (lanes-major
        beats), b_pro a list of prologue beats (lists of lanes values); ``o`` is held
        (ready low) for the first ``hold`` cycles."""
        lanes = self.lanes
        fields = unpack_cmd(pack_cmd(**cmd))
        a_beats = beats_of(a_vals, lanes) if len(a_vals) else []
        b_beats = list(b_pro) + (beats_of(b_vals, lanes) if len(b_vals) else [])
        fields["count"] = len(a_beats)
        expected = self.model.execute(fields, a_beats, b_beats)
        got = []
        snk = cocotb.start_soon(self.sink("o", len(expected), got, hold=hold))
        tasks = [cocotb.start_soon(self.source("cmd", [pack_cmd(**fields)]))]
        if a_beats:
            tasks.append(cocotb.start_soon(self.source("a", [pack_lanes(x, 32)
                                                              for x in a_beats])))
        if b_beats:
            tasks.append(cocotb.start_soon(self.source("b", [pack_lanes(x, 32)
                                                              for x in b_beats])))
        t0 = get_sim_time(unit="ns")
        for t in tasks:
            await t
        await snk
        self.cycles = round((get_sim_time(unit="ns") - t0) / PERIOD_NS)

        def describe(i):
            ins = a_beats[i] if i < len(a_beats) else None
            return f"inputs {[hex(x) for x in ins] if ins else 'acc'}"
        Scoreboard(f"{what} (seed {self.seed}) cmd {fields}", fmt=hex, describe=describe).compare(
            [unpack_lanes(g, 32, lanes) for g in got], [[int(x) for x in e] for e in expected])
        for mon in self.monitors:
            mon.check()
        return got


async def idle_q_monitor(dut, seen, rng):
    """``idle_q`` as documented: 0 whenever ``busy`` is 1 and in the cycle after
    ``idle_hold`` (driven at random here; nothing else in the engine reads it), and 1 in the
    cycle after one in which ``busy`` and ``idle_hold`` were 0 and no instruction or input beat
    was taken. ``seen`` counts the cycles each rule was checked in (a test that never checks
    them fails)."""
    prev_quiet = prev_hold = False
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        busy, idle_q = int(dut.busy.value), int(dut.idle_q.value)
        if busy:
            seen["busy"] += 1
            assert not idle_q, "idle_q is 1 while the engine is busy"
        if prev_hold:
            seen["hold"] += 1
            assert not idle_q, "idle_q is 1 in the cycle after idle_hold"
        if prev_quiet:
            seen["quiet"] += 1
            assert idle_q, "idle_q is 0 a cycle after the engine was idle and took nothing"
        took = any(int(getattr(dut, f"{s}__valid").value) and int(getattr(dut, f"{s}__ready").value)
                   for s in ("cmd", "a", "b"))
        await FallingEdge(dut.clk)
        hold = rng.random() < 0.1          # sampled at the next rising edge
        dut.idle_hold.value = int(hold)
        prev_quiet = not busy and not took and not hold
        prev_hold = hold


async def setup(dut, **kw):
    rng, seed = seeded_rng(dut), random_seed()
    start_clock(dut)
    tb = Tb(dut, rng, seed, **kw)
    dut.idle_hold.value = 0
    await reset(dut)
    tb.idle_seen = {"busy": 0, "quiet": 0, "hold": 0}
    cocotb.start_soon(idle_q_monitor(dut, tb.idle_seen, random.Random(seed + 7)))
    dut._log.info(f"seed {seed}, lanes {tb.lanes}, depth {tb.depth}")
    return tb


def act(bank=0, scale=0x3F800000, bias=0, **kw):
    d = dict(op0=AluOp.MUL, op1=AluOp.ADD, src0=Src.IMM, src1=Src.IMM, imm0=scale, imm1=bias,
             lut=1, bank=bank, emit=1, fmt_a=Format.FP32, fmt_b=Format.FP32,
             fmt_o=Format.FP32, rmode=RoundMode.RNE)
    d.update(kw)
    return d


def _has_rounding_unit():
    try:
        import rtl.round.rounding_unit  # noqa: F401
        return True
    except ImportError:
        return False


BUDGET = 48
PERIOD_NS = 10
#: Cycles of one instruction beyond one per element, without idle or back-pressure, by the
#: engine's ``deep``: take the cmd; the ALUs (short: ALU0 and ALU1 registers; deep: registers
#: before, inside and after the decoders, 4 + 1 per ALU); the LUT (short 6; deep 30: pre-scale
#: 4 + 1, range 1, binade 1 + address 1 + table read 1 + dx/table-output register 1, two
#: multiply-adds of 4 + 3 + 1, finish 3 + 1);
#: the hold register y_h; the result FIFO (2) and the register after it (1); rounding unit
#: (input register, encoder stages: short 0, deep 3, output register); the sink's closing
#: edge (a design change that adds a stage or a bubble fails the test).
THROUGH_LATENCY = {False: 1 + 2 + 6 + 1 + 2 + 1 + 2 + 1, True: 1 + 13 + 30 + 1 + 2 + 1 + 5 + 1}
#: Extra cycles per element of a summing instruction (the accumulate adder's registers).
ACC_WAIT = {False: 0, True: 3}


def through_latency(deep, subs):
    """``THROUGH_LATENCY`` of an engine with ``subs`` sub-beats per element: with fewer units
    the rounding unit encodes a beat in ``subs`` sub-beats (input register, encoder stages,
    output register) after the register that follows the FIFO, in place of the one-beat
    unit's two registers: ``subs - 1`` more cycles from two sub-beats on."""
    return THROUGH_LATENCY[deep] + (subs - 1 if subs > 1 else 0)


def subs_of(cfg):
    """Sub-beats per element beat of the configuration (``VectorEngine.subs``: lanes // units)."""
    return cfg["lanes"] // (cfg.get("units") or cfg["lanes"])


@cocotb.test()
async def test_shipped_functions(dut):
    """Every shipped function (small tables), FP32 edge cases and seeded random inputs, bit-exact;
    alternating banks."""
    tb = await setup(dut)
    rng = tb.rng
    for i, name in enumerate(SHIPPED):
        tab = compile_table(SHIPPED[name], depth=tb.depth, budget=min(BUDGET, tb.depth))
        bank = i & 1
        await tb.load(tab, bank)
        vals = list(F32_EDGES) + [rand_f32(rng, 100, 136) for _ in range(4 * tb.lanes)]
        await tb.run(act(bank=bank), vals, what=name)


@cocotb.test()
async def test_activation_scale_bias_formats(dut):
    """f(in * scale + bias): immediate and per-lane scale, per-lane bias, BF16/FP16/FP8/INT8
    inputs, BF16/FP16/E4M3/INT8 outputs with RNE and RTZ, accumulate sum/max over several
    instructions and read out."""
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    await tb.load(compile_table(SHIPPED["gelu"], depth=tb.depth, budget=BUDGET), 0)
    await tb.load(compile_table(SHIPPED["exp"], depth=tb.depth, budget=BUDGET), 1)
    scales = [0x3FC00000, 0xBF000000, 0x40200000, 0x3E800000][:lanes] + [0x3F800000] * 8
    biases = [0x3F000000, 0xBF800000, 0, 0x40000000][:lanes] + [0] * 8
    cases = [
        (Format.BF16, Format.BF16, RoundMode.RNE),
        (Format.FP16, Format.FP16, RoundMode.RTZ),
        (Format.FP8_E4M3, Format.FP8_E4M3, RoundMode.RNE),
        (Format.FP8_E5M2, Format.BF16, RoundMode.RTZ),
        (Format.FP8_E3M4, Format.FP32, RoundMode.RNE),
        (Format.INT8, Format.INT8, RoundMode.RNE),
        (Format.INT32, Format.INT32, RoundMode.RTZ),
    ]
    bits = {Format.BF16: 16, Format.FP16: 16, Format.FP8_E4M3: 8, Format.FP8_E5M2: 8,
            Format.FP8_E3M4: 8, Format.INT8: 8, Format.INT32: 32}
    for fa, fo, rm in cases:
        vals = [rng.getrandbits(bits[fa]) for _ in range(3 * lanes)]
        # immediate scale, per-lane bias (from b, FP32)
        await tb.run(act(bank=0, scale=0x3FA00000, src1=Src.LANE, fmt_a=fa, fmt_o=fo, rmode=rm),
                     vals, b_pro=[biases[:lanes]], what=f"gelu {fa.name}->{fo.name}")
        # per-lane scale and bias, exp, accumulate (softmax denominator) over two instructions
        for reset_ in (1, 0):
            await tb.run(act(bank=1, src0=Src.LANE, src1=Src.LANE, fmt_a=fa, fmt_o=fo,
                             rmode=rm, acc_op=AccOp.SUM, acc_reset=reset_, emit_acc=1),
                         vals, b_pro=[scales[:lanes], biases[:lanes]], what="exp+sum")
    # max accumulate, no elementwise output, then a read-out-only instruction
    vals = [rand_f32(rng, 120, 134) for _ in range(5 * lanes)]
    await tb.run(act(bank=0, acc_op=AccOp.MAX, acc_reset=1, emit=0), vals, what="max acc")
    await tb.run(act(bank=0, acc_op=AccOp.MAX, emit=0), vals[::-1], what="max acc 2")
    await tb.run(dict(emit_acc=1, fmt_o=Format.BF16), [], what="acc read-out")


@cocotb.test()
async def test_alu_ops(dut):
    """Tensor-tensor (every AluOp), tensor-scalar with two chained ops, reductions (sum, max,
    min), copy/cast, on edge cases and random values."""
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    edges = list(F32_EDGES)
    n = len(edges)
    a = edges + [rand_f32(rng, 118, 136) for _ in range(2 * lanes)]
    b = (edges[7:] + edges[:7]) + [rand_f32(rng, 118, 136) for _ in range(2 * lanes)]
    # equal operands for comparisons
    for i in range(0, n, 5):
        b[i] = a[i]
    for op in AluOp:
        await tb.run(dict(op0=op, op1=AluOp.BYPASS, src0=Src.TENSOR, emit=1), a, b_vals=b,
                     what=f"tt {op.name}")
    # tensor-scalar: two chained ops, immediates and per-lane registers
    pairs = [(AluOp.SUB, AluOp.MUL), (AluOp.MAX, AluOp.MIN), (AluOp.RSUB, AluOp.GE),
             (AluOp.MUL, AluOp.ADD), (AluOp.ADD, AluOp.LT)]
    for op0, op1 in pairs:
        await tb.run(dict(op0=op0, op1=op1, src0=Src.IMM, src1=Src.IMM, imm0=0x3FC00000,
                          imm1=0xC0200000, emit=1, fmt_o=Format.BF16), a,
                     what=f"ts {op0.name},{op1.name}")
        await tb.run(dict(op0=op0, op1=op1, src0=Src.LANE, src1=Src.LANE, emit=1),
                     a, b_pro=[[rand_f32(rng) for _ in range(lanes)],
                               [rand_f32(rng) for _ in range(lanes)]],
                     what=f"ts lane {op0.name},{op1.name}")
    # reductions along the free axis
    for acc in (AccOp.SUM, AccOp.MAX, AccOp.MIN):
        vals = [rand_f32(rng, 120, 132) for _ in range(6 * lanes)]
        await tb.run(dict(acc_op=acc, acc_reset=1, emit_acc=1), vals, what=f"reduce {acc.name}")
        await tb.run(dict(acc_op=acc, acc_reset=1, emit_acc=1, fmt_o=Format.BF16),
                     edges[:2 * lanes], what=f"reduce edges {acc.name}")
    # copy / cast
    for fa, fo in ((Format.FP32, Format.FP32), (Format.BF16, Format.FP32),
                   (Format.FP32, Format.BF16), (Format.FP32, Format.FP8_E5M2),
                   (Format.FP16, Format.FP8_E4M3), (Format.FP32, Format.INT8)):
        vals = edges if fa == Format.FP32 else [rng.getrandbits(16) for _ in range(2 * lanes)]
        await tb.run(dict(emit=1, fmt_a=fa, fmt_o=fo), vals, what=f"copy {fa.name}->{fo.name}")


#: INT32 words around the edges of the exact copy: FP32 can hold every integer up to 2**24
#: only; INT32 min/max; words whose bits read as FP32 NaN, Inf, subnormal or -0 (a conversion
#: or a DAZ/NaN rule anywhere on the way would change them).
INT32_EDGES = [
    16777217, 16777216, 16777215, 16777219, 19500001, -16777217 & 0xFFFFFFFF, 0x7FFFFFFF,
    0x80000000, 0x80000001, 0xFFFFFFFF, 0, 1, 0x7F800001, 0x7FC00000, 0xFF800000, 0x7F800000,
    0x00000001, 0x007FFFFF, 0x80000000 | 0x00400000, 0x4B800001, 0x12345678, 0xDEADBEEF,
]


def seed_note(tb):
    return f"seed {tb.seed}"


def requant(scale, bias=0, rmode=RoundMode.RNE, **kw):
    """The requantization command: INT32 ``x`` to INT8 ``sat(round(x * scale + bias))``."""
    d = dict(op0=AluOp.MUL, op1=AluOp.ADD, src0=Src.IMM, src1=Src.IMM, imm0=scale, imm1=bias,
             lut=0, emit=1, fmt_a=Format.INT32, fmt_b=Format.FP32, fmt_o=Format.INT8,
             rmode=rmode)
    d.update(kw)
    return d


def f32(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


@cocotb.test()
async def test_int32_exact_copy(dut):
    """An INT32 -> INT32 copy passes every 32-bit word unchanged (16777217 and INT32 min/max,
    words that read as FP32 NaN/Inf/subnormal), with and without back-pressure, an
    accumulator beat after the elements encoded as usual, and the next (converting)
    instruction unaffected."""
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    copy = dict(emit=1, fmt_a=Format.INT32, fmt_o=Format.INT32)
    vals = INT32_EDGES + [rng.getrandbits(32) for _ in range(6 * lanes)]
    for idle, stall in ((0.3, 0.3), (0.0, 0.8), (0.0, 0.0)):
        tb.idle, tb.stall = idle, stall
        got = await tb.run(copy, vals, what=f"int32 copy idle {idle} stall {stall}")
        flat = [w for g in got for w in unpack_lanes(g, 32, lanes)][:len(vals)]
        bad = [i for i, (g, v) in enumerate(zip(flat, vals)) if g != v]
        assert not bad, (f"{seed_note(tb)}: {len(bad)} of {len(vals)} words changed, first "
                         f"{vals[bad[0]]:#x} -> {flat[bad[0]]:#x}")
    tb.idle, tb.stall = 0.3, 0.3
    for rm in RoundMode:
        await tb.run(dict(copy, rmode=rm, acc_op=AccOp.MAX, acc_reset=1, emit_acc=1),
                     vals[:4 * lanes], what=f"int32 copy + acc {rm.name}")
    # Not a raw copy (an ALU op, or another format on either side): converted through FP32.
    await tb.run(dict(copy, op0=AluOp.ADD), vals, what="int32 add 0 (FP32)")
    await tb.run(dict(copy, fmt_o=Format.FP32), vals, what="int32 -> fp32")
    await tb.run(dict(copy, fmt_a=Format.FP32), vals, what="fp32 -> int32")
    await tb.run(copy, vals[::-1], what="int32 copy after")


@cocotb.test()
async def test_requantize(dut):
    """INT32 * scale + bias -> INT8: saturation at both ends, RNE ties (to even, both signs),
    INT32 min/max, NaN (gives 0), +-Inf (saturates; 0 * Inf is NaN, 0) and subnormal (DAZ)
    scales, NaN bias, per-lane scale and bias, SR; then a seeded random sweep
    (``VECTOR_SWEEP`` instructions, default 16) with back-pressure."""
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    imin, imax = 0x80000000, 0x7FFFFFFF
    ints = [5, -5 & 0xFFFFFFFF, 7, -7 & 0xFFFFFFFF, 1, 3, 0, 0xFFFFFFFF, 255, 256, 257,
            -256 & 0xFFFFFFFF, -257 & 0xFFFFFFFF, -258 & 0xFFFFFFFF, imin, imax, 16777217,
            -16777217 & 0xFFFFFFFF, 254, -254 & 0xFFFFFFFF, 253, 251]
    scales = [f32(0.5), f32(-0.5), f32(1.0), f32(2.0 ** -24), f32(1e-7), 0x7FC00000,
              0x7F800000, 0xFF800000, 0x00000001, 0, f32(1 / 3), f32(1e30)]
    for scale in scales:
        for rm in (RoundMode.RNE, RoundMode.SR):
            await tb.run(requant(scale, rmode=rm), ints,
                         what=f"requant scale {scale:#x} {rm.name}")
    # ties with a bias, and a NaN bias
    await tb.run(requant(f32(0.5), f32(0.5)), ints, what="requant bias 0.5")
    await tb.run(requant(f32(0.25), f32(-127.5)), ints, what="requant bias -127.5")
    await tb.run(requant(f32(1.0), 0x7FC00000), ints, what="requant bias NaN")
    # per-lane scale and bias (b prologue beats, FP32)
    pro = [[f32(2.0 ** -rng.randint(0, 20)) for _ in range(lanes)],
           [f32(rng.uniform(-4, 4)) for _ in range(lanes)]]
    await tb.run(requant(0, src0=Src.LANE, src1=Src.LANE), ints, b_pro=pro,
                 what="requant lane scale/bias")
    expect = _requant_numpy(ints, f32(0.5), 0)
    got = await tb.run(requant(f32(0.5)), ints, what="requant vs numpy")
    flat = [w for g in got for w in unpack_lanes(g, 32, lanes)][:len(ints)]
    assert flat == expect, (seed_note(tb), flat, expect)
    n = int(__import__("os").environ.get("VECTOR_SWEEP", "16"))
    for i in range(n):
        tb.idle, tb.stall = rng.choice([(0.3, 0.3), (0.0, 0.7), (0.6, 0.0)])
        count = rng.randint(1, 8)
        big = rng.random() < 0.5
        xs = [(rng.getrandbits(32) if big else rng.randint(-40000, 40000) & 0xFFFFFFFF)
              for _ in range(count * lanes)]
        scale = f32(rng.uniform(0.5, 2.0) * 2.0 ** -rng.randint(0, 30 if big else 9))
        if rng.random() < 0.5:
            scale ^= 0x80000000
        bias = f32(rng.uniform(-64, 64)) if rng.random() < 0.5 else 0
        rm = rng.choice([RoundMode.RNE, RoundMode.SR])
        if rng.random() < 0.3:
            await tb.run(dict(emit=1, fmt_a=Format.INT32, fmt_o=Format.INT32), xs,
                         what=f"random int32 copy {i}")
        else:
            await tb.run(requant(scale, bias, rm), xs, what=f"random requant {i}")


def _requant_numpy(xs, scale, bias):
    """INT8 words of ``sat(rne(fp32(fp32(fp32(x) * scale) + bias)))`` by numpy float32
    arithmetic and ``np.rint`` (no subnormals, NaN or Inf in the operands)."""
    x = np.array([v - (1 << 32) if v >> 31 else v for v in xs], dtype=np.int64)
    s = np.array(scale, dtype=np.uint32).view(np.float32)
    b = np.array(bias, dtype=np.uint32).view(np.float32)
    y = x.astype(np.float32) * s + b
    q = np.clip(np.rint(y.astype(np.float64)), -128, 127).astype(np.int64)
    return [int(v) & 0xFF for v in q]


@cocotb.test()
async def test_stochastic_rounding(dut):
    """Outputs through the rounding unit in SR mode (needs rtl/round/rounding_unit.py)."""
    if not _has_rounding_unit():
        dut._log.warning("rtl.round.rounding_unit missing: SR not testable, skipped")
        return
    tb = await setup(dut)
    rng = tb.rng
    await tb.load(compile_table(SHIPPED["silu"], depth=tb.depth, budget=BUDGET), 0)
    vals = [rand_f32(rng, 118, 134) for _ in range(6 * tb.lanes)]
    await tb.run(act(bank=0, fmt_o=Format.BF16, rmode=RoundMode.SR), vals, what="silu SR")
    await tb.run(dict(emit=1, fmt_o=Format.FP8_E4M3, rmode=RoundMode.SR), vals, what="copy SR")


@cocotb.test()
async def test_runtime_new_function(dut):
    """A function that is not shipped (softsign with a cubic tail, and arctan), compiled in
    the test and loaded into the idle bank while an instruction runs on the other bank; then
    used. The Verilog is the same as for every other test."""
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    softsign = TableSpec("softsign3", lambda v: v / (1.0 + np.abs(v) ** 3) ** (1 / 3),
                         center=-8, top_neg=3, top_pos=3, under=-1.0, over=1.0)
    atan = TableSpec("atan", np.arctan, center=-8, top_neg=4, top_pos=4,
                     under=-math.pi / 2, over=math.pi / 2)
    assert "softsign3" not in SHIPPED and "atan" not in SHIPPED
    await tb.load(compile_table(SHIPPED["tanh"], depth=tb.depth, budget=BUDGET), 0)
    vals = [rand_f32(rng, 118, 134) for _ in range(12 * lanes)]
    new = compile_table(softsign, depth=tb.depth, budget=BUDGET)
    # Double buffering: load bank 1 while bank 0 runs.
    run = cocotb.start_soon(tb.run(act(bank=0), vals, what="tanh during load"))
    await tb.load(new, 1)
    await run
    await tb.run(act(bank=1, fmt_o=Format.BF16), F32_EDGES + vals, what="softsign3")
    # A write to the bank in use waits for the instruction to finish.
    await tb.load(compile_table(atan, depth=tb.depth, budget=BUDGET), 1)
    run = cocotb.start_soon(tb.run(act(bank=1), vals, what="atan"))
    await ClockCycles(dut.clk, 3)
    got, exp = await tb.cfg_read([coef_addr(1, 0, 0)])
    await tb.cfg_write([(coef_addr(1, 3, 0), 0x3F800000)])       # lands after the run
    await run
    got, exp = await tb.cfg_read([coef_addr(1, 3, 0)])
    assert got == exp == [0x3F800000], (got, exp)


@cocotb.test()
async def test_cfg_port(dut):
    """Read-back of every region, bad indices set the error flag (cleared by a write), the
    hit/underflow/overflow counters match the model."""
    tb = await setup(dut)
    tab = compile_table(SHIPPED["sigmoid"], depth=tb.depth, budget=BUDGET)
    await tb.load(tab, 0)
    addrs = [a for a, _ in tab.writes(0)][:40] + [status_addr(Status.DEPTH),
                                                  status_addr(Status.ERROR)]
    got, exp = await tb.cfg_read(addrs)
    assert got == exp, (got, exp)
    assert not int(dut.error.value)
    bad = [coef_addr(0, tb.depth, 0), coef_addr(0, 5, 3), desc_addr(0, 1, 31) + 1,
           hdr_addr(0, Hdr.POST) + 1, 0x3000, status_addr(Status.DEPTH) + 1]
    for addr in bad:
        # A beat is carried out the cycle after the LUT's cfg register takes it.
        await tb.cfg_write([(addr, 0x12345678)])
        await ClockCycles(dut.clk, 2)
        assert int(dut.error.value) == 1 == tb.model.error, hex(addr)
        got, exp = await tb.cfg_read([status_addr(Status.ERROR)])
        assert got == exp == [1]
        await tb.cfg_write([(status_addr(Status.ERROR), 0)])
        await ClockCycles(dut.clk, 2)
        assert int(dut.error.value) == 0 == tb.model.error
    got, exp = await tb.cfg_read([coef_addr(1, tb.depth + 1, 0)])     # bad read
    assert got == exp == [0] and int(dut.error.value) == 1
    await tb.cfg_write([(status_addr(Status.DEPTH), 1)])              # read-only
    await tb.cfg_write([(status_addr(Status.ERROR), 0)])
    # counters
    await tb.cfg_write([(status_addr(r), 0) for r in (Status.HITS, Status.UNDERS,
                                                       Status.OVERS)])
    vals = list(F32_EDGES) + [rand_f32(tb.rng, 125, 136) for _ in range(3 * tb.lanes)]
    await tb.run(act(bank=0), vals, what="sigmoid counters")
    got, exp = await tb.cfg_read([status_addr(r) for r in (Status.HITS, Status.UNDERS,
                                                            Status.OVERS)])
    assert got == exp and sum(got) > 0 and got[1] > 0 and got[2] > 0, (got, exp)


@cocotb.test()
async def test_back_pressure_extremes(dut):
    """Heavy back-pressure with no idle, then no back-pressure with heavy idle."""
    tb = await setup(dut)
    await tb.load(compile_table(SHIPPED["sin"], depth=tb.depth, budget=BUDGET), 0)
    for idle, stall in ((0.0, 0.8), (0.8, 0.0), (0.0, 0.0)):
        tb.idle, tb.stall = idle, stall
        vals = [rand_f32(tb.rng, 118, 130) for _ in range(32 * tb.lanes)]
        await tb.run(act(bank=0, acc_op=AccOp.SUM, acc_reset=1, emit_acc=1), vals,
                     what=f"idle {idle} stall {stall}")
        dut._log.info(f"idle {idle} stall {stall}: 32 elements + accumulator in {tb.cycles} "
                      "cycles")
    # Throughput one element per cycle, latency cmd -> last o beat = count + LATENCY.
    # A summed element is followed by acc_wait empty cycles for the accumulate adder (3 deep,
    # none short); the accumulator read-out enters after them, or two cycles after the last
    # element (the FSM's step from BODY to EMIT), whichever is later.
    # With fewer units than lanes an element takes ``subs`` cycles (``element_cycles``), and the
    # read-out waits for the last element's last sub-beat to be accumulated.
    deep = tb.cfg["deep"]
    subs, wait = subs_of(tb.cfg), ACC_WAIT[deep]
    last = 31 * element_cycles(subs, wait, AccOp.SUM)
    emit_at = last + max(subs + 1, 1 + wait, subs + wait - 1)
    # With fewer units the rounding unit takes a beat every ``subs`` cycles: the read-out
    # beat leaves ``subs`` cycles after the last element's at the earliest (that element's
    # beat is taken with its last sub-beat, ``subs - 1`` cycles after its first).
    lat = through_latency(deep, subs)
    expect = emit_at + lat if subs == 1 else max(emit_at + lat, last + subs - 1 + lat + subs)
    assert tb.cycles == expect, tb.cycles


@cocotb.test()
async def test_output_blocked(dut):
    """``o`` held not ready for a long time while an instruction streams several FIFOs' worth
    of elements: the engine stops taking ``a`` once its result FIFO (and the rounding unit and
    output buffer behind it) is full, loses nothing, and resumes at full rate."""
    tb = await setup(dut, idle=0.0, stall=0.0)
    deep = tb.cfg["deep"]
    from rtl.vector.engine import VectorEngine
    depth = VectorEngine(lanes=tb.lanes, depth=tb.depth, deep=deep,
                         units=tb.cfg.get("units")).fifo_depth
    hold = 4 * depth * subs_of(tb.cfg) + 100
    taken = []

    async def count_a():
        valid, ready = tb.dut.a__valid, tb.dut.a__ready
        n = 0
        for cycle in range(hold + 1):
            await ReadOnly()
            if valid.value and ready.value:
                n += 1
            if cycle == hold - 1:
                # Everything that can drain into the FIFO has: the input must be held.
                taken.append((n, int(ready.value)))
            await RisingEdge(tb.dut.clk)

    await tb.load(compile_table(SHIPPED["gelu"], depth=tb.depth, budget=BUDGET), 0)
    mon = cocotb.start_soon(count_a())
    vals = [rand_f32(tb.rng, 118, 130) for _ in range(3 * depth * tb.lanes)]
    await tb.run(act(bank=0), vals, what="output blocked", hold=hold)
    await mon
    n, ready = taken[0]
    dut._log.info(f"o held {hold} cycles: {n} a beats taken, FIFO depth {depth}")
    # The FIFO's entries plus what the register after it (2: output and skid), the rounding
    # unit (input, encoder stages, output: 5 deep) and the output skid buffer hold, plus one
    # beat in the input skid buffer.
    assert depth <= n <= depth + 10 and ready == 0, (n, ready, depth)


@cocotb.test()
async def test_random_instructions(dut):
    """Seeded random instruction stream: random ops, sources, LUT on/off and bank, accumulate
    ops, formats and rounding modes (SR included), counts 0..8, random tables reloaded now and
    then. ``VECTOR_SWEEP`` (environment) sets the number of instructions (default 16)."""
    import os
    tb = await setup(dut)
    rng = tb.rng
    lanes = tb.lanes
    n_instr = int(os.environ.get("VECTOR_SWEEP", "16"))
    names = list(SHIPPED)
    fmt_bits = {Format.FP32: 32, Format.BF16: 16, Format.FP16: 16, Format.FP8_E4M3: 8,
                Format.FP8_E5M2: 8, Format.FP8_E3M4: 8, Format.INT8: 8, Format.INT32: 32}

    def raw(fmt):
        if fmt == Format.FP32 and rng.random() < 0.7:
            return rand_f32(rng, 112, 140) if rng.random() < 0.9 else rng.choice(F32_EDGES)
        return rng.getrandbits(fmt_bits[fmt])

    for bank in (0, 1):
        await tb.load(compile_table(SHIPPED[rng.choice(names)], depth=tb.depth,
                                    budget=BUDGET), bank)
    for i in range(n_instr):
        if rng.random() < 0.1:
            bank = rng.getrandbits(1)
            name = rng.choice(names)
            await tb.load(compile_table(SHIPPED[name], depth=tb.depth, budget=BUDGET), bank)
        cmd = dict(op0=rng.choice(list(AluOp)), op1=rng.choice(list(AluOp)),
                   src0=rng.choice(list(Src)), src1=rng.choice([Src.IMM, Src.LANE]),
                   lut=rng.getrandbits(1), bank=rng.getrandbits(1),
                   acc_op=rng.choice(list(AccOp)), acc_reset=int(rng.random() < 0.5),
                   emit=int(rng.random() < 0.8), emit_acc=rng.getrandbits(1),
                   fmt_a=rng.choice(list(Format)), fmt_b=rng.choice(list(Format)),
                   fmt_o=rng.choice(list(Format)), rmode=rng.choice(list(RoundMode)),
                   imm0=rand_f32(rng, 120, 132), imm1=rand_f32(rng, 110, 132))
        if rng.random() < 0.1:
            # an exact INT32 copy (sim.vector.raw_copy), or one of its near misses
            cmd.update(op0=AluOp.BYPASS, op1=AluOp.BYPASS, lut=0, fmt_a=Format.INT32,
                       fmt_o=rng.choice([Format.INT32] * 3 + [Format.INT8]))
        count = rng.randint(0, 8)
        a = [raw(cmd["fmt_a"]) for _ in range(count * lanes)]
        pro = [[raw(cmd["fmt_b"]) for _ in range(lanes)]
               for s in (cmd["src0"], cmd["src1"]) if s == Src.LANE]
        bv = [raw(cmd["fmt_b"]) for _ in range(count * lanes)] if cmd["src0"] == Src.TENSOR \
            else []
        if count == 0:
            cmd["count"] = 0
        await tb.run(cmd, a, b_pro=pro, b_vals=bv, what=f"random instruction {i}")
    await ClockCycles(dut.clk, 2)
    dut._log.info(f"idle_q checked in {tb.idle_seen['busy']} busy, {tb.idle_seen['hold']} "
                  f"held and {tb.idle_seen['quiet']} quiet cycles")
    assert min(tb.idle_seen.values()) > 0, tb.idle_seen


# -- pytest wrapper -------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pytest = None

if pytest is not None:
    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    CONFIG = {"lanes": 4, "depth": 64, "deep": True}

    # By default the deep pipeline on Verilator and the short one (same datapath, fewer
    # registers) on Icarus; the deep one on Icarus in the long set.
    @pytest.mark.parametrize("simulator,deep", [
        pytest.param(s, True, marks=(pytest.mark.long,) if s == "icarus" else ())
        for s in SIMULATORS] + [(s, False) for s in SIMULATORS if s == "icarus"])
    def test_vector_engine(simulator, deep):
        from rtl.vector.engine import VectorEngine
        config = dict(CONFIG, deep=deep)
        run_cocotb(lambda: VectorEngine(lanes=config["lanes"], depth=config["depth"], deep=deep),
                   name="vector_engine", config=config, test_module="cocotb_tests.test_vector",
                   simulator=simulator)

    # The compact engine (one evaluation unit for the four lanes, and two), both pipelines, on
    # Icarus; the default run keeps the deep one-unit engine (core4c's).
    @pytest.mark.parametrize("deep,units", [
        (True, 1), pytest.param(False, 1, marks=pytest.mark.long),
        pytest.param(True, 2, marks=pytest.mark.long)])
    def test_vector_engine_compact(deep, units):
        from rtl.vector.engine import VectorEngine
        config = dict(CONFIG, deep=deep, units=units)
        run_cocotb(lambda: VectorEngine(lanes=config["lanes"], depth=config["depth"], deep=deep,
                                        units=units),
                   name="vector_engine", config=config, test_module="cocotb_tests.test_vector",
                   simulator="icarus")

    @pytest.mark.long
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_vector_engine_random_sweep(simulator):
        """400 random instructions (same Verilog as the default run)."""
        from rtl.vector.engine import VectorEngine
        run_cocotb(lambda: VectorEngine(lanes=CONFIG["lanes"], depth=CONFIG["depth"]),
                   name="vector_engine", config=CONFIG, test_module="cocotb_tests.test_vector",
                   simulator=simulator, testcase="test_random_instructions",
                   extra_env={"VECTOR_SWEEP": "400"})
