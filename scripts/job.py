"""One job of a sweep, run alone: ``python -m scripts.job <kind> --seed N [options] [--json]``.

A job is a pure function of its inputs (the kind, its parameters, the seed) and of the checkout's
commit, to one JSON record. ``scripts.sweep`` runs many of them on a Dask cluster by running
this very command on a worker, so a job reproduced by hand, in a CI matrix or on a cluster
executes the same thing.

    python -m scripts.job fuzz --seed 7 --count 200            # 200 random programs
    python -m scripts.job regress --config core2 --fmt fp16 --seed 3
    python -m scripts.job fpga-seeds --board ulx3s --config demo --seed 2
    python -m scripts.job noop --seed 0 --seconds 0.5          # scheduling-overhead probe

Kinds:

``fuzz``
    With the fast backend (``fastsim.fuzz.run(config, seed, count)``) when it is importable and
    Verilator is there (``--backend auto``, or ``fastsim`` to insist on it); otherwise (or
    ``--backend refsim``)
    random programs (``cocotb_tests.test_sequencer_progs.random_program``, program
    seeds ``seed * 100000 + i``) on the reference simulator (``sim/refsim.py``) against the
    microcode's cycle model (``sim/cycles.py``): registers, semaphores, flags, error, PC,
    retired count and every engine's record trace must agree. Where the race checker
    (``sim/races.py``) is importable, the programs it flags are counted.
``regress``
    One cell of the configuration x format x seed matrix: ``count`` tiled GEMMs (random K and M
    tiles, N, and operand mode normal/special/wide) on the reference simulator of a
    ``CoreConfig`` preset, bit-exact against the tensor engine's golden model
    (``sim.tensor.matmul`` per K tile, PSUM accumulation in FP32/INT32); with ``--fastsim`` the
    same images also run on the Verilator model (``fastsim.FastCore``) and must match.
``fpga-seeds``
    One nextpnr seed of ``python -m fpga.build`` in its own build directory (``--out``, default
    ``build/sweep/fpga/<board>-<config>-seed<N>``); the record is the build's report.
``noop``
    Sleeps ``seconds``; ``--fail`` makes it fail every time, ``--fail-once PATH`` only while
    ``PATH`` does not exist (it creates it): the probes of the sweep's retry path.

Exit status: 0 the job passed, 1 it ran and a check failed (the record says which) or it raised
(the traceback is on stderr and no record is printed), 2 bad arguments.
"""

import argparse
import json
import pathlib
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]

__all__ = ["KINDS", "PARAMS", "argv", "check", "run", "summarize", "main"]

#: Program seeds of fuzz job ``seed``: ``seed * FUZZ_STRIDE + i`` for ``i < count``.
FUZZ_STRIDE = 100_000
#: Operand modes of ``sim.tensor.random_operands`` that the regress GEMMs draw from.
REGRESS_MODES = ("normal", "special", "wide")


def _race_checker():
    """``sim.races`` once the reference simulator takes ``races=True``, else None."""
    import inspect
    from sim.refsim import RefSim
    try:
        from sim import races
    except ImportError:
        return None
    return races if "races" in inspect.signature(RefSim).parameters else None


def _fuzz(seed, config="core4", count=200, length=40, backend="auto"):
    from sim.config import CoreConfig
    cfg = CoreConfig.preset(config)
    fast_fuzz = None
    if backend != "refsim":
        try:
            import fastsim
            from fastsim import fuzz as fast_fuzz
        except ImportError:
            if backend == "fastsim":
                raise
        if fast_fuzz is not None and backend == "auto" and not fastsim.available():
            fast_fuzz = None
    if fast_fuzz is not None:
        result = dict(fast_fuzz.run(cfg, seed, count))
        return {"backend": "fastsim", **result}, not result.get("mismatches")
    from cocotb_tests.test_sequencer_progs import random_program
    from sim.asm import assemble
    from sim.cycles import MicroSim
    from sim.isa import Engine
    from sim.refsim import RefSim
    races = _race_checker()
    mismatches, errors, racy, retired = [], 0, 0, 0
    for i in range(count):
        pseed = seed * FUZZ_STRIDE + i
        words = assemble(random_program(pseed, length=length))
        ref = RefSim(words, execute=False, pmem_depth=cfg.pmem_depth).run(100_000)
        mic = MicroSim(words, pmem_depth=cfg.pmem_depth).run()
        diff = [k for k in ("regs", "sems", "error", "err_pc", "pc", "retired", "flags")
                if getattr(ref, k) != getattr(mic, k)]
        diff += [f"trace {e.name}" for e in Engine if ref.trace[e] != mic.trace[e]]
        if diff:
            mismatches.append({"program_seed": pseed, "fields": diff})
        errors += bool(ref.error)
        retired += ref.retired
        if races is not None and races.check_program(cfg, words, check=False):
            racy += 1
    result = {"backend": "refsim+microsim", "programs": count, "first_program_seed":
              seed * FUZZ_STRIDE, "ended_in_error": errors, "retired": retired,
              "mismatches": mismatches}
    if races is not None:
        result["racy_programs"] = racy
    return result, not mismatches


def _gemm_text(cfg, fmt, KT, MT, N, eb, exts):
    from cocotb_tests.common.core_env import gemm_program
    from sim.dtypes import Format
    text = gemm_program(P=cfg.rows, C=cfg.cols, KT=KT, MT=MT, N=N, fmt=fmt.name.lower(), eb=eb,
                        w_ext=exts[0], x_ext=exts[1], o_ext=exts[2])
    if fmt == Format.INT8:
        # INT8 products accumulate in INT32: copy and store them as INT32, not FP32.
        text = text.replace("in_fmt=fp32, out_fmt=fp32", "in_fmt=int32, out_fmt=int32")
        text = text.replace("fmt=fp32, sem=3", "fmt=int32, sem=3")
    return text


def _regress(seed, config="core4", fmt="bf16", count=8, fastsim=False):
    import numpy as np
    from sim import formats, tensor
    from sim.asm import assemble
    from sim.config import CoreConfig
    from sim.dtypes import Format
    from sim.image import Image, run_refsim
    cfg = CoreConfig.preset(config)
    f = Format[fmt.upper()]
    core = None
    if fastsim:
        import fastsim as fast
        core = fast.FastCore(cfg)
    P, C = cfg.rows, cfg.cols
    eb = 1 if f in (Format.INT8, Format.FP8_E4M3, Format.FP8_E5M2, Format.FP8_E3M4) else 2
    dtype = np.uint8 if eb == 1 else np.uint16
    rng = np.random.default_rng([seed, int(f), P, C])
    cases, bad = [], []
    try:
        for i in range(count):
            KT, MT = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            N = int(rng.integers(1, 17))
            while KT * MT * C + KT * N + MT * N > cfg.sbuf_depth or MT * N > cfg.psum_depth:
                N -= 1
            mode = REGRESS_MODES[int(rng.integers(len(REGRESS_MODES)))]
            K, M = KT * P, MT * C
            w = tensor.random_operands(rng, f, (K, M), mode)
            x = tensor.random_operands(rng, f, (K, N), mode)
            exts = (0x1000, 0x1000 + K * M * eb, 0x1000 + K * (M + N) * eb)
            image = Image(program=assemble(_gemm_text(cfg, f, KT, MT, N, eb, exts)),
                          memory=[(exts[0], w.astype(dtype).tobytes()),
                                  (exts[1], x.astype(dtype).tobytes())],
                          readback=[(exts[2], M * N * 4)])
            out = run_refsim(cfg, image)
            expect = None
            for t in range(KT):
                p = tensor.matmul(w[t * P:(t + 1) * P], x[t * P:(t + 1) * P], f, rows=P)
                add = formats.int32_add if f == Format.INT8 else formats.fp32_add
                expect = p if expect is None else add(expect, p)
            got = np.frombuffer(out.memory[0], dtype=np.uint32).reshape(M, N)
            case = {"K": K, "M": M, "N": N, "mode": mode,
                    "mismatches": int((got != expect.astype(np.uint32)).sum())}
            if out.error is not None:
                case["error"] = str(out.error)
            if core is not None:
                fast = core.run_image(image)
                case["fastsim_equal"] = fast.memory == out.memory and \
                    str(fast.error) == str(out.error)
            cases.append(case)
            if case["mismatches"] or "error" in case or case.get("fastsim_equal") is False:
                bad.append(i)
    finally:
        if core is not None:
            core.close()
    return {"backend": "refsim" + ("+fastsim" if core is not None else ""), "cases": cases,
            "failed_cases": bad}, not bad


def _fpga_seeds(seed, board="ulx3s", config="demo", freq=0.0, router="router1",
                build_root=""):
    from fpga import build as fbuild
    root = pathlib.Path(build_root or ROOT / "build" / "sweep" / "fpga" / f"seed{seed}")
    report = fbuild.build(board, config, freq=freq or None, seed=seed, router=router,
                          root=root, quiet=True)
    report["dir"] = str(fbuild.out_dir(board, config, root))
    return report, report.get("fmax_mhz") is not None


def _noop(seed, seconds=0.0, fail=False, fail_once=""):
    time.sleep(seconds)
    if fail:
        print(f"noop {seed}: failing as asked (--fail)", file=sys.stderr)
        raise RuntimeError("noop job asked to fail")
    if fail_once:
        marker = pathlib.Path(fail_once)
        if not marker.exists():
            marker.write_text("failed once\n")
            print(f"noop {seed}: failing once (--fail-once {marker})", file=sys.stderr)
            raise RuntimeError("noop job asked to fail once")
    return {"slept_s": seconds}, True


#: kind -> its function ``(seed, **params) -> (result dict, passed)``.
KINDS = {"fuzz": _fuzz, "regress": _regress, "fpga-seeds": _fpga_seeds, "noop": _noop}
#: kind -> ``{parameter: (type, default, help)}`` besides ``seed`` (the command's options,
#: ``-`` for ``_`` in their names).
PARAMS = {
    "fuzz": {"config": (str, "core4", "CoreConfig preset"),
             "count": (int, 200, "programs per job"),
             "length": (int, 40, "instructions per random program (about)"),
             "backend": (str, "auto", "auto (fastsim.fuzz where importable), fastsim or "
                                      "refsim")},
    "regress": {"config": (str, "core4", "CoreConfig preset"),
                "fmt": (str, "bf16", "tensor input format"),
                "count": (int, 8, "GEMMs per job"),
                "fastsim": (bool, False, "also run every GEMM on the fast backend")},
    "fpga-seeds": {"board": (str, "ulx3s", "board"),
                   "config": (str, "demo", "the board's payload configuration"),
                   "freq": (float, 0.0, "clock in MHz (0: the configuration's)"),
                   "router": (str, "router1", "nextpnr router"),
                   "build_root": (str, "", "build root (default build/sweep/fpga/seed<N>)")},
    "noop": {"seconds": (float, 0.0, "time to sleep"),
             "fail": (bool, False, "always fail"),
             "fail_once": (str, "", "fail unless this file exists, then create it")},
}


def argv(kind, inputs):
    """The command-line arguments (after ``python -m scripts.job``) of the job ``inputs``
    (``{"seed": N, parameter: value}``); parameters at their default are left out."""
    inputs = check(kind, inputs)
    out = [kind, "--seed", str(int(inputs["seed"]))]
    for name, (typ, default, _) in PARAMS[kind].items():
        value = inputs.get(name, default)
        if value == default:
            continue
        opt = "--" + name.replace("_", "-")
        if typ is bool:
            out.append(opt)
        else:
            out += [opt, str(value)]
    return out


def check(kind, inputs):
    """``inputs`` with every parameter of ``kind`` (defaults filled in), checked: ValueError
    naming the parameter and its allowed values."""
    from sim.config import PRESETS, check_int
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    unknown = set(inputs) - set(PARAMS[kind]) - {"seed"}
    if unknown:
        raise ValueError(f"unknown {kind} parameters: {', '.join(sorted(unknown))}")
    full = {"seed": inputs.get("seed")}
    full.update({k: inputs.get(k, d) for k, (_, d, _) in PARAMS[kind].items()})
    check_int("seed", full["seed"], 1 if kind == "fpga-seeds" else 0, 2**31 - 1)
    if kind in ("fuzz", "regress") and full["config"] not in PRESETS:
        raise ValueError(f"config must be one of {', '.join(PRESETS)}, not {full['config']!r}")
    if kind == "fuzz":
        if full["backend"] not in ("auto", "fastsim", "refsim"):
            raise ValueError(f"backend must be one of auto, fastsim, refsim, "
                             f"not {full['backend']!r}")
        check_int("count", full["count"], 1, FUZZ_STRIDE)
        check_int("length", full["length"], 1, 200)
    if kind == "regress":
        from sim.config import CoreConfig
        names = [f.name.lower() for f in CoreConfig.preset(full["config"]).formats]
        if full["fmt"] not in names:
            raise ValueError(f"fmt must be one of {', '.join(names)}, not {full['fmt']!r}")
        check_int("count", full["count"], 1, 10_000)
    if kind == "fpga-seeds":
        from fpga.build import BOARDS, ROUTERS
        if full["board"] not in BOARDS:
            raise ValueError(f"board must be one of {', '.join(BOARDS)}, not {full['board']!r}")
        if full["router"] not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, "
                             f"not {full['router']!r}")
        if full["freq"] < 0:
            raise ValueError(f"freq must be a positive number of MHz (0: default), "
                             f"not {full['freq']}")
    if kind == "noop" and not 0 <= full["seconds"] <= 86400:
        raise ValueError(f"seconds must be in [0, 86400], not {full['seconds']}")
    return full


def run(kind, inputs):
    """Run one job in this process; return its record: ``kind``, ``inputs`` (every parameter,
    defaults filled in), ``commit``, ``ok``, ``wall_s``, ``result``. Exceptions propagate."""
    from scripts.bench import _commit
    full = check(kind, inputs)
    start = time.monotonic()
    result, ok = KINDS[kind](**full)
    return {"kind": kind, "inputs": full, "commit": _commit(), "ok": bool(ok),
            "wall_s": round(time.monotonic() - start, 3), "result": result}


def summarize(kind, records):
    """Aggregate figures of a sweep's finished job records of ``kind``."""
    res = [r["result"] for r in records if r]
    if kind == "fuzz":
        out = {"programs": sum(r.get("programs", r.get("count", 0)) for r in res),
               "mismatches": [m for r in res for m in r.get("mismatches", [])],
               "backends": sorted({r.get("backend", "?") for r in res})}
        if any("racy_programs" in r for r in res):
            out["racy_programs"] = sum(r.get("racy_programs", 0) for r in res)
        return out
    if kind == "regress":
        return {"gemms": sum(len(r["cases"]) for r in res),
                "failed_cells": [r["inputs"] for r in records if r and not r["ok"]]}
    if kind == "fpga-seeds":
        seeds = sorted(({"seed": r["inputs"]["seed"], "fmax_mhz": r["result"].get("fmax_mhz"),
                         "timing_met": r["result"].get("timing_met")} for r in records if r),
                       key=lambda s: s["seed"])
        done = [s for s in seeds if s["fmax_mhz"] is not None]
        best = max(done, key=lambda s: (s["fmax_mhz"], -s["seed"]), default=None)
        return {"seeds": seeds, "best": best}
    return {}


def _parser():
    parser = argparse.ArgumentParser(prog="python -m scripts.job",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True, metavar="kind")
    for kind, params in PARAMS.items():
        p = sub.add_parser(kind, help=f"one {kind} job")
        p.add_argument("--seed", type=int, required=True, help="the job's seed")
        for name, (typ, default, text) in params.items():
            opt = "--" + name.replace("_", "-")
            if typ is bool:
                p.add_argument(opt, action="store_true", help=text)
            else:
                p.add_argument(opt, type=typ, default=default, help=f"{text} (default {default})")
        p.add_argument("--json", action="store_true", help="print the record as JSON")
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    inputs = {k: v for k, v in vars(args).items() if k not in ("kind", "json")}
    try:
        check(args.kind, inputs)
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        record = run(args.kind, inputs)
    except Exception:
        traceback.print_exc()
        return 1
    if args.json:
        print(json.dumps(record, indent=1, default=str))
    else:
        for key, value in record.items():
            print(f"{key}: {value}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
