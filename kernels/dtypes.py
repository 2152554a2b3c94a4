"""Element types of the kernel language: names, the core's format codes and numpy dtypes.

A kernel's DRAM tensors are numpy arrays; their dtype picks the core format
(``sim.dtypes.Format``) that the DMA moves and the engines decode:

=============  ===========================  =====================
name           numpy dtype                  ``sim.dtypes.Format``
=============  ===========================  =====================
``fp32``       ``numpy.float32``            FP32
``bf16``       ``ml_dtypes.bfloat16``       BF16
``fp16``       ``numpy.float16``            FP16
``fp8_e4m3``   ``ml_dtypes.float8_e4m3fn``  FP8_E4M3
``fp8_e5m2``   ``ml_dtypes.float8_e5m2``    FP8_E5M2
``fp8_e3m4``   ``ml_dtypes.float8_e3m4``    FP8_E3M4
``int8``       ``numpy.int8``               INT8
``int32``      ``numpy.int32``              INT32
=============  ===========================  =====================
"""

import ml_dtypes
import numpy as np

from sim.dtypes import STORAGE_BITS, Format

__all__ = ["DType", "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e3m4", "int8",
           "int32", "DTYPES", "as_dtype"]


class DType:
    """One element type: ``name``, ``fmt`` (``sim.dtypes.Format``), ``np`` (numpy dtype),
    ``nbytes`` (bytes per element in DRAM), ``is_int``."""

    def __init__(self, name, fmt, np_dtype):
        self.name = name
        self.fmt = Format(fmt)
        self.np = np.dtype(np_dtype)
        self.nbytes = STORAGE_BITS[self.fmt] // 8
        self.is_int = self.fmt in (Format.INT8, Format.INT32)

    @property
    def asm(self):
        """The format's name in assembly (``fmt=bf16``)."""
        return self.fmt.name.lower()

    def bits(self, array):
        """``array`` (any numeric numpy array) cast to this type, as unsigned bit patterns."""
        a = np.asarray(array)
        if a.dtype != self.np:
            a = a.astype(self.np)
        return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[self.nbytes])

    def __repr__(self):
        return self.name


fp32 = DType("fp32", Format.FP32, np.float32)
bf16 = DType("bf16", Format.BF16, ml_dtypes.bfloat16)
fp16 = DType("fp16", Format.FP16, np.float16)
fp8_e4m3 = DType("fp8_e4m3", Format.FP8_E4M3, ml_dtypes.float8_e4m3fn)
fp8_e5m2 = DType("fp8_e5m2", Format.FP8_E5M2, ml_dtypes.float8_e5m2)
fp8_e3m4 = DType("fp8_e3m4", Format.FP8_E3M4, ml_dtypes.float8_e3m4)
int8 = DType("int8", Format.INT8, np.int8)
int32 = DType("int32", Format.INT32, np.int32)

#: Every type by name.
DTYPES = {d.name: d for d in (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, fp8_e3m4, int8, int32)}


def as_dtype(value, name="dtype"):
    """A :class:`DType` from a DType, its name, a ``sim.dtypes.Format`` or a numpy dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value.lower() in DTYPES:
        return DTYPES[value.lower()]
    if isinstance(value, Format):
        for d in DTYPES.values():
            if d.fmt == value:
                return d
    try:
        npd = np.dtype(value)
    except TypeError:
        npd = None
    if npd is not None:
        for d in DTYPES.values():
            if d.np == npd:
                return d
    raise TypeError(f"{name} must be one of {', '.join(DTYPES)} (or the matching numpy "
                    f"dtype), not {value!r}")
