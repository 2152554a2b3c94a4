"""One processing element of the weight-stationary systolic array."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.arith.dsp import registered_product
from sim import config
from sim.config import ENGINE_FORMATS
from sim.dtypes import Format

__all__ = ["ENGINE_FORMATS", "MAX_MUL_STAGES", "MAX_ADD_STAGES", "check_formats",
           "check_dsp_regs", "weight_width", "row_delay", "ProcessingElement"]


def check_formats(formats):
    """``sim.config.check_formats`` for :class:`Format` members (a subset of
    :data:`sim.config.ENGINE_FORMATS`), returned as a frozenset."""
    return frozenset(config.check_formats(formats, names=False))


#: Limits of ``FPMultiplier.MAX_STAGES`` and ``FP32Adder.MAX_STAGES`` (checked by a test).
MAX_MUL_STAGES = 4
MAX_ADD_STAGES = 4


def weight_width(formats):
    """Bits kept per stationary/moving element: 8 when every format is 8 bits wide, else 16."""
    return 8 if all(f in (Format.INT8, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4)
                    for f in formats) else 16


def check_dsp_regs(dsp_regs, formats):
    """``dsp_regs`` checked: a bool, True only for an INT8-only set of ``formats`` (the FP
    multipliers place their own registers, ``rtl.arith.fp_mul``)."""
    config.check_bool("dsp_regs", dsp_regs)
    if dsp_regs and _has_fp(formats):
        raise ValueError("dsp_regs must be False when formats include a floating-point "
                         "format (True only for {INT8}), not True")
    return dsp_regs


def _has_fp(formats):
    return any(f != Format.INT8 for f in formats)


def row_delay(formats, add_stages):
    """Cycles a partial sum spends in one PE (the skew between consecutive rows).

    The FP32 adder's ``add_stages`` pipeline registers, or one register when it is combinational;
    an INT8-only array uses a plain registered adder (one cycle) whatever ``add_stages`` is.
    """
    return max(add_stages, 1) if _has_fp(formats) else 1


class ProcessingElement(wiring.Component):
    """A multiply-accumulate cell with a double-buffered stationary weight.

    The PE at row ``r``, column ``c`` of the array holds ``stationary[r, c]`` (two copies, banks 0
    and 1: one in use, the other loading). Moving values enter from the left, are registered
    (``x_reg``) and leave to the right one cycle later; partial sums enter from above and leave
    below ``row_delay`` cycles later::

        psum_out = psum_in + w[x_bank] * x      (FP32 RNE, or INT32 wrapping for INT8)
        psum_out = w[x_bank] * x                (top row: no adder, the column starts here)

    The product is taken ``mul_stages`` cycles after ``x_reg``; ``psum_in`` must arrive then.
    ``w[x_bank]`` is sampled at the clock edge that loads ``x_reg`` (the weight register beside
    it), so a weight must be written at an earlier edge than the moving values that use it
    enter: a write to a bank whose values are still in the PE reaches only later values. The
    engine never writes a bank in use (it waits for the bank's drain), so this costs nothing.

    Parameters
    ----------
    formats : collection of Format
        Formats this PE supports (subset of :data:`ENGINE_FORMATS`).
    mul_stages, add_stages : int
        Pipeline stages of the multiplier (0 to 3) and of the FP32 adder (0 to 4).
    top : bool
        Top row: no ``psum_in``, no adder.
    dsp_regs : bool
        INT8-only builds: the multiplier's operand registers are the DSP block's input
        registers (loaded from ``x_in`` and the weight bank at the edge that loads ``x_reg``)
        and, when ``mul_stages >= 1``, the first product register is its output register
        (``rtl.arith.dsp.registered_product``; fabric registers on other platforms). The
        multiply then runs register to register inside the MULT18X18D, with no routed hop
        into or out of the block in the same cycle. The same values in the same cycles as
        without it; default False. Requires ``formats == {INT8}``.
    int_bits : int
        INT8-only builds: width of this PE's partial sum (16 to 32). The array gives row ``r``
        ``16 + ceil(log2(r + 1))`` bits, enough for ``r + 1`` products of at most 2**14 in
        magnitude; ``psum_out`` is that value sign-extended to 32 bits. Ignored when a
        floating-point format is built.

    Members
    -------
    en : In(1)
        Clock enable of every register on the data path (weights excluded): 0 freezes the PE.
    x_in, x_bank_in, x_fmt_in : In(width), In(1), In(3)
        Moving element (low-aligned bits), the weight bank it multiplies with, and its format.
    x_out, x_bank_out, x_fmt_out : Out
        The same, registered, for the PE to the right.
    w_data : In(width)
        Weight to load; ``w_we[b]`` writes bank ``b`` at the clock edge (independent of ``en``),
        with zero instead of ``w_data`` when ``w_zero`` is 1. Moving values entering the PE at
        a later edge use it.
    psum_in : In(32)
        Partial sum from above (absent in the top row).
    psum_out : Out(32)
        Partial sum (FP32 or INT32 bits), registered.
    """

    def __init__(self, formats, *, mul_stages=1, add_stages=1, top=False, int_bits=32,
                 dsp_regs=False):
        self._formats = check_formats(formats)
        self._mul_stages = config.check_int("mul_stages", mul_stages, 0, MAX_MUL_STAGES)
        self._add_stages = config.check_int("add_stages", add_stages, 0, MAX_ADD_STAGES)
        config.check_bool("top", top)
        self._top = top
        self._dsp_regs = check_dsp_regs(dsp_regs, self._formats)
        self._int_bits = config.check_int("int_bits", int_bits, 16, 32)
        self._width = weight_width(self._formats)
        sig = {
            "en": In(1, init=1),
            "x_in": In(self._width), "x_bank_in": In(1), "x_fmt_in": In(3),
            "x_out": Out(self._width), "x_bank_out": Out(1), "x_fmt_out": Out(3),
            "w_data": In(self._width), "w_we": In(2), "w_zero": In(1),
            "psum_out": Out(32),
        }
        if not top:
            sig["psum_in"] = In(32)
        super().__init__(sig)

    formats = property(lambda self: self._formats)
    mul_stages = property(lambda self: self._mul_stages)
    add_stages = property(lambda self: self._add_stages)
    top = property(lambda self: self._top)
    width = property(lambda self: self._width)
    int_bits = property(lambda self: self._int_bits)
    dsp_regs = property(lambda self: self._dsp_regs)

    @property
    def row_delay(self):
        """Cycles from ``psum_in`` to ``psum_out``."""
        return row_delay(self._formats, self._add_stages)

    def elaborate(self, platform):
        m = Module()
        en = self.en
        formats = self._formats
        multi = len(formats) > 1
        has_int = Format.INT8 in formats
        has_fp = _has_fp(formats)
        D = self.row_delay
        Sm = self._mul_stages

        # Moving value, its bank and format, registered and passed right.
        x = Signal(self._width)
        x_bank = Signal()
        x_fmt = Signal(3)
        with m.If(en):
            m.d.sync += [x.eq(self.x_in), x_bank.eq(self.x_bank_in)]
            if multi:
                m.d.sync += x_fmt.eq(self.x_fmt_in)
        m.d.comb += [self.x_out.eq(x), self.x_bank_out.eq(x_bank), self.x_fmt_out.eq(x_fmt)]
        if not multi:
            m.d.comb += x_fmt.eq(next(iter(formats)).value)

        # Double-buffered stationary weight.
        w = [Signal(self._width, name=f"w{b}") for b in range(2)]
        for b in range(2):
            with m.If(self.w_we[b]):
                m.d.sync += w[b].eq(Mux(self.w_zero, 0, self.w_data))
        # The weight is sampled together with the moving value (from the bank it names), so the
        # multiplier's inputs are both flip-flops: the bank mux sits before the register, not
        # between the weights and the DSP block.
        weight = Signal(self._width)
        if not self._dsp_regs:
            with m.If(en):
                m.d.sync += weight.eq(Mux(self.x_bank_in, w[1], w[0]))

        # Product, FP32 bits (or INT32 for INT8), valid mul_stages cycles after x.
        product = Signal(32)
        if has_fp:
            from rtl.arith.fp_mul import FPMultiplier
            m.submodules.mul = mul = FPMultiplier(formats, stages=Sm)
            m.d.comb += [mul.a.eq(weight), mul.b.eq(x), mul.fmt.eq(x_fmt), product.eq(mul.p)]
            if Sm and hasattr(mul, "en"):
                m.d.comb += mul.en.eq(en)
        else:
            # INT8 only: a signed 8x8 multiply (one MULT18X18D), then the pipeline registers.
            # The registers hold 16 bits (and the partial sums int_bits); the upper bits of
            # the 32-bit ports are sign extension, so they cost no flip-flops.
            p = Signal(signed(16))
            # (here and below the pipeline registers hold data only, the array tracks
            # validity: they have no reset)
            if self._dsp_regs:
                # The block's input registers stand for ``weight`` and ``x``: they take the
                # same values at the same edges.
                selected = Signal(8)
                m.d.comb += selected.eq(Mux(self.x_bank_in, w[1], w[0])[:8])
                m.d.comb += p.eq(registered_product(
                    m, platform, selected, self.x_in[:8], en, "dsp", out_reg=Sm >= 1,
                    signed=True))
                p = delay(m, en, p, max(Sm - 1, 0), "mul", reset_less=True)
            else:
                m.d.comb += p.eq(weight[:8].as_signed() * x[:8].as_signed())
                p = delay(m, en, p, Sm, "mul", reset_less=True)
            if self._top:
                m.d.comb += self.psum_out.eq(delay(m, en, p, D, "psum", reset_less=True))
                return m
            s = Signal(signed(self._int_bits))
            m.d.comb += s.eq(self.psum_in[:self._int_bits].as_signed() + p)
            m.d.comb += self.psum_out.eq(delay(m, en, s, D, "isum", reset_less=True))
            return m

        if self._top:
            m.d.comb += self.psum_out.eq(delay(m, en, product, D, "psum", reset_less=True))
            return m

        is_int = Signal()
        m.d.comb += is_int.eq(x_fmt == Format.INT8)
        outs = []
        if has_int:
            s = Signal(32)
            m.d.comb += s.eq(self.psum_in + product)
            outs.append(delay(m, en, s, D, "isum", reset_less=True))
        if has_fp:
            from rtl.arith.fp32_add import FP32Adder
            m.submodules.add = add = FP32Adder(stages=self._add_stages)
            m.d.comb += [add.a.eq(self.psum_in), add.b.eq(product)]
            if self._add_stages and hasattr(add, "en"):
                m.d.comb += add.en.eq(en)
            fsum = add.o
            if self._add_stages == 0:
                fsum = delay(m, en, add.o, 1, "fsum", reset_less=True)
            outs.append(fsum)
        if len(outs) == 2:
            sel = delay(m, en, is_int, Sm + D, "is_int", reset_less=True)
            m.d.comb += self.psum_out.eq(Mux(sel, outs[0], outs[1]))
        else:
            m.d.comb += self.psum_out.eq(outs[0])
        return m
