"""What a verl checkpoint directory holds, as plain data: read by state/checkpoints.py, judged by the
pure planner (reconcile/plan/checkpoints.py), which may not import anything that reads files."""

from __future__ import annotations

from specs.base import Frozen

TRACKER = "latest_checkpointed_iteration.txt"
"""verl's tracker in trainer.default_local_dir: the step of the last checkpoint saved whole."""


def step_folder(step: int) -> str:
    """The folder verl saves a step into, next to the tracker."""
    return f"global_step_{step}"


class CheckpointState(Frozen):
    """The latest checkpoint of one checkpoint directory, judged by file names only."""

    step: int | None
    """The step the tracker names; None when the tracker cannot be read."""
    world_size: int | None
    """W in the shards' names (model_world_size_{W}_rank_{R}.pt); None when unknown or not bound (Megatron)."""
    complete: bool
    """verl can load this step: every rank's shards are there, all saved with one world size."""
    problem: str | None = None
    """Why it is not complete or cannot be read, for people; None when complete."""
