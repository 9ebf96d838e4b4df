"""argus serve: the reconcile loop (reconcile.serve), with its notifier and HTTP endpoints."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from reconcile.commands.common import load
from reconcile.serve.loop import Loop, LoopSettings
from reconcile.serve.turn import TurnOptions
from reconcile.serve.watch import MIN_WATCH
from specs.errors import ArgusError


@dataclass(frozen=True)
class ServeOptions:
    turn: TurnOptions
    notify: tuple[str, ...] = ()
    listen: str | None = None
    once: bool = False
    log_format: Literal["text", "json"] = "text"
    watch: float = 1.0
    """Seconds between polls of each cluster's job list between turns (reconcile.serve.watch); 0: off."""
    public_url: str | None = None
    """The page's address behind a proxy, for the links in notifications; default: --listen's."""


def run(directory: Path, options: ServeOptions) -> int:
    from state.audit import log as audit

    if 0 < options.watch < MIN_WATCH:
        raise ArgusError(f"--watch {options.watch:g}: give 0 (no watch) or at least {MIN_WATCH:g} seconds "
                         "between polls.")
    if options.public_url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", options.public_url):
        raise ArgusError(f"--public-url {options.public_url!r}: give the page's address as people open it, like "
                         "https://argus.example.com/ (http:// or https://).")
    if options.turn.git_pull:  # a broken commit checked out before a restart is fixed by the next merge
        _pull_first(directory)
    desired = load(directory)  # a workspace that does not load now is an error now, not a loop of errors
    if not desired.shared_roots:
        raise ArgusError(f"{directory}: the workspace has no cluster, so no shared root to hold the loop's lease.")
    root = desired.shared_roots[sorted(desired.shared_roots)[0]]
    settings = LoopSettings(turn=options.turn, once=options.once, log_format=options.log_format, watch=options.watch)
    notifier = _notifier(options, root, desired)  # before the server: a bad URL is an error with no port bound
    server = _server(options.listen, desired.shared_roots, settings)
    if notifier is not None:
        notifier.links = _links(options, server, desired.root)
        settings.notify = notifier.deliver
    audit.act_as(f"argus serve@{socket.gethostname()}")
    try:
        return Loop(directory, root, desired.workspace.name, settings, loaded=desired).run()
    finally:
        audit.act_as(None)
        if server is not None:
            server.close()


def _pull_first(directory: Path) -> None:
    from state.code import checkout, safegit

    try:
        pulled = checkout.pull(directory)
    except safegit.GitError as err:
        print(f"argus serve: git pull failed ({err})", flush=True)
        return
    print(f"argus serve: {pulled.message}", flush=True)


def _notifier(options: ServeOptions, root: str, desired):
    """--notify's URLs and argus.yaml's routes; None when there are neither."""
    routes = desired.workspace.notifications
    if not options.notify and not routes.routes:
        return None
    from reconcile.serve.notify import Notifier

    return Notifier(list(options.notify), root, desired.workspace.name, routes=routes)


def _links(options: ServeOptions, server, workspace_root: str):
    """Page and log links (with --listen or --public-url), commit links (an origin on a web host)."""
    from reconcile.serve.links import Links, commit_base, page_url
    from state.code.gitinfo import origin_url

    page = None
    if options.public_url or server is not None:
        host = _host_port(options.listen)[0] if options.listen else ""
        page = page_url(options.public_url, socket.getfqdn() if host in ("0.0.0.0", "::") else host,
                        server.port if server is not None else 0)
    return Links(page_url=page, commit_base=commit_base(origin_url(str(workspace_root))))


def _server(listen: str | None, roots: dict[str, str], settings: LoopSettings):
    """With --listen: /metrics, /healthz and the status page, fed every report."""
    if listen is None:
        return None
    host, port = _host_port(listen)
    from reconcile.serve.http import StatusServer
    from reconcile.serve.metrics import Metrics

    metrics = Metrics()
    server = StatusServer(host, port, metrics=metrics, roots=roots)
    settings.publish.extend([metrics.record, server.publish])
    shown = f"[{host}]" if ":" in host else host
    print(f"argus serve: listening on http://{shown}:{server.port}/", flush=True)
    return server


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ArgusError(f"--listen {listen!r}: give HOST:PORT, like 127.0.0.1:9108 (port 0: any free port).")
    return host.strip("[]"), int(port)
