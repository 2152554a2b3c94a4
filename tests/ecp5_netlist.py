"""Simulating an ECP5 netlist (LUT4 / PFUMX / L6MUX21 instances, modelled by
``fpga/sim/ECP5_MUX.v``) on Icarus, and the same design elaborated without a platform in the
Amaranth simulator (``test_wide_mux.py``, ``test_fp32_add_cells.py``)."""

import os
import shutil
import subprocess

import pytest
from amaranth.hdl import Fragment, Instance
from amaranth.sim import Simulator

__all__ = ["MODEL", "needs_icarus", "run_icarus", "run_plain"]

MODEL = os.path.join(os.path.dirname(__file__), "..", "fpga", "sim", "ECP5_MUX.v")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")


def run_icarus(src, ins, outs, vectors, tmp_path, clocked=False):
    """Icarus on ``src`` (module ``top``) with the cell models: ``ins`` and ``outs`` are
    ``(port, width)``; each vector gives the inputs' values, and the outputs (a tuple per
    vector, None for an X) are read before the next rising edge of ``clk`` (``clocked``;
    ``en`` held high, ``rst`` low) or after a delay."""
    (tmp_path / "top.v").write_text(src)
    with open(tmp_path / "vec.hex", "w") as f:
        for vec in vectors:
            f.write(" ".join(f"{v:x}" for v in vec) + "\n")
    decl = "".join(f"reg [{w - 1}:0] {p}; " for p, w in ins)
    decl += "".join(f"wire [{w - 1}:0] {p}; " for p, w in outs)
    conns = [f".{p}({p})" for p, _ in ins + outs]
    if clocked:
        decl += "reg clk = 0; reg rst = 0; reg en = 1; "
        conns += [".clk(clk)", ".rst(rst)", ".en(en)"]
    fmt = " ".join(["%h"] * len(ins))
    step = "#4 $fwrite(g, \"" + " ".join(["%h"] * len(outs)) + "\\n\", " + \
        ", ".join(p for p, _ in outs) + ");"
    if clocked:
        step += " #1 clk = 1; #5 clk = 0;"
    tb = f"""`timescale 1ns / 1ps
module tb;
    {decl}
    integer f, g, r;
    top dut({", ".join(conns)});
    initial begin
        f = $fopen("{tmp_path / 'vec.hex'}", "r");
        g = $fopen("{tmp_path / 'out.hex'}", "w");
        while (!$feof(f)) begin
            r = $fscanf(f, "{fmt}\\n", {", ".join(p for p, _ in ins)});
            {step}
        end
        $fclose(g);
        $finish;
    end
endmodule
"""
    (tmp_path / "tb.v").write_text(tb)
    subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "sim"), str(tmp_path / "tb.v"),
                    str(tmp_path / "top.v"), MODEL], check=True)
    subprocess.run(["vvp", "-n", str(tmp_path / "sim")], check=True, capture_output=True,
                   cwd=tmp_path)
    # (None for an X: a pipeline's first outputs, before its combinational blocks have run)
    return [tuple(None if "x" in x.lower() else int(x, 16) for x in line.split())
            for line in (tmp_path / "out.hex").read_text().splitlines()]


def run_plain(dut, ins, outs, vectors):
    """The same without a platform, in the Amaranth simulator, after checking that ``dut``
    instantiates no cells: a tuple of the outputs for each vector (combinational)."""
    frag = Fragment.get(dut, None)
    assert not any(isinstance(sub, Instance) for sub, *_ in frag.subfragments)
    got = []

    async def bench(ctx):
        for vec in vectors:
            for (p, _), v in zip(ins, vec):
                ctx.set(getattr(dut, p), v)
            got.append(tuple(ctx.get(getattr(dut, p)) for p, _ in outs))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got
