"""The rows x cols grid of processing elements (no skew, no control).

Accumulation order
------------------
Column ``c`` computes, for one moving vector ``x`` (one beat)::

    s = w[0][c] * x[0]                      # row 0: the exact product, no addition
    s = s + w[r][c] * x[r]   for r = 1 .. rows-1, in this order

where every ``+`` is one FP32 addition rounded to nearest even with DAZ/FTZ and canonical NaN
(``sim.formats.fp32_add``), or a wrapping INT32 addition for INT8, and every ``*`` is the exact
product of ``FPMultiplier`` (``sim.formats.mul_exact``). All ``rows`` rows take part: rows
beyond the instruction's K hold zero weights and see zero moving values, so they add ``+0``
products, which leave the sum unchanged except that a ``-0`` sum becomes ``+0``.
``sim.tensor.matmul`` reproduces this order bit for bit.

With ``accumulate="fused"`` (``docs/tensor.md``, "Fused column accumulation") the column
passes down the fused sum ``(S, E, flags)`` instead, and one ``ColumnNormaliser`` per column
turns it into FP32 (or INT32) bits below the last row:
``sim.tensor.matmul(..., accumulate="fused")``.
"""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim.dtypes import Format

from sim.config import check_int
from sim.tensor import check_accumulate, fused_width

from .pe import (MAX_ADD_STAGES, MAX_MUL_STAGES, ProcessingElement, check_dsp_regs,
                 check_formats, row_delay, weight_width)

__all__ = ["MAX_DIM", "ArrayParameters", "SystolicArray"]

#: The largest number of rows or columns of an array.
MAX_DIM = 512


class ArrayParameters:
    """The parameters of an array of processing elements, checked and read-only: the base of
    :class:`SystolicArray` and of the tensor engine built around one."""

    def _check_array(self, rows, cols, formats, mul_stages, add_stages, dsp_regs,
                     accumulate="fp32"):
        self._rows = check_int("rows", rows, 2, MAX_DIM)
        self._cols = check_int("cols", cols, 2, MAX_DIM)
        self._formats = check_formats(formats)
        self._mul_stages = check_int("mul_stages", mul_stages, 0, MAX_MUL_STAGES)
        self._add_stages = check_int("add_stages", add_stages, 0, MAX_ADD_STAGES)
        self._dsp_regs = check_dsp_regs(dsp_regs, self._formats)
        self._accumulate = check_accumulate(accumulate)

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    formats = property(lambda self: self._formats)
    mul_stages = property(lambda self: self._mul_stages)
    add_stages = property(lambda self: self._add_stages)
    dsp_regs = property(lambda self: self._dsp_regs)
    accumulate = property(lambda self: self._accumulate)

    @property
    def fused(self):
        """Fused accumulation is built (``accumulate="fused"`` and a floating-point format)."""
        return self._accumulate == "fused" and any(f != Format.INT8 for f in self._formats)

    @property
    def norm_stages(self):
        """Registers of each column's normaliser (0 unless fused)."""
        from .fused import norm_stages
        return norm_stages(self._add_stages) if self.fused else 0

    @property
    def row_delay(self):
        """Skew between consecutive rows, in cycles."""
        return row_delay(self._formats, self._add_stages)


class SystolicArray(ArrayParameters, wiring.Component):
    """A weight-stationary array: moving values flow right, partial sums flow down.

    Row ``r`` of the moving input must be presented ``r * row_delay`` cycles after row 0 (the
    engine's skew does this); the sum of column ``c`` for a vector whose row 0 entered at cycle
    ``t`` appears on ``psum[c]`` at cycle ``t + 1 + mul_stages + rows * row_delay + norm_stages
    + c`` (the
    engine's de-skew aligns the columns). Every cycle a new vector may enter.

    Parameters
    ----------
    rows, cols : int
        Array size, each from 2 to 512 (rows = K, the contraction; cols = M, the outputs).
    formats : collection of Format
        Supported input formats.
    mul_stages, add_stages : int
        Pipeline stages of the multiplier and of the FP32 adder in every PE.
    dsp_regs : bool
        INT8-only arrays: every PE's multiplier registers are the DSP block's own
        (``ProcessingElement``'s ``dsp_regs``); the same values in the same cycles.
    accumulate : {"fp32", "fused"}
        Column accumulation (``docs/tensor.md``); default ``"fp32"``. Fused adds
        ``norm_stages = min(add_stages, 2)`` cycles (the column normalisers) to the latency.

    Members
    -------
    en : In(1)
        Clock enable of the whole data path (weights excluded).
    x : In(ArrayLayout(width, rows)); x_bank : In(rows); x_fmt : In(ArrayLayout(3, rows))
        Moving element, weight bank and format entering PE ``(r, 0)``, per row.
    w_data : In(ArrayLayout(width, rows))
        Stationary column being loaded: element ``r`` goes to row ``r`` of every selected column.
    w_we : In(ArrayLayout(2, cols)); w_zero : In(cols)
        Column ``c`` writes bank ``b`` when ``w_we[c][b]`` (zero instead when ``w_zero[c]``).
    w_fmt : In(3)
        Fused arrays only: the format of ``w_data`` (each row decodes its weight once, and its
        moving value at its left edge, for all its PEs: ``rtl.tensor.fused_pe``).
    psum : Out(ArrayLayout(32, cols))
        Column sums leaving the bottom row (FP32 or INT32 bits).
    """

    def __init__(self, rows, cols, formats, *, mul_stages=1, add_stages=1, dsp_regs=False,
                 accumulate="fp32"):
        self._check_array(rows, cols, formats, mul_stages, add_stages, dsp_regs, accumulate)
        width = weight_width(self._formats)
        extra = {"w_fmt": In(3)} if self.fused else {}
        super().__init__({**extra,
            "en": In(1, init=1),
            "x": In(data.ArrayLayout(width, rows)),
            "x_bank": In(rows),
            "x_fmt": In(data.ArrayLayout(3, rows)),
            "w_data": In(data.ArrayLayout(width, rows)),
            "w_we": In(data.ArrayLayout(2, cols)),
            "w_zero": In(cols),
            "psum": Out(data.ArrayLayout(32, cols)),
        })

    @property
    def latency(self):
        """Cycles from row 0's input to column 0's sum."""
        return 1 + self._mul_stages + self._rows * self.row_delay + self.norm_stages

    def elaborate(self, platform):
        if self.fused:
            return self._elaborate_fused()
        m = Module()
        pe = [[None] * self._cols for _ in range(self._rows)]
        for r in range(self._rows):
            for c in range(self._cols):
                p = ProcessingElement(self._formats, mul_stages=self._mul_stages,
                                      add_stages=self._add_stages, top=(r == 0),
                                      int_bits=min(32, 16 + ceil_log2(r + 1)),
                                      dsp_regs=self._dsp_regs)
                m.submodules[f"pe_r{r}_c{c}"] = pe[r][c] = p
                m.d.comb += [
                    p.en.eq(self.en),
                    p.w_data.eq(self.w_data[r]),
                    p.w_we.eq(self.w_we[c]),
                    p.w_zero.eq(self.w_zero[c]),
                ]
                if c == 0:
                    m.d.comb += [p.x_in.eq(self.x[r]), p.x_bank_in.eq(self.x_bank[r]),
                                 p.x_fmt_in.eq(self.x_fmt[r])]
                else:
                    left = pe[r][c - 1]
                    m.d.comb += [p.x_in.eq(left.x_out), p.x_bank_in.eq(left.x_bank_out),
                                 p.x_fmt_in.eq(left.x_fmt_out)]
                if r > 0:
                    m.d.comb += p.psum_in.eq(pe[r - 1][c].psum_out)
        for c in range(self._cols):
            m.d.comb += self.psum[c].eq(pe[self._rows - 1][c].psum_out)
        return m

    def _elaborate_fused(self):
        """Fused arrays: row-shared operand decoders, ``FusedPE`` cells, column normalisers."""
        from .fused import ColumnNormaliser
        from .fused_pe import FusedPE, OperandDecoder
        m = Module()
        W = fused_width(self._rows)
        pe = [[None] * self._cols for _ in range(self._rows)]
        for r in range(self._rows):
            m.submodules[f"wdec_r{r}"] = wdec = OperandDecoder(self._formats, exp_bias=127)
            m.submodules[f"xdec_r{r}"] = xdec = OperandDecoder(self._formats)
            m.d.comb += [wdec.bits.eq(self.w_data[r]), wdec.fmt.eq(self.w_fmt),
                         xdec.bits.eq(self.x[r]), xdec.fmt.eq(self.x_fmt[r])]
            for c in range(self._cols):
                p = FusedPE(self._formats, mul_stages=self._mul_stages,
                            add_stages=self._add_stages, top=(r == 0), fused_bits=W)
                m.submodules[f"pe_r{r}_c{c}"] = pe[r][c] = p
                m.d.comb += [p.en.eq(self.en), p.w_data.eq(wdec.o), p.w_we.eq(self.w_we[c]),
                             p.w_zero.eq(self.w_zero[c])]
                if c == 0:
                    m.d.comb += [p.x_in.eq(xdec.o), p.x_bank_in.eq(self.x_bank[r])]
                else:
                    left = pe[r][c - 1]
                    m.d.comb += [p.x_in.eq(left.x_out), p.x_bank_in.eq(left.x_bank_out)]
                if r > 0:
                    m.d.comb += p.psum_in.eq(pe[r - 1][c].psum_out)
        for c in range(self._cols):
            m.submodules[f"norm_c{c}"] = norm = ColumnNormaliser(W, self.norm_stages)
            m.d.comb += [norm.en.eq(self.en), norm.psum.eq(pe[self._rows - 1][c].psum_out),
                         self.psum[c].eq(norm.o)]
        return m
