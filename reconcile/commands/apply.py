"""argus apply: plan, show, confirm, execute the plan's steps, record everything."""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import check_addresses, load
from reconcile.execute.admit import confirm_queue
from reconcile.execute.applier import ApplyContext, apply_plan
from reconcile.execute.cycle import connect, observe_and_plan
from reconcile.execute.refresh import refresh_records
from reconcile.model import Plan, PlanOptions
from reconcile.views.human import render_outcomes, render_plan
from specs.desired import DesiredState
from specs.diagnostics import plain
from specs.errors import ArgusError

if TYPE_CHECKING:
    from reconcile.execute.batch import Display
    from reconcile.saved import SavedPlan
    from state.observed import ObservedState
    from state.ray.client import RayClient


@dataclass(frozen=True)
class ApplyOptions:
    auto_approve: bool = False
    timeout: float = 10.0
    stop_timeout: float = 120.0
    colour: bool = False
    lock_timeout: float = 0.0
    keep_finished: int = 3
    plan: PlanOptions = PlanOptions()
    fetch_timeout: float | None = None


def run(directory: Path, options: ApplyOptions) -> int:
    """Lock first, then observe and plan: a plan made before another apply finished is never run."""
    from state.queue import lock
    from state.root.own import lockable_roots

    desired = load(directory)
    check_addresses(desired, options.plan)
    plan_id = uuid.uuid4().hex[:12]
    with lock.held(lockable_roots(desired), desired.workspace.name, plan_id, options.lock_timeout):
        ray = connect(desired, options.timeout)
        observed, plan = observe_and_plan(desired, ray, options.plan, fetch_timeout=options.fetch_timeout)
        typer.echo(render_plan(plan, colour=options.colour))
        if plan.errors:
            return EXIT_ERROR
        if plan.actionable and not options.auto_approve:
            confirm()
        return _execute(plan, _context(desired, ray, observed, plan_id, options))


def run_saved(plan_file: Path, directory: Path | None, options: ApplyOptions) -> int:
    """Apply what was reviewed: plan again, and execute the fresh steps only if no decision changed.
    Without --dir (None), the workspace is the one the plan file names (reconcile.commands.plan_file)."""
    from reconcile import saved
    from reconcile.commands.plan_file import workspace_of
    from reconcile.plan.planner import plan
    from state.code.sources import DEFAULT_FETCH_TIMEOUT
    from state.observe import observe
    from state.queue import lock
    from state.root.own import lockable_roots

    stored = saved.read(plan_file)
    if directory is None:
        directory = workspace_of(plan_file, stored, Path.cwd())
        typer.echo(f"{plan_file} is a plan of workspace {plain(stored.workspace, lines=False)}: applying it at "
                   f"{plain(str(directory), lines=False)}", err=True)
    desired = load(directory)
    if stored.workspace != desired.workspace.name:
        raise ArgusError(f"{plan_file} is a plan of workspace {stored.workspace!r}, not of {desired.workspace.name!r} "
                         f"at {directory}; pass the right --dir.")
    check_addresses(desired, stored.plan.options)
    with lock.held(lockable_roots(desired), desired.workspace.name, stored.plan_id, options.lock_timeout):
        ray = connect(desired, options.timeout)
        observed = observe(desired, ray, fetch_timeout=options.fetch_timeout or DEFAULT_FETCH_TIMEOUT,
                           prune=stored.plan.options.prune)
        fresh = plan(desired, observed, _options_now(stored.plan, observed))
        _refuse_unless_reviewed(plan_file, stored, fresh)
        note = _content_note(stored, desired)
        if note:
            typer.echo(note, err=True)
        typer.echo(render_plan(fresh, colour=options.colour))
        reviewed = {"reviewed_commit": stored.commit, "desired_digest": stored.desired_digest}
        return _execute(fresh, _context(desired, ray, observed, stored.plan_id, options, reviewed))


def confirm() -> None:
    """Ask for the word yes on stdin. Closed stdin (EOF, ^D) is an error; ^C is a KeyboardInterrupt
    that the boundary reports as an interrupt (130). typer.prompt is not used: it turns both into
    the same Abort."""
    typer.echo("argus will perform the actions above. Only 'yes' is accepted.")
    answer = None
    try:
        typer.echo("Enter a value: ", nl=False)
        answer = sys.stdin.readline() if sys.stdin else ""  # None when started with stdin closed (<&-)
    finally:
        if answer is None:  # ^C: end the prompt's line before the boundary says "Interrupted."
            typer.echo(err=True)
    if not answer:
        raise ArgusError("No confirmation (stdin closed). Review the plan, then pass --auto-approve.")
    if answer.strip() != "yes":
        raise ArgusError("Apply cancelled: nothing was changed.")


def _options_now(reviewed: Plan, observed: ObservedState) -> PlanOptions:
    """The reviewed options, less each `--replace` whose new attempt already exists: applying the
    plan again must not ask for yet another attempt."""
    from reconcile.plan.reviewed import replacements_done

    known = set(observed.records) | {j.submission_id for c in observed.clusters.values() for j in c.jobs}
    done = replacements_done(reviewed, known)
    return reviewed.options.model_copy(update={"replace": tuple(a for a in reviewed.options.replace if a not in done)})


def _refuse_unless_reviewed(plan_file: Path, stored: SavedPlan, fresh: Plan) -> None:
    from reconcile.plan.reviewed import decision_differences
    from reconcile.views.human import render_diagnostics

    if fresh.errors:
        raise ArgusError(f"The desired state or the clusters now have errors, so {plan_file} is not applied:\n"
                         f"{render_diagnostics(list(fresh.errors))}")
    changed = decision_differences(stored.plan, fresh)
    if changed:
        lines = "\n".join(f"  - {line}" for line in changed)
        raise ArgusError(f"Saved plan is stale: {len(changed)} decision(s) differ from the reviewed plan "
                         f"{stored.plan_id}:\n{lines}\nNothing was changed. Run `argus plan` again and review it.")


def _content_note(stored: SavedPlan, desired: DesiredState) -> str:
    from specs.load.content import desired_digest

    if desired_digest(desired) == stored.desired_digest:
        return ""
    return (f"Note: the desired state differs from the one reviewed in plan {stored.plan_id} (another commit changed "
            "specs), but no decision changed; applying the reviewed decisions.")


def _context(desired: DesiredState, ray: dict[str, RayClient], observed: ObservedState, plan_id: str,
             options: ApplyOptions, reviewed: dict[str, str] | None = None) -> ApplyContext:
    from state.code.gitinfo import desired_commit

    git = desired_commit(desired.root, desired.included_files())
    return ApplyContext(desired, ray, git, plan_id, observed=observed, echo=typer.echo,
                        stop_timeout=options.stop_timeout, keep_finished=options.keep_finished,
                        reviewed=reviewed or {}, fetch_timeout=options.fetch_timeout, display=_display())


def _display() -> Display | None:
    """A progress bar of concurrent submits on a terminal; elsewhere the plain lines alone."""
    from reconcile.views.progress import submit_bar

    return submit_bar if sys.stdout.isatty() else None


def _execute(plan: Plan, ctx: ApplyContext) -> int:
    """Apply, then bring the records up to date from the same observation and what apply did."""
    world = apply_plan(plan, ctx)
    refresh_records(world, ctx.observed.clusters if ctx.observed else {}, ctx.keep_finished,
                    ctx.observed.progress if ctx.observed else None)
    if ctx.observed is not None:
        confirm_queue(ctx.desired, ctx.observed, plan)
    if plan.actionable:
        typer.echo(f"\nApply complete (plan {ctx.plan_id}):\n" + render_outcomes(ctx.outcomes))
    return EXIT_OK
