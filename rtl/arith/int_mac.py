"""INT8 multiply with INT32 accumulate (wrap-around)."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.common import Pipe, Pipelined, check_stages, delay
from rtl.arith.dsp import registered_product
from sim.config import check_bool

__all__ = ["IntMAC"]


class IntMAC(Pipelined, wiring.Component):
    """``o = c + a * b`` on INT8 ``a``, ``b`` and INT32 ``c``, modulo 2**32, as
    ``sim.formats.int32_add(c, mul_exact(a, b, INT8))``.

    The 8 x 8 signed product uses one MULT18X18D on ECP5; the 32-bit add is a carry chain.
    ``stages`` 1 registers the output, 2 also the product (and ``c`` beside it).

    With ``dsp_regs`` the registers sit where the DSP block has its own: the first stage
    registers the operands (the MULT18X18D's input registers, ``c`` beside them in the
    fabric), the second the product (its output register), and the add follows them
    combinationally. The same values after the same number of cycles; on an ECP5 the
    multiply then runs register to register inside the block (``rtl.arith.dsp``).

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 to 2; 0 is purely combinational. Latency ``stages`` cycles,
        throughput one per cycle.
    dsp_regs : bool
        Registers in the DSP block as above (``stages`` 1 or 2); default False.

    Members
    -------
    a, b : In(8)
        INT8 operands (two's complement).
    c : In(32)
        INT32 addend (the accumulator).
    en : In(1), default 1
        Clock enable of every pipeline register (unused when ``stages == 0``): while low the
        pipeline holds and ``o`` keeps its value.
    o : Out(32)
        INT32 result for the operands presented ``stages`` enabled cycles earlier (0 after
        reset until then).
    """

    MAX_STAGES = 2
    _CUTS = {0: (), 1: (2,), 2: (1, 2)}

    def __init__(self, stages=1, *, dsp_regs=False):
        self._stages = check_stages(stages, self.MAX_STAGES)
        check_bool("dsp_regs", dsp_regs)
        if dsp_regs and self._stages == 0:
            raise ValueError("dsp_regs must be False when stages is 0 (the block's registers "
                             "are pipeline stages), not True")
        self._dsp_regs = dsp_regs
        super().__init__({"a": In(8), "b": In(8), "c": In(32), "en": In(1, init=1),
                          "o": Out(32)})

    @property
    def dsp_regs(self):
        return self._dsp_regs

    def elaborate(self, platform):
        m = Module()
        if self._dsp_regs:
            prod = registered_product(m, platform, self.a, self.b, self.en, "dsp",
                                      out_reg=self._stages == 2, signed=True)
            c = delay(m, self.en, self.c, self._stages, "c", reset_less=True)
            m.d.comb += self.o.eq(c + prod)     # truncation to 32 bits is the wrap-around
            return m
        pipe = Pipe(m, self.en, self._CUTS[self._stages])
        prod = Signal(signed(16))
        m.d.comb += prod.eq(self.a.as_signed() * self.b.as_signed())
        prod = pipe(1, prod, "prod")
        c = pipe(1, self.c, "c")
        total = Signal(32)
        m.d.comb += total.eq(c + prod)          # truncation to 32 bits is the wrap-around
        m.d.comb += self.o.eq(pipe(2, total, "o"))
        return m
