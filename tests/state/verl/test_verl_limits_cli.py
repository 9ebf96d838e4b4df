"""Through the CLI on the real 3-GPU cluster: a job breaking verl's limits and naming a data column its file does
not have is refused by `argus plan` with every finding at its line, and `argus apply` submits nothing to Ray."""

from __future__ import annotations

from pathlib import Path

from tests.state.verl.test_verl_mistakes import RUNNABLE, at, gpu_workspace, write_job
from tests.support.cluster import sdk

WORKSPACE = "verl-limits-cli"
MISTAKES = [*RUNNABLE, "actor_rollout_ref.rollout.gpu_memory_utilization=1.5", "data.prompt_key=question",
            "actor_rollout_ref.rollout.n=2.5", "actor_rollout_ref.model.lora_rank=1024"]


def test_limits_and_columns_refuse_the_plan_and_nothing_reaches_ray(tmp_path: Path, verl_repo: Path, gpu_cluster,
                                                                     argus, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    ws = gpu_workspace(tmp_path, verl_repo, gpu_cluster.address, WORKSPACE)
    write_job(ws, "limits", "verl", MISTAKES)
    data = f"{ws.shared}/datasets/gsm8k/train.parquet"
    expected = [
        ("gpu_memory_utilization=1.5", "actor_rollout_ref.rollout.gpu_memory_utilization=1.5: vLLM takes a fraction"),
        ("data.prompt_key=question", f"data.prompt_key='question' is not a column of {data} (it has data_source, "
                                     "prompt, reward_model)"),
        ("rollout.n=2.5", "actor_rollout_ref.rollout.n=2.5: verl's RolloutConfig.n is a whole number"),
        ("lora_rank=1024", "actor_rollout_ref.model.lora_rank=1024: verl passes the LoRA rank to vLLM"),
    ]
    for command in (["plan"], ["apply", "--auto-approve"]):
        result = argus(*command, ws.root)
        assert result.code == 1, result.out + result.err
        for line, message in expected:  # every one of the job's mistakes, in one run
            assert f"Error: {at(ws, 'jobs/limits.yaml', line)}{message}" in result.out, (message, result.out)
    on_ray = sdk(ws.address).list_jobs()
    assert [j.submission_id for j in on_ray if (j.metadata or {}).get("argus.workspace") == WORKSPACE] == []
    assert not (ws.shared / "jobs").exists()
