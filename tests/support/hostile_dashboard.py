"""A hostile Ray dashboard on loopback, for tests: a real HTTP server in a thread that either answers
itself or passes requests on to a real dashboard (`upstream`), and meanwhile adds rows to the job table,
refuses chosen requests, fails the first tries of every request, or streams answers of any size.
Everything that arrives is recorded: tests assert what argus asked for, not only what it printed."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Writer = Callable[[BaseHTTPRequestHandler], None]


class HostileDashboard:
    def __init__(self, upstream: str | None = None) -> None:
        self.upstream = urlsplit(upstream) if upstream else None
        version = json.dumps({"ray_version": "2.60.0"})
        self.answers: dict[str, tuple[int, str] | Writer] = {"/api/version": (200, version)}
        """Path (query included) -> (status, body), or a function that writes the whole answer itself."""
        self.extra_rows: list[dict[str, Any]] = []
        """Rows added to every job list the upstream answers."""
        self.refused: dict[tuple[str, str], str] = {}
        """(method, path) -> the error text answered with 500, whatever the upstream would say."""
        self.fail_first = 0
        """The first N requests of each path fail: the connection is held until cut (`hang`) or closed."""
        self.fail_how = "hang"
        self.seen: list[tuple[str, str]] = []
        self.tries: dict[str, int] = {}
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                dashboard.handle(self, body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        method, path = handler.command, handler.path
        with self._lock:
            self.seen.append((method, path))
            self.tries[path] = self.tries.get(path, 0) + 1
            failing = self.tries[path] <= self.fail_first
        if failing:
            if self.fail_how == "hang":
                self.stopping.wait(60)
            handler.close_connection = True
            return
        if (method, path) in self.refused:
            return send(handler, 500, f"Traceback (most recent call last):\n{self.refused[method, path]}")
        answer = self.answers.get(path)
        if callable(answer):
            return answer(handler)
        if answer is not None:
            return send(handler, *answer)
        if self.upstream is None:
            return send(handler, 404, "Not Found")
        status, text = self._forward(method, path, body, handler.headers.get("Content-Type"))
        if method == "GET" and path == "/api/jobs/" and status == 200 and self.extra_rows:
            text = json.dumps(json.loads(text) + self.extra_rows)
        send(handler, status, text)

    def _forward(self, method: str, path: str, body: bytes, content_type: str | None) -> tuple[int, str]:
        assert self.upstream is not None
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            conn.request(method, path, body=body or None, headers={"Content-Type": content_type or "application/json"})
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def requests_naming(self, fragment: str) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.seen if fragment in p]

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, text: str) -> None:
    data = text.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def endless(total: int, declared: bool) -> Writer:
    """An answer of `total` bytes of a JSON list, made as it is sent (the test holds none of it); with its
    length declared, or chunked with none."""
    piece = b'{"type": "SUBMISSION", "submission_id": "x", "status": "RUNNING"},' * 1000

    def write(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if declared:
            handler.send_header("Content-Length", str(total))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        try:
            while sent < total:
                chunk = (b"[" if sent == 0 else b"") + piece
                handler.wfile.write(chunk if declared else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except OSError:
            pass  # argus hung up: that is the point
        handler.close_connection = True

    return write
