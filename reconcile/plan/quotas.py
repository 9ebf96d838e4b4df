"""Planning a cluster's quotas, in the workspace that administers it (Kueue's ClusterQueue). Pure.

The loader lets only the cluster's `admin` workspace declare them; here they are compared with the quotas
admission obeys now: the applied record its audit chain vouches for, or (before the first apply) the
hand-edited file of earlier versions. A record that can't be trusted counts as none: applying again is
what repairs it.
"""

from __future__ import annotations

import json

from reconcile.model import Action, Change, QuotasStep
from reconcile.plan.diff import field_diff
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Quotas
from state.observed import ClusterQueue, ObservedState


def plan_quotas(desired: DesiredState, observed: ObservedState) -> list[Change]:
    """A change per cluster this workspace administers whose applied quotas differ from the reviewed ones;
    none where the queue was not read (an unreachable cluster, a root not trusted): nothing is known there."""
    me, changes = desired.workspace.name, []
    for cluster, definition in sorted(desired.clusters.items()):
        queue = observed.queues.get(cluster)
        if definition.admin != me or queue is None:
            continue
        spec = desired.quotas.get(cluster)
        if spec is None and queue.quotas_digest is None:
            continue  # never applied here, none wanted: the hand-edited file (if any) stays until then
        wanted = spec or Quotas(kind="Quotas", cluster=cluster)
        if queue.quotas_digest != wanted.digest(me):
            changes.append(_change(wanted, queue, removed=spec is None))
    return changes


def _change(wanted: Quotas, queue: ClusterQueue, removed: bool) -> Change:
    known = queue.quotas_digest is not None or queue.legacy_quotas
    before = {"workspaces": queue.quotas} if known else None
    after = {"workspaces": wanted.workspaces}
    action = Action.DELETE if removed else Action.UPDATE if queue.quotas_digest is not None else Action.CREATE
    return Change(address=Address.quotas(wanted.cluster), action=action, reason=_reason(queue, removed),
                  before=before, after=after, diff=field_diff(before, after),
                  steps=(QuotasStep(cluster=wanted.cluster, workspaces=wanted.workspaces),))


def _reason(queue: ClusterQueue, removed: bool) -> str:
    if removed:
        return "the Quotas spec was removed: no workspace is capped on this cluster any more"
    if queue.quotas_digest is not None:
        return "the reviewed quotas differ from the ones applied"
    if queue.problem:
        return "the quotas on the shared root can't be trusted: applying the reviewed ones again repairs them"
    if queue.legacy_quotas and queue.quotas:
        return "first quotas from git: they replace the hand-edited .argus/quotas.yaml (moved aside once applied)"
    return "first quotas from git"


def migration_warnings(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """The admin of a cluster whose quotas still come from the hand-edited file is shown them as the spec to
    commit: once applied, the file is moved aside (read for migration only)."""
    found = []
    for cluster, definition in sorted(desired.clusters.items()):
        queue = observed.queues.get(cluster)
        if definition.admin != desired.workspace.name or cluster in desired.quotas or queue is None \
                or not (queue.legacy_quotas and queue.quotas):
            continue
        address = Address.cluster(cluster)
        found.append(Diagnostic(
            severity="warning", address=address, field="admin",
            message=f"the quotas of cluster {cluster!r} still come from the hand-edited .argus/quotas.yaml on its "
                    "shared root: not reviewed, not audited",
            hint="commit them as a Quotas spec in this workspace and apply it (the file is then moved aside):\n"
                 + spec_text(cluster, queue.quotas)).located(desired.source(address)))
    return found


def spec_text(cluster: str, quotas: dict[str, dict[str, float]]) -> str:
    """The Quotas spec that keeps these caps, as YAML (each cap a JSON flow mapping: any resource name quoted)."""
    lines = ["kind: Quotas", f"cluster: {cluster}", "workspaces:"]
    lines += [f"  {team}: {json.dumps({r: _number(v) for r, v in sorted(caps.items())})}"
              for team, caps in sorted(quotas.items())]
    return "\n".join(lines)


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value
