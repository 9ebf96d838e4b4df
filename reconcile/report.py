"""What one turn of the loop saw and did: the one value the notifier, metrics and status page read.

Pure data, built by the loop (reconcile.serve) and handed over whole: readers never see half a turn. It
lives beside reconcile.model, below serve and views, so the status page (views) need not import serve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconcile.model import Plan, RunView
from specs.base import Frozen
from specs.kinds.notifications import EVENT_KINDS, EventKind  # noqa: F401 - the kinds routes name are these
from state.observed import RunStatus


class Event(Frozen):
    """Something people are told about. `key` makes it once-only: an event whose key was sent
    before (also by an earlier loop process) is never sent again."""

    kind: EventKind
    key: str
    workspace: str
    summary: str
    """One line for people: what happened, to which job."""
    time: str
    """ISO 8601 UTC, when the loop noticed it."""
    job: str | None = None
    cluster: str | None = None
    submission_id: str | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    failure: str | None = None
    """The failure class (state.runs.failures), for failed/lost/retried."""
    evidence: tuple[str, ...] = ()
    """The log lines that made the class."""
    advice: str | None = None
    next: str | None = None
    """What argus does next ("retries as attempt 2 of 3", "nothing: retry policy exhausted")."""
    commit: str | None = None
    details: dict[str, str] = {}
    status: str | None = None
    """The run's Ray status when the event was made (FAILED, RUNNING, ...)."""
    ended_at: str | None = None
    exit_code: int | None = None
    """ended_at and exit_code: from the run's own exit.json (reconcile.execute.wrapper); null when the run
    has not ended or wrote none (a lost run, one killed with its node): never guessed."""
    report: dict[str, Any] | None = None
    """The analysis report of the run's interruption (schema/incident-report.schema.json), when argus kept an
    incident record of it (reconcile.serve.reports): for an ops agent reading the JSON event."""
    commit_url: str | None = None
    page_url: str | None = None
    log_url: str | None = None
    """Links the serve adds when it sends (reconcile.views.links): its status page, the run's log there,
    the commit on the git host's web site."""


@dataclass(frozen=True)
class OtherRun:
    """A run of another workspace on one of this workspace's clusters, as Ray lists it (its labels say
    whose: hostile text, shown escaped): the serve page's view of who else uses the cluster."""

    cluster: str
    workspace: str
    job: str
    submission_id: str
    status: RunStatus
    started_at: float = 0.0
    ended_at: float = 0.0


@dataclass(frozen=True)
class Incident:
    """Something that keeps the loop from doing its work: a cluster that does not answer (`unreachable`, its
    name the subject), a cluster whose shared root argus does not trust (`root_distrusted`, likewise: its jobs
    are not planned), a desired state that does not load (`desired_state`), turns that keep failing
    (`loop_failing`), notifications that cannot be sent (`notify_blocked`). Told once when it begins and once
    (`recovered`) when it ends."""

    kind: Literal["unreachable", "root_distrusted", "desired_state", "loop_failing", "notify_blocked"]
    subject: str
    summary: str
    since: float
    """Epoch seconds when the loop first saw it."""


@dataclass(frozen=True)
class TurnReport:
    """One turn of the loop. `ok` is False when the turn failed before it could plan (then `plan`
    and `runs` are those of the last turn that could, or empty)."""

    workspace: str
    started_at: float
    finished_at: float
    ok: bool
    interval: float
    sync: Literal["off", "auto"]
    error: str | None = None
    commit: str | None = None
    plan: Plan | None = None
    runs: Mapping[str, list[RunView]] = field(default_factory=dict)
    """This workspace's runs by job name, newest last (reconcile.plan.runs.runs_by_job)."""
    drift: int = 0
    """Actionable changes the loop did not carry out (sync off, or the plan had errors)."""
    applied: tuple[str, ...] = ()
    """Addresses whose changes this turn carried out."""
    retried: tuple[str, ...] = ()
    """Submission ids of the new attempts this turn submitted."""
    events: tuple[Event, ...] = ()
    last_apply: Mapping[str, object] | None = None
    """The newest ApplyEnded audit entry (time, actor, outcome, commit), if any."""
    audit_verified: bool | None = None
    audit_problem: str | None = None
    notes: tuple[str, ...] = ()
    """What people should know about this turn (lock busy, dirty checkout, standby)."""
    gpus_held: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per cluster, the GPUs each workspace's admitted runs hold, every workspace's ledger counted
    (reconcile.views.queue.gpus_held of the turn's observation)."""
    queues: tuple = ()
    """Each cluster's whole admission queue the turn read, every workspace's entries:
    reconcile.views.queue.ClusterQueueView (views sit above this module, so it is not named here)."""
    others: tuple[OtherRun, ...] = ()
    """Other workspaces' runs on this workspace's clusters, as the turn's observation listed them."""
    standby: str | None = None
    """On a standby's report: the lease holder it stands by for ("nobody" when none holds it)."""
    unreachable: Mapping[str, str] = field(default_factory=dict)
    """Clusters the turn could not read, with why (the observation's): the loop's `unreachable` incidents."""
    distrusted: Mapping[str, str] = field(default_factory=dict)
    """Clusters whose shared root the turn did not trust, with why (reconcile.plan.root): nothing of theirs is
    planned, so the loop's `root_distrusted` incidents say it (the plan's error alone is on the page only)."""
    failed_at: str | None = None
    """Where a turn that failed stopped: "load" when the desired state did not load (an incident of its own)."""
    incidents: tuple[Incident, ...] = ()
    """What keeps the loop from its work now, as the loop tracks it across turns (reconcile.serve.incidents):
    /healthz fails while there is one, the page and /metrics show them."""
    gpu_use: Mapping[str, object] = field(default_factory=dict)
    """Per cluster running something, its GPUs and which runs use them now: state.ray.gpus.ClusterGpus (read by
    state.ray.gpu_read; `problem` says why one is unknown)."""
    gpu_history: object | None = None
    """The serve process's window of GPU samples per run and per cluster (reconcile.serve.gpu_window.GpuHistory):
    the page's timelines and the idle detector read it. None outside the loop."""
