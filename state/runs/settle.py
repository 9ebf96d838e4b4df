"""What runs wrote about their own end, read into an observation, and argus's records settled to it.

Any command that observes (plan, apply, status, logs) reads each run's exit.json, so a run's truth
never waits for an apply. A record still saying a run is underway whose end is now known (its
exit.json) and that Ray no longer knows is rewritten with that end. Runs Ray still knows are
settled by apply (execute.refresh), which also keeps their log and audits their end: settling
them here would take that moment from it. Settling writes what the observation already decided,
and for a failed run what explains it (its class, the log lines that made it, the advice), which
only retry policies read, and they have had it classified already: it changes no plan.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from typing import Any

from specs.desired import DesiredState
from specs.workloads.submission import held_secrets
from state.observed import TERMINAL, ObservedState, RunEnd, RunRecord, RunStatus
from state.runs import records
from state.runs import secrets as run_secrets
from state.runs.failures import Evidence, advice_for, classify, matched_lines

SECRETS_GRACE = 3600.0
"""Seconds a run's record must be unchanged before its secrets file is taken as waiting for nobody: far
longer than a submit takes, and than clocks of the machines running argus differ."""


def with_ends(desired: DesiredState, observed: ObservedState) -> ObservedState:
    """The observation with every known run's exit.json, and the failure class of each run that
    failed while Ray forgot it (read from the log it kept), for jobs with a retry policy."""
    ends: dict[str, RunEnd] = {}
    for cluster, ids in _runs_by_cluster(desired, observed).items():
        ends.update(records.read_ends(desired.shared_root(cluster), sorted(ids)))
    failures = {**_failures_on_nfs(desired, observed, ends), **observed.failures}
    return observed.model_copy(update={"ends": ends, "failures": failures})


def settle(desired: DesiredState, observed: ObservedState) -> int:
    """Write the final status of records whose run has ended; how many were written. A shared root
    that refuses the write (read-only, permissions) is left as it is: the truth is read again next time."""
    on_ray = {j.submission_id for c in observed.clusters.values() for j in c.jobs}
    written = 0
    for sid, record in sorted(observed.records.items()):
        end = observed.ends.get(sid)
        if (end is None or end.status is None or sid in on_ray or record.status in TERMINAL
                or record.cluster not in desired.clusters):
            continue
        root = desired.shared_root(record.cluster)
        explained = _explained(root, record, end, observed.failures.get(sid)) if end.status is RunStatus.FAILED else {}
        settled = record.model_copy(update={"status": end.status, "updated_at": records.now(), **explained})
        with contextlib.suppress(OSError):
            records.write_status(root, settled)
            written += 1
        run_secrets.remove(records.job_dir(root, sid))  # its wrapper removes it; a run that never started cannot
    _drop_secrets_of_forgotten_runs(desired, observed, on_ray)
    return written


def _drop_secrets_of_forgotten_runs(desired: DesiredState, observed: ObservedState, on_ray: set[str]) -> None:
    """The secrets file of a run sent to a head that has restarted since (its record names another
    session) and that Ray forgot before its wrapper ran: that run can never start. Only once its record
    is SECRETS_GRACE old: commands that observe take no lock, and an apply that observed the old head may
    be submitting to the new one right now (its record names the old session until then, and this
    observation listed jobs before it arrived). An apply that sends the same id again writes the file again."""
    for sid, record in observed.records.items():
        cluster = observed.clusters.get(record.cluster)
        if (record.status not in (RunStatus.SUBMITTING, RunStatus.PENDING) or sid in on_ray or cluster is None
                or record.cluster not in desired.clusters or not cluster.session_name or not record.session_name
                or record.session_name == cluster.session_name or not records.older_than(record, SECRETS_GRACE)):
            continue
        run_secrets.remove(records.job_dir(desired.shared_root(record.cluster), sid))


def _explained(root: str, record: RunRecord, end: RunEnd, failure: str | None) -> dict[str, Any]:
    """A failed run's class (classified here from its own log when its job has no retry policy to have
    asked already), the lines that made it, secret values masked, and what to do about it."""
    tail = records.log_tail(root, record.submission_id)
    evidence = Evidence(status="FAILED", exit_code=end.exit_code, log_tail=tail)
    failure = record.failure or failure or classify(evidence)
    shown = replace(evidence, log_tail=_masked(record, tail))
    return {"failure": failure, "evidence": matched_lines(shown, failure), "advice": advice_for(failure)}


def _masked(record: RunRecord, text: str) -> str:
    """A log may echo a secret the run was sent: the values of its `${env:NAME}` references this process
    holds are masked, as apply masks them (reconcile.execute.world.Secrets). Before the lines are cut
    to length: a cut could leave part of a value that no longer matches."""
    env = record.submission.env_vars if record.submission else {}
    for value in held_secrets(env, os.environ).values():
        text = text.replace(value, "***")
    return text


def _runs_by_cluster(desired: DesiredState, observed: ObservedState) -> dict[str, set[str]]:
    """This workspace's runs (records and Ray jobs carrying its labels) by the cluster they ran on."""
    found: dict[str, set[str]] = {}
    for record in observed.records.values():
        # a record already final was settled from its exit.json or Ray: its end is not read again,
        # so a plan reads as many exit.json files as runs that may still be running, whatever the history
        if record.status in TERMINAL and (record.status is not RunStatus.FAILED or record.failure):
            continue
        if record.cluster in desired.clusters and record.cluster not in observed.absent_roots:
            found.setdefault(record.cluster, set()).add(record.submission_id)
    for name, cluster in observed.clusters.items():
        if name in desired.clusters and name not in observed.absent_roots:
            found.setdefault(name, set()).update(j.submission_id for j in cluster.jobs
                                                 if j.workspace == desired.workspace.name)
    return found


def _failures_on_nfs(desired: DesiredState, observed: ObservedState, ends: dict[str, RunEnd]) -> dict[str, str]:
    """A run Ray forgot that failed by its exit.json: classified from the tail of its own log."""
    on_ray = {j.submission_id for c in observed.clusters.values() for j in c.jobs}
    found = {}
    for sid, end in ends.items():
        record = observed.records.get(sid)
        spec = desired.jobs.get(record.job) if record else None
        if (record and spec and spec.retry and not record.failure and sid not in on_ray
                    and end.status is RunStatus.FAILED):
            tail = records.log_tail(desired.shared_root(record.cluster), sid)
            found[sid] = classify(Evidence(status="FAILED", exit_code=end.exit_code, log_tail=tail)) or "unknown"
    return found
