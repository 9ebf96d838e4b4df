"""Whether a new attempt of a verl run may start from what its checkpoint directory holds: pure.

A resume is planned only from a complete checkpoint saved by as many GPUs as the job has now: verl
names FSDP shards by world size (model_world_size_{W}_rank_{R}.pt) and each rank opens the file of
its own W, so another GPU count fails at load, after the job has waited for and taken its GPUs.
"""

from __future__ import annotations

from specs.checkpoint_state import TRACKER, CheckpointState, step_folder

FRESH = "start fresh with a new `trainer.checkpoint_dir` (or bump `run:`)"


def resume_problem(job_name: str, gpus: int, state: CheckpointState | None) -> str | None:
    """None when a new attempt may start (no checkpoint, or a complete one saved by `gpus` GPUs);
    otherwise what stands in the way and what to do, for people."""
    if state is None:
        return None
    if state.step is None:
        return (f"job.{job_name}'s checkpoint directory has an unusable {TRACKER} ({state.problem}): verl would "
                f"fail or resume from something else; write the last complete step into it, or {FRESH}")
    folder = step_folder(state.step)
    if not state.complete:
        return (f"job.{job_name}'s latest checkpoint {folder} is incomplete ({state.problem}): verl cannot resume "
                f"from it; delete {folder} and point {TRACKER} at the previous complete step, or {FRESH}")
    if state.world_size is not None and state.world_size != gpus:
        return (f"job.{job_name} would resume from {folder} saved by {state.world_size} GPUs "
                f"(model_world_size_{state.world_size}), but it now has {gpus} (trainer.nnodes x "
                f"n_gpus_per_node): verl cannot load shards of another world size; set the GPUs back to "
                f"{state.world_size}, or give the job a new `trainer.checkpoint_dir` (or bump `run:`) to start fresh")
    return None
