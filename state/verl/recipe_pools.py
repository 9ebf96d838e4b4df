"""What verl's async trainers and recipes ask Ray for beyond main_ppo's pools, keyed by entry module. Pure,
but for reading a recipe's entry module with `ast`.

Read from verl 0.8.0 and 0.9.1 (docs/verl.md, "What verl asks Ray for", cites file:line): fully-async
(verl.experimental.fully_async_policy.fully_async_main) and one-step-off-policy
(verl.experimental.one_step_off_policy.main_ppo) place the trainer on `trainer_pool` (trainer.nnodes x
trainer.n_gpus_per_node, ResourcePoolManager's {CPU: 3, GPU: 1} bundles) and the rollout on replicas of its
own (rollout.nnodes x rollout.n_gpus_per_node, copied into actor_rollout_ref.rollout by the main, each
replica a pool of {CPU: 2, GPU: 1} bundles). Their actors outside placement groups hold CPUs of their own.
A recipe's entry module declares its TaskRunner's CPUs in a literal `ray.remote(num_cpus=N)`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specs.kinds.models import Job, RecipeDemand, Trainer
from specs.workloads.verl_profile import Pool
from state.verl.rules import get

FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
MAX_MODULE_BYTES = 1_000_000
MAX_NODES = 10_000
"""As state/verl/pools.py: more than any cluster has."""


@dataclass(frozen=True)
class Known:
    """An entry module whose placement argus read: its pools and the CPUs its actors hold outside them."""

    cpus: float
    """Every actor it starts outside placement groups, each its `@ray.remote(num_cpus=...)`."""
    teacher: bool
    """Whether it places distillation's teacher_pool (fully-async's rollouter does; one-step-off does not)."""


KNOWN: dict[str, Known] = {
    # FullyAsyncTaskRunner 1 + FullyAsyncRollouter 10 + FullyAsyncTrainer 10 + MessageQueue 2 (0.8.0 and 0.9.1)
    FULLY_ASYNC: Known(cpus=23.0, teacher=True),
    # OneStepTaskRunner: @ray.remote(num_cpus=10, max_concurrency=100) (0.8.0 and 0.9.1)
    ONE_STEP_OFF: Known(cpus=10.0, teacher=False),
}
STANDARD = frozenset({"verl.trainer.main_ppo", "recipe.dapo.main_dapo", "recipe.prime.main_prime",
                      "recipe.entropy.main_entropy", "recipe.flowrl.main_flowrl", "recipe.sppo.main_sppo"})
"""Modules that place only main_ppo's pools, read in verl-recipe at 48ea0a7: dapo/main_dapo.py runs run_ppo with
its own TaskRunner; prime, entropy, flowrl and sppo build one global_pool of [trainer.n_gpus_per_node] x
trainer.nnodes (main_prime.py:99, main_entropy.py:123, main_flowrl.py:122, main_sppo.py:101), the reward model in
it. No declaration needed."""
TRAINER_CPUS = 3
ROLLOUT_CPUS = 2


def known_pools(config: dict[str, Any], module: str, trainer: Trainer, resource: str) -> list[Pool] | None:
    """The trainer's and the rollout's pools of an async trainer argus knows; None for any other module."""
    if module not in KNOWN:
        return None
    pool = Pool(name="trainer_pool", nnodes=trainer.nnodes, gpus_per_node=trainer.n_gpus_per_node,
                cpus_per_gpu=TRAINER_CPUS, gpu_resource=resource)
    rollout = rollout_replicas(config, "rollout", resource)
    return [pool] + ([rollout] if rollout else [])


def places_teacher(module: str) -> bool:
    return module not in KNOWN or KNOWN[module].teacher


def rollout_replicas(config: dict[str, Any], sizes: str, resource: str) -> Pool | None:
    """Whole replicas of tp x dp x pp GPUs from `sizes`.nnodes x `sizes`.n_gpus_per_node, each split into
    nodes of at most n_gpus_per_node (LLMServerManager: num_replicas = world_size // rollout_world_size;
    RolloutReplica: gpus_per_replica_node = min(gpus_per_node, world_size))."""
    per_node, nnodes = get(config, f"{sizes}.n_gpus_per_node"), get(config, f"{sizes}.nnodes")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_NODES for v in (per_node, nnodes)):
        return None
    replica = 1
    for part in ("tensor_model", "data", "pipeline_model"):
        value = get(config, f"actor_rollout_ref.rollout.{part}_parallel_size", 1)
        replica *= value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1
    replicas = (per_node * nnodes) // replica
    node_gpus = min(per_node, replica)
    if not replicas:
        return None
    return Pool(name="rollout_pool", nnodes=replicas * (replica // node_gpus), gpus_per_node=node_gpus,
                cpus_per_gpu=ROLLOUT_CPUS, gpu_resource=resource)


def declared_pools(demand: RecipeDemand | None, resource: str) -> list[Pool]:
    return [Pool(name=p.name, nnodes=p.nnodes, gpus_per_node=p.gpus_per_node, cpus_per_gpu=p.cpus_per_gpu,
                 gpu_resource=resource) for p in (demand.pools if demand else [])]


def outside_cpus(job: Job, module: str, code: Path | None, fallback: float) -> float:
    """CPUs of actors outside placement groups: declared, read by argus, or `fallback` (main_ppo's own)."""
    if job.entry is not None and job.entry.demand is not None:
        return job.entry.demand.cpus
    if module in KNOWN:
        return KNOWN[module].cpus
    if module.startswith("verl.") or code is None:
        return fallback
    found = remote_cpus(code / (module.replace(".", "/") + ".py"))
    return fallback if found is None else found


def remote_cpus(module_file: Path) -> float | None:
    """The sum of every literal `ray.remote(num_cpus=N)` in a recipe's entry module (its TaskRunner,
    decorated or wrapped); None when it has none or cannot be read (main_ppo's TaskRunner is then run)."""
    try:
        if module_file.is_symlink() or module_file.stat().st_size > MAX_MODULE_BYTES:
            return None
        tree = ast.parse(module_file.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    found = [_num_cpus(node) for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_ray_remote(node.func)]
    numbers = [n for n in found if n is not None]
    return float(sum(numbers)) if numbers else None


def _is_ray_remote(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "remote" and isinstance(func.value, ast.Name) \
        and func.value.id == "ray"


def _num_cpus(call: ast.Call) -> float | None:
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg == "num_cpus" and isinstance(value, ast.Constant) and type(value.value) in (int, float):
            return float(value.value) if 0 <= value.value <= MAX_MODULE_BYTES else None
    return None
