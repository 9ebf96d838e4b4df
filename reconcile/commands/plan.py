"""argus plan: read-only; observe once, plan, show (human, json or markdown), optionally save."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import typer

from reconcile.boundary import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from reconcile.commands.common import check_addresses, load, shown_from, shown_prefix
from reconcile.execute.cycle import connect, observe_and_plan
from reconcile.model import Plan, PlanOptions
from reconcile.version import installed_version
from reconcile.views.human import render_plan
from specs.desired import DesiredState
from specs.errors import ArgusError


@dataclass(frozen=True)
class PlanCommand:
    detailed_exitcode: bool = False
    timeout: float = 10.0
    colour: bool = False
    output_format: str = "human"
    out: Path | None = None
    verify_snapshots: bool = False
    options: PlanOptions = PlanOptions()
    fetch_timeout: float | None = None
    all_workspaces: bool = False
    """List every other job on the clusters one a line, not summed up per workspace."""


def run_all(directories: list[Path], changed_from: str | None, command: PlanCommand) -> int:
    """One workspace as always, or several (reconcile.commands.several): each planned and shown under its
    directory; --detailed-exitcode then gives 1 if any failed, else 2 if any has changes, else 0."""
    from reconcile.commands import several

    found = several.expand(directories, changed_from)
    if found is None:
        several.alone(directories[0])
        return run(directories[0], command)
    if command.out is not None:
        raise ArgusError(f"-o {command.out} saves one workspace's plan, and these DIRs hold {len(found)}: plan each "
                         "with its own file (`argus plan teams/nlp -o nlp.plan`; `argus workspaces --json` lists them)")
    return several.run_each(found, lambda path: run(path, command), command.output_format)


def run(directory: Path, command: PlanCommand) -> int:
    if command.out is not None:
        from reconcile import saved

        saved.check_destination(command.out)
    desired = load(directory)
    check_addresses(desired, command.options)
    _, plan = observe_and_plan(desired, connect(desired, command.timeout), command.options,
                               command.verify_snapshots, command.fetch_timeout)
    typer.echo(show(plan if command.output_format == "json" else named_from_here(plan, directory),
                    command.output_format, command.colour, command.all_workspaces))
    if plan.errors:  # shown above, with the plan; an error object after it would make two JSON documents
        if command.out is not None:
            typer.echo(f"Not saved to {command.out}: a plan with errors cannot be applied; fix them first.", err=True)
        return EXIT_ERROR
    if command.out is not None:
        save(command.out, desired, plan)
        typer.echo(f"Saved the plan to {command.out}; apply exactly it with `argus apply {command.out}`.", err=True)
    return EXIT_CHANGES if command.detailed_exitcode and plan.differs else EXIT_OK


def named_from_here(plan: Plan, directory: Path) -> Plan:
    """The plan as shown to people: its diagnostics name files as the user finds them (docs/workspaces.md).
    Plan JSON and saved plans keep names relative to the workspace they name."""
    prefix = shown_prefix(directory)
    return plan.model_copy(update={"diagnostics": tuple(shown_from(prefix, plan.diagnostics))}) if prefix else plan


def show(plan: Plan, output_format: str, colour: bool, all_workspaces: bool = False) -> str:
    from reconcile.views import machine as views

    if output_format == "json":
        return views.plan_json(plan)
    if output_format == "markdown":
        return views.plan_markdown(plan)
    return render_plan(plan, colour=colour, all_workspaces=all_workspaces)


def save(path: Path, desired: DesiredState, plan: Plan) -> None:
    """What was reviewed: the plan, the desired state's content digest, and (for the audit trail) the commit."""
    from reconcile import saved
    from specs.load.content import desired_digest
    from state.code.gitinfo import desired_commit
    from state.code.repository import location_of
    from state.runs.records import now

    where = location_of(desired.root)
    saved.write(path, saved.SavedPlan(
        format_version=saved.FORMAT_VERSION, argus_version=installed_version(), workspace=plan.workspace,
        plan_id=uuid.uuid4().hex[:12], created_at=now(), desired_digest=desired_digest(desired),
        commit=desired_commit(desired.root).commit, plan=plan, workspace_dir=where.directory,
        repository=where.repository))
