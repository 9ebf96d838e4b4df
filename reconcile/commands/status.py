"""argus status: per job, is it in sync with its spec, and how is its run doing on Ray.

A cluster that does not answer is shown, not fatal: its jobs read "unknown" (with what argus last
saw of their runs), the others as usual, and the exit code is 1 since the world was not fully read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK, is_tty
from reconcile.commands.common import load
from reconcile.execute.cycle import connect
from reconcile.model import Plan
from reconcile.views.human import Unseen, render_status
from specs.desired import DesiredState
from specs.errors import ArgusError

if TYPE_CHECKING:
    from state.ray.client import RayClient


def run_all(directories: list[Path], timeout: float, output_format: str = "human", watch: float | None = None,
            all_workspaces: bool = False) -> int:
    """One workspace as always, or several, each under its directory (reconcile.commands.several)."""
    from reconcile.commands import several

    found = several.expand(directories)
    if found is None:
        return run(directories[0], timeout, output_format, watch, all_workspaces)
    if watch:
        raise ArgusError("--watch follows one workspace: give one DIR that holds argus.yaml")
    return several.run_each(found, lambda path: run(path, timeout, output_format, all_workspaces=all_workspaces),
                            output_format)


def run(directory: Path, timeout: float, output_format: str = "human", watch: float | None = None,
        all_workspaces: bool = False) -> int:
    desired = load(directory)
    while True:  # each refresh connects anew: its own --timeout budget per dashboard (state.ray.client)
        plan, unseen, held, gpu = observe(desired, connect(desired, timeout))
        if watch and is_tty():
            typer.clear()
        show(plan, set(desired.jobs), output_format, unseen, held, all_workspaces, gpu)
        if not watch or not any(c.current and c.current.on_ray and not c.current.finished for c in plan.changes):
            return EXIT_ERROR if unseen.clusters else EXIT_OK  # --watch ends when nothing is PENDING or RUNNING
        typer.echo(f"-- refreshing every {watch:g}s until every run has finished (^C to stop) --")
        time.sleep(watch)


def observe(desired: DesiredState, ray: dict[str, RayClient]) -> tuple[Plan, Unseen, dict[str, dict[str, float]],
                                                                      dict[str, str]]:
    """A plan good for telling each job's sync state, from an observation that fetches no source and
    checks no verl config (state.observe.observe_sync), what of the world it could not see, the
    GPUs each workspace holds per cluster, and each active run's GPU use (reconcile.views.gpu.cells: two more
    reads per cluster that runs something, state.ray.gpu_read)."""
    from reconcile.plan.planner import plan
    from reconcile.plan.unreachable import hidden_jobs
    from reconcile.views.gpu import cells
    from reconcile.views.queue import gpus_held
    from state.observe import observe_sync
    from state.ray.gpu_read import gpu_use

    observed = observe_sync(desired, ray)
    return (plan(desired, observed), Unseen(observed.unreachable, hidden_jobs(desired, observed)),
            gpus_held(observed), cells(gpu_use(ray, observed.clusters)))


def show(plan: Plan, desired_jobs: set[str], output_format: str, unseen: Unseen | None = None,
         held: Mapping[str, Mapping[str, float]] | None = None, all_workspaces: bool = False,
         gpu: Mapping[str, str] | None = None) -> None:
    if output_format == "json":
        from reconcile.views.machine import status_json

        typer.echo(status_json(plan, desired_jobs, unseen, held, gpu))
    elif output_format == "markdown":
        from reconcile.views.machine import fenced

        typer.echo(fenced(render_status(plan, desired_jobs, unseen, all_workspaces)))
    else:
        typer.echo(render_status(plan, desired_jobs, unseen, all_workspaces, gpu))
