"""`--prune` for Datasets and Models: this workspace's sealed versions that no current spec names are deleted,
never one a run may still read. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

from reconcile.model import Action, Change, DeleteInputStep, RunView
from reconcile.plan.code import owned_unnamed
from reconcile.plan.runs import newest
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.workloads.submission import Submission
from state.observed import MAYBE_RUNNING, TERMINAL, ObservedState


def prune_inputs(desired: DesiredState, observed: ObservedState, runs: Mapping[str, list[RunView]],
                 prune: bool) -> tuple[list[Change], list[Diagnostic]]:
    """With --prune: a DELETE per unnamed version of this workspace, or an error naming the run that names it.
    Without it nothing is said: old versions stay until asked."""
    if not prune:
        return [], []
    wanted = {(desired.shared_root(spec.cluster), state.rel) for address, spec in desired.inputs.items()
              if (state := observed.inputs.get(address)) is not None and state.rel}
    changes, diagnostics = [], []
    for cluster, root, rel, manifest in owned_unnamed(desired, observed.stored_inputs, wanted):
        address = Address.parse(f"{manifest.kind.lower()}.{manifest.name}") or Address.cluster(cluster)
        # another workspace's run first: that it still reads the version is what its owner cannot see
        users = sorted(dict.fromkeys(_users(desired, observed, runs, cluster, root, rel)),
                       key=lambda user: user[0] == desired.workspace.name)
        if users:
            more = f" (and {len(users) - 1} more)" if len(users) > 1 else ""
            diagnostics.append(Diagnostic(severity="error", address=address,
                                          message=f"prune refused: run {users[0][1]} names {rel}{more}"))
        else:
            changes.append(Change(address=address, action=Action.DELETE, reason=f"pruned: no spec names {rel}",
                                  steps=(DeleteInputStep(cluster=cluster, rel=rel, bytes=manifest.bytes),)))
    return changes, diagnostics


def _users(desired: DesiredState, observed: ObservedState, runs: Mapping[str, list[RunView]], cluster: str,
           root: str, rel: str) -> Iterator[tuple[str | None, str]]:
    """"S (job J, workspace W)" for each run that may read the version: any workspace's job Ray runs there, this
    workspace's records of runs that may be running, and the newest run of each of its desired jobs."""
    ws, named = desired.workspace.name, _naming(rel)
    for state in sorted(observed.clusters.values(), key=lambda c: c.name):
        for job in state.jobs:
            if state.name == cluster and job.status not in TERMINAL and (named(job.entrypoint)
                                                                       or any(map(named, job.env_values))):
                yield _who(job.submission_id, job.job, job.workspace)
    for sid, record in sorted(observed.records.items()):
        if record.cluster == cluster and record.status in MAYBE_RUNNING and _names(record.submission, rel, named):
            yield _who(sid, record.job, record.workspace)
    for name in sorted(desired.jobs):
        run = newest(runs.get(name, []))
        if run is not None and run.cluster == cluster and _names(run.submission, rel, named):
            yield _who(run.submission_id, name, ws)


def _naming(rel: str) -> Callable[[str | None], bool]:
    """Whether a text names the version's directory (not a longer name that begins the same)."""
    pattern = re.compile(r"(?<![\w.-])" + re.escape(rel) + r"(?![\w.-])")
    return lambda text: bool(pattern.search(text or ""))


def _names(sub: Submission | None, rel: str, named: Callable[[str | None], bool]) -> bool:
    if sub is None:
        return False
    return rel in (sub.inputs or {}).values() or named(sub.entrypoint) or any(map(named, sub.env_vars.values()))


def _who(sid: str, job: str | None, workspace: str | None) -> tuple[str | None, str]:
    return workspace, f"{sid} (job {job or 'unknown'}, workspace {workspace or 'unknown'})"
