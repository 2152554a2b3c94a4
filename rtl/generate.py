"""Emit Verilog for the core or any of its units.

    python -m rtl.generate                      # the default core -> build/verilog/neuroncore.v
    python -m rtl.generate --list               # what can be emitted
    python -m rtl.generate tensor --rows 16 --cols 8 --out build/v --name te16x8

Beside each ``<name>.v`` it writes ``<name>.json``: the component, its configuration and its
top-level ports (name, direction, width), plus anything the component's ``describe()`` returns
(the core adds its memory map). Invalid options exit with status 2 and a one-line message.
"""

import argparse
import importlib
import inspect
import json
import os
import pathlib
import sys

from amaranth.hdl import Value

from sim.config import ENGINE_FORMATS
from sim.dtypes import Format

__all__ = ["COMPONENTS", "build_component", "describe_ports", "main"]

#: name -> (module, class, one-line description, default constructor arguments). Imported
#: lazily so that one unit's absence or breakage does not stop the others from being emitted.
COMPONENTS = {
    "core": ("rtl.core.top", "NeuronCore", "the whole core: engines, SBUF/PSUM, sequencer, AXI", {}),
    "tensor": ("rtl.tensor.engine", "TensorEngine", "weight-stationary systolic array + skew",
               {"rows": 8, "cols": 8}),
    "array": ("rtl.tensor.array", "SystolicArray", "the PE grid alone",
              {"rows": 8, "cols": 8, "formats": ENGINE_FORMATS}),
    "pe": ("rtl.tensor.pe", "ProcessingElement", "one double-buffered processing element",
           {"formats": ENGINE_FORMATS}),
    "psum": ("rtl.tensor.psum", "PSUM", "PSUM accumulator banks", {"cols": 8, "depth": 512}),
    "vector": ("rtl.vector.engine", "VectorEngine", "vector/activation engine with LUT",
               {"lanes": 8}),
    "lut": ("rtl.vector.lut", "Lut", "the programmable activation LUT", {"lanes": 8}),
    "rounding": ("rtl.round.rounding_unit", "RoundingUnit", "multi-lane RNE/RTZ/SR rounding", {}),
    "encoder": ("rtl.round.encoder", "FPEncoder", "FP32 to narrow format encoder", {}),
    "prng": ("rtl.round.prng", "Prng", "one lane's XORWOW generator", {}),
    "decoder": ("rtl.arith.decoder", "FormatDecoder", "narrow format to FP32 decoder", {}),
    "fp_mul": ("rtl.arith.fp_mul", "FPMultiplier", "exact narrow-format multiplier", {}),
    "fp32_add": ("rtl.arith.fp32_add", "FP32Adder", "FP32 adder, RNE", {}),
    "fp32_mul": ("rtl.arith.fp32_mul", "FP32Multiplier", "FP32 multiplier, RNE", {}),
    "int_mac": ("rtl.arith.int_mac", "IntMAC", "INT8 multiply, INT32 accumulate", {}),
    "sequencer": ("rtl.control.sequencer", "Sequencer", "microcoded control sequencer", {}),
    "sbuf": ("rtl.core.sbuf", "SBUF", "state buffer partitions", {"partitions": 8, "depth": 256}),
    "axi_lite": ("rtl.bus.axi_lite", "AXI4LiteRegisters", "AXI4-Lite register slave", {}),
    "dma": ("rtl.dma.dma", "DMA", "AXI4 master DMA with address windows",
            {"partitions": 8, "sbuf_depth": 256}),
    "watchdog": ("rtl.core.watchdog", "Watchdog", "programmable cycle-limit watchdog", {}),
    "uart_bridge": ("rtl.bus.uart_bridge", "UartBridge", "UART to AXI4-Lite bridge",
                    {"divisor": 217}),
}

#: CLI option -> constructor parameter names it may fill (first match wins).
OPTIONS = {
    "rows": ("rows",),
    "cols": ("cols",),
    "lanes": ("lanes", "partitions"),
    "sbuf_depth": ("sbuf_depth",),
    "psum_depth": ("psum_depth",),
    "depth": ("depth",),
    "pmem_depth": ("pmem_depth",),
    "stages": ("stages",),
    "n_rand": ("n_rand",),
    "formats": ("formats",),
    "divisor": ("divisor",),
    "lut_entries": ("lut_entries",),
    "dma_windows": ("dma_windows",),
    "add_stages": ("tensor_add_stages", "add_stages"),
    "mul_stages": ("tensor_mul_stages", "mul_stages"),
}


class GenerateError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option gives one line on stderr (no usage block) and status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {value}")
    return value


def _formats(text):
    names = [n.strip().upper() for n in text.split(",") if n.strip()]
    allowed = ", ".join(f.name.lower() for f in Format)
    out = []
    for n in names:
        if n not in Format.__members__:
            raise argparse.ArgumentTypeError(f"unknown format {n.lower()!r}; allowed: {allowed}")
        out.append(Format[n])
    if not out:
        raise argparse.ArgumentTypeError(f"needs at least one format; allowed: {allowed}")
    return out


def _load(name):
    module, cls, _, _ = COMPONENTS[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise GenerateError(f"component {name!r} is not available ({module}.{cls}: {exc})")


def build_component(name, options):
    """Instantiate component ``name`` with the CLI ``options`` it accepts (a dict option->value,
    None meaning unset). Raises GenerateError for an option that does not apply."""
    if name not in COMPONENTS:
        raise GenerateError(f"component must be one of {', '.join(COMPONENTS)}, not {name!r}")
    cls = _load(name)
    params = inspect.signature(cls.__init__).parameters
    kwargs = dict(COMPONENTS[name][3])
    for option, value in options.items():
        if value is None:
            continue
        target = next((p for p in OPTIONS[option] if p in params), None)
        if target is None:
            accepted = [o for o, ps in OPTIONS.items() if any(p in params for p in ps)]
            raise GenerateError(
                f"option --{option.replace('_', '-')} does not apply to {name!r}; it accepts: "
                + (", ".join("--" + a.replace("_", "-") for a in accepted) or "no options"))
        kwargs[target] = value
    try:
        return cls(**kwargs), kwargs
    except (TypeError, ValueError) as exc:
        raise GenerateError(str(exc).splitlines()[0])


def describe_ports(component):
    """List the top-level ports of ``component`` as generated: name, direction, width."""
    ports = []
    for path, member, value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        ports.append({"name": name, "dir": "in" if member.flow.value == "In" else "out",
                      "width": len(Value.cast(value))})
    return ports


def main(argv=None):
    parser = _Parser(
        prog="python -m rtl.generate",
        description="Emit readable Verilog (and a JSON description) for the core or one unit.")
    parser.add_argument("component", nargs="?", default="core",
                        help="what to emit (default: core); see --list")
    parser.add_argument("--list", action="store_true", help="list the components and exit")
    parser.add_argument("--out", default="build/verilog", help="output directory (build/verilog)")
    parser.add_argument("--name", help="module and file name (default: neuroncore or the component)")
    parser.add_argument("--rows", type=_positive, help="tensor array rows (K, SBUF partitions)")
    parser.add_argument("--cols", type=_positive, help="tensor array columns (M, PSUM partitions)")
    parser.add_argument("--lanes", type=_positive, help="vector/rounding lanes")
    parser.add_argument("--sbuf-depth", type=_positive, help="SBUF words per partition")
    parser.add_argument("--psum-depth", type=_positive, help="PSUM words per partition")
    parser.add_argument("--stages", type=_positive, help="pipeline stages of an arithmetic unit")
    parser.add_argument("--n-rand", type=_positive, help="random bits for stochastic rounding")
    parser.add_argument("--depth", type=_positive, help="memory depth of a unit (psum, lut, sbuf)")
    parser.add_argument("--pmem-depth", type=_positive, help="sequencer program memory words")
    parser.add_argument("--lut-entries", type=_positive, help="activation LUT entries per bank")
    parser.add_argument("--dma-windows", type=_positive, help="DMA address windows (core)")
    parser.add_argument("--add-stages", type=_positive,
                        help="FP adder stages of the tensor PEs (core, tensor, array, pe, psum)")
    parser.add_argument("--mul-stages", type=_positive,
                        help="multiplier stages of the tensor PEs (core, tensor, array, pe)")
    parser.add_argument("--divisor", type=_positive, help="UART clock divisor (uart_bridge)")
    parser.add_argument("--formats", type=_formats,
                        help="comma-separated formats, e.g. int8,bf16,fp8_e4m3")
    # One-line errors, no traceback: argparse already exits 2 with "prog: error: ...".
    args = parser.parse_args(argv)
    if args.list:
        width = max(map(len, COMPONENTS))
        for name, (module, cls, doc, _) in COMPONENTS.items():
            try:
                importlib.import_module(module)
                state = ""
            except Exception:
                state = "  (not available in this checkout)"
            print(f"{name:<{width}}  {doc} [{module}.{cls}]{state}")
        return 0
    options = {k: getattr(args, k) for k in OPTIONS}
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    try:
        component, kwargs = build_component(args.component, options)
        from amaranth.back import verilog
        name = args.name or ("neuroncore" if args.component == "core" else args.component)
        if not name.isidentifier():
            raise GenerateError(f"name must be a Verilog identifier, not {name!r}")
        text = verilog.convert(component, name=name, emit_src=False)
        ports = describe_ports(component)
    except GenerateError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.v").write_text(text)
    desc = {"component": args.component, "module": name,
            "class": f"{COMPONENTS[args.component][0]}.{COMPONENTS[args.component][1]}",
            "config": {k: (v if not isinstance(v, list) else [f.name.lower() for f in v])
                       for k, v in kwargs.items()},
            "ports": ports}
    if hasattr(component, "describe"):
        desc.update(component.describe())
    (out / f"{name}.json").write_text(json.dumps(desc, indent=2, default=str))
    print(f"wrote {out / (name + '.v')} ({len(text.splitlines())} lines) and {name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
