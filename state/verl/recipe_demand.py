"""A recipe's declared demand (`entry.demand`) checked against its composed config, and the recipes whose
demand argus would under-count without one. Pure.

argus counts what it read in verl's placement code (state/verl/pools.py, recipe_pools.py). A recipe it has
not read may place more (a rollout pool, actors of its own): without a declaration the plan says that only
the trainer's pool is counted, and how to declare the rest.
"""

from __future__ import annotations

from typing import Any

from specs.diagnostics import Severity
from specs.kinds.models import DeclaredPool, Job
from specs.workloads import verl
from state.verl.recipe_pools import FULLY_ASYNC, KNOWN, STANDARD
from state.verl.rules import get
from state.verl.version import at_least

Found = tuple[str, str, Severity]
"""(field of the spec, message, severity)."""
MISSING = object()
VERL_SFT = frozenset({"verl.trainer.sft_trainer_ray", "verl.trainer.sft_trainer", "verl.trainer.fsdp_sft_trainer"})
"""verl's SFT trainers: one pool (or torchrun in the driver), counted from `trainer:`. Any other verl module
(a newer `verl.experimental.*` trainer) is as unknown as a recipe: it may place pools argus never read."""
DOCS = "docs/verl.md, \"Declaring a recipe's demand\""


def demand_problems(config: dict[str, Any], job: Job, module: str, version: str | None) -> list[Found]:
    demand = job.entry.demand if job.entry is not None else None
    if module in KNOWN:
        return _known(config, job, module, demand is not None, _only_hybrid(config, module, version))
    if demand is None:
        return [] if module in STANDARD or module in VERL_SFT else [_undeclared(job, module)]
    if job.workload == "sft":
        return [("entry.demand", "entry.demand declares the pools of a PPO-style recipe beside global_pool; an SFT "
                                 "trainer has one pool, counted from `trainer:`: remove entry.demand", "error")]
    return [found for index, pool in enumerate(demand.pools) for found in _disagreements(config, index, pool)]


def _known(config: dict[str, Any], job: Job, module: str, declared: bool, only_hybrid: bool) -> list[Found]:
    found: list[Found] = []
    if declared:
        found.append(("entry.demand", f"argus counts {module}'s pools and actors itself (read from verl's "
                                      f"placement code, {DOCS}): remove entry.demand, or it would be counted twice",
                      "error"))
    sizes = [get(config, key) for key in ("rollout.nnodes", "rollout.n_gpus_per_node")]
    if only_hybrid and sizes[0] == 0:
        return found
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 10_000 for v in sizes):
        index = verl.last_override(job, ("rollout.nnodes", "rollout.n_gpus_per_node"))
        field = f"overrides.{index}" if index is not None else "entry"
        found.append((field, f"{module} runs the rollout on GPUs of its own (rollout.nnodes={sizes[0]!r} x "
                             f"rollout.n_gpus_per_node={sizes[1]!r}): set both to whole numbers above 0 (at most "
                             "10000) so argus can count them", "error"))
    return found


def _only_hybrid(config: dict[str, Any], module: str, version: str | None) -> bool:
    """0.9's fully-async may roll out on the trainer's GPUs only: rollout.nnodes=0 with dynamic resource
    scheduling (fully_async_trainer.py:189 and :205, 0.9.1) places no rollout pool."""
    return module == FULLY_ASYNC and at_least(version, (0, 9)) and \
        get(config, "async_training.use_dynamic_resource_scheduling") is True


def _undeclared(job: Job, module: str) -> Found:
    return ("entry", f"argus has not read {module}'s placement code: it counts only the trainer's pool "
                     f"(global_pool: trainer.nnodes x trainer.n_gpus_per_node) and the reward/teacher pools the "
                     "config switches on; if the recipe places more (a rollout pool on GPUs of its own, actors "
                     "outside placement groups), declare it under entry: `demand: {pools: [{name: rollout_pool, "
                     "nnodes: N, gpus_per_node: G, cpus_per_gpu: 2, nnodes_key: rollout.nnodes, "
                     f"gpus_per_node_key: rollout.n_gpus_per_node}}], cpus: C}}` ({DOCS})", "warning")


def _disagreements(config: dict[str, Any], index: int, pool: DeclaredPool) -> list[Found]:
    found: list[Found] = []
    for field, declared, key in (("nnodes", pool.nnodes, pool.nnodes_key),
                                 ("gpus_per_node", pool.gpus_per_node, pool.gpus_per_node_key)):
        if key is None:
            continue
        value = get(config, key, MISSING)
        where = f"entry.demand.pools.{index}"
        if value is MISSING:
            found.append((f"{where}.{field}_key", f"{key} is not a key of the composed config: name the key that "
                                                  f"sets {pool.name}'s {field}, or leave {field}_key out", "error"))
        elif value != declared:
            found.append((f"{where}.{field}", f"{pool.name} is declared with {field}: {declared}, but the composed "
                                              f"config has {key}={value!r}: the recipe would ask Ray for what its "
                                              f"config says; make them agree", "error"))
    return found
