"""Executor of a quotas step: the admin workspace applies a cluster's reviewed quotas.

The digest goes into the admin's audit chain first (quotas.applied), then the record onto the shared root:
if the write fails after the audit, every team's admission refuses the record until an apply writes it
(state.queue.applied_quotas), never obeys quotas the chain did not vouch for. The invariant it relies on:
the chain's HMAC (ARGUS_AUDIT_KEY, held by no job) anchors which quotas are in force.
"""

from __future__ import annotations

from pydantic import ValidationError

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import QuotasStep
from specs.errors import ArgusError
from specs.kinds.models import Quotas
from state.audit.events import QuotasApplied
from state.queue.applied_quotas import write_record


def apply_quotas(step: QuotasStep, world: World) -> Done:
    if world.admins.get(step.cluster) != world.workspace:  # a saved plan is hostile input: checked again
        raise ArgusError(f"workspace {world.workspace!r} is not the admin of cluster {step.cluster!r}: its quotas are "
                         "not this workspace's to set")
    try:
        spec = Quotas(kind="Quotas", cluster=step.cluster, workspaces=step.workspaces)
    except ValidationError as err:
        raise ArgusError(f"the quotas of cluster {step.cluster!r} in this plan are not valid: "
                         f"{err.errors()[0]['msg']}") from None
    root, digest = world.roots[step.cluster], spec.digest(world.workspace)
    # always both, even when the record already reads the same: a job can write a record with the digest it
    # expects; only the chain's record makes it count
    world.audit.append(step.cluster, QuotasApplied(cluster=step.cluster, digest=digest,
                                                   workspaces=spec.workspaces))
    write_record(root, spec, world.workspace)
    return Done(Outcome.CREATED)

