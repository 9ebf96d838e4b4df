"""Saved plans outside `argus plan`: `argus show PLAN.json`, and finding the workspace a plan file names
for `argus apply PLAN.json` run from anywhere in a checkout of its repository."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_OK
from reconcile.model import Plan
from specs.diagnostics import plain
from specs.errors import ArgusError

if TYPE_CHECKING:
    from reconcile.saved import SavedPlan


def show(plan_file: Path, output_format: str, colour: bool) -> int:
    """Render the plan as it was reviewed: checked as apply checks the file, with no cluster, no lock,
    and nothing changed."""
    from reconcile import saved
    from reconcile.commands.plan import show as render

    stored = saved.read(plan_file)
    if output_format == "human":
        typer.echo(header(stored))
    typer.echo(render(visible(stored.plan) if output_format == "human" else stored.plan, output_format, colour))
    return EXIT_OK


def visible(plan: Plan) -> Plan:
    """The plan with every text in it as plain visible text (line breaks kept): the file is anyone's to edit, and
    a reason or an entrypoint word carrying a terminal escape would repaint what the reviewer sees. JSON output
    needs none of it: json escapes every control character."""
    def clean(value: object) -> object:
        if isinstance(value, str):
            return plain(value)
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return Plan.model_validate(clean(plan.model_dump(mode="json")))


def header(stored: SavedPlan) -> str:
    """The file's own words, each as plain visible text: a plain seal can be recomputed by whoever edits the
    file, so its fields may carry terminal escapes or line breaks that would forge what the reader sees."""
    shown = {name: plain(str(getattr(stored, name)), lines=False) for name in
             ("plan_id", "workspace", "workspace_dir", "repository", "created_at", "argus_version", "commit")}
    where = f" at {shown['workspace_dir']}" if stored.workspace_dir else ""
    origin = f" of {shown['repository']}" if stored.repository else ""
    commit = shown["commit"][:12] if stored.commit != "none" else "no commit"
    return (f"Saved plan {shown['plan_id']} of workspace {shown['workspace']}{where}{origin}, made "
            f"{shown['created_at']} at {commit} by argus {shown['argus_version']}.\n")


def workspace_of(plan_file: Path, stored: SavedPlan, start: Path) -> Path:
    """The directory of the plan's workspace: in the repository holding `start` (the current directory),
    else in the one holding the plan file. A plan without a recorded directory (format 2, or made outside
    git) means the current directory, as before."""
    from state.code.repository import directory_in, repository_at

    if not stored.workspace_dir:
        return start
    found = repository_at(start) or repository_at(plan_file.resolve().parent)
    named = f"workspace {stored.workspace!r} at {stored.workspace_dir}" + (
        f" of repository {stored.repository}" if stored.repository else "")
    if found is None:
        raise ArgusError(f"{plan_file} is a plan of {named}, and neither the current directory nor the plan file "
                         "is in a git repository: run `argus apply` inside a checkout of it, or pass --dir WORKSPACE.")
    root, identity = found
    if stored.repository and identity and identity != stored.repository:
        raise ArgusError(f"{plan_file} is a plan of {named}, but {root} is a checkout of {identity}: run it in a "
                         f"checkout of {stored.repository}, or pass --dir WORKSPACE.")
    directory = directory_in(root, stored.workspace_dir)
    if directory is None or not (directory / "argus.yaml").is_file():
        raise ArgusError(f"{plan_file} is a plan of {named}, and {root} has no such workspace directory (a "
                         "directory inside the repository holding argus.yaml): pass --dir WORKSPACE.")
    return directory
