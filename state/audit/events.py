"""What the audit log records, as types: each event's fields are fixed, so a reader (and `argus
audit show`) can rely on them and a writer can't misspell one."""

from __future__ import annotations

from typing import Any, Literal

from specs.base import Frozen


class ApplyStarted(Frozen):
    event: Literal["apply.start"] = "apply.start"
    changes: int
    options: dict[str, Any]
    """The PlanOptions the plan was made with (--target, --replace, --prune, --allow-empty)."""


class ApplyEnded(Frozen):
    event: Literal["apply.end"] = "apply.end"
    outcome: Literal["ok", "failed"]
    changes: int | None = None
    error: str | None = None
    """Redacted: no secret value reaches the audit log."""


class StepCarriedOut(Frozen):
    """One step of one change (event "action", the name the log has always used)."""

    event: Literal["action"] = "action"
    address: str
    action: str
    step: str
    submission_id: str | None = None
    outcome: str
    error: str | None = None


class RunFinished(Frozen):
    event: Literal["run.finished"] = "run.finished"
    address: str
    submission_id: str
    status: str
    failure: str | None = None


class RunSubmitting(Frozen):
    """Written before argus asks Ray to run a submission id: the registry of argus's submissions
    (state.audit.registry). An id registered here is never submitted again, whatever Ray or the root say."""

    event: Literal["run.submitting"] = "run.submitting"
    submission_id: str
    address: str
    job: str
    spec_hash: str
    attempt: int
    cluster: str
    inputs: dict[str, str] | None = None
    """The Datasets and Models the run reads: address -> `REL sha256:DIGEST` (the version's directory and its
    sealed content), so the log says what each run trained on."""


class RunImported(Frozen):
    """`argus import ray-job` adopted a job submitted outside argus as a run of `job` at `spec_hash` (the spec it
    wrote): from this record on the chain, not the job's metadata, makes it this workspace's run."""

    event: Literal["run.imported"] = "run.imported"
    submission_id: str
    address: str
    job: str
    spec_hash: str
    cluster: str
    status: str
    """The job's status on Ray when it was imported."""


class RunRefused(Frozen):
    """Ray answered that it did not take the run (not an answer lost on the way): the id is free again."""

    event: Literal["run.refused"] = "run.refused"
    submission_id: str
    error: str | None = None


class RunStopping(Frozen):
    """Written before argus asks Ray to stop a run: argus's own stops, in its chain. A run Ray lists as STOPPED
    is argus's doing only when the chain holds this record of it (reconcile.plan.registry.stopped_by); the
    run's record on the shared root (stop_asked, failure) stays as evidence for people, never the proof."""

    event: Literal["run.stopping"] = "run.stopping"
    submission_id: str
    why: Literal["deadline", "preempt", "plan", "idle"]
    """deadline: past its job's max_runtime; preempt: room for a higher-priority job; plan: the plan stops it
    (replaced, removed, `state: stopped`: the `action` record that follows names the change)."""


class QuotasApplied(Frozen):
    """Written by the cluster's admin workspace before it writes the quota record on the shared root: the
    digest every team's admission checks that record against (state.queue.applied_quotas)."""

    event: Literal["quotas.applied"] = "quotas.applied"
    cluster: str
    digest: str
    workspaces: dict[str, dict[str, float]]
    """The caps applied, for people reading the log (the digest is what is checked)."""


class RegistryAdopted(Frozen):
    """The runs an argus from before the registry left on this root, trusted as that argus trusted them,
    written once by the first apply that finds the log registering nothing; from then on the log is the
    registry: a run it does not name is not argus's. Several records when there are many ids."""

    event: Literal["registry.adopted"] = "registry.adopted"
    submission_ids: tuple[str, ...]


class LockBroken(Frozen):
    event: Literal["unlock"] = "unlock"
    lock: dict[str, Any]
    reason: str | None = None
    """Why argus broke it itself (its holder died on this host); absent for `argus unlock`."""


class Recovered(Frozen):
    """Written by the append after a crash, before its own record: the bytes a torn append left at the
    end of the log (they stay there, just before this record), which the chain goes on without."""

    event: Literal["audit.recovered"] = "audit.recovered"
    torn_bytes: int
    torn_sha256: str


class AnchorMismatch(Frozen):
    """Written by an append that found the log disagreeing with its anchor (records removed from the
    end, a deleted log...), before it rewrote the anchor: the evidence stays in the chain."""

    event: Literal["audit.anchor-mismatch"] = "audit.anchor-mismatch"
    found: tuple[str, ...]


class NameClaimed(Frozen):
    """A workspace name's claim on a shared root (state.claims) written: by the first apply, or moved by
    `argus claim` (then `previous` names the owner it had, or `replaced` says why it could not be trusted)."""

    event: Literal["claim"] = "claim"
    repository: str
    directory: str
    previous: dict[str, str] | None = None
    """The owner the claim named before ({"repository", "directory"}); None for a new claim."""
    replaced: str | None = None
    """Why the claim it replaced could not be trusted (not a regular file, malformed, unsigned while keyed)."""


AuditEvent = (ApplyStarted | ApplyEnded | StepCarriedOut | RunFinished | LockBroken | Recovered | AnchorMismatch
              | NameClaimed | RunSubmitting | RunRefused | RunStopping | RegistryAdopted | QuotasApplied | RunImported)
