"""The vocabulary of plans: actions, steps, changes. Data only. (A plan's diagnostics are specs.diagnostics'.)"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from specs.base import Frozen
from specs.diagnostics import Diagnostic
from specs.duration import MAX_SECONDS
from specs.kinds.models import MAX_QUOTA_WORKSPACES, Name, Resources
from specs.workloads.run_progress import Progress
from specs.workloads.submission import SUBMISSION_ID_PATTERN, Submission
from state.observed import ACTIVE, DEADLINE, LAYOUT, MAYBE_RUNNING, PREEMPTED, RunStatus
from state.runs.failures import advice_for

SNAPSHOT_PATH_PATTERN = r"^common/code/[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]{0,62}$"
SubmissionId = Annotated[str, StringConstraints(pattern=SUBMISSION_ID_PATTERN.pattern)]
LayoutDir = Literal[LAYOUT]  # type: ignore[valid-type]
"""Steps that touch the shared filesystem name only places of its layout: a step can't reach elsewhere."""
SnapshotPath = Annotated[str, StringConstraints(pattern=SNAPSHOT_PATH_PATTERN)]
Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]*$")]


class Action(str, Enum):
    """What a change does. Each member carries its rendering (Terraform's + - -/+), its place in
    the order apply executes changes, and its colour on a terminal."""

    symbol: str
    order: int
    """Files first (jobs need their code), then stops, so a renamed job's old run ends before its new
    one starts; snapshots are pruned last, after the runs that used them have stopped."""
    colour: str | None

    def __new__(cls, value: str, symbol: str, order: int, colour: str | None) -> Action:
        member = str.__new__(cls, value)
        member._value_ = value
        member.symbol, member.order, member.colour = symbol, order, colour
        return member

    CREATE = "create", "+", 0, "green"
    """A directory or a code snapshot on the shared filesystem; a cluster's first quotas."""
    UPDATE = "update", "~", 0, "yellow"
    """A cluster's quotas changed in place (Terraform's update in-place): before the submits that obey them."""
    SUBMIT = "submit", "+", 3, "green"
    STOP = "stop", "-", 1, "red"
    REPLACE = "replace", "-/+", 2, "yellow"
    RETRY = "retry", "+", 3, "green"
    """A new attempt of a failed run of the same spec."""
    PREEMPT = "preempt", "-", 1, "red"
    """Stop a preemptible run for a higher-priority job that cannot otherwise fit; it waits in the queue again."""
    DEADLINE = "deadline", "-", 1, "red"
    """Stop an active run past its job's max_runtime (reconcile.plan.deadline); its end is classed `deadline`."""
    IDLE = "idle", "-", 1, "red"
    """Stop a run whose GPUs stayed under its job's health.idle threshold for the window, where the job says
    `action: stop` (reconcile.plan.idle; only `argus serve` holds the samples); its end is classed `idle`."""
    QUEUE = "queue", "~", 2, "cyan"
    """A run that waits in the cluster's admission queue until its whole demand fits (reconcile.plan.queue)."""
    DELETE = "delete", "-", 4, "red"
    DRIFT = "drift", "!", 5, "yellow"
    """A run stopped (or deleted while active) outside argus: shown, counted by --detailed-exitcode, left
    stopped. Nothing for apply to do; `on_drift: restart` plans a new attempt (RETRY) instead."""
    NOOP = "no-op", " ", 5, None
    WAIT = "wait", "..", 5, "blue"
    """A job with `after:` whose predecessors' current runs have not ended as required: no steps, not
    queued for capacity, not a difference for --detailed-exitcode (reconcile.plan.after)."""


class StepModel(Frozen, ABC):
    """One thing apply does. `describe()` is how plan and apply show it; how it is carried out lives in
    reconcile.execute's step table, which must name every member of `Step` (a test checks both)."""

    @abstractmethod
    def describe(self) -> str:
        """One line for people, the same in the plan and in apply's progress. Pure."""


class Ask(Frozen):
    """What admission weighs for one run: its whole demand, its priority, whether it may be preempted."""

    job: Name
    bundles: tuple[dict[str, float], ...] = ()
    """Each on one node: verl's placement group per node."""
    driver: dict[str, float] = {}
    spread: dict[str, float] = {}
    """Anywhere: a `command` job's declared `demand:`."""
    pools: tuple[str, ...] = ()
    """For people: the verl resource pool of each bundle (global_pool, reward_pool, ...)."""
    priority: int = 0
    preemptible: bool = False


class SubmitStep(StepModel):
    """Submit one run; idempotent because the submission id is deterministic."""

    kind: Literal["submit"] = "submit"
    cluster: Name
    submission_id: SubmissionId
    spec_hash: Hex
    attempt: int
    submission: Submission
    ask: Ask | None = None
    """Set when the run has a demand: apply admits it again, under the cluster's admission lock, before
    submitting; a run that no longer fits waits in the queue instead."""
    seen: float | None = None
    """When its plan observed the world: its arrival in the queue if it was never queued before."""
    max_runtime: int | None = Field(default=None, ge=1, le=MAX_SECONDS)
    """The job's max_runtime in seconds: the run gets MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP (submit
    time + this) in its env, so verl saves a checkpoint before argus stops it. Outside the Submission."""
    bindings: dict[str, str] = {}
    """`${job:NAME.FIELD}` placeholder -> value, filled in at submit (a released follower's, from the
    predecessors' specs and run ids: never from a record)."""
    checkpoint_dir: str | None = None
    """A command job's checkpoint directory (`${shared_root}/...`), handed to it as ARGUS_CHECKPOINT_DIR."""
    legacy_outputs: bool = False
    """An attempt of a run made before outputs were per workspace: its directories stay where its first
    attempts' records name them (outputs/checkpoints, outputs/logs), so it resumes from its own checkpoints."""

    def describe(self) -> str:
        return f"submit {self.submission_id} to cluster {self.cluster}"


class EnqueueStep(StepModel):
    """Put a run in its cluster's admission queue (the workspace's ledger on the shared root)."""

    kind: Literal["enqueue"] = "enqueue"
    cluster: Name
    submission_id: SubmissionId
    spec_hash: Hex
    attempt: int
    ask: Ask
    seen: float | None = None
    """When its plan observed the world: its arrival in the queue if it was never queued before."""

    def describe(self) -> str:
        return f"queue {self.submission_id} on cluster {self.cluster} until its whole demand fits"


class StopStep(StepModel):
    """Stop one run and wait until Ray reports it terminal, so a replacement never overlaps."""

    kind: Literal["stop"] = "stop"
    cluster: Name
    submission_id: SubmissionId
    preempted_for: str | None = None
    """`<workspace>/<job>` of the higher-priority job this stop makes room for: the run's record says
    it was preempted, so the planner queues a new attempt that resumes from its checkpoint."""

    deadline: float | None = None
    """Epoch seconds of the run's deadline (its job's max_runtime) when this stop is for it: the run's
    record is marked `deadline` before the stop, so its end is classed so."""
    idle: bool = False
    """The stop is for GPUs left idle (the job's health.idle, `action: stop`): marked `idle` before the stop."""

    def describe(self) -> str:
        why = ", past its max_runtime," if self.deadline is not None else ", its GPUs idle," if self.idle else ""
        return f"stop {self.submission_id} on cluster {self.cluster}{why} and wait until it has stopped"


class MkdirStep(StepModel):
    """Create a directory of the NFS layout (and its parents)."""

    kind: Literal["mkdir"] = "mkdir"
    cluster: Name
    path: LayoutDir
    """Relative to the cluster's shared root."""

    def describe(self) -> str:
        return f"create directory {self.path} on the shared root of {self.cluster}"


class RootStep(StepModel):
    """Write argus's identity on a shared root that has none (state.root.identity): from then on an empty
    directory at its path (an NFS not mounted) is told apart from it."""

    kind: Literal["root"] = "root"
    cluster: Name

    def describe(self) -> str:
        return f"write argus's identity (.argus/root.json) on the shared root of {self.cluster}"


class QuotasStep(StepModel):
    """Apply a cluster's quotas as its admin: the digest into the audit chain, then the record on the shared
    root every team's admission reads (state.queue.applied_quotas)."""

    kind: Literal["quotas"] = "quotas"
    cluster: Name
    workspaces: dict[Name, Resources] = Field(default={}, max_length=MAX_QUOTA_WORKSPACES)
    """Every cap, as reviewed: a saved plan carries what it will write, checked again when read."""

    def describe(self) -> str:
        return f"apply the quotas of {len(self.workspaces)} workspace(s) on cluster {self.cluster}"


class SnapshotStep(StepModel):
    """Export a code snapshot into place atomically; refused if the source moved since the plan."""

    kind: Literal["snapshot"] = "snapshot"
    cluster: Name
    name: Name
    commit: Hex
    digest: Hex

    def describe(self) -> str:
        return f"export commit {self.commit[:12]} as snapshot {self.name} (digest {self.digest[:12]})"


class DeleteSnapshotStep(StepModel):
    """Delete a snapshot of this workspace that no spec names (--prune)."""

    kind: Literal["delete-snapshot"] = "delete-snapshot"
    cluster: Name
    path: SnapshotPath
    """Relative to the cluster's shared root."""

    def describe(self) -> str:
        return f"delete snapshot {self.path} from the shared root of {self.cluster}"


INPUT_REL_PATTERN = r"^(datasets|models)/[a-z0-9][a-z0-9-]{0,62}/[0-9a-f]{12}$"
InputRel = Annotated[str, StringConstraints(pattern=INPUT_REL_PATTERN)]
STAGED_REL_PATTERN = r"^(datasets|models)/[a-z0-9][a-z0-9-]{0,62}/\.incoming-[0-9a-f]{12}-[a-z0-9][a-z0-9-]{0,62}$"
StagedRel = Annotated[str, StringConstraints(pattern=STAGED_REL_PATTERN)]


class SealInputStep(StepModel):
    """Seal one version of a Dataset or Model: digest what its materialisation run left in `staged` (or what a
    `path:` source holds, linked in without copying), check it against the pinned source, write the signed
    manifest, make it read-only and rename it to `rel` in one step. Refused, and nothing sealed, on any mismatch."""

    kind: Literal["seal-input"] = "seal-input"
    cluster: Name
    address: str
    """dataset.NAME or model.NAME: the spec it seals a version of."""
    key: Hex
    pin: str | None = None
    """What pinned the version at plan (a hub commit, a path's fingerprint, a prepare's code digest): the seal
    recomputes the key from it and the spec, and refuses a spec or a path changed since."""
    rel: InputRel
    staged: StagedRel
    run: str | None = None
    """The materialisation run whose success Ray reported; None for a `path:` adopted by apply itself."""
    adopt: str | None = None
    """A `path:` source's directory or file, linked (or copied across filesystems) into `staged` first."""

    def describe(self) -> str:
        what = f"adopt {self.adopt} as" if self.adopt else f"seal what {self.run or 'its run'} left as"
        return f"{what} {self.address} version {self.rel}"


class DeleteInputStep(StepModel):
    """Delete one sealed input version no desired spec, kept run or running job names (--prune)."""

    kind: Literal["delete-input"] = "delete-input"
    cluster: Name
    rel: InputRel
    bytes: int = 0

    def describe(self) -> str:
        return f"delete input version {self.rel} ({self.bytes} bytes) from the shared root of {self.cluster}"


Step = Annotated[SubmitStep | StopStep | MkdirStep | RootStep | SnapshotStep | DeleteSnapshotStep | EnqueueStep
                 | QuotasStep | SealInputStep | DeleteInputStep, Field(discriminator="kind")]


class RunView(Frozen):
    """A run of a job as observed: on Ray, or only in argus's NFS record."""

    submission_id: str
    cluster: str
    spec_hash: str
    attempt: int
    status: RunStatus
    """The Ray status; for a run Ray forgot, the last status argus recorded."""
    on_ray: bool
    """False when Ray no longer knows the run (head restart, delete_job)."""
    failure: str | None = None
    """Failure class of a failed run, when known (state.runs.failures); "lost" for a lost run."""
    lost: bool = False
    """Neither Ray nor the run's exit.json shows an end, and the head restarted since it was seen:
    whatever it was doing died with that head."""
    started_at: float = 0.0
    """Epoch seconds of the submit (Ray's start time, or argus's record): orders a job's runs."""
    ended_at: float = Field(default=0.0, exclude=True)
    """Epoch seconds of its end (Ray's end time, or when argus recorded the end); 0 while it runs or when
    unknown. Left out of plan JSON like `evidence`: the status page shows it."""
    protect: bool = False
    submission: Submission | None = Field(default=None, exclude=True)
    """What the run was asked to run, from argus's record; None when unknown. Left out of plan
    JSON and saved plans, whose format does not carry it."""
    evidence: tuple[str, ...] = Field(default=(), exclude=True)
    """The log lines that made the failure class, from argus's record. Left out of plan JSON and
    saved plans like `submission`: `argus status` shows them."""
    stop_asked: bool = Field(default=False, exclude=True)
    """argus asked Ray to stop it (its audit chain says so: run.stopping): its STOPPED is argus's own doing,
    not drift. The run's record (stop_asked there) is evidence for people, never this."""
    stopped_by: str | None = Field(default=None, exclude=True)
    """Why argus stopped it, as its chain says: deadline, preempt, plan ("stop" for an earlier version's)."""
    bindings: dict[str, str] = Field(default={}, exclude=True)
    """A follower's `${job:...}` values as its record says they were submitted (`argus status` shows them)."""
    legacy_outputs: bool = Field(default=False, exclude=True)
    """Made before outputs were per workspace (its record says so): its next attempts keep its directories."""
    cluster_read: bool = Field(default=True, exclude=True)
    """Its cluster answered this observation: only then does "Ray does not list it" mean anything."""
    unrecorded: bool = Field(default=False, exclude=True)
    """Known only from argus's audit log (the registry of its submissions): neither Ray nor a record
    remembers it. Never submitted again (reconcile.plan.registry)."""
    progress: Progress | None = Field(default=None, exclude=True)
    """Step N of M, rate and ETA: from its log while it runs (ObservedState.progress), else as its record last
    said. Shown only (status, page, metrics), never planned from, so left out of plan JSON."""

    @property
    def finished(self) -> bool:
        return self.status not in MAYBE_RUNNING

    @property
    def failed(self) -> bool:
        """Ended in failure, or lost with its head: the runs `argus status` explains."""
        return self.status is RunStatus.FAILED or self.lost

    @property
    def advice(self) -> str | None:
        """What to do about the failure class (state.runs.failures.ADVICE)."""
        return advice_for(self.failure)

    @property
    def drifted(self) -> str | None:
        """How the run ended outside argus, when it did: STOPPED without argus (nor a preemption) asking,
        or gone from Ray while argus last saw it active (deleted). A run that ended by itself (SUCCEEDED,
        FAILED) or died with its head (lost) is not drift."""
        if self.stop_asked or self.failure == PREEMPTED or self.lost:
            return None
        if self.status is RunStatus.STOPPED:
            return "stopped outside argus"
        if not self.on_ray and self.cluster_read and self.status in ACTIVE:
            return "deleted outside argus while it ran"
        return None

    @property
    def health(self) -> str:
        if self.on_ray:
            failed = self.failure and (self.status is RunStatus.FAILED
                                       or (self.failure == DEADLINE and self.status is RunStatus.STOPPED))
            if self.drifted:
                return f"{self.status} ({self.drifted})"
            return f"{self.status} ({self.failure})" if failed else self.status.value
        if self.drifted:
            return f"{self.drifted} (last seen {self.status})"
        if self.unrecorded:
            return "forgotten (argus submitted it; neither Ray nor its record remembers it)"
        if self.lost:
            return f"lost (last seen {self.status})"
        if self.status in MAYBE_RUNNING:
            return f"unknown (last seen {self.status})"
        return f"forgotten ({self.status})"


class FieldChange(Frozen):
    path: str
    before: Any = None
    after: Any = None


class VerlNote(Frozen):
    """How the snapshot's verl will run a job that starts (or waits to), as the plan shows it. Display only."""

    version: str | None
    """The snapshot's verl version; None when it has no version file."""
    checked: str
    """Which of argus's verl knowledge it was checked with, in words."""
    entry: str
    """The module and the config it composes: "verl.trainer.main_ppo, config ppo_megatron_trainer"."""
    pools: str
    """Every resource pool verl will place, with its shape."""
    resume: str | None = None
    """Whether the run starts fresh or resumes, and from what."""


class Waiting(Frozen):
    """One predecessor a follower waits on (`after:`), as the plan saw it."""

    job: Name
    needs: Literal["succeeded", "finished"]
    state: str
    """Its current run's state in words: "RUNNING", "no run yet", "FAILED (user_code)", ..."""
    submission_id: str | None = None
    blocked: bool = False
    """Its current run ended otherwise and no new attempt is planned: only a retry or a replace releases."""


class Change(Frozen):
    """What the plan does to one address, and the steps that do it."""

    address: str
    action: Action
    reason: str
    """Why, for people. Display only: the applier never reads it."""
    current: RunView | None = None
    """The run that now represents this address, if any."""
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    diff: tuple[FieldChange, ...] = ()
    steps: tuple[Step, ...] = ()
    queue: QueueInfo | None = None
    """For a job with a demand that wants to start: admitted now, or its place in the queue."""
    verl: VerlNote | None = None
    """For a verl job that starts or waits: its verl version, entry, pools and resume, for people."""
    deadline_at: float | None = None
    """Epoch seconds when the job's active run reaches its max_runtime (its Ray start time + max_runtime)."""
    waiting_on: tuple[Waiting, ...] = ()
    """A job with `after:`: its predecessors, while it waits (WAIT) and when released (what it follows)."""


class QueueInfo(Frozen):
    """A job's place in its cluster's admission queue, as the plan shows it."""

    cluster: str
    submission_id: str
    """The run that starts or waits (with its spec hash and attempt: what a reviewer approved)."""
    spec_hash: str
    attempt: int
    demand: str
    """Its whole demand, described: "2 node(s) x (2 GPU, 4 CPU); driver 1 CPU"."""
    gpus: float = 0.0
    priority: int = 0
    position: int | None = None
    """1 for the head of the queue; None when it starts now."""
    reason: str
    wanted: Action = Action.SUBMIT
    """What the plan would do were there room: submit, replace or retry."""
    ask: Ask | None = None
    """What admission weighs for it: its demand, priority and preemptible, as reviewed."""
    from_queue: bool = False
    """It waited in the queue (an earlier apply queued it) and is admitted now: `argus serve` starts
    it even without --sync auto, as the apply that queued it asked."""


class UnmanagedJob(Frozen):
    cluster: str
    submission_id: str
    status: RunStatus
    owner: str | None
    """The other workspace that owns it, or None when submitted by hand."""
    claims: str | None = None
    """"<workspace>/<job>" when it carries this workspace's labels but is not a proven run of it."""


class PlanOptions(Frozen):
    """What the person asked for besides the desired state; recorded in saved plans and the audit log."""

    prune: bool = False
    allow_empty: bool = False
    targets: tuple[str, ...] = ()
    """Addresses (job.NAME, code.NAME) the plan is limited to, with what they depend on."""
    replace: tuple[str, ...] = ()
    """Jobs (job.NAME) to run again although their spec is unchanged."""


class Plan(Frozen):
    workspace: str
    changes: tuple[Change, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    unmanaged: tuple[UnmanagedJob, ...] = ()
    options: PlanOptions = PlanOptions()

    @property
    def actionable(self) -> tuple[Change, ...]:
        """What apply carries out: neither what is in sync, nor drift it only reports, nor jobs that still wait."""
        return tuple(c for c in self.changes
                     if c.action not in (Action.NOOP, Action.DRIFT, Action.WAIT) and not _waits_as_before(c))

    @property
    def drifted(self) -> tuple[Change, ...]:
        """Runs stopped or deleted outside argus and left so: differences, though apply has nothing to do."""
        return tuple(c for c in self.changes if c.action is Action.DRIFT)

    @property
    def differs(self) -> bool:
        """Whether the clusters differ from the desired state: `plan --detailed-exitcode` exits 2."""
        return bool(self.actionable or self.drifted)

    @property
    def waiting(self) -> tuple[Change, ...]:
        """Jobs already in the queue that still wait: shown, but not actionable."""
        return tuple(c for c in self.changes if _waits_as_before(c))

    @property
    def following(self) -> tuple[Change, ...]:
        """Jobs that wait on their predecessors (`after:`): shown, not actionable."""
        return tuple(c for c in self.changes if c.action is Action.WAIT)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def steps(self) -> tuple[Step, ...]:
        return tuple(step for change in self.actionable for step in change.steps)

    def counts(self) -> dict[Action, int]:
        return {a: sum(c.action is a for c in self.changes) for a in Action}


def _waits_as_before(change: Change) -> bool:
    """A job already in the queue that still waits: shown, but nothing to do."""
    return change.action is Action.QUEUE and not change.steps
