"""What a verl job will ask Ray for, read from its composed config, per verl version. Pure.

Read from verl's placement code (docs/verl.md, "What verl asks Ray for"): main_ppo's ResourcePoolManager
makes one STRICT_PACK placement group per node and pool, each bundle {CPU: 3, GPU: 1}
(max_colocate_count=3); sft_trainer_ray's pool takes 10 CPUs per GPU; 0.9's separate rollout replicas
take 2. Pools beside the trainer's global_pool: reward.reward_model (enable_resource_pool), the
distillation teacher (distillation.enabled) and, in 0.9's `trainer.v1.trainer_mode=separate_async`, the
rollout's own replicas (rollout.nnodes x rollout.n_gpus_per_node, whole replicas only).
"""

from __future__ import annotations

from typing import Any

from specs import verl
from specs.models import Job, Trainer
from specs.verl_profile import Pool, Resume, VerlProfile
from state.verl_rules import A, Problem, get
from state.verl_version import at_least

LEGACY_KEYS = (("reward_model.enable", "reward.reward_model.enable"),
               ("reward_model.enable_resource_pool", "reward.reward_model.enable_resource_pool"),
               ("custom_reward_function.path", "reward.custom_reward_function.path"))
"""Top-level keys verl 0.8's main_ppo moved under reward.* (migrate_legacy_reward_impl); 0.9's still composes
them (a compatibility file keeps them) but nothing reads them."""
MAIN_POOL_CPUS = 3
SFT_RAY_CPUS = 10
ROLLOUT_POOL_CPUS = 2


def profile_of(config: dict[str, Any], job: Job, point: Any, version: str | None, knowledge: str | None,
               shared_root: str) -> VerlProfile:
    resume = Resume(mode=str(get(config, "trainer.resume_mode", "auto")),
                    path=_text(get(config, "trainer.resume_from_path")))
    backend = "megatron" if get(config, f"{A}.actor.strategy") == "megatron" or get(config, "engine.strategy") == \
        "megatron" else "fsdp"
    return VerlProfile(version=version, knowledge=knowledge, module=point.module, config_name=point.config_name,
                       pools=tuple(pools_of(config, job, version)), driver_cpus=_driver_cpus(job, version),
                       resume=resume, checkpoint_backend=backend)


def pools_of(config: dict[str, Any], job: Job, version: str | None) -> list[Pool]:
    trainer = job.trainer or Trainer()
    resource = _gpu_resource(config, version)
    if job.workload == "sft":
        if verl.entry_point(job).launcher == "torchrun":
            return []  # torchrun's processes live in the driver, which holds the GPUs (Submission.entrypoint_num_gpus)
        return [Pool(name="trainer", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
                     cpus_per_gpu=SFT_RAY_CPUS, gpu_resource=resource)]
    found = [Pool(name="global_pool", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
                  cpus_per_gpu=MAIN_POOL_CPUS, gpu_resource=resource)]
    for name, prefix, switch in _side_pools(config, version):
        if get(config, switch) and _positive(config, prefix):
            found.append(Pool(name=name, nnodes=get(config, f"{prefix}.nnodes"),
                              gpus_per_node=get(config, f"{prefix}.n_gpus_per_node"),
                              cpus_per_gpu=MAIN_POOL_CPUS, gpu_resource=resource))
    rollout = _rollout_pool(config, version, resource)
    return found + ([rollout] if rollout else [])


def pool_problems(config: dict[str, Any], profile: VerlProfile, version: str | None) -> list[Problem]:
    """The pools verl refuses to build, and device names that make it ask for what no node has."""
    found: list[Problem] = []
    for name, prefix, switch in _side_pools(config, version):
        if get(config, switch) and not _positive(config, prefix):
            found.append(((f"{prefix}.nnodes", f"{prefix}.n_gpus_per_node"),
                          f"{switch} is on but its pool is empty: set {prefix}.nnodes and {prefix}.n_gpus_per_node "
                          f"(verl stops with 'must be greater than 0'; the {name} is placed beside the trainer's)"))
    if _separate_rollout(config, version) and not _positive(config, f"{A}.rollout"):
        found.append(((f"{A}.rollout.nnodes", f"{A}.rollout.n_gpus_per_node"),
                      "trainer.v1.trainer_mode=separate_async runs the rollout on its own GPUs: set "
                      f"{A}.rollout.nnodes and {A}.rollout.n_gpus_per_node"))
    device = get(config, "trainer.device")
    if not at_least(version, (0, 9)) and device not in (None, "cuda", "npu"):
        found.append((("trainer.device",), f"verl {version} asks Ray for a resource named {device!r} for every "
                                           "GPU, which no node offers: the job would never start; leave "
                                           "`trainer.device` unset (cuda)"))
    for legacy, moved in LEGACY_KEYS:
        if at_least(version, (0, 9)) and get(config, legacy) not in (None, False):
            found.append(((legacy,), f"verl 0.9's main_ppo ignores {legacy} (0.8 moved it to {moved}): the run would "
                                     f"train without it; write {moved}"))
    return found


def _side_pools(config: dict[str, Any], version: str | None) -> list[tuple[str, str, str]]:
    """(pool, key prefix of its size, the key that turns it on). 0.8 still read the legacy top-level reward_model."""
    reward = "reward.reward_model"
    if not at_least(version, (0, 9)) and get(config, "reward_model.enable_resource_pool") is not None:
        reward = "reward_model"
    return [("reward_pool", reward, f"{reward}.enable_resource_pool"),
            ("teacher_pool", "distillation", "distillation.enabled")]


def _rollout_pool(config: dict[str, Any], version: str | None, resource: str) -> Pool | None:
    """0.9's separate_async rollout: whole replicas of tp x dp x pp GPUs, each split into nodes."""
    if not _separate_rollout(config, version) or not _positive(config, f"{A}.rollout"):
        return None
    replica = 1
    for part in ("tensor_model", "data", "pipeline_model"):
        value = get(config, f"{A}.rollout.{part}_parallel_size", 1)
        replica *= value if isinstance(value, int) and value > 0 else 1
    per_node = get(config, f"{A}.rollout.n_gpus_per_node")
    replicas = (per_node * get(config, f"{A}.rollout.nnodes")) // replica
    node_gpus = min(per_node, replica)
    if not replicas:
        return None
    return Pool(name="rollout_pool", nnodes=replicas * (replica // node_gpus), gpus_per_node=node_gpus,
                cpus_per_gpu=ROLLOUT_POOL_CPUS, gpu_resource=resource)


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
    sizes = [get(config, f"{prefix}.nnodes"), get(config, f"{prefix}.n_gpus_per_node")]
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
