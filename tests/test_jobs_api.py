"""state.jobs_api: Ray's Jobs REST API spoken without importing Ray.

Against a real HTTP receiver on loopback that records what arrives (paths, headers, bodies), and
against the session's real Ray cluster for the calls argus makes, the log websocket included. The
receiver plays a dashboard that is hostile or old: the effects asserted are what reaches it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from state.jobs_api import AuthRefused, JobsApi, RayRefused
from state.ray_client import ClusterAuthFailed, ClusterRequestFailed, RayClient
from tests.conftest import sdk, wait_for


class Dashboard:
    """Answers every request from `answers` (path -> (status, body)), 404 otherwise; keeps what came."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.answers: dict[str, tuple[int, str]] = {"/api/version": (200, json.dumps({"ray_version": "2.60.0"}))}
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                dashboard.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body) if body else None})
                status, text = dashboard.answers.get(self.path, (404, "Not Found"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(text.encode())))
                self.end_headers()
                self.wfile.write(text.encode())

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self) -> list[str]:
        return [f"{s['method']} {s['path']}" for s in self.seen]


@pytest.fixture
def dashboard() -> Iterator[Dashboard]:
    fake = Dashboard()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def test_a_hostile_submission_id_stays_one_path_segment(dashboard: Dashboard) -> None:
    """Ids come from Ray's job table, which anyone who reaches the dashboard writes: none names another endpoint."""
    api = JobsApi(dashboard.address, 5, {})
    for hostile in ("../version", "..", ".", "a?b#c", "x/../../api/jobs/victim"):
        with pytest.raises(RayRefused):
            api.stop(hostile)
        with pytest.raises(RayRefused):
            api.delete(hostile)
    assert dashboard.paths() == [
        "POST /api/jobs/..%2Fversion/stop", "DELETE /api/jobs/..%2Fversion",
        "POST /api/jobs/a%3Fb%23c/stop", "DELETE /api/jobs/a%3Fb%23c",
        "POST /api/jobs/x%2F..%2F..%2Fapi%2Fjobs%2Fvictim/stop", "DELETE /api/jobs/x%2F..%2F..%2Fapi%2Fjobs%2Fvictim",
    ]  # "." and ".." were refused before any request


def test_only_the_named_token_travels(dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """This process's own Ray token (what Ray's stock client would add) never reaches a dashboard."""
    mine = "process-own-token-" + "x" * 24
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", mine)
    monkeypatch.setenv("HOME", str(tmp_path))
    dashboard.answers["/api/jobs/"] = (200, "[]")
    RayClient("c", dashboard.address).jobs()
    RayClient("c", dashboard.address, token="the-cluster-token").jobs()
    sent = [s["headers"].get("Authorization") for s in dashboard.seen]
    assert sent == [None, "Bearer the-cluster-token"]
    assert all(mine not in json.dumps(s) for s in dashboard.seen)


def test_a_submit_leaves_unset_fields_out_and_checks_the_head_version_once(dashboard: Dashboard) -> None:
    dashboard.answers["/api/jobs/"] = (200, json.dumps({"submission_id": "a", "job_id": None}))
    api = JobsApi(dashboard.address, 5, {})
    for sid in ("a", "b"):
        api.submit({"submission_id": sid, "entrypoint": "true", "runtime_env": None, "metadata": {"k": "v"},
                    "entrypoint_num_cpus": 0.5, "entrypoint_memory": None, "entrypoint_resources": {"w": 1.0}})
    assert dashboard.paths() == ["GET /api/version", "POST /api/jobs/", "POST /api/jobs/"]
    assert dashboard.seen[1]["body"] == {"submission_id": "a", "entrypoint": "true", "metadata": {"k": "v"},
                                         "entrypoint_num_cpus": 0.5, "entrypoint_resources": {"w": 1.0}}


def test_a_head_too_old_for_the_fields_gets_no_submit(dashboard: Dashboard) -> None:
    dashboard.answers["/api/version"] = (200, json.dumps({"ray_version": "2.7.1"}))
    api = JobsApi(dashboard.address, 5, {})
    with pytest.raises(RayRefused, match=r"entrypoint_memory need Ray 2\.8 or higher"):
        api.submit({"submission_id": "a", "entrypoint": "true", "entrypoint_memory": 10**9})
    assert dashboard.paths() == ["GET /api/version"]


def test_errors_are_worded_for_the_cluster_and_no_body_is_trusted(dashboard: Dashboard) -> None:
    client = RayClient("c", dashboard.address, timeout=5)
    dashboard.answers["/api/jobs/"] = (200, "<html>a proxy's login page</html>")
    with pytest.raises(ClusterRequestFailed, match="refused to list jobs"):
        client.jobs()
    dashboard.answers["/api/jobs/"] = (500, "Traceback ...\nValueError: the head is unwell")
    with pytest.raises(ClusterRequestFailed, match="ValueError: the head is unwell"):
        client.jobs()
    dashboard.answers["/api/jobs/"] = (401, "Unauthorized: Missing authentication token")
    with pytest.raises(ClusterAuthFailed, match="requires a token"):
        client.jobs()
    with pytest.raises(AuthRefused):
        JobsApi(dashboard.address, 5, {}).list_jobs()


def test_rows_of_the_wrong_shape_read_as_unset_and_an_unknown_status_is_refused(dashboard: Dashboard) -> None:
    client = RayClient("c", dashboard.address, timeout=5)
    rows = [{"type": "SUBMISSION", "submission_id": "odd", "status": "RUNNING", "metadata": ["not", "a", "map"],
             "start_time": "yesterday", "driver_exit_code": True, "message": 7},
            {"type": "DRIVER", "job_id": "01000000", "status": "RUNNING"}, "not a row", None]
    dashboard.answers["/api/jobs/"] = (200, json.dumps(rows))
    (job,) = client.jobs()
    assert (job.submission_id, job.metadata, job.start_time, job.driver_exit_code, job.message) == (
        "odd", {}, None, None, "")
    dashboard.answers["/api/jobs/"] = (200, json.dumps([{"type": "SUBMISSION", "submission_id": "x",
                                                         "status": "HIBERNATING"}]))
    with pytest.raises(ClusterRequestFailed, match="'HIBERNATING', not one of Ray's job statuses"):
        client.jobs()


def test_the_real_job_server_round_trip_and_its_log_websocket(ray_cluster) -> None:
    """Submit, read, tail, stop and delete on a real cluster; Ray's own client agrees on what happened."""
    api = JobsApi(ray_cluster.address, 30, {})
    api.submit({"submission_id": "jobs-api-echo", "entrypoint": "echo hello-from-rest && echo second-line",
                "runtime_env": {"env_vars": {"GREETING": "hi"}}, "metadata": {"argus.test": "1"},
                "entrypoint_num_cpus": 0.1})
    assert wait_for(ray_cluster.address, "jobs-api-echo", {"SUCCEEDED", "FAILED"}) == "SUCCEEDED"

    async def tail() -> str:
        return "".join([chunk async for chunk in api.tail("jobs-api-echo")])

    assert "hello-from-rest" in asyncio.run(tail())
    assert "second-line" in api.logs("jobs-api-echo")
    info = api.job_info("jobs-api-echo")
    assert (info["status"], info["metadata"]) == ("SUCCEEDED", {"argus.test": "1"})
    theirs = sdk(ray_cluster.address).get_job_info("jobs-api-echo")
    assert theirs.runtime_env["env_vars"] == {"GREETING": "hi"} and theirs.entrypoint == info["entrypoint"]
    api.delete("jobs-api-echo")
    assert "jobs-api-echo" not in {j["submission_id"] for j in api.list_jobs()}


def test_argus_plan_never_imports_ray(tmp_path) -> None:
    """Importing Ray costs more than everything else a command imports: the CLI's Ray adapter needs none of it."""
    code = ("import sys, reconcile.cli, reconcile.commands.plan, reconcile.commands.apply, state.ray_client, "
            "state.observe\nprint(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
