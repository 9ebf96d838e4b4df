"""Is the fresh plan the one that was reviewed? Pure: compares two Plans, decides nothing else.

Stale means *a decision changed*, not that the world moved. A decision is a step that changes
something: submit this submission id at this spec hash and attempt, stop this run, export this
commit and digest, delete this path. The world may move under a reviewed plan without changing
any decision — a run finished on its own (its stop is no longer needed), or an earlier apply of
the same decisions already did a step (a submission id that exists, a snapshot that is there).
Creating a layout directory is idempotent and decides nothing, so `dirs.*` changes are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconcile.model import Action, Change, Plan, Step

StepKey = tuple[str, ...]


def decision_differences(reviewed: Plan, fresh: Plan) -> list[str]:
    """One line per address whose decisions differ; empty when the fresh plan may be applied."""
    before = _decisions(reviewed.actionable)
    after = _decisions(fresh.actionable)
    everything = {c.address: c for c in fresh.changes}
    found = []
    for address in sorted(set(before) | set(after)):
        old, new = before.get(address), after.get(address)
        if _added(old, new) or _missing(old, new, everything.get(address)):
            found.append(f"{address}: reviewed {_describe(old)}; now {_describe(new)}")
    return found


def step_key(step: Step) -> StepKey:
    """What a step decides, field by field; two steps with one key do the same thing."""
    if step.kind == "submit":
        return (step.kind, step.cluster, step.submission_id, step.spec_hash, str(step.attempt))
    if step.kind == "snapshot":
        return (step.kind, step.cluster, step.name, step.commit, step.digest)
    if step.kind == "stop":
        return (step.kind, step.cluster, step.submission_id)
    if step.kind in ("mkdir", "delete-snapshot"):
        return (step.kind, step.cluster, step.path)
    raise TypeError(f"unknown step kind {step.kind!r}")


def _decisions(changes: Iterable[Change]) -> dict[str, Change]:
    return {c.address: c for c in changes if not c.address.startswith("dirs.")}


def _keys(change: Change | None) -> set[StepKey]:
    return {step_key(s) for s in change.steps} if change else set()


def _added(old: Change | None, new: Change | None) -> bool:
    """A step nobody reviewed is a new decision."""
    return bool(_keys(new) - _keys(old))


def _missing(old: Change | None, new: Change | None, now: Change | None) -> bool:
    """A reviewed step the fresh plan lacks is fine only when the world already shows it done."""
    return any(not _done(key, now) for key in _keys(old) - _keys(new))


def _done(key: StepKey, now: Change | None) -> bool:
    kind = key[0]
    if kind == "stop":
        return True  # the run ended on its own, or was stopped: nothing left to stop
    if kind == "submit":
        return now is not None and now.current is not None and now.current.submission_id == key[2]
    if kind == "snapshot":
        return now is not None and now.action is Action.NOOP  # in place now
    return now is None  # a deleted snapshot is gone: no change names it any more


def _describe(change: Change | None) -> str:
    if change is None or not change.steps:
        return "no change"
    steps = ", ".join(f"{s.kind} {_subject(s)}" for s in change.steps)
    return f"`{change.action.symbol.strip()} {change.action.value}` ({steps})"


def _subject(step: Step) -> str:
    if step.kind in ("submit", "stop"):
        return step.submission_id
    if step.kind == "snapshot":
        return f"{step.name} at {step.commit[:12]} (digest {step.digest[:12]})"
    return step.path
