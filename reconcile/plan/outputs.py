"""Where a run's outputs go: per workspace (outputs/<workspace>/), except for a run an argus before that made,
whose later attempts stay where its first ones put their checkpoints and logs. Pure."""

from __future__ import annotations

import re

from reconcile.model import Change, RunView, SubmitStep
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Job, Trainer
from specs.workloads.submission import Submission, legacy_outputs, spec_hash
from specs.workloads.verl import checkpoint_dir
from state.observed import ObservedState

LEGACY_FOLDERS = ("checkpoints", "logs")
"""outputs/checkpoints and outputs/logs: every workspace's, as argus laid them out before outputs were per
workspace (runs made then keep them); a spec may still name a folder there, as it always could."""


def continued_outputs(sub: Submission, runs: list[RunView]) -> tuple[Submission, bool]:
    """The submission a new attempt of this run gets, and whether it keeps the directories of a run made
    before outputs were per workspace (the spec hash is the same either way: specs.workloads.submission.spec_hash)."""
    digest = spec_hash(sub)
    legacy = any(r.spec_hash == digest and r.legacy_outputs for r in runs)
    return (legacy_outputs(sub), True) if legacy else (sub, False)


def legacy_steps(change: Change, legacy: bool) -> Change:
    if not legacy or not change.steps:
        return change
    steps = tuple(s.model_copy(update={"legacy_outputs": True}) if isinstance(s, SubmitStep) else s
                  for s in change.steps)
    return change.model_copy(update={"steps": steps})


def foreign_outputs(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """A job whose checkpoint directory is another workspace's: named under its outputs, or marked on the
    shared root by another workspace's submit (state.root.outputs). It would resume from their checkpoints."""
    found = []
    for name, job in sorted(desired.jobs.items()):
        why = _in_others_outputs(job, desired.workspace.name) or _marked_by_other(observed, name, desired)
        if why:
            address, directory = Address.job(name), checkpoint_dir(job, desired.workspace.name)
            found.append(Diagnostic(severity="error", address=address, field="trainer.checkpoint_dir",
                                    message=f"{address} writes checkpoints to {directory}, {why}: each team's "
                                            "outputs are its own",
                                    hint="give it a `trainer.checkpoint_dir` of its own (by default argus puts it "
                                         "under outputs/<workspace>/)").located(desired.source(address)))
    return found


def _in_others_outputs(job: Job, workspace: str) -> str | None:
    explicit = (job.trainer or Trainer()).checkpoint_dir or ""
    match = re.match(r"^\$\{shared_root\}/+outputs/+([^/]+)/", explicit)
    if match is None or match.group(1) in (workspace, *LEGACY_FOLDERS):
        return None
    return f"under workspace {match.group(1)!r}'s outputs"


def _marked_by_other(observed: ObservedState, name: str, desired: DesiredState) -> str | None:
    seen = observed.output_marks.get(name)
    if seen is None or seen.workspace == desired.workspace.name:
        return None
    return f"which workspace {seen.workspace!r} (its job.{seen.job}) writes, by the mark on the shared root"
