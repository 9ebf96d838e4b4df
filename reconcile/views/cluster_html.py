"""The page of a cluster `argus serve DIR DIR ...` keeps workspaces on: the shared queue, the GPUs each
workspace holds, the other workspaces' runs, and each kept workspace's own section (reconcile.views.html).

What it shows of the workspaces this serve does not keep comes from the kept ones' last turns: the
cluster's whole admission queue (every workspace's ledger on the shared root) and the other workspaces'
runs Ray lists. All of it is hostile text (a ledger or a job's labels are anyone's to write): it reaches
the page only through html._e, and links only through html.link (http(s) URLs alone).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from reconcile.report import OtherRun, TurnReport
from reconcile.views.html import Kept, _dl, _e, _page, _table, _time, link, ray_link, took, workspace_parts
from reconcile.views.queue import ClusterQueueView, queued
from state.observed import ACTIVE


@dataclass(frozen=True)
class Shown:
    """A kept workspace as the page shows it: what it is, its newest report, and whether its loop crashed."""

    kept: Kept
    report: TurnReport | None = None
    crashed: str | None = None


@dataclass(frozen=True)
class ClusterPage:
    name: str
    address: str | None
    slug: str
    """Its path: /clusters/<slug> (the name; with a number when two clusters share a name)."""
    workspaces: tuple[Shown, ...]


def cluster_pages(shown: Sequence[Shown]) -> list[ClusterPage]:
    """One page per cluster (its name and dashboard address) a kept workspace uses."""
    members: dict[tuple[str, str], list[Shown]] = {}
    for one in shown:
        for name in sorted(_clusters_of(one)):
            site = one.kept.clusters.get(name)
            members.setdefault((name, (site.address if site else None) or ""), []).append(one)
    names = Counter(name for name, _address in members)
    return [ClusterPage(name, address or None, name if names[name] == 1 else f"{name}-{i}", tuple(found))
            for i, ((name, address), found) in enumerate(sorted(members.items()), start=1)]


def render_index(pages: Sequence[ClusterPage], now: float) -> str:
    rows = [(f'<a href="/clusters/{_e(quote(p.slug, safe=""))}">{_e(p.name)}</a>', _dashboard(p.address),
             _e(", ".join(s.kept.workspace for s in p.workspaces)), _waiting_count(_queue(p))) for p in pages]
    body = ["<h1>argus · clusters</h1>",
            _table("Clusters", ("Cluster", "Ray dashboard", "Workspaces kept here", "Waiting"), rows)]
    return _page("argus · clusters", "\n".join(body))


def render_cluster(page: ClusterPage, now: float) -> str:
    queue = _queue(page)
    acting = {s.kept.workspace for s in page.workspaces if s.report is not None and s.report.plan is not None}
    single = len(page.workspaces) == 1
    title = (f"workspace {page.workspaces[0].kept.workspace} · " if single else "") + f"cluster {page.name}"
    parts = [f"<h1>argus · {_e(title)}</h1>", _header(page, queue), _shared_queue(queue, page.address),
             _holding(queue, page.address), _held(page, queue), _others(page, acting)]
    parts += [_section(s, now) for s in page.workspaces]
    return _page(f"argus · {title}", "\n".join(p for p in parts if p))


def state_of(shown: Shown) -> str:
    """Active, standby (and for whom) or crashed: the cluster page's and /healthz's words."""
    report = shown.report
    if shown.crashed is not None:
        return f"crashed: {shown.crashed}"
    if report is None:
        return "no turn has finished yet"
    if report.standby is not None and report.plan is None:
        return f"standby (held by {holder_shown(report.standby)})"
    if report.incidents:
        return "active, incident: " + "; ".join(i.summary for i in report.incidents)
    return "active" if report.ok else f"active, last turn failed: {report.error or 'no reason given'}"


def holder_shown(holder: str) -> str:
    """A lease holder is host:pid:nonce; people need host:pid."""
    host_pid, _sep, _nonce = holder.rpartition(":")
    return (host_pid if host_pid.count(":") >= 1 else holder)[:200]


def _clusters_of(one: Shown) -> set[str]:
    if one.kept.clusters:
        return set(one.kept.clusters)
    report = one.report  # a server told nothing of the workspace (one workspace): the clusters its turn names
    if report is None:
        return set()
    return ({run.cluster for runs in report.runs.values() for run in runs} | set(report.gpus_held)
            | {q.cluster for q in report.queues} | {info.cluster for _job, info in queued(report.plan)})


def _queue(page: ClusterPage) -> ClusterQueueView | None:
    """The cluster's queue from the newest turn of a kept workspace that read it."""
    read = [(s.report.finished_at, q) for s in page.workspaces if s.report is not None
            for q in s.report.queues if q.cluster == page.name and not q.unseen]
    return max(read, key=lambda r: r[0])[1] if read else None


def _header(page: ClusterPage, queue: ClusterQueueView | None) -> str:
    rows = [("Ray dashboard", _dashboard(page.address)),
            ("GPUs", f"{queue.gpus:g} on the alive nodes" if queue else "not read yet")]
    rows += [("Quota file", f'<span class="bad">{_e(queue.problem)}</span>: nothing is admitted until it is fixed')] \
        if queue and queue.problem else []
    states = "".join(f'<li><a href="#ws-{_e(s.kept.workspace)}">{_e(s.kept.workspace)}</a>: {_e(state_of(s))}</li>'
                     for s in page.workspaces)
    return _dl([*rows, ("Kept here", f"<ul>{states}</ul>")])


def _dashboard(address: str | None) -> str:
    return link(address, _e(address)) if address else "-"


def _shared_queue(queue: ClusterQueueView | None, address: str | None) -> str:
    if queue is None:
        return "<h2>Shared queue</h2><p>Not read yet: no turn of a workspace kept here has read it.</p>"
    if not queue.waiting:
        return "<h2>Shared queue</h2><p>Nothing waits.</p>"
    rows = [(_e(w.position or "next"), _e(w.workspace), f"job.{_e(w.job)}", f"{w.gpus:g}", _e(w.demand),
             _e(w.priority), _time(w.arrived), _e(w.reason)) for w in queue.waiting]
    head = ("#", "Workspace", "Job", "GPUs", "Demand", "Priority", "Waiting since", "Why it waits")
    return _table("Shared queue, every workspace's, in queue order", head, rows)


def _holding(queue: ClusterQueueView | None, address: str | None) -> str:
    if queue is None or not queue.held:
        return ""
    rows = [(_e(h.workspace), f"job.{_e(h.job)}", f"<code>{_e(h.submission_id)}</code>", f"{h.gpus:g}",
             _e(h.priority), _time(h.admitted), ray_link(address, h.submission_id)) for h in queue.held]
    return _table("Runs holding resources", ("Workspace", "Job", "Run", "GPUs", "Priority", "Admitted", "Ray"), rows)


def _held(page: ClusterPage, queue: ClusterQueueView | None) -> str:
    held = dict(queue.gpus_held) if queue else {}
    for s in page.workspaces if not held else ():
        held.update((s.report.gpus_held if s.report else {}).get(page.name, {}))
    rows = [(_e(workspace), f"{gpus:g}") for workspace, gpus in sorted(held.items())]
    return _table("GPUs held per workspace", ("Workspace", "GPUs"), rows) if rows else ""


OTHER_RUNS_LISTED = 40
"""Ray keeps finished runs, and their labels are anyone's to write: the page lists the active runs first, then
the newest, and counts the rest, so any number of jobs cannot make it grow without end."""


def _others(page: ClusterPage, acting: set[str]) -> str:
    """Runs of the workspaces whose section shows no runs (not kept here, or standing by): active first, then newest."""
    seen: dict[str, OtherRun] = {}
    for s in page.workspaces:
        for run in s.report.others if s.report else ():
            if run.cluster == page.name and run.workspace not in acting:
                seen.setdefault(run.submission_id, run)
    if not seen:
        return ""
    ranked = sorted(seen.values(), key=lambda r: (r.status not in ACTIVE, -r.started_at, r.submission_id))
    rows = [(_e(r.workspace), f"job.{_e(r.job)}", f"<code>{_e(r.submission_id)}</code>", _e(r.status),
             _time(r.started_at), _time(r.ended_at), took(r.started_at, r.ended_at), ray_link(page.address,
                                                                                              r.submission_id))
            for r in ranked[:OTHER_RUNS_LISTED]]
    head = ("Workspace", "Job", "Run", "Status", "Started", "Ended", "Took", "Ray")
    more = len(ranked) - OTHER_RUNS_LISTED
    rest = (f"<p>{more} older run(s) not shown: <code>argus status --all-workspaces</code> lists every one.</p>"
            if more > 0 else "")
    return _table("Runs of the other workspaces (not kept here, or kept on standby)", head, rows) + rest


def _section(shown: Shown, now: float) -> str:
    ws = shown.kept.workspace
    head = f'<section id="ws-{_e(ws)}"><h2>Workspace {_e(ws)}: {_e(state_of(shown))}</h2>'
    if shown.report is None:
        return head + "</section>"
    if shown.report.standby is not None and shown.report.plan is None:
        return head + (f"<p>Another loop holds this workspace's lease and acts for it: its runs are listed above. "
                       f"Last looked {_time(shown.report.finished_at)}.</p></section>")
    return head + "\n".join(p for p in workspace_parts(shown.report, now, shown.kept) if p) + "</section>"


def _waiting_count(queue: ClusterQueueView | None) -> str:
    return str(len(queue.waiting)) if queue else "-"
