"""The registry's start on a shared root: the first apply of this version there, finding the workspace's
audit log registering nothing (an argus from before the registry wrote it, or there is none), writes
registry.adopted records naming the runs it finds, trusted as that argus trusted them. From then on the log
is the registry: a run it does not name is not argus's (reconcile.plan.registry, docs/audit.md).
"""

from __future__ import annotations

from reconcile.execute.world import World
from reconcile.plan.runs import ours
from state.audit.events import RegistryAdopted
from state.observed import UNCONFIRMED, ObservedState

CHUNK = 500
"""Ids per registry.adopted record: a record stays a few tens of kB, whatever the history."""


def adopt_unregistered(observed: ObservedState | None, world: World) -> None:
    """On each shared root whose log registers nothing yet and verifies, before any step runs."""
    if observed is None:  # planned elsewhere: nothing to adopt from; the log stays as it was, trusted as before
        return
    done: set[str] = set()
    for cluster, registry in sorted(observed.registries.items()):
        root = world.roots.get(cluster)
        if root is None or root in done or registry.adopted or registry.problems:
            continue
        done.add(root)
        clusters = {name for name, other in world.roots.items() if other == root}
        found = sorted(_runs_on(observed, clusters, world.workspace) - set(registry.submitted))
        for first in range(0, max(len(found), 1), CHUNK):
            world.audit.append(cluster, RegistryAdopted(submission_ids=tuple(found[first:first + CHUNK])))
        if found:
            world.echo(f"{root}: {len(found)} run(s) of an argus from before the registry adopted into the audit log")


def _runs_on(observed: ObservedState, clusters: set[str], workspace: str) -> set[str]:
    """The runs the plan counted there: proven rows on Ray, and records of runs that reached Ray (a record
    still SUBMITTING or SUBMIT_FAILED that Ray does not list is a submit an earlier argus would send again)."""
    rows = {job.submission_id for name in clusters if name in observed.clusters
            for job in observed.clusters[name].jobs if ours(job, workspace, name, observed) is not None}
    return rows | {sid for sid, record in observed.records.items()
                   if record.cluster in clusters and record.status not in UNCONFIRMED}
