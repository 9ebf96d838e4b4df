"""Steps several commands share: load the desired state, observe once, plan."""

from __future__ import annotations

from pathlib import Path

from reconcile.model import Plan
from specs.desired import DesiredState
from specs.loader import load_workspace
from state.observed import ObservedState


def load(directory: Path) -> DesiredState:
    return load_workspace(directory)


def observe_and_plan(desired: DesiredState, timeout: float) -> tuple[ObservedState, Plan]:
    from reconcile.planner import plan
    from state.observe import observe  # imports ray: only commands that talk to clusters pay

    observed = observe(desired, timeout)
    return observed, plan(desired, observed)
