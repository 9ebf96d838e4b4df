"""Steps several commands share: load the desired state, observe once, plan."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconcile.model import Plan
from specs.desired import DesiredState
from specs.loader import load_workspace
from state.observed import ObservedState

if TYPE_CHECKING:
    from state.ray_client import RayClient


def load(directory: Path) -> DesiredState:
    return load_workspace(directory)


def connect(desired: DesiredState, timeout: float) -> dict[str, RayClient]:
    from state.observe import clients  # imports ray: only commands that talk to clusters pay

    return clients(desired, timeout)


def observe_and_plan(desired: DesiredState, ray: dict[str, RayClient], prune: bool = False,
                     verify_snapshots: bool = False) -> tuple[ObservedState, Plan]:
    from reconcile.planner import plan
    from state.observe import observe

    observed = observe(desired, ray, verify_snapshots)
    return observed, plan(desired, observed, prune)
