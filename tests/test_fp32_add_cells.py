"""The FP32 adder's ECP5 cells (``rtl.arith.fp32_add``, ``rtl.arith.wide_mux.lut6``).

The ECP5 elaboration instantiates LUT4 / PFUMX / L6MUX21 cells that the simulators'
Verilog (elaborated without a platform) replaces by plain expressions, so these tests run the
ECP5 netlist itself on Icarus with ``fpga/sim/ECP5_MUX.v``:

* ``lut6``: every input combination, 5 and 6 inputs, against the function (and the plain
  form, and its argument checks);
* ``lz25``, the three-level leading-zero count (the near path's count and step 1's
  trailing-zero counts): every leading position with random bits below it, and zero;
* the whole adder at ``stages`` 3 (the near path's subtraction in step 1) and 4 (in step 2)
  against ``sim.formats.fp32_add``: edge pairs, the cocotb tests' random mix, and pairs for
  the near path (exponents at most one apart, close significands) and the far path's guard,
  round and sticky bits (every exponent difference 0-30 against every trailing-zero count).
"""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cocotb_tests.test_arith_common import add_stimulus, edge_pairs
from rtl.arith.dsp import ECP5_TARGET
from rtl.arith.fp32_add import FP32Adder
from rtl.arith.fp32_add_lz import lz25
from rtl.arith.wide_mux import lut6
from sim.formats import fp32_add

from ecp5_netlist import needs_icarus, run_icarus as _icarus, run_plain as _plain


# -- lut6 ---------------------------------------------------------------------------------

W = 3          # bits per input of the lut6 test component


def _fn5(a, b, c, d, e):
    return (a & b) ^ (c | ~d) ^ (e & ~a)


def _fn6(a, b, c, d, e, f):
    return ((a ^ b) & c) | (d & e & ~f) | (f & ~c & b)


class _Lut6(wiring.Component):
    """``o = lut6(fn, x[0:W], x[W:2W], ...)``: five or six ``W``-bit inputs."""
    def __init__(self, n):
        self.n = n
        super().__init__({"x": In(W * n), "o": Out(W)})

    def elaborate(self, platform):
        m = Module()
        args = [self.x[W * j:W * (j + 1)] for j in range(self.n)]
        m.d.comb += self.o.eq(lut6(m, platform, _fn5 if self.n == 5 else _fn6, args, "lx"))
        return m


def _lut6_vectors(n):
    # every combination of the n inputs, each bit of o seeing a different rotation
    vecs = []
    for k in range(1 << n):
        x = 0
        for j in range(n):
            for i in range(W):
                x |= ((k >> ((j + i) % n)) & 1) << (W * j + i)
        vecs.append((x,))
    return vecs


def _lut6_expect(n, vecs):
    fn = _fn5 if n == 5 else _fn6
    out = []
    for (x,) in vecs:
        o = 0
        for i in range(W):
            args = [(x >> (W * j + i)) & 1 for j in range(n)]
            o |= (fn(*args) & 1) << i
        out.append((o,))
    return out


@needs_icarus
@pytest.mark.parametrize("n", [5, 6])
def test_lut6_ecp5_netlist(n, tmp_path):
    """One slice per bit with five inputs (2 LUT4s, a PFUMX), two with six (4 LUT4s, 2 PFUMXs,
    an L6MUX21): the function for every input combination."""
    src = verilog.convert(_Lut6(n), name="top", platform=ECP5_TARGET)
    assert src.count("LUT4 ") == W * (1 << (n - 4))
    assert src.count("PFUMX ") == W * (1 << (n - 5))
    assert src.count("L6MUX21 ") == (W if n == 6 else 0)
    vecs = _lut6_vectors(n)
    assert _icarus(src, [("x", W * n)], [("o", W)], vecs, tmp_path) == _lut6_expect(n, vecs)


@pytest.mark.parametrize("n", [5, 6])
def test_lut6_plain_elsewhere(n):
    vecs = _lut6_vectors(n)
    assert _plain(_Lut6(n), [("x", W * n)], [("o", W)], vecs) == _lut6_expect(n, vecs)


def test_lut6_bad_arguments():
    m = Module()
    m._MustUse__silence = True               # never elaborated
    with pytest.raises(ValueError, match=r"^lut6's number of inputs must be one of 5, 6, not 4$"):
        lut6(m, None, lambda a, b, c, d: a, [Signal()] * 4, "x")
    with pytest.raises(ValueError, match=r"^lut6's inputs must each be 1 or 3 bits wide, "
                                         r"not \[3, 2, 1, 1, 1\]$"):
        lut6(m, None, _fn5, [Signal(3), Signal(2), Signal(), Signal(), Signal()], "x")


# -- lz25 ---------------------------------------------------------------------------------

class _Lz(wiring.Component):
    d: In(25)
    lz: Out(5)
    zero: Out(1)

    def elaborate(self, platform):
        m = Module()
        lz, zero = lz25(m, platform, self.d, "lz")
        m.d.comb += [self.lz.eq(lz), self.zero.eq(zero)]
        return m


def _lz_vectors():
    rng = np.random.default_rng(2026_12_03)
    vecs = [(0,)]
    for top in range(25):                  # the leading one at ``top``, random bits below
        for _ in range(12):
            vecs.append(((1 << top) | int(rng.integers(0, 1 << top)) if top else 1,))
    return vecs


def _lz_expect(vecs):
    return [(25 - d.bit_length(), int(d == 0)) for (d,) in vecs]


@needs_icarus
def test_lz25_ecp5_netlist(tmp_path):
    src = verilog.convert(_Lz(), name="top", platform=ECP5_TARGET)
    assert "LUT4 " in src and "PFUMX " in src
    vecs = _lz_vectors()
    got = _icarus(src, [("d", 25)], [("lz", 5), ("zero", 1)], vecs, tmp_path)
    assert got == _lz_expect(vecs)


def test_lz25_plain_elsewhere():
    vecs = _lz_vectors()
    assert _plain(_Lz(), [("d", 25)], [("lz", 5), ("zero", 1)], vecs) == _lz_expect(vecs)


# -- the whole adder's ECP5 netlist ---------------------------------------------------------

def _adder_pairs(rng):
    """Edge pairs, the cocotb random mix, near-path pairs and guard/round/sticky pairs."""
    a, b = [list(map(int, x)) for x in edge_pairs()]
    ra, rb = add_stimulus(rng, 6000)
    a += [int(x) for x in ra]
    b += [int(x) for x in rb]
    man = lambda: int(rng.integers(0, 1 << 23))
    for _ in range(3000):        # near path: exponents at most one apart, close significands
        ea = int(rng.integers(1, 255))
        eb = min(254, max(1, ea + int(rng.integers(-1, 2))))
        ma = man()
        mb = [ma, (ma + int(rng.integers(-3, 4))) % (1 << 23), man(),
              (ma << 1) % (1 << 23), ma >> 1][int(rng.integers(0, 5))]
        sa = int(rng.integers(0, 2)) << 31
        sb = sa ^ (1 << 31) if rng.random() < 0.8 else sa
        a.append(sa | ea << 23 | ma)
        b.append(sb | eb << 23 | mb)
    for d in range(31):          # far path: every exponent difference and trailing-zero count
        for tz in range(24):
            for _ in range(3):
                ea = int(rng.integers(31, 224))
                mb = ((man() | 1) << tz) & 0x7FFFFF if tz < 23 else 0
                x = int(rng.integers(0, 2)) << 31 | ea << 23 | man()
                y = int(rng.integers(0, 2)) << 31 | (ea - d) << 23 | mb
                if rng.integers(0, 2):
                    x, y = y, x
                a.append(x)
                b.append(y)
    return a, b


@needs_icarus
@pytest.mark.parametrize("stages", [3, 4])
def test_adder_ecp5_netlist_vs_golden(stages, tmp_path):
    """``FP32Adder`` elaborated for the ECP5 (wide multiplexers, ``lut6`` and ``lz25``
    cells) on Icarus with the cell models, bit-exact with ``sim.formats.fp32_add``."""
    a, b = _adder_pairs(np.random.default_rng(2026_12_04 + stages))
    want = fp32_add(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)).astype(np.uint32)
    src = verilog.convert(FP32Adder(stages), name="top", platform=ECP5_TARGET)
    assert "L6MUX21 " in src and "PFUMX " in src
    vecs = list(zip(a, b)) + [(0, 0)] * stages
    got = _icarus(src, [("a", 32), ("b", 32)], [("o", 32)], vecs, tmp_path, clocked=True)
    got = [o for (o,) in got[stages:]]
    bad = [(hex(x), hex(y), hex(g), hex(int(w)))
           for x, y, g, w in zip(a, b, got, want) if g != int(w)]
    assert len(got) == len(a)
    assert not bad, f"{len(bad)} of {len(a)} mismatches (a, b, got, want), first: {bad[:4]}"
