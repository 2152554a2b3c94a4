"""Parameter checks of the arithmetic blocks (``rtl/arith``): wrong types raise TypeError,
values out of range ValueError, with messages naming the parameter and what is allowed; and
the ports each block promises in ``docs/interfaces.md`` section 3."""

import pytest
from amaranth.lib import wiring

from rtl.arith.decoder import FormatDecoder
from rtl.arith.fp32_add import FP32Adder
from rtl.arith.fp32_mul import FP32Multiplier
from rtl.arith.fp_mul import MUL_FORMATS, FPMultiplier
from rtl.arith.int_mac import IntMAC
from rtl.arith.lanes import ArithLanes
from sim.dtypes import Format


@pytest.mark.parametrize("cls,maximum", [(FP32Adder, 4), (FP32Multiplier, 4), (IntMAC, 2)])
def test_stages_range(cls, maximum):
    for s in range(maximum + 1):
        assert cls(stages=s).stages == s
        assert cls(stages=s).latency == s
    with pytest.raises(ValueError, match=rf"stages must be an integer from 0 to {maximum}, "
                                         rf"not {maximum + 1}"):
        cls(stages=maximum + 1)
    with pytest.raises(ValueError, match=r"stages must be an integer from 0 to \d+, not -1"):
        cls(stages=-1)
    with pytest.raises(TypeError, match=r"stages must be an integer, not '2'"):
        cls(stages="2")
    with pytest.raises(TypeError, match=r"stages must be an integer, not True"):
        cls(stages=True)


def test_fp_mul_stages_and_formats():
    with pytest.raises(ValueError, match=r"stages must be an integer from 0 to 4, not 5"):
        FPMultiplier(MUL_FORMATS, 5)
    with pytest.raises(ValueError, match=r"formats must be a subset of .*not containing INT32"):
        FPMultiplier([Format.BF16, Format.INT32], 1)
    with pytest.raises(ValueError, match=r"formats must contain at least one format"):
        FPMultiplier([], 1)
    with pytest.raises(TypeError, match=r"formats must be a collection of Format members"):
        FPMultiplier(Format.BF16, 1)
    with pytest.raises(TypeError, match=r"formats must contain Format members, not 'bf16'"):
        FPMultiplier(["bf16"], 1)
    with pytest.raises(ValueError, match=r"formats must contain Format codes 0\.\.7, not 9"):
        FPMultiplier([9], 1)
    assert FPMultiplier([1, 3], 0).formats == {Format.BF16, Format.FP8_E4M3}


@pytest.mark.parametrize("formats,width", [
    ([Format.BF16, Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4,
      Format.INT8], 12),                                   # signed 12 x 12: one MULT18X18D
    ([Format.BF16, Format.FP8_E4M3], 8),
    ([Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4], 5),
    ([Format.INT8], 8),
    ([Format.FP32], 11),
    (list(MUL_FORMATS), 12),
])
def test_fp_mul_one_narrow_multiplier(formats, width):
    """One multiplier, at most 18 x 18, sized by the widest significand of ``formats``."""
    assert FPMultiplier(formats, 1).multiplier_width == width <= 18


def test_fp8_bias_checks():
    assert FormatDecoder(fp8_bias={Format.FP8_E4M3: 10}).fp8_bias[Format.FP8_E4M3] == 10
    with pytest.raises(ValueError, match=r"fp8_bias\[FP8_E5M2\] must be an integer from -97 to 125, not 126"):
        FormatDecoder(fp8_bias={Format.FP8_E5M2: 126})
    with pytest.raises(ValueError, match=r"fp8_bias keys must be FP8 formats"):
        FPMultiplier(MUL_FORMATS, 1, fp8_bias={Format.BF16: 127})
    with pytest.raises(TypeError, match=r"fp8_bias\[FP8_E3M4\] must be an integer, not 2.5"):
        FormatDecoder(fp8_bias={Format.FP8_E3M4: 2.5})
    with pytest.raises(TypeError, match=r"fp8_bias must be a mapping"):
        FormatDecoder(fp8_bias=7)


def test_decoder_formats():
    assert FormatDecoder().formats == frozenset(Format)
    assert FormatDecoder(stages=1).stages == 1
    with pytest.raises(ValueError, match="stages must be an integer from 0 to 1, not 2"):
        FormatDecoder(stages=2)
    with pytest.raises(TypeError, match="stages"):
        FormatDecoder(stages=True)
    with pytest.raises(ValueError, match=r"formats must contain at least one format"):
        FormatDecoder(())


def test_lanes_checks():
    with pytest.raises(ValueError, match=r"lanes must be an integer from 1 to 1024, not 0"):
        ArithLanes(FP32Adder, 0, inputs={"a": 32}, outputs={"o": 32})
    with pytest.raises(TypeError, match=r"lanes must be an integer, not 2.0"):
        ArithLanes(FP32Adder, 2.0, inputs={"a": 32}, outputs={"o": 32})


def _ports(component):
    from amaranth.hdl import Shape
    return {name: (member.flow, Shape.cast(member.shape).width)
            for name, member in component.signature.members.items()}


def test_interface_ports():
    """Exactly the ports of docs/interfaces.md section 3."""
    In, Out = wiring.In, wiring.Out
    assert _ports(FormatDecoder()) == {"a": (In, 32), "fmt": (In, 3), "en": (In, 1),
                                       "o": (Out, 32)}
    assert _ports(FPMultiplier(MUL_FORMATS, 2)) == {"a": (In, 32), "b": (In, 32),
                                                    "fmt": (In, 3), "en": (In, 1),
                                                    "p": (Out, 32)}
    for cls in (FP32Adder, FP32Multiplier):
        assert _ports(cls(2)) == {"a": (In, 32), "b": (In, 32), "en": (In, 1), "o": (Out, 32)}
    assert FP32Adder(2).signature.members["en"].init == 1
