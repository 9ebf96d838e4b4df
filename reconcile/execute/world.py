"""What a step may touch while apply runs it, and what it reports back.

The executors in the step table see only a `World`: a Ray client and a shared root per cluster, the
audit trail, the run book, the code shelf, the secrets to send and echo. Nothing else of the apply
(options, the desired state, the plan) reaches them, so a unit test builds one from fakes and
real directories.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from specs.errors import ArgusError
from specs.workloads.submission import secret_refs
from state.audit import log as audit
from state.audit.events import AuditEvent
from state.audit.group_commit import GroupCommit

if TYPE_CHECKING:
    from reconcile.execute.code import CodeShelf
    from reconcile.execute.inputs import InputShelf
    from reconcile.execute.runbook import RunBook
    from reconcile.plan.placement import Demand
    from state.observed import Registry
    from state.ray.client import RayClient

DEFAULT_STOP_TIMEOUT = 120.0


class Outcome(str, Enum):
    """What one step did (controller-runtime's OperationResult). The values are the words of apply's
    summary table and of the audit log's `outcome`."""

    CREATED = "created"
    EXISTS = "exists"
    """Already there as planned, nothing changed: a directory, a snapshot, a run Ray already had."""
    SUBMITTED = "submitted"
    STOPPED = "stopped"
    DELETED = "deleted"
    ALREADY_GONE = "already gone"
    SPARED = "spared"
    """A preemption no longer needed when apply came to it: the run keeps running."""
    QUEUED = "queued"
    """Waits in the cluster's admission queue: its whole demand does not fit (yet)."""


@dataclass(frozen=True)
class Done:
    """A step's outcome, and for a stop the status the run ended in ("gone": Ray forgot it meanwhile)."""

    outcome: Outcome
    ended_as: str | None = None

    def __str__(self) -> str:
        return f"{self.outcome.value} ({self.ended_as})" if self.ended_as else self.outcome.value


@dataclass(frozen=True)
class Provenance:
    """Who asked for this apply and from what: stamped on every audit record, run record and Ray job."""

    plan_id: str
    commit: str
    """Git commit of the desired state ("none" outside git)."""
    dirty: bool
    reviewed: Mapping[str, str] = field(default_factory=dict)
    """For a saved plan: the reviewed commit and desired-state digest."""

    def audit_fields(self) -> dict[str, Any]:
        return {"plan_id": self.plan_id, "commit": self.commit, "dirty": self.dirty, **self.reviewed}


@dataclass(frozen=True)
class Secrets:
    """The values of the `${env:NAME}` references this plan's jobs use, read once before anything runs."""

    values: Mapping[str, str] = field(default_factory=dict)

    def fill(self, env: Mapping[str, str]) -> dict[str, str]:
        """env as Ray must get it: each reference replaced by its value. Only the request carries these."""
        refs = secret_refs(dict(env))
        return {key: self.values[refs[key]] if key in refs else value for key, value in env.items()}

    def redact(self, text: str) -> str:
        """Errors can echo what was sent: no secret value may reach a record, a log or the audit trail."""
        for value in self.values.values():
            if value:
                text = text.replace(value, "***")
        return text

    def scrub(self, err: ArgusError) -> ArgusError:
        """err itself, or, when its text holds a secret value, a copy of the same kind with the value
        redacted (raise it `from None`: a --debug traceback must not print the original)."""
        text = self.redact(str(err))
        if text == str(err):
            return err
        clean = type(err).__new__(type(err))
        ArgusError.__init__(clean, text)
        clean.__dict__.update({k: self.redact(v) if isinstance(v, str) else v for k, v in vars(err).items()})
        return clean


@dataclass(frozen=True)
class AuditTrail:
    """The workspace's audit log on each shared root; every record stamped with the provenance and
    every string in it redacted."""

    roots: Mapping[str, str]
    """Shared root by cluster."""
    workspace: str
    provenance: Provenance
    secrets: Secrets = Secrets()
    _logs: dict[str, GroupCommit[AuditEvent]] = field(default_factory=dict, compare=False, repr=False)
    """One writer per shared root. The log's own lock is a POSIX record lock, the process's: it does not
    keep this process's threads (concurrent submits) from appending at once and forking the hash
    chain; this does, and it writes the records they queue meanwhile together (state.audit.group_commit)."""
    _opening: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def append(self, cluster: str, event: AuditEvent) -> None:
        self._log(self.roots[cluster]).commit(self._redacted(event))

    def send(self, cluster: str, event: AuditEvent) -> None:
        """Queued for the log without waiting: what a step did, once what must precede its effect (a run's
        registration) is durable. The next record appended carries it, `flush` at the latest."""
        self._log(self.roots[cluster]).send(self._redacted(event))

    def flush(self) -> None:
        """Every record sent is written; raises if one may not have been. Every root is flushed, whatever another
        root's log does: a broken root loses no healthy root's records."""
        with self._opening:
            logs = list(self._logs.values())
        _each(logs, lambda log: log.flush())

    def everywhere(self, event: AuditEvent) -> None:
        """Once on each shared root: clusters may share one, and its log must not repeat the event. Written on
        every root before the first failure is raised."""
        redacted = self._redacted(event)
        _each([self._log(root) for root in sorted(set(self.roots.values()))], lambda log: log.commit(redacted))

    def _log(self, root: str) -> GroupCommit[AuditEvent]:
        with self._opening:
            if root not in self._logs:
                stamp = self.provenance.audit_fields()
                self._logs[root] = GroupCommit(lambda events: audit.append_all(root, self.workspace, events, stamp))
            return self._logs[root]

    def error_text(self, err: BaseException) -> str:
        """An error as the audit log keeps it: a bug names its type, and no secret value survives."""
        return self.secrets.redact(str(err) if isinstance(err, ArgusError) else f"{type(err).__name__}: {err}")

    def _redacted(self, event: AuditEvent) -> AuditEvent:
        fields = event.model_dump()
        return event.model_copy(update={k: self.secrets.redact(v) for k, v in fields.items() if isinstance(v, str)})


@dataclass
class Journal:
    """What this apply did, in order: the summary table, and the clusters whose job table it changed
    (only those are read again afterwards to bring the records up to date)."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)
    """(address, action, outcomes) of every change applied."""
    touched: set[str] = field(default_factory=set)
    """Clusters where a run was submitted or stopped."""


@dataclass(frozen=True)
class World:
    """All a step may touch. Built once per apply from the observation the plan was made from."""

    clients: Mapping[str, RayClient]
    roots: Mapping[str, str]
    """Shared root by cluster."""
    workspace: str
    """This workspace's name: only what carries it is argus's to touch."""
    audit: AuditTrail
    runs: RunBook
    code: CodeShelf
    inputs: InputShelf
    secrets: Secrets
    echo: Callable[[str], None] = print
    """Whole lines only: concurrent submits share it (execute.batch serialises the calls)."""
    journal: Journal = field(default_factory=Journal)
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    admissions: dict[str, str | None] = field(default_factory=dict)
    """Submits admitted ahead with their batch (admit.admit_ahead), by submission id: None to submit
    now, else why it waits. Each is taken once, by that run's submit."""
    known: Mapping[str, Demand] = field(default_factory=dict)
    """The demand argus knows of this workspace's runs Ray lists as active (reconcile.plan.queue.known_demands):
    each admission at apply counts it for those runs whatever the ledger holds."""
    chains: Mapping[str, Registry] = field(default_factory=dict)
    """Per cluster: the submissions argus's audit log registers (the plan's observation): housekeeping acts
    only on runs an adopted chain holds, whatever a record on the shared root says."""
    admins: Mapping[str, str | None] = field(default_factory=dict)
    """Per cluster: its admin workspace, whose audit chain vouches for the quotas admission obeys there."""
    unmarked: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Admitted runs Ray accepted whose ledger entry does not say so yet, by submission id: their shared
    root and the Ray session they went to. A batch marks them all at once when its part is done
    (admit.mark_submitted)."""


def _each(logs: list[GroupCommit[AuditEvent]], do: Callable[[GroupCommit[AuditEvent]], None]) -> None:
    """`do` to every log; then the first failure, if any, raised."""
    first: BaseException | None = None
    for log in logs:
        try:
            do(log)
        except Exception as err:  # noqa: BLE001 - raised below, once every log had its turn
            first = first or err
    if first is not None:
        raise first

