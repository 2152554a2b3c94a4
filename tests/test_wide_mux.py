"""``rtl.arith.wide_mux``: the ECP5 netlist (LUT4 / PFUMX / L6MUX21 instances, simulated with
Icarus and ``fpga/sim/ECP5_MUX.v``) and the plain multiplexer elsewhere both give
``inputs[sel]`` for every select and random data; bad arguments raise ``ValueError``. The
sequencer's shifters (``rtl.control.alu.log_shift``) against Python's shifts for every amount."""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from rtl.arith.dsp import ECP5_TARGET
from rtl.arith.wide_mux import lut4, lut4_init, pair_mux, wide_mux
from rtl.control.alu import log_shift as _log_shift

from ecp5_netlist import needs_icarus, run_icarus, run_plain

WIDTH = 6


class _Mux(wiring.Component):
    def __init__(self, n, sel_bits):
        self.n = n
        super().__init__({"sel": In(sel_bits), "d": In(WIDTH * n), "o": Out(WIDTH)})

    def elaborate(self, platform):
        m = Module()
        ins = [self.d[WIDTH * j:WIDTH * (j + 1)] for j in range(self.n)]
        m.d.comb += self.o.eq(wide_mux(m, platform, self.sel, ins, "mx"))
        return m


class _PairMux(wiring.Component):
    """``o`` = ``pair_mux(sel[2], (sel[0], d0, d1), (sel[1], d2, d3))``."""
    def __init__(self):
        super().__init__({"sel": In(3), "d": In(WIDTH * 4), "o": Out(WIDTH)})

    def elaborate(self, platform):
        m = Module()
        d = [self.d[WIDTH * j:WIDTH * (j + 1)] for j in range(4)]
        m.d.comb += self.o.eq(pair_mux(m, platform, self.sel[2], (self.sel[0], d[0], d[1]),
                                       (self.sel[1], d[2], d[3]), "px"))
        return m


def _lut4_fn(a, b, c, d):
    return (a & b & c) | (~(a & b) & d)          # Mux(a & b, c, d), as the sequencer uses


class _Lut4(wiring.Component):
    """``o`` = ``lut4(sel[0], sel[1], d0, d1)`` (two 1-bit inputs shared by every bit)."""
    def __init__(self):
        super().__init__({"sel": In(3), "d": In(WIDTH * 4), "o": Out(WIDTH)})

    def elaborate(self, platform):
        m = Module()
        d = [self.d[WIDTH * j:WIDTH * (j + 1)] for j in range(2)]
        m.d.comb += self.o.eq(lut4(m, platform, _lut4_fn, (self.sel[0], self.sel[1], d[0], d[1]),
                                   "lx"))
        return m


def _lut4_expect(vecs):
    return [d[0] if sel & 3 == 3 else d[1] for sel, d in vecs]


def _pair_expect(vecs):
    return [d[2 + (sel >> 1 & 1)] if sel >> 2 else d[sel & 1] for sel, d in vecs]


class _Shift(wiring.Component):
    """``o`` = ``a`` shifted by ``sh``: left (``op`` 0), logical right (1), arithmetic right
    (2), as the sequencer's ALU builds them."""
    def __init__(self):
        super().__init__({"a": In(32), "sh": In(5), "op": In(2), "o": Out(32)})

    def elaborate(self, platform):
        m = Module()
        lsh = _log_shift(m, "lsh", self.a, self.sh, left=True)
        rsh = _log_shift(m, "rsh", self.a, self.sh, left=False, fill=(self.op == 2) & self.a[31])
        m.d.comb += self.o.eq(Mux(self.op == 0, lsh, rsh))
        return m


def _shift_vectors(seed):
    rng = np.random.default_rng(seed)
    vals = [0, 0xFFFFFFFF, 0x80000000, 1, 0x7FFFFFFF] + [int(x) for x in
                                                          rng.integers(0, 1 << 32, 12)]
    return [(a, sh, op) for a in vals for sh in range(32) for op in range(3)]


def _shift_expect(vecs):
    out = []
    for a, sh, op in vecs:
        if op == 0:
            out.append((a << sh) & 0xFFFFFFFF)
        elif op == 1:
            out.append(a >> sh)
        else:
            out.append(((a - (1 << 32) if a >> 31 else a) >> sh) & 0xFFFFFFFF)
    return out


def test_shifter():
    """The sequencer ALU's shifters: every amount, left, logical and arithmetic right."""
    dut = _Shift()
    vecs = _shift_vectors(5)
    got = []

    async def bench(ctx):
        for a, sh, op in vecs:
            ctx.set(dut.a, a)
            ctx.set(dut.sh, sh)
            ctx.set(dut.op, op)
            got.append(ctx.get(dut.o))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert got == _shift_expect(vecs)


def _vectors(n, sel_bits, seed):
    rng = np.random.default_rng(seed)
    vecs = []
    for _ in range(40):
        d = [int(x) for x in rng.integers(0, 1 << WIDTH, n)]
        for sel in range(1 << sel_bits):     # every select, the bits above k ignored
            vecs.append((sel, d))
    return vecs


def _expect(vecs, n):
    k = n.bit_length() - 1
    return [d[sel & ((1 << k) - 1)] for sel, d in vecs]


@needs_icarus
@pytest.mark.parametrize("n, sel_bits", [(8, 3), (8, 4), (4, 2), (4, 3)])
def test_ecp5_netlist(n, sel_bits, tmp_path):
    src = verilog.convert(_Mux(n, sel_bits), name="top", platform=ECP5_TARGET)
    assert src.count("L6MUX21 ") == (WIDTH if n == 8 else 0)
    assert src.count("PFUMX ") == WIDTH * n // 4
    assert src.count("LUT4 ") == WIDTH * n // 2
    vecs = _vectors(n, sel_bits, 20261127 + n + sel_bits)
    assert _run_netlist(src, vecs, n, sel_bits, tmp_path) == _expect(vecs, n)


@needs_icarus
def test_ecp5_pair_netlist(tmp_path):
    """``pair_mux``: one slice per bit (two LUT4s, one PFUMX), every select combination."""
    src = verilog.convert(_PairMux(), name="top", platform=ECP5_TARGET)
    assert src.count("PFUMX ") == WIDTH and src.count("LUT4 ") == 2 * WIDTH
    assert src.count("L6MUX21 ") == 0
    vecs = _vectors(4, 3, 20261128)
    assert _run_netlist(src, vecs, 4, 3, tmp_path) == _pair_expect(vecs)


@needs_icarus
def test_ecp5_lut4_netlist(tmp_path):
    """``lut4``: one LUT4 per bit with the function's INIT, every select combination."""
    src = verilog.convert(_Lut4(), name="top", platform=ECP5_TARGET)
    assert src.count("LUT4 ") == WIDTH and src.count("PFUMX ") == 0
    vecs = _vectors(4, 3, 20261129)
    assert _run_netlist(src, vecs, 4, 3, tmp_path) == _lut4_expect(vecs)


def _packed(vecs, n):
    """``(sel, d)`` vectors as the ports' values: ``d``'s ``n`` fields packed."""
    return [(sel, sum(x << (WIDTH * j) for j, x in enumerate(d))) for sel, d in vecs]


def _run_netlist(src, vecs, n, sel_bits, tmp_path):
    """Icarus on ``src`` (module ``top``: ``sel``, ``d``, ``o``) with the cell models: ``o``
    for each vector."""
    got = run_icarus(src, [("sel", sel_bits), ("d", WIDTH * n)], [("o", WIDTH)],
                     _packed(vecs, n), tmp_path)
    return [o for (o,) in got]


def _run_plain(dut, vecs):
    """``dut``'s ``o`` for each ``(sel, d)`` of ``vecs`` without an ECP5 platform (Amaranth
    simulator), after checking that it instantiates no cells."""
    n = len(dut.d) // WIDTH
    got = run_plain(dut, [("sel", len(dut.sel)), ("d", len(dut.d))], [("o", WIDTH)],
                    _packed(vecs, n))
    return [o for (o,) in got]


@pytest.mark.parametrize("n, sel_bits", [(8, 3), (4, 3)])
def test_plain_elsewhere(n, sel_bits):
    """Without an ECP5 platform: no instances, and the same values (Amaranth simulator)."""
    vecs = _vectors(n, sel_bits, 7 + n)
    assert _run_plain(_Mux(n, sel_bits), vecs) == _expect(vecs, n)


def test_pair_plain_elsewhere():
    vecs = _vectors(4, 3, 11)
    assert _run_plain(_PairMux(), vecs) == _pair_expect(vecs)


def test_lut4_plain_elsewhere():
    vecs = _vectors(4, 3, 12)
    assert _run_plain(_Lut4(), vecs) == _lut4_expect(vecs)


def test_lut4_init():
    assert lut4_init(lambda a, b, c, d: a) == 0xAAAA
    assert lut4_init(lambda a, b, c, d: d) == 0xFF00
    assert lut4_init(lambda a, b, c, d: c if a else b) == 0xE4E4


def test_bad_arguments():
    m = Module()
    m._MustUse__silence = True
    with pytest.raises(ValueError, match="wide_mux's number of inputs must be one of 4, 8, not 6"):
        wide_mux(m, ECP5_TARGET, Signal(3), [Const(0, 2)] * 6, "x")
    with pytest.raises(ValueError,
                       match="wide_mux's sel must be at least 3 bits wide for 8 inputs, not 2"):
        wide_mux(m, ECP5_TARGET, Signal(2), [Const(0, 2)] * 8, "x")
    with pytest.raises(ValueError, match="pair_mux's hi must be 1 bit wide, not 2"):
        pair_mux(m, ECP5_TARGET, Signal(2), (Signal(), 0, 1), (Signal(), 0, 1), "x")
    with pytest.raises(ValueError, match="lut4's number of inputs must be one of 4, not 3"):
        lut4(m, ECP5_TARGET, _lut4_fn, (Signal(), Signal(), Signal()), "x")
    with pytest.raises(ValueError,
                       match=r"lut4's inputs must each be 1 or 4 bits wide, not \[1, 2, 4, 1\]"):
        lut4(m, ECP5_TARGET, _lut4_fn, (Signal(), Signal(2), Signal(4), Signal()), "x")
