"""The ECP5 netlist of the FP32 multipliers, whose significand registers are the DSP blocks' own
input registers (``rtl/arith/dsp.py``), simulated with Icarus and the behavioural
``fpga/sim/MULT18X18D.v``: bit-exact with ``sim.formats.fp32_mul`` and, cycle for cycle, with
the same unit elaborated for any other platform (fabric registers). Clock-enable gaps check
that the blocks' registers hold with the pipeline."""

import os
import shutil
import subprocess

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Const, Fragment, Instance, Module, Signal

from rtl.arith.dsp import ECP5_TARGET, is_ecp5, registered_product
from rtl.arith.fp32_mul import FP32Multiplier
from rtl.vector.mul import LaneMultiplier
from sim.formats import fp32_mul

MODEL = os.path.join(os.path.dirname(__file__), "..", "fpga", "sim", "MULT18X18D.v")
EDGES = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x00800000,
         0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
         0x3FFFFFFF, 0x3F800001, 0x1F800000, 0x5F7FFFFF]


TB = """`timescale 1ns / 1ps
module tb;
    reg clk = 0, rst = 0;
    {decls}
    reg [{width}:0] vec [0:{n}];
    integer i, f;
    top dut(.clk(clk), .rst(rst), {ports});
    initial begin
        $readmemh("{vecs}", vec);
        f = $fopen("{out}", "w");
        for (i = 0; i < {n}; i = i + 1) begin
            {unpack}
            #1 clk = 1; #1 clk = 0;
            $fwrite(f, "%h\\n", {o});
        end
        $fclose(f);
        $finish;
    end
endmodule
"""


def _vector_tb(d, vecs, **kw):
    """Write ``d/tb.v``: ``top`` driven by the hex lines ``vecs`` (``d/vec.hex``), one per
    clock edge (``unpack`` assigns them to the ``decls``), its output ``o`` written after each
    edge to ``d/out.hex``."""
    with open(d / "vec.hex", "w") as f:
        f.writelines(v + "\n" for v in vecs)
    (d / "tb.v").write_text(TB.format(n=len(vecs), vecs=d / "vec.hex", out=d / "out.hex",
                                      width=4 * len(vecs[0]) - 1, **kw))


def _iverilog(d, platform):
    """Compile ``d/tb.v`` and ``d/top.v`` (with the MULT18X18D model for an ECP5 netlist) with
    Icarus and run the simulation in ``d``."""
    files = [str(d / "tb.v"), str(d / "top.v")] + ([MODEL] if is_ecp5(platform) else [])
    subprocess.run(["iverilog", "-g2012", "-o", str(d / "sim"), *files], check=True)
    subprocess.run(["vvp", "-n", str(d / "sim")], check=True, capture_output=True)


def _run(unit, platform, vecs, tmp_path, tag):
    src = verilog.convert(unit, name="top", platform=platform)
    d = tmp_path / tag
    d.mkdir()
    (d / "top.v").write_text(src)
    _vector_tb(d, [f"{en:01x}{a:08x}{b:08x}" for en, a, b in vecs],
               decls="reg en = 1; reg [31:0] a, b; wire [31:0] o;",
               ports=".a(a), .b(b), .en(en), .o(o)", unpack="{en, a, b} = vec[i];", o="o")
    _iverilog(d, platform)
    # (an output still undefined while the pipeline fills reads as None)
    return src, [None if "x" in x.lower() else int(x, 16)
                 for x in (d / "out.hex").read_text().split()]


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
@pytest.mark.parametrize("make, stages, dsps", [
    (lambda s: FP32Multiplier(s), 4, 4),
    (lambda s: FP32Multiplier(s), 3, 4),
    (lambda s: LaneMultiplier(logic_bits=6, stages=s), 4, 2),
    (lambda s: LaneMultiplier(logic_bits=6, stages=s), 3, 2),
    # the vector LUT's LOG term: a 9-bit integer as FP32 (low 15 significand bits zero)
    (lambda s: LaneMultiplier(a_bits=9, logic_bits=6, stages=s), 4, 1),
])
def test_ecp5_netlist_matches(make, stages, dsps, tmp_path):
    rng = np.random.default_rng(20261126 + stages + dsps)
    ea, eb = (v.ravel() for v in np.meshgrid(EDGES, EDGES))
    a = np.concatenate([ea, rng.integers(0, 2 ** 32, 400)]).astype(np.uint32)
    if dsps == 1:
        a = np.concatenate([np.float32(np.arange(-127, 129)).view(np.uint32), a[::7]])
        a = np.where((a >> 23 & 0xFF) == 0, a, a & ~np.uint32(0x7FFF)).astype(np.uint32)
    b = np.concatenate([eb, rng.integers(0, 2 ** 32, 400)]).astype(np.uint32)
    b = np.resize(b, len(a))
    en = (rng.random(len(a)) < 0.8).astype(int)          # clock-enable gaps
    vecs = list(zip(en, a.tolist(), b.tolist())) + [(1, 0, 0)] * stages
    src, got = _run(make(stages), ECP5_TARGET, vecs, tmp_path, "ecp5")
    assert src.count("MULT18X18D ") == dsps, "the ECP5 netlist should instantiate the blocks"
    _, ref = _run(make(stages), None, vecs, tmp_path, "fabric")
    assert got == ref, "ECP5 netlist and fabric registers differ"
    # The enabled cycles' operands come out ``stages`` enabled cycles later.
    ops = [(x, y) for e, x, y in vecs if e]
    want = fp32_mul(np.array([x for x, _ in ops], dtype=np.uint32),
                    np.array([y for _, y in ops], dtype=np.uint32))
    seen = [i for i, (e, _, _) in enumerate(vecs) if e]
    # The output sampled after edge i holds the product of the operands taken ``stages``
    # enabled edges back (edge i included).
    checked = 0
    for k in range(stages - 1, len(seen)):
        o = got[seen[k]]
        x = ops[k - stages + 1]
        assert o == int(want[k - stages + 1]), (hex(x[0]), hex(x[1]), hex(o),
                                                hex(int(want[k - stages + 1])))
        checked += 1
    assert checked > 250


def test_registered_product_is_fabric_elsewhere():
    """Elsewhere than on an ECP5 the operands are registered in the fabric (no instance); a
    constant operand gets no register."""
    m = Module()
    p = registered_product(m, None, Signal(18), Const(5, 6), Signal(), "x")
    frag = Fragment.get(m, None)
    assert len(p) == 24
    assert not any(isinstance(sub, Instance) for sub, *_ in frag.subfragments)
    assert not is_ecp5(None) and is_ecp5(ECP5_TARGET)
    m = Module()
    registered_product(m, ECP5_TARGET, Signal(18), Const(5, 6), Signal(), "x")
    assert any(isinstance(sub, Instance) for sub, *_ in Fragment.get(m, ECP5_TARGET).subfragments)


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
def test_prng_seeding_netlist_matches(tmp_path):
    """The PRNG bank's seeding hash (two 32-bit constant multiplies, their operand registers
    inside MULT18X18D blocks on an ECP5) gives the same lane words cycle for cycle as the
    fabric version, after a seed load, through the busy period and a few steps."""
    from rtl.round.prng import LanePrngs
    outs = {}
    for tag, platform in (("ecp5", ECP5_TARGET), ("fabric", None)):
        bank = LanePrngs(2)
        src = verilog.convert(bank, name="top", platform=platform)
        if platform is not None:
            assert src.count("MULT18X18D ") == 6
        d = tmp_path / tag
        d.mkdir()
        (d / "top.v").write_text(src)
        (d / "tb.v").write_text("""`timescale 1ns / 1ps
module tb;
    reg clk = 0, rst = 0, seed_load = 0;
    reg [31:0] seed = 32'h1234ABCD;
    reg [1:0] advance = 0;
    wire busy;
    wire [63:0] out;
    integer i, f;
    top dut(.clk(clk), .rst(rst), .seed(seed), .seed_load(seed_load), .busy(busy),
            .advance(advance), .out(out));
    initial begin
        f = $fopen("%s", "w");
        for (i = 0; i < 80; i = i + 1) begin
            seed_load = (i == 3);
            advance = (i > 40) ? i[1:0] : 2'b00;
            #1 clk = 1; #1 clk = 0;
            $fwrite(f, "%%h %%b\\n", out, busy);
        end
        $fclose(f);
        $finish;
    end
endmodule
""" % (d / "out.txt"))
        _iverilog(d, platform)
        outs[tag] = (d / "out.txt").read_text().split("\n")
    assert outs["ecp5"] == outs["fabric"]
    assert len(set(outs["ecp5"][30:])) > 10          # the words change (seeded, stepped)


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
@pytest.mark.parametrize("out_reg,signed", [(False, False), (True, False), (True, True)])
def test_registered_product_netlist_matches(out_reg, signed, tmp_path):
    """``registered_product`` with and without the output register, unsigned and two's
    complement (the DMA's stride products), with clock-enable gaps: the MULT18X18D netlist
    gives the fabric version's value every cycle, and the product of the operands taken 1 (2
    with ``out_reg``) enabled edges earlier."""
    outs = {}
    rng = np.random.default_rng(20261127 + out_reg + 2 * signed)
    vecs = [(int(rng.random() < 0.7), int(rng.integers(0, 1 << 18)),
             int(rng.integers(0, 1 << 13))) for _ in range(300)]
    vecs[:4] = [(1, 0x20000, 0x1000), (1, 0x3FFFF, 0x1FFF), (1, 0x1FFFF, 0x0FFF), (1, 0, 0)]
    for tag, platform in (("ecp5", ECP5_TARGET), ("fabric", None)):
        m = Module()
        a, b, en, o = Signal(18, name="a"), Signal(13, name="b"), Signal(name="en"), \
            Signal(31, name="o")
        m.d.comb += o.eq(registered_product(m, platform, a, b, en, "x", out_reg=out_reg,
                                            signed=signed))
        src = verilog.convert(m, name="top", platform=platform, ports=[a, b, en, o])
        if platform is not None:
            assert src.count("MULT18X18D ") == 1
            assert ('.REG_OUTPUT_CLK("CLK0")' in src) == out_reg
        d = tmp_path / tag
        d.mkdir()
        (d / "top.v").write_text(src)
        _vector_tb(d, [f"{e:01x}{x:05x}{y:04x}" for e, x, y in vecs],
                   decls="reg en = 0; reg [17:0] a = 0; reg [12:0] b = 0; wire [30:0] o;",
                   ports=".a(a), .b(b), .en(en), .o(o)",
                   unpack="en = vec[i][36]; a = vec[i][33:16]; b = vec[i][12:0];", o="o")
        _iverilog(d, platform)
        outs[tag] = (d / "out.hex").read_text().split()
    lat = 2 if out_reg else 1
    enabled = [i for i, (e, _, _) in enumerate(vecs) if e]
    checked = 0
    for k in range(lat, len(enabled)):
        x, y = vecs[enabled[k - lat]][1:]
        if signed:          # two's complement operands, the product's 31 bits
            x, y = x - (x >> 17 << 18), y - (y >> 12 << 13)
        # sampled after edge enabled[k - 1] (the last enabled edge before the next one)
        for i in range(enabled[k - 1], enabled[k]):
            assert int(outs["ecp5"][i], 16) == (x * y) & 0x7FFFFFFF, (i, hex(x), hex(y))
            checked += 1
    assert checked > 150
    assert outs["ecp5"] == outs["fabric"]


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
def test_tensor_pe_multiplier_netlist_matches(tmp_path):
    """The tensor PE's all-format multiplier at 4 stages (``rtl.arith.fp_mul.FPMultiplier``,
    core2's ``tensor_mul_stages``): on an ECP5 its operand and product registers are one
    signed MULT18X18D's input and output registers; every format (INT8 signed) and clock-enable
    gaps give the fabric version's output every cycle."""
    from rtl.arith.fp_mul import MUL_FORMATS, FPMultiplier
    rng = np.random.default_rng(20261128)
    n = 600
    fmts = sorted(int(f) for f in MUL_FORMATS)
    vecs = [(int(rng.random() < 0.8), int(rng.choice(fmts)), int(rng.integers(0, 1 << 32)),
             int(rng.integers(0, 1 << 32))) for _ in range(n)]
    outs = {}
    for tag, platform in (("ecp5", ECP5_TARGET), ("fabric", None)):
        src = verilog.convert(FPMultiplier(stages=4), name="top", platform=platform)
        if platform is not None:
            assert src.count("MULT18X18D ") == 1
            assert '.REG_OUTPUT_CLK("CLK0")' in src and ".SIGNEDA(1'h1)" in src
        d = tmp_path / tag
        d.mkdir()
        (d / "top.v").write_text(src)
        _vector_tb(d, [f"{e:01x}{fm:01x}{a:08x}{b:08x}" for e, fm, a, b in vecs],
                   decls="reg en = 0; reg [2:0] fmt = 0; reg [31:0] a = 0, b = 0; wire [31:0] p;",
                   ports=".a(a), .b(b), .fmt(fmt), .en(en), .p(p)",
                   unpack="en = vec[i][68]; fmt = vec[i][66:64]; a = vec[i][63:32]; "
                          "b = vec[i][31:0];", o="p")
        _iverilog(d, platform)
        outs[tag] = (d / "out.hex").read_text().split()
    assert len(outs["ecp5"]) == n
    assert outs["ecp5"][8:] == outs["fabric"][8:]
    assert len(set(outs["ecp5"][8:])) > n // 2          # the products change
