"""argus apply: plan, show, confirm, execute the plan's steps, record everything."""

from __future__ import annotations

import uuid
from pathlib import Path

import click

from reconcile.apply import ApplyContext, apply_plan, refresh_records
from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.render import render_plan
from specs.errors import ArgusError


def run(directory: Path, auto_approve: bool, timeout: float, stop_timeout: float, colour: bool) -> int:
    from state.gitinfo import desired_commit
    from state.observe import observe

    desired = load(directory)
    ray = connect(desired, timeout)
    _, plan = observe_and_plan(desired, ray)
    click.echo(render_plan(plan, colour=colour))
    if plan.errors:
        return EXIT_ERROR
    ctx = ApplyContext(desired=desired, clients=ray, git=desired_commit(desired.root),
                       plan_id=uuid.uuid4().hex[:12], stop_timeout=stop_timeout, echo=click.echo)
    if plan.actionable:
        if not auto_approve:
            _confirm()
        apply_plan(plan, ctx)
    refresh_records(ctx, observe(desired, ray))
    if plan.actionable:
        click.echo(f"\nApply complete (plan {ctx.plan_id}): " + "; ".join(ctx.outcomes))
    return EXIT_OK


def _confirm() -> None:
    click.echo("argus will perform the actions above. Only 'yes' is accepted.")
    try:
        answer = click.prompt("Enter a value", default="", show_default=False)
    except click.Abort as err:
        raise ArgusError("No confirmation (stdin closed). Review the plan, then pass --auto-approve.") from err
    if answer.strip() != "yes":
        raise ArgusError("Apply cancelled: nothing was changed.")
