"""argus apply: plan, show, confirm, execute the plan's steps, record everything."""

from __future__ import annotations

import uuid
from pathlib import Path

import typer

from reconcile.apply import ApplyContext, apply_plan, refresh_records
from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.render import render_plan
from specs.errors import ArgusError


def run(directory: Path, auto_approve: bool, timeout: float, stop_timeout: float, colour: bool,
        prune: bool = False) -> int:
    from state.gitinfo import desired_commit
    from state.observe import observe

    desired = load(directory)
    ray = connect(desired, timeout)
    observed, plan = observe_and_plan(desired, ray, prune)
    typer.echo(render_plan(plan, colour=colour))
    if plan.errors:
        return EXIT_ERROR
    if plan.actionable and not auto_approve:
        _confirm()
    ctx = ApplyContext(desired=desired, clients=ray, git=desired_commit(desired.root), plan_id=uuid.uuid4().hex[:12],
                       sessions={name: c.session_name for name, c in observed.clusters.items()},
                       stop_timeout=stop_timeout, echo=typer.echo, observed=observed)
    apply_plan(plan, ctx)
    refresh_records(ctx, observe(desired, ray))
    if plan.actionable:
        typer.echo(f"\nApply complete (plan {ctx.plan_id}): " + "; ".join(ctx.outcomes))
    return EXIT_OK


def _confirm() -> None:
    typer.echo("argus will perform the actions above. Only 'yes' is accepted.")
    try:
        answer = typer.prompt("Enter a value", default="", show_default=False)
    except typer.Abort as err:
        raise ArgusError("No confirmation (stdin closed). Review the plan, then pass --auto-approve.") from err
    if answer.strip() != "yes":
        raise ArgusError("Apply cancelled: nothing was changed.")
