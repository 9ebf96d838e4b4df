"""Where a run's outputs go: per workspace (outputs/<workspace>/), except for a run an argus before that made,
whose later attempts stay where its first ones put their checkpoints and logs. Pure."""

from __future__ import annotations

from reconcile.model import Change, RunView, SubmitStep
from specs.submission import Submission, legacy_outputs, spec_hash


def continued_outputs(sub: Submission, runs: list[RunView]) -> tuple[Submission, bool]:
    """The submission a new attempt of this run gets, and whether it keeps the directories of a run made
    before outputs were per workspace (the spec hash is the same either way: specs.submission.spec_hash)."""
    digest = spec_hash(sub)
    legacy = any(r.spec_hash == digest and r.legacy_outputs for r in runs)
    return (legacy_outputs(sub), True) if legacy else (sub, False)


def legacy_steps(change: Change, legacy: bool) -> Change:
    if not legacy or not change.steps:
        return change
    steps = tuple(s.model_copy(update={"legacy_outputs": True}) if isinstance(s, SubmitStep) else s
                  for s in change.steps)
    return change.model_copy(update={"steps": steps})
