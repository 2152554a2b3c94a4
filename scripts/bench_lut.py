"""LUT accuracy benchmark: ``python -m scripts.bench lut [--json] [--quick]``.

For every shipped function (``sim/tables.py``) and table size (the default core's
``lut_entries`` and 128, 256, 512; ``default`` in the record summarises the first), runs the bit-exact golden model
(``sim.vector.lut_eval``, then RNE encoding to BF16 with ``sim.rounding.encode``) on every
finite, normal BF16 input in the function's domain and compares with the correctly rounded BF16
value of the float64 reference (``ml_dtypes``). Reported per function and size: entries used,
maximum error in BF16 ULPs, fraction exact, fraction within 1 ULP and within 2 ULP, maximum
relative error of the FP32 result, and whether the goal (>= 99% within 1 ULP, 100% within 2)
is met. Subnormal inputs are excluded: FP32 arithmetic is DAZ (docs/interfaces.md).

``--resources`` adds ECP5 cell counts of a 1-lane and an 8-lane engine (``depth=512``, all
formats; ``scripts.synth.ecp5_resources``: yosys ``synth_ecp5``, no place and route, cached in
``build/synth``; the 8-lane synthesis takes tens of minutes the first time) and how they compare
with an LFE5U-85F.
"""

import json

import ml_dtypes
import numpy as np

__all__ = ["run", "add_arguments", "measure", "resources"]

def _default_entries():
    from sim.config import CoreConfig
    return CoreConfig().lut_entries


#: Table budgets measured: the default core's ``lut_entries`` and the documented 128 - 512.
DEFAULT_ENTRIES = _default_entries()
SIZES = tuple(sorted({DEFAULT_ENTRIES, 128, 256, 512}))

#: LFE5U-85F capacity: LUT4 sites (a CCU2C takes two), multipliers, 18 kbit block RAMs.
ECP5_85F = {"LUT4": 83640, "MULT18X18D": 156, "DP16KD": 208, "TRELLIS_FF": 83640}


def add_arguments(parser):
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated table budgets (entries)")
    parser.add_argument("--functions", default="", help="comma-separated subset")
    parser.add_argument("--resources", action="store_true",
                        help="also synthesize an 8-lane engine for ECP5 (slow)")


def resources(lanes=(1, 8)):
    """ECP5 cell counts of ``VectorEngine(lanes=n)`` for each ``n``, with the fraction of an
    LFE5U-85F they take (``LUT4 + 2 * CCU2C`` against its LUT4 sites)."""
    from rtl.vector.engine import VectorEngine
    from scripts.synth import ecp5_resources
    out = {}
    for n in lanes:
        counts = ecp5_resources(lambda: VectorEngine(lanes=n), f"vector{n}")
        luts = counts.get("LUT4", 0) + 2 * counts.get("CCU2C", 0)
        use = {"LUT4+2*CCU2C": luts / ECP5_85F["LUT4"]}
        for cell in ("MULT18X18D", "DP16KD", "TRELLIS_FF"):
            use[cell] = counts.get(cell, 0) / ECP5_85F[cell]
        out[f"ecp5_{n}_lane" + ("s" if n > 1 else "")] = {
            "cells": counts, "lfe5u_85f_fraction": {k: round(v, 4) for k, v in use.items()},
            "fits_lfe5u_85f": all(v <= 1 for v in use.values())}
    return out


def _bf16_inputs(domain):
    bits = np.arange(1 << 16, dtype=np.uint32)
    exp = (bits >> 7) & 0xFF
    bits = bits[(exp != 0) & (exp != 0xFF)]                       # finite normals
    x = (bits << 16).view(np.float32).astype(np.float64)
    keep = (x >= domain[0]) & (x <= domain[1])
    return (bits[keep] << 16).astype(np.uint32), x[keep]


def _ordered(b16):
    b = b16.astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b & 0x7FFF)


def measure(spec, tab):
    """Accuracy figures of compiled table ``tab`` of ``spec`` (a dict)."""
    from sim.dtypes import Format, RoundMode
    from sim.rounding import encode
    from sim.vector import lut_eval
    zbits, x = _bf16_inputs(spec.domain)
    ref_fn = spec.reference or spec.fn
    with np.errstate(all="ignore"):
        ref = np.asarray(ref_fn(x), dtype=np.float64)
    out, _ = lut_eval(zbits, tab.state())
    got16 = encode(out, Format.BF16, RoundMode.RNE).astype(np.uint32)
    ref16 = ref.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    finite = np.isfinite(ref)
    # FP32 results are FTZ (docs/interfaces.md): a reference below 2**-126 in magnitude can only
    # come out as zero, so such inputs are counted apart rather than as errors.
    ftz = finite & (np.abs(ref) < 2.0 ** -126) & (ref != 0)
    keep = ~ftz
    zbits, x, ref, out, got16, ref16, finite = (t[keep] for t in
                                                (zbits, x, ref, out, got16, ref16, finite))
    ulp = np.abs(_ordered(got16) - _ordered(ref16))
    ulp = np.where(finite | (got16 != ref16), ulp, 0)
    out32 = out.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        rel = np.abs(out32 - ref) / np.maximum(np.abs(ref), 2.0 ** -126)
    rel = rel[finite & np.isfinite(rel)]
    n = len(x)
    r = {
        "entries": int(tab.used), "inputs": int(n), "ftz_excluded": int(ftz.sum()),
        "max_ulp": int(ulp.max()) if n else 0,
        "exact": float(np.mean(ulp == 0)) if n else 1.0,
        "within_1ulp": float(np.mean(ulp <= 1)) if n else 1.0,
        "within_2ulp": float(np.mean(ulp <= 2)) if n else 1.0,
        "max_rel_err_fp32": float(rel.max()) if len(rel) else 0.0,
    }
    r["goal_met"] = r["within_1ulp"] >= 0.99 and r["within_2ulp"] == 1.0
    if n and r["max_ulp"] > 2:
        worst = int(np.argmax(ulp))
        r["worst_input"] = float(x[worst])
    return r


def run(args):
    from sim.lut import compile_table
    from sim.tables import SHIPPED
    sizes = [int(s) for s in str(getattr(args, "sizes", ",".join(map(str, SIZES)))).split(",")]
    if getattr(args, "quick", False):
        sizes = sizes[-1:]
    names = [n for n in getattr(args, "functions", "").split(",") if n] or list(SHIPPED)
    results = {}
    for name in names:
        spec = SHIPPED[name]
        results[name] = {}
        for size in sizes:
            try:
                tab = compile_table(spec, depth=max(SIZES), budget=size)
            except ValueError as exc:
                results[name][str(size)] = {"error": str(exc)}
                continue
            results[name][str(size)] = measure(spec, tab)
            results[name][str(size)]["domain"] = [spec.domain[0], spec.domain[1]]
    out = {"functions": results}
    if DEFAULT_ENTRIES in sizes:
        # The default core's tables: what a program on ``NeuronCore()`` / ``CoreConfig()`` gets.
        at = {n: r[str(DEFAULT_ENTRIES)] for n, r in results.items()
              if "error" not in r[str(DEFAULT_ENTRIES)]}
        out["default"] = {
            "lut_entries": DEFAULT_ENTRIES,
            "goal_met": [n for n, r in at.items() if r["goal_met"]],
            "goal_missed": [n for n, r in at.items() if not r["goal_met"]],
            "worst_within_1ulp": min(r["within_1ulp"] for r in at.values()),
            "max_ulp": {n: r["max_ulp"] for n, r in at.items() if r["max_ulp"] > 1},
        }
    best = {n: r[str(max(sizes))] for n, r in results.items()}
    out["summary"] = {
        "size": max(sizes),
        "goal_met": [n for n, r in best.items() if r.get("goal_met")],
        "goal_missed": [n for n, r in best.items() if not r.get("goal_met")],
    }
    if getattr(args, "resources", False):
        out.update(resources())
    if not getattr(args, "json", False):
        for name, per in results.items():
            for size, r in per.items():
                if "error" in r:
                    print(f"{name:12s} {size:>4s}: {r['error']}")
                    continue
                print(f"{name:12s} {size:>4s}: entries {r['entries']:4d} max {r['max_ulp']:3d} ulp"
                      f"  exact {r['exact']:.4f}  <=1ulp {r['within_1ulp']:.5f}"
                      f"  <=2ulp {r['within_2ulp']:.5f}  rel {r['max_rel_err_fp32']:.2e}"
                      f"  {'ok' if r['goal_met'] else 'MISSED'}")
    return out


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true")
    add_arguments(p)
    a = p.parse_args()
    res = run(a)
    if a.json:
        print(json.dumps(res, indent=1))
