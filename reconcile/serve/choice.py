"""What the loop carries out of a plan, by itself, without a person's apply. Pure."""

from __future__ import annotations

from reconcile.model import Action, Change, Plan


def choose(plan: Plan, sync_auto: bool, may_retry: bool = True) -> list[Change]:
    """What the loop carries out: retries, preemptions and the runs an apply queued, always; with --sync auto
    every change of an error-free plan. Stops at a job's max_runtime are carried out always too. An error
    holds back what it concerns: a job's its own changes, a cluster's (its state, root or directories) the
    changes on that cluster, but deadline stops (one sick cluster never holds back another's retries, as in
    apply); an error on anything else (the workspace) holds back all but deadline stops. Nothing when
    `may_retry` is False (a checkout that is not what was merged)."""
    if not may_retry:
        return []
    if sync_auto and not plan.errors:
        return list(plan.actionable)
    blocked = {d.address for d in plan.errors}
    sick = _sick_clusters(blocked)
    # a stop at max_runtime starts nothing: an error on its cluster (a file on the shared root a job can write,
    # say) never keeps a run past its deadline
    return [c for c in plan.actionable if c.address not in blocked and (c.action in (Action.DEADLINE, Action.IDLE) or (
        sick is not None and not _clusters(c) & sick
        and (c.action in (Action.RETRY, Action.PREEMPT) or _queued_by_apply(c) or _released(c))))]


def _sick_clusters(blocked: set[str]) -> set[str] | None:
    """The clusters the errors name; None when one names what is neither a job, a snapshot (its jobs carry
    errors of their own), a Dataset or Model (its readers wait on it, blocked) nor a cluster: then everything
    waits."""
    sick = set()
    for address in blocked:
        kind, _, name = address.partition(".")
        if kind in ("cluster", "dirs"):
            sick.add(name)
        elif kind not in ("job", "code", "dataset", "model"):
            return None
    return sick


def _clusters(change: Change) -> set[str]:
    """The clusters a change acts on: its steps', its queue's, its current run's."""
    found = {str(getattr(step, "cluster", "")) for step in change.steps}
    found |= {change.queue.cluster} if change.queue else set()
    found |= {change.current.cluster} if change.current else set()
    return found - {""}


def _released(change: Change) -> bool:
    """A follower (`after:`) whose predecessors ended as required: the merged spec and the WAIT it was
    planned as are the approval. Only its start (or its place in the queue), never a replace."""
    from reconcile.plan.reviewed import plain_start

    return bool(change.waiting_on) and plain_start(change)


def _queued_by_apply(change: Change) -> bool:
    """A run an apply queued, now admitted; or a retry that must wait for room: the loop fulfils
    what was applied, as it does retries."""
    queue = change.queue  # never a replace: a ledger (anyone can write it) must never make the loop stop a run
    return queue is not None and change.action in (Action.SUBMIT, Action.RETRY, Action.QUEUE) and (
        (queue.from_queue and change.action is not Action.QUEUE) or queue.wanted is Action.RETRY)
