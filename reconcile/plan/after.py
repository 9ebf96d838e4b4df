"""Jobs with `after:`: wait on their predecessors' current runs, start when they ended as required. Pure.

The planner plans jobs in `specs.load.after.in_order`, handing each job's resolved submission and change
to a Pipeline, so a follower sees its predecessors' changes of this very plan: a predecessor with a
retry planned is waited on, not blocking. A predecessor's current run is its newest run of its
current spec hash; only Ray's word that it ended counts (a record on the shared root is anyone's to
write), and what a follower binds to comes from the predecessors' specs and run ids alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.model import Action, Change, RunView, SubmitStep, Waiting
from reconcile.plan.runs import newest
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Job
from specs.load.after import FINISHED, needs, placeholder, references, safe
from specs.workloads import verl
from specs.workloads.submission import Submission, spec_hash
from state.observed import MAYBE_RUNNING, TERMINAL, RunStatus

STARTS = (Action.SUBMIT, Action.REPLACE, Action.RETRY)
"""What a follower does only once its predecessors' runs ended as required."""


class Pipeline:
    """What the planner decided so far for each job, so each follower is decided after its predecessors."""

    def __init__(self, desired: DesiredState, runs: Mapping[str, list[RunView]]) -> None:
        self._desired, self._runs = desired, runs
        self._subs: dict[str, Submission] = {}
        self._digests: dict[str, str] = {}
        self._changes: dict[str, Change] = {}

    def follows(self, job: Job) -> dict[str, str] | None:
        """`rerun_with_predecessors: true`: each predecessor's run that ended as required (None while none has),
        which goes into the follower's submission, so a new such run is a new spec of the follower."""
        if not job.rerun_with_predecessors:
            return None
        found = {}
        for name, need in sorted(needs(job).items()):
            run = self._current(name)
            if run is not None and _ended_as(run, need):
                found[name] = run.submission_id
        return found or None

    def decide(self, job: Job, sub: Submission, change: Change) -> tuple[Change, list[Diagnostic]]:
        """The job's change once its predecessors are known: waiting, released or as planned."""
        change, found = self._gated(job, sub, change)
        if job.workload == "command":  # its own checkpoint directory, which followers may name
            legacy = any(isinstance(s, SubmitStep) and s.legacy_outputs for s in change.steps)
            change = _with_steps(change, checkpoint_dir=verl.checkpoint_dir(job, self._desired.workspace.name, legacy))
        self._subs[job.name], self._changes[job.name] = sub, change
        return change, found

    def not_planned(self, name: str, change: Change) -> None:
        """A job whose cluster did not answer: its followers wait, since nothing is known of its run."""
        self._changes[name] = change

    def _gated(self, job: Job, sub: Submission, change: Change) -> tuple[Change, list[Diagnostic]]:
        follows = needs(job)
        if not follows or job.state == "stopped":
            return change, []
        if change.action is Action.NOOP:
            return _not_run_again(job, change, {name: self._current(name) for name in follows}), []
        if change.action not in STARTS:
            return change, []
        waits = [self._waiting(name, need) for name, need in sorted(follows.items())]
        if not all(ok for _, ok in waits):
            return _wait(change, tuple(w for w, _ in waits), [w for w, ok in waits if not ok]), []
        return self._released(job, sub, change, tuple(w for w, _ in waits))

    def _checkpoint_dir(self, name: str) -> str:
        """The predecessor's current run's directory: where an argus before per-workspace outputs put it, if so."""
        run = self._current(name)
        return verl.checkpoint_dir(self._desired.jobs[name], self._desired.workspace.name,
                                   legacy=run is not None and run.legacy_outputs)

    def _current(self, name: str) -> RunView | None:
        sub = self._subs.get(name)
        if sub is None:
            return None
        if name not in self._digests:  # asked once per follower: hashed once per predecessor
            self._digests[name] = spec_hash(sub)
        return newest([r for r in self._runs.get(name, []) if r.spec_hash == self._digests[name]])

    def _waiting(self, name: str, need: str) -> tuple[Waiting, bool]:
        """The predecessor as this follower sees it, and whether its current run ended as required."""
        change, run, job = self._changes.get(name), self._current(name), self._desired.jobs[name]
        seen = {"job": name, "needs": need, "submission_id": run.submission_id if run else None}
        if change is None or name not in self._subs:
            return Waiting(**seen, state="not planned: its cluster did not answer"), False
        if change.action in STARTS:
            step = next((s for s in change.steps if isinstance(s, SubmitStep)), None)
            return Waiting(**{**seen, "submission_id": step.submission_id if step else None},
                           state=f"{change.action.value} planned"), False
        if change.action is Action.WAIT:
            blocked = [w.job for w in change.waiting_on if w.blocked]
            state = f"blocked by {_few(blocked)}" if blocked else \
                f"waiting on {_few([w.job for w in change.waiting_on])}"
            return Waiting(**seen, state=state, blocked=bool(blocked)), False
        if run is None:
            stopped = job.state == "stopped"
            return Waiting(**seen, state="state: stopped" if stopped else "no run yet", blocked=stopped), False
        if run.lost:  # died with its head: only a new attempt (retry on lost, --replace) can end as required
            return Waiting(**seen, state=run.health, blocked=True), False
        if run.status in MAYBE_RUNNING:
            return Waiting(**seen, state=run.status.value), False
        if not run.on_ray:  # its end is in a record only, which any job can write
            return Waiting(**seen, state=f"{run.health}: Ray no longer knows it", blocked=True), False
        if _ended_as(run, need):
            return Waiting(**seen, state=run.status.value), True
        return Waiting(**seen, state=run.health, blocked=True), False

    def _released(self, job: Job, sub: Submission, change: Change,
                  waits: tuple[Waiting, ...]) -> tuple[Change, list[Diagnostic]]:
        """A plain start, with the values its `${job:...}` references take, and what it follows in its reason."""
        bindings, found = {}, []
        ids = {w.job: w.submission_id or "" for w in waits}
        texts = [sub.entrypoint, *sub.env_vars.values()]
        for name, field in sorted({ref for text in texts for ref in references(text)}):
            if name not in ids:
                continue  # the loader refused it already
            value = self._checkpoint_dir(name) if field == "checkpoint_dir" else ids[name]
            if not safe(value):
                found.append(_unsafe(self._desired, job, placeholder(name, field), value))
            bindings[placeholder(name, field)] = value
        shown = ", ".join(f"{Address.job(w.job)} {w.state} ({w.submission_id})" for w in waits)
        released = _with_steps(change, bindings=bindings)
        return released.model_copy(update={"waiting_on": waits,
                                           "reason": f"after {shown}: {change.reason}"}), found


def _few(names: list[str], shown: int = 5) -> str:
    """Names for one line: a follower's predecessor says whom it waits on, not each of its own predecessors'."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _ended_as(run: RunView, need: str) -> bool:
    """Ray says the run ended, and how: succeeded, or any end for `finished`."""
    if not run.on_ray or run.lost:
        return False
    return run.status is RunStatus.SUCCEEDED or (need == FINISHED and run.status in TERMINAL)


def _wait(change: Change, waits: tuple[Waiting, ...], pending: list[Waiting]) -> Change:
    blocked = [w for w in pending if w.blocked]
    if blocked:
        first = blocked[0]
        address = Address.job(first.job)
        ran = f"its run {first.submission_id} is {first.state}" if first.submission_id else f"it is {first.state}"
        reason = (f"blocked until a run of {address} {_verb(first.needs)}: {ran}; fix it and bump its `run:`, give "
                  f"it a `retry:` policy, or `argus apply --replace {address}`")
        if first.state.startswith("blocked by"):  # the fix is upstream: say where
            reason = f"blocked until {address} can start: it is {first.state} (see {address})"
    else:
        reason = "waits for " + ", ".join(f"{Address.job(w.job)} to {_goal(w.needs)} ({w.state})" for w in pending)
    return Change(address=change.address, action=Action.WAIT, reason=reason, current=change.current,
                  before=change.before, after=change.after, diff=change.diff, waiting_on=waits)


def _goal(need: str) -> str:
    return "succeed" if need == "succeeded" else "finish"


def _verb(need: str) -> str:
    return "succeeds" if need == "succeeded" else "finishes"


def _not_run_again(job: Job, change: Change, current: Mapping[str, RunView | None]) -> Change:
    """The rule for a changed predecessor, said on the follower's line: it is not run again unless asked."""
    mine = change.current
    if job.rerun_with_predecessors or mine is None:
        return change
    newer = sorted((name, run) for name, run in current.items() if run is not None and run.started_at > mine.started_at)
    if not newer:
        return change
    name, run = newer[0]
    note = (f"{name} has run again since ({run.submission_id}); {job.name} is not run again: set "
            "rerun_with_predecessors: true or bump run:")
    return change.model_copy(update={"reason": f"{change.reason}; {note}"})


def _with_steps(change: Change, **update: object) -> Change:
    steps = tuple(s.model_copy(update=update) if isinstance(s, SubmitStep) else s for s in change.steps)
    return change.model_copy(update={"steps": steps}) if change.steps else change


def _unsafe(desired: DesiredState, job: Job, key: str, value: str) -> Diagnostic:
    address = Address.job(job.name)
    return Diagnostic(severity="error", address=address, field="after",
                      message=f"{key} would be {value!r}, which holds characters argus will not paste into a shell "
                              "line (letters, digits and _ . , : / @ + = - only)",
                      hint="give the predecessor a plain `trainer.checkpoint_dir`").located(desired.source(address))
