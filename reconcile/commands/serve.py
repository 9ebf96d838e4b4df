"""argus serve: the reconcile loop (reconcile.serve), with its notifier and HTTP endpoints; with several
workspaces (DIRs, or a repository root standing for those under it), a loop and a lease each in one process
(reconcile.serve.loops) and one HTTP server whose page groups them by cluster (docs/serve.md)."""

from __future__ import annotations

import re
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from reconcile.commands.common import load
from reconcile.serve.loop import Loop, LoopSettings
from reconcile.serve.secret_lists import SecretLists
from reconcile.serve.turn import TurnOptions
from reconcile.serve.watch import MIN_WATCH
from specs.diagnostics import printable
from specs.errors import ArgusError
from specs.load.workspaces import SameName
from state.queue.sent_events import SentLedger

if TYPE_CHECKING:
    from reconcile.serve.http import StatusServer
    from reconcile.views.html import Kept
    from specs.desired import DesiredState


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
    shared_secrets: tuple[str, ...] = ()
    """Variables several served workspaces may all list in `secrets:` (reconcile.serve.secret_lists)."""


def run(directories: list[Path], options: ServeOptions) -> int:
    """One workspace, or several (a DIR holding none stands for every workspace under it): one Loop and
    one lease each, in one process with one HTTP server (reconcile.serve.loops)."""
    from reconcile.serve.loops import run_all
    from state.audit import log as audit

    if 0 < options.watch < MIN_WATCH:
        raise ArgusError(f"--watch {options.watch:g}: give 0 (no watch) or at least {MIN_WATCH:g} seconds "
                         "between polls.")
    if options.public_url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", options.public_url):
        raise ArgusError(f"--public-url {options.public_url!r}: give the page's address as people open it, like "
                         "https://argus.example.com/ (http:// or https://).")
    loaded, broken = _loaded(_directories(directories), options)
    lists, loaded = _apart(loaded, options, broken)
    kept, notifiers = _notified(_owned(_one_per_name(loaded)), options, broken)
    server, publish = _server(options.listen, kept)
    for shown, err in broken:  # each one's error, on the page and /healthz; the others run
        if server is not None:
            server.crashed(shown, f"not served: {err}")
    admit = lists.admit if len(kept) > 1 else None  # each turn's lists, against the other workspaces'
    loops = [_loop(directory, desired, options, publish, notifier, server, admit)
             for (directory, desired), notifier in zip(kept, notifiers, strict=True)]
    audit.act_as(f"argus serve@{socket.gethostname()}")
    try:
        code = run_all(loops, crashed=server.crashed if server is not None else None)
        return max(code, 1 if broken else 0)  # the others ran; a workspace not served is still an error
    finally:
        audit.act_as(None)
        if server is not None:
            server.close()


def _loaded(directories: list[Path], options: ServeOptions) -> tuple[list[tuple[Path, DesiredState]],
                                                                      list[tuple[str, ArgusError]]]:
    """Each workspace that loads; one that does not is its own error, said, and the others start (alone, it is
    the command's error, as it always was)."""
    from reconcile.boundary import contained

    if len(directories) == 1:
        return [_workspace(directories[0], options)], []
    loaded, broken = [], []
    for directory in directories:
        found: list[tuple[Path, DesiredState]] = []
        # the boundary prints its error as it prints any; the others are still served
        _code, err = contained(lambda d=directory, into=found: into.append(_workspace(d, options)) or 0)
        if err is None:
            loaded += found
        else:
            print(f"argus serve: not serving {printable(str(directory))}", file=sys.stderr, flush=True)
            broken.append((str(directory), err))
    if not loaded:
        raise ArgusError("no workspace to serve: " + "; ".join(f"{shown}: {err}" for shown, err in broken))
    return loaded, broken


def _apart(loaded: list[tuple[Path, DesiredState]], options: ServeOptions,
           broken: list[tuple[str, ArgusError]]) -> tuple[SecretLists, list[tuple[Path, DesiredState]]]:
    """The workspaces whose variables (`secrets:`, routes) no other served workspace names: two that name one
    are both refused (nobody can tell at start whose it is), said; the others start."""
    lists, refused = SecretLists.serving_apart([d for _directory, d in loaded], options.shared_secrets)
    said = list(dict.fromkeys(refused.values()))
    if refused and all(d.workspace.name in refused for _directory, d in loaded):
        raise ArgusError("\n".join(said))
    for why in said:
        print(f"argus serve: {why}", file=sys.stderr, flush=True)
    broken += [(name, ArgusError(why)) for name, why in sorted(refused.items())]
    return lists, [(directory, d) for directory, d in loaded if d.workspace.name not in refused]


def _notified(kept: list[tuple[Path, DesiredState]], options: ServeOptions,
              broken: list[tuple[str, ArgusError]]) -> tuple[list[tuple[Path, DesiredState]], list]:
    """Each workspace with its notifier. A --notify URL apprise cannot use is every workspace's error (the
    command's); a route of one workspace that cannot be used (its variable unset) is that workspace's."""
    from reconcile.serve.channels import NotifyError
    from reconcile.serve.notify import Notifier

    if options.notify:  # checked alone first: a bad one is nobody's in particular
        first = kept[0][1]
        Notifier(list(options.notify), _root(first), first.workspace.name)
    served, notifiers = [], []
    for directory, desired in kept:
        try:
            notifiers.append(_notifier(options, _root(desired), desired))  # a bad URL: no port bound
        except NotifyError as err:
            if len(kept) == 1:
                raise
            print(f"argus serve: not serving {printable(str(directory))}: {err}", file=sys.stderr, flush=True)
            broken.append((desired.workspace.name, err))
            continue
        served.append((directory, desired))
    return served, notifiers


def _directories(directories: list[Path]) -> list[Path]:
    """The workspaces to serve; one whose `name:` another workspace of its repository gives too is refused
    (said, and left out): the others start."""
    from reconcile.commands.several import expand

    found = expand(directories or [Path(".")])
    if found is None:
        return list(directories or [Path(".")])
    for workspace in found:
        if workspace.twin is not None:
            print(f"argus serve: not serving {printable(workspace.shown)}: {workspace.twin}", file=sys.stderr,
                  flush=True)
    served = [workspace.path for workspace in found if workspace.twin is None]
    if not served:
        raise SameName([workspace.twin for workspace in found if workspace.twin is not None])
    return served


def _one_per_name(kept: list[tuple[Path, DesiredState]]) -> list[tuple[Path, DesiredState]]:
    """Each workspace name once: each has one lease, so one serve keeps it once. Workspaces of a name given
    twice (two repositories' directories) are refused, said, and left out; the others start."""
    names = [desired.workspace.name for _directory, desired in kept]
    twice = sorted({name for name in names if names.count(name) > 1})
    for name in twice:
        shown = ", ".join(printable(str(d)) for d, desired in kept if desired.workspace.name == name)
        print(f"argus serve: not serving workspace name {name!r}: given by {shown} (each workspace its own "
              "`name:`, docs/workspaces.md)", file=sys.stderr, flush=True)
    served = [(d, desired) for d, desired in kept if desired.workspace.name not in twice]
    if not served:
        raise ArgusError(f"workspace name(s) {', '.join(twice)} given twice: each workspace has one lease, so "
                         "one serve keeps it once; give each workspace its own `name:`.")
    return served


def _owned(kept: list[tuple[Path, DesiredState]]) -> list[tuple[Path, DesiredState]]:
    """Workspaces whose name another repository or directory claims on the lease's root are not served: their
    turns could do nothing, and their lease would keep the owner's serve on standby (state.claims)."""
    served = []
    for directory, desired in kept:
        owner = _claimed_by_other(desired)
        if owner is None:
            served.append((directory, desired))
            continue
        print(f"argus serve: not serving {printable(str(directory))}: workspace name {desired.workspace.name!r} is "
              f"claimed on {printable(_root(desired))} by {printable(owner)} (`argus claim --move-from` moves a "
              "name on purpose, docs/workspaces.md)", file=sys.stderr, flush=True)
    if not served:
        raise ArgusError("no workspace to serve: each one's name is claimed by another repository or directory.")
    return served


def _claimed_by_other(desired: DesiredState) -> str | None:
    """Who owns the name on the lease's root, if another does (a claim argus cannot trust is left to the plan)."""
    from state import claims

    seen = claims.read(_root(desired), desired.workspace.name)
    if seen.owner is None or claims.is_ours(seen.owner, claims.owner_of(desired.root), desired.root):
        return None
    return f"{seen.owner.repository} {seen.owner.directory}"


def _workspace(directory: Path, options: ServeOptions) -> tuple[Path, DesiredState]:
    if options.turn.git_pull:  # a broken commit checked out before a restart is fixed by the next merge
        _pull_first(directory)
    desired = load(directory)  # a workspace that does not load now is an error now, not a loop of errors
    if not desired.shared_roots:
        raise ArgusError(f"{directory}: the workspace has no cluster, so no shared root to hold the loop's lease.")
    return directory, desired


def _loop(directory: Path, desired: DesiredState, options: ServeOptions, publish: list, notifier,
          server: StatusServer | None, admit: Callable[[DesiredState], None] | None) -> Loop:
    settings = LoopSettings(turn=options.turn, once=options.once, log_format=options.log_format, watch=options.watch,
                            admit=admit, first_start=notifier is not None and not options.once
                            and not SentLedger(_root(desired), desired.workspace.name).ever_sent())
    settings.publish.extend(publish)
    if notifier is not None:
        notifier.links = _links(options, server, desired.root)
        settings.notify = notifier.deliver
    return Loop(directory, _root(desired), desired.workspace.name, settings, loaded=desired)


def _root(desired: DesiredState) -> str:
    """The shared root that holds the loop's lease and sent-event ledger: the first cluster's by name."""
    return desired.shared_roots[sorted(desired.shared_roots)[0]]


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
    from reconcile.views.links import Links, page_url
    from state.code.gitinfo import origin_url

    page = None
    if options.public_url or server is not None:
        host = _host_port(options.listen)[0] if options.listen else ""
        page = page_url(options.public_url, socket.getfqdn() if host in ("0.0.0.0", "::") else host,
                        server.port if server is not None else 0)
    return Links(page_url=page, remote=origin_url(str(workspace_root)))


def _server(listen: str | None, kept: list[tuple[Path, DesiredState]]) -> tuple[StatusServer | None, list]:
    """With --listen: /metrics, /healthz and the status page, and what each loop feeds every report to."""
    if listen is None:
        return None, []
    host, port = _host_port(listen)
    from reconcile.serve.http import StatusServer
    from reconcile.serve.metrics import Metrics

    metrics = Metrics()
    server = StatusServer(host, port, metrics=metrics, kept=[_kept(directory, desired) for directory, desired in kept])
    shown = f"[{host}]" if ":" in host else host
    print(f"argus serve: listening on http://{shown}:{server.port}/", flush=True)
    return server, [metrics.record, server.publish]


def _kept(directory: Path, desired: DesiredState) -> Kept:
    """What the page needs of a workspace: its clusters' dashboards and shared roots, its git remote."""
    from reconcile.views.html import Kept, Site
    from state.code.gitinfo import origin_url

    sites = {name: Site(address=cluster.address, root=desired.shared_roots.get(name))
             for name, cluster in desired.clusters.items()}
    return Kept(desired.workspace.name, sites, origin_url(desired.root))


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ArgusError(f"--listen {listen!r}: give HOST:PORT, like 127.0.0.1:9108 (port 0: any free port).")
    return host.strip("[]"), int(port)
