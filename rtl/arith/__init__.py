"""Arithmetic building blocks (``docs/interfaces.md`` section 3, ``docs/formats.md``):
format decoder, exact narrow-format multiplier, FP32 adder and multiplier, INT8 MAC."""

from rtl.arith.decoder import FormatDecoder
from rtl.arith.fp32_add import FP32Adder
from rtl.arith.fp32_mul import FP32Multiplier
from rtl.arith.fp_mul import FPMultiplier
from rtl.arith.int_mac import IntMAC

__all__ = ["FormatDecoder", "FPMultiplier", "FP32Adder", "FP32Multiplier", "IntMAC"]
