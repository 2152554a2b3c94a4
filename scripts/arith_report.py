"""ECP5 resources and post-route Fmax of the arithmetic blocks.

    python -m scripts.arith_report            # yosys synth_ecp5 cell counts of every unit
    python -m scripts.arith_report --fmax     # plus nextpnr-ecp5 (85F) Fmax, minutes per unit
    python -m scripts.arith_report --units fp32_add_s2 fp32_add_s3 --fmax --json

Resources come from ``scripts.synth.ecp5_resources`` (the unit alone). Fmax comes from
``scripts.unit_fmax``: the unit between registers fed by a shift chain (one input pin) with its
registered outputs shifted out through one pin, so every timed path is register to register,
as in a processing element, and the pin count does not matter.
"""

import argparse
import json

from sim.config import ENGINE_FORMATS
from sim.dtypes import Format

__all__ = ["UNITS", "ecp5_fmax", "main"]

#: The processing element's formats: every tensor-engine format.
_PE = ENGINE_FORMATS


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


def ecp5_fmax(factory, name, *, seed=1, freq=100):
    """Post-route Fmax (MHz) of ``factory()`` behind registers on an ECP5-85F
    (``scripts.unit_fmax``, cached under ``build/unit_fmax/``), with nextpnr's critical path."""
    from scripts.unit_fmax import unit_fmax
    res = unit_fmax(factory, f"arith_{name}", freq=freq, seed=seed)
    return {"fmax_mhz": res["fmax_mhz"], "critical_path": res["critical_path"]}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.arith_report", description=__doc__,
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
