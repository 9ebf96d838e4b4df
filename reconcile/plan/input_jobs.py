"""Jobs that read Datasets and Models: their references filled with the versions' directories, and their start
held until every version they name is sealed (as `after:` holds a follower). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconcile.model import Action, Change, SubmitStep, Waiting
from reconcile.plan.runs import is_active
from specs.address import Address, Kind
from specs.kinds.models import Job
from specs.load.input_refs import fill, inputs_of
from specs.workloads.submission import SHARED_ROOT_PLACEHOLDER, Submission, spec_hash
from state.observed import InputState, RunStatus

STARTS = (Action.SUBMIT, Action.REPLACE, Action.RETRY)
NOUN = {Kind.DATASET: "data set", Kind.MODEL: "model"}


@dataclass(frozen=True)
class Inputs:
    """What the jobs' plan needs of the inputs' (reconcile.plan.inputs.plan_inputs)."""

    states: Mapping[str, InputState] = field(default_factory=dict)
    """Every input as observed, by address."""
    ready: Mapping[str, InputState] = field(default_factory=dict)
    """Those whose version is sealed and trusted."""
    changes: Mapping[str, Change] = field(default_factory=dict)
    """Each input's own change in this plan (none for one with an error)."""

    def fill(self, job: Job, sub: Submission) -> tuple[Submission, list[str]]:
        """The submission with each `${dataset:..}`/`${model:..}` replaced by its version's directory, `inputs` and
        (for sealed ones) `input_digests` set; and the inputs named whose version is unknown (not pinned), with
        which nothing is filled. A job naming no input is returned as it came: its spec hash is unchanged."""
        named = inputs_of(job)
        if not named:
            return sub, []
        unknown = [a for a in named if (state := self.states.get(a)) is None or state.rel is None]
        if unknown:
            return sub, unknown
        where = {Address(a): f"{SHARED_ROOT_PLACEHOLDER}/{s.rel}" for a, s in self.states.items() if s.rel}
        rels = {a: self.states[a].rel or "" for a in named}
        digests = {a: s.manifest.digest for a in named if (s := self.ready.get(a)) and s.manifest}
        return sub.model_copy(update={
            "entrypoint": fill(sub.entrypoint, where),
            "env_vars": {key: fill(value, where) for key, value in sub.env_vars.items()},
            "inputs": rels, "input_digests": digests or None}), []

    def gate(self, job: Job, change: Change, unknown: list[str]) -> Change:
        """A start held until every input the job names is ready: WAIT, blocked when one cannot become ready
        without a fix. Anything else (a stop, a run in sync) is left as planned."""
        if change.action not in STARTS:
            return change
        pending = [(a, *self._state(a)) for a in inputs_of(job) if a not in self.ready or a in unknown]
        if not pending:
            return change
        blocked = [(a, words) for a, words, stuck in pending if stuck]
        if blocked:
            address, words = blocked[0]
            reason = f"blocked until {address} is ready: {words}"
        else:
            reason = "waits for " + ", ".join(f"{a}: {words}" for a, words, _ in pending)
        if change.current is not None:  # what happens to the run there once the inputs are ready
            reason += f"; then {change.action.value}: {change.reason}"
        # each input as its materialisation job (`dataset--NAME`): views, followers (`after:`) and serve's events
        # tell a blocked reader from a waiting one as they do a follower's predecessors
        waits = tuple(Waiting(job=f"{Address(a).kind.value}--{Address(a).name}", needs="succeeded", state=words,
                              submission_id=self._run(a), blocked=stuck) for a, words, stuck in pending)
        return Change(address=change.address, action=Action.WAIT, reason=reason, current=change.current,
                      before=change.before, after=change.after, diff=change.diff, waiting_on=waits)

    def _run(self, address: str) -> str | None:
        """The input's materialisation run this plan shows (the one running, failed, or about to start)."""
        change = self.changes.get(address)
        if change is None:
            return None
        step = next((s for s in change.steps if isinstance(s, SubmitStep)), None)
        return step.submission_id if step is not None else change.current.submission_id if change.current else None

    def _state(self, address: str) -> tuple[str, bool]:
        """The input as a waiting job sees it, in words, and whether it is stuck until someone fixes something."""
        state, change = self.states.get(address), self.changes.get(address)
        if state is None:
            return "not observed (its cluster did not answer)", False
        if state.problem or state.rel is None or change is None:
            return (f"it has an error ({state.problem or 'its version could not be pinned'}); see the error at "
                    f"{address}"), True
        if change.action is Action.CREATE:
            return "its version is sealed by this apply", False
        if change.action in (*STARTS, Action.QUEUE):
            return f"its version is materialised by this apply ({change.action.value})", False
        run = change.current
        if run is not None and (is_active(run) or run.status is RunStatus.SUBMITTING):
            return f"being materialised (run {run.submission_id} {run.status})", False
        return change.reason, True


def changed_inputs(before: Submission | None, sub: Submission) -> str | None:
    """"its data set dataset.x changed (old12 -> new12)" when that is the only difference from `before`."""
    old, new = (before.inputs or {}) if before else {}, sub.inputs or {}
    if before is None or not new or old.keys() != new.keys() or old == new:
        return None
    moved = {a for a in new if old[a] != new[a]}
    entry, env = before.entrypoint, dict(before.env_vars)
    for a in moved:
        entry = entry.replace(old[a], new[a])
        env = {k: v.replace(old[a], new[a]) for k, v in env.items()}
    same = before.model_copy(update={"entrypoint": entry, "env_vars": env, "inputs": new})
    if spec_hash(same) != spec_hash(sub):
        return None
    return "; ".join(f"its {NOUN[Address(a).kind]} {a} changed ({_key12(old[a])} -> {_key12(new[a])})"
                     for a in sorted(moved))


def _key12(rel: str) -> str:
    return rel.rpartition("/")[2]


def with_changed_reason(change: Change, sub: Submission) -> Change:
    """A new spec whose only change is an input's version says so, rather than "spec changed"."""
    run = change.current
    if change.action not in (Action.SUBMIT, Action.REPLACE) or run is None:
        return change
    said = changed_inputs(run.submission, sub)
    return change.model_copy(update={"reason": said}) if said else change
