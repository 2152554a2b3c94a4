"""Multiplexers built from the ECP5 slice's own wide-function multiplexers.

An ECP5 slice holds two LUT4s and a PFUMX that chooses between them, and two slices feed an
L6MUX21: a 4:1 multiplexer is one slice (two LUT4s, each a 2:1 multiplexer on the select's
bit 0, and the PFUMX on bit 1) and an 8:1 multiplexer two slices and the L6MUX21 (bit 2),
one LUT delay and one or two multiplexer delays inside the slices. Left to itself, synthesis
maps the same multiplexer as three levels of LUT4 with routing between them: behind the
sequencer's control store (a block RAM, its word 5.83 ns after the clock at speed grade 6)
the 8-way selects of R's register indices routed at 10.7-11.8 ns on every core2 build (30
seeds of 12 builds, ``docs/fpga.md``).

:func:`wide_mux` instantiates that structure when the platform is an ECP5 (the FPGA builds,
``scripts.unit_fmax``) and is a plain multiplexer elsewhere (the Verilog the simulators
run): the same value either way. ``fpga/sim/ECP5_MUX.v`` models the three cells for
simulating the ECP5 netlist (``tests/test_wide_mux.py``).
"""

from amaranth.hdl import Array, Const, Instance, Signal, Value

from rtl.arith.dsp import is_ecp5

__all__ = ["wide_mux", "lut4_init"]


def lut4_init(fn):
    """The 16-bit ``INIT`` of an ECP5 LUT4 computing ``fn(a, b, c, d)`` (each 0 or 1): bit
    ``8d + 4c + 2b + a`` holds the output for those inputs."""
    return sum(int(bool(fn(i & 1, i >> 1 & 1, i >> 2 & 1, i >> 3 & 1))) << i for i in range(16))


_MUX2 = lut4_init(lambda a, b, c, d: c if a else b)     # Z = A ? C : B


def wide_mux(m, platform, sel, inputs, name):
    """``Array(inputs)[sel]`` as a signal named ``name``: ``inputs`` are 4 or 8 values of one
    width (shorter ones are zero-extended to the widest), ``sel`` has at least 2 or 3 bits
    (its low bits select; the others are ignored). On an ECP5 each bit is LUT4s and a PFUMX
    (4 inputs) or two of those and an L6MUX21 (8 inputs), instantiated; elsewhere a plain
    multiplexer. Combinational."""
    n = len(inputs)
    if n not in (4, 8):
        raise ValueError(f"wide_mux takes 4 or 8 inputs, not {n}")
    k = n.bit_length() - 1
    sel = Value.cast(sel)
    if len(sel) < k:
        raise ValueError(f"wide_mux of {n} inputs needs a select of at least {k} bits, "
                         f"not {len(sel)}")
    vals = [Value.cast(v) for v in inputs]
    width = max(len(v) for v in vals)
    out = Signal(width, name=name)
    if not is_ecp5(platform):
        m.d.comb += out.eq(Array(vals)[sel[:k]])
        return out
    for i in range(width):
        bit = [v[i] if i < len(v) else Const(0, 1) for v in vals]
        luts = []
        for j in range(n // 2):
            z = Signal(name=f"{name}_l{j}_{i}")
            m.submodules[f"{name}_lut{j}_{i}"] = Instance(
                "LUT4", p_INIT=Const(_MUX2, 16),
                i_A=sel[0], i_B=bit[2 * j], i_C=bit[2 * j + 1], i_D=Const(0, 1), o_Z=z)
            luts.append(z)
        pf = []
        for j in range(n // 4):
            z = Signal(name=f"{name}_pf{j}_{i}")
            m.submodules[f"{name}_pfumx{j}_{i}"] = Instance(
                "PFUMX", i_ALUT=luts[2 * j + 1], i_BLUT=luts[2 * j], i_C0=sel[1], o_Z=z)
            pf.append(z)
        if n == 4:
            m.d.comb += out[i].eq(pf[0])
        else:
            z = Signal(name=f"{name}_l6_{i}")
            m.submodules[f"{name}_l6mux_{i}"] = Instance(
                "L6MUX21", i_D0=pf[0], i_D1=pf[1], i_SD=sel[2], o_Z=z)
            m.d.comb += out[i].eq(z)
    return out
