"""state.ray.jobs_api: Ray's Jobs REST API spoken without importing Ray.

Against a real HTTP receiver on loopback that records what arrives (paths, headers, bodies), and
against the session's real Ray cluster for the calls argus makes, the log websocket included. The
receiver plays a dashboard that is hostile or old: the effects asserted are what reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from state.ray.client import ClusterAuthFailed, ClusterRequestFailed, ClusterUnreachable, RayClient, SubmitConflict
from state.ray.jobs_api import AuthRefused, JobsApi, RayRefused
from tests.support.cluster import sdk, wait_for


class Dashboard:
    """Answers every request from `answers` (path -> (status, body)), 404 otherwise; keeps what came."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.answers: dict[str, tuple[int, str]] = {"/api/version": (200, json.dumps({"ray_version": "2.60.0"}))}
        self.raw: dict[str, bytes] = {}
        """Whole HTTP answers written as they are (a redirect, a body cut short)."""
        self.silent: set[str] = set()
        """Paths answered with nothing, ever (the connection is held until the server stops)."""
        self.stopped = threading.Event()
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                dashboard.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body) if body else None})
                if self.path in dashboard.silent:
                    dashboard.stopped.wait(30)
                    return
                if self.path in dashboard.raw:
                    self.wfile.write(dashboard.raw[self.path])
                    self.close_connection = True
                    return
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
    fake.stopped.set()
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
    api = JobsApi(dashboard.address, 5, {})
    for sid in ("a", "b"):
        dashboard.answers["/api/jobs/"] = (200, json.dumps({"submission_id": sid, "job_id": None}))
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


def test_wrong_shapes_read_as_unset_and_an_unknown_status_of_a_run_of_argus_is_refused(dashboard: Dashboard) -> None:
    client = RayClient("c", dashboard.address, timeout=5)
    rows = [{"type": "SUBMISSION", "submission_id": "odd", "status": "RUNNING", "metadata": ["not", "a", "map"],
             "start_time": "yesterday", "driver_exit_code": True, "message": 7},
            {"type": "DRIVER", "job_id": "01000000", "status": "RUNNING"}]
    dashboard.answers["/api/jobs/"] = (200, json.dumps(rows))
    (job,) = client.jobs()
    assert (job.submission_id, job.metadata, job.start_time, job.driver_exit_code, job.message) == (
        "odd", {}, None, None, "")
    strange = {"type": "SUBMISSION", "submission_id": "x", "status": "HIBERNATING"}
    dashboard.answers["/api/jobs/"] = (200, json.dumps([strange, rows[0]]))
    assert [j.submission_id for j in client.jobs()] == ["odd"]  # someone else's job argus cannot read: left out
    for odd in ({"jobs": rows}, None, "[]"):  # a job list that is no list is no answer, never an empty table
        dashboard.answers["/api/jobs/"] = (200, json.dumps(odd))
        with pytest.raises(ClusterRequestFailed, match="not a list"):
            client.jobs()
    ours = {**strange, "metadata": {"argus.workspace": "w", "argus.job": "j"}}
    dashboard.answers["/api/jobs/"] = (200, json.dumps([ours]))
    with pytest.raises(ClusterRequestFailed, match="'HIBERNATING', not one of Ray's job statuses"):
        client.jobs()


def test_no_redirect_is_followed_so_no_body_or_token_goes_elsewhere(dashboard: Dashboard) -> None:
    """A dashboard a pull request named answers 307: the job's body must not be sent on to where it points."""
    dashboard.raw["/api/jobs/"] = (b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /collect\r\n"
                                   b"Content-Length: 0\r\n\r\n")
    dashboard.raw["/api/v0/nodes?limit=10000&detail=true"] = (b"HTTP/1.1 302 Found\r\nLocation: /api/v0/nodes?limit="
                                                              b"10000&detail=true\r\nContent-Length: 0\r\n\r\n")
    client = RayClient("c", dashboard.address, timeout=5, token="the-cluster-token")
    with pytest.raises(ClusterRequestFailed, match="argus follows no redirect"):
        client.submit("s1", {"entrypoint": "true", "metadata": {}})
    with pytest.raises(ClusterRequestFailed, match="argus follows no redirect"):
        client.node_rows()
    assert [p for p in dashboard.paths() if "collect" in p] == []
    assert dashboard.paths().count("GET /api/v0/nodes?limit=10000&detail=true") == 1  # a loop is not walked either


def test_a_redirect_of_the_log_stream_is_refused_and_names_no_token(dashboard: Dashboard) -> None:
    """The token straddles where the message cuts the address: masked first, no part of it is shown."""
    token = "T0KEN-" + "0123456789abcdef" * 2
    answer = f"HTTP/1.1 302 Found\r\nLocation: /collect?p={'x' * 185}{token}\r\nContent-Length: 0\r\n\r\n".encode()
    dashboard.raw["/api/jobs/j/logs/tail"] = dashboard.raw["/api/jobs/"] = answer
    client = RayClient("c", dashboard.address, timeout=5, token=token)
    with pytest.raises(ClusterRequestFailed, match="argus follows no redirect") as stream:
        client.follow("j", lambda _: None)
    with pytest.raises(ClusterRequestFailed, match="argus follows no redirect") as submit:
        client.submit("s1", {"entrypoint": "true", "metadata": {}})
    assert token[:4] not in str(stream.value) + str(submit.value)
    assert [p for p in dashboard.paths() if "collect" in p] == []


def test_a_short_token_masks_nothing_of_rays_own_words(dashboard: Dashboard) -> None:
    """Only a token long enough to be one is masked: "a" must not turn Ray's "already exists" into a refusal."""
    dashboard.answers["/api/jobs/"] = (400, "ValueError: Job with submission_id s1 already exists.")
    dashboard.answers["/api/jobs/s1"] = (200, json.dumps({"type": "SUBMISSION", "submission_id": "s1",
                                                          "status": "RUNNING", "metadata": {}}))
    client = RayClient("c", dashboard.address, timeout=5, token="a")
    with pytest.raises(SubmitConflict):  # Ray has the id, under labels that are not ours: not a plain refusal
        client.submit("s1", {"entrypoint": "true", "metadata": {}})


def test_no_netrc_login_travels(dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login me password NETRC-SECRET\n")
    netrc.chmod(0o600)
    dashboard.answers["/api/jobs/"] = (200, "[]")
    RayClient("c", dashboard.address).jobs()
    assert [s["headers"].get("Authorization") for s in dashboard.seen] == [None]


def test_a_token_the_dashboard_echoes_is_masked(dashboard: Dashboard) -> None:
    token = "CLUSTER-TOKEN-" + "abcdef0123456789" * 2
    echoed = f"ValueError: bad request; headers were {{'Authorization': 'Bearer {token}'}}"
    dashboard.answers["/api/jobs/"] = (400, echoed)
    client = RayClient("c", dashboard.address, timeout=5, token=token)
    with pytest.raises(ClusterRequestFailed) as refused:
        client.submit("s1", {"entrypoint": "true", "metadata": {}})
    assert token not in str(refused.value) and token not in refused.value.detail and "***" in str(refused.value)


def test_a_hostile_dashboard_gets_a_clear_error_or_is_read_as_unset_never_a_crash(dashboard: Dashboard) -> None:
    client = RayClient("c", dashboard.address, timeout=5)
    dashboard.answers["/api/version"] = (200, json.dumps({"ray_version": 5, "session_name": ["s"]}))
    dashboard.answers["/api/v0/nodes?limit=10000&detail=true"] = (200, json.dumps({"data": {"result": {"result": [
        {"state": "ALIVE"}, {"state": "ALIVE", "node_id": 7}, {"state": "ALIVE", "node_id": "a", "resources_total": []},
        {"state": "ALIVE", "node_id": "b", "resources_total": {"CPU": "lots", "GPU": 10**400, "w": 2}},
    ]}}}))
    dashboard.answers["/api/cluster_status"] = (200, json.dumps({"data": "a string"}))
    row = {"type": "SUBMISSION", "submission_id": "x", "status": "RUNNING", "start_time": 10**400,
           "end_time": -(10**30)}
    dashboard.answers["/api/jobs/"] = (200, json.dumps([row]))
    state = client.snapshot()
    assert (state.session_name, state.ray_version) == ("", "")
    assert [(n.node_id, n.resources) for n in state.nodes] == [("a", {}), ("b", {"w": 2.0})]
    assert [(j.start_time, j.end_time) for j in state.jobs] == [(None, None)]
    dashboard.raw["/api/jobs/"] = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"5\r\n[{\"a\"\r\nzz\r\n")
    with pytest.raises(ClusterRequestFailed, match="no usable answer to list jobs"):
        client.jobs()


def test_a_log_stream_that_never_answers_ends_within_the_timeout(dashboard: Dashboard) -> None:
    dashboard.silent.add("/api/jobs/quiet/logs/tail")
    client = RayClient("c", dashboard.address, timeout=1)
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable):
        client.follow("quiet", lambda _: None)
    assert time.monotonic() - started < 10


def test_a_log_stream_cut_short_is_not_the_end_of_the_log(unused_tcp_port: int) -> None:
    """The dashboard closes the websocket with 1011 (server error) or 1001 (going away) mid-job: argus says
    so, not "done". A quiet stream whose server never reads (Ray 2.60's head proxies it so, and answers
    no ping) is followed to its normal end."""
    from aiohttp import web

    def closing(code: int, quiet: float = 0.0):
        async def tail(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.send_str("hello\n")
            await asyncio.sleep(quiet)
            await ws.send_str("bye\n")
            await ws.close(code=code)
            return ws
        return tail

    app = web.Application()
    app.router.add_get("/api/jobs/cut/logs/tail", closing(1011))
    app.router.add_get("/api/jobs/away/logs/tail", closing(1001))
    app.router.add_get("/api/jobs/quiet/logs/tail", closing(1000, quiet=3.0))
    with _serving(app, unused_tcp_port):
        client = RayClient("c", f"http://127.0.0.1:{unused_tcp_port}", timeout=1)
        for cut in ("cut", "away"):
            seen: list[str] = []
            with pytest.raises(ClusterRequestFailed, match="cut short"):
                client.follow(cut, seen.append)
            assert seen == ["hello\n", "bye\n"]
        quiet: list[str] = []
        client.follow("quiet", quiet.append)
        assert quiet == ["hello\n", "bye\n"]


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
    assert RayClient("c", ray_cluster.address).job("jobs-api-echo") is None  # Ray's 404: gone, not an error


def test_argus_plan_never_imports_ray(tmp_path) -> None:
    """Importing Ray costs more than everything else a command imports: the CLI's Ray adapter needs none of it."""
    code = ("import sys, reconcile.cli, reconcile.commands.plan, reconcile.commands.apply, state.ray.client, "
            "state.observe\nprint(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.fixture
def unused_tcp_port() -> int:
    from state.ray.local import _free_port

    return _free_port()


@contextlib.contextmanager
def _serving(app: Any, port: int) -> Iterator[None]:
    """An aiohttp app on loopback, in a thread of its own, for as long as the block runs."""
    from aiohttp import web

    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_silent_peer_while_following_is_reported_within_the_bound(unused_tcp_port: int) -> None:
    """A dashboard that accepts the log websocket, then says nothing and answers nothing, never closing:
    argus asks the REST path after `quiet_check` seconds and reports the silence within that plus the
    timeout. A quiet stream whose dashboard still answers is followed on (the quiet_check passes)."""
    from aiohttp import web

    async def silent_tail(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str("started\n")
        await asyncio.sleep(6)  # longer than the bound; short enough for the server's cleanup
        return ws

    async def quiet_tail(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await asyncio.sleep(2.5)
        await ws.send_str("late\n")
        await ws.close()
        return ws

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(6)  # longer than the bound; short enough for the server's cleanup
        return web.Response(text="{}")

    async def alive(request: web.Request) -> web.Response:
        return web.json_response({"submission_id": "quiet", "status": "RUNNING"})

    app = web.Application()
    app.router.add_get("/api/jobs/dead/logs/tail", silent_tail)
    app.router.add_get("/api/jobs/dead", hang)
    app.router.add_get("/api/jobs/quiet/logs/tail", quiet_tail)
    app.router.add_get("/api/jobs/quiet", alive)
    with _serving(app, unused_tcp_port):
        client = RayClient("c", f"http://127.0.0.1:{unused_tcp_port}", timeout=1)
        client._api.quiet_check = 1.0
        seen: list[str] = []
        started = time.monotonic()
        with pytest.raises(ClusterRequestFailed, match="the log stream went silent: no line for 1s"):
            client.follow("dead", seen.append)
        assert time.monotonic() - started < 1.0 + 1 + 1 + 3  # quiet_check + timeout + the probe's grace + slack
        assert seen == ["started\n"]
        quiet: list[str] = []
        client.follow("quiet", quiet.append)
        assert quiet == ["late\n"]
