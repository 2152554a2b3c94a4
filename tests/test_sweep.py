"""``scripts.sweep`` on a local Dask cluster: a small job set merged into one JSON, a failing job
retried once and reported with its log tail, a flaky one counted, a job run alone equal to the
same job in a sweep, a timeout, Ctrl-C keeping what finished, and --max-time."""

import json
import pathlib
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed", reason="the sweep engine (dask distributed) is not "
                                          "installed: pip install -e '.[sweep]'")

from scripts import job, sweep  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address="127.0.0.1:0",
                           worker_dashboard_address="127.0.0.1:0")
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def _strip(record):
    """A job record without its wall time (not a function of the inputs) and its commit (which
    another commit to the same working tree may change between two runs)."""
    assert record["commit"]
    return {k: v for k, v in record.items() if k not in ("wall_s", "commit")}


def test_parse_seeds_and_expand():
    assert sweep.parse_seeds("0-3,7") == (0, 1, 2, 3, 7)
    for bad in ("", "3-1", "1,1", "x", "-2"):
        with pytest.raises(ValueError, match="seeds must be distinct integers"):
            sweep.parse_seeds(bad)
    jobs = sweep.expand("regress", (0, 1), {"config": ["core2", "core4"], "fmt": ["int8"]})
    assert [(j["config"], j["seed"]) for j in jobs] == \
        [("core2", 0), ("core2", 1), ("core4", 0), ("core4", 1)]
    assert sweep.command("regress", jobs[0]) == \
        "python -m scripts.job regress --seed 0 --config core2 --fmt int8"
    with pytest.raises(ValueError, match="fmt must be one of"):
        sweep.expand("regress", (0,), {"fmt": ["int4"]})
    with pytest.raises(ValueError, match="unknown fuzz parameters: colour"):
        job.check("fuzz", {"seed": 0, "colour": 1})


def test_small_sweep_merged(client, tmp_path):
    out = tmp_path / "fuzz.json"
    inputs = [{"seed": s, "count": 10, "backend": "refsim"} for s in range(3)]
    doc = sweep.sweep("fuzz", inputs, client=client, out=out, quiet=True)
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc, default=str))
    assert (doc["jobs"], doc["done"], doc["failed"], doc["not_run"]) == (3, 3, 0, 0)
    assert doc["engine"].startswith("dask distributed") and doc["workers"] == 2
    assert doc["summary"]["programs"] == 30 and doc["summary"]["mismatches"] == []
    assert [r["record"]["inputs"]["seed"] for r in doc["records"]] == [0, 1, 2]
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in doc["records"])


def test_failing_job_retried_and_reported(client, tmp_path):
    inputs = [{"seed": 0, "fail": True}, {"seed": 1},
              {"seed": 2, "fail_once": str(tmp_path / "marker")}]
    doc = sweep.sweep("noop", inputs, client=client, out=tmp_path / "noop.json", quiet=True)
    assert (doc["done"], doc["failed"], doc["flaky"]) == (2, 1, 1)
    failed, ok, flaky = doc["records"]
    assert failed["status"] == "failed" and failed["attempts"] == 2
    assert "failing as asked" in failed["log_tail"] and "RuntimeError" in failed["log_tail"]
    (report,) = doc["failures"]
    assert report["command"] == "python -m scripts.job noop --seed 0 --fail"
    assert report["inputs"]["seed"] == 0 and "failing as asked" in report["log_tail"]
    assert ok["attempts"] == 1
    assert flaky["status"] == "ok" and flaky["attempts"] == 2
    assert "failing once" in flaky["first_failure"]["log_tail"]


def test_job_alone_equals_job_in_sweep(client):
    inputs = {"seed": 5, "config": "core2", "fmt": "fp8_e4m3", "count": 3}
    alone = subprocess.run([sys.executable, "-m", "scripts.job",
                            *job.argv("regress", inputs), "--json"],
                           cwd=ROOT, check=True, capture_output=True, text=True)
    doc = sweep.sweep("regress", [inputs], client=client, quiet=True)
    assert _strip(json.loads(alone.stdout)) == _strip(doc["records"][0]["record"])
    assert _strip(job.run("regress", inputs)) == _strip(doc["records"][0]["record"])


def test_timeout_is_a_failure(client):
    doc = sweep.sweep("noop", [{"seed": 0, "seconds": 60}], client=client, timeout=1,
                      retries=0, quiet=True)
    (entry,) = doc["records"]
    assert entry["status"] == "failed" and entry["outcome"] == "timeout"
    assert entry["wall_s"] < 30 and "--timeout" in entry["log_tail"]


def test_interrupt_keeps_what_finished(tmp_path):
    out = tmp_path / "noop.json"
    # Ctrl-C's default action in the child even when this test runs with SIGINT ignored (a
    # background job of a non-interactive shell inherits SIG_IGN, and so would the sweep).
    proc = subprocess.Popen([sys.executable, "-m", "scripts.sweep", "noop", "--seeds", "0-7",
                             "--seconds", "1.5", "--workers", "2", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if out.exists() and json.loads(out.read_text())["done"] >= 2:
            break
    else:
        proc.kill()
        raise AssertionError("fewer than 2 of 8 one-and-a-half-second jobs done in 300 s")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] and doc["done"] >= 2 and doc["done"] < 8
    assert doc["done"] + doc["not_run"] == 8
    assert {r["status"] for r in doc["records"]} <= {"ok", "not_run"}
    assert "interrupted" in stderr


def test_max_time_stops_and_keeps_the_inputs(client):
    start = time.monotonic()
    doc = sweep.sweep("noop", [{"seed": s, "seconds": 60} for s in range(3)], client=client,
                      max_time=1, quiet=True)
    assert time.monotonic() - start < 30
    assert doc["max_time_reached"] and not doc["interrupted"]
    assert (doc["done"], doc["failed"], doc["not_run"]) == (0, 0, 3)
    assert [r["inputs"]["seed"] for r in doc["records"] if r["status"] == "not_run"] == [0, 1, 2]
