"""Command line of the ONNX importer.

    python -m frontend run model.onnx --input x.npy --backend refsim --dtype bf16 -o y.npy
    python -m frontend check model.onnx          # would it run? (nothing is simulated)
    python -m frontend ops                       # the supported operators
    python -m frontend conformance --json        # the onnx package's test cases, a summary

Exit status: 0 on success, 2 for a model that is malformed or uses unsupported operators
(the message names them), 1 for any other error.
"""

import argparse
import json
import sys

import numpy as np


def _parser():
    p = argparse.ArgumentParser(prog="python -m frontend",
                                description="Run ONNX models on the core.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a model")
    r.add_argument("model", help="an .onnx file")
    r.add_argument("--input", "-i", action="append", default=[], metavar="[NAME=]FILE.npy",
                   help="an input as .npy (in graph order, or NAME=FILE); repeat per input")
    r.add_argument("--backend", choices=("refsim", "rtl", "fpga"), default="refsim")
    r.add_argument("--dtype", choices=("bf16", "fp8", "int8"), default="bf16")
    r.add_argument("--config", default="core8",
                   help="core preset of sim.config (core2, core4, core8; default core8)")
    r.add_argument("--port", help="serial port of the board (--backend fpga)")
    r.add_argument("--output", "-o", default="output.npy",
                   help="where the first output goes (.npy); others get _<name> suffixes")
    r.add_argument("--json", action="store_true",
                   help="print the per-layer report as JSON on stdout")
    c = sub.add_parser("check", help="load and plan a model without running it")
    c.add_argument("model")
    sub.add_parser("ops", help="list the supported operators")
    k = sub.add_parser("conformance",
                       help="run the onnx package's node and pytorch test cases")
    k.add_argument("--dtype", choices=("bf16", "fp8", "int8", "all"), default="bf16",
                   help="tensor format of the matrix products, or all three (one record "
                        "per format)")
    k.add_argument("--json", action="store_true", help="print the summary as JSON")
    k.add_argument("--skip", action="append", default=["test_operator_conv"],
                   help="case names to leave out (default: the 68 M MAC test_operator_conv)")
    return p


def _conformance_one(groups, dtype, skip):
    """One format's record: counts per group, per supported operator pass / fail / refused
    and how many of its passing cases also meet the ONNX tests' FP32 tolerance, failures,
    and the passing cases that do not meet it."""
    import collections
    from frontend import conformance as C
    from frontend import supported_ops
    out = {"groups": {}}
    per_op = collections.defaultdict(collections.Counter)
    for name, cases in groups.items():
        cases = [c for c in cases if c.name not in skip]
        print(f"{dtype} {name}: {len(cases)} cases", file=sys.stderr, flush=True)
        s = C.summary(cases, dtype=dtype)
        counts = dict(s["counts"])
        counts["onnx_tolerance"] = sum(1 for r in s["cases"].values() if r.get("onnx_tolerance"))
        out["groups"][name] = counts
        for case, r in s["cases"].items():
            for op in r["ops"] or ["Constant"]:
                per_op[op][r["verdict"]] += 1
                if r.get("onnx_tolerance"):
                    per_op[op]["onnx_tolerance"] += 1
            if r["verdict"] == "fail":
                out.setdefault("failures", {})[case] = r["why"]
            if r["verdict"] == "pass" and not r.get("onnx_tolerance"):
                out.setdefault("beyond_onnx_tolerance", []).append(case)
    out["supported_ops"] = {op: dict(per_op[op]) for op in supported_ops()}
    return out


def _conformance(args):
    import datetime
    from frontend import conformance as C
    groups = {"node": C.node_cases(), "pytorch-converted": C.model_cases("pytorch-converted"),
              "pytorch-operator": C.model_cases("pytorch-operator")}
    dtypes = ("bf16", "fp8", "int8") if args.dtype == "all" else (args.dtype,)
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
           "onnx_tolerance": {"rtol": C.ONNX_RTOL, "atol": C.ONNX_ATOL}, "skipped": args.skip}
    for dtype in dtypes:
        out[dtype] = _conformance_one(groups, dtype, args.skip)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for dtype in dtypes:
            for g, c in out[dtype]["groups"].items():
                print(f"{dtype} {g}: {c['pass']} pass ({c['onnx_tolerance']} within the ONNX "
                      f"tests' FP32 tolerance), {c['fail']} fail, {c['refused']} refused")
    return 0 if not any(out[d].get("failures") for d in dtypes) else 1


def _inputs(model, specs):
    out = {}
    for k, spec in enumerate(specs):
        name, _, path = spec.rpartition("=")
        if not name:
            if k >= len(model.inputs):
                raise SystemExit(f"error: the model takes {len(model.inputs)} input(s), "
                                 f"more given")
            name = model.inputs[k]
        out[name] = np.load(path)
    return out


def _options(args):
    if args.backend != "fpga":
        return {}
    if not args.port:
        raise SystemExit("error: --backend fpga needs --port")
    from fpga.host_serial import BoardMemory, SerialTransport
    from sim.host import SyncHost
    link = SerialTransport.open(args.port)
    return {"host": SyncHost(link, memory=BoardMemory(link))}


def main(argv=None):
    args = _parser().parse_args(argv)
    import frontend
    if args.cmd == "ops":
        print("\n".join(frontend.supported_ops()))
        return 0
    if args.cmd == "conformance":
        return _conformance(args)
    try:
        model = frontend.Model(args.model)
    except (frontend.ModelError, frontend.UnsupportedModel) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.cmd == "check":
        print(f"{args.model}: {len(model.plan.nodes)} nodes, all supported; inputs "
              f"{', '.join(model.inputs)}; outputs {', '.join(model.outputs)}")
        return 0
    from sim.config import CoreConfig
    config = CoreConfig.preset(args.config).replace(pmem_depth=2048, lut_entries=256)
    try:
        result = model.run(_inputs(model, args.input), backend=args.backend, dtype=args.dtype,
                           config=config, progress=sys.stderr, **_options(args))
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    paths = {}
    for k, (name, value) in enumerate(result.outputs.items()):
        path = args.output if k == 0 else args.output.replace(".npy", f"_{name}.npy")
        np.save(path, value)
        paths[name] = path
    if args.json:
        print(json.dumps({"model": args.model, "backend": args.backend, "dtype": args.dtype,
                          "outputs": paths, "cycles": result.cycles,
                          "layers": [dict(name=s.name, op=s.op, kernels=s.kernels,
                                          cycles=s.cycles, tensor_busy=s.busy("tensor"),
                                          vector_busy=s.busy("vector"),
                                          dma_busy=s.busy("dma")) for s in result.layers]},
                         indent=1))
    else:
        print(result.table(), file=sys.stderr)
        for name, path in paths.items():
            print(f"{name} -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
