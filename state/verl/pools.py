"""What a verl job will ask Ray for, read from its composed config, per verl version. Pure.

Read from verl's placement code (docs/verl.md, "What verl asks Ray for"): main_ppo's ResourcePoolManager
makes one STRICT_PACK placement group per node and pool, each bundle {CPU: 3, GPU: 1}
(max_colocate_count=3); sft_trainer_ray's pool takes 10 CPUs per GPU; 0.9's separate rollout replicas
take 2. Pools beside the trainer's global_pool: reward.reward_model (enable_resource_pool), the
distillation teacher (distillation.enabled) and, in 0.9's `trainer.v1.trainer_mode=separate_async`, the
rollout's own replicas (rollout.nnodes x rollout.n_gpus_per_node, whole replicas only).
The async trainers' pools and the CPUs of actors outside placement groups: state/verl/recipe_pools.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specs.kinds.models import Job, Trainer
from specs.workloads import verl
from specs.workloads.verl_profile import Pool, Resume, VerlProfile
from state.verl import recipe_pools
from state.verl.rules import A, Problem, get
from state.verl.version import at_least

MAX_NODES = 10_000
"""Nodes (and GPUs per node) of one pool at most: more than any cluster, and a plan lists a bundle per node."""
MAIN_POOL_CPUS = 3
SFT_RAY_CPUS = 10


def profile_of(config: dict[str, Any], job: Job, point: Any, version: str | None, knowledge: str | None,
               shared_root: str, code: Path | None = None) -> VerlProfile:
    resume = Resume(mode=str(get(config, "trainer.resume_mode", "auto")),
                    path=_text(get(config, "trainer.resume_from_path")))
    backend = "megatron" if get(config, f"{A}.actor.strategy") == "megatron" or get(config, "engine.strategy") == \
        "megatron" else "fsdp"
    return VerlProfile(version=version, knowledge=knowledge, module=point.module, config_name=point.config_name,
                       pools=tuple(pools_of(config, job, version, point.module)),
                       driver_cpus=recipe_pools.outside_cpus(job, point.module, code, _driver_cpus(job, version)),
                       resume=resume, checkpoint_backend=backend)


def pools_of(config: dict[str, Any], job: Job, version: str | None, module: str | None = None) -> list[Pool]:
    trainer = job.trainer or Trainer()
    resource = _gpu_resource(config, version)
    if job.workload == "sft":
        if verl.entry_point(job).launcher == "torchrun":
            return []  # torchrun's processes live in the driver, which holds the GPUs (Submission.entrypoint_num_gpus)
        return [Pool(name="trainer", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
                     cpus_per_gpu=SFT_RAY_CPUS, gpu_resource=resource)]
    module = module or verl.entry_point(job).module
    found = recipe_pools.known_pools(config, module, trainer, resource) or [
        Pool(name="global_pool", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
             cpus_per_gpu=MAIN_POOL_CPUS, gpu_resource=resource)]
    found += [Pool(name=side.name, nnodes=side.nnodes, gpus_per_node=side.gpus, cpus_per_gpu=MAIN_POOL_CPUS,
                   gpu_resource=resource) for side in _side_pools(config, version) if side.on and side.placeable
              and (side.name != "teacher_pool" or recipe_pools.places_teacher(module))]
    found += recipe_pools.declared_pools(job.entry.demand if job.entry else None, resource)
    rollout = _rollout_pool(config, version, resource)
    return found + ([rollout] if rollout else [])


def pool_problems(config: dict[str, Any], profile: VerlProfile, version: str | None) -> list[Problem]:
    """The pools verl refuses to build or argus cannot count, and device names that make verl ask for what no
    node has."""
    found = [problem for side in _side_pools(config, version) if side.on and (problem := side.problem())]
    if _separate_rollout(config, version) and not _positive(config, f"{A}.rollout"):
        found.append(((f"{A}.rollout.nnodes", f"{A}.rollout.n_gpus_per_node"),
                      "trainer.v1.trainer_mode=separate_async runs the rollout on its own GPUs: set "
                      f"{A}.rollout.nnodes and {A}.rollout.n_gpus_per_node to numbers of at most {MAX_NODES} nodes"))
    device = get(config, "trainer.device")
    if not at_least(version, (0, 9)) and device not in (None, "cuda", "npu"):
        found.append((("trainer.device",), f"verl {version} asks Ray for a resource named {device!r} for every "
                                           "GPU, which no node offers: the job would never start; leave "
                                           "`trainer.device` unset (cuda)"))
    return found  # legacy top-level reward keys: state/verl/legacy_keys.py (whether the module reads them)


@dataclass(frozen=True)
class _Side:
    """A pool beside the trainer's, as the config sets it: on or off, and its size as written."""

    name: str
    switch: str
    keys: tuple[str, str]
    switched: Any
    nnodes: Any
    gpus: Any

    @property
    def on(self) -> bool:
        """Taken as on unless plainly off: a switch argus cannot read is reported (problem) and counted."""
        return self.switched not in (None, False)

    @property
    def placeable(self) -> bool:
        return _sizes_ok(self.nnodes, self.gpus)

    def problem(self) -> Problem | None:
        if not isinstance(self.switched, bool):
            return (self.switch,), f"{self.switch}={self.switched!r}: argus must know before the run whether the " \
                                   f"{self.name} is placed; write true or false"
        if self.placeable:
            return None
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (self.nnodes, self.gpus)):
            return self.keys, (f"{self.switch} is on but its pool is {self.nnodes} x {self.gpus} GPUs: set "
                               f"{self.keys[0]} and {self.keys[1]} (verl stops with 'must be greater than 0'; "
                               f"at most {MAX_NODES} nodes; the {self.name} is placed beside the trainer's)")
        return self.keys, (f"{self.name}'s size ({self.keys[0]}={self.nnodes!r}, {self.keys[1]}={self.gpus!r}) must "
                           "be numbers argus can count before the run (not read from the environment)")


def _side_pools(config: dict[str, Any], version: str | None) -> list[_Side]:
    """The reward model's and the distillation teacher's pools. verl 0.8's main_ppo copied each top-level
    reward_model.{enable_resource_pool,nnodes,n_gpus_per_node} that is set over reward.reward_model's, key by key."""
    def reward(key: str) -> tuple[str, Any]:
        legacy = get(config, f"reward_model.{key}")
        if not at_least(version, (0, 9)) and legacy is not None:
            return f"reward_model.{key}", legacy
        return f"reward.reward_model.{key}", get(config, f"reward.reward_model.{key}")

    (switch, on), (nodes_key, nodes), (gpus_key, gpus) = (reward(k) for k in ("enable_resource_pool", "nnodes",
                                                                            "n_gpus_per_node"))
    return [_Side("reward_pool", switch, (nodes_key, gpus_key), on, nodes, gpus),
            _Side("teacher_pool", "distillation.enabled", ("distillation.nnodes", "distillation.n_gpus_per_node"),
                  get(config, "distillation.enabled"), get(config, "distillation.nnodes"),
                  get(config, "distillation.n_gpus_per_node"))]


def _sizes_ok(nnodes: Any, gpus: Any) -> bool:
    """Whole positive numbers, and no more nodes than any cluster has (a plan lists a bundle per node)."""
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (nnodes, gpus)) \
        and nnodes <= MAX_NODES and gpus <= MAX_NODES


def _rollout_pool(config: dict[str, Any], version: str | None, resource: str) -> Pool | None:
    """0.9's separate_async rollout: whole replicas of tp x dp x pp GPUs, each split into nodes."""
    if not _separate_rollout(config, version):
        return None
    return recipe_pools.rollout_replicas(config, f"{A}.rollout", resource)


def _separate_rollout(config: dict[str, Any], version: str | None) -> bool:
    return (at_least(version, (0, 9)) and get(config, "trainer.use_v1", True) is not False
            and get(config, "trainer.v1.trainer_mode") == "separate_async")


def _gpu_resource(config: dict[str, Any], version: str | None) -> str:
    """0.9 names the resource after the platform (GPU); 0.8 after trainer.device, verbatim past cuda and npu."""
    device = get(config, "trainer.device") or "cuda"
    if at_least(version, (0, 9)) or device == "cuda":
        return "GPU"
    return "NPU" if device == "npu" else str(device)


def _driver_cpus(job: Job, version: str | None) -> float:
    """0.8's TaskRunner actor holds a CPU of its own (ray.remote(num_cpus=1)); 0.9's holds none."""
    return 1.0 if job.workload != "sft" and not at_least(version, (0, 9)) else 0.0


def _positive(config: dict[str, Any], prefix: str) -> bool:
    return _sizes_ok(get(config, f"{prefix}.nnodes"), get(config, f"{prefix}.n_gpus_per_node"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
