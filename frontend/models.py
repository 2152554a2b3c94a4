"""Real models for the importer, each with its onnxruntime reference and its tolerance.

* :func:`digits`: scikit-learn's bundled digits data set (8 x 8 images, 10 classes), an
  ``MLPClassifier`` (64 -> 32 -> 10, ReLU, fixed seed) trained on 75 % of it and exported with
  skl2onnx; :func:`quantize_int8` makes its INT8 form with onnxruntime's static quantization
  (QuantizeLinear, QLinearMatMul, DequantizeLinear).
* :func:`encoder`: a transformer encoder block (two-head self-attention, residual, layer norm,
  an MLP with GELU, residual, layer norm) built with ``onnx.helper`` from seeded weights.
* :func:`cnn`: a small CNN (Conv, Relu, MaxPool, Conv, Relu, MaxPool, Flatten, Gemm) built the
  same way.

:func:`reference` runs a model on onnxruntime (FP32); :func:`tolerance` is the bound on the
core's output against it, derived from the tensor format (``docs/onnx.md``, Models).
"""

import numpy as np

from frontend import tolerance as T

__all__ = ["Digits", "digits", "digits_export", "quantize_int8", "encoder", "cnn", "squeezenet",
           "reference", "tolerance", "MODELS"]

#: Seed of every model's weights and data.
SEED = 0


class Digits:
    """The digits MLP: ``model`` (ONNX, FP32: input ``X [N, 64]``, output
    ``probabilities [N, 10]``), ``x_test``/``y_test`` (the 25 % test split, 450 images, pixels
    scaled to [0, 1]), ``x_train`` (for calibration) and ``sklearn_accuracy``."""

    def __init__(self, model, x_train, x_test, y_test, sklearn_accuracy):
        self.model, self.x_train = model, x_train
        self.x_test, self.y_test = x_test, y_test
        self.sklearn_accuracy = sklearn_accuracy

    def accuracy(self, probabilities, n=None):
        """Fraction of the first ``n`` (default: all) test images whose largest probability
        is the right class."""
        p = np.asarray(probabilities)
        y = self.y_test[:len(p) if n is None else n]
        return float(np.mean(np.argmax(p[:len(y)], axis=1) == y))


def digits(hidden=32, seed=SEED):
    """Train and export the digits MLP (:class:`Digits`).

    skl2onnx's export also computes the label (ArgMax, and ArrayFeatureExtractor of the
    ``ai.onnx.ml`` domain), which the core does not run: the model kept is the export from
    ``X`` to ``probabilities``, cut with ``onnx.utils.Extractor``, without its first node (a
    Cast from FP32 to FP32); the label is the argmax of the probabilities.
    """
    import warnings
    import onnx.utils
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed,
                                              stratify=y)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=300, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x_tr, y_tr)
    full = to_onnx(clf, x_tr[:1], options={id(clf): {"zipmap": False}}, target_opset=17)
    model = onnx.utils.Extractor(full).extract_model(["X"], ["probabilities"])
    cast = model.graph.node[0]
    assert cast.op_type == "Cast" and cast.input[0] == "X", cast
    for node in model.graph.node:
        node.input[:] = ["X" if v == cast.output[0] else v for v in node.input]
    model.graph.node.remove(cast)
    return Digits(model, x_tr, x_te, y_te.astype(np.int64), float(clf.score(x_te, y_te)))


def digits_export(hidden=32, seed=SEED):
    """skl2onnx's whole export of the digits MLP (with the label branch the core refuses)."""
    import warnings
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=20, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x, y)
    return to_onnx(clf, x[:1], options={id(clf): {"zipmap": False}}, target_opset=17)


def quantize_int8(model, calibration, input_name=None):
    """``model`` with every MatMul quantized by onnxruntime's static quantization (QOperator
    format, INT8 activations and weights, per tensor, MinMax calibration on the rows of
    ``calibration``): QuantizeLinear, QLinearMatMul, DequantizeLinear around each."""
    import logging
    import os
    import tempfile
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    name = input_name or model.graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: calibration[i:i + 1]} for i in range(len(calibration))])

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
        onnx.save(model, src)
        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)
        try:
            quantize_static(src, dst, Reader(), quant_format=QuantFormat.QOperator,
                            op_types_to_quantize=["MatMul"], per_channel=False,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        finally:
            logging.getLogger().setLevel(level)
        return onnx.load(dst)


def _helper_model(nodes, inputs, outputs, inits, opset=20):
    from onnx import helper
    g = helper.make_graph(nodes, "model", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def encoder(seq=8, d_model=16, heads=2, d_ff=32, seed=SEED):
    """A post-norm transformer encoder block on ``x [seq, d_model]`` (model, input).

    ``h = LayerNorm(x + MHA(x))``, ``y = LayerNorm(h + W2 gelu(W1 h + b1) + b2)``, with
    ``heads`` heads of ``d_model / heads`` each (softmax of ``Q K^T / sqrt(d_head)``).
    """
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    dh = d_model // heads

    def w(name, *shape, scale=None):
        s = 1.0 / np.sqrt(shape[0]) if scale is None else scale
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32),
                                       name)

    def c(name, v, dt=np.float32):
        return numpy_helper.from_array(np.asarray(v, dt), name)

    inits = [w("wq", d_model, d_model), w("wk", d_model, d_model), w("wv", d_model, d_model),
             w("wo", d_model, d_model), w("w1", d_model, d_ff), w("b1", d_ff, scale=0.1),
             w("w2", d_ff, d_model), w("b2", d_model, scale=0.1),
             c("g1", 1 + 0.1 * rng.standard_normal(d_model)),
             c("be1", 0.1 * rng.standard_normal(d_model)),
             c("g2", 1 + 0.1 * rng.standard_normal(d_model)),
             c("be2", 0.1 * rng.standard_normal(d_model)),
             c("heads_shape", [seq, heads, dh], np.int64),
             c("model_shape", [seq, d_model], np.int64),
             c("inv_sqrt_dh", 1.0 / np.sqrt(dh))]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wq"], ["q"], name="q_proj"),
             n("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             n("MatMul", ["x", "wv"], ["v"], name="v_proj"),
             n("Reshape", ["q", "heads_shape"], ["q3"], name="q_heads"),
             n("Reshape", ["k", "heads_shape"], ["k3"], name="k_heads"),
             n("Reshape", ["v", "heads_shape"], ["v3"], name="v_heads"),
             n("Transpose", ["q3"], ["qh"], perm=[1, 0, 2], name="q_t"),
             n("Transpose", ["k3"], ["kt"], perm=[1, 2, 0], name="k_t"),
             n("Transpose", ["v3"], ["vh"], perm=[1, 0, 2], name="v_t"),
             n("MatMul", ["qh", "kt"], ["s"], name="scores"),
             n("Mul", ["s", "inv_sqrt_dh"], ["ss"], name="scale"),
             n("Softmax", ["ss"], ["p"], axis=-1, name="softmax"),
             n("MatMul", ["p", "vh"], ["o3"], name="context"),
             n("Transpose", ["o3"], ["o4"], perm=[1, 0, 2], name="o_t"),
             n("Reshape", ["o4", "model_shape"], ["o"], name="merge_heads"),
             n("MatMul", ["o", "wo"], ["a"], name="out_proj"),
             n("Add", ["x", "a"], ["r1"], name="residual1"),
             n("LayerNormalization", ["r1", "g1", "be1"], ["h"], axis=-1, name="norm1"),
             n("MatMul", ["h", "w1"], ["f0"], name="ff1"),
             n("Add", ["f0", "b1"], ["f1"], name="ff1_bias"),
             n("Gelu", ["f1"], ["f2"], name="gelu"),
             n("MatMul", ["f2", "w2"], ["f3"], name="ff2"),
             n("Add", ["f3", "b2"], ["f4"], name="ff2_bias"),
             n("Add", ["h", "f4"], ["r2"], name="residual2"),
             n("LayerNormalization", ["r2", "g2", "be2"], ["y"], axis=-1, name="norm2")]
    model = _helper_model(
        nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, d_model])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, d_model])], inits)
    x = rng.standard_normal((seq, d_model)).astype(np.float32)
    return model, x


def cnn(batch=2, channels=1, size=12, classes=10, seed=SEED):
    """A small CNN on ``x [batch, channels, size, size]`` (model, input): 3x3 Conv (8
    filters, padding 1), Relu, 2x2 MaxPool, 3x3 Conv (16 filters, padding 1), Relu, 2x2
    MaxPool, Flatten, Gemm to ``classes`` logits."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    flat = 16 * (size // 4) ** 2

    def w(name, *shape, fan):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(np.float32), name)

    inits = [w("c1w", 8, channels, 3, 3, fan=9 * channels), w("c1b", 8, fan=50),
             w("c2w", 16, 8, 3, 3, fan=72), w("c2b", 16, fan=50),
             w("fw", classes, flat, fan=flat), w("fb", classes, fan=50)]
    n = helper.make_node
    nodes = [n("Conv", ["x", "c1w", "c1b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3],
               name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             n("Conv", ["p1", "c2w", "c2b"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3],
               name="conv2"),
             n("Relu", ["c2"], ["r2"], name="relu2"),
             n("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
             n("Flatten", ["p2"], ["f"], axis=1, name="flatten"),
             n("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")]
    model = _helper_model(
        nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                              [batch, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])], inits,
        opset=17)
    x = rng.random((batch, channels, size, size)).astype(np.float32)
    return model, x


def squeezenet():
    """The topology-only SqueezeNet of ``onnx/backend/test/data/light`` (its weights are
    ConstantOfShape tensors), the input the ONNX backend test runner gives it (``arange(n) /
    n`` in the input's shape) and its expected output: ``(model, feed, expected)``."""
    import os
    import onnx
    from onnx import numpy_helper
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    model = onnx.load(os.path.join(root, "light_squeezenet.onnx"))
    inits = {t.name for t in model.graph.initializer}
    feed = {}
    for v in model.graph.input:
        if v.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in v.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feed[v.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    t = onnx.TensorProto()
    with open(os.path.join(root, "light_squeezenet_output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return model, feed, numpy_helper.to_array(t)


def reference(model, inputs, extra=()):
    """The model's outputs on onnxruntime (CPU, FP32), by name; ``extra`` names intermediate
    values to return too."""
    import onnx
    import onnxruntime as ort
    if extra:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        info = onnx.shape_inference.infer_shapes(model).graph.value_info
        m.graph.output.extend([v for v in info if v.name in extra])
        model = m
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))


#: ``{kind: (matrix products, table functions)}`` on the path to the output.
_DEPTH = {"digits": (2, 1), "encoder": (6, 4), "cnn": (3, 0)}
#: Ratio of a product's absolute sum of terms to its result's scale (cancellation).
GAIN = 2.0


def tolerance(kind, dtype, scale, softmax=False):
    """The bound on ``max|core - onnxruntime|`` of model ``kind`` (``digits``, ``encoder``,
    ``cnn``) in ``dtype`` (``docs/onnx.md``, Models).

    To first order, a matrix product whose operands are rounded to the input format (unit
    roundoff ``u``) is off by ``2 u`` of the absolute sum of its terms, taken as ``GAIN``
    times the scale of the values (``scale``: the largest magnitude of the output, or of the
    logits with ``softmax``); a table function by ``2^-6`` relative; the layers' errors add,
    each carried to the output with a gain of one (layer norm rescales, ReLU and max pooling
    do not amplify). The bound is ``(products 2 u GAIN + tables 2^-6) scale``. A softmax's
    probabilities move by at most half the largest change of its logits, plus its own
    tables (4 BF16 ULP: ``2^-5``). INT8 runs (per-tensor symmetric) are off by half a step
    of ``max|x| / 127`` per operand: ``u = 2^-8`` of the range, doubled for operands whose
    range is set by a few outliers: ``2^-7``.
    """
    u = {"bf16": T.U_IN["bf16"], "fp8": T.U_IN["fp8"], "int8": 2.0 ** -7}[dtype]
    products, tables = _DEPTH[kind]
    if softmax:
        return 0.5 * products * 2 * u * GAIN * scale + 2.0 ** -5
    return (products * 2 * u * GAIN + tables * T.LUT_RTOL) * scale


#: Model names of the benchmark and the tests.
MODELS = ("digits", "encoder", "cnn")
