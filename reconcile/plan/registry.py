"""At most once, anchored in argus's own chain: the audit log's registry of submissions (state.audit.registry)
decides which runs are argus's. Pure.

- An id the registry holds is never submitted again: when neither Ray nor a record shows it, it is a run
  Ray forgot (shown lost; a retry policy on `lost`, a `run:` bump or `--replace` asks for a new attempt).
- Once the log is adopted, a Ray row or record whose id it does not hold is not argus's run: it releases
  no follower, counts as no attempt, shows as no run of the job, and is reported by id.
- A log an argus from before the registry wrote is trusted as that argus trusted runs, until the next
  apply adopts them (execute.registry); a log that does not verify is an error on its clusters.
- A Ray row whose id the adopted registry holds is argus's run even when its record on the shared root is
  gone (a job can delete it): its deadline still holds, and it keeps none of the workspace's applies from working.
- argus's own stops are the chain's too (run.stopping, before Ray is asked): a STOPPED run the chain does not
  name was stopped outside argus (drift), and only a stop the chain records as a deadline's or a preemption's
  makes the run `deadline` or `preempted`, whatever its record says (stopped_by, own_failure).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from reconcile.model import Change, RunView, SubmitStep
from specs.address import Address
from specs.diagnostics import Diagnostic, printable
from specs.workloads.submission import submission_id
from state.observed import DEADLINE, IDLE, PREEMPTED, UNCONFIRMED, ObservedState, RayJob, Registry, RunRecord, RunStatus

EARLIER_STOP = "stop"
"""The why of a stop an earlier version recorded only as its stop step's record (state.audit.registry)."""
OWN_CLASSES = {"deadline": DEADLINE, "preempt": PREEMPTED, "idle": IDLE}
"""The failure classes only argus's own stops give a run: never taken from a record alone."""


def registered(observed: ObservedState, cluster: str, sid: str) -> bool:
    """Whether a Ray row or record of this id may be argus's run: the adopted registry holds it, or there
    is no adopted registry to ask (not read, written before the registry, or damaged: an error then)."""
    registry = observed.registries.get(cluster)
    return registry is None or not registry.adopted or bool(registry.problems) or sid in registry.submitted


def ever_submitted(observed: ObservedState, cluster: str, sid: str) -> bool:
    """The chain records argus asking Ray to run this id (and no refusal from Ray after): never again."""
    registry = observed.registries.get(cluster)
    return registry is not None and sid in registry.submitted


def holds(observed: ObservedState, cluster: str, sid: str) -> bool:
    """The chain itself vouches for this id: an adopted registry that verifies holds it (the run is argus's
    even without a record)."""
    registry = observed.registries.get(cluster)
    return registry is not None and registry.adopted and not registry.problems and sid in registry.submitted


def imported_run(observed: ObservedState, cluster: str, sid: str) -> tuple[str, str] | None:
    """(job, spec hash) of a job submitted outside argus that `argus import ray-job` adopted, when the chain,
    verified, says so for this cluster; None otherwise. Never from the job's metadata: any job can set that.
    Clusters sharing a shared root share the chain: a job of the same id on another of them is not the one adopted."""
    registry = observed.registries.get(cluster)
    if registry is None or registry.problems or sid not in registry.imported:
        return None
    job, digest, on = (registry.imported[sid].split(":", 2) + ["", ""])[:3]
    return (job, digest) if on == cluster else None


def stopped_by(observed: ObservedState, cluster: str, sid: str, record: RunRecord | None) -> str | None:
    """Why argus stopped this run (deadline, preempt, plan, or EARLIER_STOP), None when it did not: from the
    chain. Only where no registry was read (nothing to ask) does the run's record say, as before the chain."""
    registry = observed.registries.get(cluster)
    if registry is not None:
        return registry.stops.get(sid)
    if record is None or not (record.stop_asked or record.failure == PREEMPTED):
        return None
    return {DEADLINE: "deadline", PREEMPTED: "preempt", IDLE: "idle"}.get(record.failure or "", "plan")


def own_failure(why: str | None, said: str | None) -> str | None:
    """The failure class a run may show, given argus's stop of it (`why`) and what its record or log said:
    deadline and preempted only from argus's stop; a stop an earlier version recorded keeps its record's."""
    if why == EARLIER_STOP and said in OWN_CLASSES.values():
        return said
    if why in OWN_CLASSES:
        return OWN_CLASSES[why]
    return None if said in OWN_CLASSES.values() else said


PROBE_GAP = 8
"""Attempts probed past the last one the chain holds: attempts of a spec are numbered one after another (a
refused submit is sent again under its id), so a gap this long is the end. Missing one beyond only hides it
from the plan's view; the plan never sends it again (resubmits)."""


def forgotten(observed: ObservedState, workspace: str, job: str, cluster: str, digest: str,
              shown: Collection[str]) -> list[RunView]:
    """The registered runs of this job's spec that neither Ray nor a record shows (`shown`: ids a view
    holds): runs Ray forgot. The chain is asked for this spec's ids one attempt at a time, so a history of
    many runs of other specs costs nothing here."""
    registry = observed.registries.get(cluster)
    if registry is None or submission_id(workspace, job, digest, 1).rpartition(".")[0] not in _specs_of(registry):
        return []  # no attempt of this spec was ever registered: nothing to probe
    found, attempt, misses = [], 1, 0
    while misses < PROBE_GAP:
        sid = submission_id(workspace, job, digest, attempt)
        if sid not in registry.submitted:
            misses += 1
        elif sid not in shown:
            misses = 0
            found.append(RunView(submission_id=sid, cluster=cluster, spec_hash=digest, attempt=attempt,
                                 status=RunStatus.SUBMITTING, on_ray=False, lost=True, failure="lost",
                                 unrecorded=True, started_at=_epoch(registry.submitted[sid]),
                                 cluster_read=cluster in observed.clusters))
        else:
            misses = 0
        attempt += 1
    return found


def resubmits(observed: ObservedState, changes: Iterable[Change]) -> list[Diagnostic]:
    """The last guard: an error wherever a plan would send an id the chain says was sent."""
    return [Diagnostic(severity="error", address=change.address,
                       message=f"{change.address} would be submitted as {step.submission_id}, which argus's audit "
                               f"log {observed.registries[step.cluster].log} records as submitted already: argus "
                               "never submits an id twice. Bump the job's `run:` or `argus apply --replace "
                               f"{change.address}` for a new attempt")
            for change in changes for step in change.steps
            if isinstance(step, SubmitStep) and ever_submitted(observed, step.cluster, step.submission_id)]


def registry_diagnostics(workspace: str, observed: ObservedState) -> list[Diagnostic]:
    """Per cluster: a log that does not verify (error), one not adopted yet (warning), runs it disowns (warning)."""
    found = []
    for name, registry in sorted(observed.registries.items()):
        if registry.problems:
            found.append(_damaged(name, registry))
        elif not registry.adopted and _runs_there(workspace, observed, name):
            found.append(_not_adopted(name, registry))
        elif registry.adopted:
            found += _disowned_records(observed, name, registry)
    return found


def forged_row(job: RayJob, workspace: str, cluster: str, observed: ObservedState) -> bool:
    """A Ray row with this workspace's labels and the id argus derives from them, which the registry disowns."""
    run = job.run_id
    return (run is not None and run.workspace == workspace and run.submission_id == job.submission_id
            and not registered(observed, cluster, job.submission_id))


def forged_row_warning(job: RayJob, cluster: str, workspace: str, observed: ObservedState) -> Diagnostic:
    sid = printable(job.submission_id)[:140]
    return Diagnostic(
        severity="warning", address=Address.cluster(cluster),
        message=f"Ray lists {sid} ({job.status}) on cluster {cluster!r} with workspace {workspace}'s labels "
                f"(job {printable(job.job or '?')[:64]}), but argus never submitted it: its audit log "
                f"{observed.registries[cluster].log} registers no such submission. It releases no follower, counts "
                "as no attempt, shows as no run and is never stopped; stop it with `ray job stop` if unwanted")


def _damaged(cluster: str, registry: Registry) -> Diagnostic:
    more = f" (and {len(registry.problems) - 1} more)" if len(registry.problems) > 1 else ""
    return Diagnostic(
        severity="error", address=Address.cluster(cluster),
        message=f"argus's audit log {registry.log} does not verify: {registry.problems[0]}{more}. It is the "
                "registry of argus's submissions, so argus cannot tell which runs it submitted there and submits "
                "nothing. Run `argus audit verify` to see what changed; once understood, move the log and its "
                "anchor aside together (keep them): the next apply adopts the runs it then finds (docs/audit.md)")


def _not_adopted(cluster: str, registry: Registry) -> Diagnostic:
    return Diagnostic(
        severity="warning", address=Address.cluster(cluster),
        message=f"argus's audit log {registry.log} does not register this workspace's submissions yet (an argus "
                "from before the registry wrote it, or there is none): the runs found on Ray and in records are "
                "trusted as before. The next `argus apply` adopts them into the log (registry.adopted); from then "
                "on a run the log does not name is not argus's")


def _disowned_records(observed: ObservedState, cluster: str, registry: Registry) -> list[Diagnostic]:
    """Records saying a run reached Ray whose id argus never registered (a record argus wrote before a
    submit that then never happened says SUBMITTING or SUBMIT_FAILED)."""
    on_ray = {j.submission_id for j in observed.clusters[cluster].jobs} if cluster in observed.clusters else set()
    return [_disowned(record, registry) for sid, record in sorted(observed.records.items())
            if record.cluster == cluster and sid not in registry.submitted and sid not in on_ray
            and record.status not in UNCONFIRMED]


def _disowned(record: RunRecord, registry: Registry) -> Diagnostic:
    return Diagnostic(
        severity="warning", address=Address.job(record.job),
        message=f"a record says run {record.submission_id} of job {record.job} was {record.status}, but argus never "
                f"submitted it: its audit log {registry.log} registers no such submission (written by a job?). It "
                "is not counted as a run of the job")


def _runs_there(workspace: str, observed: ObservedState, cluster: str) -> bool:
    state = observed.clusters.get(cluster)
    return any(r.cluster == cluster for r in observed.records.values()) or bool(
        state and any(j.workspace == workspace for j in state.jobs))


def _epoch(timestamp: str) -> float:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0


def _specs_of(registry: Registry) -> frozenset[str]:
    """The specs (submission ids without their attempt) the registry holds any attempt of: made once a plan per
    registry (kept with the registry they were made from, so never another's), asked once a job."""
    kept = _SPECS.get(id(registry))
    if kept is None or kept[0] is not registry:
        kept = (registry, frozenset(sid.rpartition(".")[0] for sid in registry.submitted))
        if len(_SPECS) >= 16:
            _SPECS.clear()
        _SPECS[id(registry)] = kept
    return kept[1]


_SPECS: dict[int, tuple[Registry, frozenset[str]]] = {}

