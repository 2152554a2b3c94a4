"""Parameter checks of the tensor engine's components, Verilog generation (128x128), and a fast
Amaranth-simulator check of the engine over many (mul_stages, add_stages) pairs."""

import os

import numpy as np
import pytest
from amaranth.back import rtlil, verilog

from amaranth_tb import run_tensor_engine
from rtl.tensor.array import SystolicArray
from rtl.tensor.engine import TensorEngine
from rtl.tensor.pe import MAX_ADD_STAGES, MAX_MUL_STAGES, ProcessingElement
from rtl.tensor.psum import PSUM
from sim.dtypes import Format
from sim.tensor import random_operands

ALL = {Format.INT8, Format.BF16}


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(rows=1, cols=4), ValueError, "rows must be an integer from 2 to 512, not 1"),
    (dict(rows=4, cols=0), ValueError, "cols must be an integer from 2 to 512, not 0"),
    (dict(rows=4.0, cols=4), TypeError, "rows must be an integer, not 4.0"),
    (dict(rows=4, cols=True), TypeError, "cols must be an integer, not True"),
    (dict(rows=4, cols=4, formats=Format.INT8), TypeError,
     "formats must be a collection of Format"),
    (dict(rows=4, cols=4, formats=[6]), TypeError, "formats must contain Format members"),
    (dict(rows=4, cols=4, formats=[Format.FP32]), ValueError,
     "formats must be a subset of .* not containing FP32"),
    (dict(rows=4, cols=4, formats=[]), ValueError, "formats must contain at least one"),
    (dict(rows=4, cols=4, mul_stages=5), ValueError,
     "mul_stages must be an integer from 0 to 4, not 5"),
    (dict(rows=4, cols=4, add_stages=-1), ValueError,
     "add_stages must be an integer from 0 to 4, not -1"),
    (dict(rows=4, cols=4, add_stages="2"), TypeError, "add_stages must be an integer, not '2'"),
])
def test_engine_parameter_errors(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        TensorEngine(**kwargs)
    if "formats" not in kwargs:
        kw = dict(kwargs)
        with pytest.raises(exc, match=msg):
            SystolicArray(kw.pop("rows"), kw.pop("cols"), ALL, **kw)


def test_pe_parameter_errors():
    with pytest.raises(TypeError, match="top must be a bool, not 1"):
        ProcessingElement(ALL, top=1)
    with pytest.raises(ValueError, match="mul_stages must be an integer from 0 to 4, not 9"):
        ProcessingElement(ALL, mul_stages=9)
    with pytest.raises(ValueError, match="int_bits must be an integer from 16 to 32, not 33"):
        ProcessingElement(ALL, int_bits=33)
    with pytest.raises(TypeError, match="int_bits must be an integer, not None"):
        ProcessingElement(ALL, int_bits=None)


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(cols=0, depth=16), ValueError, "cols must be an integer from 1 to 512, not 0"),
    (dict(cols="4", depth=16), TypeError, "cols must be an integer, not '4'"),
    (dict(cols=4, depth=12), ValueError, "depth must be a power of two from 2 to 65536, not 12"),
    (dict(cols=4, depth=16.0), TypeError, "depth must be an integer, not 16.0"),
    (dict(cols=4, depth=16, banks=3), ValueError,
     r"banks must be a power of two from 1 to 16, not 3"),
    (dict(cols=4, depth=16, banks=32), ValueError, "not 32"),
    (dict(cols=4, depth=16, add_stages=5), ValueError,
     "add_stages must be an integer from 0 to 4, not 5"),
    (dict(cols=4, depth=16, formats=[Format.BF16]), ValueError,
     "formats must be a subset of {FP32, INT32}"),
    (dict(cols=4, depth=16, formats=[]), ValueError, "formats must contain at least one"),
])
def test_psum_parameter_errors(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        PSUM(**kwargs)


def test_stage_limits_match_arith():
    from rtl.arith.fp32_add import FP32Adder
    from rtl.arith.fp_mul import FPMultiplier
    assert MAX_MUL_STAGES == FPMultiplier.MAX_STAGES
    assert MAX_ADD_STAGES == FP32Adder.MAX_STAGES


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_properties():
    e = TensorEngine(16, 8, {Format.BF16}, mul_stages=2, add_stages=3)
    assert (e.rows, e.cols, e.mul_stages, e.add_stages, e.row_delay) == (16, 8, 2, 3, 3)
    assert e.latency == 2 + 16 * 3 + 8
    assert e.drain == 15 * 3 + 8
    assert TensorEngine(4, 4, {Format.INT8}, add_stages=3).row_delay == 1
    assert TensorEngine(4, 4, {Format.FP16}, add_stages=0).row_delay == 1
    assert PSUM(4, 64, banks=4, add_stages=2).bank_depth == 16
    assert PSUM(4, 64, add_stages=2).latency == 4


@pytest.mark.long
def test_generate_128x128_int8():
    """The full-size INT8 engine elaborates and converts to Verilog (minutes: marked long)."""
    text = verilog.convert(TensorEngine(128, 128, {Format.INT8}), name="top", emit_src=False)
    assert "pe_r127_c127" in text and "module top" in text


@pytest.mark.long
def test_generate_128x128_all_formats():
    """The full-size engine with every format (16384 FP PEs) converts to RTLIL (the step that
    elaborates everything; Verilog output of this size takes many minutes in Yosys)."""
    text = rtlil.convert(TensorEngine(128, 128), name="top", emit_src=False)
    assert "pe_r127_c127" in text


# --- Amaranth simulator: the engine over many (mul_stages, add_stages) pairs ---------------------

@pytest.mark.parametrize("ms,as_,int_only", [(0, 0, False), (0, 1, False), (1, 0, False),
                                            (2, 1, False), (3, 4, False), (1, 3, False),
                                            (0, 0, True), (2, 3, True)])
def test_engine_stages_amaranth_sim(ms, as_, int_only):
    """2x3 BF16+INT8 array (and a 3x2 INT8-only one): bit-exact for every pipeline depth pair,
    with stalls and idles."""
    rows, cols = (3, 2) if int_only else (2, 3)
    seed = int(os.environ.get("TEST_SEED", 1234)) + 10 * ms + as_
    rng = np.random.default_rng(seed)
    prog = []
    for i in range(5):
        fmt = Format.INT8 if int_only else [Format.BF16, Format.INT8][i % 2]
        K, M, N = int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1)), \
            int(rng.integers(1, 9))
        prog.append((fmt, random_operands(rng, fmt, (K, M), "special"),
                     random_operands(rng, fmt, (K, N), "special")))
    # Extremes: (-128) x (-128) in every row (largest column sum), and (-128) x 127.
    prog.append((Format.INT8, np.full((rows, cols), 0x80, np.uint64),
                 np.array([[0x80, 0x7F, 0x80]] * rows, np.uint64)))
    formats = {Format.INT8} if int_only else {Format.BF16, Format.INT8}
    dut = TensorEngine(rows, cols, formats, mul_stages=ms, add_stages=as_)
    assert run_tensor_engine(dut, prog, seed) == sum(mv.shape[1] for _, _, mv in prog)
