"""Real models through the importer on the reference simulator, against onnxruntime: the
scikit-learn digits MLP (exported with skl2onnx, and its INT8 form from onnxruntime's static
quantization), a transformer encoder block and a small CNN (``frontend.models``). The test
set here is a subset of the digits test split; ``python -m scripts.bench models`` runs all of
it, on the RTL too."""

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is installed by ./setup.sh (onnx extra)")
pytest.importorskip("onnxruntime", reason="onnxruntime is installed by ./setup.sh")
pytest.importorskip("skl2onnx", reason="skl2onnx is installed by ./setup.sh (onnx extra)")

import frontend  # noqa: E402
from frontend import models  # noqa: E402

#: Digits test images run here (of 450).
SUBSET = 48


@pytest.fixture(scope="module")
def digits():
    d = models.digits()
    d.int8 = models.quantize_int8(d.model, d.x_train[:200])
    x = d.x_test[:SUBSET]
    d.ref = models.reference(d.model, {"X": x}, extra=["add_result1"])
    d.ref_int8 = models.reference(d.int8, {"X": x})["probabilities"]
    return d


def test_digits_export_refused_by_name():
    """skl2onnx's whole export computes the label with ArgMax and ArrayFeatureExtractor
    (``ai.onnx.ml``): refused, naming them, before anything runs."""
    with pytest.raises(frontend.UnsupportedModel) as e:
        frontend.Model(models.digits_export())
    ops = {op for op, _, _ in e.value.problems}
    assert {"ArgMax", "ArrayFeatureExtractor"} <= ops


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "int8"])
def test_digits_on_refsim(digits, dtype):
    """Accuracy on the subset within 2 images of onnxruntime's FP32, probabilities within the
    format's bound; INT8 is the QLinearMatMul model, within 2^-5 of onnxruntime running the
    same INT8 model (integer parts exact, the softmax's tables)."""
    x = digits.x_test[:SUBSET]
    model = digits.int8 if dtype == "int8" else digits.model
    ops = {n.op_type for n in model.graph.node}
    if dtype == "int8":
        assert {"QuantizeLinear", "QLinearMatMul", "DequantizeLinear"} <= ops
    p = frontend.Model(model).run({"X": x}, dtype="bf16" if dtype == "int8" else dtype)
    p = p.outputs["probabilities"]
    ref = digits.ref["probabilities"]
    fp32 = digits.accuracy(ref)
    assert fp32 >= 0.9
    assert digits.accuracy(p) >= fp32 - 2 / SUBSET
    bound = models.tolerance("digits", dtype, np.max(np.abs(digits.ref["add_result1"])),
                             softmax=True)
    assert np.max(np.abs(p - ref)) <= bound
    if dtype == "int8":
        assert np.max(np.abs(p - digits.ref_int8)) <= 2.0 ** -5


@pytest.mark.parametrize("kind", ["encoder", "cnn"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8", "int8"])
def test_helper_models_on_refsim(kind, dtype):
    model, x = getattr(models, kind)()
    ref = models.reference(model, {"x": x})["y"]
    y = frontend.Model(model).run({"x": x}, dtype=dtype).outputs["y"]
    err = float(np.max(np.abs(y - ref)))
    assert err <= models.tolerance(kind, dtype, float(np.max(np.abs(ref)))), err


def test_qlinearmatmul_int8_zero_point_at_the_end_of_the_range():
    """int8 operands with zero point -128 shift to 0..255, which is three INT8 parts
    (127 + 127 + 1): the accumulation stays exact."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (5, 40), dtype=np.int8)
    a[0, :] = 127
    b = rng.integers(-128, 128, (40, 3), dtype=np.int8)
    vals = {"sa": np.float32(0.01), "za": np.int8(-128), "sb": np.float32(0.02),
            "zb": np.int8(0), "sy": np.float32(2.0), "zy": np.int8(3)}
    inits = [numpy_helper.from_array(np.array(v), n) for n, v in vals.items()]
    g = helper.make_graph(
        [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                          ["y"])], "q",
        [helper.make_tensor_value_info("a", TensorProto.INT8, [5, 40]),
         helper.make_tensor_value_info("b", TensorProto.INT8, [40, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [5, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    got = frontend.Model(m).run({"a": a, "b": b}).outputs["y"].astype(np.int64)
    acc = (a.astype(np.int64) + 128) @ b.astype(np.int64)
    exp = np.clip(np.rint(acc * np.float64(np.float32(0.01 * 0.02 / 2.0))) + 3, -128, 127)
    assert np.max(np.abs(got - exp)) <= 1
    ort = models.reference(m, {"a": a, "b": b})["y"].astype(np.int64)
    assert np.max(np.abs(got - ort)) <= 1


@pytest.mark.long
def test_squeezenet_end_to_end():
    """The light SqueezeNet of the ONNX backend tests (349 M MACs; its time on the reference
    simulator is in docs/onnx.md) end to end, with the ONNX runner's input: within the
    softmax's 4 BF16 ULP of its expected output (its weights are constants, so every class
    has the same probability)."""
    from scripts.bench_models import squeezenet
    rec = squeezenet("refsim")
    assert rec["max_error"] <= 4 * 2.0 ** -7 * rec["expected_max"], rec


def _one_node(op, inputs, out_shape, inits, **attrs):
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph(
        [helper.make_node(op, [n for n, _ in inputs] + [n for n, _ in inits], ["y"], **attrs)],
        "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
              for n, v in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_launches_that_overflow_sbuf_are_split():
    """A MatMul whose stationary operand overflows SBUF (K = 300: 38 K tiles) runs in blocks
    of rows, and a Conv whose filters' K tiles overflow it (16 channels x 3 x 3, 64 filters)
    by filters, each within the product bound; a strided Conv computes only the outputs it
    keeps (one GEMM)."""
    from frontend.tolerance import check_close
    rng = np.random.default_rng(11)
    a = rng.standard_normal((40, 300)).astype(np.float32)
    b = rng.standard_normal((300, 12)).astype(np.float32)
    m = frontend.Model(_one_node("MatMul", [("a", a)], [40, 12], [("b", b)]))
    res = m.run({"a": a})
    assert res.layers[0].kernels > 1
    assert check_close("MatMul", res.outputs["y"], a @ b, inputs=[a, b]) is None
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)
    w = rng.standard_normal((64, 16, 3, 3)).astype(np.float32)
    for strides, out in (([1, 1], 4), ([2, 2], 2)):
        model = _one_node("Conv", [("x", x)], [1, 64, out, out], [("w", w)], strides=strides)
        exp = models.reference(model, {"x": x})["y"]
        res = frontend.Model(model).run({"x": x})
        assert check_close("Conv", res.outputs["y"], exp, inputs=[x, w]) is None
        assert res.layers[0].macs == exp.size * 16 * 9
