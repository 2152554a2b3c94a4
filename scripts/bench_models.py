"""Benchmark of real models through the ONNX importer (``frontend.models``, ``docs/onnx.md``).

    python -m scripts.bench models [--json] [--quick] [--backends refsim,rtl]
                                   [--models digits,encoder,cnn] [--dtypes bf16,fp8,int8]
    python -m scripts.bench models --json --models squeezenet --backends refsim

For each model, backend and tensor format: the largest error against onnxruntime (FP32) and
its bound (``frontend.models.tolerance``), the digits MLP's accuracy on the 450 test images
(``--quick``: the first 64), cycles, the tensor engine's busy fraction and the roofline
fraction (``max(MACs / (rows cols), DMA bytes / bus bytes per cycle)`` summed over the
kernels, over the cycles). The digits MLP in INT8 is its QLinearMatMul form (onnxruntime's
static quantization), also compared with onnxruntime running that INT8 model.

``rtl`` is the fast Verilator backend (``fastsim``) of the importer's core
(``frontend.default_config()``); its outputs are compared bit for bit with the reference
simulator's. ``refsim`` has no clock: its cycles and busy counts are the cycle model's
(``sim/cycles.py``: serial engines with estimated costs).

``squeezenet`` (not in the default list: 349 M MACs) runs the light SqueezeNet of the ONNX
backend tests end to end on the first backend, once per dtype (``int8`` convolves in BF16, so
for this model it is the ``bf16`` run again).
"""

import time

import numpy as np

#: Digits test images per run with ``--quick``.
QUICK_DIGITS = 64


def add_arguments(parser):
    parser.add_argument("--backends", default="refsim,rtl",
                        help="comma-separated: refsim, rtl (default both)")
    parser.add_argument("--models", default="digits,encoder,cnn")
    parser.add_argument("--dtypes", default="bf16,fp8,int8")


def _cases(names, quick):
    """``(name, dtype-independent data)``: model(s), input feed, reference, bound inputs."""
    from frontend import models as M
    out = {}
    if "digits" in names:
        d = M.digits()
        x = d.x_test[:QUICK_DIGITS] if quick else d.x_test
        ref = M.reference(d.model, {"X": x}, extra=["add_result1"])
        q = M.quantize_int8(d.model, d.x_train[:200])
        out["digits"] = dict(
            what="scikit-learn MLPClassifier 64-32-10 (ReLU) on the digits test split, "
                 "exported with skl2onnx; INT8: onnxruntime static quantization (QOperator)",
            model=d.model, int8=q, feed={"X": x}, output="probabilities",
            ref=ref["probabilities"], scale=float(np.max(np.abs(ref["add_result1"]))),
            ref_int8=M.reference(q, {"X": x})["probabilities"], digits=d, images=len(x))
    for kind, what in (("encoder", "transformer encoder block: seq 8, d_model 16, 2 heads, "
                                   "d_ff 32, GELU, post-norm (onnx.helper, seed 0)"),
                       ("cnn", "CNN 1x12x12, batch 2: Conv 8, Relu, MaxPool, Conv 16, Relu, "
                               "MaxPool, Flatten, Gemm 10 (onnx.helper, seed 0)")):
        if kind in names:
            model, x = getattr(M, kind)()
            ref = M.reference(model, {"x": x})["y"]
            out[kind] = dict(what=what, model=model, feed={"x": x}, output="y", ref=ref,
                             scale=float(np.max(np.abs(ref))))
    return out


def _one(name, case, backend, dtype, config):
    import frontend
    from frontend import models as M
    int8_model = name == "digits" and dtype == "int8"
    model = frontend.Model(case["int8"] if int8_model else case["model"])
    t0 = time.time()
    res = model.run(case["feed"], backend=backend, dtype="bf16" if int8_model else dtype,
                    config=config, cycle_model=True, races=False)
    y = res.outputs[case["output"]]
    err = float(np.max(np.abs(y.astype(np.float64) - case["ref"])))
    bound = M.tolerance(name, dtype, case["scale"], softmax=name == "digits")
    cycles = res.cycles
    rec = {"max_error": err, "tolerance": bound, "within": err <= bound,
           "cycles": cycles, "cycles_source": "rtl" if backend == "rtl" else "cycle model",
           "tensor_busy": round(res.total("tensor_busy") / cycles, 4) if cycles else None,
           "roofline_cycles": res.total("roofline_cycles"),
           "roofline_fraction": round(res.total("roofline_cycles") / cycles, 4)
           if cycles else None,
           "macs": res.total("macs"), "dma_bytes": res.total("dma_bytes"),
           "kernels": res.total("kernels"), "seconds": round(time.time() - t0, 1)}
    if name == "digits":
        rec["accuracy"] = case["digits"].accuracy(y)
        if int8_model:
            rec["model"] = "QLinearMatMul"
            rec["max_error_vs_onnxruntime_int8"] = float(np.max(np.abs(y - case["ref_int8"])))
    return rec, y


def squeezenet(backend="refsim", conv_backend=None, progress=None, dtype="bf16"):
    """The light SqueezeNet (``frontend.models.squeezenet``) end to end in ``dtype``: the
    largest absolute and relative error of its output against its expected output and
    against onnxruntime, the same for the logits (the Softmax's input) against onnxruntime,
    the top-1 class agreement, cycles, seconds and a record per layer; ``conv_backend`` runs
    its convolutions elsewhere (``rtl``: bit-exact with the reference simulator)."""
    import frontend
    from frontend import models as M
    model, feed, expected = M.squeezenet()
    soft = next(n for n in model.graph.node if n.op_type == "Softmax")
    out_name = model.graph.output[0].name
    ref = M.reference(model, feed, extra=[soft.input[0]])
    t0 = time.time()
    res = frontend.Model(model).run(
        feed, backend=backend, dtype=dtype, config=frontend.default_config(),
        cycle_model=True, races=False, progress=progress,
        op_backends={"Conv": conv_backend} if conv_backend else None)
    seconds = round(time.time() - t0, 1)

    def errors(got, want):
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        err = np.abs(got - want)
        nz = want != 0
        return float(np.max(err)), float(np.max(err[nz] / np.abs(want[nz]))) if nz.any() \
            else None

    y = res.outputs[out_name]
    logits = res.values[soft.input[0]]
    err, rel = errors(y, expected)
    err_ort, rel_ort = errors(y, ref[out_name])
    lerr, lrel = errors(logits, ref[soft.input[0]])
    flat_e = np.asarray(expected).reshape(-1)
    cycles = res.cycles
    return {"backend": backend, "conv_backend": conv_backend or backend, "dtype": dtype,
            "max_error": err, "max_rel_error": rel,
            "max_error_vs_onnxruntime": err_ort, "max_rel_error_vs_onnxruntime": rel_ort,
            "logits_max_error_vs_onnxruntime": lerr,
            "logits_max_rel_error_vs_onnxruntime": lrel,
            "logits_max": float(np.max(np.abs(ref[soft.input[0]]))),
            "expected_max": float(np.max(np.abs(expected))),
            "expected_distinct_values": int(np.unique(flat_e).size),
            "top1": int(np.argmax(y)), "top1_expected": int(np.argmax(flat_e)),
            "top1_agrees": bool(np.argmax(y) == np.argmax(flat_e)),
            "top1_tied_classes_expected": int(np.sum(flat_e == flat_e.max())),
            "cycles": cycles,
            "tensor_busy": round(res.total("tensor_busy") / cycles, 4) if cycles else None,
            "roofline_fraction": round(res.total("roofline_cycles") / cycles, 4)
            if cycles else None, "macs": res.total("macs"), "kernels": res.total("kernels"),
            "seconds": seconds,
            "layers": [{"name": s.name, "op": s.op, "kernels": s.kernels, "cycles": s.cycles,
                        "tensor_busy": s.tensor_busy, "macs": s.macs,
                        "seconds": round(s.seconds, 1)} for s in res.layers]}


def run(args):
    import sys
    import frontend
    from kernels.backends import fast_backend
    backends = args.backends.split(",")
    names = args.models.split(",")
    dtypes = args.dtypes.split(",")
    config = frontend.default_config()
    if "rtl" in backends and fast_backend() is None:
        print("models: fastsim is not available; rtl left out", file=sys.stderr)
        backends = [b for b in backends if b != "rtl"]
    cases = _cases(names, args.quick)
    out = {"config": config.to_dict(), "backends": backends, "models": {}}
    if "squeezenet" in names:
        out["squeezenet"] = {d: squeezenet(backends[0], progress=sys.stderr, dtype=d)
                             for d in dtypes}
    for name, case in cases.items():
        rec = {"what": case["what"]}
        if name == "digits":
            rec["test_images"] = case["images"]
            rec["accuracy_fp32_onnxruntime"] = case["digits"].accuracy(case["ref"])
            rec["accuracy_fp32_sklearn_all_450"] = case["digits"].sklearn_accuracy
            rec["accuracy_int8_onnxruntime"] = case["digits"].accuracy(case["ref_int8"])
        outputs = {}
        for backend in backends:
            rec[backend] = {}
            for dtype in dtypes:
                print(f"models: {name} {backend} {dtype} ...", file=sys.stderr, flush=True)
                r, y = _one(name, case, backend, dtype, config)
                if backend == "rtl" and dtype in outputs:
                    r["bit_exact_with_refsim"] = bool(np.array_equal(
                        np.asarray(y).view(np.uint8), np.asarray(outputs[dtype]).view(np.uint8)))
                outputs.setdefault(dtype, y)
                rec[backend][dtype] = r
                print(f"models: {name} {backend} {dtype}: {r}", file=sys.stderr, flush=True)
        out["models"][name] = rec
    return out
