"""The fused-accumulation PE of an array (``accumulate="fused"``) on decoded operands, and the
operand decoder one row shares.

A fused array decodes each row's operands once instead of in every PE: moving values are
decoded at the row's left edge and pass right decoded, stationary weights are decoded as they
are loaded (``w_data`` and ``w_fmt`` are broadcast to the row) and stored decoded. A PE then
multiplies the significands, adds the exponents and feeds ``rtl.tensor.fused.FusedAdder`` the
product split, without packing it into FP32 bits. The product is ``sim.formats.mul_exact``'s:
exact, a zero below ``2**-126``, Inf at or above ``2**128``, NaN for NaN operands or
``0 x Inf``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import Pipe, delay, ge_const, leading_zeros
from rtl.arith.dsp import is_ecp5, mult18x18d
from rtl.arith.fp_mul import SUB_FORMATS
from rtl.arith.unpack import SIG_BITS, unpack_float
from sim import config
from sim.dtypes import Format
from sim.tensor import FUSED_F

from .fused import FusedAdder, fused_psum_layout
from .pe import check_formats

__all__ = ["sig_width", "decoded_layout", "OperandDecoder", "FusedPE"]


def _floats(formats):
    return sorted(f for f in formats if f != Format.INT8)


def sig_width(formats):
    """Significand bits of the decoded operands: the widest format's (8 with INT8, which keeps
    its byte there)."""
    w = max(SIG_BITS[f] for f in _floats(formats))
    return max(w, 8) if Format.INT8 in formats else w


def decoded_layout(formats):
    """A decoded operand: value ``(-1)**sign * sig * 2**(exp - (sig_w - 1))`` with ``sig``'s
    top bit set (subnormals normalised) unless ``zero``, ``inf`` or ``nan``; ``int``: ``sig``
    holds an INT8 byte."""
    return data.StructLayout({"sig": sig_width(formats), "exp": signed(10), "sign": 1,
                              "zero": 1, "inf": 1, "nan": 1, "int": 1})


class OperandDecoder(wiring.Component):
    """Combinational decoder of one operand of format ``fmt`` (one of ``formats``; another code
    decodes as a zero).

    Parameters
    ----------
    formats : collection of Format
    exp_bias : int
        Added to ``o.exp`` of a floating-point operand (0 to 127; default 0). A fused row
        decodes its weights with FP32's bias, 127, so that a PE's product exponent is the sum
        of the two fields.

    Members
    -------
    bits : In(16)
        The element, low-aligned.
    fmt : In(3)
    o : Out(decoded_layout(formats))
    """

    def __init__(self, formats, *, exp_bias=0):
        self._formats = frozenset(formats)
        self._exp_bias = config.check_int("exp_bias", exp_bias, 0, 127)
        super().__init__({"bits": In(16), "fmt": In(3),
                          "o": Out(decoded_layout(self._formats))})

    exp_bias = property(lambda self: self._exp_bias)

    def elaborate(self, platform):
        m = Module()
        sw = sig_width(self._formats)
        o = self.o
        # Each format's fields are formed from the bits, then the format selects (the leading
        # zeros of a subnormal counted per format, as FPMultiplier does).
        cases = {}
        for f in _floats(self._formats):
            u = unpack_float(self.bits, f, sw)
            sig, exp = u.sig, u.exp_raw + (self._exp_bias - u.bias)
            if f in SUB_FORMATS:
                lz, _ = leading_zeros(m, u.sig, f"lz_{f.name.lower()}")
                sig, exp = (u.sig << lz)[0:sw], exp - lz
            cases[f] = (sig, exp, u)
        # Every field is assigned in this one switch (``int`` too, 0 but for INT8): a field left
        # to a constant process alone would be an ``always @*`` without inputs in Verilog,
        # which an event-driven simulator never runs (X in Icarus).
        with m.Switch(self.fmt):
            for f, (sig, exp, u) in cases.items():
                with m.Case(f):
                    m.d.comb += o.int.eq(0)
                    m.d.comb += [o.sig.eq(sig), o.exp.eq(exp), o.sign.eq(u.sign),
                                 o.zero.eq(u.zero), o.inf.eq(u.inf), o.nan.eq(u.nan)]
            if Format.INT8 in self._formats:
                with m.Case(Format.INT8):
                    m.d.comb += [o.sig.eq(self.bits[0:8]), o.int.eq(1)]
            with m.Default():
                m.d.comb += [o.zero.eq(1), o.int.eq(0)]
        return m


class FusedPE(wiring.Component):
    """A PE of a fused array: ``psum_out = psum_in + w[x_bank] * x`` (``FusedAdder``) on
    decoded operands.

    The same contract as :class:`rtl.tensor.pe.ProcessingElement` with ``accumulate="fused"``
    (moving values registered and passed right, the weight sampled from its bank with them,
    the product ``mul_stages`` cycles later, the sum ``row_delay`` cycles after ``psum_in``),
    with ``x_in``/``x_out``/``w_data`` of :func:`decoded_layout` and no format ports (a
    decoded operand knows whether it is an INT8 byte); ``w_data``'s exponent carries FP32's
    bias (``OperandDecoder(exp_bias=127)``).

    The product's steps: 1. the significand product (one MULT18X18D), exponent sum and class;
    2. one-bit normalisation, the FP32 range (zero below, Inf above), sign. ``mul_stages``:
    0 none, 1 after step 2, 2 after both, 3 and 4 one and two more after step 2. On an ECP5
    the significand product is one MULT18X18D whose input registers stand for the weight's
    and the moving value's (loaded at the same edges) and, with ``mul_stages >= 2``, whose
    output register is step 1's: the multiply runs register to register inside the block.

    Parameters
    ----------
    formats : collection of Format
    mul_stages, add_stages : int
        0 to 4 each.
    top : bool
        Top row: the product is added to the empty sum (no ``psum_in``).
    fused_bits : int
        ``W`` (``sim.tensor.fused_width(rows)``).
    """

    _CUTS = {0: (), 1: (2,), 2: (1, 2), 3: (1, 2), 4: (1, 2)}

    def __init__(self, formats, *, mul_stages=1, add_stages=1, top=False, fused_bits=32):
        self._formats = check_formats(formats)
        self._mul_stages = config.check_int("mul_stages", mul_stages, 0, 4)
        self._add_stages = config.check_int("add_stages", add_stages, 0, 4)
        self._top = config.check_bool("top", top)
        self._fused_bits = config.check_int("fused_bits", fused_bits, FUSED_F + 2, 40)
        dec = decoded_layout(self._formats)
        psum = fused_psum_layout(self._fused_bits)
        sig = {"en": In(1, init=1), "x_in": In(dec), "x_bank_in": In(1), "x_out": Out(dec),
               "x_bank_out": Out(1), "w_data": In(dec), "w_we": In(2), "w_zero": In(1),
               "psum_out": Out(psum)}
        if not top:
            sig["psum_in"] = In(psum)
        super().__init__(sig)

    @property
    def row_delay(self):
        return max(self._add_stages, 1)

    def elaborate(self, platform):
        m = Module()
        en = self.en
        W = self._fused_bits
        dec = decoded_layout(self._formats)
        has_int = Format.INT8 in self._formats
        sw = sig_width(self._formats)

        x = Signal(dec)
        x_bank = Signal()
        with m.If(en):
            m.d.sync += [x.eq(self.x_in), x_bank.eq(self.x_bank_in)]
        m.d.comb += [self.x_out.eq(x), self.x_bank_out.eq(x_bank)]
        w = [Signal(dec, name=f"w{b}") for b in range(2)]
        for b in range(2):
            with m.If(self.w_we[b]):
                m.d.sync += w[b].eq(self.w_data)
                # A zero weight needs only its class (and an INT8 byte of 0): its product is
                # 0, or NaN with an Inf or a NaN, whatever its other fields hold.
                with m.If(self.w_zero):
                    m.d.sync += [w[b].zero.eq(1), w[b].inf.eq(0), w[b].nan.eq(0)]
                    if has_int:
                        m.d.sync += w[b].sig.eq(0)
        weight = Signal(dec)
        with m.If(en):
            m.d.sync += weight.eq(Mux(self.x_bank_in, w[1], w[0]))

        pipe = Pipe(m, en, self._CUTS[self._mul_stages])
        # -- step 1: significand product, exponent sum, class ------------------------------
        a, b = weight, x
        shape = signed(max(sw + 1, 8)) if has_int else sw
        ops = []
        for name, v in (("a", a), ("b", b)):
            op = Signal(shape, name=f"op_{name}")
            m.d.comb += op.eq(Mux(b.int, v.sig[0:8].as_signed(), v.sig) if has_int else v.sig)
            ops.append(op)
        prod = Signal(signed(2 * len(ops[0])) if has_int else 2 * sw)
        dsp_prod = None
        if is_ecp5(platform):
            # The block's input registers take what ``weight`` and ``x`` take.
            a_in = Signal(dec)
            m.d.comb += a_in.eq(Mux(self.x_bank_in, w[1], w[0]))
            pre = []
            for name, v in (("a", a_in), ("b", self.x_in)):
                op = Signal(shape, name=f"dsp_op_{name}")
                m.d.comb += op.eq(Mux(self.x_in.int, v.sig[0:8].as_signed(), v.sig)
                                  if has_int else v.sig)
                pre.append(op)
            dsp_prod = mult18x18d(m, pre[0], pre[1], en, "mul_dsp", out_reg=1 in pipe.cuts,
                                  signed=has_int)
        else:
            m.d.comb += prod.eq(ops[0] * ops[1])
        e_sum = Signal(signed(12))              # biased FP32 exponent if prod's top bit is 0
        m.d.comb += e_sum.eq(a.exp + b.exp)     # (the weight's exponent carries the bias)
        zero = a.zero | b.zero
        inf = a.inf | b.inf
        regs = dict(prod=prod, e_sum=e_sum, sign=a.sign ^ b.sign, zero=zero, inf=inf,
                    nan=a.nan | b.nan | (zero & inf), is_int=b.int)
        if dsp_prod is not None:
            del regs["prod"]
        r = {k: pipe(1, v, k) for k, v in regs.items()}
        if dsp_prod is not None:
            r["prod"] = Signal.like(prod, name="dsp_prod")
            m.d.comb += r["prod"].eq(dsp_prod)

        # -- step 2: one-bit normalisation, range, sign ------------------------------------
        pw = 2 * sw
        p = r["prod"][0:pw]
        top = p[pw - 1]
        e_b = Signal(signed(12))
        m.d.comb += e_b.eq(r["e_sum"] + top)
        # ``mag``'s bits below ``low`` are zeros: only the bits above are negated (a carry
        # chain of their width), the zeros are wires.
        low = max(FUSED_F - (pw - 1), 0)
        mag = Signal(FUSED_F + 1 - low)
        m.d.comb += mag.eq(Mux(top, p << (FUSED_F - (pw - 1) - low),
                               p << (FUSED_F - (pw - 2) - low)))
        is_int = r["is_int"]
        finite = ~(r["zero"] | r["inf"] | r["nan"]) & ~is_int
        # ``e_b >= 255`` and ``e_b > 0`` as logic of the bits (``ge_const``), not carry chains.
        pos = ~e_b[11]
        over = pos & ge_const(e_b[0:11], 255)
        # (top | p[pw - 2]): a product of two decoded nonzero operands has its leading one
        # there; a register that was never loaded (all zero bits) then adds nothing either.
        live = finite & pos & e_b[0:11].any() & ~over & (top | p[pw - 2])
        m_hi = Signal(signed(len(mag) + 1))
        m.d.comb += m_hi.eq(Mux(live, Mux(r["sign"], -mag, mag), 0))
        m_p = Signal(signed(W))
        m.d.comb += m_p.eq(Cat(Const(0, low), m_hi, m_hi[-1].replicate(W - low - len(m_hi))))
        if has_int:
            m_p_int = Signal(signed(W))
            m.d.comb += m_p_int.eq(Mux(is_int, r["prod"], m_p))
            m_p = m_p_int
        e_p = Signal(8)
        m.d.comb += e_p.eq(Mux(live, e_b[0:8], 0))
        nan = r["nan"] & ~is_int
        big = ~is_int & ~r["nan"] & (r["inf"] | (finite & over))
        flags = Cat(nan, big & ~r["sign"], big & r["sign"])
        out = {k: pipe(2, v, k) for k, v in dict(m_p=m_p, e_p=e_p, flags=flags,
                                                   is_int=is_int).items()}
        extra = max(self._mul_stages - 2, 0)
        out = {k: delay(m, en, v, extra, f"prod_{k}", reset_less=True) for k, v in out.items()}

        if self._top:
            # The empty sum plus the product is the product in the sum's form (``e_p`` is 0
            # exactly when ``m_p`` is, but for an INT8 product, whose ``E`` stays 0): what
            # ``FusedAdder`` gives for it, ``row_delay`` cycles later, from registers alone.
            s = Cat(out["m_p"], out["e_p"], out["flags"], out["is_int"])
            m.d.comb += self.psum_out.eq(delay(m, en, s, self.row_delay, "fsum",
                                               reset_less=True))
            return m
        m.submodules.fadd = add = FusedAdder(W, self._add_stages, split=True)
        m.d.comb += [add.en.eq(en), add.e_p.eq(out["e_p"]), add.m_p.eq(out["m_p"]),
                     add.p_flags.eq(out["flags"]), add.is_int.eq(out["is_int"]),
                     add.psum_in.eq(self.psum_in)]
        s = add.psum_out.as_value()
        if self._add_stages == 0:
            s = delay(m, en, s, 1, "fsum", reset_less=True)
        m.d.comb += self.psum_out.eq(s)
        return m
