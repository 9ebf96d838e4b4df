"""The immutable snapshot of the world that the planner reads. Plain data, no I/O."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from specs.base import Frozen, TextEnum
from specs.diagnostics import Diagnostic
from specs.kinds.models import MAX_PRIORITY, Name
from specs.workloads.checkpoint_state import CheckpointState
from specs.workloads.run_progress import Progress
from specs.workloads.submission import MAX_ATTEMPT, RunId, Submission, parse_labels
from specs.workloads.verl_profile import VerlProfile


class RunStatus(TextEnum):
    """Where a run is: Ray's job statuses, and two that only argus's records hold."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    SUBMITTING = "SUBMITTING"
    """argus wrote its intent; the outcome of the submit is unknown (argus died, or the request timed out)."""
    SUBMIT_FAILED = "SUBMIT_FAILED"
    """Ray refused the submit: the run never existed."""


PREEMPTED = "preempted"
"""The failure field of a run argus stopped for a higher-priority job (reconcile.plan.preemption):
not a failure of the run; it gets a new attempt when there is room again, whatever its retry policy."""
DEADLINE = "deadline"
"""The failure field of a run argus stopped at its job's max_runtime (reconcile.plan.deadline): marked
before the stop, as a preemption is, and kept by the refresh that sees the run STOPPED."""
IDLE = "idle"
"""The failure field of a run argus stopped because its GPUs stayed idle (a job's health.idle with `action: stop`,
reconcile.plan.health): marked before the stop, as a deadline is."""
TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED})
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
UNCONFIRMED = frozenset({RunStatus.SUBMITTING, RunStatus.SUBMIT_FAILED})
"""Record-only: argus wrote its intent, Ray never confirmed the job."""
MAYBE_RUNNING = ACTIVE | {RunStatus.SUBMITTING}
"""A run Ray no longer knows whose last known status was one of these may still have been running."""
_RECORDED_BEFORE = {"gone": RunStatus.STOPPED}
"""Statuses earlier versions wrote into records: a job that vanished from Ray while being stopped."""


class RayJob(Frozen):
    """One submission-type job as Ray's job API reports it."""

    submission_id: str
    status: RunStatus
    entrypoint: str = ""
    metadata: dict[str, str] = {}
    message: str = ""
    start_time: int | None = None
    end_time: int | None = None
    driver_node_id: str | None = None
    error_type: str | None = None
    driver_exit_code: int | None = None
    ray_job_id: str | None = None
    """Ray's own id of the job once its driver started (hex, "02000000"): what the state API names the
    job by (a placement group's creator_job_id, an actor's job_id)."""
    driver_pid: int | None = None
    """The pid of the job's driver once it called ray.init (its row's `driver_info.pid`), on driver_node_id."""
    env_values: tuple[str, ...] = Field(default=(), exclude=True, repr=False)
    """The values of the job's runtime_env env_vars, as Ray reports them: what a run reads may be named there and
    not in its entrypoint (a command job's `env: {DATA: ${dataset:x}}`), so prune looks there too. Never dumped
    or shown (argus sends no secret in them, but a job submitted by hand may)."""

    @property
    def run_id(self) -> RunId | None:
        """The run argus stamped on this job; None when its labels are not argus's (by hand, or forged)."""
        return parse_labels(self.metadata)

    @property
    def workspace(self) -> str | None:
        run = self.run_id
        return run.workspace if run else None

    @property
    def job(self) -> str | None:
        run = self.run_id
        return run.job if run else None

    @property
    def spec_hash(self) -> str | None:
        run = self.run_id
        return run.spec_hash if run else None

    @property
    def attempt(self) -> int | None:
        run = self.run_id
        return run.attempt if run else None


class Node(Frozen):
    """An alive Ray node and the logical resources it offers."""

    node_id: str
    ip: str
    is_head: bool
    resources: dict[str, float]
    used: dict[str, float] = {}
    """What Ray reports in use on it now (its autoscaler's report; a few seconds late); empty when unknown."""


class Hold(Frozen):
    """Resources Ray holds for one job on one node (state.ray.holds): a placement group's bundles there,
    its entrypoint (the driver's reservation), or an actor outside any placement group."""

    kind: Literal["group", "driver", "actor"]
    node_id: str
    resources: dict[str, float]


class ClusterState(Frozen):
    """What one Ray cluster looked like at observation time."""

    name: str
    address: str
    session_name: str
    """Changes when the head restarts without persistence: job history is gone then."""
    ray_version: str
    nodes: tuple[Node, ...]
    dead_nodes: int = 0
    version_warning: str = ""
    """What argus loses with this head's Ray (state.ray.versions); empty when it is fully supported."""
    jobs: tuple[RayJob, ...]
    holds: dict[str, tuple[Hold, ...]] = {}
    """By submission id: what Ray holds for each job it lists as active, read once per observation from its
    state API. Only ever adds to what argus counts (reconcile.plan.holdings): a hold Ray does not show (an
    answer cut short, a state API that failed) leaves the run's known demand counted instead."""
    holds_problem: str = ""
    """Why Ray's holds were not read (or only in part); empty when they were."""


class RunRecord(Frozen):
    """argus's own record of a run, kept on NFS because Ray forgets (head restart, delete_job)."""

    submission_id: str
    workspace: Name
    job: Name
    """Names as specs allow them: the planner makes the job's address from it."""
    cluster: Name
    spec_hash: str
    attempt: Annotated[int, Field(ge=1, le=MAX_ATTEMPT)]
    status: RunStatus
    """Last status argus saw: SUBMITTING, SUBMIT_FAILED, or a Ray status."""
    submitted_at: str | None = None
    updated_at: str
    plan_id: str
    commit: str
    submission: Submission | None = None
    """What was submitted, as the planner resolved it; None when the record is too old or damaged to say."""
    protect: bool = False
    """The job's `protect:` at submit time: still guards the run after its spec is deleted."""
    failure: str | None = None
    """Why the run failed (state.runs.failures), once argus has seen it finish and kept its log."""
    evidence: tuple[Annotated[str, Field(max_length=1000)], ...] = Field(default=(), max_length=20)
    """The log lines (or Ray's message) that made the failure class, secret values masked. Bounded
    generously: state.runs.failures makes fewer and shorter lines; the bounds are for hostile records."""
    advice: str | None = Field(default=None, max_length=2000)
    """What to do about the failure class, as argus said it when it recorded the class."""
    session_name: str | None = None
    """The cluster's Ray session when argus submitted: tells a refused submit from a forgotten one."""
    gpus: Annotated[float, Field(ge=0, le=2**20, allow_inf_nan=False)] | None = None
    """The GPUs of the run's whole demand, as admission held them (`argus usage` sums them)."""
    error: str | None = None
    stop_asked: str | None = Field(default=None, max_length=40)
    """When argus asked Ray to stop the run (written before it asks), for people: evidence only. Whether argus
    stopped it (no drift) is its audit chain's run.stopping (Registry.stops): any job can rewrite this."""
    bindings: Annotated[dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=4096)]],
                        Field(max_length=64)] = Field(default_factory=dict)
    """A follower's `${job:NAME.FIELD}` values as submitted (`after:`): shown only, never planned from."""
    outputs: Literal["workspace"] | None = None
    """Where argus put the run's checkpoints and logs: "workspace" (outputs/<workspace>/); None for a run made
    before outputs were per workspace (outputs/checkpoints, outputs/logs), whose next attempts keep them."""
    progress: Progress | None = None
    """How far the run had come when argus last wrote its record (specs.workloads.run_progress): for people, never
    planned from. A job can write its record: any other shape reads as unknown."""

    @classmethod
    def submitting(cls, run: RunId, submission: Submission, **fields: Any) -> RunRecord:
        """The intent, written before the submit: a crash after it leaves SUBMITTING behind."""
        return cls(submission_id=run.submission_id, workspace=run.workspace, job=run.job, cluster=submission.cluster,
                   spec_hash=run.spec_hash, attempt=run.attempt, status=RunStatus.SUBMITTING, submission=submission,
                   **fields)

    @field_validator("status", mode="before")
    @classmethod
    def _status_of_earlier_versions(cls, value: Any) -> Any:
        return _RECORDED_BEFORE.get(value, value) if isinstance(value, str) else value

    @field_validator("submission", "evidence", "advice", "bindings", "progress", mode="wrap")
    @classmethod
    def _unreadable_is_unknown(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """Records on NFS are hostile input: a submission, evidence or advice of another shape is
        unknown, not a crash (nor a record skipped, which would hide the run)."""
        try:
            return handler(value)
        except ValidationError:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)


class RunEnd(Frozen):
    """jobs/<submission_id>/exit.json: how a run ended, written by the run itself on its node
    (reconcile.execute.wrapper). It outlives Ray's memory, so it is the truth of a finished run."""

    exit_code: Annotated[int, Field(ge=0, le=255)]
    signal: str | None = Field(default=None, pattern=r"^[A-Z0-9]{1,12}$")
    """The signal the run received (a stop, or a head going down), or that killed its command."""
    signalled: bool = False
    """The run was signalled to end: by `ray job stop` or an argus stop, or by a dying head or node.
    The run cannot tell which; Ray, or argus's record of a stop, can."""
    ended_at: str = Field(default="", max_length=40)

    @property
    def status(self) -> RunStatus | None:
        """SUCCEEDED or FAILED by the command's own exit; None when a signal sent to the run ended it."""
        if self.signalled:
            return None
        return RunStatus.SUCCEEDED if self.exit_code == 0 else RunStatus.FAILED


class SourceState(Frozen):
    """What a snapshot's source resolves to now, or why it does not."""

    commit: str | None = None
    digest: str | None = None
    files: int = 0
    bytes: int = 0
    dirty: bool = False
    error: Diagnostic | None = None
    """Why it does not resolve, blaming the spec field (git.url, git.ref, path); located by whoever
    holds the desired state (the planner, `argus validate --deep`)."""


class Manifest(Frozen):
    """.argus-snapshot.json: where a snapshot came from and what it must contain."""

    workspace: str
    name: str
    repo: str
    source: dict[str, Any]
    commit: str
    digest: str
    dirty: bool = False
    files: int
    bytes: int
    created_at: str
    created_by: str


class InputFile(Frozen):
    """One file of a sealed data set or model version."""

    path: str
    """Relative to the version's directory, `/`-separated."""
    size: int
    sha256: str


class InputManifest(Frozen):
    """.argus-input.json: one sealed version of a Dataset or Model, written by argus (never by a job) when it
    sealed the version, signed with ARGUS_ROOT_KEY (state.root_key) when one is set."""

    kind: Literal["Dataset", "Model"]
    name: str
    key: str
    """The 64-hex version key (specs.kinds.inputs.version_key): the directory is named by its first 12."""
    source: dict[str, Any]
    """The spec's source as written, plus what pinned it (a hub source's resolved commit)."""
    workspace: str
    """The workspace that asked for it first (a second workspace's plan reuses it)."""
    commit: str = ""
    """The desired state's git commit that asked for it ("" outside a git checkout)."""
    created_by: str
    created_at: str
    run: str | None = None
    """The materialisation run's submission id; None when argus adopted a `path:` itself."""
    files: tuple[InputFile, ...]
    bytes: int
    digest: str
    """sha256 over the sorted files' (path, size, sha256): the version's content."""
    facts: dict[str, dict[str, Any]] = {}
    """Per file, what checks read without opening it again: a parquet's `columns` and `rows`, a model's
    `config` (config.json's keys the verl checks use)."""
    signed: bool = Field(default=False, exclude=True)
    """Set by the reader: its HMAC verified under ARGUS_ROOT_KEY (never the file's own word)."""

    @field_validator("name", "key", "workspace", "commit", "created_by", "created_at", "run", "digest")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        """Shown in plans and `argus usage --inputs` as it is: a manifest a job wrote (no ARGUS_ROOT_KEY) with an
        escape sequence or a line break in it is no manifest argus wrote."""
        if value is not None and (len(value) > 1024 or not value.isprintable()):
            raise ValueError("not a short line of printable text")
        return value


class InputState(Frozen):
    """A Dataset or Model spec as observed: its pinned version, and what the shared root holds of it."""

    cluster: str
    key: str | None = None
    """The version key; None when it could not be pinned (a hub that did not answer: see `problem`)."""
    pin: str | None = None
    """What pinned it beyond the spec: a hub revision's commit, a path's fingerprint, a prepare's code digest."""
    rel: str | None = None
    """The version's directory relative to the shared root (datasets/NAME/KEY12), when the key is known."""
    manifest: InputManifest | None = None
    """The sealed version at `rel`, when one is there and trusted."""
    staged: str | None = None
    """A finished materialisation waiting for argus's seal, relative to the shared root
    (datasets/NAME/.incoming-KEY12-WORKSPACE)."""
    problem: str | None = None
    """Why the version can be neither used nor made now (hub unreachable, a manifest not signed, files changed)."""
    fetch: str | None = None
    """A hub, url or ftp version not sealed: the fetch job's entrypoint (state.inputs.fetch_job), built by
    observation into the staging directory (specs.kinds.inputs.staged_rel, absolute): the fetcher's program is a
    file and a hub's listing an answer of the hub, neither the pure planner's to read. None when not built."""


class SnapshotState(Frozen):
    """A CodeSnapshot spec as observed: its source now, and what is on disk at its place."""

    source: SourceState
    manifest: Manifest | None = None
    """The snapshot on disk at the spec's path, if any."""
    problem: str | None = None
    """Set when verification found the files no longer match the manifest's digest."""


LAYOUT = ("datasets", "hf", "ray/tmp", "user/code", "common/code", "outputs/logs", "outputs/checkpoints", "jobs",
          ".argus/audit", ".argus/locks")
"""The directories of DESIGN.md's NFS layout, relative to a shared root."""


Amount = Annotated[float, Field(ge=0, le=2**53, allow_inf_nan=False)]
ResourceName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:/-]+$")]
Amounts = Annotated[dict[ResourceName, Amount], Field(max_length=32)]


class LedgerEntry(Frozen):
    """One job in a cluster's admission queue, as its workspace wrote it to the shared root
    (.argus/queue/<workspace>.json): waiting, or admitted (its run holds its demand)."""

    workspace: Name
    job: Name
    cluster: Name
    submission_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
    spec_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    priority: Annotated[int, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)] = 0
    preemptible: bool = False
    arrived: Amount
    """Epoch seconds when argus first queued this spec of the job: its place among equal priorities."""
    seen: Amount
    """Epoch seconds when its workspace last confirmed it still wants it: old entries expire."""
    admitted: Amount | None = None
    """Epoch seconds of the admission; its demand is held from then on, allocated or not."""
    bundles: Annotated[tuple[Amounts, ...], Field(max_length=256)] = ()
    driver: Amounts = {}
    spread: Amounts = {}
    signed: bool = Field(default=False, exclude=True)
    """Its signature (state.root_key) was checked with ARGUS_ROOT_KEY: argus wrote it. Set on read,
    never written: without a key every entry reads unsigned, and only a signed one of another
    workspace may make this workspace's runs be preempted."""
    holder: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    """The admitting argus process's liveness lock (state.queue.holders): while Ray does not list
    the run, its admission holds only while that process lives and the submit may still be in flight."""
    submitted: Amount | None = None
    """Epoch seconds when Ray accepted the run (for people and audits: what holds is decided from Ray's
    list, reconcile.plan.queue.holds)."""
    session: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")] | None = None
    """The Ray session the run was submitted to (for people: a run Ray does not list holds nothing past
    its admission window, whatever session it went to)."""


class RootIdentity(Frozen):
    """<shared_root>/.argus/root.json (state.root.identity): which root argus laid out, when, by whom."""

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    created: Amount
    host: Annotated[str, Field(max_length=255)] = ""
    actor: Annotated[str, Field(max_length=255)] = ""

    def signed_fields(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class OutputMark(Frozen):
    """<shared_root>/.argus/outputs/<key>.json (state.root.outputs): the workspace whose job writes a directory."""

    path: Annotated[str, Field(min_length=1, max_length=4096)]
    workspace: Name
    job: Name
    since: Amount = 0.0


class RootState(Frozen):
    """A present shared root as argus found it: its identity, or what the planner needs to judge its absence."""

    identity: RootIdentity | None = None
    problem: str | None = None
    """Why the identity file there cannot be trusted (malformed, unsigned while keyed, not a regular file)."""
    earlier: bool = False
    """No identity, but argus's own directories hold something: a root argus laid out before identities."""
    runs_on_ray: int = 0
    """Runs of this workspace Ray lists on the cluster: with neither identity nor earlier marks, the
    root is not the one those runs were recorded on (an NFS not mounted, a typo'd path)."""

    @property
    def unmounted(self) -> bool:
        """Neither argus's identity nor anything argus wrote, while Ray lists runs of the workspace."""
        return self.identity is None and self.problem is None and not self.earlier and self.runs_on_ray > 0

    @property
    def trusted(self) -> bool:
        """argus reads its records here and writes to it (reconcile.plan.root says why not, when not). An
        identity file a job replaced is no reason to distrust a root that holds argus's records: it is said, and
        the root planned (else one write would freeze every deadline stop there)."""
        return not self.unmounted


class ClusterQueue(Frozen):
    """A cluster's admission queue as its shared root holds it: every workspace's entries, and the quotas."""

    entries: tuple[LedgerEntry, ...] = ()
    quotas: dict[str, dict[str, float]] = {}
    problem: str | None = None
    """Why the quotas cannot be used: nothing is admitted on this cluster until it is fixed."""
    quotas_digest: str | None = None
    """The digest of the applied quotas (the admin's record its chain vouches for); None when none is applied."""
    quotas_admin: str | None = None
    """The workspace that applied them."""
    legacy_quotas: bool = False
    """No admin applied quotas yet: `quotas` come from the hand-edited .argus/quotas.yaml (migration)."""
    keyed: bool = False
    """ARGUS_ROOT_KEY was set when the ledgers were read: entries without a valid signature were left out."""
    ignored: tuple[str, ...] = ()
    """Ledger files (paths) holding entries left out for want of a valid signature: written without
    the key (or another one), or forged by a job."""
    gone: frozenset[str] = frozenset()
    """Holders (LedgerEntry.holder) whose process is proven gone: its liveness lock is free."""


def _one_visible_line(text: str) -> str:
    if not text.isprintable():
        raise ValueError("holds a line break, an escape or another invisible character")
    return text


Shown = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_one_visible_line)]
"""A name read from the shared root and shown to people: a claim's repository or directory."""


class Owner(Frozen):
    """Who owns a workspace's name on a shared root: a repository and the workspace's directory in it
    (state.claims says how a repository is identified)."""

    repository: Shown
    """`github.com/org/repo` (its origin, no scheme, user or token), `git:<root commit>` for a repository
    without a usable origin, `path:<directory>` outside git."""
    directory: Shown
    """The workspace's directory relative to the repository's root, in / form ("." for the root)."""

    def __str__(self) -> str:
        return f"directory {self.directory} of {self.repository}"


class ClaimSeen(Frozen):
    """A shared root's claim of this workspace's name (.argus/claims/<workspace>.json), as read."""

    path: str
    owner: Owner | None = None
    """Who the claim names; None when there is no claim (or it could not be read: `problem`)."""
    problem: str | None = None
    """Why the file is no claim argus can trust: not a regular file, too big, malformed, or unsigned
    (or signed with another key) while ARGUS_ROOT_KEY is set."""

    def forbids(self, ours: Owner) -> bool:
        """Whether this checkout (`ours`) may not act for the name on that root: another owns it, or no one
        can tell who does."""
        return self.problem is not None or (self.owner is not None and self.owner != ours)


def legacy_key(job: str) -> str:
    """ObservedState.checkpoints[this]: the job's directory where an argus before per-workspace outputs put it
    (outputs/checkpoints/<job>/run-<run>), for a run made then whose next attempt resumes from it."""
    return f"{job}@before-workspace-outputs"


class Registry(Frozen):
    """This workspace's submissions as argus's audit log on a shared root registers them (state.audit.registry):
    the at-most-once anchor. An id here is never submitted again; once `adopted`, a Ray row or record whose
    id is not here is no run of argus's."""

    log: str
    """The audit log's path, for messages."""
    adopted: bool = False
    """The log holds a registry.adopted record: it names every run of the workspace on this root. False for a
    log an argus before the registry wrote (or none): runs are trusted as that argus trusted them."""
    submitted: dict[str, str] = {}
    """Submission id -> time argus registered it (run.submitting, registry.adopted, or a submit step's record
    of an earlier version), but those Ray refused afterwards (run.refused)."""
    stops: dict[str, str] = {}
    """Submission id -> why argus stopped it, as its chain says (run.stopping: deadline, preempt, plan; "stop"
    for an earlier version's stop step). A STOPPED run not here was stopped outside argus: drift."""
    quotas: dict[str, str] = {}
    """Cluster -> digest of the quotas this workspace last applied there as its admin (quotas.applied): what the
    quota record on the shared root must match (state.queue.applied_quotas)."""
    imported: dict[str, str] = {}
    """Submission id -> "<job>:<spec hash>:<cluster>": jobs submitted outside argus that `argus import ray-job` adopted
    (run.imported). Their labels say nothing (a hand-submitted job has none, and any job can set some): the
    chain alone makes them this workspace's runs."""
    problems: tuple[str, ...] = ()
    """Why the log does not verify: then nobody can tell which runs argus submitted there."""

    def vouches(self, submission_id: str) -> bool:
        """The adopted chain, verified, holds this id: it is argus's run whatever the shared root says."""
        return self.adopted and not self.problems and submission_id in self.submitted


class PastRuns:
    """Older settled runs of this workspace that the run index no longer holds, asked for by spec only when a
    plan needs them (state.runs.past.Archive); this one holds none (nothing archived, or nothing read)."""

    def of(self, job: str, spec_hash: str) -> tuple[RunRecord, ...]:
        return ()

    def __eq__(self, other: object) -> bool:
        return type(other) is PastRuns

    __hash__ = None  # type: ignore[assignment]


class ObservedState(Frozen):
    """Every cluster of the desired state, this workspace's run records, and the shared filesystem."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    clusters: dict[str, ClusterState]
    records: dict[str, RunRecord]
    snapshots: dict[str, SnapshotState] = {}
    """By CodeSnapshot spec name."""
    stored: dict[str, dict[str, Manifest]] = {}
    """Per cluster: every snapshot on its shared root, by path relative to it."""
    missing_dirs: dict[str, tuple[str, ...]] = {}
    """Per cluster: LAYOUT directories that do not exist yet."""
    roots: dict[str, RootState] = {}
    """Per cluster whose shared root is here: its identity (state.root.identity)."""
    output_marks: dict[str, OutputMark] = {}
    """Per job: the mark on its shared root of the checkpoint directory it would write (state.root.outputs)."""
    failures: dict[str, str] = {}
    """Failure classes of failed runs not yet classified in their record (read from their logs)."""
    workload_checks: dict[str, tuple[Diagnostic, ...]] = {}
    """Per verl job: entry module, Hydra composition, data and model files, each located in the job's spec."""
    absent_roots: tuple[str, ...] = ()
    """Clusters whose (absolute) shared root does not exist on this machine."""
    unreachable: dict[str, str] = {}
    """Clusters whose dashboard could not be read, with why: absent from `clusters`, planned around."""
    ends: dict[str, RunEnd] = {}
    """By submission id: the exit.json each run of this workspace wrote when it ended."""
    checkpoints: dict[str, CheckpointState] = {}
    """Per verl job: the latest checkpoint in its checkpoint directory (absent: none there)."""
    verl_profiles: dict[str, VerlProfile] = {}
    """Per verl job whose config composed: what its snapshot's verl will ask Ray for and do."""
    idle: frozenset[str] = frozenset()
    """Runs `argus serve` found idle by their GPU samples (reconcile.plan.health.idle_runs): only serve keeps the
    samples; the planner stops those whose job's health.idle.action is `stop`."""
    queues: dict[str, ClusterQueue] = {}
    """Per cluster whose shared root is here: its admission queue across workspaces."""
    observed_at: float = 0.0
    """Epoch seconds of the observation: the arrival time of a job queued now."""
    run_index_problems: dict[str, str] = {}
    """Per cluster: why its shared root's run index (state.runs.index) was not used; every record was read."""
    claims: dict[str, ClaimSeen] = {}
    """Per cluster whose shared root is here: who claims this workspace's name on it."""
    owner: Owner | None = None
    """This checkout of the workspace as a claim names it; None when not observed (status, logs)."""
    registries: dict[str, Registry] = {}
    """Per cluster whose shared root is here: the submissions argus's audit log registers (none: not read,
    every run is trusted as before the registry)."""
    past: Annotated[PastRuns, SkipValidation] = Field(default_factory=PastRuns, exclude=True)
    """This workspace's archived runs, read by spec when the planner asks (a spec whose runs the index does not
    hold): never part of the observation's JSON."""
    unread_rows: dict[str, str] = {}
    """By submission id: failed runs of this workspace whose log Ray would not give, so not classified
    (nor retried) this time, and why: reported, never the end of the command."""
    inputs: dict[str, InputState] = {}
    """By address (dataset.NAME, model.NAME): every Dataset and Model of the desired state."""
    stored_inputs: dict[str, dict[str, InputManifest]] = {}
    """Per cluster whose shared root is here: every sealed input version there, by path relative to it (prune,
    usage)."""
    progress: dict[str, Progress] = {}
    """By submission id: how far each running run of this workspace has come, from its log's tail
    (state.runs.progress): shown, never planned from."""

    @property
    def refused_claims(self) -> dict[str, ClaimSeen]:
        """The clusters whose shared root's claim of the name forbids this checkout to act there."""
        ours = self.owner
        return {} if ours is None else {name: seen for name, seen in self.claims.items() if seen.forbids(ours)}
