"""`argus serve --listen HOST:PORT`: /metrics, /healthz, the status page and the runs' logs. Read-only.

A ThreadingHTTPServer in a daemon thread. The loop publishes each turn's report; a request reads
whichever report is current (one attribute, swapped whole), so it never sees half a turn. Whoever
can reach the port can read the page and the logs of this workspace's runs, nothing else: a log is
served only for a submission id that is a run of the current report, looked up, never joined to a path.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from reconcile.model import RunView
from reconcile.report import TurnReport
from reconcile.serve.metrics import CONTENT_TYPE, Metrics
from reconcile.views.html import render_page
from specs.errors import ArgusError
from specs.submission import SUBMISSION_ID_PATTERN
from state.runs import logs as run_logs

HEALTHY_INTERVALS = 3
"""/healthz fails when no turn has succeeded for this many intervals."""
LOG_BYTES = 256 * 1024
"""How much of a driver log's end /logs/<submission_id> shows."""
REQUEST_TIMEOUT = 10.0
"""A client that sends nothing for this long is dropped, so slow clients can't pile up threads."""
HEADERS = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
           ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"))
"""On every reply: no scripts, no framing, and a log is never sniffed into HTML."""
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class StatusServer:
    def __init__(self, host: str, port: int, metrics: Metrics, roots: Mapping[str, str]):
        """`roots`: cluster name -> its shared root, where the runs' logs are."""
        self.metrics, self.roots = metrics, dict(roots)
        self._report: TurnReport | None = None
        self._last_ok: TurnReport | None = None
        try:
            self._httpd = (_Server6 if ":" in host else _Server)((host, port), _handler(self))
        except OSError as err:
            raise ArgusError(f"--listen {host}:{port}: cannot listen there ({err.strerror or err}); "
                             "choose another address or port (port 0: any free port).") from err
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="argus-http", daemon=True)
        self._thread.start()

    def publish(self, report: TurnReport) -> None:
        """The loop calls this with every report."""
        if report.ok:
            self._last_ok = report
        self._report = report

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def respond(self, target: str) -> Reply:
        """The reply to a GET of `target` (path and query, as the request line has it)."""
        path = urlsplit(target).path
        if path == "/":
            return Reply(200, "text/html; charset=utf-8", render_page(self._report, time.time()).encode())
        if path == "/metrics":
            return Reply(200, CONTENT_TYPE, self.metrics.exposition())
        if path == "/healthz":
            return self._health(self._report, self._last_ok, time.time())
        if path.startswith("/logs/"):
            return self._log(unquote(path.removeprefix("/logs/")))
        return _text(404, "not found: try /, /metrics or /healthz\n")

    @staticmethod
    def _health(report: TurnReport | None, last_ok: TurnReport | None, now: float) -> Reply:
        if report is None:
            return _text(503, "no turn has finished yet\n")
        standby = next((n for n in report.notes if n.startswith("standby: ")), None)
        if standby is not None and report.plan is None:  # healthy, but not the loop that acts: say who is
            return _text(200, f"ok, {standby}\n")
        failed = "" if report.ok else f"; the last turn failed: {report.error or 'no reason given'}"
        if last_ok is None:
            return _text(503, f"no turn has succeeded yet{failed}\n")
        age, limit = now - last_ok.finished_at, HEALTHY_INTERVALS * last_ok.interval
        if age <= limit:
            return _text(200, "ok\n")
        return _text(503, f"the last successful turn finished {age:.0f} s ago, more than {HEALTHY_INTERVALS} "
                          f"intervals ({limit:g} s){failed}\n")

    def _log(self, submission_id: str) -> Reply:
        run = self._run(submission_id)
        root = self.roots.get(run.cluster) if run is not None else None
        if run is None or root is None or not SUBMISSION_ID_PATTERN.fullmatch(run.submission_id):
            return _text(404, "no run of this workspace has that submission id\n")
        text = run_logs.tail(root, run.submission_id, LOG_BYTES)
        return _text(200, text or f"{run.submission_id} has no driver log on the shared root of {run.cluster}\n")

    def _run(self, submission_id: str) -> RunView | None:
        report = self._report
        runs = report.runs.values() if report is not None else ()
        return next((r for job_runs in runs for r in job_runs if r.submission_id == submission_id), None)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host up in DNS (getfqdn), which can hang: the name is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class _Server6(_Server):
    address_family = socket.AF_INET6


def _handler(server: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version, sys_version, timeout = "argus", "", REQUEST_TIMEOUT

        def do_GET(self) -> None:
            self._send(self._reply(), body=True)

        def do_HEAD(self) -> None:
            self._send(self._reply(), body=False)

        def __getattr__(self, name: str):
            if name.startswith("do_"):  # every other method: read-only
                return lambda: self._send(_text(405, "read-only: GET or HEAD\n", (("Allow", "GET, HEAD"),)), True)
            raise AttributeError(name)

        def _reply(self) -> Reply:
            try:
                return server.respond(self.path)
            except Exception:  # a bug answers 500 and leaves the server up
                traceback.print_exc(file=sys.stderr)
                return _text(500, "internal error: see argus serve's log\n")

        def _send(self, reply: Reply, body: bool) -> None:
            self.send_response(reply.status)
            for name, value in (("Content-Type", reply.content_type), *HEADERS, *reply.headers):
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            if body:
                self.wfile.write(reply.body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the loop logs one line per turn, not one per scrape."""

    return Handler


def _text(status: int, text: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, TEXT, text.encode("utf-8", errors="replace"), headers)
