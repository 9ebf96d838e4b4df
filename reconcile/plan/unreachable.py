"""Clusters that did not answer: what the planner does not decide, and the errors that say why. Pure.

An unreachable cluster is absent from `observed.clusters` and named in `observed.unreachable`. Its
jobs are neither submitted (argus cannot see whether their run exists) nor stopped; every other
cluster is planned as usual, so one dead head never holds the others hostage.
"""

from __future__ import annotations

from reconcile.model import Action, Change, RunView
from reconcile.plan.root import distrusted
from reconcile.plan.runs import newest, runs_by_job
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Job
from state.observed import ObservedState


def blind(observed: ObservedState) -> dict[str, str]:
    """Clusters argus cannot see into, with a word on why: a dashboard that did not answer, or a shared
    root that is not the one argus laid out (reconcile.plan.root)."""
    found = {name: "unreachable" for name in observed.unreachable}
    return found | {name: "has a shared root argus does not trust" for name in distrusted(observed)}


def unseen_clusters(observed: ObservedState, cluster: str | None, runs: list[RunView]) -> list[str]:
    """The clusters argus cannot see into that a job cannot be decided without: its own (argus cannot
    see whether its run exists there), and any where a run of it may still be running (it could not be
    stopped)."""
    needed = {cluster} if cluster else set()
    needed |= {r.cluster for r in runs if not r.finished}
    return sorted(needed & set(blind(observed)))


def not_planned(address: str, unseen: list[str], runs: list[RunView], observed: ObservedState) -> Change:
    """A job argus cannot see: no submit, no stop; its newest known run (Ray's or argus's record) stays shown."""
    why = blind(observed)
    where = "; ".join(f"cluster {c!r} {why[c]}" for c in unseen)
    return Change(address=address, action=Action.NOOP, current=newest(runs), reason=f"{where}: not planned")


def unreachable_clusters(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """A cluster whose dashboard did not answer: an error on its own address, so that plan and a
    full apply stop there, while `--target` on another cluster's jobs still goes ahead. The client's
    own words come last: they say what failed and what to check."""
    return [Diagnostic(
        severity="error", address=Address.cluster(name), field="address",
        message=f"cluster {name!r} at {desired.clusters[name].address} cannot be read: its jobs are not planned "
                "(argus cannot see their runs), the other clusters' jobs are, and `argus apply --target job.NAME` "
                f"applies them. {why}",
    ).located(desired.source(Address.cluster(name))) for name, why in sorted(observed.unreachable.items())]


def blocked_elsewhere(desired: DesiredState, job: Job, unseen: list[str], runs: list[RunView]) -> list[Diagnostic]:
    """A job whose own cluster answers but whose earlier run may still run on an unreachable one
    (the job moved): a new run must not overlap a run argus can neither see nor stop."""
    if job.cluster in unseen:
        return []  # the cluster's own error says it
    address = Address.job(job.name)
    hidden = sorted(r.submission_id for r in runs if r.cluster in unseen and not r.finished)
    return [Diagnostic(
        severity="error", address=address, field="cluster",
        message=f"{address} is not planned: its run(s) {', '.join(hidden)} may still be running on cluster(s) "
                f"{', '.join(repr(c) for c in unseen)}, which cannot be reached to stop them",
        hint=f"argus plans it again once {'they answer' if len(unseen) > 1 else 'it answers'}",
    ).located(desired.source(address))]


def hidden_jobs(desired: DesiredState, observed: ObservedState) -> dict[str, str]:
    """By job address: the unreachable cluster(s) that keep a job from being planned, decided as the
    planner decides it (`argus status` marks these rows instead of calling them in sync)."""
    if not blind(observed):
        return {}
    runs = runs_by_job(desired.workspace.name, observed)
    found = {}
    for name in sorted(set(desired.jobs) | set(runs)):
        spec = desired.jobs.get(name)
        unseen = unseen_clusters(observed, spec.cluster if spec else None, runs.get(name, []))
        if unseen:
            found[Address.job(name)] = ", ".join(unseen)
    return found
