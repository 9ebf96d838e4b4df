"""state.ray.versions: the supported Ray range, and the one warning a head outside it (or lacking what a
feature reads) gives. Pure function, then through a loopback dashboard's real /api/version answer."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from state.ray.client import RayClient
from state.ray.versions import version_warning

CURRENT = {"version": "4", "ray_version": "2.60.0", "ray_commit": "x", "session_name": "session_2026"}


def test_the_pinned_ray_head_gives_no_warning_on_any_command(ray_cluster, workspace, argus) -> None:
    """Issue 37: the real head the tests start (the Ray argus pins) says Jobs API "4": no warning, anywhere."""
    state = RayClient("local", ray_cluster.address, timeout=30).snapshot()
    assert state.ray_version.startswith("2.60") and state.version_warning == ""
    for command in (("plan", workspace.root), ("status", workspace.root)):
        shown = argus(*command)
        assert "Upgrade the head" not in shown.out + shown.err and "not one argus fully supports" not in shown.out


def test_a_supported_head_gives_no_warning() -> None:
    assert version_warning(CURRENT) == ""
    assert version_warning({**CURRENT, "ray_version": "2.9.3", "version": "3"}) == ""


@pytest.mark.parametrize(("body", "says"), [
    ({**CURRENT, "ray_version": "2.8.1"}, "runs Ray 2.8.1, outside the supported Ray 2.9 to 2.60"),
    ({**CURRENT, "ray_version": "3.0.0"}, "runs Ray 3.0.0, outside"),
    ({**CURRENT, "ray_version": 5}, "its Ray version is not given"),
    ({**CURRENT, "version": "5"}, "its Jobs API version is '5'"),
    ({k: v for k, v in CURRENT.items() if k != "session_name"}, "lost: head-restart detection (no session_name)"),
])
def test_each_gap_is_named_in_one_warning(body: dict[str, Any], says: str) -> None:
    warning = version_warning(body)
    assert says in warning and warning.count("Upgrade the head") == 1


def test_a_snapshot_of_an_old_head_carries_the_warning() -> None:
    answers = {"/api/version": {"version": "3", "ray_version": "2.7.0"}, "/api/jobs/": [],
               "/api/v0/nodes?limit=10000&detail=true": {"data": {"result": {"result": []}}},
               "/api/cluster_status": {"data": {}}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            text = json.dumps(answers.get(self.path, {})).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = RayClient("old", f"http://127.0.0.1:{server.server_address[1]}", timeout=5).snapshot()
    finally:
        server.shutdown()
        server.server_close()
    assert "Ray 2.7.0, outside the supported" in state.version_warning
    assert "head-restart detection" in state.version_warning

