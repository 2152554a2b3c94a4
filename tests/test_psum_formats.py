"""PSUM's accumulation formats beside a tensor engine (``rtl.tensor.psum.psum_formats``)."""

import pytest

from rtl.tensor.psum import PSUM, psum_formats
from sim.dtypes import Format


@pytest.mark.parametrize("engine, expected", [
    ((Format.BF16, Format.FP8_E4M3, Format.FP8_E5M2), {Format.FP32}),
    ((Format.INT8,), {Format.FP32, Format.INT32}),
    ((Format.INT8, Format.BF16), {Format.FP32, Format.INT32}),
    (tuple(Format), {Format.FP32, Format.INT32}),
])
def test_int32_only_with_int8(engine, expected):
    """INT32 accumulation is built only beside an engine with INT8 (its only INT32 beats)."""
    assert set(psum_formats(engine)) == expected
    assert PSUM(2, 8, formats=psum_formats(engine)).formats == expected
