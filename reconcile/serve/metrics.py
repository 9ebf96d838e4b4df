"""`/metrics`: what each turn saw, as Prometheus series (prometheus-client), labelled by workspace.

One Metrics may be shared by several loops (one serve keeping several workspaces), so every series
carries `workspace`, and `cluster` where a run or a queue entry belongs to one. What a turn saw (runs,
failures, drift, the queue) is not kept in Gauges: a custom collector builds those series at each scrape
from the newest report of each workspace. `record` then replaces one workspace's snapshot by one dict
assignment: no other workspace's series is touched (Gauge.clear() would clear them all), and a job or
status that is gone leaves no series behind without tracking label sets to remove. Counters (retries,
failed turns) stay prometheus-client Counters, labelled by workspace: they only ever grow.

Its own registry, never the process-wide one: a second Metrics in the same process (tests, --once
inside another command) must not share or collide with these series.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, exposition, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reconcile.model import RunView
from reconcile.report import TurnReport
from reconcile.serve.gpu_metrics import GPU_SERIES, add_gpu
from reconcile.version import build
from reconcile.views.queue import queued
from state.observed import RunStatus

CONTENT_TYPE = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", CONTENT_TYPE_LATEST)
"""What generate_latest writes: the text format 0.0.4 (CONTENT_TYPE_LATEST says 1.0.0 from
prometheus-client 0.22 on; before, it was this)."""
STANDBY = "standby: "
"""How the loop marks a turn of a standby (reconcile.serve.loop): another process holds the lease."""


def is_standby(report: TurnReport) -> bool:
    """A standby's turn looked at nothing: it only says who holds the workspace's lease."""
    return report.plan is None and any(note.startswith(STANDBY) for note in report.notes)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self.turns = Turns()
        self.retries = Counter("argus_retries", "New attempts the loop submitted, by workspace and job.",
                               ["workspace", "job"], registry=self.registry)
        self.deadline_stops = Counter("argus_deadline_stops", "Runs the loop stopped at their job's max_runtime, by "
                                      "workspace and job.", ["workspace", "job"], registry=self.registry)
        self.errors = Counter("argus_loop_errors", "Turns that failed, by workspace.", ["workspace"],
                              registry=self.registry)
        self.incidents = Counter("argus_incidents", "Incidents that began (a cluster that does not answer, a desired "
                                 "state that does not load, turns that keep failing), by workspace and kind.",
                                 ["workspace", "kind"], registry=self.registry)
        self.registry.register(self.turns)

    def record(self, report: TurnReport) -> None:
        """Every loop calls this with each of its reports: only report.workspace's series change."""
        with self._lock:
            self.turns.record(report)
            if not report.ok:
                self.errors.labels(workspace=report.workspace).inc()
            for job in _jobs_of(report, report.retried):
                self.retries.labels(workspace=report.workspace, job=job).inc()
            for job in _deadline_stopped(report):
                self.deadline_stops.labels(workspace=report.workspace, job=job).inc()
            for began in (e for e in report.events if e.kind == "incident"):
                self.incidents.labels(workspace=report.workspace, kind=began.details.get("incident", "")).inc()

    def exposition(self) -> bytes:
        """The series in Prometheus's text format (CONTENT_TYPE)."""
        with self._lock:
            return generate_latest(self.registry)


class Turns(Collector):
    """The gauges, from the newest report of each workspace (plus argus_build_info)."""

    def __init__(self) -> None:
        self.latest: dict[str, TurnReport] = {}
        """Each workspace's newest report, whatever it was."""
        self.seen: dict[str, TurnReport] = {}
        """Each workspace's newest report that saw runs: a turn that failed before planning saw nothing new,
        and a standby sees nothing at all (the active loop, elsewhere, exports its runs)."""
        self.last_success: dict[str, float] = {}

    def record(self, report: TurnReport) -> None:
        workspace = report.workspace
        self.latest[workspace] = report
        if is_standby(report):
            self.seen.pop(workspace, None)
            return
        if report.ok:
            self.last_success[workspace] = report.finished_at
        if report.ok or report.plan is not None:
            self.seen[workspace] = report

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(_families().values())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        latest, seen, last_success = dict(self.latest), dict(self.seen), dict(self.last_success)
        f = _families()
        info = build()
        f["build"].add_metric([info.version, info.commit, info.python], 1)
        for workspace, report in sorted(latest.items()):
            f["active"].add_metric([workspace], 0 if is_standby(report) else 1)
            f["duration"].add_metric([workspace], max(0.0, report.finished_at - report.started_at))
            for incident in report.incidents:
                f["incidents"].add_metric([workspace, incident.kind, incident.subject], 1)
        for workspace, when in sorted(last_success.items()):
            f["success"].add_metric([workspace], when)
        for workspace, report in sorted(seen.items()):
            f["drift"].add_metric([workspace], report.drift)
            _add_runs(f, workspace, report)
            _add_queue(f, workspace, report)
            _add_deadlines(f, workspace, report)
            _add_after(f, workspace, report)
            _add_progress(f, workspace, report)
        for cluster, by_workspace in sorted(_gpus_held(seen.values()).items()):
            for holder, gpus in sorted(by_workspace.items()):
                f["held"].add_metric([holder, cluster], gpus)
        add_gpu(f, seen.values())
        return iter(f.values())


PROGRESS_SERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "step": ("argus_run_step", "The newest step each running run reported in its log (verl's step:N lines, or "
             "argus:progress step=N).", ("workspace", "job", "submission_id")),
    "steps_total": ("argus_run_steps_total", "The steps each running run takes (its trainer.total_training_steps, "
                    "or what its log says), when known.", ("workspace", "job", "submission_id")),
    "eta": ("argus_run_eta_seconds", "Seconds each running run needs to reach its total at its recent rate, when "
            "both are known.", ("workspace", "job", "submission_id")),
}


SERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "build": ("argus_build_info", "argus's version, the git commit it was installed from (empty when unknown) and "
              "Python's version; always 1.", ("version", "commit", "python")),
    "active": ("argus_loop_active", "1 when this process holds the workspace's lease and acts, 0 on standby.",
               ("workspace",)),
    "success": ("argus_last_success_timestamp_seconds", "When the workspace's last successful turn finished "
                "(epoch seconds).", ("workspace",)),
    "duration": ("argus_loop_duration_seconds", "How long the workspace's last turn took.", ("workspace",)),
    "incidents": ("argus_incident_open", "1 per incident open now (kind: unreachable, root_distrusted, desired_state, "
                  "loop_failing, notify_blocked; subject: the cluster, when it is one).",
                  ("workspace", "kind", "subject")),
    "drift": ("argus_drift_changes", "Changes the workspace's last turn found and did not carry out.",
              ("workspace",)),
    "runs": ("argus_runs", "Runs of the workspace by cluster, job and status, as its last turn saw them.",
             ("workspace", "cluster", "job", "status")),
    "failures": ("argus_run_failures", "Failed or lost runs the workspace's last turn saw, by cluster, job and "
                 "failure class.", ("workspace", "cluster", "job", "class")),
    "waiting": ("argus_queue_waiting", "Jobs of the workspace waiting in the cluster's admission queue.",
                ("workspace", "cluster")),
    "position": ("argus_queue_position", "Place of a waiting job of the workspace in its cluster's admission "
                 "queue (1: the head).", ("workspace", "cluster", "job")),
    "held": ("argus_gpus_held", "GPUs the admitted runs of each workspace hold on the cluster, every workspace's "
             "counted.", ("workspace", "cluster")),
    "deadline": ("argus_run_deadline_timestamp_seconds", "When each active run of the workspace reaches its job's "
                 "max_runtime and argus stops it (epoch seconds).", ("workspace", "cluster", "job")),
    "after": ("argus_after_waiting", "1 per job of the workspace that waits on a predecessor (after:), by the "
              "predecessor and whether its failed run blocks the job.", ("workspace", "job", "predecessor", "blocked")),
    **PROGRESS_SERIES,
}
"""The gauges built at each scrape: name, help, labels."""
SERIES.update(GPU_SERIES)


def _families() -> dict[str, GaugeMetricFamily]:
    return {key: GaugeMetricFamily(name, text, labels=list(labels)) for key, (name, text, labels) in SERIES.items()}


def _add_runs(f: dict[str, GaugeMetricFamily], workspace: str, report: TurnReport) -> None:
    for job, runs in sorted(report.runs.items()):
        for (cluster, status), count in sorted(Tally((run.cluster, str(run.status)) for run in runs).items()):
            f["runs"].add_metric([workspace, cluster, job, status], count)
        failures = Tally((run.cluster, _failure(run)) for run in runs if _failure(run))
        for (cluster, failure), count in sorted(failures.items()):
            f["failures"].add_metric([workspace, cluster, job, failure], count)


def _add_queue(f: dict[str, GaugeMetricFamily], workspace: str, report: TurnReport) -> None:
    waits = queued(report.plan)
    counts = Tally(info.cluster for _job, info in waits)
    for cluster in sorted({*counts, *report.gpus_held}):  # a cluster whose queue was read and is empty: 0
        f["waiting"].add_metric([workspace, cluster], counts[cluster])
    for job, info in waits:
        if info.position is not None:
            f["position"].add_metric([workspace, info.cluster, job], info.position)


def _add_deadlines(f: dict[str, GaugeMetricFamily], workspace: str, report: TurnReport) -> None:
    for change in report.plan.changes if report.plan else ():
        if change.deadline_at and change.current is not None:
            f["deadline"].add_metric([workspace, change.current.cluster, change.address.removeprefix("job.")],
                                     change.deadline_at)


def _deadline_stopped(report: TurnReport) -> list[str]:
    """The jobs whose run the turn stopped at its max_runtime: a stop step with a deadline it carried out."""
    applied = set(report.applied)
    return [change.address.removeprefix("job.") for change in (report.plan.changes if report.plan else ())
            if change.address in applied and any(getattr(s, "deadline", None) for s in change.steps)]


def _add_progress(f: dict[str, GaugeMetricFamily], workspace: str, report: TurnReport) -> None:
    """Step, total and ETA of each running run whose log reports its step (state.runs.progress)."""
    for job, runs in sorted(report.runs.items()):
        for run in runs:
            seen = run.progress if run.status == "RUNNING" else None
            if seen is None:
                continue
            labels = [workspace, job, run.submission_id]
            f["step"].add_metric(labels, seen.step)
            if seen.total is not None:
                f["steps_total"].add_metric(labels, seen.total)
            if seen.eta_seconds is not None:
                f["eta"].add_metric(labels, seen.eta_seconds)


def _add_after(f: dict[str, GaugeMetricFamily], workspace: str, report: TurnReport) -> None:
    for change in report.plan.following if report.plan is not None else ():
        for waiting in change.waiting_on:
            f["after"].add_metric([workspace, change.address.removeprefix("job."), waiting.job,
                                   "true" if waiting.blocked else "false"], 1)


def _gpus_held(reports: Iterable[TurnReport]) -> dict[str, Mapping[str, float]]:
    """Per cluster, the GPUs held as the newest turn that read the cluster's queue saw them: every
    workspace's report counts every workspace's runs, so one cluster's series come from one report."""
    newest: dict[str, tuple[float, Mapping[str, float]]] = {}
    for report in reports:
        for cluster, by_workspace in report.gpus_held.items():
            if cluster not in newest or report.finished_at > newest[cluster][0]:
                newest[cluster] = (report.finished_at, by_workspace)
    return {cluster: held for cluster, (_when, held) in newest.items()}


def _failure(run: RunView) -> str | None:
    if run.lost:
        return run.failure or "lost"
    return (run.failure or "unknown") if run.status is RunStatus.FAILED else None


def _jobs_of(report: TurnReport, submission_ids: tuple[str, ...]) -> list[str]:
    """The job of each submission id: from the turn's runs, else from the plan step that submitted it."""
    by_id = {run.submission_id: job for job, runs in report.runs.items() for run in runs}
    if report.plan is not None:
        for change in report.plan.changes:
            for step in change.steps:
                sid = getattr(step, "submission_id", None)
                by_id.setdefault(sid, change.address.removeprefix("job."))
    return [by_id.get(sid, "unknown") for sid in submission_ids]
