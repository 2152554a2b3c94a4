"""Sweeps: many ``scripts.job`` jobs on a Dask cluster, merged into one JSON.

    python -m scripts.sweep fuzz --seeds 0-99 --count 2000
    python -m scripts.sweep regress --seeds 0-3 --config core2,core4 --fmt int8,fp8_e4m3,bf16
    python -m scripts.sweep fpga-seeds --seeds 1-8 --board ulx3s --config core2 --timeout 1800
    python -m scripts.sweep fuzz --seeds 0-999 --address tcp://head:8786   # an existing cluster
    python -m scripts.sweep measure            # 1 vs 2 workers, overhead: results/sweep.json
    python -m scripts.sweep record build/sweep/fuzz.json   # its summary into results/sweep.json

A sweep is the product of its seeds (``--seeds``: ``0-99``, ``1,2,5``) and of the values of each
job parameter (``--config core2,core4``); each job of it is exactly the command
``python -m scripts.job <kind> --seed N ...`` (``docs/sweeps.md``), run by a Dask worker in
that worker's checkout as a child process: a crash or a hang costs one job (``--timeout``
seconds, none by default), and the worker keeps the job's stderr for the report.

Without ``--address`` the sweep starts a local cluster of ``--workers`` workers (default: the
number of cores), one job at a time each. The progress line on stderr counts the jobs done,
failed, running and queued, and estimates the time left from the rate so far. A job that fails
(a check fails, it raises, it times out or its worker dies) is run once more (``--retries``);
a second failure is reported with its inputs, its command and the tail of its log, never
dropped: a job that passes on its second attempt is counted as flaky. The merged JSON
(``--out``, default ``build/sweep/<kind>.json``) is rewritten as jobs finish, so Ctrl-C (which
stops the running jobs and lists the ones not run) keeps every finished record; ``--max-time``
ends a sweep the same way after that many seconds.

Prints the summary as ``key: value`` lines, or the whole merged JSON with ``--json``. Exit
status: 0 every job passed, 1 a job failed, 2 bad arguments, 130 interrupted (Ctrl-C or
SIGTERM).
"""

import argparse
import itertools
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from scripts import job as jobs
from sim.config import parse_seeds

ROOT = pathlib.Path(__file__).resolve().parents[1]

__all__ = ["parse_seeds", "expand", "command", "run_job", "sweep", "measure", "record", "main"]

#: Lines of a failed job's stderr kept in the report.
LOG_TAIL_LINES = 30
#: Seconds between rewrites of the merged JSON while jobs finish.
WRITE_EVERY_S = 2.0
#: Seconds a stopped sweep waits for its running jobs to acknowledge the stop.
STOP_WAIT_S = 10.0
#: Jobs running in this process (a local cluster's workers are threads here): killed when the
#: sweep ends, whatever the state of the cluster.
_LIVE = set()


def expand(kind, seeds, params=None):
    """The job inputs of a sweep: every combination of ``params`` (name -> list of values), and
    within each, every seed. Each is checked (``scripts.job.check``)."""
    params = params or {}
    names = list(params)
    out = []
    for values in itertools.product(*(params[n] for n in names)):
        for seed in seeds:
            out.append(jobs.check(kind, {"seed": seed, **dict(zip(names, values))}))
    return out


def command(kind, inputs):
    """The one-line command that runs the job ``inputs`` alone."""
    import shlex
    return "python -m scripts.job " + shlex.join(jobs.argv(kind, inputs))


def _tail(data, lines=LOG_TAIL_LINES):
    text = data.decode(errors="replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _stop_requested(name, state):
    """Whether the sweep named ``name`` asked its jobs to stop (polled at most every 2 s)."""
    if name is None or time.monotonic() - state["t"] < 2.0:
        return False
    state["t"] = time.monotonic()
    try:
        from distributed import Event
        return Event(name).is_set()
    except Exception:              # not inside a worker, or the scheduler is gone
        return False


def run_job(kind, inputs, timeout=None, stop_event=None):
    """Run one job as ``python -m scripts.job ... --json`` in this machine's checkout (a worker
    calls this). Returns ``{status: ok | failed | error | timeout | stopped, rc, record,
    log_tail, wall_s, worker}``: ``record`` is the job's JSON record (None when it printed
    none), ``failed`` a record whose check failed, ``error`` no record. Never raises for the
    job's sake: a timed-out or stopped job's process group is killed."""
    import signal
    argv = [sys.executable, "-m", "scripts.job", *jobs.argv(kind, inputs), "--json"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.monotonic()
    poll = {"t": start}
    status = None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env, start_new_session=True)
        _LIVE.add(proc)
        try:
            while proc.poll() is None:
                time.sleep(0.05 if time.monotonic() - start < 1 else 0.2)
                if timeout and time.monotonic() - start > timeout:
                    status = "timeout"
                elif _stop_requested(stop_event, poll):
                    status = "stopped"
                if status:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(5)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
        finally:
            _LIVE.discard(proc)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    record = None
    if status is None and stdout.strip():
        try:
            record = json.loads(stdout)
        except ValueError:
            record = None
    if status is None:
        status = ("ok" if proc.returncode == 0 and record and record.get("ok") else
                  "failed" if record is not None else "error")
    tail = _tail(stderr)
    if status == "timeout":
        tail += f"\n(stopped after {timeout} s: --timeout)"
    return {"status": status, "rc": proc.returncode, "record": record, "log_tail": tail,
            "wall_s": round(time.monotonic() - start, 3), "worker": socket.gethostname()}


class _Progress:
    """One line on stderr: redrawn in place on a terminal, else printed every 10 s."""

    def __init__(self, kind, total, quiet=False, stream=sys.stderr):
        self.kind, self.total, self.quiet, self.stream = kind, total, quiet, stream
        self.tty = stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0

    def update(self, done, failed, running, final=False, stopped=False):
        if self.quiet:
            return
        now = time.monotonic()
        if not (final or self.tty and now - self.last >= 0.5 or now - self.last >= 10):
            return
        self.last = now
        elapsed = now - self.start
        finished = done + failed
        left = self.total - finished
        if stopped:
            eta = "stopped"
        elif final or not left:
            eta = "finished"
        elif finished:
            eta = "about " + _duration(elapsed / finished * left) + " left"
        else:
            eta = "time left unknown"
        line = (f"[sweep {self.kind}] {finished}/{self.total}: {done} done, {failed} failed, "
                f"{running} running, {max(0, left - running)} "
                f"{'not run' if stopped else 'queued'}, {_duration(elapsed)} "
                f"elapsed, {eta}")
        if self.tty:
            print("\r" + line.ljust(100), end="\n" if final else "", file=self.stream,
                  flush=True)
        else:
            print(line, file=self.stream, flush=True)


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _running(client):
    """Jobs a worker is running now (a worker may hold one more, queued, than it has threads)."""
    try:
        threads = client.nthreads()
        return sum(min(len(keys), threads.get(w, 1)) for w, keys in client.processing().items())
    except Exception:
        return 0


def _connect(address, workers):
    """(client, cluster or None, seconds): a Client of the cluster at ``address``, or of a new
    local cluster of ``workers`` single-threaded workers in this process (each job is a child
    process, so threads suffice); their HTTP servers listen on the loopback interface only."""
    import logging
    from distributed import Client, LocalCluster
    start = time.monotonic()
    if address:
        client, cluster = Client(address, timeout="30s"), None
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=False,
                               dashboard_address="127.0.0.1:0",
                               worker_dashboard_address="127.0.0.1:0",
                               silence_logs=logging.ERROR)
        client = Client(cluster)
    return client, cluster, time.monotonic() - start


def _write(path, doc):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    tmp.replace(path)


class _TimeUp(Exception):
    """The sweep's ``max_time`` has passed."""


def sweep(kind, job_inputs, *, address=None, workers=None, out=None, retries=1, timeout=None,
          quiet=False, client=None, command_line=None, max_time=None):
    """Run ``job_inputs`` (a list of ``scripts.job`` inputs of ``kind``) on a Dask cluster;
    return the merged document (also written to ``out`` as jobs finish, when given).

    ``client``: an existing ``distributed.Client`` (then ``address`` and ``workers`` are not
    used); ``command_line`` is noted in the document. A ``KeyboardInterrupt`` stops the running
    jobs; the document then says ``interrupted`` and lists the jobs not run. ``max_time``
    (seconds) ends the sweep the same way once it has run that long (``max_time_reached``):
    a campaign sized by the time it may take.
    """
    from distributed import Event, __version__, as_completed, wait
    from scripts.bench import _machine
    job_inputs = [jobs.check(kind, i) for i in job_inputs]
    workers = workers or os.cpu_count() or 1
    own = client is None
    cluster, start_s = None, 0.0
    if own:
        client, cluster, start_s = _connect(address, workers)
    stop_name = f"sweep-stop-{uuid.uuid4().hex}"
    entries = [{"inputs": i, "command": command(kind, i), "status": "queued", "attempts": 0}
               for i in job_inputs]
    doc = {"sweep": kind, **_machine(), "command": command_line,
           "engine": f"dask distributed {__version__}", "address": address or "local",
           "workers": len(client.nthreads()), "threads": sum(client.nthreads().values()),
           "cluster_start_s": round(start_s, 2), "jobs": len(entries), "retries": retries,
           "timeout_s": timeout}
    progress = _Progress(kind, len(entries), quiet)
    t0 = time.monotonic()
    last_write = [0.0]

    def finish(force=False):
        by = {s: sum(e["status"] == s for e in entries)
              for s in ("ok", "failed", "queued", "not_run")}
        doc.update(done=by["ok"], failed=by["failed"],
                   flaky=sum(e["status"] == "ok" and e["attempts"] > 1 for e in entries),
                   not_run=by["queued"] + by["not_run"], wall_s=round(time.monotonic() - t0, 2),
                   summary=jobs.summarize(kind, [e.get("record") for e in entries
                                                 if e["status"] in ("ok", "failed")]),
                   failures=[{k: e.get(k) for k in ("inputs", "command", "attempts", "rc",
                                                    "log_tail", "record")}
                             for e in entries if e["status"] == "failed"],
                   records=entries)
        if out and (force or time.monotonic() - last_write[0] >= WRITE_EVERY_S):
            _write(out, doc)
            last_write[0] = time.monotonic()
        return by

    def submit(index):
        entry = entries[index]
        entry["attempts"] += 1
        fut = client.submit(run_job, kind, entry["inputs"], timeout, stop_name, pure=False,
                            key=f"{kind}-{index}-{entry['attempts']}-{stop_name[-8:]}")
        pending[fut] = index
        completed.add(fut)

    def counts():
        return {s: sum(e["status"] == s for e in entries) for s in ("ok", "failed")}

    pending = {}
    completed = as_completed()
    doc.update(interrupted=False, max_time_s=max_time, max_time_reached=False)
    try:
        for index in range(len(entries)):
            submit(index)
        finish(force=True)
        shown = 0.0
        while pending:
            if max_time is not None and time.monotonic() - t0 > max_time:
                raise _TimeUp
            done = completed.next_batch(block=False)
            for fut in done:
                index = pending.pop(fut)
                entry = entries[index]
                try:
                    res = fut.result()
                except BaseException as exc:      # the worker died, or the task was cancelled
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    res = {"status": "error", "rc": None, "record": None,
                           "log_tail": f"{type(exc).__name__}: {exc}", "wall_s": None,
                           "worker": None}
                fut.release()
                if res["status"] != "ok" and entry["attempts"] <= retries:
                    entry["first_failure"] = {k: res[k] for k in ("status", "rc", "log_tail")}
                    submit(index)
                    continue
                entry.update({k: res[k] for k in ("record", "wall_s", "worker")})
                entry["status"] = "ok" if res["status"] == "ok" else "failed"
                if entry["status"] == "failed":
                    entry.update(rc=res["rc"], outcome=res["status"], log_tail=res["log_tail"])
            if done:
                finish()
            if done or time.monotonic() - shown >= 1.0:
                by = counts()
                progress.update(by["ok"], by["failed"], _running(client))
                shown = time.monotonic()
            if not done:
                time.sleep(0.25)
    except (KeyboardInterrupt, _TimeUp) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "--max-time reached"
        doc["interrupted" if isinstance(exc, KeyboardInterrupt) else "max_time_reached"] = True
        if not quiet:
            print(f"\n[sweep {kind}] {why}: stopping {len(pending)} jobs ...",
                  file=sys.stderr, flush=True)
        try:
            Event(stop_name, client=client).set()
            running = {k for keys in client.processing().values() for k in keys}
            client.cancel([f for f in pending if f.key not in running])
            wait([f for f in pending if f.key in running], timeout=STOP_WAIT_S)
        except BaseException:
            pass
        _kill_live()
        for entry in entries:
            if entry["status"] == "queued":
                entry["status"] = "not_run"
    finally:
        by = finish(force=True)
        progress.update(by["ok"], by["failed"], 0, final=True,
                        stopped=doc["interrupted"] or doc["max_time_reached"])
        _kill_live()                      # before closing: a local worker waits for its jobs
        if own:
            client.close()
            if cluster is not None:
                cluster.close()
    return doc


def _kill_live():
    """Kill the process groups of the jobs still running in this process."""
    import signal
    for proc in list(_LIVE):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def measure(args):
    """1 worker against 2 on one job set, and the overhead per job against running it directly;
    returns the record of ``results/sweep.json``. The machine's 1-minute load average before
    and after each repetition is noted: other work on the machine shrinks the speed-up."""
    from scripts.bench import _machine
    n_fuzz, count, n_noop, reps = (4, 100, 6, 1) if args.quick else (6, 200, 12, 3)
    fuzz = [{"seed": s, "count": count, "backend": "refsim"} for s in range(n_fuzz)]
    noop = [{"seed": s} for s in range(n_noop)]

    def direct(kind, inputs):
        walls = []
        for i in inputs:
            t = time.monotonic()
            subprocess.run([sys.executable, "-m", "scripts.job", *jobs.argv(kind, i), "--json"],
                           cwd=ROOT, check=True, capture_output=True)
            walls.append(time.monotonic() - t)
        return walls

    def swept(kind, inputs, workers):
        doc = sweep(kind, inputs, workers=workers, quiet=True)
        assert doc["done"] == len(inputs), doc["failures"]
        return doc

    rows = {"direct": [], "w1": [], "w2": [], "noop_direct": [], "noop_w1": [], "start": []}
    load = [os.getloadavg()[0]]
    for _ in range(reps):
        rows["direct"].append(sum(direct("fuzz", fuzz)))
        d1, d2 = swept("fuzz", fuzz, 1), swept("fuzz", fuzz, 2)
        rows["w1"].append(d1["wall_s"])
        rows["w2"].append(d2["wall_s"])
        rows["start"] += [d1["cluster_start_s"], d2["cluster_start_s"]]
        rows["noop_direct"].append(statistics.mean(direct("noop", noop)))
        rows["noop_w1"].append(swept("noop", noop, 1)["wall_s"] / len(noop))
        load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {"benchmark": "sweep", **_machine(), "reps": reps,
            "load_average_1min": [round(x, 2) for x in load],
            "command": "python -m scripts.sweep measure" + (" --quick" if args.quick else ""),
            "speedup": {"jobs": f"{n_fuzz} fuzz jobs of {count} programs (--backend refsim)",
                        "serial_direct_s": round(med["direct"], 2),
                        "workers_1_s": round(med["w1"], 2), "workers_2_s": round(med["w2"], 2),
                        "speedup_2_over_1": round(med["w1"] / med["w2"], 2),
                        "cluster_start_s": round(statistics.median(rows["start"]), 2),
                        "runs": {k: [round(x, 2) for x in rows[k]] for k in ("direct", "w1",
                                                                             "w2")}},
            "overhead": {"jobs": f"{n_noop} noop jobs (a bare python -m scripts.job)",
                         "direct_per_job_s": round(med["noop_direct"], 3),
                         "swept_per_job_s": round(med["noop_w1"], 3),
                         "overhead_per_job_s": round(med["noop_w1"] - med["noop_direct"], 3),
                         "fuzz_overhead_per_job_s": round((med["w1"] - med["direct"]) / n_fuzz,
                                                          3)}}


#: Fields of a merged sweep that ``record`` keeps in ``results/sweep.json``.
CAMPAIGN_FIELDS = ("date", "commit", "machine", "command", "engine", "address", "workers", "jobs",
                   "done", "failed", "flaky", "not_run", "interrupted", "max_time_s",
                   "max_time_reached", "wall_s", "summary")


def record(merged, results):
    """Put the summary of the merged sweep ``merged`` (a path) into ``results`` (a path to
    ``results/sweep.json``) under ``campaigns.<kind>``; returns that entry."""
    doc = json.loads(pathlib.Path(merged).read_text())
    entry = {k: doc.get(k) for k in CAMPAIGN_FIELDS}
    entry["failures"] = [f["command"] for f in doc.get("failures", [])]
    _update(results, {"campaigns": {doc["sweep"]: entry}})
    return entry


def _update(path, new):
    """Merge ``new`` into the JSON object at ``path`` (one level deep for dict values)."""
    path = pathlib.Path(path)
    old = json.loads(path.read_text()) if path.exists() else {}
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(old.get(key), dict) and key == "campaigns":
            old[key].update(value)
        else:
            old[key] = value
    _write(path, old)


def _parser():
    parser = argparse.ArgumentParser(prog="python -m scripts.sweep",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True, metavar="kind")
    for kind, params in jobs.PARAMS.items():
        p = sub.add_parser(kind, help=f"a sweep of {kind} jobs (python -m scripts.job {kind})")
        p.add_argument("--seeds", required=True, help="job seeds: 0-99, 1,2,5 or 1-3,7")
        for name, (typ, default, text) in params.items():
            opt = "--" + name.replace("_", "-")
            if typ is bool:
                p.add_argument(opt, action="store_true", help=text)
            else:
                p.add_argument(opt, default=None,
                               help=f"{text}; a comma-separated list sweeps each "
                                    f"(default {default})")
        p.add_argument("--address", default=None,
                       help="an existing scheduler (tcp://host:8786); default: a local cluster")
        p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                       help="local cluster: workers, one job each (default: the cores)")
        p.add_argument("--retries", type=int, default=1,
                       help="runs more of a failed job before it is reported (default 1)")
        p.add_argument("--timeout", type=float, default=None,
                       help="seconds after which a job is stopped and counts as failed")
        p.add_argument("--max-time", type=float, default=None,
                       help="seconds after which the sweep stops its jobs, as Ctrl-C does, "
                            "and ends (a campaign as large as the time allows)")
        p.add_argument("--out", default=None,
                       help=f"merged JSON (default build/sweep/{kind}.json)")
        p.add_argument("--json", action="store_true", help="print the merged JSON")
        p.add_argument("--quiet", action="store_true", help="no progress line")
    p = sub.add_parser("measure", help="1 vs 2 workers and the overhead per job "
                                       "(writes results/sweep.json)")
    p.add_argument("--quick", action="store_true", help="fewer, shorter jobs (a smoke run)")
    p.add_argument("--out", default=str(ROOT / "results" / "sweep.json"))
    p.add_argument("--json", action="store_true", help="print the record as JSON")
    p = sub.add_parser("record", help="keep a merged sweep's summary in results/sweep.json "
                                      "(campaigns.<kind>)")
    p.add_argument("merged", help="a merged sweep JSON (build/sweep/<kind>.json)")
    p.add_argument("--out", default=str(ROOT / "results" / "sweep.json"))
    p.add_argument("--json", action="store_true", help="print the entry as JSON")
    return parser


def _params(kind, args):
    out = {}
    for name, (typ, _, _) in jobs.PARAMS[kind].items():
        value = getattr(args, name)
        if typ is bool:
            if value:
                out[name] = [True]
        elif value is not None:
            try:
                out[name] = [typ(v) for v in value.split(",")]
            except ValueError:
                raise ValueError(f"--{name.replace('_', '-')} must be a comma-separated list "
                                 f"of {typ.__name__}, not {value!r}") from None
    return out


def _print(doc, as_json, keys):
    if as_json:
        print(json.dumps(doc, indent=1, default=str))
        return
    for key in keys:
        if key in doc:
            print(f"{key}: {doc[key]}")


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.kind == "measure":
        result = measure(args)
        _update(args.out, result)
        _print(result, args.json, ("speedup", "overhead"))
        return 0
    if args.kind == "record":
        entry = record(args.merged, args.out)
        _print(entry, args.json, CAMPAIGN_FIELDS)
        return 0
    try:
        if args.workers < 1:
            raise ValueError(f"--workers must be a positive integer, not {args.workers}")
        if args.retries < 0:
            raise ValueError(f"--retries must be an integer >= 0, not {args.retries}")
        if args.max_time is not None and not args.max_time > 0:
            raise ValueError(f"--max-time must be a positive number of seconds, "
                             f"not {args.max_time}")
        if args.timeout is not None and not args.timeout > 0:
            raise ValueError(f"--timeout must be a positive number of seconds, "
                             f"not {args.timeout}")
        inputs = expand(args.kind, parse_seeds(args.seeds), _params(args.kind, args))
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or ROOT / "build" / "sweep" / f"{args.kind}.json"
    import shlex
    import signal

    def terminate(signum, frame):
        raise KeyboardInterrupt
    # A terminated sweep stops its jobs as Ctrl-C does (they run in their own sessions).
    signal.signal(signal.SIGTERM, terminate)
    line = "python -m scripts.sweep " + shlex.join(sys.argv[1:] if argv is None else argv)
    doc = sweep(args.kind, inputs, address=args.address, workers=args.workers, out=out,
                retries=args.retries, timeout=args.timeout, quiet=args.quiet,
                command_line=line, max_time=args.max_time)
    _print(doc, args.json, ("sweep", "commit", "engine", "address", "workers", "jobs", "done",
                            "failed", "flaky", "not_run", "interrupted", "max_time_reached",
                            "wall_s", "summary"))
    if not args.json:
        for f in doc["failures"]:
            print(f"failed: {f['command']} ({f['attempts']} attempts, rc {f['rc']})\n"
                  + "\n".join("    " + line for line in (f["log_tail"] or "").splitlines()))
        print(f"merged: {out}")
    if doc["interrupted"]:
        return 130
    return 1 if doc["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
