"""The ONNX package's own test cases, run on the core: external tests no one here wrote.

* ``node_cases()``: the per-operator node cases (``onnx.backend.test.case.node``), each a
  one-node (or expanded function) model with inputs and expected outputs;
* ``model_cases(kind)``: the model directories shipped under ``onnx/backend/test/data``
  (``pytorch-converted``, ``pytorch-operator``), ``model.onnx`` with ``test_data_set_*``.

``run_case`` imports a case (refused models are reported as such, with the reason) and checks
every data set with :func:`frontend.tolerance.check_close`. ``python -m frontend conformance``
runs them all and prints a summary per operator.
"""

import dataclasses
import glob
import os
import warnings

import numpy as np

__all__ = ["Case", "node_cases", "model_cases", "run_case", "summary", "meets_onnx_tolerance",
           "ONNX_RTOL", "ONNX_ATOL"]


@dataclasses.dataclass
class Case:
    """``name``, ``model`` (``onnx.ModelProto``), ``data_sets`` (list of (inputs, outputs))."""

    name: str
    model: object
    data_sets: list


def node_cases():
    """Every node test case of the installed ``onnx`` package."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return [Case(c.name, c.model, [(list(i), list(o)) for i, o in c.data_sets])
            for c in cases if c.model is not None]


def _read_pb(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def model_cases(kind="pytorch-converted"):
    """The model cases of ``onnx/backend/test/data/<kind>``."""
    import onnx
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", kind)
    out = []
    for d in sorted(glob.glob(os.path.join(root, "test_*"))):
        path = os.path.join(d, "model.onnx")
        if not os.path.exists(path):
            continue
        sets = []
        for s in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
            ins = [_read_pb(p) for p in sorted(glob.glob(os.path.join(s, "input_*.pb")))]
            outs = [_read_pb(p) for p in sorted(glob.glob(os.path.join(s, "output_*.pb")))]
            sets.append((ins, outs))
        out.append(Case(os.path.basename(d), onnx.load(path), sets))
    return out


def _ops(case):
    return [n.op_type for n in case.model.graph.node if n.op_type != "Constant"]


#: The ONNX backend test runner's default tolerance (``onnx.backend.test.runner``): what an
#: FP32 backend meets.
ONNX_RTOL, ONNX_ATOL = 1e-3, 1e-7


def meets_onnx_tolerance(got, expected):
    """Whether ``got`` is within the ONNX backend tests' own FP32 tolerance of ``expected``
    (integers: equal)."""
    got, exp = np.asarray(got), np.asarray(expected)
    if got.shape != exp.shape:
        return False
    if exp.dtype.kind in "iub":
        return bool(np.array_equal(got, exp))
    return bool(np.allclose(got.astype(np.float64), exp.astype(np.float64), rtol=ONNX_RTOL,
                            atol=ONNX_ATOL, equal_nan=True))


def run_case(case, *, backend="refsim", dtype="bf16", config=None, record=None, **options):
    """``("refused", reason)``, ``("fail", message)`` or ``("pass", None)``; with a dict
    ``record``, ``record["onnx_tolerance"]`` says whether every output also met the ONNX
    tests' FP32 tolerance (:data:`ONNX_RTOL`, :data:`ONNX_ATOL`)."""
    import frontend
    try:
        model = frontend.Model(case.model)
    except frontend.UnsupportedModel as e:
        return "refused", "; ".join(f"{op}: {why}" for op, _, why in e.problems)
    except frontend.ModelError as e:
        return "refused", f"malformed: {e}"
    strict = True
    for k, (ins, outs) in enumerate(case.data_sets):
        feed = dict(zip(model.inputs, ins))
        result = model.run(feed, backend=backend, dtype=dtype, config=config, **options)
        producers = {o: n for n in model.plan.nodes for o in n.outputs}
        for name, exp in zip(model.outputs, outs):
            node = producers.get(name)
            # The bound of the operator that produced the output; in a model of several
            # operators, the loosest of them (errors propagate).
            ops = sorted({n.op for n in model.plan.nodes}) or ["Identity"]
            op = node.op if node is not None and len(ops) == 1 else frontend.tolerance.loosest(
                ops, node.op if node is not None else "Identity")
            args = [result.values.get(v) for v in node.inputs if v] if node is not None else []
            why = frontend.tolerance.check_close(
                op, result.outputs[name], exp, inputs=[a for a in args if a is not None],
                dtype=dtype, attrs=node.attrs if node is not None else {})
            if why is not None:
                return "fail", f"data set {k}, output {name}: {why}"
            strict = strict and meets_onnx_tolerance(result.outputs[name], exp)
    if record is not None:
        record["onnx_tolerance"] = strict
    return "pass", None


def summary(cases, **kwargs):
    """Run ``cases``; a JSON-able dict with counts and, per case, the verdict."""
    per = {}
    for c in cases:
        rec = {}
        try:
            verdict, why = run_case(c, record=rec, **kwargs)
        except Exception as e:      # a crash is a failure with its message, not an abort
            verdict, why = "fail", f"{type(e).__name__}: {e}"
        per[c.name] = {"verdict": verdict, "why": why, "ops": sorted(set(_ops(c))), **rec}
    counts = {v: sum(1 for r in per.values() if r["verdict"] == v)
              for v in ("pass", "fail", "refused")}
    return {"counts": counts, "cases": per}
