"""argus validate: check the desired state offline. Never imports ray."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.commands.common import load
from reconcile.views.human import render_diagnostics


def run(directory: Path, deep: bool = False, fetch_timeout: float | None = None) -> int:
    desired = load(directory)
    typer.echo(f"Valid: workspace {desired.workspace.name!r}, {len(desired.clusters)} cluster(s), "
               f"{len(desired.snapshots)} code snapshot(s), {len(desired.jobs)} job(s).")
    if not deep:
        return 0
    from state.cache import cache_root
    from state.verl_checks import offline_checks

    found = offline_checks(desired, cache_root(), fetch_timeout)
    diagnostics = [d for items in found.values() for d in items]
    checked = sum(a.startswith("job.") for a in found)
    typer.echo(render_diagnostics(diagnostics) or f"Deep: {checked} verl job(s) compose against their code.")
    return 1 if any(d.severity == "error" for d in diagnostics) else 0
