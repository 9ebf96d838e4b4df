"""`argus serve`'s watch between turns (reconcile.serve.watch): with `--interval 60`, a queued job starts
seconds after the run before it ends, and a failure reaches the webhook seconds after it happens.

Loops run as real processes on the real test clusters; the watch's bounds (backoff, standby, hostile
rows) are shown against a real loopback dashboard that answers what a test wants. The 5 s and 10 s
targets are measured in bench/handoff.py; these tests assert looser bounds, far below the interval.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reconcile.serve.loop import MIN_GAP
from reconcile.serve.watch import MAX_BACKOFF, Watch, ended, freed
from state.ray import local
from state.ray.client import RayClient
from tests.support import gpu_queue
from tests.support.cluster import jobs_of, until
from tests.support.workspace import Workspace, make_workspace

RUN_SECONDS = 3
INTERVAL = "60"


def team(tmp_path: Path, name: str, cluster: local.LocalCluster) -> tuple[Workspace, Path]:
    shared = tmp_path / "nfs"
    (shared / ".argus").mkdir(parents=True)
    ws = gpu_queue.team(tmp_path, name, cluster, shared)
    return ws, shared


def all_gpus_job(ws: Workspace, shared: Path, name: str) -> None:
    """A job holding all 3 GPUs (in Ray too: its driver reserves them) for RUN_SECONDS, logging when it ran."""
    gpu_queue.gpu_job(ws, shared, name, gpus=3, extra="entrypoint_num_gpus: 3\n", seconds=RUN_SECONDS)


def ran(shared: Path) -> dict[str, tuple[float, float]]:
    """(start, end) of each job that ended, by its name in this one workspace."""
    return {job.rpartition("/")[2]: (start, end) for job, start, end in gpu_queue.ran(shared)}


class Loop:
    """`argus serve` as a real process, its stderr read as it comes."""

    def __init__(self, ws: Workspace, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(ws.root), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def turns(self) -> list[str]:
        return [line for line in self.lines if " argus serve: turn=" in line]  # after the line's time

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.reader.join(timeout=10)
        return "".join(self.lines)


def test_a_queued_job_starts_seconds_after_the_one_before_it_ends_whatever_the_interval(gpu_cluster, tmp_path):
    ws, shared = team(tmp_path, "watch-handoff", gpu_cluster)
    for name in ("first", "second"):
        all_gpus_job(ws, shared, name)
    loop = Loop(ws, "--interval", INTERVAL, "--sync", "auto")
    try:
        until(lambda: len(ran(shared)) == 2, "both jobs ran", timeout=100)
    finally:
        err = loop.stop()
    runs = ran(shared)
    first, second = runs["first"], runs["second"]
    assert second[0] >= first[1], f"both held the GPUs at once: {runs}"
    submitted = {j.metadata["argus.job"]: j.start_time / 1000 for j in jobs_of(gpu_cluster.address, ws.name)}
    # argus's part: the submit (Ray's job start_time); the next turn by the interval would be ~55 s later.
    # How long Ray then takes to start the driver is Ray's (and the loaded machine's): not asserted here.
    assert submitted["second"] - first[1] < 15, (runs, submitted, err)
    assert "turn started early: 1 job(s) ended on cluster local" in err
    assert len(loop.turns()) <= 8, err  # woken turns, not a spin


def test_a_failure_reaches_the_webhook_well_before_the_interval(workspace, argus, tmp_path):
    events: list[dict] = []
    with receiver(events) as url:
        gate = tmp_path / "fail-now"
        wait = f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(gate)!r}), True)]"
        workspace.job("doomed", ["python3", "-c", f"import os, sys, time; {wait}; sys.exit(3)"])
        assert argus("apply", workspace.root, "--auto-approve").code == 0
        loop = Loop(workspace, "--interval", INTERVAL, "--notify", url)
        try:
            until(loop.turns, "the loop's first turn", timeout=60)
            gate.touch()
            failed_at = time.monotonic()
            until(lambda: [e for e in events if e["kind"] == "failed"], "the failure arrived", timeout=50)
            took = time.monotonic() - failed_at
        finally:
            err = loop.stop()
    assert took < 20, err  # the interval's turn would come ~60 s after the first
    [failed] = [e for e in events if e["kind"] == "failed"]
    assert failed["job"] == "doomed" and failed["workspace"] == workspace.name
    assert "turn started early" in err


@contextlib.contextmanager
def receiver(events: list[dict]) -> Iterator[str]:
    """A JSON webhook on loopback, as conftest's `hook`: keeps every argus event it is sent."""

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            events.append(json.loads(body["message"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"json://127.0.0.1:{server.server_address[1]}/argus"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dashboard() -> Iterator[Dashboard]:
    server = Dashboard()
    try:
        yield server
    finally:
        server.close()


class Dashboard:
    """A loopback dashboard: answers GET /api/jobs/ with `rows` (or `status`, when not 200), counts requests."""

    def __init__(self) -> None:
        self.rows: object = []
        self.status = 200
        self.body = ""
        self.requests: list[str] = []
        self.answer: Callable[[str], object] | None = None
        """What to answer by path; None: `rows` to every request."""
        dash = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                dash.requests.append(self.path)
                rows = dash.answer(self.path) if dash.answer else dash.rows
                body = (dash.body or json.dumps(rows)).encode()
                self.send_response(dash.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Woken:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.said: list[str] = []


def watching(dash: Dashboard, every: float) -> tuple[Watch, Woken]:
    woken = Woken()
    watch = Watch(every, woken.reasons.append, woken.said.append)
    watch.follow_clients({"c": RayClient("c", dash.address, timeout=2)})
    return watch, woken


def test_a_failing_dashboard_is_polled_less_and_less_and_its_words_are_not_logged(dashboard):
    dashboard.status, dashboard.body = 500, "<script>alert('x')</script>\x1b[31mboom"
    watch, woken = watching(dashboard, every=0.05)
    dashboard.requests.clear()  # the first read, made when the watch took the cluster
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        assert watch.tick(time.monotonic()) == []
        time.sleep(0.01)
    # backoff 0.1, 0.2, 0.4, 0.8, 1.6 s: about five requests in 3 s, where a tick every 10 ms would send 300
    assert 2 <= len(dashboard.requests) <= 7, dashboard.requests
    assert len(woken.said) == 1 and "did not answer" in woken.said[0]
    assert "script" not in woken.said[0] and "\x1b" not in woken.said[0] and "boom" not in woken.said[0]
    assert MAX_BACKOFF <= 60  # an outage is noticed again within a minute
    dashboard.status, dashboard.body = 200, ""
    until(lambda: watch.tick(time.monotonic()) == [] and len(woken.said) == 2, "the watch polls again", 5)
    assert "answers again" in woken.said[1]


def test_a_standby_loop_does_not_poll(dashboard):
    watch, woken = watching(dashboard, every=0.02)
    dashboard.requests.clear()
    stopping, active = threading.Event(), threading.Event()
    thread = threading.Thread(target=watch.run, args=(stopping, active))
    thread.start()
    time.sleep(0.5)
    assert dashboard.requests == []  # holding no lease, it acts on nothing and asks nothing
    active.set()
    until(lambda: dashboard.requests, "the active loop's watch polls", 5)
    dashboard.rows = [{"submission_id": "a", "status": "FAILED"}]
    until(lambda: woken.reasons, "a new failed job wakes the loop", 5)
    stopping.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert woken.reasons[0] == "1 job(s) ended on cluster c"


def test_hostile_rows_are_left_out_and_wake_nothing(dashboard):
    run = {"submission_id": "run", "status": "RUNNING"}
    dashboard.rows = [run]
    watch, woken = watching(dashboard, every=1)
    dashboard.rows = [run, {"submission_id": {"x": 1}, "status": "FAILED"},
                      {"submission_id": "odd", "status": ["FAILED"]}, {"submission_id": "odder", "status": "DONE"},
                      {"job_id": 7, "status": "FAILED"}, 7, "FAILED", None, {"submission_id": "x" * 99, "status": 3}]
    assert watch.tick(time.monotonic()) == []
    dashboard.rows = {"jobs": "not a list"}
    watch.tick(time.monotonic())  # never raises: at most a turn looks, or the watch backs off
    assert woken.reasons == []  # tick returns reasons; only run() wakes


def test_a_job_table_that_churns_wakes_turns_at_most_a_gap_apart(dashboard, tmp_path):
    """Every poll shows a new failed job (anyone who reaches the dashboard can submit): the loop turns
    more often than its interval, but never back to back."""
    ended_jobs = iter(range(10**6))
    dashboard.answer = lambda path: (
        {"ray_version": "2.60.0", "session_name": "s"} if path.startswith("/api/version")
        else [{"submission_id": f"churn-{next(ended_jobs)}", "status": "FAILED", "type": "SUBMISSION"}]
        if path.startswith("/api/jobs/") else {"data": {"result": {"result": []}}})
    shared = tmp_path / "nfs"
    (shared / ".argus").mkdir(parents=True)
    ws = Workspace(tmp_path / "ws", "churned", dashboard.address)
    ws.write("argus.yaml", "kind: Workspace\nname: churned\n")
    ws.write("cluster.yaml", f"kind: Cluster\nname: local\naddress: {dashboard.address}\nshared_root: {shared}\n")
    loop = Loop(ws, "--interval", INTERVAL, "--watch", "0.2")
    try:
        until(lambda: len(loop.turns()) >= 2, "the watch wakes the loop", 60)
        started, turns = time.monotonic(), len(loop.turns())
        time.sleep(6)
        woken = len(loop.turns()) - turns
        elapsed = time.monotonic() - started
    finally:
        err = loop.stop()
    assert "turn started early" in err
    assert 1 <= woken <= elapsed / MIN_GAP + 1, err  # without the gap: a turn every few hundred ms


def test_a_watch_that_would_hammer_the_dashboard_is_refused(tmp_path, argus):
    ws = make_workspace(tmp_path / "ws", "hammer", "http://127.0.0.1:9")
    (ws.shared / ".argus").mkdir(parents=True)
    refused = argus("serve", ws.root, "--watch", "0.01")
    assert refused.code == 1 and "--watch 0.01: give 0 (no watch) or at least 0.2 seconds" in refused.err
    assert not (ws.shared / ".argus" / "serve").exists()  # refused before the loop took anything


def test_endings_are_told_apart_from_what_does_not_free_room():
    before = {"a": "RUNNING", "b": "PENDING", "c": "SUCCEEDED", "d": "RUNNING"}
    assert ended(before, before) == []
    assert ended(before, {**before, "a": "FAILED", "b": "STOPPED"}) == ["a", "b"]
    assert ended(before, {k: v for k, v in before.items() if k != "d"}) == ["d"]  # deleted while it ran
    assert ended(before, {k: v for k, v in before.items() if k != "c"}) == []  # a finished row pruned
    assert ended(before, {**before, "e": "FAILED"}) == ["e"]  # began and failed between two reads
    assert ended(before, {**before, "e": "RUNNING", "b": "RUNNING"}) == []
    assert freed({"GPU": 3.0, "CPU": 2.0}, {"GPU": 0.0, "CPU": 4.0}, frozenset({"GPU", "CPU"})) == ["GPU"]
    assert freed({"GPU": 3.0, "CPU": 2.0}, {"GPU": 3.0, "CPU": 1.0}, frozenset({"GPU"})) == []
