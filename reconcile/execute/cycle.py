"""Where every command that reads the world and every turn of the loop start: a client per cluster,
one observation, one plan. Below both reconcile.commands and reconcile.serve, so neither imports the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from reconcile.model import Plan, PlanOptions
from specs.desired import DesiredState
from state.observed import ObservedState

if TYPE_CHECKING:
    from state.ray.client import RayClient


def connect(desired: DesiredState, timeout: float) -> dict[str, RayClient]:
    """One client per cluster, bound to the address its spec names and carrying the token its
    auth_token points to. Building one sends no request; a token that cannot be read stops the
    command here, before anything is observed or submitted."""
    from state.ray.auth import token_of
    from state.ray.client import RayClient  # imports ray: only commands that talk to clusters pay
    from state.ray.transport import transport_of

    return {name: RayClient(name, c.address, timeout, token_of(c), transport_of(c))
            for name, c in sorted(desired.clusters.items())}


def observe_and_plan(desired: DesiredState, ray: dict[str, RayClient], options: PlanOptions | None = None,
                     verify_snapshots: bool = False, fetch_timeout: float | None = None,
                     judged: Callable[[ObservedState], ObservedState] | None = None) -> tuple[ObservedState, Plan]:
    """`judged`: what the caller adds to the observation before it is planned (serve's idle verdicts)."""
    from reconcile.plan.planner import plan
    from state.code.sources import DEFAULT_FETCH_TIMEOUT
    from state.observe import observe

    observed = observe(desired, ray, verify_snapshots, fetch_timeout or DEFAULT_FETCH_TIMEOUT,
                       prune=options is not None and options.prune)
    observed = judged(observed) if judged is not None else observed
    return observed, plan(desired, observed, options)
