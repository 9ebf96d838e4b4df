"""`argus serve --listen HOST:PORT`: /metrics, /healthz, the status page and the runs' logs. Read-only.

A ThreadingHTTPServer in a daemon thread. The loop publishes each turn's report; a request reads
whichever report is current (one attribute, swapped whole), so it never sees half a turn. Whoever
can reach the port can read the page and the logs of the kept workspaces' runs, nothing else: a log is
served only for a submission id that is a run of a kept workspace's current report, looked up, never
joined to a path. With several workspaces (reconcile.serve.loops) each loop publishes its own
reports; the page groups them by cluster (reconcile.views.cluster_html), /healthz has a line each.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from reconcile.model import RunView
from reconcile.report import TurnReport
from reconcile.serve.metrics import CONTENT_TYPE, Metrics
from reconcile.views.cluster_html import Shown, cluster_pages, render_cluster, render_index, state_of
from reconcile.views.html import Kept, render_page
from reconcile.views.incident import render as render_analysis
from specs.diagnostics import plain
from specs.errors import ArgusError
from specs.workloads.submission import SUBMISSION_ID_PATTERN
from state.runs import logs as run_logs

HEALTHY_INTERVALS = 3
"""/healthz fails when no turn has succeeded for this many intervals."""
LOG_BYTES = 256 * 1024
"""How much of a driver log's end /logs/<submission_id> shows."""
REQUEST_TIMEOUT = 10.0
MAX_ANALYSES = 512
"""Analysis reports /report/<id> keeps: the newest runs' (each a few KiB)."""
"""A client that sends nothing for this long is dropped, so slow clients can't pile up threads."""
HEADERS = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
           ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"))
"""On every reply: no scripts, no framing, and a log is never sniffed into HTML."""
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class StatusServer:
    def __init__(self, host: str, port: int, metrics: Metrics, roots: Mapping[str, str] | None = None,
                 kept: Sequence[Kept] = ()):
        """`kept`: the workspaces this serve keeps (their clusters' dashboards and shared roots, their git
        remotes). `roots` (cluster name -> shared root) stands for the clusters of a workspace not in `kept`
        (one workspace's server, as tests build it)."""
        self.metrics, self.roots = metrics, dict(roots or {})
        self.kept = {k.workspace: k for k in kept}
        self._reports: dict[str, TurnReport] = {}
        self._last_ok: dict[str, TurnReport] = {}
        self._crashed: dict[str, str] = {}
        self._analyses: dict[str, dict] = {}
        """Submission id -> the analysis report its newest event carried, oldest first (at most MAX_ANALYSES)."""
        self._analyses_lock = threading.Lock()
        try:
            self._httpd = (_Server6 if ":" in host else _Server)((host, port), _handler(self))
        except OSError as err:
            raise ArgusError(f"--listen {host}:{port}: cannot listen there ({err.strerror or err}); "
                             "choose another address or port (port 0: any free port).") from err
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="argus-http", daemon=True)
        self._thread.start()

    def publish(self, report: TurnReport) -> None:
        """Each loop calls this with every report (from its own thread): one dict entry swapped whole."""
        if report.ok:
            self._last_ok[report.workspace] = report
        self._reports[report.workspace] = report
        with self._analyses_lock:  # the analysis each event carried: /report/<submission_id> shows it
            for told in (e for e in report.events if e.report and e.submission_id):
                self._analyses.pop(told.submission_id, None)
                self._analyses[told.submission_id] = told.report
            while len(self._analyses) > MAX_ANALYSES:
                self._analyses.pop(next(iter(self._analyses)))

    def crashed(self, workspace: str, reason: str) -> None:
        """A loop that died (reconcile.serve.loops): /healthz names it until the process ends."""
        self._crashed[workspace] = reason

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def respond(self, target: str) -> Reply:
        """The reply to a GET of `target` (path and query, as the request line has it)."""
        path = urlsplit(target).path
        if path == "/" or path.startswith("/clusters/"):
            return self._page(path, time.time())
        if path == "/metrics":
            return Reply(200, CONTENT_TYPE, self.metrics.exposition())
        if path == "/healthz":
            return self._healthz(time.time())
        if path.startswith("/logs/"):
            return self._log(unquote(path.removeprefix("/logs/")))
        if path.startswith("/report/"):
            return self._analysis(unquote(path.removeprefix("/report/")))
        return _text(404, "not found: try /, /metrics or /healthz\n")

    def _shown(self) -> list[Shown]:
        reports = dict(self._reports)  # a copy: a loop's first publish adds a key while a request reads
        return [Shown(self.kept.get(ws) or Kept(ws), reports.get(ws), self._crashed.get(ws))
                for ws in sorted({*self.kept, *reports, *self._crashed})]  # one not served is shown, with why

    def _page(self, path: str, now: float) -> Reply:
        pages = cluster_pages(self._shown())
        if path == "/":
            html = (render_page(None, now) if not pages else render_cluster(pages[0], now) if len(pages) == 1
                    else render_index(pages, now))
            return Reply(200, HTML, html.encode())
        slug = unquote(path.removeprefix("/clusters/"))
        page = next((p for p in pages if p.slug == slug), None)
        if page is None:
            return _text(404, "no cluster of the kept workspaces has that name: see /\n")
        return Reply(200, HTML, render_cluster(page, now).encode())

    def _healthz(self, now: float) -> Reply:
        """One workspace: as it always was. Several: a line each, 200 only when every one is healthy."""
        shown = self._shown()
        if len(shown) <= 1:
            ws = shown[0].kept.workspace if shown else ""
            if not self._crashed.get(ws):
                return self._health(self._reports.get(ws), self._last_ok.get(ws), now)
        if not shown:
            return _text(503, "no turn has finished yet\n")
        lines = [(ws_health(s, self._last_ok.get(s.kept.workspace), now)) for s in shown]
        sick = [s.kept.workspace for s, (healthy, _line) in zip(shown, lines, strict=True) if not healthy]
        head = "ok" if not sick else f"unhealthy: {', '.join(sick)}"
        return _text(503 if sick else 200, "\n".join([head, *(line for _ok, line in lines)]) + "\n")

    @staticmethod
    def _health(report: TurnReport | None, last_ok: TurnReport | None, now: float) -> Reply:
        if report is None:
            return _text(503, "no turn has finished yet\n")
        standby = next((n for n in report.notes if n.startswith("standby: ")), None)
        if standby is not None and report.plan is None:  # healthy, but not the loop that acts: say who is
            if report.standby == "nobody":  # and nobody acts: this loop cannot take the lease (its log says why)
                return _text(503, "standby, and no loop holds the lease of this workspace: this one cannot take "
                                  "it (a shared root never laid out by `argus apply`, or one it cannot write; "
                                  "see serve's log)\n")
            return _text(200, f"ok, {standby}\n")
        failed = "" if report.ok else f"; the last turn failed: {report.error or 'no reason given'}"
        if report.incidents:
            return _text(503, "".join(f"incident: {plain(i.summary, lines=False)}\n" for i in report.incidents))
        if last_ok is None:
            return _text(503, f"no turn has succeeded yet{failed}\n")
        age, limit = now - last_ok.finished_at, HEALTHY_INTERVALS * last_ok.interval
        if age <= limit:
            return _text(200, "ok\n")
        return _text(503, f"the last successful turn finished {age:.0f} s ago, more than {HEALTHY_INTERVALS} "
                          f"intervals ({limit:g} s){failed}\n")

    def _log(self, submission_id: str) -> Reply:
        found = self._run(submission_id)
        workspace, run = found if found is not None else ("", None)
        kept = self.kept.get(workspace)
        site = kept.clusters.get(run.cluster) if kept is not None and run is not None else None
        root = site.root if site is not None else self.roots.get(run.cluster) if run is not None else None
        if run is None or root is None or not SUBMISSION_ID_PATTERN.fullmatch(run.submission_id):
            return _text(404, "no run of a kept workspace has that submission id\n")
        text = run_logs.tail(root, run.submission_id, LOG_BYTES)
        return _text(200, text or f"{run.submission_id} has no driver log on the shared root of {run.cluster}\n")

    def _analysis(self, submission_id: str) -> Reply:
        """The analysis report of a run's interruption as the loop's event carried it (what argus does next
        included), as `argus status --run` prints it."""
        with self._analyses_lock:
            found = self._analyses.get(submission_id)
        if found is None:
            return _text(404, "this serve told no interruption of that run since it started: "
                              f"`argus status DIR --run {plain(submission_id, lines=False)[:200]}` reads its record\n")
        return _text(200, render_analysis(found) + "\n")

    def _run(self, submission_id: str) -> tuple[str, RunView] | None:
        """Looked up among the kept workspaces' runs, never joined to a path."""
        for workspace, report in sorted(dict(self._reports).items()):
            for job_runs in report.runs.values():
                for run in job_runs:
                    if run.submission_id == submission_id:
                        return workspace, run
        return None


def ws_health(shown: Shown, last_ok: TurnReport | None, now: float) -> tuple[bool, str]:
    """(healthy, `name: words`): active and recent, or standby for a live holder and recent itself."""
    ws, report = shown.kept.workspace, shown.report
    state = plain(state_of(shown), lines=False)
    if shown.crashed is not None or report is None:
        return False, f"{ws}: {state}"
    limit = HEALTHY_INTERVALS * report.interval
    if report.standby is not None and report.plan is None:
        if report.standby == "nobody":
            return False, f"{ws}: standby, and no loop holds its lease"
        recent = now - report.finished_at <= limit
        return recent, f"{ws}: {state}" + ("" if recent else f", last seen {now - report.finished_at:.0f} s ago")
    if last_ok is None:
        return False, f"{ws}: {state}; no turn has succeeded yet"
    if report.incidents:
        return False, f"{ws}: " + "; ".join(f"incident: {plain(i.summary, lines=False)}" for i in report.incidents)
    age = now - last_ok.finished_at
    if age <= limit:
        return True, f"{ws}: active ok" if report.ok else f"{ws}: {state}"
    return False, f"{ws}: {state}; the last successful turn finished {age:.0f} s ago, more than " \
                  f"{HEALTHY_INTERVALS} intervals ({limit:g} s)"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away mid-reply (a closed tab, a scraper's timeout) is nobody's error: nothing is
        logged. Anything else is one plain line, never a traceback: with --log-format json each line of
        serve's log must be one JSON object, and socketserver would print many lines."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        print(plain(f"argus serve: status page: {type(error).__name__}: {error}", lines=False), file=sys.stderr,
              flush=True)

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
