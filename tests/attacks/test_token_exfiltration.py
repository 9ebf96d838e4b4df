"""A pull request writes a cluster's address and its auth_token: it must not make `argus plan` send
the runner's other secrets (GITHUB_TOKEN, ~/.git-credentials) to a host of its choosing.

The "dashboard" here is a loopback HTTP receiver that records every byte it is sent; each attack
asserts that the secret never arrives there, not only that argus prints an error.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from state.ray.auth import TOKEN_HOSTS
from tests.support.cluster import QUICK
from tests.support.workspace import make_workspace

SECRET = "ghp_" + secrets.token_hex(18)


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Recorder)
        self.seen: list[str] = []

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Recorder(BaseHTTPRequestHandler):
    server: Receiver

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode(errors="replace") if length else ""
        self.server.seen.append(f"{self.requestline}\n{self.headers}\n{body}")
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def attack(argus, root: Path, address: str, auth_token: str):
    ws = make_workspace(root, "attacker", address)
    with open(ws.root / "cluster.yaml", "a") as spec:
        spec.write(f"auth_token: {auth_token}\n")
    ws.job("hello", QUICK)
    return argus("plan", ws.root)


def test_a_pull_request_cannot_send_the_runners_secrets_anywhere(argus, tmp_path, receiver, monkeypatch):
    home = Path(os.environ["HOME"])
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    (home / ".git-credentials").write_text(f"{SECRET}\n")  # one line, no spaces: it would pass as a token
    link = tmp_path / "checkout" / "ray.token"  # a symlink committed in the pull request
    link.parent.mkdir()
    link.symlink_to(home / ".git-credentials")
    for n, (reference, rule) in enumerate((
            ("${env:GITHUB_TOKEN}", "only a variable whose name contains RAY and TOKEN"),
            ("~/.git-credentials", "a token file must be named auth_token"),
            (str(home / ".git-credentials"), "a token file must be named auth_token"),
            (str(link), "is a link to a file of another name"))):
        result = attack(argus, tmp_path / f"ws{n}", receiver.address, reference)
        assert not any(SECRET in request for request in receiver.seen), f"{reference} reached the attacker's host"
        assert result.code == 1, result.out
        assert rule in result.out + result.err
        assert SECRET not in result.out + result.err


def test_tokens_go_only_to_the_dashboards_the_operator_pinned(argus, tmp_path, receiver, monkeypatch):
    """A Ray token is the one secret a pull request may name; ARGUS_TOKEN_HOSTS keeps it at home."""
    monkeypatch.setenv("PROD_RAY_TOKEN", SECRET)
    monkeypatch.setenv(TOKEN_HOSTS, "ray-head.internal:8265, 10.0.0.5:8265")
    result = attack(argus, tmp_path / "ws", receiver.address, "${env:PROD_RAY_TOKEN}")
    assert result.code == 1
    host = receiver.address.removeprefix("http://")
    assert f"argus sends tokens only to the dashboards in {TOKEN_HOSTS}" in result.err
    assert f"{host} is not one of them" in result.err
    assert receiver.seen == [], "nothing at all is sent to a dashboard that may not have the token"
    assert SECRET not in result.out + result.err

    monkeypatch.setenv(TOKEN_HOSTS, host)  # pinned: now it is sent, to that host only
    attack(argus, tmp_path / "pinned", receiver.address, "${env:PROD_RAY_TOKEN}")
    assert receiver.seen and all(f"Bearer {SECRET}" in request for request in receiver.seen)
