"""What the plan says about the admission queue's signatures (ARGUS_ROOT_KEY, state.root_key). Pure.

Any job can write the shared root, so the plan tells when a ledger held entries that were ignored
for want of a valid signature (a forgery, or a workspace without the key), when the queue is not
signed at all, and when a run of this workspace would have been preempted for another workspace's
entry that is not signed (it is not: an entry any job could write never stops a run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconcile.model import Action, Change
from reconcile.plan.admission import Decision
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from state.observed import ACTIVE, ObservedState

KEY_WORDS = "ARGUS_ROOT_KEY"
"""Every warning of this module names the key (`argus serve` logs each such warning once)."""
SET_THE_KEY = "set the same ARGUS_ROOT_KEY for every workspace and `argus serve` sharing this root (docs/queue.md)"


def trust_diagnostics(desired: DesiredState, observed: ObservedState, changes: Sequence[Change],
                      decisions: Mapping[str, Decision]) -> list[Diagnostic]:
    return _held_back(desired, changes, decisions) + _queue_warnings(desired.workspace.name, observed)


def _held_back(desired: DesiredState, changes: Sequence[Change], decisions: Mapping[str, Decision]) -> list[Diagnostic]:
    """This workspace's running preemptible jobs that an unsigned head of another workspace would preempt."""
    heads = {victim: d.key for d in decisions.values() for victim in d.unsigned_preempts}
    found = []
    for change in changes:
        job = desired.jobs.get(change.address.removeprefix("job."))
        head = heads.get(f"{desired.workspace.name}/{job.name}") if job is not None else None
        run = change.current
        if head is None or job is None or not job.preemptible or change.action is not Action.NOOP or run is None \
                or not run.on_ray or run.status not in ACTIVE:
            continue
        found.append(Diagnostic(
            severity="warning", address=change.address,
            message=f"{job.name} would be preempted for {head}, but preemption across workspaces needs signed "
                    f"queue entries: set ARGUS_ROOT_KEY for every workspace sharing this root (docs/queue.md)"))
    return found


def _queue_warnings(workspace: str, observed: ObservedState) -> list[Diagnostic]:
    found = []
    for name, queue in sorted(observed.queues.items()):
        if queue.keyed and queue.ignored:
            found.append(Diagnostic(
                severity="warning", address=Address.cluster(name),
                message=f"{', '.join(queue.ignored)}: queue entries without a valid ARGUS_ROOT_KEY signature were "
                        "ignored (forged by a job, or written by argus without this key)",
                hint=SET_THE_KEY))
        elif not queue.keyed and any(e.workspace != workspace for e in queue.entries):
            found.append(Diagnostic(
                severity="warning", address=Address.cluster(name),
                message=f"the admission queue of cluster {name!r} is shared with other workspaces and not signed "
                        "(ARGUS_ROOT_KEY is not set): any job can write entries that delay this workspace's jobs",
                hint=SET_THE_KEY))
    return found
