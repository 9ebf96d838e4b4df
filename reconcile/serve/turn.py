"""One turn of the loop: load, observe, plan, carry out what the loop may, tell, report.

Level-based, as controller-runtime's reconcilers are: each turn starts from what is, never from
what the last turn meant to do, so a turn that died half-way is finished by the next one. The
loop adds no way of changing the cluster: it executes the same steps `argus apply` executes,
under the same lock, after planning again under it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reconcile.model import Action, Change, Plan, SubmitStep
from reconcile.report import Event, TurnReport
from reconcile.serve import events as ev
from reconcile.serve.after_events import after_events
from reconcile.serve.choice import choose
from specs.desired import DesiredState
from specs.errors import ArgusError
from state.audit.follow import AuditFollower
from state.observed import DEADLINE, PREEMPTED


@dataclass(frozen=True)
class TurnOptions:
    sync: Literal["off", "auto"] = "off"
    git_pull: bool = False
    interval: float = 30.0
    timeout: float = 10.0
    stop_timeout: float = 120.0
    keep_finished: int = 3
    pending_alert: float = 600.0
    stall_alert: float = 1800.0
    with_audit: bool = False
    """Read the audit log for the last apply and its verification (the status page shows them)."""
    drift_grace: float = 900.0
    """Seconds a merged change may wait for its apply before the loop tells it as drift (reconcile.serve.quiet)."""


@dataclass
class Outcome:
    """What the turn did, filled as it goes."""

    plan: Plan | None = None
    runs: dict = field(default_factory=dict)
    applied: tuple[str, ...] = ()
    retried: tuple[str, ...] = ()
    chosen: list[Change] = field(default_factory=list)
    gpus_held: dict = field(default_factory=dict)
    gpu_use: dict = field(default_factory=dict)
    queues: tuple = ()
    others: tuple = ()
    unapplied: list[tuple[str, str, str]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    commit: str | None = None
    desired: DesiredState | None = None
    failed_at: str | None = None
    unreachable: dict[str, str] = field(default_factory=dict)
    distrusted: dict[str, str] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)
    """Runs whose GPUs stayed under their job's health.idle threshold for its window: submission id -> job."""


def turn(directory: Path, options: TurnOptions, say: Callable[[str], None],
         loaded: DesiredState | None = None, seen: Callable[[DesiredState], None] | None = None,
         gpu_samples: Mapping[str, tuple[tuple[float, float], ...]] | None = None) -> TurnReport:
    """`loaded`: the desired state just read by the caller (the loop's start-up), so the first turn
    does not read every spec file twice; ignored with --git-pull, which may change them. `seen` is
    given the desired state once loaded: the loop's watch follows its clusters."""
    started = time.time()
    out = Outcome()
    ok = True
    try:
        _reconcile(directory, options, out, say, loaded, seen, gpu_samples or {})
    except ArgusError as err:
        ok, out.error = False, str(err)
    ws = out.desired.workspace.name if out.desired else directory.name
    audit_view = _audit_view(out.desired) if options.with_audit and out.desired else {}
    return TurnReport(workspace=ws, started_at=started, finished_at=time.time(), ok=ok and out.error is None,
                      interval=options.interval, sync=options.sync, error=out.error, commit=out.commit,
                      plan=out.plan, runs=out.runs, drift=_drift_count(out), applied=out.applied,
                      retried=out.retried, events=tuple(out.events), notes=tuple(out.notes),
                      gpus_held=out.gpus_held, queues=out.queues, others=out.others, unreachable=out.unreachable,
                      distrusted=out.distrusted, failed_at=out.failed_at if not ok else None, gpu_use=out.gpu_use,
                      **audit_view)


def _drift_count(out: Outcome) -> int:
    """Changes not carried out, and runs stopped outside argus that are left so (/metrics, the page, the log)."""
    return len(out.unapplied) + (len(out.plan.drifted) if out.plan is not None else 0)


def _reconcile(directory: Path, options: TurnOptions, out: Outcome, say: Callable[[str], None],
               loaded: DesiredState | None, seen: Callable[[DesiredState], None] | None = None,
               gpu_samples: Mapping[str, tuple[tuple[float, float], ...]] | None = None) -> None:
    from reconcile.execute.admit import confirm_queue
    from reconcile.execute.cycle import connect, observe_and_plan
    from reconcile.plan.claims import refused
    from specs.load.loader import load_workspace
    from state.code.gitinfo import desired_commit

    reviewed = _pulled(directory, options, out)
    try:
        desired = out.desired = loaded if loaded is not None and not options.git_pull else load_workspace(directory)
    except ArgusError:
        out.failed_at = "load"  # an incident of its own (reconcile.serve.incidents)
        raise
    if seen is not None:
        seen(desired)
    reviewed = reviewed and _all_tracked(directory, desired, options, out)
    may_sync = options.sync == "auto" and reviewed
    out.commit = desired_commit(desired.root).commit
    ray = connect(desired, options.timeout)
    judged = _idle_judge(desired, gpu_samples or {}, out)  # by the samples of the turns before this one
    observed, plan = observe_and_plan(desired, ray, judged=judged)
    acted: tuple | None = None
    try:  # a checkout that is not what was merged gets records only, not even retries
        if refused(observed):  # another owns the name: its runs, records and queue are not ours to touch
            pass
        elif choose(plan, may_sync, reviewed) or _records_behind(desired, observed):
            acted = _carry_out(desired, ray, options, may_sync, reviewed, out, say, judged)
        elif reviewed:  # nothing to carry out: the jobs that wait still confirm their place
            confirm_queue(desired, observed, plan)
    finally:  # what was seen and done is told even when carrying it out failed half-way
        observed, plan = acted or (observed, plan)
        out.gpu_use = _gpu_use(ray, observed)  # before the events: an idle run is told by what its GPUs do
        _tell(desired, observed, plan, out, options, ray)


def _tell(desired: DesiredState, observed, plan: Plan, out: Outcome, options: TurnOptions, ray=None) -> None:
    from reconcile.plan.root import distrusted
    from reconcile.plan.runs import runs_by_job
    from reconcile.views.queue import other_runs, queues_of

    out.plan, out.runs = plan, runs_by_job(desired.workspace.name, observed)
    out.unreachable = dict(observed.unreachable)
    out.distrusted = distrusted(observed)
    out.queues = tuple(queues_of(observed, sorted(desired.clusters)))  # the page's shared queue
    out.gpus_held = {queue.cluster: queue.gpus_held for queue in out.queues if not queue.unseen}  # worked out once
    out.others = other_runs(desired.workspace.name, observed)
    applied = set(out.applied)
    out.unapplied = [(c.address, c.action.value, _decision(c)) for c in plan.actionable if c.address not in applied]
    out.events = _events(desired, observed, plan, out, options, ray or {})


def _gpu_use(ray, observed) -> dict:
    """What each cluster's GPUs do now (state.ray.gpu_read): two reads per cluster running something, never an
    error that ends the turn."""
    from state.ray.gpu_read import gpu_use

    return gpu_use(ray, observed.clusters)


def _decision(change: Change) -> str:
    """What a change would submit or stop: a new change of the same job is new drift."""
    return ",".join(sorted(str(getattr(s, "submission_id", "") or getattr(s, "kind", "")) for s in change.steps))


def _pulled(directory: Path, options: TurnOptions, out: Outcome) -> bool:
    """With --git-pull: fast-forward first; a checkout someone works in is reported, never applied."""
    if not options.git_pull:
        return True
    from state.code import checkout, safegit

    try:
        with _PULLING:
            pulled = checkout.pull(directory)
    except safegit.GitError as err:
        out.notes.append(f"git pull failed ({err}): nothing applied this turn")
        return False
    if not pulled.ok:
        out.notes.append(pulled.message)
    return pulled.ok


def _all_tracked(directory: Path, desired: DesiredState, options: TurnOptions, out: Outcome) -> bool:
    """With --git-pull: every spec file argus read is one git tracks (an ignored file is not)."""
    if not options.git_pull:
        return True
    from state.code import checkout, safegit

    files = sorted({source.file for source in desired.sources.values()})
    try:
        stray = checkout.untracked(directory, files)
    except (safegit.GitError, ValueError) as err:
        out.notes.append(f"cannot tell which spec files git tracks ({err}): nothing applied this turn")
        return False
    if stray:
        out.notes.append(f"spec files git does not track (ignored or new): {', '.join(stray[:5])}: "
                         "nothing applied this turn")
    return not stray


def _records_behind(desired: DesiredState, observed) -> bool:
    from reconcile.execute.refresh import records_behind

    return records_behind(desired.shared_roots, observed.records, observed.clusters)


def _carry_out(desired: DesiredState, ray, options: TurnOptions, may_sync: bool, may_retry: bool, out: Outcome,
               say: Callable[[str], None], judged=None):
    """Under the apply lock (taken without waiting: a busy lock skips the turn and says so), plan
    again and execute what the loop may; then bring the records up to date."""
    from reconcile.execute.admit import confirm_queue
    from reconcile.execute.cycle import observe_and_plan
    from state.queue import lock
    from state.root.own import lockable_roots

    plan_id = uuid.uuid4().hex[:12]
    try:
        with lock.held(lockable_roots(desired), desired.workspace.name, plan_id, 0.0):
            observed, plan = observe_and_plan(desired, ray, judged=judged)
            chosen = choose(plan, may_sync, may_retry)
            _execute(desired, ray, observed, plan, chosen, plan_id, options, out, say)
            if may_retry:  # a checkout that is not what was merged does not speak for the queue
                confirm_queue(desired, observed, plan)
            return observed, plan
    except lock.LockHeld as err:
        out.notes.append(f"skipped this turn: {err}")
        stale_after = options.stop_timeout + 3 * options.interval  # longer than any turn of a live loop
        for root in sorted(set(desired.shared_roots.values())):
            broken = lock.break_abandoned_loop_lock(root, desired.workspace.name, stale_after)
            if broken is not None:
                out.notes.append(f"broke the apply lock {broken.id} of {broken.user} (pid {broken.pid}), which "
                                 "lost its lease; next turn goes ahead")
        return None


def _execute(desired, ray, observed, plan: Plan, chosen: list[Change], plan_id: str, options: TurnOptions,
             out: Outcome, say: Callable[[str], None]) -> None:
    from reconcile.execute.applier import apply_plan, open_world
    from reconcile.execute.refresh import refresh_records
    from reconcile.execute.world import Secrets

    ctx = _context(desired, ray, observed, plan_id, options, say)
    part = plan.model_copy(update={"changes": tuple(chosen),
                                   "diagnostics": tuple(d for d in plan.diagnostics if d.severity != "error")})
    try:
        world = apply_plan(part, ctx) if chosen else open_world(ctx, Secrets({}))
    except ArgusError as err:
        out.error = f"apply failed: {err}"
        out.events.append(ev.apply_failed_event(desired.workspace.name, [c.address for c in chosen], str(err),
                                                _clock(options)))
        raise
    finally:
        done = {address for address, _action, _outcome in ctx.outcomes}
        out.applied, out.chosen = tuple(sorted(done)), chosen
        out.retried = tuple(sorted(s.submission_id for c in chosen if c.action is Action.RETRY and c.address in done
                                   for s in c.steps if isinstance(s, SubmitStep)))
    refresh_records(world, observed.clusters, options.keep_finished, observed.progress)


def _context(desired, ray, observed, plan_id: str, options: TurnOptions, say: Callable[[str], None]):
    from reconcile.execute.applier import ApplyContext
    from state.code.gitinfo import desired_commit

    git = desired_commit(desired.root, desired.included_files())
    return ApplyContext(desired, ray, git, plan_id, observed=observed, echo=say,
                        stop_timeout=options.stop_timeout, keep_finished=options.keep_finished)


def _events(desired: DesiredState, observed, plan: Plan, out: Outcome, options: TurnOptions,
            ray: dict) -> list[Event]:
    clock = _clock(options)
    ws = desired.workspace.name
    found = ev.run_events(ws, plan, out.runs, _policies(desired), _log_activity(desired, out.runs), clock,
                          _step_history(out.runs, observed))
    found += ev.idle_events(ws, out.runs, out.idle, _idle_policies(desired), set(out.applied), clock)
    found += ev.retried_events(ws, plan, set(out.retried), clock)
    found += ev.preempted_events(ws, out.chosen, set(out.applied), clock)
    limits = {name: job.max_runtime for name, job in desired.jobs.items() if job.max_runtime}
    found += ev.deadline_events(ws, out.chosen, set(out.applied), out.runs, limits, clock)
    found += ev.drifted_events(ws, plan, clock)
    found += after_events(ws, plan, set(out.applied), clock)
    drift = ev.drift_event(ws, out.unapplied, clock)
    found += [drift] if drift else []
    for live in (e for e in found if e.kind in LIVE_KINDS):
        _keep_live_scene(desired, observed, ray, live)
    return [e.model_copy(update={"commit": out.commit}) for e in (*out.events, *(_with_record(desired, observed, e)
                                                                                 for e in found))]


LIVE_KINDS = ("stalled", "idle")
"""Events about a run that still lives: its scene (stacks included) is kept the first turn it is found so."""


def _idle_judge(desired: DesiredState, samples: Mapping[str, tuple[tuple[float, float], ...]], out: Outcome):
    """The observation with the runs found idle (reconcile.plan.health.idle_runs): the planner stops those whose
    job says `action: stop`; the events tell every one."""
    from reconcile.plan.health import idle_runs

    def judged(observed):
        out.idle = idle_runs(desired, observed, samples, time.time())
        return observed.model_copy(update={"idle": frozenset(out.idle)}) if out.idle else observed

    return judged


def _idle_policies(desired: DesiredState) -> dict:
    return {name: job.health.idle for name, job in desired.jobs.items() if job.health and job.health.idle}


def _policies(desired: DesiredState) -> dict[str, ev.Policy]:
    from specs.kinds.health import StallPolicy

    found = {}
    for name, job in desired.jobs.items():
        stall = job.health.stall if job.health is not None and job.health.stall is not None else StallPolicy()
        retry = (tuple(job.retry.on), job.retry.max_attempts) if job.retry else ((), 1)
        found[name] = ev.Policy(*retry, stall=stall)
    return found


def _step_history(runs: dict, observed) -> dict[str, tuple[tuple[float, int], ...]]:
    """The (time, step) samples this process saw of each running run (state.runs.progress): its stall clock. Only
    for a run whose step this turn read: one that printed past the log tail read since its last step line (a long
    validation pass) is judged by its log instead, never by a step history gone stale."""
    from state.runs.progress import history

    read_now = getattr(observed, "progress", {}) or {}
    running = [r.submission_id for views in runs.values() for r in views if r.status == "RUNNING"]
    return {sid: samples for sid in running if sid in read_now and (samples := history(sid))}


def _keep_live_scene(desired: DesiredState, observed, ray: dict, event: Event) -> None:
    """The scene of a run found stalled or idle, while it still lives (its processes' stacks): once per run and
    kind (reconcile.execute.incident.keep_scene_once); the event's report is made from it."""
    from reconcile.execute.incident import keep_scene_once

    record = observed.records.get(event.submission_id)
    if record is None or event.cluster not in desired.shared_roots:
        return
    keep_scene_once(ray.get(event.cluster), desired.shared_roots[event.cluster], record, event.kind, live=True,
                    detail=event.summary)


def _log_activity(desired: DesiredState, runs: dict) -> dict[str, float]:
    from state.runs.activity import log_changed_at

    running = [(r.cluster, r.submission_id) for views in runs.values() for r in views if r.status == "RUNNING"]
    return log_changed_at(desired.shared_roots, running)


def _with_record(desired: DesiredState, observed, event: Event) -> Event:
    """Evidence and advice from the run's record, which this turn's refresh may just have written; its end
    (exit code, time) from the exit.json the run wrote, for the events about a run that ended: as this turn
    observed it, read again only for a run whose end the observation did not hold."""
    if not event.submission_id or event.cluster not in desired.shared_roots:
        return event
    from reconcile.serve.reports import with_report
    from state.runs.records import read_end, read_record

    root = desired.shared_roots[event.cluster]
    event = with_report(event, root)
    if event.kind in ENDED_KINDS:
        end = observed.ends.get(event.submission_id) or read_end(root, event.submission_id)
        if end is not None:
            event = event.model_copy(update={"exit_code": end.exit_code, "ended_at": end.ended_at or None})
    if event.evidence:
        return event
    record = read_record(root, event.submission_id)
    evidence = tuple(getattr(record, "evidence", ()) or ()) if record else ()
    advice = getattr(record, "advice", None) if record else None
    said = record.failure if record else None  # deadline and preempted come from argus's chain, never a record
    failure = event.failure or (said if said not in (DEADLINE, PREEMPTED) else None)
    return event.model_copy(update={"evidence": evidence, "advice": event.advice or advice, "failure": failure})


ENDED_KINDS = ("failed", "lost", "recovered", "drift", "preempted", "deadline")
"""Events about a run that may have ended: its exit.json is read for them alone."""


def _clock(options: TurnOptions) -> ev.Clock:
    return ev.Clock(now=time.time(), pending_alert=options.pending_alert, stall_alert=options.stall_alert)


def _audit_view(desired: DesiredState) -> dict:
    """The newest apply and whether the log verifies, from the first shared root's audit log: only what
    was appended since the last turn is read (state.audit.follow), the whole log now and then."""
    if not desired.shared_roots:
        return {}
    root = desired.shared_roots[sorted(desired.shared_roots)[0]]
    try:
        followed = _AUDIT.view(root, desired.workspace.name)
        problems = list(followed.problems)
    except (OSError, ValueError, AttributeError, TypeError) as err:  # a hostile line must not blind the loop
        followed, problems = None, [f"the audit log cannot be read: {type(err).__name__}"]
    if problems or followed is None:  # a torn or edited log cannot be read as records; say so instead
        return {"audit_verified": False, "audit_problem": "; ".join(problems[:3])}
    return {"last_apply": followed.last_apply, "audit_verified": True}


_PULLING = threading.Lock()
"""Several workspaces' loops in one process (reconcile.serve.loops) often share one checkout: their pulls
take turns, so two never race for the repository's index lock."""
_AUDIT = AuditFollower()
"""This process's reader of its audit logs: each turn reads what the turn before had not."""
