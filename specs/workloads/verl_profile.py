"""What the snapshot's own verl makes of a job, as plain data: read by state/verl/checks.py from the
composed Hydra config, used by the pure planner (demand, capacity, resume) and shown in plans."""

from __future__ import annotations

from specs.base import Frozen


class Pool(Frozen):
    """One of verl's resource pools: `nnodes` placement groups, each of `gpus_per_node` GPUs on one node."""

    name: str
    """verl's own name for it: global_pool, reward_pool, teacher_pool, rollout_pool, or the trainer's (sft)."""
    nnodes: int
    gpus_per_node: int
    cpus_per_gpu: float
    """CPUs verl asks beside each GPU: a node fits a bundle only if it has them."""
    gpu_resource: str = "GPU"
    """The Ray resource each bundle asks per GPU: verl names it after trainer.device (cuda: GPU)."""


class Resume(Frozen):
    """How verl will resume, read from the composed config (trainer.resume_mode, trainer.resume_from_path)."""

    mode: str = "auto"
    """auto: from the checkpoint directory's latest step; disable: fresh; resume_path: from `path`."""
    path: str | None = None
    """trainer.resume_from_path as the run will see it (shared root filled in)."""


class VerlProfile(Frozen):
    """A verl job as its snapshot's verl will run it."""

    version: str | None
    """The snapshot's verl (verl/version/version), None when it has none."""
    knowledge: str | None
    """The range of argus's verl knowledge it was checked against (e.g. "0.9.x"); None: outside all of them."""
    checked: str | None = None
    """What of argus's verl knowledge was applied, in the plan's words (a newer verl gets the newest rules, as
    warnings; an older one is only composed); None when not said."""
    module: str
    config_name: str
    pools: tuple[Pool, ...]
    """Everything verl places with placement groups; empty when the trainer runs inside the driver (torchrun)."""
    driver_cpus: float = 0.0
    """CPUs verl's own actors beside the pools take (the TaskRunner), anywhere on the cluster."""
    resume: Resume = Resume()
    checkpoint_backend: str = "fsdp"
    """fsdp or megatron: what the actor saves its shards with (actor_rollout_ref.actor.strategy)."""

    @property
    def gpus(self) -> int:
        return sum(pool.nnodes * pool.gpus_per_node for pool in self.pools)
