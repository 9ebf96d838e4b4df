"""`/metrics`: what each turn saw, as Prometheus series (prometheus-client).

Its own registry, never the process-wide one: a second loop in the same process (tests, --once
inside another command) must not share or collide with these series. Run series are set from the
newest report alone and cleared first, so a job or status that is gone has no series left behind.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, exposition, generate_latest

from reconcile.model import RunView
from reconcile.report import TurnReport
from reconcile.views.queue import queued
from state.observed import RunStatus

CONTENT_TYPE = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", CONTENT_TYPE_LATEST)
"""What generate_latest writes: the text format 0.0.4 (CONTENT_TYPE_LATEST says 1.0.0 from
prometheus-client 0.22 on; before, it was this)."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        r = self.registry
        self.runs = Gauge("argus_runs", "Runs of the workspace by job and status, as the last turn saw them.",
                          ["job", "status"], registry=r)
        self.failures = Gauge("argus_run_failures", "Failed or lost runs the last turn saw, by job and failure "
                              "class.", ["job", "class"], registry=r)
        self.retries = Counter("argus_retries", "New attempts the loop submitted, by job.", ["job"], registry=r)
        self.last_success = Gauge("argus_last_success_timestamp_seconds",
                                  "When the last successful turn finished (epoch seconds).", registry=r)
        self.duration = Gauge("argus_loop_duration_seconds", "How long the last turn took.", registry=r)
        self.errors = Counter("argus_loop_errors", "Turns that failed.", registry=r)
        self.drift = Gauge("argus_drift_changes", "Changes the last turn found and did not carry out.", registry=r)
        self.waiting = Gauge("argus_queue_waiting", "Jobs of the workspace waiting in the cluster's admission "
                             "queue.", ["cluster"], registry=r)
        self.position = Gauge("argus_queue_position", "Place of a waiting job in its cluster's admission queue "
                              "(1: the head).", ["job", "cluster"], registry=r)
        self.held = Gauge("argus_gpus_held", "GPUs the admitted runs of each workspace hold on the cluster, every "
                          "workspace's counted.", ["workspace", "cluster"], registry=r)

    def record(self, report: TurnReport) -> None:
        """The loop calls this with every report."""
        with self._lock:
            self.duration.set(max(0.0, report.finished_at - report.started_at))
            if report.ok:
                self.last_success.set(report.finished_at)
            else:
                self.errors.inc()
            if report.ok or report.plan is not None:  # a turn that failed before planning saw nothing new
                self._record_runs(report)
            for job in _jobs_of(report, report.retried):
                self.retries.labels(job=job).inc()

    def exposition(self) -> bytes:
        """The series in Prometheus's text format (CONTENT_TYPE)."""
        with self._lock:
            return generate_latest(self.registry)

    def _record_runs(self, report: TurnReport) -> None:
        self.runs.clear()
        self.failures.clear()
        self.drift.set(report.drift)
        for job, runs in report.runs.items():
            for status, count in Tally(str(run.status) for run in runs).items():
                self.runs.labels(job=job, status=status).set(count)
            for failure, count in Tally(_failure(run) for run in runs if _failure(run)).items():
                self.failures.labels(**{"job": job, "class": failure}).set(count)
        self._record_queue(report)

    def _record_queue(self, report: TurnReport) -> None:
        for gauge in (self.waiting, self.position, self.held):
            gauge.clear()
        waits = queued(report.plan)
        counts = Tally(info.cluster for _job, info in waits)
        for cluster in {*counts, *report.gpus_held}:  # a cluster whose queue was read and is empty: 0
            self.waiting.labels(cluster=cluster).set(counts[cluster])
        for job, info in waits:
            if info.position is not None:
                self.position.labels(job=job, cluster=info.cluster).set(info.position)
        for cluster, by_workspace in report.gpus_held.items():
            for workspace, gpus in by_workspace.items():
                self.held.labels(workspace=workspace, cluster=cluster).set(gpus)


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
