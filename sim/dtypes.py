"""The number formats and rounding modes: the one plain-Python description that the RTL
(`rtl/`), the golden models (`sim/`), the assembler and the tests all import.

Encodings here are part of the ISA (``docs/isa.md``) and of the memory map: never renumber.
"""

import enum
from dataclasses import dataclass

__all__ = ["Format", "RoundMode", "FloatSpec", "FLOAT_SPECS", "FORMAT_BITS", "STORAGE_BITS",
           "CANONICAL_NAN_F32"]

#: Width in bits of a format code in instructions and RTL ports.
FORMAT_BITS = 3


class Format(enum.IntEnum):
    """Data-type code (3 bits). FP32 operands of the tensor engine are used as TF32."""
    FP32 = 0
    BF16 = 1
    FP16 = 2
    FP8_E4M3 = 3   # OCP E4M3 ("e4m3fn"): no Inf, NaN = S.1111.111, max 448
    FP8_E5M2 = 4   # OCP E5M2: IEEE-like, has Inf, max 57344
    FP8_E3M4 = 5   # cFP8 E3M4: IEEE-like (as ml_dtypes.float8_e3m4), has Inf, max 15.5
    INT8 = 6
    INT32 = 7


class RoundMode(enum.IntEnum):
    """Rounding mode code (2 bits) for every FP32-to-narrow conversion."""
    RNE = 0   # round to nearest, ties to even
    RTZ = 1   # round toward zero
    SR = 2    # stochastic rounding from the lane's PRNG


#: Bits each format occupies in SBUF / on the bus.
STORAGE_BITS = {
    Format.FP32: 32, Format.BF16: 16, Format.FP16: 16, Format.FP8_E4M3: 8,
    Format.FP8_E5M2: 8, Format.FP8_E3M4: 8, Format.INT8: 8, Format.INT32: 32,
}

#: The NaN every FP32 arithmetic unit produces (positive, quiet).
CANONICAL_NAN_F32 = 0x7FC00000


@dataclass(frozen=True)
class FloatSpec:
    """Field widths and special-value rules of a binary floating-point format."""
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool
    #: "ieee": all-ones exponent is Inf/NaN; "fn": only S.1..1.1..1 is NaN, no Inf (OCP E4M3).
    nan_style: str

    @property
    def bits(self):
        return 1 + self.exp_bits + self.man_bits


FLOAT_SPECS = {
    Format.FP32: FloatSpec("fp32", 8, 23, 127, True, "ieee"),
    Format.BF16: FloatSpec("bf16", 8, 7, 127, True, "ieee"),
    Format.FP16: FloatSpec("fp16", 5, 10, 15, True, "ieee"),
    Format.FP8_E4M3: FloatSpec("fp8_e4m3", 4, 3, 7, False, "fn"),
    Format.FP8_E5M2: FloatSpec("fp8_e5m2", 5, 2, 15, True, "ieee"),
    Format.FP8_E3M4: FloatSpec("fp8_e3m4", 3, 4, 3, True, "ieee"),
}
