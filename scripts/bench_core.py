"""Benchmark of the whole core on an 8x8 core: the MLP layer, the attention head and a large
software-pipelined GEMM.

    python -m scripts.bench core [--json] [--quick] [--simulator fastsim|icarus|verilator]
                                 (default: fastsim, the Verilator model with a C++ harness,
                                 where it can be built; else Icarus for mlp/attention and
                                 Verilator + cocotb for gemm_stream)
                                 [--workloads mlp,attention,gemm_stream]
                                 [--kernels NAMES] [--dma-width 32|64|...|512]
                                 [--bounds]

For each workload: total cycles of the program (``PERF_CYCLES``), the tensor engine's busy
fraction (``PERF_TENSOR_BUSY / PERF_CYCLES``: cycles with a matmul anywhere in its controller,
array or PSUM pipeline), the array's streaming fraction (moving columns of all matmul records /
cycles: the cycles in which the array takes a new column, a stricter measure), and DMA bytes
per cycle (``(PERF_DMA_RD_BYTES + PERF_DMA_WR_BYTES) / PERF_CYCLES``).

* ``mlp`` and ``attention`` are the programs of ``cocotb_tests/test_core.py`` (bit-exact
  against the reference simulator in the same run), written for clarity: each phase waits
  for the previous one. They are small (K = 32, M = 16, N = 32; S_k = 16) and DMA-bound.
* ``gemm_stream`` (``cocotb_tests/test_core_profile.py``): K = M = 192, N = 768, BF16 in, FP32
  out, W resident in SBUF, X streamed in double-buffered 32-column chunks, PSUM
  double-buffered, DMA / tensor / vector overlapped. It needs a larger core configuration
  (``stream_config``: SBUF 8192 words, PSUM 2048 words per partition, 2048 instructions).

On fastsim a workload is the same program as a ``sim.image.Image`` (``fastsim.workloads``,
fixed seed 1), checked the same way (refsim for mlp and attention, the float32 emulation for
gemm_stream), with the activity port recorded every cycle by the harness.

``kernels``: the library's kernels (``kernels.bench.workloads``: GEMM, linear + GELU, MLP,
softmax, layer norm, RMS norm, attention head, conv2d, INT8 GEMM and linear, the compiled
streaming GEMM, and the MLP and attention head at compute-dominated sizes), compiled for the
8x8 core and run on fastsim (``rtl``) and on the cycle model with the RTL's engine costs
(``model``); the model also at the widths of ``--widths``. For each: cycles, tensor busy, DMA
bytes per cycle and the roofline, ``max(MACs / (rows * cols), DMA bytes / (dma_data_width /
8))`` cycles, with the fraction of it reached; ``model_error`` is the model's cycles over the
RTL's, minus one.
``--dma-width W`` (above 32) runs every kernel on ``kernels.bench.wide_config(W)`` (the 8x8
core with a ``W``-bit DMA); at every width the kernels lay their tensors out
partition-innermost (``kernels.Layout``). The hand-written workloads get the same roofline from their counters.
``--quick`` runs the kernels on the model only.

``--bounds`` runs only the cycle model (no RTL, no hand-written workload): for each kernel,
its cycles and the cycles of the same program and schedule with engines idealized
(``sim.cycles.BOUNDS``, ``EngineCost.ideal``): ``no_dma`` (the DMA's beats and SBUF cycles in
no time, its per-record and per-burst costs kept), ``no_vector`` (the vector engine's elements
and table pairs in no time, its pipeline kept), ``no_dma_vector`` (both) and ``floor`` (the
tensor engine's moving columns too: the fixed latencies alone). ``floor_fraction`` is the
roofline over the floor, the best fraction of the roofline any bus or engine width could
reach with these latencies (above 1: they alone do not keep it below the roofline; a
compute-bound kernel's bound is then ``no_dma_vector``). ``floor_parts`` (and
``no_dma_vector_parts``) split that run's cycles by what the sequencer does in them: issuing
instructions, waiting for each engine's records, blocked at a full queue, ``RUN_OVERHEAD``.

Each workload's engine timeline goes to the results directory (``--out``, default
``results/``): ``timeline-<workload>.png`` (one lane per engine, busy / waiting / idle) and
``timeline-<workload>.json`` (Chrome trace events, one microsecond per core cycle).
"""

import json
import pathlib

from scripts.profile import ROOT, chrome_trace, core_config, plot, run_workload, summary

#: Workload shapes on an 8x8 core (``--quick``: the 4x4 test core).
SHAPES = {
    8: {"mlp": {"KT": 4, "MT": 2, "N": 32}, "attention": {"KT": 2},
        "gemm_stream": {"KT": 24, "MT": 24, "NC": 32, "NCH": 24, "G": 4}},
    4: {"mlp": {"KT": 2, "MT": 1, "N": 16}, "attention": {"KT": 2},
        "gemm_stream": {"KT": 4, "MT": 4, "NC": 16, "NCH": 4, "G": 2}},
}


def add_arguments(parser):
    parser.add_argument("--simulator", default=None,
                        choices=("fastsim", "icarus", "verilator"),
                        help="simulator for every workload (default: fastsim where it can be "
                             "built; else Icarus for mlp and attention, Verilator + cocotb for "
                             "gemm_stream, whose 480,000 cycles take hours on Icarus)")
    parser.add_argument("--workloads", default="mlp,attention,gemm_stream",
                        help="comma-separated subset of mlp, attention, gemm_stream (or none)")
    parser.add_argument("--shape", default="{}",
                        help='JSON overriding gemm_stream\'s tiling, e.g. \'{"NCH": 8}\'')
    parser.add_argument("--kernels", default=None,
                        help="comma-separated library kernels (kernels.bench workload names; "
                             "default all, 'none' for none)")
    parser.add_argument("--widths", default="128",
                        help="comma-separated DMA widths (bits) the model also runs at")
    parser.add_argument("--dma-width", type=int, default=32,
                        help="DMA width (bits) of the kernels' cores: above 32, every kernel "
                             "runs on kernels.bench.wide_config(width) (default 32: the "
                             "kernels' own cores)")
    parser.add_argument("--bounds", action="store_true",
                        help="only the cycle model: each kernel's cycles with the DMA, the "
                             "vector engine and all engines idealized (sim.cycles.BOUNDS) "
                             "beside its roofline")
    parser.add_argument("--reuse", action="store_true",
                        help="use the run records already in build/ (profile-<workload>-<rows>-"
                             "<simulator>.json, same shape) instead of simulating again")


def busy_windows(rec, length):
    """Tensor busy fraction in consecutive windows of ``length`` cycles of the program (from
    the per-cycle activity samples; the last, partial window is dropped)."""
    bit = rec["fields"].index("tensor")
    s = rec["samples"]
    return [round(sum(x >> bit & 1 for x in s[i:i + length]) / length, 4)
            for i in range(0, len(s) - length + 1, length)]


def _describe(rows, workload, shape):
    if workload == "mlp":
        return (f"gelu(X @ W + b): K={shape['KT'] * rows}, M={shape['MT'] * rows}, "
                f"N={shape['N']}, BF16 in, FP32 accumulate, BF16 out with SR")
    if workload == "gemm_stream":
        return (f"W.T @ X: K={shape['KT'] * rows}, M={shape['MT'] * rows}, "
                f"N={shape['NCH'] * shape['NC']}, BF16 in, FP32 out, software-pipelined "
                f"({shape['NC']}-column chunks, double-buffered SBUF and PSUM)")
    return (f"attention head: Sq={rows}, Sk={shape['KT'] * rows}, d={rows}, BF16, "
            f"softmax via exp/reciprocal tables")


def moving_columns(rows, workload, shape):
    """Moving columns streamed by all matmul records of the workload's program (one array
    cycle each): from the programs' tiling."""
    if workload == "mlp":
        return shape["KT"] * shape["MT"] * shape["N"]
    if workload == "attention":           # S = Q K^T (N = S_k), then KT tiles of P V (N = S_q)
        return shape["KT"] * rows + shape["KT"] * rows
    return shape["KT"] * shape["MT"] * shape["NC"] * shape["NCH"]


def default_simulator(workload):
    """fastsim where it can be built; else Icarus for the small workloads and Verilator +
    cocotb for the long streaming GEMM."""
    import fastsim
    if fastsim.available():
        return "fastsim"
    return "verilator" if workload == "gemm_stream" else "icarus"


FIELDS = ("running", "seq_busy", "dma", "tensor", "vector", "aborting", "seq_wait")


def run_fastsim(workload, rows, shape):
    """The workload on fastsim: a run record like ``scripts.profile.run_workload``'s (the
    activity samples of the program's cycles, the performance counters, the wall time of the
    run, the check's verdict)."""
    import time
    from fastsim import FastCore, workloads
    from fastsim.build import build_info
    from sim.config import CoreConfig
    cfg = core_config(rows, workload, shape)
    config = CoreConfig.from_dict(cfg)
    image, check = workloads.build(workload, config, seed=1, **shape)
    with FastCore(config) as core:
        core.record_activity(True)
        c0, t0 = core.cycle, time.monotonic()
        out = core.run_image(image)
        wall = time.monotonic() - t0
        sim_cycles = core.cycle - c0
        samples = core.activity()
        info = build_info(core.exe)
    check_failed = None
    try:
        check(out)
    except AssertionError as exc:
        check_failed = str(exc)
    if out.error is not None and check_failed is None:
        check_failed = f"the program ended in {out.error}"
    running = [i for i, x in enumerate(samples) if x & 1]
    first, last = (running[0], running[-1]) if running else (0, -1)
    c = out.counters
    perf = {"cycles_lo": out.cycles & 0xFFFFFFFF, "tensor_busy": c["tensor_busy"],
            "vector_busy": c["vector_busy"], "dma_busy": c["dma_busy"],
            "dma_rd_bytes": c["dma_rd_bytes"], "dma_wr_bytes": c["dma_wr_bytes"],
            "instret": c["instret"], "sem_wait": c["sem_wait"]}
    return {"workload": workload, "shape": shape, "seed": 1, "fields": FIELDS, "perf": perf,
            "wall_s": wall, "sim_cycles": sim_cycles, "start": first,
            "samples": samples[first:last + 1], "check_failed": check_failed, "config": cfg,
            "simulator": "fastsim", "build_s": info.get("build_s")}


def run(args):
    if getattr(args, "bounds", False):
        return run_bounds(args)
    rows = 4 if getattr(args, "quick", False) else 8
    sim_arg = getattr(args, "simulator", None)
    wanted = [n for n in getattr(args, "workloads", "mlp,attention,gemm_stream").split(",")
              if n and n != "none"]
    out = {"core": f"{rows}x{rows}", "simulator": sim_arg or "per workload", "workloads": {}}
    for workload in wanted:
        sim = sim_arg or default_simulator(workload)
        shape = dict(SHAPES[rows][workload])
        if workload == "gemm_stream":
            shape.update(json.loads(getattr(args, "shape", "{}")))
        saved = ROOT / "build" / f"profile-{workload}-{rows}-{sim}.json"
        rec = json.loads(saved.read_text()) if getattr(args, "reuse", False) and \
            saved.exists() else None
        if rec is None or {**SHAPES[rows][workload], **rec.get("shape", {})} != shape:
            rec = run_fastsim(workload, rows, shape) if sim == "fastsim" else \
                run_workload(workload, rows, sim, shape)
            if sim == "fastsim":
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(rec))
        timelines = pathlib.Path(getattr(args, "out", ROOT / "results"))
        timelines.mkdir(parents=True, exist_ok=True)
        plot(rec, timelines / f"timeline-{workload}.png")
        (timelines / f"timeline-{workload}.json").write_text(json.dumps(chrome_trace(rec)))
        p = rec["perf"]
        cyc = max(p["cycles_lo"], 1)
        cols = moving_columns(rows, workload, shape)
        out["workloads"][workload] = {
            "what": _describe(rows, workload, shape),
            "simulator": sim,
            "config": core_config(rows, workload, shape),
            "cycles": p["cycles_lo"],
            "tensor_busy_fraction": round(p["tensor_busy"] / cyc, 4),
            "array_streaming_fraction": round(cols / cyc, 4),
            "vector_busy_fraction": round(p["vector_busy"] / cyc, 4),
            "dma_busy_fraction": round(p["dma_busy"] / cyc, 4),
            "dma_bytes_per_cycle": round((p["dma_rd_bytes"] + p["dma_wr_bytes"]) / cyc, 4),
            "dma_bytes": p["dma_rd_bytes"] + p["dma_wr_bytes"],
            "instructions": p["instret"],
            "sim_wall_s": round(rec["wall_s"], 1),
            "timeline_fractions": summary(rec),
            **({"tensor_busy_per_chunk_window": busy_windows(
                rec, shape["KT"] * shape["MT"] * shape["NC"])}
               if workload == "gemm_stream" else {}),
            "sim_cycles_per_s": round(rec.get("sim_cycles", 0) / max(rec["wall_s"], 1e-9)),
            **roofline(rows * rows * cols, p["dma_rd_bytes"] + p["dma_wr_bytes"], rows, rows,
                       core_config(rows, workload, shape).get("dma_data_width", 32) // 8, cyc),
            "checked": (f"FAILED: {rec['check_failed']}" if rec.get("check_failed") else
                        "bit-exact vs the float32 emulation (itself bit-exact vs refsim on "
                        "small shapes: tests/test_core_stream.py)" if workload == "gemm_stream"
                        else "bit-exact vs refsim"),
        }
    if not getattr(args, "quick", False) or getattr(args, "kernels", None):
        out["kernels"] = run_kernels(args)
    return out


def roofline(macs, dma_bytes, rows, cols, bus_bytes, cycles):
    """The roofline of a workload: ``max(MACs / (rows * cols), DMA bytes / bus bytes per
    cycle)`` cycles, and the fraction of it reached in ``cycles``."""
    roof = max(-(-macs // (rows * cols)), -(-dma_bytes // bus_bytes))
    return {"macs": macs, "roofline_cycles": roof, "bus_bytes_per_cycle": bus_bytes,
            "roofline_fraction": round(roof / max(cycles, 1), 4)}


def _kernel_names(args):
    """The kernels ``--kernels`` names (None: all)."""
    sel = getattr(args, "kernels", None)
    return None if sel is None else [n for n in sel.split(",") if n and n != "none"]


def _dma_width(args):
    """``--dma-width``, checked: a power of two from 32 to 512."""
    from sim.config import check_pow2
    width = getattr(args, "dma_width", 32)
    check_pow2("dma_width", width, 32, 512)
    return width


def floor_parts(ms):
    """The cycles of finished cycle-model run ``ms`` by what its sequencer does in them:
    ``issue`` (micro-instructions, a WAIT's two fixed cycles among them), ``wait`` (stalled at
    a WAIT, by the engine of the last record whose done pulse counted up the semaphore it
    waits for: ``dma``, ``tensor``, ``vector``; ``none`` where no record did), ``emit`` (stalled
    at an EMIT, by the engine whose queue was full) and ``barrier``; they add up to
    ``ms.cycle``. ``records``: each engine's records; ``instructions``: those retired."""
    from sim.isa import Engine
    names = {e: e.name.lower() for e in Engine}
    wait = dict.fromkeys([*names.values(), "none"], 0)
    for first, end, sem in ms.wait_spans:
        dones = [(r.done, names[e]) for e, tl in ms.timeline.items() for r in tl
                 if r.fields["sem_en"] and r.fields["sem"] == sem and r.done < end]
        wait[max(dones)[1] if dones else "none"] += end - first
    emit = {names[e]: ms.perf[e]["blocked"] for e in Engine}
    issue = ms.cycle - sum(wait.values()) - sum(emit.values()) - ms.barrier_stall
    return {"issue": issue, "wait": wait, "emit": emit, "barrier": ms.barrier_stall,
            "records": {names[e]: len(ms.timeline[e]) for e in Engine},
            "instructions": ms.retired}


def array_span(ms):
    """Where finished cycle-model run ``ms``'s cycles go around its matmuls: ``head`` (to the
    array's take of the first), ``columns`` (cycles the array streams), ``gaps`` (the array
    idle between the first take and the last record's end of streaming) and ``tail`` (from
    there to the end: the last matmul's latency and what follows it); they add up to
    ``ms.cycle``. None without matmuls."""
    from sim.isa import Engine
    tl = ms.timeline[Engine.TENSOR]
    if not tl:
        return None
    columns = sum(r.free - r.accept for r in tl)
    return {"head": tl[0].accept, "columns": columns,
            "gaps": tl[-1].free - tl[0].accept - columns, "tail": ms.cycle - tl[-1].free}


def _largest(parts):
    """The largest of :func:`floor_parts`' terms, named (``issue``, ``wait_vector``, ...)."""
    terms = {"issue": parts["issue"], "barrier": parts["barrier"],
             **{f"wait_{k}": v for k, v in parts["wait"].items()},
             **{f"emit_{k}": v for k, v in parts["emit"].items()}}
    return max(terms, key=terms.get)


def bounds(w):
    """Workload ``w``'s cycles on the cycle model (``kernels.bench.simulate``, with
    ``RUN_OVERHEAD``) as it is and under each of ``sim.cycles.BOUNDS``, its roofline, the
    fractions of it reached and at best, and the :func:`floor_parts` of the floor run and of
    the ``no_dma_vector`` run (the bound of a compute-bound workload, whose floor leaves out
    the array's columns), with the latter's :func:`array_span`."""
    from kernels import bench as kb
    from sim.cycles import BOUNDS
    runs = {"model": kb.simulate(w), **{k: kb.simulate(w, v) for k, v in BOUNDS.items()}}
    cycles = {k: ms.cycle + kb.RUN_OVERHEAD for k, ms in runs.items()}
    roof = w.roofline_cycles
    compute = -(-w.macs // (w.config.rows * w.config.cols))
    parts = floor_parts(runs["floor"])
    array = floor_parts(runs["no_dma_vector"])
    return {"what": w.what, "model_cycles": cycles["model"],
            **{k: cycles[k] for k in BOUNDS},
            "roofline_cycles": roof, "roofline_bound": "compute" if compute >= roof else "dma",
            "roofline_fraction": round(roof / cycles["model"], 4),
            "no_dma_vector_fraction": round(roof / cycles["no_dma_vector"], 4),
            "floor_fraction": round(roof / cycles["floor"], 4),
            "floor_largest": _largest(parts),
            "floor_parts": {"run_overhead": kb.RUN_OVERHEAD, **parts},
            "no_dma_vector_largest": _largest(array),
            "no_dma_vector_parts": {"run_overhead": kb.RUN_OVERHEAD, **array},
            "no_dma_vector_array": array_span(runs["no_dma_vector"])}


def run_bounds(args):
    """``--bounds``: :func:`bounds` of every kernel (``--kernels``) on the cores of
    ``--dma-width``, printed as a table (on stderr under ``--json``)."""
    from kernels import bench as kb
    width = _dma_width(args)
    out = {}
    for w in kb.workloads(_kernel_names(args), dma_data_width=width if width > 32 else None):
        out[w.name] = {"config": w.config.to_dict(), **bounds(w)}
    print(f"{'workload':13} {'model':>8} {'no_dma':>8} {'no_vec':>8} {'no_d+v':>8} "
          f"{'floor':>8} {'roofline':>8} {'of roof':>7} {'floor fr':>8}  floor's largest")
    for k, r in out.items():
        print(f"{k:13} {r['model_cycles']:8d} {r['no_dma']:8d} {r['no_vector']:8d} "
              f"{r['no_dma_vector']:8d} {r['floor']:8d} {r['roofline_cycles']:8d} "
              f"{r['roofline_fraction']:7.3f} {r['floor_fraction']:8.3f}  "
              f"{r['floor_largest']}")
    sel = getattr(args, "kernels", None)
    command = "python -m scripts.bench core --bounds --dma-width " + str(width) + \
        (f" --kernels {sel}" if sel else "") + " --json"
    return {"command": command, "dma_width": width, "model": "sim.cycles.MicroSim with "
            "kernels.bench.RtlCost, RUN_OVERHEAD included", "bounds": out}


def run_kernels(args):
    """The library's kernels (``kernels.bench``) on fastsim and the cycle model: per kernel,
    ``rtl`` and ``model`` at the default DMA width and ``model_<bits>`` at each of
    ``--widths``."""
    from kernels import bench as kb
    from kernels.backends import fast_backend
    names = _kernel_names(args)
    if names == []:
        return {}
    rtl = fast_backend() is not None and not getattr(args, "quick", False)
    width = _dma_width(args)
    out = {}
    for w in kb.workloads(names, dma_data_width=width if width > 32 else None):
        rec = out[w.name] = {"what": w.what, "config": w.config.to_dict()}
        for backend in ("rtl", "model") if rtl else ("model",):
            r = kb.measure(w, backend)
            rec[backend] = {k: r[k] for k in (
                "cycles", "tensor_busy", "vector_busy", "dma_busy", "busiest",
                "dma_bytes_per_cycle", "roofline_cycles", "roofline_fraction",
                "bus_bytes_per_cycle", "macs", "dma_bytes", "instructions", "estimate")}
        if rtl:
            rec["model_error"] = round(rec["model"]["cycles"] / rec["rtl"]["cycles"] - 1, 4)
            rec["checked"] = kb.check(w)
    widths = [int(x) for x in getattr(args, "widths", "").split(",") if x and int(x) != width]
    from sim.config import CoreConfig
    if "dma_data_width" in CoreConfig.__dataclass_fields__:
        for width in widths:
            for w in kb.workloads(names, dma_data_width=width):
                r = kb.measure(w, "model")
                out[w.name][f"model_{width}"] = {k: r[k] for k in (
                    "cycles", "tensor_busy", "vector_busy", "dma_busy", "busiest",
                    "dma_bytes_per_cycle", "roofline_cycles", "roofline_fraction",
                    "bus_bytes_per_cycle")}
    return out
