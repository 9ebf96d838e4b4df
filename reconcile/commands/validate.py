"""argus validate: check the desired state offline. Never imports ray."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.commands.common import load


def run(directory: Path) -> int:
    desired = load(directory)
    typer.echo(f"Valid: workspace {desired.workspace.name!r}, {len(desired.clusters)} cluster(s), "
               f"{len(desired.jobs)} job(s).")
    return 0
