"""The limits verl (or Megatron-Core, or vLLM beneath it) enforces only once a job holds its GPUs, planted one
at a time in verl's own example scripts (tests/state/verl/verl_scripts/) and composed against verl's real
wheels 0.8.0 and 0.9.1: each is found before submit, at the spec line that made it, with verl's limit and
where it comes from (docs/verl.md cites the lines)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from state.code.sources import resolve_source
from state.observed import SnapshotState
from state.verl.checks import check_job
from state.verl.rules_limits import limit_findings
from tests.support.verl_scripts import VERSIONS, verl_workspace

SCRIPTS = Path(__file__).resolve().parent / "verl_scripts"
MEGATRON = "megatron-grpo-multinode"
GRAD_OFFLOAD = '  - "actor_rollout_ref.actor.megatron.grad_offload=True"\n'
"""A key verl 0.9 dropped (test_verl_scripts.py): left out so the script composes on both versions."""
ACTOR_PP = '"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8"'

# (script, overrides appended (the last is the mistake), (replaced, by) in the script, message, severity)
PLANTED = [
    ("expert parallel", MEGATRON, ["actor_rollout_ref.actor.megatron.expert_model_parallel_size=3"], None,
     "the job's 32 GPUs are not divisible by expert tensor x expert model x pipeline parallel size (1 x 3 x 8 = 24",
     "error"),
    ("expert tensor parallel", MEGATRON, ["actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=3"], None,
     "(3 x 4 x 8 = 96; expert_tensor_parallel_size is tensor_model_parallel_size unless set)", "error"),
    ("virtual pipeline", MEGATRON, ["actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2"],
     (ACTOR_PP, ACTOR_PP.replace("=8", "=1")),
     "virtual_pipeline_model_parallel_size=2 with pipeline_model_parallel_size=1: Megatron-Core's "
     "initialize_model_parallel", "error"),
    ("token limit", MEGATRON, ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"], None,
     "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 is below one sequence of max_prompt_length + "
     "max_response_length (11680 tokens)", "error"),
    ("log-prob token limit", "grpo-fsdp-vllm",
     ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
      "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=1000"], None,
     "log_prob_max_token_len_per_gpu=1000 is below one sequence of max_prompt_length + max_response_length "
     "(1536 tokens)", "error"),
    ("memory above 1", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.gpu_memory_utilization=1.5"], None,
     "actor_rollout_ref.rollout.gpu_memory_utilization=1.5: vLLM takes a fraction of each GPU's memory in (0, 1]",
     "error"),
    ("memory zero", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.gpu_memory_utilization=0"], None,
     "gpu_memory_utilization=0: vLLM takes a fraction", "error"),
    ("context below the prompt", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.max_model_len=256"], None,
     "max_model_len=256 leaves no room to generate after a prompt of data.max_prompt_length=512", "error"),
    ("context below prompt and response", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.max_model_len=1024"], None,
     "max_model_len=1024 is below max_prompt_length + max_response_length (512 + 1024)", "warning"),
    ("fractional n", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.n=2.5"], None,
     "actor_rollout_ref.rollout.n=2.5: verl's RolloutConfig.n is a whole number", "error"),
    ("text n", "grpo-fsdp-vllm", ["actor_rollout_ref.rollout.n='4'"], None,
     "actor_rollout_ref.rollout.n='4': verl's RolloutConfig.n is a whole number", "error"),
    ("LoRA rank", "lora-grpo-fsdp", ["actor_rollout_ref.model.lora_rank=1024"], None,
     "actor_rollout_ref.model.lora_rank=1024: verl passes the LoRA rank to vLLM as max_lora_rank, and vLLM takes "
     "at most 512", "error"),
]
CASES = [pytest.param(script, lines, swap, message, severity, version, id=f"{mistake}-{version}")
         for mistake, script, lines, swap, message, severity in PLANTED for version in VERSIONS]


@pytest.fixture(scope="module")
def limits_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("verl-limits-cache"))


@pytest.fixture
def limits_ws(tmp_path: Path, verl_repo: Path, limits_cache: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", limits_cache)
    return verl_workspace(tmp_path / "ws", "verl-limits", verl_repo)


@pytest.mark.parametrize(("script", "lines", "swap", "message", "severity", "version"), CASES)
def test_a_planted_limit_is_found_at_the_line_that_made_it(limits_ws, script, lines, swap, message, severity,
                                                           version):
    text = (SCRIPTS / f"{script}.yaml").read_text().replace(GRAD_OFFLOAD, "")
    text = text.replace("code: verl\n", f"code: verl-{version.replace('.', '')}\n")
    if swap:
        assert swap[0] in text
        text = text.replace(swap[0], swap[1])
    clean = [d for d in check(limits_ws, script, text) if d.severity == "error"]
    assert not [d for d in clean if message in d.message], "the script itself does not break the limit"
    found = [d for d in check(limits_ws, script, text + "".join(f'  - "{line}"\n' for line in lines))
             if message in d.message]
    assert len(found) == 1, [d.message for d in found]
    [diagnostic] = found
    assert diagnostic.severity == severity
    planted = (limits_ws.root / "jobs" / f"{script}.yaml").read_text().splitlines().index(f'  - "{lines[-1]}"') + 1
    assert (diagnostic.where.file, diagnostic.where.line) == (f"jobs/{script}.yaml", planted)


def test_a_megatron_critic_is_held_to_megatrons_rule_for_its_own_sizes():
    config = {"algorithm": {"adv_estimator": "gae"},
              "critic": {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 3,
                                                              "expert_model_parallel_size": 2}}}
    messages = [m for _, m, _ in limit_findings(config, 8, "ppo")]
    assert any(m.startswith("critic.megatron: the job's 8 GPUs are not divisible by tp x pp x cp (3 x 1 x 1)")
               for m in messages), messages
    assert any("(3 x 2 x 1 = 6;" in m for m in messages), messages
    assert limit_findings(config, 8, "sft") == []


def test_a_value_of_an_odd_shape_is_said_not_raised():
    config = {"actor_rollout_ref": {"rollout": {"name": "vllm", "gpu_memory_utilization": "lots", "n": [2]},
                                    "model": {"lora_rank": "big"}}, "data": {"max_prompt_length": "long"}}
    messages = [m for _, m, _ in limit_findings(config, 8, "ppo")]
    assert any("gpu_memory_utilization='lots'" in m for m in messages)
    assert any("rollout.n=[2]" in m for m in messages)


def check(ws, script: str, text: str):
    ws.write(f"jobs/{script}.yaml", text)
    desired = load_workspace(ws.root)
    job = desired.jobs[script]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    return check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False).diagnostics
