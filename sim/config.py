"""One configuration object for the core, shared by the RTL, the reference simulator and every
backend.

A :class:`CoreConfig` holds the parameters of ``rtl.core.top.NeuronCore`` with the same names,
ranges and defaults; ``NeuronCore.from_config(cfg)`` builds the RTL, ``cfg.refsim(program)``
the reference simulator with the same geometry, formats and vector-engine parameters (and the
core's checks on), so a program checked on the model behaves the same on the RTL.

    cfg = CoreConfig.preset("core8")          # or CoreConfig(rows=8, sbuf_depth=1024)
    cfg.to_dict()                             # JSON-able (formats as names), from_dict inverts
    CoreConfig.from_dict(json.loads(text))

This module imports neither Amaranth nor cocotb.
"""

import dataclasses

from sim.dtypes import Format

__all__ = ["CoreConfig", "ENGINE_FORMATS", "PRESETS", "check_int", "check_pow2",
           "check_formats", "parse_seeds"]

#: Tensor-engine input formats a core can be built with (the accumulator is FP32 or INT32).
ENGINE_FORMATS = (Format.INT8, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4, Format.BF16,
                  Format.FP16)


def check_int(name, value, lo, hi):
    """Return ``value`` or raise ``TypeError``/``ValueError`` naming ``name`` and the range."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {value}")
    return value


def check_pow2(name, value, lo, hi):
    """Return ``value`` or raise unless it is a power of two from ``lo`` to ``hi``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < lo or value > hi or value & (value - 1):
        raise ValueError(f"{name} must be a power of two from {lo} to {hi}, not {value}")
    return value


def check_bool(name, value):
    """Return ``value`` or raise ``TypeError`` naming ``name`` unless it is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return value


def check_choice(name, value, allowed):
    """Return ``value`` or raise ``ValueError`` naming ``name`` and the ``allowed`` values
    (``TypeError`` when ``allowed`` holds integers and ``value`` is not one)."""
    allowed = tuple(allowed)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in allowed) and (
            not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}, not {value!r}")
    return value


def parse_seeds(text, *, name="seeds", lo=0):
    """``"1,2,5"``, ``"0-99"`` or both (``"1-3,7"``) -> a tuple of distinct integers
    ``>= lo``, or ``ValueError`` naming ``name`` and the accepted forms."""
    seeds = []
    try:
        for part in str(text).split(","):
            first, _, last = part.strip().partition("-")
            first, last = int(first), int(last or first)
            if first < lo or last < first:
                raise ValueError
            seeds.extend(range(first, last + 1))
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"{name} must be distinct integers >= {lo}, as a list (1,2,5) or a "
                         f"range ({lo}-{lo + 3}), not {text!r}")
    return tuple(seeds)


def check_formats(value, *, names=True):
    """Return the tensor-engine formats ``value`` (a collection of Format, or of their names
    if ``names``) as a tuple in :data:`ENGINE_FORMATS` order, or raise ``TypeError`` /
    ``ValueError`` naming ``formats`` and the allowed set."""
    if isinstance(value, (Format, int, str)) or not hasattr(value, "__iter__"):
        raise TypeError(f"formats must be a collection of Format, not {value!r}")
    out = []
    for f in value:
        if isinstance(f, str) and names:
            try:
                f = Format[f.upper()]
            except KeyError:
                raise ValueError(f"formats: unknown format name {f!r}") from None
        if not isinstance(f, Format):
            raise TypeError(f"formats must contain Format members, not {f!r}")
        if f not in ENGINE_FORMATS:
            allowed = ", ".join(x.name for x in ENGINE_FORMATS)
            raise ValueError(f"formats must be a subset of {{{allowed}}}, not containing "
                             f"{f.name}")
        out.append(f)
    if not out:
        raise ValueError("formats must contain at least one format, not be empty")
    return tuple(sorted(set(out), key=ENGINE_FORMATS.index))


#: Tensor-engine column accumulation (``docs/tensor.md``): one FP32 addition per row, or fused.
ACCUMULATE = ("fp32", "fused")


@dataclasses.dataclass(frozen=True)
class CoreConfig:
    """The parameters of one core (``docs/core.md``); every field is checked on creation.

    Parameters
    ----------
    rows : int
        Tensor-array rows = SBUF partitions = vector lanes (P), 2 to 128.
    cols : int or None
        Tensor-array columns = PSUM partitions, 2 to ``rows`` (None: ``rows``).
    sbuf_depth, psum_depth : int
        Words per SBUF / PSUM partition, powers of two from 16 to 65536.
    formats : collection of Format (or names)
        Tensor-engine input formats, a subset of :data:`ENGINE_FORMATS`.
    lut_entries : int
        Vector-engine LUT entries per bank, a power of two from 8 to 1024.
    n_rand : int
        Random bits per stochastic-rounding decision, 1 to 23.
    pmem_depth : int
        Program-memory instructions, a power of two from 16 to 2048.
    dma_windows : int
        DMA address windows, 1 to 8.
    max_burst : int
        Longest AXI burst of the DMA in beats, a power of two from 1 to 256.
    dma_data_width : int
        The DMA's AXI4 data width in bits, a power of two from 32 to 512 (bus bytes per
        cycle = ``dma_data_width // 8``).
    tensor_add_stages, tensor_mul_stages : int
        Pipeline stages of each tensor PE's FP32 adder and multiplier, 1 to 4.
    vector_units : int or None
        Vector-engine evaluation units (``VectorEngine(units=...)``, the compact engine of
        ``docs/vector.md``), a divisor of ``rows``; None: one per lane.
    tensor_accumulate : str
        The tensor engine's column accumulation, one of :data:`ACCUMULATE` (``docs/tensor.md``):
        ``"fp32"`` (default) or ``"fused"``.
    """

    rows: int = 4
    cols: int = None
    sbuf_depth: int = 256
    psum_depth: int = 64
    formats: tuple = ENGINE_FORMATS
    lut_entries: int = 64
    n_rand: int = 8
    pmem_depth: int = 256
    dma_windows: int = 4
    max_burst: int = 16
    dma_data_width: int = 32
    tensor_add_stages: int = 1
    tensor_mul_stages: int = 1
    vector_units: int = None
    tensor_accumulate: str = "fp32"

    def __post_init__(self):
        check_int("rows", self.rows, 2, 128)
        if self.cols is None:
            object.__setattr__(self, "cols", self.rows)
        check_int("cols", self.cols, 2, self.rows)
        check_pow2("sbuf_depth", self.sbuf_depth, 16, 65536)
        check_pow2("psum_depth", self.psum_depth, 16, 65536)
        object.__setattr__(self, "formats", check_formats(self.formats))
        check_pow2("lut_entries", self.lut_entries, 8, 1024)
        check_int("n_rand", self.n_rand, 1, 23)
        check_pow2("pmem_depth", self.pmem_depth, 16, 2048)
        check_int("dma_windows", self.dma_windows, 1, 8)
        check_pow2("max_burst", self.max_burst, 1, 256)
        check_pow2("dma_data_width", self.dma_data_width, 32, 512)
        check_int("tensor_add_stages", self.tensor_add_stages, 1, 4)
        check_int("tensor_mul_stages", self.tensor_mul_stages, 1, 4)
        check_choice("tensor_accumulate", self.tensor_accumulate, ACCUMULATE)
        if self.vector_units is not None:
            check_int("vector_units", self.vector_units, 1, self.rows)
            if self.rows % self.vector_units:
                raise ValueError(f"vector_units must be a divisor of rows ({self.rows}), "
                                 f"not {self.vector_units}")

    @property
    def partitions(self):
        """SBUF partitions = vector lanes = ``rows``."""
        return self.rows

    def replace(self, **changes):
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """JSON-able form (formats as lower-case names); :meth:`from_dict` inverts it."""
        d = dataclasses.asdict(self)
        d["formats"] = [f.name.lower() for f in self.formats]
        return d

    @classmethod
    def from_dict(cls, d):
        """A configuration from :meth:`to_dict` output (unknown keys raise ``TypeError``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise TypeError(f"unknown CoreConfig parameter(s): {', '.join(unknown)}; "
                            f"allowed: {', '.join(sorted(names))}")
        return cls(**d)

    @classmethod
    def preset(cls, name):
        """A named configuration of :data:`PRESETS` (``core4`` is the default core)."""
        try:
            return cls(**PRESETS[name])
        except KeyError:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}") \
                from None

    @property
    def name(self):
        """A short stable name for build directories and records, e.g. ``r4c4-s256-p64``."""
        fm = "".join(f"{int(f)}" for f in self.formats)
        return (f"r{self.rows}c{self.cols}-s{self.sbuf_depth}-p{self.psum_depth}-f{fm}"
                f"-l{self.lut_entries}-n{self.n_rand}-m{self.pmem_depth}-w{self.dma_windows}"
                f"-b{self.max_burst}-t{self.tensor_add_stages}{self.tensor_mul_stages}"
                + (f"-d{self.dma_data_width}" if self.dma_data_width != 32 else "")
                + (f"-v{self.vector_units}" if self.vector_units is not None else "")
                + ("-afused" if self.tensor_accumulate == "fused" else ""))

    def refsim(self, program, **kwargs):
        """A ``sim.refsim.RefSim`` of ``program`` with this geometry, these formats and
        vector-engine parameters, the core's record checks and the race check
        (``sim/races.py``) on (``kwargs`` override)."""
        from sim.refsim import RefSim
        return RefSim(program, config=self, **kwargs)


#: Named configurations: the default core (``python -m rtl.generate``), the 8x8 core of the
#: benchmarks and the 2x2 core of the ULX3S build.
PRESETS = {
    "core4": dict(rows=4),
    "core8": dict(rows=8, sbuf_depth=1024, psum_depth=256),
    "core2": dict(rows=2, sbuf_depth=1024, psum_depth=256, tensor_add_stages=3,
                  tensor_mul_stages=4),
}
