"""Steps several commands share: load the desired state, observe once (as much as the command needs), plan."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconcile.model import Plan, PlanOptions
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.loader import load_workspace
from state.observed import ObservedState

if TYPE_CHECKING:
    from state.ray.client import RayClient


def load(directory: Path) -> DesiredState:
    return load_workspace(directory)


def connect(desired: DesiredState, timeout: float) -> dict[str, RayClient]:
    """One client per cluster, bound to the address its spec names and carrying the token its
    auth_token points to. Building one sends no request; a token that cannot be read stops the
    command here, before anything is observed or submitted."""
    from state.ray.auth import token_of
    from state.ray.client import RayClient  # imports ray: only commands that talk to clusters pay

    return {name: RayClient(name, c.address, timeout, token_of(c)) for name, c in sorted(desired.clusters.items())}


def observe_and_plan(desired: DesiredState, ray: dict[str, RayClient], options: PlanOptions | None = None,
                     verify_snapshots: bool = False, fetch_timeout: float | None = None) -> tuple[ObservedState, Plan]:
    from reconcile.plan.planner import plan
    from state.code.sources import DEFAULT_FETCH_TIMEOUT
    from state.observe import observe

    observed = observe(desired, ray, verify_snapshots, fetch_timeout or DEFAULT_FETCH_TIMEOUT)
    return observed, plan(desired, observed, options)


def check_addresses(desired: DesiredState, options: PlanOptions) -> None:
    """--target and --replace must name things that exist: a typo must not mean "nothing"."""
    known = {f"job.{n}" for n in desired.jobs} | {f"code.{n}" for n in desired.snapshots}
    for flag, addresses, allowed in (("--target", options.targets, known),
                                     ("--replace", options.replace, {a for a in known if a.startswith("job.")})):
        unknown = sorted(set(addresses) - allowed)
        if unknown:
            raise ArgusError(f"{flag} {', '.join(unknown)}: no such address. Known: {', '.join(sorted(allowed))}")
