"""argus doctor: a pre-flight check of each cluster a workspace names, for a new user and for CI.

Per cluster: the dashboard and its Ray version, auth, the GPUs Ray sees, then one short probe job that
proves the shared root its node writes is the one argus reads, tells whether jobs can write argus's own
state there, and gives the clocks' skew (state.doctor). The probe is deleted from Ray's table and its
files removed: no other change to the cluster. Exit 0 when every check passes (warnings allowed), 1 when
one fails.
"""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import load
from reconcile.views.doctor import as_json, render


def run_all(directories: list[Path], timeout: float, json_output: bool) -> int:
    """One workspace, or several, each under its directory (reconcile.commands.several)."""
    from reconcile.commands import several

    found = several.expand(directories)
    if found is None:
        return run(directories[0], timeout, json_output)
    return several.run_each(found, lambda path: run(path, timeout, json_output), "json" if json_output else "human")


def run(directory: Path, timeout: float, json_output: bool) -> int:
    from state.doctor.examine import examine

    desired = load(directory)
    exams = []
    for name, cluster in sorted(desired.clusters.items()):
        if not json_output:  # the probe may take seconds: say what is under way (stderr: stdout stays the answer)
            typer.echo(f"Examining cluster {name} (a probe job may take up to {timeout:g}s)...", err=True)
        exams.append(examine(cluster, desired.shared_root(name), timeout))
    typer.echo(as_json(exams) if json_output else render(exams))
    return EXIT_ERROR if any(exam.failed for exam in exams) else EXIT_OK
