"""Helpers shared by the arithmetic blocks: parameter checks, pipeline cuts and a tree
leading-zero counter."""

from amaranth.hdl import Mux, Signal, Value

from sim.dtypes import Format
from sim.formats import FP8_FORMATS, bias_range

__all__ = ["check_stages", "check_formats", "check_fp8_bias", "Pipe", "leading_zeros"]


def check_stages(stages, maximum):
    """Validate a ``stages`` parameter: an integer from 0 to ``maximum``."""
    if not isinstance(stages, int) or isinstance(stages, bool):
        raise TypeError(f"stages must be an integer, not {stages!r}")
    if not 0 <= stages <= maximum:
        raise ValueError(f"stages must be an integer from 0 to {maximum}, not {stages}")
    return stages


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
            raise ValueError(f"formats must be a subset of {{{names}}}, not contain {f.name}")
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
        if isinstance(b, bool) or not isinstance(b, int):
            raise TypeError(f"fp8_bias[{f.name}] must be an integer, not {b!r}")
        r = bias_range(f)
        if b not in r:
            raise ValueError(f"fp8_bias[{f.name}] must be in {r.start}..{r.stop - 1}, not {b}")
        out[f] = b
    return out


class Pipe:
    """Optional pipeline registers at numbered cut points of a datapath.

    ``pipe(k, value, name)`` returns ``value`` itself if cut ``k`` is not registered, else a
    register named ``s{k}_{name}`` loaded with ``value`` on every cycle with ``en`` high (so a
    low ``en`` freezes every stage). Registers reset to 0.
    """

    def __init__(self, m, en, cuts):
        self._m = m
        self._en = en
        self.cuts = frozenset(cuts)

    def __call__(self, k, value, name):
        if k not in self.cuts:
            return value
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"s{k}_{name}")
        with self._m.If(self._en):
            self._m.d.sync += reg.eq(value)
        return reg


def leading_zeros(value):
    """Number of leading zeros of ``value`` (its full width if zero), as a logarithmic tree of
    multiplexers: returns ``(count, is_zero)``."""
    value = Value.cast(value)
    width = len(value)
    size = 1
    while size < width:
        size *= 2
    # Pad on the right with ones so the count never exceeds the real width (and a zero input
    # counts exactly `width`).
    padded = value if size == width else \
        Value.cast(value).as_unsigned() << (size - width) | ((1 << (size - width)) - 1)

    def tree(v, n):
        if n == 1:
            return ~v[0], ~v[0]
        hi_cnt, hi_zero = tree(v[n // 2:n], n // 2)
        lo_cnt, lo_zero = tree(v[0:n // 2], n // 2)
        # Counts of the halves are < n // 2 unless the half is all zero.
        count = Mux(hi_zero, (n // 2) + lo_cnt, hi_cnt)
        return count, hi_zero & lo_zero

    count, _ = tree(padded, size)
    is_zero = value == 0
    return count, is_zero
