"""The applier: runs a plan's steps through the step table, recording each in the audit log.

It builds one narrow `World` from what the command hands it (an `ApplyContext`) and walks the
changes in plan order; consecutive changes that only submit a new run each are carried out
concurrently (execute.batch), everything else one after another. The step executors
(execute.steps) see only that world.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from reconcile.execute.batch import Display, is_independent, lines, run_batch, segments
from reconcile.execute.claims import claim_unclaimed
from reconcile.execute.code import CodeShelf
from reconcile.execute.inputs import InputShelf
from reconcile.execute.registry import adopt_unregistered
from reconcile.execute.runbook import RunBook
from reconcile.execute.steps import execute
from reconcile.execute.world import DEFAULT_STOP_TIMEOUT, AuditTrail, Journal, Provenance, Secrets, World
from reconcile.model import Change, Plan, SubmitStep
from reconcile.plan.queue import known_demands
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.kinds import held_variables
from specs.workloads.submission import secret_refs
from state.audit.events import ApplyEnded, ApplyStarted, StepCarriedOut
from state.code.gitinfo import GitInfo
from state.observed import ObservedState, RunRecord
from state.ray.client import RayClient
from state.runs import records


@dataclass
class ApplyContext:
    """What a command hands the applier: the desired state, a client per cluster, the observation the
    plan was made from, and how the apply was asked for. Built once per command."""

    desired: DesiredState
    clients: dict[str, RayClient]
    git: GitInfo
    plan_id: str
    observed: ObservedState | None = None
    """What the plan was made from: records, sessions, sources and cluster status come from here."""
    echo: Callable[[str], None] = print
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    keep_finished: int = 3
    """Finished runs per job left in Ray's job table; older ones are deleted once their log is kept."""
    reviewed: dict[str, str] = field(default_factory=dict)
    """For a saved plan: the reviewed commit and desired-state digest, stamped on every audit record."""
    fetch_timeout: float | None = None
    """Seconds a snapshot's source may take to fetch, if it must be fetched again (None: the default)."""
    journal: Journal = field(default_factory=Journal)
    """What apply did: filled as it runs."""
    display: Display | None = None
    """What shows a batch of concurrent submits (a progress bar on a terminal); None: plain lines via echo."""

    @property
    def outcomes(self) -> list[tuple[str, str, str]]:
        """(address, action, outcome) of every change applied, for the closing summary table."""
        return self.journal.rows


def apply_plan(plan: Plan, ctx: ApplyContext) -> World:
    """Run every step; on the first failure, record it and raise: no later step starts (submits already
    in flight beside it finish and are recorded). Returns the world it ran in: what apply did is in its
    journal and run book."""
    if plan.errors:
        raise ArgusError("The plan has errors; fix them before applying (see `argus plan`).")
    world = open_world(ctx, resolve_secrets(plan))  # a missing variable fails here, before anything is submitted
    world.audit.everywhere(ApplyStarted(changes=len(plan.actionable), options=plan.options.model_dump(mode="json")))
    try:
        claim_unclaimed(plan, ctx.desired, ctx.observed, world)  # before any step: a name another owns stops it
        adopt_unregistered(ctx.observed, world)  # before any submit registers: earlier runs stay argus's
        for segment in segments(plan.actionable):
            if is_independent(segment[0]):
                run_batch(segment, world, _apply_change, ctx.display or lines(world.echo))
            else:
                world.journal.rows.append(_apply_change(segment[0], world))
        world.audit.flush()  # every step's record written, or the apply fails saying which write failed
    except BaseException as err:  # ^C and bugs too: the log must say the apply did not finish
        world.audit.everywhere(ApplyEnded(outcome="failed", error=world.audit.error_text(err)))
        raise
    world.audit.everywhere(ApplyEnded(outcome="ok", changes=len(plan.actionable)))
    return world


def open_world(ctx: ApplyContext, secrets: Secrets) -> World:
    """The narrow world of one apply, from the one observation the plan was made from."""
    desired, observed = ctx.desired, ctx.observed
    provenance = Provenance(ctx.plan_id, ctx.git.commit, ctx.git.dirty, dict(ctx.reviewed))
    known = observed.records if observed else _read_records(desired)
    runs = RunBook(desired, known, observed.clusters if observed else {}, ctx.plan_id, ctx.git.commit,
                   redact=secrets.redact)
    sources = {name: state.source for name, state in observed.snapshots.items()} if observed else {}
    return World(clients=ctx.clients, roots=desired.shared_roots, workspace=desired.workspace.name,
                 audit=AuditTrail(_sound_roots(desired, observed), desired.workspace.name, provenance, secrets),
                 runs=runs, code=CodeShelf(desired, sources, ctx.fetch_timeout), secrets=secrets,
                 inputs=InputShelf(desired, ctx.git.commit),
                 echo=ctx.echo, journal=ctx.journal, stop_timeout=ctx.stop_timeout,
                 known=known_demands(desired, observed) if observed else {},
                 chains=observed.registries if observed else {},
                 admins={name: cluster.admin for name, cluster in desired.clusters.items()})


def _sound_roots(desired: DesiredState, observed: ObservedState | None) -> dict[str, str]:
    """The roots the audit log may be written on: there, and not an empty mount point (reconcile.plan.root),
    where a log would make the root look laid out by argus and its jobs be planned as never run. No step
    acts on the others' clusters: their jobs are not planned."""
    if observed is None:
        return dict(desired.shared_roots)
    return {name: root for name, root in desired.shared_roots.items()
            if name not in observed.absent_roots and (name not in observed.roots or observed.roots[name].trusted)}


def resolve_secrets(plan: Plan) -> Secrets:
    """Values of every `${env:NAME}` the plan's submissions need, read from this process's env."""
    needed = {name for step in _submit_steps(plan) for name in secret_refs(step.submission.env_vars).values()}
    held = sorted(name for name in needed if held_variables.held(name))
    if held:  # the loader refuses these at their line: a plan naming one was not made from loaded specs
        raise ArgusError(f"{', '.join(held)}: argus never reads a variable it holds for itself for a job "
                         "(specs.kinds.held_variables); nothing was submitted.")
    missing = sorted(n for n in needed if n not in os.environ)
    if missing:
        raise ArgusError(f"Environment variable(s) {', '.join(missing)} are referenced as ${{env:...}} "
                         "by jobs in this plan but not set; export them and run `argus apply` again.")
    return Secrets({name: os.environ[name] for name in needed})


def _apply_change(change: Change, world: World) -> tuple[str, str, str]:
    """Its steps in order; its row of the summary table."""
    done: list[str] = []
    for step in change.steps:
        world.echo(f"{change.address}: {step.describe()}")
        sid = getattr(step, "submission_id", None)
        event = StepCarriedOut(address=change.address, action=change.action.value, step=step.kind,
                               submission_id=sid, outcome="pending")
        try:
            result = execute(step, world)
        except BaseException as err:
            failed = event.model_copy(update={"outcome": "failed", "error": world.audit.error_text(err)})
            world.audit.append(step.cluster, failed)
            raise
        # sent, not waited for: the step is done and what had to be durable before it (a run's registration) is;
        # the next record appended carries it (one write per submit, not two), apply's end at the latest
        world.audit.send(step.cluster, event.model_copy(update={"outcome": str(result)}))
        done.append(f"{result} ({sid})" if sid else str(result))
    counted = Counter(done)
    return change.address, change.action.value, ", ".join(f"{o} x{n}" if n > 1 else o for o, n in counted.items())


def _read_records(desired: DesiredState) -> dict[str, RunRecord]:
    """Without an observation (a caller that planned elsewhere): the records as they are on disk."""
    found = {}
    for root in sorted(set(desired.shared_roots.values())):
        found.update(records.read_records(root, desired.workspace.name))
    return found


def _submit_steps(plan: Plan) -> list[SubmitStep]:
    return [s for c in plan.actionable for s in c.steps if isinstance(s, SubmitStep)]
