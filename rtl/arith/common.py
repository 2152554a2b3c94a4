"""Helpers shared by the arithmetic blocks: parameter checks, pipeline cuts and a tree
leading-zero counter."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from sim.config import check_int
from sim.dtypes import Format
from sim.formats import FP8_FORMATS, bias_range

__all__ = ["check_stages", "check_formats", "check_fp8_bias", "Pipelined", "FormatSet", "Pipe",
           "delay", "leading_zeros", "ge_const"]


def check_stages(stages, maximum, name="stages"):
    """``sim.config.check_int(name, stages, 0, maximum)``: a pipeline's stage count."""
    return check_int(name, stages, 0, maximum)


def check_formats(formats, allowed):
    """Validate a ``formats`` parameter: a non-empty collection of :class:`Format` members (or
    their integer codes) drawn from ``allowed``; returns a frozenset of :class:`Format`."""
    if isinstance(formats, (Format, int, str)) or not hasattr(formats, "__iter__"):
        raise TypeError(f"formats must be a collection of Format members, not {formats!r}")
    out = set()
    for f in formats:
        if isinstance(f, bool) or not isinstance(f, int):
            raise TypeError(f"formats must contain Format members, not {f!r}")
        try:
            f = Format(f)
        except ValueError:
            raise ValueError(f"formats must contain Format codes 0..7, not {f!r}") from None
        if f not in allowed:
            names = ", ".join(a.name for a in sorted(allowed))
            raise ValueError(f"formats must be a subset of {{{names}}}, not containing {f.name}")
        out.add(f)
    if not out:
        raise ValueError("formats must contain at least one format, not be empty")
    return frozenset(out)


def check_fp8_bias(fp8_bias):
    """Validate an ``fp8_bias`` parameter (``None`` or a mapping from FP8 formats to exponent
    biases); returns a dict with an entry for every FP8 format."""
    from sim.dtypes import FLOAT_SPECS
    out = {f: FLOAT_SPECS[f].bias for f in FP8_FORMATS}
    if fp8_bias is None:
        return out
    if not hasattr(fp8_bias, "items"):
        raise TypeError(f"fp8_bias must be a mapping from FP8 formats to biases, not {fp8_bias!r}")
    for f, b in fp8_bias.items():
        if isinstance(f, bool) or not isinstance(f, int) or f not in [int(x) for x in FP8_FORMATS]:
            raise ValueError(f"fp8_bias keys must be FP8 formats (FP8_E4M3, FP8_E5M2, FP8_E3M4), "
                             f"not {f!r}")
        f = Format(f)
        r = bias_range(f)
        out[f] = check_int(f"fp8_bias[{f.name}]", b, r.start, r.stop - 1)
    return out


class Pipelined:
    """The base of a block pipelined by ``stages`` (checked by :func:`check_stages` into
    ``_stages``): ``stages`` read-only, and ``latency``, the cycles from operands to result,
    equal to ``stages``."""

    stages = property(lambda self: self._stages)
    latency = property(lambda self: self._stages,
                       doc="Cycles from operands to result (equal to ``stages``).")


class FormatSet:
    """The base of a block built for a set of formats (checked by :func:`check_formats` and
    :func:`check_fp8_bias` into ``_formats`` and ``_fp8_bias``): ``formats`` and ``fp8_bias``
    (a copy) read-only."""

    formats = property(lambda self: self._formats)
    fp8_bias = property(lambda self: dict(self._fp8_bias))


class Pipe:
    """Optional pipeline registers at numbered cut points of a datapath.

    ``pipe(k, value, name)`` returns ``value`` itself if cut ``k`` is not registered, else a
    register named ``s{k}_{name}`` loaded with ``value`` on every cycle with ``en`` high (so a
    low ``en`` freezes every stage).

    The registers have no reset (they start at 0 in simulation and in a bitstream, and keep
    their contents through a reset): they hold data, never control, and every user tracks
    their validity with valid bits of its own (``delay`` of a valid, which does reset), so the
    reset net does not fan out to the datapaths' many thousand flip-flops nor constrain which
    flip-flops share a slice.
    """

    def __init__(self, m, en, cuts):
        self._m = m
        self._en = en
        self.cuts = frozenset(cuts)

    def __call__(self, k, value, name):
        if k not in self.cuts:
            return value
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"s{k}_{name}", reset_less=True)
        with self._m.If(self._en):
            self._m.d.sync += reg.eq(value)
        return reg


def delay(m, en, value, cycles, name, *, reset_less=False):
    """``value`` through ``cycles`` registers (``{name}_d1``, ...) loaded on every cycle with
    ``en`` high, so that it stays in step with a pipeline of that many enabled stages; ``value``
    itself when ``cycles`` is 0. Registers reset to 0, unless ``reset_less``: for data whose
    validity a unit tracks with bits of its own (as ``Pipe`` does), so that the reset and
    the core's soft reset do not fan out to every pipeline bit."""
    value = Value.cast(value)
    for i in range(cycles):
        reg = Signal(value.shape(), name=f"{name}_d{i + 1}", reset_less=reset_less)
        with m.If(en):
            m.d.sync += reg.eq(value)
        value = reg
    return value


def ge_const(value, k):
    """``value >= k`` (unsigned) for an integer constant ``k``, as AND/OR logic of the bits.

    Yosys maps a comparison operator to a carry chain (a CCU2C chain on the ECP5: a routed
    level in and one out); against a constant, AND/OR terms map to a LUT or two instead."""
    value = Value.cast(value)
    width = len(value)
    if k <= 0:
        return Const(1, 1)
    if k >= 1 << width:
        return Const(0, 1)
    ge = Const(1, 1)                  # the empty low part: equal, so ">=" holds
    for i in range(width):            # from the LSB: bits 0..i of value >= those of k
        ge = (value[i] & ge) if (k >> i) & 1 else (value[i] | ge)
    return ge


def leading_zeros(m, value, name="lz", cut=None, cut_level=2):
    """Number of leading zeros of ``value`` (meaningless if it is zero) as a logarithmic tree of
    multiplexers whose every node is a named signal (shared, not re-computed per use, which
    also keeps the generated Verilog small and fast to simulate): returns ``(count,
    is_zero)``.

    ``cut(node, name)``, if given, is applied to every node of level ``cut_level`` (groups of
    ``2**cut_level`` bits; e.g. a pipeline register), so that the tree's lower levels precede
    it and its upper levels follow it; ``is_zero`` is then not cut (it is ``value == 0``)."""
    value = Value.cast(value)
    width = len(value)
    size = 1
    while size < width:
        size *= 2
    # Pad on the right with ones so that a zero input counts exactly `width`.
    padded = Signal(size, name=f"{name}_in")
    m.d.comb += padded.eq(Cat(Const((1 << (size - width)) - 1, size - width), value)
                          if size > width else value)
    # Level 0: per bit "is zero". Each node of a level covers 2**k bits: (all zero, count).
    zeros = [~padded[i] for i in range(size)]
    counts = [None] * size
    span = 1
    level = 0
    while span < size:
        span *= 2
        level += 1
        nz, nc = [], []
        for j in range(0, len(zeros), 2):
            lo_z, hi_z = zeros[j], zeros[j + 1]
            lo_c, hi_c = counts[j], counts[j + 1]
            z = Signal(name=f"{name}_z{level}_{j // 2}")
            c = Signal(range(span), name=f"{name}_c{level}_{j // 2}")
            m.d.comb += z.eq(lo_z & hi_z)
            if span == 2:
                # hi bit set: 0; hi clear: 1 (lo set) or 2 -> only needed when not all zero
                m.d.comb += c.eq(hi_z)
            else:
                m.d.comb += c.eq(Mux(hi_z, Cat(lo_c, Const(1, 1)), Cat(hi_c, Const(0, 1))))
            nz.append(z)
            nc.append(c)
        zeros, counts = nz, nc
        if cut is not None and level == cut_level:
            zeros = [cut(z, f"{name}_z{level}_{j}") for j, z in enumerate(zeros)]
            counts = [cut(c, f"{name}_c{level}_{j}") for j, c in enumerate(counts)]
    is_zero = Signal(name=f"{name}_zero")
    m.d.comb += is_zero.eq(value == 0)
    if size == 1:
        return zeros[0], is_zero
    return counts[0], is_zero
