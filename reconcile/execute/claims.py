"""The first apply of a workspace claims its name on each shared root it acts on (state.claims).

Plan is read-only, so a root nobody claimed yet is claimed here, before the first step, each claim recorded
in that root's audit log. A claim written meanwhile by another repository or directory stops the apply
before anything was changed (two first applies racing: one claims, the other is refused).
"""

from __future__ import annotations

from reconcile.execute.world import World
from reconcile.model import Plan
from specs.address import Address
from specs.desired import DesiredState
from state import claims
from state.audit.events import NameClaimed
from state.audit.log import actor
from state.observed import ObservedState
from state.runs.records import now


def claim_unclaimed(plan: Plan, desired: DesiredState, observed: ObservedState | None, world: World) -> None:
    """Claim the name on every shared root of a cluster the plan has no error on, where it is not claimed.
    Roots the observation found claimed (by us, or by another, which the plan's error says) are not touched."""
    owner = observed.owner if observed is not None and observed.owner is not None else claims.owner_of(desired.root)
    flagged = {d.address for d in plan.errors}
    seen = observed.claims if observed is not None else {}
    for root, cluster in _roots(desired, observed, flagged).items():
        if cluster not in world.audit.roots:  # an empty mount point (reconcile.plan.root), whatever --target kept
            continue
        if cluster in seen and (seen[cluster].owner is not None or seen[cluster].problem is not None):
            continue
        if claims.claim(root, desired.workspace.name, owner, actor(), now()):
            world.echo(f"Claimed workspace name {desired.workspace.name!r} on {root} for {owner}.")
            world.audit.append(cluster, NameClaimed(repository=owner.repository, directory=owner.directory))


def _roots(desired: DesiredState, observed: ObservedState | None, flagged: set[str]) -> dict[str, str]:
    """Each shared root here, with the first of its clusters by name; none of a cluster with an error."""
    absent = set(observed.absent_roots) if observed is not None else set()
    found: dict[str, str] = {}
    for cluster, root in sorted(desired.shared_roots.items()):
        if cluster in absent or Address.cluster(cluster) in flagged:
            found.pop(root, None)
            found[root] = ""  # a root with any refused cluster is left alone
            continue
        found.setdefault(root, cluster)
    return {root: cluster for root, cluster in found.items() if cluster}
