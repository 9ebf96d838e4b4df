"""`argus serve --listen`: /metrics, /healthz, /logs and the status page, served for real on loopback and
looked at in a real headless Chromium (Debian's package; `make test` installs it)."""

from __future__ import annotations

import os
import time
from html import escape
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconcile.serve.http import StatusServer
from reconcile.serve.metrics import Metrics
from reconcile.views.html import render_page
from state.observed import RunStatus
from state.runs import logs as run_logs
from state.runs.records import job_dir
from tests.support.status_page import NCCL_LINE, advised, browse_url, get, report, request, run, serving

HOSTILE = "<script>document.title='owned'</script>"


def test_metrics_count_runs_failures_retries_and_turns(tmp_path):
    metrics = Metrics()
    with serving(metrics) as (server, publish):
        publish(report(retried=("ppo-a3",)))
        first = scrape(server)
        publish(report(ok=False, error="ray unreachable", plan=None, runs={}, finished_at=time.time()))
        second = scrape(server)
        publish(report(runs={"sft": [run("sft-a1", RunStatus.SUCCEEDED)]}, retried=("sft-a1",), drift=0))
        third = scrape(server)
    ws, gpu = ("workspace", "llm-rl"), ("cluster", "gpu")
    assert first[("argus_runs", (gpu, ("job", "ppo"), ("status", "FAILED"), ws))] == 2
    assert first[("argus_runs", (gpu, ("job", "ppo"), ("status", "RUNNING"), ws))] == 1
    assert first[("argus_runs", (gpu, ("job", "sft"), ("status", "SUCCEEDED"), ws))] == 1
    assert first[("argus_run_failures", (("class", "nccl_timeout"), gpu, ("job", "ppo"), ws))] == 1
    assert first[("argus_run_failures", (("class", "oom"), gpu, ("job", "ppo"), ws))] == 1
    assert first[("argus_retries_total", (("job", "ppo"), ws))] == 1
    assert first[("argus_drift_changes", (ws,))] == 2
    assert first[("argus_queue_position", (gpu, ("job", "big"), ws))] == 3
    assert first[("argus_gpus_held", (gpu, ("workspace", "vision")))] == 2
    assert first[("argus_loop_duration_seconds", (ws,))] == pytest.approx(1.5)
    assert first[("argus_loop_active", (ws,))] == 1
    assert ("argus_loop_errors_total", (ws,)) not in first, "no turn of llm-rl has failed yet"
    success = first[("argus_last_success_timestamp_seconds", (ws,))]
    assert second[("argus_loop_errors_total", (ws,))] == 1
    assert second[("argus_last_success_timestamp_seconds", (ws,))] == success
    kept = second[("argus_runs", (gpu, ("job", "ppo"), ("status", "RUNNING"), ws))]
    assert kept == 1, "a failed turn keeps what was seen"
    assert not [key for key in third if key[0] in ("argus_runs", "argus_run_failures") and ("job", "ppo") in key[1]]
    assert third[("argus_retries_total", (("job", "ppo"), ws))] == 1
    assert third[("argus_retries_total", (("job", "sft"), ws))] == 1
    assert third[("argus_drift_changes", (ws,))] == 0


def test_healthz_follows_the_last_successful_turn(tmp_path):
    with serving() as (server, publish):
        before = get(server, "/healthz")
        publish(report())
        fresh = get(server, "/healthz")
        publish(report(ok=False, error="ray unreachable", plan=None, runs={}))
        one_failure = get(server, "/healthz")
        publish(report(finished_at=time.time() - 4 * 30))
        stale = get(server, "/healthz")
    assert before[0] == 503 and "no turn has finished yet" in before[1]
    assert fresh == (200, "ok\n")
    assert one_failure[0] == 200, "one failed turn within three intervals of a good one is still healthy"
    assert stale[0] == 503 and "more than 3 intervals (90 s)" in stale[1]


def test_healthz_names_the_failure_when_no_turn_succeeded(tmp_path):
    with serving() as (server, publish):
        publish(report(ok=False, error="workspace.yaml:3: unknown field", plan=None, runs={}))
        status, text = get(server, "/healthz")
    assert status == 503 and "no turn has succeeded yet; the last turn failed: workspace.yaml:3" in text


def test_only_get_and_head_are_served(tmp_path):
    with serving() as (server, publish):
        publish(report())
        head = request(server, "HEAD", "/metrics")
        refused = {method: request(server, method, "/") for method in ("POST", "PUT", "DELETE", "PATCH", "BREW")}
        missing = get(server, "/nowhere")
    assert head[0] == 200 and head[2] == b""
    assert all(status == 405 and headers["Allow"] == "GET, HEAD" for status, headers, _ in refused.values())
    assert missing[0] == 404


def test_logs_serves_a_run_of_the_report_and_nothing_else(tmp_path):
    shared = tmp_path / "shared"
    log = driver_log(shared, "ppo-a2", "step 1\n" + NCCL_LINE + "\n<b>not html</b>\n")
    driver_log(shared, "elsewhere-a1", "another workspace's secrets\n")
    planted = job_dir(str(shared), "ppo-a1") / "logs"
    planted.mkdir(parents=True)
    (planted / "driver.log").symlink_to("/etc/passwd")
    with serving(roots={"gpu": str(shared)}) as (server, publish):
        publish(report())
        served = request(server, "GET", "/logs/ppo-a2")
        symlinked = get(server, "/logs/ppo-a1")
        attempts = [get(server, path)[0] for path in ("/logs/..%2f..%2fetc%2fpasswd", "/logs/../../etc/passwd",
                                                      "/logs/elsewhere-a1", "/logs/", "/logs/ppo-a2%2f..")]
    status, headers, body = served
    assert status == 200 and body.decode() == log.read_text()
    assert headers["Content-Type"] == "text/plain; charset=utf-8" and headers["X-Content-Type-Options"] == "nosniff"
    assert symlinked[0] == 200 and "root:" not in symlinked[1] and "has no driver log" in symlinked[1]
    assert attempts == [404] * 5


def test_log_tail_reads_the_end_and_never_blocks_on_a_planted_fifo(tmp_path):
    shared = tmp_path / "shared"
    driver_log(shared, "big-a1", "x" * 5000 + "the end\n")
    fifo = job_dir(str(shared), "fifo-a1") / "logs" / "driver.log"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert run_logs.tail(str(shared), "big-a1", limit=8) == "the end\n"
    assert run_logs.tail(str(shared), "fifo-a1") == ""
    assert run_logs.tail(str(shared), "never-ran") == ""


def test_the_page_in_a_browser_shows_jobs_failures_advice_apply_and_audit(tmp_path):
    shared = tmp_path / "shared"
    driver_log(shared, "ppo-a2", NCCL_LINE + "\n")
    with serving(roots={"gpu": str(shared)}) as (server, publish):
        publish(report())
        dom = browse(tmp_path, server)
    failed = advised(run("ppo-a2", RunStatus.FAILED, attempt=2, failure="nccl_timeout"), (NCCL_LINE,))
    assert "argus · workspace llm-rl" in dom
    for shown in ("job.ppo", "job.sft", "in sync", "missing", "RUNNING", "ppo-a3", "FAILED (nccl_timeout)",
                  "oom", 'href="/logs/ppo-a2"', escape(NCCL_LINE, quote=False), "2 change(s) not carried out",
                  "2024-05-01T10:00:00+00:00", "ci:alice", "applied", "9f1c2e3d4b5a", "verifies",
                  "lock busy: skipped", "Admission queue", "job.big", "#3", "waits behind vision/vit",
                  "GPUs held per workspace", "vision"):
        assert shown in dom, shown
    assert failed.advice and escape(failed.advice, quote=False) in dom
    assert "<script" not in dom.lower()


def test_hostile_text_in_the_browser_is_text(tmp_path):
    evil_run = advised(run("ppo-a2", RunStatus.FAILED, attempt=2, failure="user_code"),
                       (f"Traceback: {HOSTILE}", '"><img src=x onerror=alert(1)>'))
    hostile = report(ok=False, error=f"apply failed: {HOSTILE}", commit=HOSTILE, runs={"ppo": [evil_run]},
                     notes=(HOSTILE,), audit_verified=False, audit_problem=f"line 3: {HOSTILE}",
                     last_apply={"time": HOSTILE, "actor": HOSTILE, "outcome": "failed", "commit": "abc"})
    with serving() as (server, publish):
        publish(hostile)
        dom = browse(tmp_path, server)
    assert "owned" not in dom.split("</title>")[0], "a script ran"
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;" in dom
    assert "does not verify" in dom and "apply failed:" in dom


def test_render_page_escapes_everything_hostile():
    evil_run = advised(run("ppo-a2", RunStatus.FAILED, failure="user_code"), (HOSTILE, "</pre><h1>x</h1>"))
    page = render_page(report(ok=False, error=HOSTILE, commit=HOSTILE, notes=(HOSTILE,), runs={"ppo": [evil_run]},
                              audit_verified=False, audit_problem=HOSTILE), now=time.time())
    assert "<script" not in page and "</pre><h1>" not in page and "&lt;script&gt;" in page


def test_render_page_before_the_first_turn():
    assert "No turn has finished yet." in render_page(None, now=time.time())


# --- helpers ---------------------------------------------------------------------------------------


def driver_log(shared: Path, sid: str, text: str) -> Path:
    path = job_dir(str(shared), sid) / "logs" / "driver.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def scrape(server: StatusServer) -> dict[tuple[str, tuple], float]:
    status, headers, body = request(server, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def browse(tmp_path: Path, server: StatusServer) -> str:
    """The page's DOM after a real headless Chromium loaded it."""
    return browse_url(tmp_path, f"http://127.0.0.1:{server.port}/")
