"""verl's start-up checks and resource pools, as pure functions of a composed config (plain data).

The configs here are small dicts with only the keys a rule reads; tests/state/verl/test_verl_scripts.py runs the
same rules on configs composed from verl's real wheels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.kinds.models import Entry, Job, Trainer
from state.verl import pools as verl_pools
from state.verl import rules as verl_rules
from state.verl.legacy_keys import legacy_problems

A = "actor_rollout_ref"


def config(**keys: Any) -> dict[str, Any]:
    """A nested config from dotted keys, over a PPO job that passes every rule."""
    base = {f"{A}.rollout.name": "vllm", f"{A}.rollout.tensor_model_parallel_size": 2, f"{A}.rollout.n": 1,
            f"{A}.actor.strategy": "fsdp", f"{A}.actor.ppo_mini_batch_size": 16,
            f"{A}.actor.ppo_micro_batch_size_per_gpu": 2, f"{A}.rollout.log_prob_micro_batch_size_per_gpu": 2,
            "data.train_batch_size": 32, "algorithm.adv_estimator": "grpo", "trainer.logger": ["console"],
            "trainer.device": "cuda"}
    tree: dict[str, Any] = {}
    for key, value in {**base, **keys}.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def messages(cfg: dict[str, Any], n_gpus: int = 8, v09: bool = True) -> list[str]:
    return [message for _, message in verl_rules.ppo_problems(cfg, n_gpus, v09)]


def test_a_config_that_passes_every_rule_has_no_problem():
    assert messages(config()) == []


@pytest.mark.parametrize(("keys", "n_gpus", "words"), [
    ({f"{A}.rollout.name": "???"}, 8, "verl needs a rollout engine"),
    ({f"{A}.rollout.name": "hf"}, 8, "'hf' is no rollout engine"),
    ({f"{A}.rollout.mode": "sync"}, 8, "removed rollout mode 'sync'"),
    ({f"{A}.rollout.tensor_model_parallel_size": 3}, 8, "(3 x 1 x 1 = 3) does not divide the job's 8 GPUs"),
    ({f"{A}.rollout.tensor_model_parallel_size": 16, f"{A}.rollout.n_gpus_per_node": 3}, 16,
     "cannot be split into nodes of 3 GPUs"),
    ({f"{A}.actor.strategy": "deepspeed"}, 8, "'deepspeed' is no engine"),
    ({"algorithm.adv_estimator": "grpoo"}, 8, "'grpoo' is not one of verl's estimators"),
    ({"trainer.logger": ["console", "wandbb"]}, 8, "trainer.logger 'wandbb'"),
    ({"trainer.logger": "tensorbord"}, 8, "trainer.logger 'tensorbord'"),
    ({"reward.reward_manager": {"source": "register", "name": "mine"}}, 8, "'mine' is not registered"),
    ({"data.train_batch_size": 8}, 8, "is smaller than"),
    ({"data.train_batch_size": 20, f"{A}.actor.ppo_mini_batch_size": 4}, 8, "(20 x 1) is not divisible by 8"),
    ({f"{A}.actor.ppo_mini_batch_size": 12}, 8, "(12 x 1) is not divisible by the actor's data-parallel size 8"),
    ({f"{A}.actor.ppo_micro_batch_size_per_gpu": 3}, 8, "(16 x 1 / 8 = 2) is not divisible by "
                                                         "ppo_micro_batch_size_per_gpu (3)"),
    ({f"{A}.actor.ppo_micro_batch_size_per_gpu": None}, 8, f"set {A}.actor.ppo_micro_batch_size_per_gpu"),
    ({f"{A}.rollout.log_prob_micro_batch_size_per_gpu": None}, 8, "log_prob_micro_batch_size_per_gpu"),
    ({"algorithm.adv_estimator": "gae"}, 8, "set critic.ppo_micro_batch_size_per_gpu"),
    ({f"{A}.actor.use_dynamic_bsz": True}, 8, "must agree"),
    ({f"{A}.actor.strategy": "megatron", f"{A}.actor.megatron.tensor_model_parallel_size": 3}, 8,
     "not divisible by Megatron's tp x pp x cp (3)"),
    ({f"{A}.actor.ulysses_sequence_parallel_size": 2}, 8, "needs actor_rollout_ref.model.use_remove_padding=True"),
    ({"trainer.v1.trainer_mode": "fully_async"}, 8, "trainer.v1.trainer_mode='fully_async'"),
])
def test_each_rule_finds_its_mistake(keys: dict[str, Any], n_gpus: int, words: str):
    found = messages(config(**keys), n_gpus)
    assert any(words in m for m in found), found


def test_rules_name_the_keys_they_are_about_so_the_plan_can_point_at_the_override():
    [(keys, _)] = verl_rules.ppo_problems(config(**{f"{A}.rollout.tensor_model_parallel_size": 3}), 8, True)
    assert f"{A}.rollout.tensor_model_parallel_size" in keys and "trainer.n_gpus_per_node" in keys


def test_dynamic_batch_sizes_lift_the_micro_batch_rules_but_not_the_split_over_data_parallel():
    dynamic = {f"{A}.actor.use_dynamic_bsz": True, f"{A}.rollout.log_prob_use_dynamic_bsz": True,
               f"{A}.actor.ppo_micro_batch_size_per_gpu": None, f"{A}.rollout.log_prob_micro_batch_size_per_gpu": None}
    assert messages(config(**dynamic)) == []
    uneven = config(**dynamic, **{f"{A}.actor.ppo_mini_batch_size": 12})
    assert any("data-parallel size 8" in m for m in messages(uneven))


def job(workload: str = "ppo", nnodes: int = 2, gpus: int = 8, launcher: str = "ray") -> Job:
    return Job(kind="Job", name="j", cluster="c", workload=workload, code="v", model="/m", data={"train": "/d"},
               trainer=Trainer(nnodes=nnodes, n_gpus_per_node=gpus), entry=Entry(launcher=launcher))


def pools(cfg: dict[str, Any], the_job: Job, version: str) -> list[tuple[str, int, int, float, str]]:
    return [(p.name, p.nnodes, p.gpus_per_node, p.cpus_per_gpu, p.gpu_resource)
            for p in verl_pools.pools_of(cfg, the_job, version)]


def test_the_trainers_pool_is_one_bundle_per_node_of_three_cpus_per_gpu():
    assert pools(config(), job(), "0.9.1") == [("global_pool", 2, 8, 3, "GPU")]


def test_every_side_pool_verl_enables_is_part_of_the_demand():
    cfg = config(**{"reward.reward_model.enable_resource_pool": True, "reward.reward_model.nnodes": 1,
                    "reward.reward_model.n_gpus_per_node": 4, "distillation.enabled": True,
                    "distillation.nnodes": 1, "distillation.n_gpus_per_node": 2})
    assert pools(cfg, job(), "0.9.1") == [("global_pool", 2, 8, 3, "GPU"), ("reward_pool", 1, 4, 3, "GPU"),
                                          ("teacher_pool", 1, 2, 3, "GPU")]


def test_verl_0_8_read_the_legacy_reward_model_keys_and_0_9_ignores_them():
    legacy = config(**{"reward_model.enable_resource_pool": True, "reward_model.nnodes": 1,
                       "reward_model.n_gpus_per_node": 8, "reward_model.enable": True})
    assert [p[0] for p in pools(legacy, job(), "0.8.0")] == ["global_pool", "reward_pool"]
    assert [p[0] for p in pools(legacy, job(), "0.9.1")] == ["global_pool"]
    problems = [m for _, m in legacy_problems(job(), legacy, Path("/nonexistent"), _Point.module, "ppo_trainer",
                                              "0.9.1")]
    assert any("ignores reward_model.enable_resource_pool" in m for m in problems)


def test_an_enabled_pool_with_no_gpus_is_refused_as_verl_refuses_it():
    cfg = config(**{"reward.reward_model.enable_resource_pool": True, "reward.reward_model.nnodes": 0,
                    "reward.reward_model.n_gpus_per_node": 8})
    profile = verl_pools.profile_of(cfg, job(), _Point(), "0.9.1", "0.9.x", "/r")
    assert any("is on but its pool is 0 x 8 GPUs" in m for _, m in verl_pools.pool_problems(cfg, profile, "0.9.1"))


def test_separate_rollout_replicas_are_whole_and_take_two_cpus_per_gpu():
    cfg = config(**{"trainer.use_v1": True, "trainer.v1.trainer_mode": "separate_async",
                    f"{A}.rollout.nnodes": 1, f"{A}.rollout.n_gpus_per_node": 5,
                    f"{A}.rollout.tensor_model_parallel_size": 2})
    assert pools(cfg, job(nnodes=1, gpus=4), "0.9.1") == [("global_pool", 1, 4, 3, "GPU"),
                                                          ("rollout_pool", 2, 2, 2, "GPU")]  # 5 // 2 whole replicas
    assert pools(cfg, job(nnodes=1, gpus=4), "0.8.0") == [("global_pool", 1, 4, 3, "GPU")]  # 0.8 has no such mode


def test_the_gpu_resource_follows_trainer_device_in_0_8_and_the_platform_in_0_9():
    npu = config(**{"trainer.device": "npu"})
    assert pools(npu, job(), "0.8.0")[0][4] == "NPU"
    assert pools(config(**{"trainer.device": "cpu"}), job(), "0.8.0")[0][4] == "cpu"
    assert pools(config(**{"trainer.device": "cpu"}), job(), "0.9.1")[0][4] == "GPU"
    profile = verl_pools.profile_of(config(), job(), _Point(), "0.8.0", "0.8.x", "/r")
    problems = verl_pools.pool_problems(config(**{"trainer.device": "cpu"}), profile, "0.8.0")
    assert any("resource named 'cpu'" in m for _, m in problems)


def test_sft_on_ray_takes_ten_cpus_per_gpu_and_torchrun_places_nothing_but_its_driver():
    assert pools(config(), job("sft", 1, 4), "0.9.1") == [("trainer", 1, 4, 10, "GPU")]
    assert pools(config(), job("sft", 1, 4, launcher="torchrun"), "0.9.1") == []


class _Point:
    module = "verl.trainer.main_ppo"
    config_name = "ppo_trainer"


def test_verl_0_8_moved_each_legacy_reward_key_on_its_own():
    only_switch = config(**{"reward_model.enable_resource_pool": True, "reward.reward_model.nnodes": 1,
                            "reward.reward_model.n_gpus_per_node": 4})
    assert pools(only_switch, job(), "0.8.0")[1][:3] == ("reward_pool", 1, 4)
    only_nodes = config(**{"reward.reward_model.enable_resource_pool": True, "reward.reward_model.nnodes": 1,
                           "reward.reward_model.n_gpus_per_node": 4, "reward_model.nnodes": 3})
    assert pools(only_nodes, job(), "0.8.0")[1][:3] == ("reward_pool", 3, 4)
    assert pools(only_nodes, job(), "0.9.1")[1][:3] == ("reward_pool", 1, 4)


@pytest.mark.parametrize("size", [0, -1, "abc", 1.5, True])
def test_a_parallel_size_verl_would_divide_by_is_a_whole_number(size):
    assert any("a parallel size is a whole number" in m
               for m in messages(config(**{f"{A}.rollout.tensor_model_parallel_size": size})))


def test_separate_async_without_hybrid_rollout_is_not_checked_against_the_trainers_gpus():
    cfg = config(**{"trainer.v1.trainer_mode": "separate_async", f"{A}.hybrid_engine": False,
                    f"{A}.rollout.tensor_model_parallel_size": 3, f"{A}.rollout.checkpoint_engine.backend": "nccl",
                    "trainer.v1.separate_async.parameter_sync_step": 2})
    assert messages(cfg, 4) == []
    naive = {**cfg, "trainer": {**cfg["trainer"], "v1": {"trainer_mode": "separate_async",
                                                          "separate_async": {"parameter_sync_step": 4}}}}
    naive[A]["rollout"]["checkpoint_engine"]["backend"] = "naive"
    found = messages(naive, 4)
    assert any("not naive" in m for m in found) and any("parameter_sync_step (4)" in m for m in found)


def test_a_pool_argus_cannot_count_is_refused_and_never_built():
    env = config(**{"reward.reward_model.enable_resource_pool": True,
                    "reward.reward_model.nnodes": "<read from the environment at run time: N>",
                    "reward.reward_model.n_gpus_per_node": 8})
    huge = config(**{"distillation.enabled": True, "distillation.nnodes": 10**9, "distillation.n_gpus_per_node": 8})
    switch = config(**{"distillation.enabled": "<read from the environment at run time: D>",
                       "distillation.nnodes": 1, "distillation.n_gpus_per_node": 8})
    for cfg, words in ((env, "must be numbers argus can count"), (huge, "at most 10000 nodes"),
                       (switch, "write true or false")):
        profile = verl_pools.profile_of(cfg, job(), _Point(), "0.9.1", "0.9.x", "/r")
        assert any(words in m for _, m in verl_pools.pool_problems(cfg, profile, "0.9.1")), words
        assert all(p.nnodes <= 10_000 for p in profile.pools)


def test_a_rule_meeting_a_value_of_another_shape_reports_it_instead_of_crashing():
    found = messages(config(**{"data.train_batch_size": {"a": 1}, f"{A}.actor.ppo_mini_batch_size": [1]}))
    assert isinstance(found, list)
    assert messages(config(**{"trainer.logger": 5})) == ["trainer.logger is 5: verl takes a name or a list of names"]


def test_a_module_that_migrates_the_legacy_reward_keys_reads_them_and_main_ppo_does_not(tmp_path):
    """0.9.1's experimental fully_async_main calls migrate_legacy_reward_impl (main_ppo no longer does): set
    there, reward_model.enable is honoured; a recipe package reading it itself is honoured too."""
    from state.verl.legacy_keys import module_reads

    main = tmp_path / "verl" / "experimental" / "fully_async_policy"
    main.mkdir(parents=True)
    (main / "fully_async_main.py").write_text("from x import migrate_legacy_reward_impl\n\ndef main(config):\n"
                                              "    config = migrate_legacy_reward_impl(config)\n")
    assert module_reads(tmp_path, "verl.experimental.fully_async_policy.fully_async_main") == frozenset(
        {"reward_model.enable", "reward_model.enable_resource_pool", "custom_reward_function.path"})
    ppo = tmp_path / "verl" / "trainer"
    ppo.mkdir(parents=True)
    (ppo / "main_ppo.py").write_text("def f(config):\n    return config.reward.reward_model.enable\n")
    assert module_reads(tmp_path, "verl.trainer.main_ppo") == frozenset()
    recipe = tmp_path / "recipe" / "r"
    recipe.mkdir(parents=True)
    (recipe / "main.py").write_text("'''config.reward_model.enable in a docstring reads nothing'''\n")
    (recipe / "trainer.py").write_text("class T:\n    def f(self):\n"
                                       "        return self.config.reward_model['enable']\n")
    assert module_reads(tmp_path, "recipe.r.main") == frozenset({"reward_model.enable"})
