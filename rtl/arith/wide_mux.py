"""Multiplexers built from the ECP5 slice's own wide-function multiplexers.

An ECP5 slice holds two LUT4s and a PFUMX that chooses between them, and two slices feed an
L6MUX21: a 4:1 multiplexer is one slice (two LUT4s, each a 2:1 multiplexer on the select's
bit 0, and the PFUMX on bit 1) and an 8:1 multiplexer two slices and the L6MUX21 (bit 2),
one LUT delay and one or two multiplexer delays inside the slices. Left to itself, synthesis
maps the same multiplexer as three levels of LUT4 with routing between them, too slow behind
a block RAM's late output (the sequencer's 8-way selects of R's register indices behind its
control store).

:func:`wide_mux` instantiates that structure when the platform is an ECP5 (the FPGA builds,
``scripts.unit_fmax``) and is a plain multiplexer elsewhere (the Verilog the simulators
run): the same value either way. ``fpga/sim/ECP5_MUX.v`` models the three cells for
simulating the ECP5 netlist (``tests/test_wide_mux.py``).

:func:`lut4` is one LUT4 per bit for a function of four inputs that synthesis would otherwise
split over two levels. :func:`pair_mux` is the 4:1 form with a select of its own for each
LUT4, ``hi ? (sel_b ? b1 : b0) : (sel_a ? a1 : a0)``, a seven-input function in one slice per
bit. :func:`lut6` is a function of five or six inputs as one slice (a PFUMX on the fifth) or two
(and an L6MUX21 on the sixth), the inputs of its multiplexers one cell from the output.
"""

from amaranth.hdl import Array, Const, Instance, Mux, Signal, Value

from rtl.arith.dsp import is_ecp5
from sim.config import check_choice

__all__ = ["wide_mux", "pair_mux", "lut4", "lut4_init", "lut6"]


def lut4_init(fn):
    """The 16-bit ``INIT`` of an ECP5 LUT4 computing ``fn(a, b, c, d)`` (each 0 or 1): bit
    ``8d + 4c + 2b + a`` holds the output for those inputs."""
    return sum(int(bool(fn(i & 1, i >> 1 & 1, i >> 2 & 1, i >> 3 & 1))) << i for i in range(16))


_MUX2 = lut4_init(lambda a, b, c, d: c if a else b)     # Z = A ? C : B


def _slice_muxes(m, name, i, luts, sels, out):
    """The slices' own multiplexers over bit ``i``'s 2 or 4 LUT4 outputs ``luts``: a PFUMX
    per pair on ``sels[0]`` (the odd one when it is 1) and, over four, an L6MUX21 on
    ``sels[1]``, driving ``out`` (:func:`wide_mux`, :func:`lut6`)."""
    pf = []
    for j in range(len(luts) // 2):
        z = Signal(name=f"{name}_pf{j}_{i}")
        m.submodules[f"{name}_pfumx{j}_{i}"] = Instance(
            "PFUMX", i_ALUT=luts[2 * j + 1], i_BLUT=luts[2 * j], i_C0=sels[0], o_Z=z)
        pf.append(z)
    if len(pf) == 1:
        m.d.comb += out.eq(pf[0])
    else:
        m.submodules[f"{name}_l6mux_{i}"] = Instance(
            "L6MUX21", i_D0=pf[0], i_D1=pf[1], i_SD=sels[1], o_Z=out)


def wide_mux(m, platform, sel, inputs, name):
    """``Array(inputs)[sel]`` as a signal named ``name``: ``inputs`` are 4 or 8 values of one
    width (shorter ones are zero-extended to the widest), ``sel`` has at least 2 or 3 bits
    (its low bits select; the others are ignored). On an ECP5 each bit is LUT4s and a PFUMX
    (4 inputs) or two of those and an L6MUX21 (8 inputs), instantiated; elsewhere a plain
    multiplexer. Combinational."""
    n = check_choice("wide_mux's number of inputs", len(inputs), (4, 8))
    k = n.bit_length() - 1
    sel = Value.cast(sel)
    if len(sel) < k:
        raise ValueError(f"wide_mux's sel must be at least {k} bits wide for {n} inputs, "
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
        _slice_muxes(m, name, i, luts, sel[1:3], out[i])
    return out


def pair_mux(m, platform, hi, a, b, name):
    """``Mux(hi, Mux(b[0], b[2], b[1]), Mux(a[0], a[2], a[1]))`` as a signal named ``name``:
    ``a`` and ``b`` are ``(select, value if 0, value if 1)``, the values of one width
    (shorter ones zero-extended). On an ECP5 each bit is one slice: a LUT4 per pair (a 2:1
    multiplexer on its own select) and the PFUMX on ``hi``, instantiated, so a late ``hi``
    or pair select is one multiplexer or one LUT from the output; elsewhere a plain
    multiplexer. Combinational."""
    (sa, a0, a1), (sb, b0, b1) = a, b
    vals = [Value.cast(v) for v in (a0, a1, b0, b1)]
    width = max(len(v) for v in vals)
    out = Signal(width, name=name)
    hi, sa, sb = Value.cast(hi), Value.cast(sa), Value.cast(sb)
    for s_, what in ((hi, "hi"), (sa, "the first pair's select"),
                     (sb, "the second pair's select")):
        if len(s_) != 1:
            raise ValueError(f"pair_mux's {what} must be 1 bit wide, not {len(s_)}")
    if not is_ecp5(platform):
        m.d.comb += out.eq(Mux(hi, Mux(sb, vals[3], vals[2]), Mux(sa, vals[1], vals[0])))
        return out
    for i in range(width):
        bit = [v[i] if i < len(v) else Const(0, 1) for v in vals]
        za, zb = Signal(name=f"{name}_la_{i}"), Signal(name=f"{name}_lb_{i}")
        m.submodules[f"{name}_luta_{i}"] = Instance(
            "LUT4", p_INIT=Const(_MUX2, 16), i_A=sa, i_B=bit[0], i_C=bit[1], i_D=Const(0, 1),
            o_Z=za)
        m.submodules[f"{name}_lutb_{i}"] = Instance(
            "LUT4", p_INIT=Const(_MUX2, 16), i_A=sb, i_B=bit[2], i_C=bit[3], i_D=Const(0, 1),
            o_Z=zb)
        z = Signal(name=f"{name}_pf_{i}")
        m.submodules[f"{name}_pfumx_{i}"] = Instance(
            "PFUMX", i_ALUT=zb, i_BLUT=za, i_C0=hi, o_Z=z)
        m.d.comb += out[i].eq(z)
    return out


def _bitwise(m, platform, fn, args, who, counts, name):
    """The checks and the output shared by :func:`lut4` and :func:`lut6`: ``args`` as values
    (``counts`` of them, each 1 bit or the widest's width) and the output signal ``name``;
    elsewhere than on an ECP5, ``fn`` of the values (1-bit ones replicated) already drives it."""
    check_choice(f"{who}'s number of inputs", len(args), counts)
    vals = [Value.cast(v) for v in args]
    width = max(len(v) for v in vals)
    if any(len(v) not in (1, width) for v in vals):
        raise ValueError(f"{who}'s inputs must each be 1 or {width} bits wide, not "
                         f"{[len(v) for v in vals]}")
    out = Signal(width, name=name)
    if not is_ecp5(platform):
        wide = [v.replicate(width) if len(v) == 1 and width > 1 else v for v in vals]
        m.d.comb += out.eq(fn(*wide))
    return vals, out


def lut4(m, platform, fn, args, name):
    """``fn(a, b, c, d)`` bitwise over ``args = (a, b, c, d)`` (values of one width or 1 bit,
    a 1-bit one shared by every bit) as a signal named ``name``, on an ECP5 one LUT4
    instance per bit (synthesis may split a four-input function whose inputs it sees as a
    select and data over two LUT levels); elsewhere ``fn`` of the values, which must then
    be written with the bitwise operators and ``Mux`` (it is evaluated once on the whole
    values). Combinational."""
    vals, out = _bitwise(m, platform, fn, args, "lut4", (4,), name)
    if not is_ecp5(platform):
        return out
    init = lut4_init(lambda a, b, c, d: fn(a, b, c, d) & 1)
    for i in range(len(out)):
        bit = [v if len(v) == 1 else v[i] for v in vals]
        m.submodules[f"{name}_lut_{i}"] = Instance(
            "LUT4", p_INIT=Const(init, 16), i_A=bit[0], i_B=bit[1], i_C=bit[2], i_D=bit[3],
            o_Z=out[i])
    return out


def lut6(m, platform, fn, args, name):
    """``fn(a, b, c, d, e)`` or ``fn(a, b, c, d, e, f)`` bitwise over ``args`` (5 or 6 values
    of one width or 1 bit, as :func:`lut4`) as a signal named ``name``. On an ECP5 each bit is
    instantiated as the slice's wide function: a LUT4 on ``a, b, c, d`` for each value of the
    others, a PFUMX on ``e`` and with six inputs an L6MUX21 on ``f`` (so ``e`` and ``f``,
    the ones to give the latest signals, are one multiplexer from the output; synthesis
    may otherwise spread such a function over two LUT levels); elsewhere ``fn`` of the
    values, which must then be written with the bitwise operators. Combinational. (Its
    netlist is tested in ``tests/test_fp32_add_cells.py``.)"""
    vals, out = _bitwise(m, platform, fn, args, "lut6", (5, 6), name)
    if not is_ecp5(platform):
        return out
    extra = len(vals) - 4

    def init(k):                     # the LUT4 for ``e`` (and ``f``) = bit 0 (and 1) of ``k``
        hi = [k >> j & 1 for j in range(extra)]
        return lut4_init(lambda a, b, c, d: fn(a, b, c, d, *hi) & 1)
    inits = [init(k) for k in range(1 << extra)]
    for i in range(len(out)):
        bit = [v if len(v) == 1 else v[i] for v in vals]
        luts = []
        for k, init in enumerate(inits):
            z = Signal(name=f"{name}_l{k}_{i}")
            m.submodules[f"{name}_lut{k}_{i}"] = Instance(
                "LUT4", p_INIT=Const(init, 16), i_A=bit[0], i_B=bit[1], i_C=bit[2], i_D=bit[3],
                o_Z=z)
            luts.append(z)
        _slice_muxes(m, name, i, luts, bit[4:], out[i])
    return out
