"""The status page of `argus serve`: one small server-rendered HTML page, no JavaScript.

Run ids, health, evidence lines, advice, errors and commit text come from Ray, the runs' own logs
and git: all hostile. Every value reaches the page through `_e` (html.escape), the one way in; the
server also sends a Content-Security-Policy that forbids scripts, in case one slips through anyway.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from urllib.parse import quote

from reconcile.model import Change, RunView
from reconcile.report import TurnReport
from reconcile.views.gpu import section as gpu_section
from reconcile.views.human import health_of, sync_of
from reconcile.views.links import commit_url, ray_job_url, web_url
from reconcile.views.queue import queued
from reconcile.views.run_progress import progress_html
from specs.diagnostics import plain

REFRESH_SECONDS = 30
MAX_EVIDENCE_LINES = 20
"""The lines that made the class come first; the whole log is one click away."""
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.25em .6em;vertical-align:top}
tr{border-bottom:1px solid #ddd}th{background:#f3f3f3}dt{font-weight:600;float:left;clear:left;width:9em}
dd{margin:0 0 .2em 10em}pre{margin:.2em 0;white-space:pre-wrap;font-size:12px;background:#f7f7f7}
td p{margin:0 0 .3em}.bad{color:#b00020;font-weight:600}.good{color:#1b6e20;font-weight:600}code{font-size:13px}
"""


def render_page(report: TurnReport | None, now: float, kept: Kept | None = None) -> str:
    """One workspace's page: what its loop saw and did (the cluster page, reconcile.views.cluster_html,
    shows each kept workspace's section under the cluster's shared queue)."""
    if report is None:
        return _page("argus serve", "<h1>argus serve</h1><p>No turn has finished yet.</p>")
    body = [f"<h1>argus · workspace {_e(report.workspace)}</h1>", *workspace_parts(report, now, kept), _held(report)]
    return _page(f"argus · {report.workspace}", "\n".join(p for p in body if p))


@dataclass(frozen=True)
class Site:
    """A cluster as a kept workspace's spec names it: its dashboard and its shared root (the runs' logs)."""

    address: str | None = None
    root: str | None = None


@dataclass(frozen=True)
class Kept:
    """A workspace this serve keeps: its clusters by name, and its git remote (commit links)."""

    workspace: str
    clusters: Mapping[str, Site] = field(default_factory=dict)
    remote: str | None = None


def workspace_parts(report: TurnReport, now: float, kept: Kept | None = None) -> list[str]:
    """A workspace's turn, notes, last apply, diagnostics, jobs, own queue and runs (no title)."""
    kept = kept or Kept(report.workspace)
    parts = [_turn(report, now, kept), _notes(report.notes), _apply(report, kept), _diagnostics(report),
             _jobs(report, kept), _queue(report, kept), gpu_section(report)]
    return parts + [_runs(job, runs, kept) for job, runs in sorted(report.runs.items()) if runs]


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def _turn(report: TurnReport, now: float, kept: Kept) -> str:
    outcome = ('<span class="good">ok</span>' if report.ok
               else f'<span class="bad">failed</span>: {_e(report.error or "no reason given")}')
    if report.incidents:  # a turn can succeed while a cluster is down: the incident is what people need
        outcome = "; ".join(f'<span class="bad">incident</span> since {_time(i.since)}: {_e(i.summary)}'
                            for i in report.incidents) + f" (turn {outcome})"
    rows = [("Last turn", f"{_time(report.finished_at)} ({_ago(now - report.finished_at)}), took "
                          f"{report.finished_at - report.started_at:.1f} s"),
            ("Outcome", outcome), ("Sync", _e(report.sync)), ("Interval", f"{report.interval:g} s"),
            ("Commit", _commit(report.commit, kept)),
            ("Drift", f"{report.drift} change(s) not carried out")]
    rows += [("Applied", _e(", ".join(report.applied)))] if report.applied else []
    rows += [("Retried", _e(", ".join(report.retried)))] if report.retried else []
    return _dl(rows)


def _notes(notes: Iterable[str]) -> str:
    items = "".join(f"<li>{_e(note)}</li>" for note in notes)
    return f"<h2>Notes</h2><ul>{items}</ul>" if items else ""


def _apply(report: TurnReport, kept: Kept) -> str:
    last: Mapping[str, object] = report.last_apply or {}
    shown = [(key.capitalize(), _e(last.get(key) or "-")) for key in ("time", "actor", "outcome")]
    shown.append(("Commit", _commit(str(last.get("commit") or "") or None, kept)))
    rows = shown if last else [("Last apply", "none recorded")]
    return "<h2>Last apply</h2>" + _dl([*rows, ("Audit log", _audit(report))])


def _audit(report: TurnReport) -> str:
    if report.audit_verified is None:
        return "not read"
    if report.audit_verified:
        return '<span class="good">verifies</span>'
    return f'<span class="bad">does not verify</span>: {_e(report.audit_problem or "no reason given")}'


def _diagnostics(report: TurnReport) -> str:
    found = report.plan.diagnostics if report.plan else ()
    items = "".join(_diagnostic(d.severity, str(d.where) if d.where else "", d.text) for d in found)
    return f"<h2>Plan diagnostics</h2><ul>{items}</ul>" if items else ""


def _diagnostic(severity: str, where: str, text: str) -> str:
    label = f'<span class="bad">{_e(severity)}</span>' if severity == "error" else _e(severity)
    return f"<li>{label}: {_e(where + ': ' if where else '')}{_e(text)}</li>"


def _jobs(report: TurnReport, kept: Kept) -> str:
    changes = {c.address.removeprefix("job."): c for c in report.plan.changes if c.address.startswith("job.")} \
        if report.plan else {}
    names = sorted(set(changes) | set(report.runs))
    if not names:
        return "<h2>Jobs</h2><p>No jobs.</p>"
    rows = [_job_row(name, changes.get(name), set(changes), kept) for name in names]
    return _table("Jobs", ("Job", "Sync", "Health", "Current run", "Plan"), rows)


def _job_row(name: str, change: Change | None, desired: set[str], kept: Kept) -> tuple[str, ...]:
    link = _job_link(kept, name)
    if change is None:  # finished runs of a job no spec names any more: the plan leaves them alone
        return link, "removed", "-", "-", "-"
    current = change.current
    run = _log_link(current.submission_id) if current else "-"
    deadline = f"; deadline {_time(change.deadline_at)}" if change.deadline_at else ""  # its max_runtime
    bar = progress_html(current.progress) if current and current.status == "RUNNING" else ""
    return (link, _e(sync_of(change, desired)), _e((health_of(change) or "-") + deadline) + bar, run,
            f"{_e(change.action.value)}: {_e(change.reason)}")


def _queue(report: TurnReport, kept: Kept) -> str:
    """This workspace's jobs that wait for room, with their place in their cluster's queue and why."""
    rows = [(_job_link(kept, job), _e(info.cluster), f"#{_e(info.position or '-')}",
             f"{info.gpus:g}", _e(info.priority), _e(info.demand), _e(info.reason))
            for job, info in queued(report.plan)]
    if not rows:
        return ""
    return _table("Admission queue", ("Job", "Cluster", "Position", "GPUs", "Priority", "Demand", "Why it waits"),
                  rows)


def _held(report: TurnReport) -> str:
    """Every workspace's GPUs held on each cluster: whose runs the queue waits for."""
    rows = [(_e(cluster), _e(workspace), f"{gpus:g}") for cluster, by_workspace in sorted(report.gpus_held.items())
            for workspace, gpus in sorted(by_workspace.items())]
    return _table("GPUs held per workspace", ("Cluster", "Workspace", "GPUs"), rows) if rows else ""


def _runs(job: str, runs: list[RunView], kept: Kept) -> str:
    newest_first = sorted(runs, key=lambda r: (r.started_at, r.attempt, r.submission_id), reverse=True)
    rows = [_run_row(run, kept) for run in newest_first]
    head = ("Run (log)", "Attempt", "Health", "Started", "Ended", "Took", "Ray", "Failure", "Advice and evidence")
    title = f"job.{job}: runs" if not kept.clusters else f"{kept.workspace} · job.{job}: runs"
    return f'<section id="{_anchor(kept, job)}">' + _table(title, head, rows) + "</section>"


def _run_row(run: RunView, kept: Kept) -> tuple[str, ...]:
    advice = getattr(run, "advice", None)
    evidence = tuple(getattr(run, "evidence", ()) or ())
    more = len(evidence) - MAX_EVIDENCE_LINES
    lines = [*evidence[:MAX_EVIDENCE_LINES], *([f"... {more} more line(s): see the log"] if more > 0 else [])]
    shown = (f"<p>{_e(advice)}</p>" if advice else "") + (f"<pre>{_e(chr(10).join(lines))}</pre>" if lines else "")
    failure = f'<span class="bad">{_e(run.failure)}</span>' if run.failure else "-"
    if run.failure:  # what happened, why, and what argus does next: the analysis the loop's event carried
        failure += f' (<a href="/report/{_e(quote(run.submission_id, safe=""))}">report</a>)'
    ended = getattr(run, "ended_at", 0.0)
    site = kept.clusters.get(run.cluster)
    bar = progress_html(run.progress) if run.status == "RUNNING" else ""
    return (_log_link(run.submission_id), str(run.attempt), _e(run.health) + bar, _time(run.started_at), _time(ended),
            took(run.started_at, ended), ray_link(site.address if site else None, run.submission_id), failure,
            shown or "-")


def _job_link(kept: Kept, job: str) -> str:
    return f'<a href="#{_anchor(kept, job)}">job.{_e(job)}</a>'


def _anchor(kept: Kept, job: str) -> str:
    """A job's section: per workspace on a page of several (`nlp/job-train`)."""
    return _e(f"{kept.workspace}/job-{job}" if kept.clusters else f"job-{job}")


def _commit(commit: str | None, kept: Kept) -> str:
    """The hash, linked to its page when the workspace's remote is a known git web host."""
    shown = f"<code>{_e((commit or '-')[:12])}</code>"
    url = commit_url(kept.remote, commit)
    return link(url, shown) if url else shown


def ray_link(dashboard: str | None, submission_id: str) -> str:
    url = ray_job_url(dashboard, submission_id)
    return link(url, "job page") if url else "-"


def link(url: str | None, inner_html: str) -> str:
    """An anchor to `url` when it is a plain http(s) URL (reconcile.views.links), else the text alone."""
    target = web_url(url)
    if target is None:
        return inner_html
    return f'<a href="{_e(target)}" rel="noopener noreferrer">{inner_html}</a>'


def took(started: float, ended: float) -> str:
    """How long a run ran (so far, when it has not ended)."""
    if not started or (ended and ended < started):
        return "-"
    seconds = (ended or time.time()) - started
    shown = f"{seconds:.0f} s" if seconds < 120 else (f"{seconds / 60:.0f} min" if seconds < 7200
                                                      else f"{seconds / 3600:.1f} h")
    return shown if ended else f"{shown} so far"


def _log_link(submission_id: str) -> str:
    return f'<a href="/logs/{_e(quote(submission_id, safe=""))}"><code>{_e(submission_id)}</code></a>'


def _table(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    header = "".join(f"<th>{cell}</th>" for cell in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<h2>{_e(title)}</h2><table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _dl(rows: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows) + "</dl>"


def _e(value: object) -> str:
    """Escaped for HTML, and stripped of terminal escapes and control characters (specs.diagnostics.plain)."""
    return escape(plain(str(value)), quote=True)


def _time(epoch: float) -> str:
    if not epoch:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float) -> str:
    if seconds < 0:
        return "just now"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"
