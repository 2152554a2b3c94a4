"""Images and outcomes as JSON, the cocotb executor's wrapper, and the field-by-field
comparison of two outcomes (the bit-exactness checks of ``tests/test_fastsim.py``).

    out = run_cocotb_image(cfg, image, simulator="icarus")      # cocotb_tests/test_image_run
    diff = compare(out, FastCore(cfg).run_image(image))          # [] when bit-exact
"""

import json
import os
import pathlib
import tempfile

from sim.host import ERROR_CLASSES, AcceleratorError
from sim.image import Image, Outcome

__all__ = ["image_to_json", "image_from_json", "outcome_to_json", "outcome_from_json",
           "compare", "run_cocotb_image"]


def image_to_json(image):
    """A JSON-able dict of an :class:`sim.image.Image` (bytes as hex)."""
    return {"program": [int(w) for w in image.program],
            "memory": [[a, bytes(d).hex()] for a, d in image.memory],
            "readback": [list(r) for r in image.readback],
            "microcode": [[a, [int(w) for w in ws]] for a, ws in image.microcode],
            "lut": [[a, [int(w) for w in ws]] for a, ws in image.lut],
            "windows": None if image.windows is None else [list(w) for w in image.windows],
            "seed": image.seed, "watchdog": image.watchdog, "max_cycles": image.max_cycles,
            "pc": image.pc}


def image_from_json(d):
    return Image(program=d["program"], memory=[(a, bytes.fromhex(h)) for a, h in d["memory"]],
                 readback=[tuple(r) for r in d["readback"]],
                 microcode=[(a, ws) for a, ws in d["microcode"]],
                 lut=[(a, ws) for a, ws in d["lut"]],
                 windows=None if d["windows"] is None else [tuple(w) for w in d["windows"]],
                 seed=d["seed"], watchdog=d["watchdog"], max_cycles=d["max_cycles"],
                 pc=d["pc"])


def _error_to_json(err):
    if err is None:
        return None
    return {"code": int(err.code), "address": err.address, "info": err.info,
            "count": getattr(err, "count", 1)}


def _error_from_json(d):
    if d is None:
        return None
    from sim.errors import ErrorCode
    try:
        cls = ERROR_CLASSES.get(ErrorCode(d["code"]), AcceleratorError)
    except ValueError:
        cls = AcceleratorError
    return cls(d["code"], d["address"], d["info"], d["count"])


def outcome_to_json(out):
    return {"memory": [bytes(m).hex() for m in out.memory], "error": _error_to_json(out.error),
            "cycles": out.cycles, "counters": dict(out.counters), "backend": out.backend}


def outcome_from_json(d):
    return Outcome(memory=[bytes.fromhex(m) for m in d["memory"]],
                   error=_error_from_json(d["error"]), cycles=d["cycles"],
                   counters=d["counters"], backend=d["backend"])


def compare(a, b, *, cycles=True):
    """Differences between two outcomes as a list of strings (empty: bit-exact). Memory,
    error (code, address, info, count), and with ``cycles`` the cycle count and counters."""
    diffs = []
    if len(a.memory) != len(b.memory):
        diffs.append(f"readback regions: {len(a.memory)} vs {len(b.memory)}")
    for i, (x, y) in enumerate(zip(a.memory, b.memory)):
        if x != y:
            first = next(k for k in range(min(len(x), len(y)) + 1)
                         if k >= min(len(x), len(y)) or x[k] != y[k])
            diffs.append(f"readback {i}: differs from byte {first}")
    ea, eb = _error_to_json(a.error), _error_to_json(b.error)
    if ea != eb:
        diffs.append(f"error: {ea} vs {eb}")
    if cycles:
        if a.cycles != b.cycles:
            diffs.append(f"cycles: {a.cycles} vs {b.cycles}")
        keys = sorted(set(a.counters) | set(b.counters))
        for k in keys:
            if a.counters.get(k) != b.counters.get(k):
                diffs.append(f"counter {k}: {a.counters.get(k)} vs {b.counters.get(k)}")
    return diffs


def run_cocotb_image(config, image, *, simulator="icarus", latency=0):
    """Run ``image`` on ``config`` under cocotb (``cocotb_tests/test_image_run.py``, AxiRam
    with ``latency`` cycles per beat and no pauses); return its Outcome."""
    from cocotb_tests.common.runner import run_cocotb
    from fastsim.build import _core_factory
    with tempfile.TemporaryDirectory(prefix="fastsim-image-") as tmp:
        src = pathlib.Path(tmp) / "image.json"
        dst = pathlib.Path(tmp) / "outcome.json"
        src.write_text(json.dumps(image_to_json(image)))
        run_cocotb(_core_factory(config), name=f"fastsim-{config.rows}x{config.cols}",
                   config=config.to_dict(), test_module="cocotb_tests.test_image_run",
                   simulator=simulator,
                   extra_env={"IMAGE_FILE": str(src), "OUTCOME_FILE": str(dst),
                              "IMAGE_LATENCY": str(latency)})
        out = outcome_from_json(json.loads(dst.read_text()))
    out.backend = f"cocotb-{simulator}"
    return out
