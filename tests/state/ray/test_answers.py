"""Submit, stop and delete answers are checked: a loopback dashboard answering 200 with shapes Ray never
sends (a proxy's login page, a hostile server) gets an error, and nothing is taken as done."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from state.ray.client import ClusterRequestFailed, RayClient


@pytest.fixture
def hostile() -> Iterator[tuple[str, dict[str, tuple[int, str]], list[str]]]:
    answers: dict[str, tuple[int, str]] = {"/api/version": (200, json.dumps({"ray_version": "2.60.0"}))}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            seen.append(f"{self.command} {self.path}")
            status, text = answers.get(f"{self.command} {self.path}", (404, "Not Found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(text.encode())))
            self.end_headers()
            self.wfile.write(text.encode())

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answers, seen
    server.shutdown()
    server.server_close()


PAYLOAD = {"entrypoint": "true", "metadata": {"argus.run": "x"}}


@pytest.mark.parametrize("body", ["<html>login</html>", "{}", json.dumps({"submission_id": "other"}),
                                  json.dumps({"submission_id": 7}), json.dumps(["a"])])
def test_a_submit_answered_with_a_wrong_shape_is_not_submitted(hostile, body: str) -> None:
    address, answers, seen = hostile
    answers["POST /api/jobs/"] = (200, body)
    with pytest.raises(ClusterRequestFailed, match="not known to be submitted") as err:
        RayClient("c", address, timeout=5).submit("mine", PAYLOAD)
    assert "as not done" in str(err.value) and seen == ["POST /api/jobs/"]


def test_the_right_submit_answer_is_submitted(hostile) -> None:
    address, answers, _ = hostile
    answers["POST /api/jobs/"] = (200, json.dumps({"submission_id": "mine", "job_id": None}))
    assert RayClient("c", address, timeout=5).submit("mine", PAYLOAD) == "submitted"


@pytest.mark.parametrize("body", ["OK", "{}", json.dumps({"stopped": "yes"}), json.dumps({"deleted": True})])
def test_a_stop_answered_with_a_wrong_shape_is_an_error(hostile, body: str) -> None:
    address, answers, _ = hostile
    answers["POST /api/jobs/j/stop"] = (200, body)
    with pytest.raises(ClusterRequestFailed, match=r'not Ray\'s \{"stopped": true\|false\}'):
        RayClient("c", address, timeout=5).stop("j")


@pytest.mark.parametrize("body", ["OK", "{}", json.dumps({"deleted": 1}), json.dumps({"deleted": False})])
def test_a_delete_not_confirmed_is_an_error(hostile, body: str) -> None:
    address, answers, _ = hostile
    answers["DELETE /api/jobs/j"] = (200, body)
    with pytest.raises(ClusterRequestFailed):
        RayClient("c", address, timeout=5).delete("j")


def test_rays_own_stop_and_delete_answers_are_taken(hostile) -> None:
    address, answers, seen = hostile
    answers["POST /api/jobs/j/stop"] = (200, json.dumps({"stopped": False}))
    answers["DELETE /api/jobs/j"] = (200, json.dumps({"deleted": True}))
    client = RayClient("c", address, timeout=5)
    client.stop("j")
    client.delete("j")
    assert seen == ["POST /api/jobs/j/stop", "DELETE /api/jobs/j"]
