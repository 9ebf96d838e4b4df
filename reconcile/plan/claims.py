"""One name, one workspace: the errors that keep a checkout from acting for a workspace name another
repository or directory claims on a shared root (state.claims writes and reads the claims). Pure.

Each error is on `cluster.NAME`, once per cluster on that root, so that nothing of that cluster is applied
(not a run, not a directory, not a record) while the other clusters go ahead; it points at the `name:`
line of argus.yaml, which is what collides.
"""

from __future__ import annotations

from specs.address import WORKSPACE, Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from state.observed import ClaimSeen, ObservedState, Owner


def claim_diagnostics(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """An error for each cluster whose shared root's claim of the name is another's, or cannot be trusted."""
    if observed.owner is None:
        return []
    where = desired.source(WORKSPACE).at("name") if WORKSPACE in desired.sources else None
    name, ours = desired.workspace.name, observed.owner
    return [Diagnostic(severity="error", address=Address.cluster(cluster), where=where,
                       message=f"cluster {cluster!r}: {refusal(name, ours, seen)}", hint=advice(seen, ours))
            for cluster, seen in sorted(refused(observed).items())]


def refused(observed: ObservedState) -> dict[str, ClaimSeen]:
    """The clusters whose claim forbids this checkout to act (serve keeps even its records to itself there)."""
    return observed.refused_claims


def refusal(workspace: str, ours: Owner, seen: ClaimSeen) -> str:
    """Whose the name is, and who we are."""
    if seen.problem is not None:
        return f"the claim of workspace name {workspace!r} cannot be trusted: {seen.problem}"
    return (f"workspace name {workspace!r} on its shared root is claimed by {seen.owner} ({seen.path}), and this "
            f"workspace is {ours}: the two would share runs, apply lock, audit log and queue")


def advice(seen: ClaimSeen, ours: Owner) -> str:
    """What to do: another name, or an audited move of the claim."""
    if seen.problem is not None:
        return ("a job may have replaced it; find out who wrote it, and if the name is this workspace's, write "
                "the claim again with `argus claim DIR` (asks, then records it in the audit log)")
    theirs = seen.owner
    old = theirs.directory if theirs is not None and theirs.repository == ours.repository else \
        theirs.repository if theirs is not None else "OLD"
    return (f"give this workspace its own `name:` in argus.yaml; if it is the same workspace moved (a renamed "
            f"directory, a split repository), move the claim: `argus claim DIR --move-from {old}`")
