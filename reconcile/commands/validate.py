"""argus validate: check the desired state offline. Never imports ray.

Invalid specs raise a SpecError: the boundary prints it, and with --json also its diagnostics as data.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reconcile.boundary import diagnostic_json
from reconcile.commands.common import load, shown_from, shown_prefix
from reconcile.views.human import render_diagnostics
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic


def run_all(directories: list[Path], changed_from: str | None, deep: bool = False,
            fetch_timeout: float | None = None, as_json: bool = False, files: bool = False) -> int:
    """One workspace as always, or several (reconcile.commands.several); with `files` the paths are files
    (pre-commit's) and each workspace holding one is validated, under its directory."""
    from reconcile.commands import several

    found = several.owners(directories) if files else several.expand(directories, changed_from)
    if found is None:
        several.alone(directories[0])
        return run(directories[0], deep, fetch_timeout, as_json)
    return several.run_each(found, lambda path: run(path, deep, fetch_timeout, as_json), "json" if as_json else "human")


def run(directory: Path, deep: bool = False, fetch_timeout: float | None = None, as_json: bool = False) -> int:
    desired = load(directory)
    found = _deep(desired, fetch_timeout) if deep else None
    diagnostics = None if found is None else shown_from(shown_prefix(directory),
                                                        [d for items in found.values() for d in items])
    failed = any(d.severity == "error" for d in diagnostics or [])
    if as_json:
        typer.echo(json.dumps(_as_data(desired, diagnostics, failed)))
        return 1 if failed else 0
    typer.echo(f"Valid: workspace {desired.workspace.name!r}, {len(desired.clusters)} cluster(s), "
               f"{len(desired.snapshots)} code snapshot(s), {len(desired.jobs)} job(s).")
    if found is not None:
        checked = sum(a.startswith("job.") for a in found)
        if rendered := render_diagnostics(diagnostics):
            typer.echo(rendered)
        if not failed:
            typer.echo(f"Deep: {checked} verl job(s) compose against their code.")
    return 1 if failed else 0


def _deep(desired: DesiredState, fetch_timeout: float | None) -> dict[str, tuple[Diagnostic, ...]]:
    from state.code.cache import cache_root
    from state.verl.checks import offline_checks

    return offline_checks(desired, cache_root(), fetch_timeout)


def _as_data(desired: DesiredState, diagnostics: list[Diagnostic] | None, failed: bool) -> dict[str, object]:
    counts = {"clusters": len(desired.clusters), "code_snapshots": len(desired.snapshots), "jobs": len(desired.jobs)}
    data: dict[str, object] = {"valid": not failed, "workspace": desired.workspace.name, "counts": counts}
    if diagnostics is not None:
        data["diagnostics"] = [diagnostic_json(d) for d in diagnostics]
    return data
