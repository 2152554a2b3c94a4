"""Format decoder: any supported format to FP32 bits (combinational or one pipeline stage)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import CANONICAL_NAN_F32, FORMAT_BITS, Format
from sim.formats import FP8_FORMATS, float_spec
from rtl.arith.common import (FormatSet, Pipe, Pipelined, check_formats, check_fp8_bias,
                              check_stages, leading_zeros)
from rtl.arith.unpack import unpack_float
from rtl.arith.wide_mux import wide_mux

__all__ = ["FormatDecoder"]

#: Width of the shared normalising path (FP16's 11-bit significand is the widest it serves).
_SIG_W = 11


class FormatDecoder(Pipelined, FormatSet, wiring.Component):
    """Decode a value of a run-time selected format to FP32, as ``sim.formats.decode``.

    * FP32 passes through unchanged (NaN payloads and subnormals included).
    * BF16 is the upper half of an FP32 (its subnormals stay FP32 subnormals), except that any
      NaN becomes the canonical NaN.
    * FP16, E4M3, E5M2, E3M4 and INT8 share one path: unpack, count leading zeros of the
      11-bit significand, normalise, pack. Exact; narrow subnormals become FP32 normals; every
      NaN gives ``0x7FC00000``; +-0 and +-Inf keep their sign. E4M3 has no Inf.
    * INT32 has its own path: absolute value, 32-bit leading-zero count, round to nearest even
      to 24 bits (the only inexact decode).

    Combinational (``stages=0``), or one register stage (``stages=1``): cut after the
    leading-zero counts (INT32: absolute value, count, the shifts by 16 and 8 and the round-up
    decision for each remaining shift by 0..7, then that shift, round and pack), latency
    1 cycle, one value per cycle, ``en`` low freezes the stage.

    Parameters
    ----------
    formats : collection of Format, default all
        Formats the instance decodes; logic for the others is not generated. Selecting a format
        code not in ``formats`` gives ``o == 0``.
    fp8_bias : mapping of FP8 Format to int, optional
        Exponent bias of each cFP8 format, fixed at elaboration (default: 7 for E4M3, 15 for
        E5M2, 3 for E3M4); each within ``sim.formats.bias_range``.
    stages : int
        Pipeline registers, 0 or 1.

    Members
    -------
    a : In(32)
        The value, low-aligned (bits above the format's width are ignored).
    fmt : In(3)
        :class:`sim.dtypes.Format` code of ``a``.
    en : In(1), default 1
        Clock enable of the pipeline register (unused when ``stages == 0``).
    o : Out(32)
        FP32 bits.
    """

    def __init__(self, formats=tuple(Format), *, fp8_bias=None, stages=0):
        self._formats = check_formats(formats, frozenset(Format))
        self._fp8_bias = check_fp8_bias(fp8_bias)
        self._stages = check_stages(stages, 1)
        super().__init__({"a": In(32), "fmt": In(FORMAT_BITS), "en": In(1, init=1),
                          "o": Out(32)})

    def elaborate(self, platform):
        m = Module()
        pipe = Pipe(m, self.en, (1,) if self._stages else ())
        a = self.a
        shared = [f for f in (Format.FP16, *FP8_FORMATS, Format.INT8) if f in self._formats]

        # -- the shared path: select the unpacked operand, then normalise once --------------
        sign = Signal()
        sig = Signal(_SIG_W)
        exp = Signal(signed(10))       # value = sig * 2**(exp - 10)
        zero = Signal()
        inf = Signal()
        nan = Signal()
        # The leading zeros are counted per format, beside the unpacking, and selected with
        # it (a count after the selection made the decoder's deepest path): those of a float's
        # significand are those of its hidden bit and mantissa.
        lz = Signal(range(_SIG_W + 1))
        with m.Switch(self.fmt):
            for f in shared:
                with m.Case(f):
                    if f == Format.INT8:
                        # |x| <= 128 fits 11 bits placed so that 128 is the top bit (exp 7).
                        x = a[0:8].as_signed()
                        mag = Mux(x[7], -x, x)[0:8]
                        lz8, _ = leading_zeros(m, mag, "int8_lz")
                        m.d.comb += [sign.eq(x[7]), sig.eq(Cat(Const(0, 3), mag)), exp.eq(7),
                                     zero.eq(x == 0), lz.eq(lz8)]
                    else:
                        u = unpack_float(a, f, _SIG_W, self._fp8_bias.get(f))
                        man_bits = float_spec(f, self._fp8_bias.get(f)).man_bits
                        lzf, _ = leading_zeros(m, u.sig[_SIG_W - 1 - man_bits:],
                                               f"{f.name.lower()}_lz")
                        m.d.comb += [sign.eq(u.sign), sig.eq(u.sig), exp.eq(u.exp),
                                     zero.eq(u.zero), inf.eq(u.inf), nan.eq(u.nan),
                                     lz.eq(lzf)]
        # -- cut 1 ------------------------------------------------------------------------
        sign, sig, exp, zero, inf, nan, lz = (pipe(1, v, n) for n, v in (
            ("sign", sign), ("sig", sig), ("exp", exp), ("zero", zero), ("inf", inf),
            ("nan", nan), ("lz", lz)))
        norm = Signal(_SIG_W)
        m.d.comb += norm.eq(sig << lz)
        biased = Signal(signed(11))
        m.d.comb += biased.eq(exp - lz + 127)
        shared_out = Signal(32)
        with m.If(nan):
            m.d.comb += shared_out.eq(CANONICAL_NAN_F32)
        with m.Elif(inf):
            m.d.comb += shared_out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Elif(zero):
            m.d.comb += shared_out.eq(Cat(Const(0, 31), sign))
        with m.Else():
            # fp8_bias is limited so that every value is an FP32 normal: no range check.
            m.d.comb += shared_out.eq(Cat(Const(0, 23 - (_SIG_W - 1)), norm[0:_SIG_W - 1],
                                          biased[0:8], sign))

        # -- per-format outputs ---------------------------------------------------------------
        # The output is an OR of three words, each zero unless its format is selected: FP32
        # and BF16 (copies, or the canonical NaN) are formed whole before the cut, and the
        # shared and INT32 paths are gated by selects registered there, so that after the cut
        # each output bit is one small function of its path's bit and a select, not a decode
        # of ``fmt`` behind the INT32 rounding chain (format multiplexer -> the next unit's
        # operand register).
        fmt = self.fmt
        fixed = Signal(32, name="fixed")
        with m.Switch(fmt):
            if Format.FP32 in self._formats:
                with m.Case(Format.FP32):
                    m.d.comb += fixed.eq(a)
            if Format.BF16 in self._formats:
                with m.Case(Format.BF16):
                    bf_nan = (a[7:15] == 0xFF) & (a[0:7] != 0)
                    m.d.comb += fixed.eq(Mux(bf_nan, CANONICAL_NAN_F32,
                                             Cat(Const(0, 16), a[0:16])))
        fixed = pipe(1, fixed, "fixed")
        out = fixed
        if shared:
            sel_shared = pipe(1, fmt.matches(*shared), "sel_shared")
            out = out | (sel_shared.replicate(32) & shared_out)
        if Format.INT32 in self._formats:
            int32, i32_zero = self._int32_to_fp32(m, platform, a, pipe)
            sel_int32 = pipe(1, (fmt == Format.INT32) & ~i32_zero, "sel_int32")
            out = out | (sel_int32.replicate(32) & int32)
        m.d.comb += self.o.eq(out)
        return m

    @staticmethod
    def _int32_to_fp32(m, platform, a, pipe):
        x = a.as_signed()
        neg = x < 0
        mag = Signal(32)
        m.d.comb += mag.eq(Mux(neg, -x, x))         # -2**31 gives 2**31, still 32 bits
        # The leading zeros of ``x`` or ``~x`` (not of ``mag``, so that they are counted beside
        # the negation, not after it): those of ``mag`` except for ``mag`` a power of two
        # above 1, whose count this overstates by one (``~x`` is ``mag - 1``); ``norm`` then
        # loses its leading one, which the exponent below corrects.
        ones = Signal(32)
        m.d.comb += ones.eq(a ^ neg.replicate(32))
        lz, _ = leading_zeros(m, ones, "i32_lz")
        is_zero = Signal(name="i32_is_zero")
        m.d.comb += is_zero.eq(a == 0)
        # The normalising shifts by 16 and 8 are taken before the cut: the count's top bits
        # (the upper 16 bits zero, then the next 8 of what is left) are two or three levels
        # of logic, ready beside the negation, and only a shift by 0..7 follows the cut. For
        # ``ones`` zero (``a`` = -1; 0 is ``is_zero``) both are
        # taken, as the count's bits say (31).
        z16 = ones[16:32] == 0
        z8 = Mux(z16, ones[8:16] == 0, ones[24:32] == 0)
        pre16 = Signal(32, name="i32_pre16")
        m.d.comb += pre16.eq(Mux(z16, mag << 16, mag))
        pre = Signal(32, name="i32_pre")
        m.d.comb += pre.eq(Mux(z8, pre16 << 8, pre16))
        # The round-up decision for each fine shift k (0..7), also before the cut: the guard
        # bit is bit 7 - k of ``pre``, the kept LSB bit 8 - k, the sticky bits those below 7 - k,
        # all zero after a coarse shift (``mag`` < 2**16 then, exact) and otherwise bits of
        # ``mag``, whose nonzero low parts are those of ``a`` (a negation keeps them). After the
        # cut the decision is one 8:1 select by ``fine`` in front of the rounding carry chain,
        # not the fine shift, guard/sticky and round-up logic.
        coarse = z16 | (ones[24:32] == 0)
        rup = Signal(8, name="i32_rup")
        m.d.comb += rup.eq(Cat(~coarse & mag[7 - k] & (mag[8 - k] | (a[0:7 - k] != 0))
                               for k in range(8)))
        # -- cut 1 ------------------------------------------------------------------------
        pre, lz, neg, rup = (pipe(1, v, n) for n, v in (
            ("i32_pre", pre), ("i32_lz", lz), ("i32_neg", neg), ("i32_rup", rup)))
        # The fine shift (``pre << fine``, leading one at bit 31; its 24 kept bits) and the
        # round-up select as 8:1 multiplexers in the ECP5 slices' own multiplexers, one LUT
        # level (synthesis made two or three of them).
        fine = lz[0:3]
        sel = wide_mux(m, platform, fine, [Cat(pre[8 - k:32 - k], rup[k]) for k in range(8)],
                       "i32_fine")
        norm, round_up = sel[0:24], sel[24]          # norm: bits 8..31 of the shifted value
        # The leading one lost (``lz`` one too many; the value is exact, a power of two):
        # one binade up. The exponent and the 23 mantissa bits are rounded as one number, so
        # that a carry out of the mantissa (which leaves it at zero) moves into the exponent
        # inside the chain, with no select by the chain's carry out after it.
        e_base = Signal(8, name="i32_e_base")
        m.d.comb += e_base.eq(127 + 31 + ~norm[23] - lz)
        packed = Signal(31, name="i32_packed")
        m.d.comb += packed.eq(Cat(norm[0:23], e_base) + round_up)
        # (not zero for ``a`` = 0: the caller's select, registered before the cut, masks it by
        # ``is_zero``)
        return Cat(packed, neg), is_zero
