"""Exact multiplier of narrow formats (FP8, FP16, BF16, TF32, INT8) with an FP32/INT32 product:
the multiplier of a tensor-engine PE."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import FORMAT_BITS, Format
from rtl.arith.common import (FormatSet, Pipe, Pipelined, check_formats, check_fp8_bias,
                               check_stages, leading_zeros)
from rtl.arith.dsp import is_ecp5, mult18x18d
from rtl.arith.unpack import SIG_BITS, unpack_float

__all__ = ["FPMultiplier"]

#: Formats a multiplier can take (INT32 has no multiply).
MUL_FORMATS = frozenset(Format) - {Format.INT32}
#: Formats whose subnormal operands are exact (the others read them as zero).
SUB_FORMATS = frozenset({Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4})


class FPMultiplier(Pipelined, FormatSet, wiring.Component):
    """Exact product of two values of a run-time selected format, as ``sim.formats.mul_exact``.

    Every floating-point format's significand has at most 11 bits (FP32 operands are truncated
    to TF32: the low 13 mantissa bits are dropped, round toward zero), so the at most 22-bit
    significand product is exact in FP32 and never rounds. The result leaves FP32's normal
    range only through the exponent: below 2**-126 it is a signed zero (FTZ), at or above
    2**128 it is Inf; with the standard biases only BF16 and TF32 get there. BF16 and TF32
    subnormal operands read as zero (DAZ), FP16/FP8 subnormals are exact. A NaN operand or
    0 x Inf gives ``0x7FC00000``; E4M3 has no Inf (its only NaN is S.1111.111).
    ``fmt == INT8`` multiplies the signed low bytes and gives the INT32 product.

    One multiplier serves every format in ``formats``: ``w x w`` bits unsigned, with ``w`` the
    widest significand among them (11 with FP16 or FP32, 8 with BF16, 5 for FP8 only), or
    ``max(w + 1, 8)`` bits signed when INT8 is included. That is at most 12 x 12, one
    MULT18X18D on ECP5. Unpacking logic is generated only for the formats in ``formats``.

    The datapath has four steps, each optionally followed by a register: 1. unpack the
    selected format: significands, exponent fields, operand classes, and the leading zeros of
    each significand (FP16/FP8 subnormals); 2. shift the leading zeros out of both
    significands and form the product's exponent; 3. multiply the significands (the DSP);
    beside it, decide both possible outcomes (finite, Inf, zero/FTZ, NaN) for a product whose
    leading one is its top bit or the next; 4. select by the product's top bit (a one-bit
    normalisation) and pack. ``stages`` 1 registers after step 4, 2 after steps 3 and 4 (the
    DSP's output register), 3 after steps 1, 3 and 4, 4 after every step (so the DSP's inputs
    come straight from registers: flip-flop, multiplier, flip-flop).

    Parameters
    ----------
    formats : collection of Format
        Formats the instance multiplies (any but INT32). Selecting another code gives ``p == 0``.
    stages : int
        Pipeline registers, 0 to 4; 0 is purely combinational. Latency ``stages`` cycles,
        throughput one product per cycle.
    fp8_bias : mapping of FP8 Format to int, optional
        Exponent bias of each cFP8 format, fixed at elaboration (defaults 7, 15, 3).

    Members
    -------
    a, b : In(32)
        Operands of format ``fmt``, low-aligned; bits above the format's width are ignored.
    fmt : In(3)
        :class:`sim.dtypes.Format` code of both operands.
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low the
        pipeline holds and ``p`` keeps its value.
    p : Out(32)
        FP32 product (INT32 for INT8) of the operands presented ``stages`` enabled cycles
        earlier; 0 at power-up until the first operands arrive (the registers have no reset,
        see :class:`rtl.arith.common.Pipe`).
    """

    MAX_STAGES = 4
    _CUTS = {0: (), 1: (4,), 2: (3, 4), 3: (1, 3, 4), 4: (1, 2, 3, 4)}

    def __init__(self, formats=tuple(MUL_FORMATS), stages=1, *, fp8_bias=None):
        self._formats = check_formats(formats, MUL_FORMATS)
        self._stages = check_stages(stages, self.MAX_STAGES)
        self._fp8_bias = check_fp8_bias(fp8_bias)
        super().__init__({"a": In(32), "b": In(32), "fmt": In(FORMAT_BITS),
                          "en": In(1, init=1), "p": Out(32)})

    @property
    def multiplier_width(self):
        """Operand width of the one hardware multiplier (signed if INT8 is supported)."""
        floats = [SIG_BITS[f] for f in self._formats if f != Format.INT8]
        w = max(floats, default=0)
        return max(w + 1, 8) if Format.INT8 in self._formats else w

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, self._CUTS[self._stages])
        floats = sorted(f for f in self._formats if f != Format.INT8)
        has_int = Format.INT8 in self._formats
        has_sub = any(f in self._formats for f in SUB_FORMATS)
        sig_w = max((SIG_BITS[f] for f in floats), default=1)
        mw = self.multiplier_width
        pw = 2 * sig_w                                  # float product width

        # -- step 1: unpack both operands of the selected format ---------------------------
        # Only what the format selects is formed here (significands, their leading zeros,
        # exponents without bias, the class of each operand); every sum waits for step 2.
        sig_a = Signal(sig_w)
        sig_b = Signal(sig_w)
        exp_a = Signal(9)             # a = sig_a * 2**(exp_a - bias - (sig_w - 1))
        exp_b = Signal(9)
        bias = Signal(signed(10))     # 128 - 2 * bias of the format
        sign = Signal()
        cls_a = Signal(3)             # nan, inf, zero
        cls_b = Signal(3)
        is_int = Signal()
        supported = Signal()
        with m.Switch(self.fmt):
            for f in floats:
                with m.Case(f):
                    ua = unpack_float(self.a, f, sig_w, self._fp8_bias.get(f))
                    ub = unpack_float(self.b, f, sig_w, self._fp8_bias.get(f))
                    m.d.comb += [
                        sig_a.eq(ua.sig), sig_b.eq(ub.sig),
                        exp_a.eq(ua.exp_raw), exp_b.eq(ub.exp_raw),
                        bias.eq(128 - 2 * ua.bias),
                        sign.eq(ua.sign ^ ub.sign),
                        cls_a.eq(Cat(ua.nan, ua.inf, ua.zero)),
                        cls_b.eq(Cat(ub.nan, ub.inf, ub.zero)),
                        supported.eq(1),
                    ]
            if has_int:
                with m.Case(Format.INT8):
                    m.d.comb += [is_int.eq(1), supported.eq(1)]
        # The multiplier's operands: the significands, or the signed bytes for INT8.
        op_a = Signal(signed(mw) if has_int else mw)
        op_b = Signal(signed(mw) if has_int else mw)
        if has_int:
            m.d.comb += [op_a.eq(Mux(is_int, self.a[0:8].as_signed(), sig_a)),
                         op_b.eq(Mux(is_int, self.b[0:8].as_signed(), sig_b))]
        else:
            m.d.comb += [op_a.eq(sig_a), op_b.eq(sig_b)]
        regs = dict(op_a=op_a, op_b=op_b, exp_a=exp_a, exp_b=exp_b, bias=bias, sign=sign,
                    cls_a=cls_a, cls_b=cls_b, is_int=is_int, supported=supported)
        # Subnormal FP16/FP8 operands have leading zeros. Shifting them out of each operand
        # before the multiplier leaves the product's leading one at one of its top two bits,
        # so step 4 is a one-bit normalisation instead of a shift.
        # Each format's count is formed from its own bits and then selected (the count of
        # the selected significand would be one level deeper); formats without subnormals
        # (DAZ) count 0.
        if has_sub:
            for x, bits in (("a", self.a), ("b", self.b)):
                regs[f"lz_{x}"] = lz = Signal(range(sig_w + 1), name=f"lz_{x}")
                with m.Switch(self.fmt):
                    for f in floats:
                        if f in SUB_FORMATS:
                            u = unpack_float(bits, f, sig_w, self._fp8_bias.get(f))
                            count, _ = leading_zeros(m, u.sig, f"lz_{x}_{f.name.lower()}")
                            with m.Case(f):
                                m.d.comb += lz.eq(count)
        r = {k: pipe(1, v, k) for k, v in regs.items()}

        # -- step 2: shift the leading zeros out; the product's exponent ---------------------
        if has_sub:
            ops = []
            for x in "ab":
                norm = Signal(sig_w, name=f"norm_{x}")
                m.d.comb += norm.eq(r[f"op_{x}"][0:sig_w] << r[f"lz_{x}"])
                ops.append(Mux(r["is_int"], r[f"op_{x}"], norm) if has_int else norm)
            lz = Signal(range(2 * sig_w + 1))
            m.d.comb += lz.eq(r["lz_a"] + r["lz_b"])
        else:
            ops = [r["op_a"], r["op_b"]]
            lz = Const(0, 1)
        # The biased FP32 exponent of the product if its leading one is its top bit; one less
        # otherwise.
        e_top = Signal(signed(12))
        m.d.comb += e_top.eq(r["exp_a"] + r["exp_b"] + r["bias"] - lz)
        regs = dict(e_top=e_top, cls_a=r["cls_a"], cls_b=r["cls_b"], is_int=r["is_int"],
                    sign=r["sign"], supported=r["supported"])
        for x, op in zip("ab", ops):
            mul_op = Signal(signed(mw) if has_int else mw, name=f"mul_op_{x}")
            m.d.comb += mul_op.eq(op)
            regs[f"mul_op_{x}"] = mul_op
        # On an ECP5 with steps 2 and 3 registered, the operand registers and the product
        # register are the MULT18X18D's own input and output registers (``rtl.arith.dsp``):
        # no routed hop into or out of the block between fabric registers. The
        # fabric registers are left to whatever else reads them (nothing: they go).
        dsp_prod = None
        if is_ecp5(platform) and {2, 3} <= set(pipe.cuts) and mw <= 18:
            dsp_prod = mult18x18d(m, regs["mul_op_a"], regs["mul_op_b"], self.en, "mul_dsp",
                                  out_reg=True, signed=has_int)
        r = {k: pipe(2, v, k) for k, v in regs.items()}

        # -- step 3: the one hardware multiplier, beside it the outcome ----------------------
        prod = Signal(signed(2 * mw) if has_int else 2 * mw)
        m.d.comb += prod.eq(r["mul_op_a"] * r["mul_op_b"])
        # Both outcomes (finite, NaN, Inf, zero) are decided here; step 4 picks one.
        e_top = r["e_top"]
        ca, cb = r["cls_a"], r["cls_b"]
        zero = ca[2] | cb[2]
        inf = ca[1] | cb[1]
        nan = ca[0] | cb[0] | (zero & inf)
        finite = ~(zero | inf | nan) & r["supported"]
        regs = dict(prod=prod, is_int=r["is_int"], nan=nan & r["supported"],
                    sign=r["sign"] & ~nan & r["supported"])
        for name, e, under, over in (("top", e_top, e_top <= 0, e_top >= 255),
                                     ("low", e_top - 1, e_top <= 1, e_top >= 256)):
            keep = Signal(name=f"keep_{name}")              # finite, in range
            ones = Signal(name=f"ones_{name}")              # NaN or Inf
            ex = Signal(8, name=f"ex_{name}")               # the packed exponent
            m.d.comb += [
                keep.eq(finite & ~under & ~over),
                ones.eq(nan | inf | (finite & over)),
                ex.eq(Mux(keep, e[0:8], Mux(ones, 0xFF, 0))),
            ]
            regs[f"keep_{name}"] = keep
            regs[f"ex_{name}"] = ex
        if dsp_prod is not None:
            del regs["prod"]
        r = {k: pipe(3, v, k) for k, v in regs.items()}
        if dsp_prod is not None:
            r["prod"] = Signal.like(prod, name="dsp_prod")
            m.d.comb += r["prod"].eq(dsp_prod)

        # -- step 4: normalise by at most one bit and pack -----------------------------------
        p = r["prod"]
        top = p[pw - 1]
        mant = Mux(top, Mux(r["keep_top"], p[0:pw - 1], 0),
                   Mux(r["keep_low"], Cat(Const(0, 1), p[0:pw - 2]), 0))
        fp_out = Signal(32)
        m.d.comb += fp_out.eq(Cat(Const(0, 23 - (pw - 1)), mant,
                                  Mux(top, r["ex_top"], r["ex_low"]), r["sign"]))
        m.d.comb += fp_out[22].eq(mant[-1] | r["nan"])      # 0x7FC00000 for NaN
        out = Signal(32)
        if has_int:
            m.d.comb += out.eq(Mux(r["is_int"], r["prod"].as_signed(), fp_out))
        else:
            m.d.comb += out.eq(fp_out)
        m.d.comb += self.p.eq(pipe(4, out, "p"))
        return m
