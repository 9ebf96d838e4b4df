"""argus apply: plan, show, confirm, execute the plan's steps, record everything."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import typer

from reconcile.apply import ApplyContext, apply_plan, refresh_records
from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import check_addresses, connect, load, observe_and_plan
from reconcile.model import Plan, PlanOptions
from reconcile.render import render_outcomes, render_plan
from specs.errors import ArgusError


@dataclass(frozen=True)
class ApplyOptions:
    auto_approve: bool = False
    timeout: float = 10.0
    stop_timeout: float = 120.0
    colour: bool = False
    lock_timeout: float = 0.0
    keep_finished: int = 3
    plan: PlanOptions = PlanOptions()


def run(directory: Path, options: ApplyOptions) -> int:
    """Lock first, then observe and plan: a plan made before another apply finished is never run."""
    from state import lock
    from state.gitinfo import desired_commit

    desired = load(directory)
    check_addresses(desired, options.plan)
    plan_id = uuid.uuid4().hex[:12]
    with lock.held(list(desired.shared_roots.values()), desired.workspace.name, plan_id, options.lock_timeout):
        ray = connect(desired, options.timeout)
        observed, plan = observe_and_plan(desired, ray, options.plan)
        typer.echo(render_plan(plan, colour=options.colour))
        if plan.errors:
            return EXIT_ERROR
        if plan.actionable and not options.auto_approve:
            _confirm()
        ctx = ApplyContext(desired=desired, clients=ray, git=desired_commit(desired.root), plan_id=plan_id,
                           sessions={name: c.session_name for name, c in observed.clusters.items()},
                           stop_timeout=options.stop_timeout, echo=typer.echo, observed=observed,
                           keep_finished=options.keep_finished)
        return _execute(plan, ctx)


def run_saved(plan_file: Path, directory: Path, options: ApplyOptions) -> int:
    """Apply exactly a saved plan, without asking, unless anything it was made from has moved."""
    from reconcile import saved
    from state import lock
    from state.audit import last_applied_plan
    from state.gitinfo import desired_commit
    from state.observe import observe

    stored = saved.read(plan_file)
    desired = load(directory)
    roots = list(desired.shared_roots.values())
    with lock.held(roots, desired.workspace.name, stored.plan_id, options.lock_timeout):
        ray = connect(desired, options.timeout)
        observed = observe(desired, ray)
        git = desired_commit(desired.root)
        moved = saved.staleness(stored, desired.workspace.name, git.commit, git.dirty,
                                observed.fingerprint(desired.workspace.name),
                                last_applied_plan(roots, desired.workspace.name))
        if moved:
            raise ArgusError(f"Saved plan is stale: {'; '.join(moved)}. Run argus plan again.")
        typer.echo(render_plan(stored.plan, colour=options.colour))
        ctx = ApplyContext(desired=desired, clients=ray, git=git, plan_id=stored.plan_id,
                           sessions={name: c.session_name for name, c in observed.clusters.items()},
                           stop_timeout=options.stop_timeout, echo=typer.echo, observed=observed,
                           keep_finished=options.keep_finished)
        return _execute(stored.plan, ctx)


def _execute(plan: Plan, ctx: ApplyContext) -> int:
    from state.observe import observe

    apply_plan(plan, ctx)
    refresh_records(ctx, observe(ctx.desired, ctx.clients))
    if plan.actionable:
        typer.echo(f"\nApply complete (plan {ctx.plan_id}):\n" + render_outcomes(ctx.outcomes))
    return EXIT_OK


def _confirm() -> None:
    typer.echo("argus will perform the actions above. Only 'yes' is accepted.")
    try:
        answer = typer.prompt("Enter a value", default="", show_default=False)
    except typer.Abort as err:
        raise ArgusError("No confirmation (stdin closed). Review the plan, then pass --auto-approve.") from err
    if answer.strip() != "yes":
        raise ArgusError("Apply cancelled: nothing was changed.")
