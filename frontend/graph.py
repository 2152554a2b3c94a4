"""Loading, checking and planning an ONNX model before anything runs.

``load`` returns a checked ``onnx.ModelProto`` (a malformed model raises :class:`ModelError`
with the ONNX checker's message); ``plan`` walks the graph in order and refuses, before any
simulation starts, every node whose operator or attributes the core cannot run
(:class:`UnsupportedModel`, naming each such node's operator and name and listing the
supported operators).
"""

import dataclasses
import os

__all__ = ["ModelError", "UnsupportedModel", "Node", "Plan", "GraphInfo", "load", "plan"]


class ModelError(ValueError):
    """The file is not a valid ONNX model (the message is the ONNX checker's)."""


class UnsupportedModel(ValueError):
    """The model uses operators (or operator attributes) the core cannot run.

    Members
    -------
    problems : list of (str, str, str)
        ``(op_type, node name, reason)`` for every refused node.
    """

    def __init__(self, problems, supported):
        self.problems = problems
        lines = [f"  {op} (node '{name}'): {why}" for op, name, why in problems]
        super().__init__("the model cannot run on the core:\n" + "\n".join(lines) +
                         "\nsupported operators: " + ", ".join(sorted(supported)))


@dataclasses.dataclass
class Node:
    """One node of the plan: ``op``, ``name``, ``inputs``/``outputs`` (value names; ``""`` is
    an omitted optional input), ``attrs`` (a plain dict), ``index`` in graph order and
    ``opset``, the model's version of the default domain (``None``: not imported), for
    operators whose meaning changed between versions."""

    op: str
    name: str
    inputs: list
    outputs: list
    attrs: dict
    index: int
    opset: int = None


@dataclasses.dataclass
class Plan:
    """A runnable model: ``nodes`` in order, ``inputs`` (graph input names, initializers
    excluded), ``outputs``, ``constants`` (initializers and Constant nodes as numpy arrays)."""

    nodes: list
    inputs: list
    outputs: list
    constants: dict
    name: str


def load(model):
    """A checked ``onnx.ModelProto`` from a path, bytes or a ``ModelProto``."""
    import onnx
    try:
        if isinstance(model, onnx.ModelProto):
            proto = model
        elif isinstance(model, (bytes, bytearray)):
            proto = onnx.load_model_from_string(bytes(model))
        else:
            path = os.fspath(model)
            if not os.path.exists(path):
                raise ModelError(f"model file {path!r} does not exist")
            proto = onnx.load(path)
    except ModelError:
        raise
    except Exception as e:      # protobuf's DecodeError and friends
        raise ModelError(f"cannot parse the model: {e}") from None
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as e:
        raise ModelError(f"the ONNX checker rejects the model: {e}") from None
    return proto


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class GraphInfo(dict):
    """What a check sees: the constants (a dict: initializers and Constant nodes) and
    ``shapes``, the declared or inferred shape of every value that has one (a dimension is an
    int, or None where it is symbolic)."""

    def __init__(self, constants, shapes, types):
        super().__init__(constants)
        self.shapes = shapes
        self.types = types

    def dtype(self, name):
        """The numpy dtype of value ``name`` when known, else None."""
        if name in self:
            import numpy as np
            return np.asarray(self[name]).dtype
        return self.types.get(name)

    def size(self, name):
        """Elements of value ``name`` when its shape is known, else None."""
        if name in self:
            import numpy as np
            return int(np.asarray(self[name]).size)
        shape = self.shapes.get(name)
        if shape is None or any(d is None for d in shape):
            return None
        n = 1
        for d in shape:
            n *= d
        return n


def _shapes(proto):
    import onnx
    try:
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception:       # inference is a help for the checks, not a requirement
        pass
    import numpy as np
    from onnx import helper
    g = proto.graph
    shapes, types = {}, {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            shapes[v.name] = [d.dim_value if d.HasField("dim_value") else None
                              for d in t.shape.dim]
        try:
            types[v.name] = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))
        except Exception:
            pass
    return shapes, types


def plan(proto, supported):
    """Check every node against ``supported`` (``{op_type: check(node, info) -> reason or
    None}``, ``info`` a :class:`GraphInfo`) and return a :class:`Plan`; raise
    :class:`UnsupportedModel` listing every refused node."""
    import numpy as np
    from onnx import numpy_helper
    g = proto.graph
    constants = GraphInfo({t.name: numpy_helper.to_array(t) for t in g.initializer},
                          *_shapes(proto))
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    nodes, problems = [], []
    for i, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{i}"
        node = Node(n.op_type, name, list(n.input), list(n.output), _attrs(n), i, opset)
        if n.domain not in ("", "ai.onnx"):
            problems.append((n.op_type, name, f"domain {n.domain!r} is not supported"))
            continue
        if n.op_type == "Constant":
            value = node.attrs.get("value")
            if value is None:
                problems.append((n.op_type, name, "only the 'value' attribute is supported"))
                continue
            constants[n.output[0]] = numpy_helper.to_array(value)
            continue
        if n.op_type == "ConstantOfShape" and n.input[0] in constants:
            # Folded at import: a constant whose shape is known.
            value = node.attrs.get("value")
            v = (numpy_helper.to_array(value).reshape(()) if value is not None
                 else np.float32(0))
            constants[n.output[0]] = np.full(
                [int(d) for d in np.asarray(constants[n.input[0]]).tolist()], v, v.dtype)
            continue
        check = supported.get(n.op_type)
        if check is None:
            problems.append((n.op_type, name, "operator not supported"))
            continue
        why = check(node, constants)
        wide = [v for v in node.inputs if v and constants.dtype(v) == np.float64]
        if not why and wide:
            why = (f"input {wide[0]!r} is float64; the core computes in FP32 (export the "
                   f"model in float32)")
        if why:
            problems.append((n.op_type, name, why))
            continue
        nodes.append(node)
    if problems:
        raise UnsupportedModel(problems, supported)
    inputs = [v.name for v in g.input if v.name not in constants]
    return Plan(nodes=nodes, inputs=inputs, outputs=[v.name for v in g.output],
                constants=constants, name=g.name or "model")
