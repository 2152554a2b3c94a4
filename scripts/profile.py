"""Per-engine timeline of a program run on the core (simulation).

    python -m scripts.profile [--workload mlp|attention|gemm|gemm_stream] [--rows 4]
                              [--simulator icarus] [--shape '{"NCH": 8}']

Runs the workload on the core under cocotb (bit-exact against the reference simulator, as in
the tests), samples the core's ``activity`` port every cycle and writes, in ``--out`` (default
``build/profile``; ``python -m scripts.bench core`` writes the same as
``results/timeline-<workload>.png`` / ``.json``):

* ``timeline.png``: one lane per engine (DMA, tensor, vector), coloured busy / waiting
  on a semaphore / idle; the sequencer lane shows when it executes.
* ``timeline.json``: the same as a Chrome trace (``chrome://tracing`` or Perfetto:
  one "thread" per engine, one complete event per interval, 1 cycle = 1 us).

Engine states per cycle: *busy* when its controller or engine has work; *waiting* when it is
idle while the sequencer is stalled on a semaphore (``activity.seq_wait``, sampled from the
sequencer's counters with a 4-cycle resolution); *idle* otherwise.
"""

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENGINES = ("dma", "tensor", "vector")
COLOURS = {"busy": "#2b8a3e", "waiting": "#f08c00", "idle": "#dee2e6"}

__all__ = ["run_workload", "intervals", "chrome_trace", "plot", "main", "core_config"]


def core_config(rows, workload=None, shape=None):
    """The core configuration used by the profiler and benchmarks for ``rows x rows``; the
    streaming GEMM needs a larger SBUF/PSUM and program memory
    (``cocotb_tests.test_core_profile.stream_config``)."""
    if workload == "gemm_stream":
        sys.path.insert(0, str(ROOT))
        from cocotb_tests.test_core_profile import stream_config
        return stream_config(rows, shape)
    return {"rows": rows, "cols": rows, "sbuf_depth": 1024, "psum_depth": 128 if rows > 4
            else 64, "formats": ["bf16"], "lut_entries": 64}


def replot(path, out_dir):
    """Write the PNG and Chrome trace again from a saved run record."""
    rec = json.loads(pathlib.Path(path).read_text())
    out = pathlib.Path(out_dir)
    (out / "timeline.json").write_text(json.dumps(chrome_trace(rec)))
    plot(rec, out / "timeline.png")
    return summary(rec)


def run_workload(workload, rows=4, simulator="icarus", shape=None, out=None):
    """Run ``workload`` on a ``rows x rows`` core; return the record written by
    ``cocotb_tests/test_core_profile.py`` (samples, performance counters, wall time)."""
    sys.path.insert(0, str(ROOT))
    from cocotb_tests.common.runner import run_cocotb
    from cocotb_tests.test_core import core_factory
    cfg = core_config(rows, workload, shape)
    out = pathlib.Path(out or ROOT / "build" / f"profile-{workload}-{rows}-{simulator}.json")
    env = {"PROFILE_WORKLOAD": workload, "PROFILE_OUT": str(out),
           "PROFILE_SHAPE": json.dumps(shape or {})}
    name = f"core{rows}x{rows}" + ("s" if workload == "gemm_stream" else "")
    out.unlink(missing_ok=True)       # never report a stale record of an earlier run
    run_cocotb(core_factory(cfg), name=name, config=cfg,
               test_module="cocotb_tests.test_core_profile", simulator=simulator,
               extra_env=env)
    if not out.exists():
        raise RuntimeError(f"{workload} on {simulator} failed (no record written; see the "
                           f"cocotb log above)")
    rec = json.loads(out.read_text())
    rec["config"] = cfg
    rec["simulator"] = simulator
    out.write_text(json.dumps(rec))
    return rec


def _waiting(rec):
    """Per cycle: the sequencer waits on a semaphore. ``seq_wait`` comes from counters sampled
    one every 4 cycles, so it is spread over the 4-cycle window it describes."""
    bit = rec["fields"].index("seq_wait")
    raw = [s >> bit & 1 for s in rec["samples"]]
    n = len(raw)
    return [any(raw[max(0, t - 3):min(n, t + 4)]) for t in range(n)]


def intervals(rec):
    """``{engine: [(state, start_cycle, length), ...]}`` plus the sequencer lane (busy while
    it executes, waiting while it is stalled on a semaphore)."""
    fields = rec["fields"]
    wait = _waiting(rec)
    out = {}
    for lane in ENGINES + ("sequencer",):
        runs = []
        for t, s in enumerate(rec["samples"]):
            if lane == "sequencer":
                st = ("waiting" if wait[t] else "busy") if s >> fields.index("seq_busy") & 1 \
                    else "idle"
            elif s >> fields.index(lane) & 1:
                st = "busy"
            else:
                st = "waiting" if wait[t] else "idle"
            if runs and runs[-1][0] == st:
                runs[-1][2] += 1
            else:
                runs.append([st, t, 1])
        out[lane] = [tuple(r) for r in runs]
    return out


def summary(rec):
    """Fraction of the program's cycles each engine spent busy / waiting / idle."""
    n = max(len(rec["samples"]), 1)
    res = {}
    for lane, runs in intervals(rec).items():
        tot = {"busy": 0, "waiting": 0, "idle": 0}
        for st, _, length in runs:
            tot[st] += length
        res[lane] = {k: v / n for k, v in tot.items()}
    return res


def chrome_trace(rec):
    """Chrome trace-event JSON (list of complete events, one thread per lane)."""
    events = [{"name": "process_name", "ph": "M", "pid": 1,
               "args": {"name": f"NeuronCore {rec['config']['rows']}x{rec['config']['cols']} "
                                f"{rec['workload']}"}}]
    for tid, (lane, runs) in enumerate(intervals(rec).items()):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": lane}})
        for st, start, length in runs:
            if st == "idle":
                continue
            events.append({"name": st, "cat": lane, "ph": "X", "pid": 1, "tid": tid,
                           "ts": start, "dur": length})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"unit": "1 us = 1 core cycle", "perf": rec["perf"]}}


def plot(rec, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lanes = intervals(rec)
    fig, ax = plt.subplots(figsize=(12, 2.8))
    for y, (lane, runs) in enumerate(reversed(list(lanes.items()))):
        for st, start, length in runs:
            ax.broken_barh([(start, length)], (y - 0.4, 0.8), color=COLOURS[st])
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(list(lanes))))
    ax.set_xlabel("cycle")
    cfg = rec["config"]
    ax.set_title(f"{rec['workload']} on a {cfg['rows']}x{cfg['cols']} core "
                 f"({len(rec['samples'])} cycles, {rec['simulator']})")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=c, label=s) for s, c in COLOURS.items()],
              loc="upper right", ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m scripts.profile", description=__doc__.split(
        "\n")[0])
    p.add_argument("--workload", default="mlp",
                   choices=("gemm", "mlp", "attention", "gemm_stream"))
    p.add_argument("--rows", type=int, default=4, choices=(4, 8))
    p.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))
    p.add_argument("--out", default=str(ROOT / "build" / "profile"),
                   help="directory for timeline.png and timeline.json (default build/profile; "
                        "python -m scripts.bench core writes results/timeline-<workload>.*)")
    p.add_argument("--shape", default="{}", help="JSON dict overriding the workload's tiling")
    args = p.parse_args(argv)
    rec = run_workload(args.workload, args.rows, args.simulator, json.loads(args.shape) or None)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timeline.json").write_text(json.dumps(chrome_trace(rec)))
    plot(rec, out / "timeline.png")
    print(json.dumps({"png": str(out / "timeline.png"), "trace": str(out / "timeline.json"),
                      "cycles": len(rec["samples"]), "summary": summary(rec)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
