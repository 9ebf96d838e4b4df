"""Whether each shared root is the one argus laid out: the errors that say it is not. Pure.

A root with no identity and nothing of argus's while Ray lists runs of the workspace (an NFS not mounted,
a typo'd path) is treated as an unreachable cluster is: its jobs are neither submitted nor stopped
(reconcile.plan.unreachable), so an empty directory can never make argus run again what already ran, nor
call its own runs foreign. An identity file a job replaced is a warning: the root is mounted (something
wrote it), and distrusting it would let one write freeze every stop there, deadlines included.
"""

from __future__ import annotations

from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from state.observed import ObservedState, RootState

IDENTITY = ".argus/root.json"


def distrusted(observed: ObservedState) -> dict[str, str]:
    """By cluster: why its shared root is not trusted as argus's record."""
    return {name: why for name, state in sorted(observed.roots.items()) if (why := problem(state))}


def problem(state: RootState) -> str | None:
    if not state.unmounted:
        return None
    return (f"it holds no identity ({IDENTITY}) and nothing argus wrote, yet Ray lists {state.runs_on_ray} "
            "run(s) of this workspace on the cluster: the NFS looks unmounted (an empty directory at its path) "
            "or `shared_root` names another directory; mount it or fix `shared_root` (`argus doctor` checks "
            "that the workers write the root argus reads)")


def root_diagnostics(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    """An error on each distrusted root's cluster (plan exits 1, nothing is carried out there); a warning on
    each whose identity file argus cannot trust."""
    errors = [Diagnostic(severity="error", address=Address.cluster(name), field="shared_root",
                         message=f"shared root {desired.shared_root(name)} of cluster {name!r} is not trusted, so its "
                                 f"jobs are not planned: {why}").located(desired.source(Address.cluster(name)))
              for name, why in distrusted(observed).items()]
    return errors + [
        Diagnostic(severity="warning", address=Address.cluster(name), field="shared_root",
                   message=f"shared root {desired.shared_root(name)}: {state.problem}; remove it (argus writes a "
                           "new identity on the next apply) or restore the one argus wrote")
        for name, state in sorted(observed.roots.items()) if state.problem]


def needs_identity(state: RootState | None) -> bool:
    """A root argus may lay its identity on: fresh, or laid out by an argus before identities (never over a file
    that stands there: state.root.identity)."""
    return state is not None and state.identity is None and state.problem is None and problem(state) is None
