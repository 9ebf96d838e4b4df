"""Literal secrets in specs (issue 16): the detector's true and false positives, table-driven, and the
loader reporting every one at once with file:line, never the value, in text or in --json.

Token-shaped values are assembled at run time (prefix + body) so this file holds no token itself.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load.loader import load_workspace
from specs.secrets.literal_secrets import find_secrets, looks_random
from tests.support.workspace import make_workspace

_RNG = random.Random(16)
ALNUM = string.ascii_letters + string.digits


def _random(alphabet: str, length: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(length))


MIXED = "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
"""32 characters of every kind: the body of the token shapes below."""

TRUE_POSITIVES = [
    ("sk-" + MIXED + "xyz12", "an OpenAI-style API key"),
    ("sk-" + "proj-" + MIXED + "_Ab-9" + MIXED, "an OpenAI-style API key"),
    ("hf_" + MIXED[:34], "a Hugging Face token"),
    ("gh" + "p_" + MIXED + "Qx12", "a GitHub token"),
    ("gh" + "o_" + MIXED + "Qx12", "a GitHub token"),
    ("gh" + "u_" + MIXED + "Qx12", "a GitHub token"),
    ("gh" + "s_" + MIXED + "Qx12", "a GitHub token"),
    ("gh" + "r_" + MIXED + "Qx12", "a GitHub token"),
    ("github" + "_pat_11ABCDEFG0" + MIXED + "_" + MIXED, "a GitHub token"),
    ("xox" + "b-1234567890-9876543210-" + MIXED[:24], "a Slack token"),
    ("xox" + "p-1234567890-" + MIXED[:20], "a Slack token"),
    ("AKIA" + "IOSFODNN7EXAMPLE", "an AWS access key id"),
    ("ASIA" + "Q3EGUBUWX7VKWOAB", "an AWS access key id"),
    ("glpat" + "-" + MIXED[:20], "a GitLab token"),
    ("https://alice:hunter2@git.example.com/team/verl.git", "a URL with a password"),
    ("postgres://:s3cr3t@db:5432/runs", "a URL with a password"),
    ("Zq8fT2kLw9XbR4mN7vPj3sHc6YdG1uEa5KoBx0Wi", "a long random key"),  # like an AWS secret key
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcmd1cy10ZXN0LXVzZXItNDIiLCJpYXQiOjE3MDAwMDAwMDB9.x",
     "a long random key"),  # a JWT's payload
    ("--api-key=" + MIXED + "Zz9", "a long random key"),
    ("WANDB_API_KEY=" + "gh" + "p_" + MIXED + "Qx12 python3 train.py", "a GitHub token"),
]

FALSE_POSITIVES = [
    "actor_rollout_ref.model.path=/mnt/models/Qwen2.5-0.5B",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "trainer.experiment_name=Qwen25_05B_GRPO_GSM8K_Baseline_V3",
    "data.train_files=/mnt/shared/datasets/GSM8K_V2/Train.parquet",
    "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",  # a git commit id
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",  # a sha256 digest
    "ABCDEF0123456789ABCDEF0123456789ABCDEF01",  # upper-case hex
    "123e4567-e89b-12d3-a456-426614174000",  # a UUID
    "/mnt/shared/hf/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/7ae557604adf67be50417f59c2c2f167def9a775",
    "/mnt/shared/outputs/checkpoints/ppo-gsm8k/run-1",
    "${shared_root}/common/code/verl/verl-a1b2c3/src",
    "meta-llama/Meta-Llama-3-70B-Instruct-GPTQ-INT4-Bits",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "HuggingFaceH4/ultrachat_200k_Mixture_V2_filtered",
    "EleutherAI/gpt-neox-20b-Deduped-Step143000-V2",
    "Qwen2ForCausalLM-LoRA-Rank64-Alpha128-Dropout005",
    "ThisIsAVeryLongCamelCaseIdentifierName2024",
    "ExperimentQwen2Point5HalfBillionInstructGsm8kBaselineRun2",
    "GRPO_Qwen2_5_7B_Instruct_MATH_lr1e6_kl0001_bs512_n8_Run3",
    "ppo-qwen2-5-0-5b-instruct-gsm8k-lr1e-6-bs256-seed42",
    "s3://my-bucket/Datasets/GSM8K/Train2024/part-00000.parquet",
    "PYTHONPATH=/mnt/shared/common/code/verl/verl-A1B2c3/src:/mnt/shared/user/code",
    "python3 -m verl.trainer.main_ppo trainer.logger=['console','wandb'] +ray_kwargs.ray_init.num_cpus=8",
    "https://github.com/volcengine/verl.git",
    "ssh://git@github.com:22/volcengine/verl.git",
    "https://alice:$GIT_PASSWORD@git.example.com/verl.git",  # a shell variable: a reference
    "https://alice:${env:GIT_PASSWORD}@git.example.com/verl.git",
    "pip install scikit-learn sk-video && python3 sk-learn-for-beginners-and-experts.py",
    "the quick brown fox jumps over the lazy dog, twice: THE QUICK BROWN FOX",
    "xoxo-gossip-girl",
    "AKIA-style ids are 20 characters long",
]


@pytest.mark.parametrize(("text", "shape"), TRUE_POSITIVES)
def test_each_secret_shape_is_found(text: str, shape: str) -> None:
    found = find_secrets(text)
    assert [f.description for f in found if f.description.startswith(shape)], (text, found)


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_ordinary_spec_text_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(("alphabet", "length"), [
    (string.ascii_letters + string.digits + "+/", 32), (string.ascii_letters + string.digits + "-_", 40),
    (ALNUM, 32), (ALNUM, 48), (ALNUM, 64)])
def test_random_keys_are_caught_by_entropy(alphabet: str, length: int) -> None:
    """The calibration, kept: 98% at 32 characters, more when longer (specs.secrets.literal_secrets)."""
    caught = sum(looks_random(_random(alphabet, length)) for _ in range(500))
    assert caught >= 490, caught


def test_a_finding_shows_four_characters_at_most() -> None:
    token = "gh" + "p_" + MIXED + "Qx12"
    [found] = find_secrets(f"--token {token}")
    assert found.shown == "ghp_..." and found.secret == token
    [password] = find_secrets("https://bob:hunter2hunter2@example.com/x")
    assert password.shown == ""


# --- the loader: every finding, located, never the value.

GITHUB = "gh" + "p_" + MIXED + "Qx12"
OPENAI = "sk-" + MIXED + "xyz12"
HF = "hf_" + MIXED[:34]
RANDOM = "Zq8fT2kLw9XbR4mN7vPj3sHc6YdG1uEa5KoBx0Wi"
SECRETS = (GITHUB, OPENAI, HF, RANDOM, "hunter2hunter2", "abc123abc")


def _leaky_workspace(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", "leaky", "http://127.0.0.1:9")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: http://127.0.0.1:9
        shared_root: .shared
        job_defaults:
          env: {{HF_HOME: /mnt/hf, HUB: {HF}}}
        """)
    ws.write("jobs/a.yaml", f"""
        kind: Job
        name: a
        cluster: local
        workload: command
        entrypoint: "GH={GITHUB} python3 train.py"
        env:
          WANDB_API_KEY: abc123abc
          OPENAI: {OPENAI}
        """)
    ws.write("jobs/b.yaml", f"""
        kind: Job
        name: Bad_{GITHUB}
        cluster: local
        workload: ppo
        code: x
        model: /mnt/m
        data: {{train: /mnt/t, val: /mnt/v}}
        overrides: [actor_rollout_ref.model.path=/mnt/models/Qwen2.5-0.5B, +wandb.key={RANDOM}]
        description: https://bob:hunter2hunter2@example.com/
        """)
    return ws


def test_every_literal_secret_is_reported_at_once_with_file_and_line(tmp_path: Path) -> None:
    ws = _leaky_workspace(tmp_path)
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    text = str(caught.value)
    found: dict[tuple[str, str], str] = {}
    for d in caught.value.diagnostics:
        key = (str(d.where), d.field)
        found[key] = f"{found[key]} | {d.text}" if key in found else d.text
    assert "a Hugging Face token (hf_a...)" in found[("cluster.yaml:6", "job_defaults.env.HUB")]
    assert "a GitHub token (ghp_...)" in found[("jobs/a.yaml:5", "entrypoint")]
    assert "write $NAME in the entrypoint" in found[("jobs/a.yaml:5", "entrypoint")]
    assert "WANDB_API_KEY looks like a secret" in found[("jobs/a.yaml:7", "env.WANDB_API_KEY")]
    assert "`OPENAI: ${env:OPENAI}`" in found[("jobs/a.yaml:8", "env.OPENAI")]
    assert "a GitHub token" in found[("jobs/b.yaml:2", "name")]
    assert "a long random key" in found[("jobs/b.yaml:8", "overrides.1")]
    assert "${oc.env:NAME}" in found[("jobs/b.yaml:8", "overrides.1")]
    assert "a URL with a password" in found[("jobs/b.yaml:9", "description")]
    assert ("jobs/b.yaml:8", "overrides.0") not in found
    for secret in SECRETS:
        assert secret not in text, secret
    assert "<redacted>" in found[("jobs/b.yaml:2", "name")]  # the invalid-name error quoted it


@pytest.mark.parametrize("command", [("validate",), ("plan",)])
def test_no_secret_reaches_the_output_in_text_or_json(tmp_path: Path, argus, command: tuple[str, ...]) -> None:
    ws = _leaky_workspace(tmp_path)
    for extra in ((), ("--json",)):
        result = argus(*command, ws.root, *extra)
        assert result.code == 1, result.err
        assert "looks like a GitHub token" in result.err
        for secret in SECRETS:
            assert secret not in result.out + result.err, (secret, extra)
        if extra:
            data = json.loads(result.out)
            assert len(data["diagnostics"]) >= 8


def test_references_and_shell_variables_pass(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", "clean", "http://127.0.0.1:9", secrets=("WANDB_API_KEY", "HF_TOKEN"))
    ws.job("a", "WANDB_API_KEY=$WANDB_API_KEY python3 train.py --commit a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
           "env: {WANDB_API_KEY: '${env:WANDB_API_KEY}', HF_TOKEN: '${env:HF_TOKEN}'}\n")
    assert load_workspace(ws.root).jobs["a"].env["HF_TOKEN"] == "${env:HF_TOKEN}"
