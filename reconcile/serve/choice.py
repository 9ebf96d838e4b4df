"""What the loop carries out of a plan, by itself, without a person's apply. Pure."""

from __future__ import annotations

from reconcile.model import Action, Change, Plan


def choose(plan: Plan, sync_auto: bool, may_retry: bool = True) -> list[Change]:
    """What the loop carries out: retries, preemptions and the runs an apply queued, always (a job's
    own errors hold it back; an error elsewhere than on a job holds all back but deadline stops); with
    --sync auto every change of an error-free plan. Stops at a job's max_runtime are carried out always too.
    Nothing when `may_retry` is False (a checkout that is not what was merged)."""
    if not may_retry:
        return []
    if sync_auto and not plan.errors:
        return list(plan.actionable)
    blocked = {d.address for d in plan.errors}
    if any(not address.startswith("job.") for address in blocked):
        # a stop at max_runtime starts nothing: an error elsewhere (a file on the shared root a job can write,
        # say) never keeps a run past its deadline
        return [c for c in plan.actionable if c.action is Action.DEADLINE and c.address not in blocked]
    return [c for c in plan.actionable if c.address not in blocked
            and (c.action in (Action.RETRY, Action.PREEMPT, Action.DEADLINE) or _queued_by_apply(c) or _released(c))]


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
