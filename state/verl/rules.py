"""verl's own start-up checks, predicted from the composed config: the mistakes verl finds only after
the job was admitted and its GPUs are held. Pure functions of plain data.

Each rule is read from verl's code (0.8.0 and 0.9.1 wheels; docs/verl.md lists where): its config
validation (verl/utils/config.py validate_config, the worker configs' __post_init__) and the asserts
its workers make at start (engine_workers.py, rollout/replica.py, rollout/base.py, the registries).
A rule answers (keys it is about, message): the keys let the plan point at the override that set them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Problem = tuple[tuple[str, ...], str]
A = "actor_rollout_ref"

ROLLOUT_ENGINES = ("vllm", "sglang", "trtllm")
"""verl's rollout registry (workers/rollout/base.py, replica.py): hf is no longer registered."""
ACTOR_BACKENDS = ("fsdp", "fsdp2", "megatron", "veomni", "torchtitan", "automodel", "mindspeed_megatron",
                  "fsdp_turbo")
CRITIC_BACKENDS = ("fsdp", "fsdp2", "megatron", "veomni")
ESTIMATORS = ("gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "opo",
              "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized", "optimal_token_baseline",
              "tir_optimal_token_baseline", "gdpo")
"""verl/trainer/ppo/core_algos.py AdvantageEstimator: an unknown one fails at the first advantage step."""
LOGGERS = ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml", "trackio", "file",
           "rl_insight", "tracking")
REWARD_MANAGERS = ("naive", "dapo", "gdpo", "remote", "rate_limited")
TRAINER_MODES = ("sync", "colocate_async", "separate_async")
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")


def get(config: dict[str, Any], key: str, default: Any = None) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def ppo_problems(config: dict[str, Any], n_gpus: int, version_at_least_09: bool) -> list[Problem]:
    """Every rule of verl's PPO trainer (main_ppo and the recipes built on it) the config breaks."""
    rules = [_parallel_sizes, _rollout_name, _rollout_world, _backends, _estimator, _loggers, _reward_manager,
             _batches, _micro_batches, _megatron_split, _sequence_parallel]
    rules += [_trainer_mode, _separate_rollout] if version_at_least_09 else []
    return _applied(rules, config, n_gpus)


def sft_problems(config: dict[str, Any], n_gpus: int) -> list[Problem]:
    return _applied([_loggers], config, n_gpus)


def _applied(rules: list[Callable[[dict[str, Any], int], Iterator[Problem]]], config: dict[str, Any],
             n_gpus: int) -> list[Problem]:
    """Each rule's problems; a value of a shape no rule expects (a snapshot's config is anyone's) is one too."""
    found: list[Problem] = []
    for rule in rules:
        try:
            found += rule(config, n_gpus)
        except (TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError) as err:
            found.append(((), f"the composed config has a value verl would not take ({type(err).__name__} in "
                              f"argus's {rule.__name__.strip('_').replace('_', ' ')} check)"))
    return found


PARALLEL_KEYS = tuple(f"{A}.rollout.{part}_parallel_size" for part in ("tensor_model", "data", "pipeline_model"))


def _parallel_sizes(config: dict[str, Any], _: int) -> Iterator[Problem]:
    """verl divides by them: 0, a negative or a text is a crash once the GPUs are held."""
    for key in PARALLEL_KEYS:
        value = get(config, key, 1)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            yield (key,), f"{key}={value!r}: a parallel size is a whole number of at least 1"


def _separate_rollout(config: dict[str, Any], _: int) -> Iterator[Problem]:
    """verl 0.9's separate_async trainer asserts these before it builds anything (trainer_separate_async.py)."""
    if get(config, "trainer.v1.trainer_mode") != "separate_async":
        return
    if get(config, f"{A}.rollout.checkpoint_engine.backend", "naive") == "naive":
        yield ((f"{A}.rollout.checkpoint_engine.backend",),
               f"separate_async syncs weights to its own rollout GPUs: set {A}.rollout.checkpoint_engine.backend "
               "(nccl), not naive")
    step = _int(config, "trainer.v1.separate_async.parameter_sync_step", 0)
    batch, mini = _int(config, "data.train_batch_size", 0), _int(config, f"{A}.actor.ppo_mini_batch_size", 0)
    if step and batch and mini and batch != step * mini:
        yield (("data.train_batch_size", "trainer.v1.separate_async.parameter_sync_step"),
               f"separate_async needs data.train_batch_size ({batch}) = parameter_sync_step ({step}) x "
               f"ppo_mini_batch_size ({mini})")


def _rollout_name(config: dict[str, Any], _: int) -> Iterator[Problem]:
    name, mode = get(config, f"{A}.rollout.name"), get(config, f"{A}.rollout.mode", "async")
    key = f"{A}.rollout.name"
    if name in (None, "???"):
        yield (key,), f"verl needs a rollout engine: set {key}=vllm (or sglang, trtllm)"
    elif name not in ROLLOUT_ENGINES:
        yield (key,), f"{key}={name!r} is no rollout engine of verl's (it has {', '.join(ROLLOUT_ENGINES)})"
    if mode == "sync":
        yield (f"{A}.rollout.mode",), "verl removed rollout mode 'sync': use async (the default)"


def _rollout_world(config: dict[str, Any], n_gpus: int) -> Iterator[Problem]:
    if get(config, "trainer.v1.trainer_mode") == "separate_async" and get(config, f"{A}.hybrid_engine") is False:
        return  # no rollout on the trainer's GPUs: the rollout pool takes whole replicas of what it is given
    tp = _int(config, f"{A}.rollout.tensor_model_parallel_size", 1)
    dp = _int(config, f"{A}.rollout.data_parallel_size", 1)
    pp = _int(config, f"{A}.rollout.pipeline_model_parallel_size", 1)
    keys = (f"{A}.rollout.tensor_model_parallel_size", f"{A}.rollout.data_parallel_size",
            f"{A}.rollout.pipeline_model_parallel_size", "trainer.n_gpus_per_node", "trainer.nnodes")
    infer = tp * dp * pp
    if infer and n_gpus % infer:
        yield keys, (f"the rollout's tensor x data x pipeline parallel size ({tp} x {dp} x {pp} = {infer}) does "
                     f"not divide the job's {n_gpus} GPUs: verl stops with 'rollout world_size is not divisible by "
                     f"infer_world_size' once the GPUs are held")
    per_node = min(_int(config, f"{A}.rollout.n_gpus_per_node", 0) or n_gpus, infer) if infer else 0
    if per_node and infer % per_node:
        yield keys, f"a rollout replica of {infer} GPUs cannot be split into nodes of {per_node} GPUs"
    if pp > 1 and get(config, f"{A}.rollout.name") in ROLLOUT_ENGINES:
        yield keys, "verl's rollout engines do not support pipeline parallelism (pipeline_model_parallel_size > 1)"


def _backends(config: dict[str, Any], _: int) -> Iterator[Problem]:
    actor = get(config, f"{A}.actor.strategy")
    if actor is not None and actor not in ACTOR_BACKENDS:
        yield (f"{A}.actor.strategy",), f"{A}.actor.strategy={actor!r} is no engine of verl's " \
                                        f"({', '.join(ACTOR_BACKENDS)})"
    critic = get(config, "critic.strategy")
    if _uses_critic(config) and critic is not None and critic not in CRITIC_BACKENDS:
        yield ("critic.strategy",), f"critic.strategy={critic!r} is no value-model engine of verl's " \
                                    f"({', '.join(CRITIC_BACKENDS)})"


def _estimator(config: dict[str, Any], _: int) -> Iterator[Problem]:
    value = get(config, "algorithm.adv_estimator")
    if value is not None and value not in ESTIMATORS:
        yield ("algorithm.adv_estimator",), (f"algorithm.adv_estimator={value!r} is not one of verl's estimators "
                                             f"({', '.join(ESTIMATORS)}): it would fail after the first rollout")


def _loggers(config: dict[str, Any], _: int) -> Iterator[Problem]:
    value = get(config, "trainer.logger")
    if value is not None and not isinstance(value, (str, list)):
        yield ("trainer.logger",), f"trainer.logger is {value!r}: verl takes a name or a list of names"
        return
    for name in [value] if isinstance(value, str) else value or []:
        if name not in LOGGERS:
            yield ("trainer.logger",), f"trainer.logger {name!r} is not one verl has ({', '.join(LOGGERS[:-1])})"


def _reward_manager(config: dict[str, Any], _: int) -> Iterator[Problem]:
    manager = get(config, "reward.reward_manager")
    if isinstance(manager, dict) and manager.get("source", "register") == "register":
        name = manager.get("name")
        if name is not None and name not in REWARD_MANAGERS:
            yield ("reward.reward_manager.name",), (f"reward.reward_manager.name={name!r} is not registered in verl "
                                                    f"({', '.join(REWARD_MANAGERS)})")


def _trainer_mode(config: dict[str, Any], _: int) -> Iterator[Problem]:
    mode = get(config, "trainer.v1.trainer_mode")
    if mode is not None and mode not in TRAINER_MODES:
        yield ("trainer.v1.trainer_mode",), f"trainer.v1.trainer_mode={mode!r} is none of {', '.join(TRAINER_MODES)}"


def _batches(config: dict[str, Any], n_gpus: int) -> Iterator[Problem]:
    """validate_config's real batch, the actor config's mini batch, and the workers' split over dp."""
    batch, n = _int(config, "data.train_batch_size", 0), _int(config, f"{A}.rollout.n", 1)
    mini = _int(config, f"{A}.actor.ppo_mini_batch_size", 0)
    dynamic = bool(get(config, f"{A}.actor.use_dynamic_bsz"))
    keys = ("data.train_batch_size", f"{A}.actor.ppo_mini_batch_size", f"{A}.rollout.n")
    if not dynamic and batch and mini and batch < mini:
        yield keys, f"data.train_batch_size ({batch}) is smaller than {A}.actor.ppo_mini_batch_size ({mini})"
    dp = _actor_dp(config, n_gpus)
    # validate_config's smallest batch: every GPU (FSDP), or every data-parallel rank's micro batch (Megatron)
    minimal = dp * _int(config, f"{A}.actor.ppo_micro_batch_size_per_gpu", 1) if _megatron(config) else n_gpus
    if not dynamic and batch and minimal and (batch * n) % minimal:
        yield keys, (f"train_batch_size x rollout.n ({batch} x {n}) is not divisible by {minimal}, the smallest "
                     "batch the job's GPUs can take (verl's validate_config)")
    if mini and dp and (mini * n) % dp:
        yield keys, (f"ppo_mini_batch_size x rollout.n ({mini} x {n}) is not divisible by the actor's data-parallel "
                     f"size {dp}: verl's workers stop with 'Got mini_batch_size' once the GPUs are held")


def _micro_batches(config: dict[str, Any], n_gpus: int) -> Iterator[Problem]:
    if get(config, f"{A}.actor.use_dynamic_bsz"):
        if not get(config, f"{A}.rollout.log_prob_use_dynamic_bsz"):
            yield ((f"{A}.rollout.log_prob_use_dynamic_bsz",),
                   f"{A}.actor.use_dynamic_bsz and {A}.rollout.log_prob_use_dynamic_bsz must agree (verl asserts it)")
        return
    for role in ("actor", "rollout"):
        name = "ppo_micro_batch_size" if role == "actor" else "log_prob_micro_batch_size"
        per_gpu = f"{A}.{role}.{name}_per_gpu"
        if get(config, per_gpu) is None:
            yield (per_gpu,), (f"set {per_gpu} (or turn on {A}.actor.use_dynamic_bsz): verl's workers assert it "
                               "once the GPUs are held")
    critic_micro = [get(config, f"critic.ppo_micro_batch_size{tail}") for tail in ("", "_per_gpu")]
    if _uses_critic(config) and not get(config, "critic.use_dynamic_bsz") and critic_micro == [None, None]:
        yield (("critic.ppo_micro_batch_size_per_gpu",),
               "set critic.ppo_micro_batch_size_per_gpu (or critic.use_dynamic_bsz): verl's critic refuses neither")
    micro = _int(config, f"{A}.actor.ppo_micro_batch_size_per_gpu", 0)
    mini = _int(config, f"{A}.actor.ppo_mini_batch_size", 0)
    dp, n = _actor_dp(config, n_gpus), _int(config, f"{A}.rollout.n", 1)
    if micro and mini and dp and (mini * n) % dp == 0 and ((mini * n) // dp) % micro:
        yield ((f"{A}.actor.ppo_micro_batch_size_per_gpu", f"{A}.actor.ppo_mini_batch_size"),
               f"each GPU's share of a mini batch ({mini} x {n} / {dp} = {(mini * n) // dp}) is not divisible by "
               f"ppo_micro_batch_size_per_gpu ({micro})")


def _megatron_split(config: dict[str, Any], n_gpus: int) -> Iterator[Problem]:
    if not _megatron(config):
        return
    size = _model_parallel(config)
    if size and n_gpus % size:
        keys = tuple(f"{A}.actor.megatron.{k}_parallel_size" for k in ("tensor_model", "pipeline_model", "context"))
        yield keys, f"the job's {n_gpus} GPUs are not divisible by Megatron's tp x pp x cp ({size})"


def _sequence_parallel(config: dict[str, Any], _: int) -> Iterator[Problem]:
    sp = _int(config, f"{A}.actor.ulysses_sequence_parallel_size", 1)
    if sp > 1 and not _megatron(config) and not get(config, f"{A}.model.use_remove_padding"):
        yield ((f"{A}.model.use_remove_padding",),
               f"sequence parallelism (ulysses_sequence_parallel_size > 1) needs {A}.model.use_remove_padding=True")


def _uses_critic(config: dict[str, Any]) -> bool:
    enable = get(config, "critic.enable")
    return bool(enable) if enable is not None else get(config, "algorithm.adv_estimator") == "gae"


def _megatron(config: dict[str, Any]) -> bool:
    return get(config, f"{A}.actor.strategy") == "megatron"


def _model_parallel(config: dict[str, Any]) -> int:
    parts = ("tensor_model", "pipeline_model", "context")
    size = 1
    for part in parts:
        size *= _int(config, f"{A}.actor.megatron.{part}_parallel_size", 1)
    return size


def _actor_dp(config: dict[str, Any], n_gpus: int) -> int:
    if _megatron(config):
        return n_gpus // max(_model_parallel(config), 1)
    return n_gpus // max(_int(config, f"{A}.actor.ulysses_sequence_parallel_size", 1), 1)


def _int(config: dict[str, Any], key: str, default: int) -> int:
    value = get(config, key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default

