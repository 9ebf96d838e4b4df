"""Is the fresh plan the one that was reviewed? Pure: compares two Plans, decides nothing else.

Stale means *a decision changed*, not that the world moved. A decision is a step that changes
something: submit this submission id at this spec hash and attempt, stop this run, export this
commit and digest, delete this path. The world may move under a reviewed plan without changing
any decision — a run finished on its own (its stop is no longer needed), or an earlier apply of
the same decisions already did a step (a submission id that exists, a snapshot that is there).
Creating a layout directory is idempotent and decides nothing, so `dirs.*` changes are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from reconcile.model import Action, Ask, Change, Plan, Step

StepKey = tuple[str, ...]


def decision_differences(reviewed: Plan, fresh: Plan) -> list[str]:
    """One line per address whose decisions differ; empty when the fresh plan may be applied."""
    before = _decisions(_deciding(reviewed))
    after = _decisions(c for c in _released(reviewed, _deciding(fresh)) if not _foreseen(reviewed, c))
    everything = _decisions(fresh.changes)
    found = []
    for address in sorted(set(before) | set(after)):
        old, new = before.get(address, []), after.get(address, [])
        if _added(old, new) or _missing(old, new, everything.get(address, [])):
            found.append(f"{address}: reviewed {_describe(old)}; now {_describe(new)}")
    return found


def _foreseen(reviewed: Plan, change: Change) -> bool:
    """A DEADLINE change the reviewed plan showed coming: the same run with the same deadline (its
    `deadline_at`, which every view prints). The clock's doing, not a new decision; a limit added or
    moved since the review is one."""
    return change.action is Action.DEADLINE and change.current is not None and any(
        c.address == change.address and c.current is not None and c.deadline_at == change.deadline_at
        and c.current.submission_id == change.current.submission_id for c in reviewed.changes)


def replacements_done(reviewed: Plan, known_runs: set[str]) -> set[str]:
    """`--replace job.X` asks for one new attempt: once the reviewed one exists, it is not asked again."""
    return {c.address for c in reviewed.actionable if c.address in reviewed.options.replace
            and any(s.kind == "submit" and s.submission_id in known_runs for s in c.steps)}


def step_key(step: Step) -> StepKey:
    """What a step decides, field by field; two steps with one key do the same thing."""
    if step.kind in ("submit", "enqueue"):  # queued or started now: one decision, to run this run
        return ("submit", step.cluster, step.submission_id, step.spec_hash, str(step.attempt), _ask_key(step.ask))
    if step.kind == "snapshot":
        return (step.kind, step.cluster, step.name, step.commit, step.digest)
    if step.kind == "stop":
        return (step.kind, step.cluster, step.submission_id)
    if step.kind in ("mkdir", "delete-snapshot"):
        return (step.kind, step.cluster, step.path)
    if step.kind == "seal-input":  # this run's staging (or this path) sealed as this version
        return (step.kind, step.cluster, step.address, step.key, step.rel, step.pin or "", step.run or "",
                step.adopt or "")
    if step.kind == "delete-input":
        return (step.kind, step.cluster, step.rel)
    if step.kind == "quotas":
        return (step.kind, step.cluster, json.dumps(step.model_dump(mode="json")["workspaces"], sort_keys=True))
    raise TypeError(f"unknown step kind {step.kind!r}")


def _decisions(changes: Iterable[Change]) -> dict[str, list[Change]]:
    """By address; a list, so two changes under one address (two pruned snapshots of one name in
    different repos) can never hide each other."""
    grouped: dict[str, list[Change]] = {}
    for change in changes:
        if not change.address.startswith("dirs."):
            grouped.setdefault(change.address, []).append(change)
    return grouped


def _deciding(plan: Plan) -> list[Change]:
    """The actionable changes, and the jobs that keep waiting in the queue: whether a run starts
    now or waits for room is the world's doing, not a new decision (a reviewer approved the run)."""
    return [c for c in plan.changes if c.action is not Action.NOOP]  # actionable or waiting: all but NOOP


def _released(reviewed: Plan, fresh: list[Change]) -> list[Change]:
    """Fresh changes less the plain submits of followers the reviewed plan showed waiting (`after:`) for the
    very same submission: "start it when its predecessors are done" was the decision, and it did not change.
    `follows` (rerun_with_predecessors) names the predecessor run, only known once it ended: left out."""
    waited = {c.address: c.after for c in reviewed.changes if c.action is Action.WAIT and c.after is not None}
    return [c for c in fresh if not (c.address in waited and plain_start(c) and c.after is not None
                                     and _unfollowed(waited[c.address]) == _unfollowed(c.after))]


def plain_start(change: Change) -> bool:
    """A plain start, now or once there is room: never a replace (it would stop a run nobody reviewed stopping)."""
    wanted = change.queue.wanted if change.action is Action.QUEUE and change.queue else change.action
    return change.action in (Action.SUBMIT, Action.QUEUE) and wanted is Action.SUBMIT \
        and all(step.kind in ("submit", "enqueue") for step in change.steps)


def _unfollowed(submission: dict) -> dict:
    return {key: value for key, value in submission.items() if key != "follows"}


def _keys(changes: list[Change]) -> set[StepKey]:
    keys = {step_key(s) for c in changes for s in c.steps}
    return keys | {("submit", q.cluster, q.submission_id, q.spec_hash, str(q.attempt), _ask_key(q.ask))
                   for c in changes if c.action is Action.QUEUE and (q := c.queue) is not None}


def _ask_key(ask: Ask | None) -> str:
    """Priority, preemptible and demand are reviewed too: a run's place in the queue is a decision."""
    return "" if ask is None else json.dumps(ask.model_dump(mode="json"), sort_keys=True)  # as saved plans keep it


def _added(old: list[Change], new: list[Change]) -> bool:
    """A step nobody reviewed is a new decision."""
    return bool(_keys(new) - _keys(old))


def _missing(old: list[Change], new: list[Change], now: list[Change]) -> bool:
    """A reviewed step the fresh plan lacks is fine only when the world already shows it done."""
    return any(not _done(key, now) for key in _keys(old) - _keys(new))


def _done(key: StepKey, now: list[Change]) -> bool:
    kind = key[0]
    runs = [c.current for c in now if c.current is not None]
    if kind == "stop":  # ended on its own or stopped by someone; not if the fresh plan keeps it running
        return not any(r.submission_id == key[2] and not r.finished for r in runs)
    if kind == "submit":
        return any(r.submission_id == key[2] for r in runs)
    if kind == "snapshot":
        return any(c.action is Action.NOOP for c in now)  # in place now
    if kind == "seal-input":  # sealed now: the input is in sync with no run of its own to show
        return any(c.action is Action.NOOP and c.current is None for c in now)
    if kind == "delete-input":  # a prune is decided again at apply (execute.inputs): deleting less is never harm
        return True
    return not now  # a deleted snapshot is gone: no change names it any more


def _describe(changes: list[Change]) -> str:
    shown = [f"`{c.action.symbol.strip()} {c.action.value}` ({', '.join(f'{s.kind} {_subject(s)}' for s in c.steps)})"
             for c in changes if c.steps]
    return " and ".join(shown) or "no change"


def _subject(step: Step) -> str:
    if step.kind in ("submit", "stop", "enqueue"):
        return step.submission_id
    if step.kind == "snapshot":
        return f"{step.name} at {step.commit[:12]} (digest {step.digest[:12]})"
    if step.kind == "seal-input":
        return f"{step.address} as {step.rel}" + (f" from {step.run}" if step.run else "")
    if step.kind in ("delete-input", "quotas"):
        return getattr(step, "rel", step.cluster)
    return step.path
