"""verl's numeric limits, predicted from the composed config: sizes and lengths verl (or the engine it
drives: Megatron-Core, vLLM) refuses only after the job's GPUs are held. Pure functions of plain data.

Each limit names where it comes from; docs/verl.md cites the file and line for verl 0.8.0 and 0.9.1.
A finding is (keys it is about, message, severity): "warning" where verl goes on but not as asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from state.verl.rules import A, get

Finding = tuple[tuple[str, ...], str, str]

VLLM_MAX_LORA_RANK = 512
"""vLLM's MaxLoRARanks (vllm/config/lora.py, 1..512); verl's get_vllm_max_lora_rank raises above it."""
MEGATRON = "Megatron-Core's initialize_model_parallel (megatron/core/parallel_state.py), called by verl's " \
           "MegatronEngine (verl/workers/engine/megatron/transformer_impl.py)"
SEQLEN = "verl's rearrange_micro_batches (verl/utils/seqlen_balancing.py) asserts max_token_len >= the sequence length"


def limit_findings(config: dict[str, Any], n_gpus: int, workload: str) -> list[Finding]:
    """Every limit of verl's PPO trainer the config breaks (SFT jobs have none of these keys)."""
    if workload == "sft":
        return []
    found: list[Finding] = []
    for rule in RULES:
        try:
            found += rule(config, n_gpus)
        except (TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError) as err:
            found.append(((), f"the composed config has a value verl would not take ({type(err).__name__} in "
                              f"argus's {rule.__name__.strip('_').replace('_', ' ')} check)", "error"))
    return found


def _megatron_experts(config: dict[str, Any], n_gpus: int) -> Iterator[Finding]:
    """Megatron's world must split into tp x pp x cp and, for the experts, into etp x ep x pp (etp is tp unless
    set). The actor's tp x pp x cp is rules.py's; the critic is its own worker group with its own sizes."""
    for prefix in _megatron_roles(config):
        tp, pp, cp = (_size(config, f"{prefix}.{part}_parallel_size") for part in
                      ("tensor_model", "pipeline_model", "context"))
        ep = _size(config, f"{prefix}.expert_model_parallel_size")
        etp = _size(config, f"{prefix}.expert_tensor_parallel_size", tp)
        keys = tuple(f"{prefix}.{part}_parallel_size" for part in
                     ("expert_model", "expert_tensor", "tensor_model", "pipeline_model"))
        if prefix.startswith("critic") and n_gpus % (tp * pp * cp):
            yield keys, (f"{prefix}: the job's {n_gpus} GPUs are not divisible by tp x pp x cp ({tp} x {pp} x {cp}): "
                         f"{MEGATRON} raises 'world_size is not divisible'"), "error"
        if n_gpus % (etp * ep * pp):
            yield keys, (f"{prefix}: the job's {n_gpus} GPUs are not divisible by expert tensor x expert model x "
                         f"pipeline parallel size ({etp} x {ep} x {pp} = {etp * ep * pp}; expert_tensor_parallel_size "
                         f"is tensor_model_parallel_size unless set): {MEGATRON} raises 'world_size is not divisible "
                         "by expert_tensor_model_pipeline_parallel size'"), "error"


def _virtual_pipeline(config: dict[str, Any], _: int) -> Iterator[Finding]:
    for prefix in _megatron_roles(config):
        vpp = get(config, f"{prefix}.virtual_pipeline_model_parallel_size")
        pp = _size(config, f"{prefix}.pipeline_model_parallel_size")
        if vpp is not None and pp <= 1:
            yield ((f"{prefix}.virtual_pipeline_model_parallel_size", f"{prefix}.pipeline_model_parallel_size"),
                   f"{prefix}.virtual_pipeline_model_parallel_size={vpp!r} with pipeline_model_parallel_size={pp}: "
                   f"{MEGATRON} raises 'pipeline-model-parallel size should be greater than 1 with interleaved "
                   "schedule'; set pipeline_model_parallel_size > 1 or virtual_pipeline_model_parallel_size=null",
                   "error")


def _gpu_memory(config: dict[str, Any], _: int) -> Iterator[Finding]:
    key = f"{A}.rollout.gpu_memory_utilization"
    value = get(config, key)
    if get(config, f"{A}.rollout.name") != "vllm" or value is None:
        return
    if not _number(value) or not 0 < value <= 1:
        yield (key,), (f"{key}={value!r}: vLLM takes a fraction of each GPU's memory in (0, 1] (vllm/config/cache.py "
                       "CacheConfig, 'GPU memory utilization must be less than 1.0'); verl passes it unchanged "
                       "(verl/workers/rollout/vllm_rollout/vllm_async_server.py)"), "error"


def _max_model_len(config: dict[str, Any], _: int) -> Iterator[Finding]:
    key = f"{A}.rollout.max_model_len"
    limit, prompt, response = get(config, key), _length(config, "data.max_prompt_length"), \
        _length(config, "data.max_response_length")
    if not _whole(limit) or not prompt:
        return
    keys = (key, "data.max_prompt_length", "data.max_response_length")
    if limit <= prompt:
        yield keys, (f"{key}={limit} leaves no room to generate after a prompt of data.max_prompt_length={prompt} "
                     "tokens: verl's vLLM server raises 'Prompt length ... leaves no room to generate' on such a "
                     "prompt (verl/workers/rollout/vllm_rollout/vllm_async_server.py)"), "error"
    elif response and limit < prompt + response:
        yield keys, (f"{key}={limit} is below max_prompt_length + max_response_length ({prompt} + {response}): verl "
                     "caps each response at what is left of max_model_len, so long prompts get short responses "
                     "(verl/workers/rollout/vllm_rollout/vllm_async_server.py)"), "warning"


def _token_limits(config: dict[str, Any], _: int) -> Iterator[Finding]:
    """With dynamic batch sizes, one sequence of the longest verl admits must fit a micro batch."""
    longest = _length(config, "data.max_prompt_length") + _length(config, "data.max_response_length")
    for switch, key, sp in _token_keys(config):
        limit = get(config, key)
        if longest and get(config, switch) and _whole(limit) and limit * sp < longest:
            per = f" x sequence parallel {sp}" if sp > 1 else ""
            yield ((key, "data.max_prompt_length", "data.max_response_length"),
                   f"{key}={limit}{per} is below one sequence of max_prompt_length + max_response_length ({longest} "
                   f"tokens) with {switch}: {SEQLEN}", "error")


def _rollout_n(config: dict[str, Any], _: int) -> Iterator[Finding]:
    key = f"{A}.rollout.n"
    value = get(config, key)
    if value is not None and not (_whole(value) and value >= 1):
        yield (key,), (f"{key}={value!r}: verl's RolloutConfig.n is a whole number of at least 1 "
                       "(verl/workers/config/rollout.py; OmegaConf refuses to build it from another value, and "
                       "validate_config multiplies the batch by it)"), "error"


def _lora_rank(config: dict[str, Any], _: int) -> Iterator[Finding]:
    if get(config, f"{A}.rollout.name") != "vllm":
        return
    for key in (f"{A}.model.lora.rank", f"{A}.model.lora_rank"):
        rank = get(config, key)
        if _whole(rank) and rank > VLLM_MAX_LORA_RANK:
            yield (key,), (f"{key}={rank}: verl passes the LoRA rank to vLLM as max_lora_rank, and vLLM takes at most "
                           f"{VLLM_MAX_LORA_RANK} (vllm/config/lora.py MaxLoRARanks); verl's get_vllm_max_lora_rank "
                           "(verl/workers/rollout/vllm_rollout/utils.py) raises 'lora_rank must be less than or "
                           f"equal to {VLLM_MAX_LORA_RANK}'"), "error"


RULES: tuple[Callable[[dict[str, Any], int], Iterator[Finding]], ...] = (
    _megatron_experts, _virtual_pipeline, _gpu_memory, _max_model_len, _token_limits, _rollout_n, _lora_rank)


def _megatron_roles(config: dict[str, Any]) -> list[str]:
    """The Megatron configs that initialise their own model parallelism: the actor's process (its ref shares
    the actor's Megatron state) and the critic's, when a critic runs on Megatron."""
    roles = [f"{A}.actor.megatron"] if get(config, f"{A}.actor.strategy") == "megatron" else []
    return roles + (["critic.megatron"] if _critic_runs(config) and get(config, "critic.strategy") == "megatron"
                    else [])


def _token_keys(config: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    """(the switch that turns dynamic batches on, the token limit, the sequence-parallel size it is multiplied
    by: verl/workers/engine/utils.py multiplies max_token_len_per_gpu by the engine's sp_size)."""
    megatron = get(config, f"{A}.actor.strategy") == "megatron"
    sp = _size(config, f"{A}.actor.megatron.context_parallel_size") if megatron else \
        _size(config, f"{A}.actor.ulysses_sequence_parallel_size")
    yield f"{A}.actor.use_dynamic_bsz", f"{A}.actor.ppo_max_token_len_per_gpu", sp
    yield f"{A}.rollout.log_prob_use_dynamic_bsz", f"{A}.rollout.log_prob_max_token_len_per_gpu", sp
    yield f"{A}.ref.log_prob_use_dynamic_bsz", f"{A}.ref.log_prob_max_token_len_per_gpu", sp
    if _critic_runs(config):
        critic_sp = _size(config, "critic.megatron.context_parallel_size") if get(config, "critic.strategy") == \
            "megatron" else _size(config, "critic.ulysses_sequence_parallel_size")
        yield "critic.use_dynamic_bsz", "critic.ppo_max_token_len_per_gpu", critic_sp
        yield "critic.use_dynamic_bsz", "critic.forward_max_token_len_per_gpu", critic_sp


def _critic_runs(config: dict[str, Any]) -> bool:
    enable = get(config, "critic.enable")
    return bool(enable) if enable is not None else get(config, "algorithm.adv_estimator") == "gae"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _size(config: dict[str, Any], key: str, default: int = 1) -> int:
    """A parallel size as verl would use it; a missing, null, zero or odd one counts as the default (rules.py's
    _parallel_sizes says what is wrong with it)."""
    value = get(config, key)
    return value if _whole(value) and value >= 1 else default


def _length(config: dict[str, Any], key: str) -> int:
    value = get(config, key)
    return value if _whole(value) and value > 0 else 0
