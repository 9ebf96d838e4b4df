"""The async trainers' pools and a recipe's declared demand as pure functions of the composed config (the
composition against verl's wheels is test_verl_scripts.py's and test_recipe_demand.py's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.kinds.models import Entry, Job, Trainer
from state.verl import pools as verl_pools
from state.verl.recipe_demand import demand_problems
from state.verl.recipe_pools import FULLY_ASYNC, ONE_STEP_OFF, remote_cpus
from tests.support.verl_inputs import with_keys


def nested(**keys: Any) -> dict[str, Any]:
    return with_keys({}, **keys)


def job(module: str) -> Job:
    return Job(kind="Job", name="j", cluster="c", workload="grpo", code="v", model="/m", data={"train": "/d"},
               trainer=Trainer(nnodes=2, n_gpus_per_node=8), entry=Entry(module=module))


def test_the_rollout_replicas_of_a_one_step_off_trainer_split_a_tensor_parallel_group_over_no_node():
    cfg = nested(**{"rollout.nnodes": 2, "rollout.n_gpus_per_node": 4,
                    "actor_rollout_ref.rollout.tensor_model_parallel_size": 4})
    found = [(p.name, p.nnodes, p.gpus_per_node, p.cpus_per_gpu)
             for p in verl_pools.pools_of(cfg, job(ONE_STEP_OFF), "0.9.1", ONE_STEP_OFF)]
    assert found == [("trainer_pool", 2, 8, 3), ("rollout_pool", 2, 4, 2)]


def test_fully_async_places_the_teacher_and_one_step_off_does_not():
    cfg = nested(**{"rollout.nnodes": 1, "rollout.n_gpus_per_node": 2, "distillation.enabled": True,
                    "distillation.nnodes": 1, "distillation.n_gpus_per_node": 4})
    names = {module: [p.name for p in verl_pools.pools_of(cfg, job(module), "0.9.1", module)]
             for module in (FULLY_ASYNC, ONE_STEP_OFF)}
    assert names == {FULLY_ASYNC: ["trainer_pool", "rollout_pool", "teacher_pool"],
                     ONE_STEP_OFF: ["trainer_pool", "rollout_pool"]}


def test_a_rollout_of_no_gpus_is_an_error_unless_0_9s_fully_async_rolls_out_on_the_trainers_gpus():
    off = nested(**{"rollout.nnodes": 0, "rollout.n_gpus_per_node": 8})
    assert [f for f, _, s in demand_problems(off, job(ONE_STEP_OFF), ONE_STEP_OFF, "0.9.1") if s == "error"] == \
        ["entry"]
    hybrid = nested(**{"rollout.nnodes": 0, "rollout.n_gpus_per_node": 8,
                       "async_training.use_dynamic_resource_scheduling": True})
    assert demand_problems(hybrid, job(FULLY_ASYNC), FULLY_ASYNC, "0.9.1") == []
    assert demand_problems(hybrid, job(FULLY_ASYNC), FULLY_ASYNC, "0.8.0") != []
    assert [p.name for p in verl_pools.pools_of(hybrid, job(FULLY_ASYNC), "0.9.1", FULLY_ASYNC)] == ["trainer_pool"]


def test_a_recipes_task_runner_cpus_are_read_from_its_literal_ray_remote(tmp_path: Path):
    main = tmp_path / "main_x.py"
    main.write_text("import ray\n\n@ray.remote(num_cpus=4)\nclass Runner: ...\n\n"
                    "Other = ray.remote(num_cpus=1)(object)\nLoose = ray.remote(object)\n")
    assert remote_cpus(main) == 5.0
    main.write_text("import ray\nn = 3\nRunner = ray.remote(num_cpus=n)(object)\n")
    assert remote_cpus(main) is None  # not a literal: main_ppo's rule stands
    main.write_text("def broken(:\n")
    assert remote_cpus(main) is None


@pytest.mark.parametrize(("module", "warned"), [
    ("verl.trainer.main_ppo", False), ("verl.trainer.sft_trainer_ray", False), ("recipe.dapo.main_dapo", False),
    ("verl.experimental.newer_async.main", True), ("verl.trainer.main_generation_server", True),
    ("recipe.unknown.main", True),
])
def test_any_module_argus_has_not_read_is_warned_about_verls_own_included(module: str, warned: bool):
    found = demand_problems({}, job(module), module, "0.9.1")
    assert [(f, s) for f, _, s in found] == ([("entry", "warning")] if warned else [])
