"""Loopback HTTP receivers of argus's notifications, and what they are sent: `Receiver`, a server on
127.0.0.1 that keeps every request and answers with the statuses a test asks for; `webhook`, a JSON
webhook that keeps the argus events it is sent (conftest's `hook` fixture); and `event`, a notification
event as the loop makes one (a failed attempt, its evidence, advice and next step). The notification,
serve-loop, drift and ARGUS_ROOT_KEY tests build on them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from reconcile.report import Event

EVIDENCE = ("[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)",
            "RuntimeError: NCCL communicator was aborted on rank 0.")


def event(kind: str = "failed", sid: str = "ws.train.h.1", **fields: object) -> Event:
    defaults = {"job": "train", "cluster": "prod", "submission_id": sid, "attempt": 1, "max_attempts": 3,
                "failure": "nccl_timeout", "evidence": EVIDENCE, "advice": "check the interconnect",
                "next": "retries it as attempt 2 of 3, from its checkpoint directory", "commit": "0123456789abcdef"}
    return Event(kind=kind, key=f"ws:{kind}:{sid}", workspace="ws", summary=f"job.train: attempt 1 {kind}",
                 time="2027-01-15T08:00:00+00:00", **{**defaults, **fields})


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps what it is sent and answers `status` (a list: one a request)."""

    def __init__(self, statuses: list[int] | None = None):
        self.received: list[dict] = []
        self.statuses = list(statuses or [])
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                receiver.received.append({"path": self.path, "headers": dict(self.headers),
                                          "body": self.rfile.read(length).decode()})
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[dict]:
        """The argus events that arrived at a json:// URL."""
        return [json.loads(json.loads(r["body"])["message"]) for r in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Hook(BaseHTTPRequestHandler):
    """A JSON webhook on loopback: keeps every argus event it is sent."""

    events: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).events.append(json.loads(body["message"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def webhook() -> Iterator[tuple[str, list[dict]]]:
    """A Hook on a free loopback port: its json:// URL and the events it keeps (conftest's `hook` fixture)."""
    Hook.events = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"json://127.0.0.1:{server.server_address[1]}/argus", Hook.events
    finally:
        server.shutdown()
        server.server_close()
