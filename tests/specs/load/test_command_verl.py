"""A verl launch pasted as `workload: command` is warned about at its `entrypoint:` line, naming the trainer
and the GPUs the queue does not count. The entrypoints are verl's own example scripts (verl main,
examples/grpo_trainer/run_qwen2-7b.sh; examples/sft/gsm8k/run_qwen_05_sp2.sh), as a lab pastes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.load.command_verl import command_verl_diagnostics, verl_launch
from specs.load.loader import load_workspace
from tests.support.workspace import Workspace

GRPO = """python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=/mnt/shared/data/gsm8k/train.parquet \\
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=2 \\
    trainer.total_epochs=15"""
SFT = ("torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node -m verl.trainer.fsdp_sft_trainer "
       "data.train_files=$HOME/data/gsm8k/train.parquet model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.parametrize(("entrypoint", "module", "gpus"), [
    (GRPO, "verl.trainer.main_ppo", 16),
    (["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=1"], "verl.trainer.main_ppo", 8),  # verl's default 8
    ("python3 -m recipe.dapo.main_dapo trainer.n_gpus_per_node=4", "recipe.dapo.main_dapo", 4),
    ("cd /code && python3 verl/trainer/main_ppo.py trainer.nnodes=3", "verl.trainer.main_ppo", 24),
    ("python3 -m verl.trainer.sft_trainer_ray data.train_files=x.parquet", "verl.trainer.sft_trainer_ray", 1),
    ("torchrun --nnodes=1 --nproc_per_node=4 -m verl.trainer.sft_trainer", "verl.trainer.sft_trainer", 4),
    (SFT, "verl.trainer.fsdp_sft_trainer", None),  # a shell variable: the count is the shell's
    ("python3 -m verl.experimental.fully_async_policy.fully_async_main", "verl.experimental.fully_async_policy"
                                                                         ".fully_async_main", 8),
])
def test_a_verl_launch_is_recognised_with_the_gpus_its_command_line_asks(entrypoint, module, gpus) -> None:
    launch = verl_launch(entrypoint)
    assert launch is not None and launch.module == module and launch.gpus == gpus


@pytest.mark.parametrize("entrypoint", [
    "python3 train.py --epochs 3", ["python3", "-m", "verlx.trainer.main_ppo"], "echo verl.trainer.main_ppo",
    "python3 -m mypkg.verl.trainer.main_ppo", "pip show verl",
])
def test_commands_that_do_not_launch_verl_are_not_mistaken_for_it(entrypoint) -> None:
    assert verl_launch(entrypoint) is None


def test_a_huge_entrypoint_is_read_only_so_far() -> None:
    assert verl_launch("x" * 10_000_000 + " -m verl.trainer.main_ppo") is None


def _workspace(tmp_path: Path, extra: str) -> Workspace:
    ws = Workspace(tmp_path, "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("clusters/c.yaml", "kind: Cluster\nname: local\naddress: http://10.0.0.1:8265\n"
                                "shared_root: /mnt/shared\n")
    ws.write("jobs/grpo.yaml", "kind: Job\nname: grpo\ncluster: local\nworkload: command\nentrypoint: |\n"
             + "".join(f"  {line}\n" for line in GRPO.splitlines()) + extra)
    return ws


def test_a_pasted_verl_launch_is_warned_about_at_its_entrypoint_line_with_the_gpus_not_counted(tmp_path) -> None:
    found = command_verl_diagnostics(load_workspace(_workspace(tmp_path, "").root))
    assert [(d.severity, str(d.where)) for d in found] == [("warning", "jobs/grpo.yaml:5")]
    assert "verl.trainer.main_ppo" in found[0].message and "16 GPUs" in found[0].message
    assert "trainer.nnodes=2 x trainer.n_gpus_per_node=8" in found[0].message and "(0 GPU)" in found[0].message
    assert "argus import verl-script" in (found[0].hint or "")


def test_a_command_that_declares_the_gpus_it_holds_is_not_warned_about(tmp_path) -> None:
    assert command_verl_diagnostics(load_workspace(_workspace(tmp_path, "demand: {GPU: 16, CPU: 48}\n").root)) == []
    short = command_verl_diagnostics(load_workspace(_workspace(tmp_path, "demand: {GPU: 8, CPU: 24}\n").root))
    assert len(short) == 1 and "(8 GPU)" in short[0].message


def test_the_plan_shows_the_warning_and_still_plans_the_command(workspace, argus) -> None:
    """Through `argus plan` on a real cluster: a warning, not an error (the command may be meant), at its line."""
    workspace.job("pasted", ["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2"])
    plan = argus("plan", workspace.root)
    assert plan.code == 0, plan.err
    assert "jobs/pasted.yaml:5" in plan.out + plan.err and "16 GPUs" in plan.out + plan.err
    assert "+ job.pasted" in plan.out
