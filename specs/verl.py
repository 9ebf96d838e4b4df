"""verl workloads: how a typed Job becomes `python3 -m verl.trainer...` with Hydra overrides.

Pure functions of the specs (verl 0.9.1's config was checked: ppo_trainer, sft_trainer_engine).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specs.models import Job, Trainer

SUBMISSION_ID_PLACEHOLDER = "${submission_id}"


@dataclass(frozen=True)
class Workload:
    module: str
    config: str
    """Hydra config name under verl/trainer/config."""
    model_key: str
    cpus_per_gpu: int
    """CPUs verl asks per GPU: a node fits only if it has them."""


WORKLOADS = {
    "ppo": Workload("verl.trainer.main_ppo", "ppo_trainer", "actor_rollout_ref.model.path", 3),
    "grpo": Workload("verl.trainer.main_ppo", "ppo_trainer", "actor_rollout_ref.model.path", 3),
    "sft": Workload("verl.trainer.sft_trainer_ray", "sft_trainer_engine", "model.path", 10),
}

# Keys argus sets from typed fields; an override of one is an error naming the field to use.
TYPED_KEYS = {
    "trainer.nnodes": "trainer.nnodes", "trainer.n_gpus_per_node": "trainer.n_gpus_per_node",
    "trainer.total_training_steps": "trainer.total_training_steps", "trainer.total_epochs": "trainer.total_epochs",
    "trainer.save_freq": "trainer.save_freq", "trainer.test_freq": "trainer.test_freq",
    "trainer.logger": "trainer.logger", "trainer.project_name": "trainer.project",
    "trainer.experiment_name": "trainer.experiment", "trainer.default_local_dir": "trainer.checkpoint_dir",
    "trainer.device": "trainer.device", "hydra.run.dir": "(argus sets it: outputs/logs/<submission_id>)",
    "data.train_files": "data.train", "data.val_files": "data.val",
    "actor_rollout_ref.model.path": "model", "model.path": "model",
}
GRPO_KEYS = {"algorithm.adv_estimator": "workload: grpo"}
"""Typed for GRPO only: PPO jobs may pick any of verl's other advantage estimators."""


def module_path(workload: str) -> str:
    """The entry module as a file inside the code snapshot."""
    return WORKLOADS[workload].module.replace(".", "/") + ".py"


def checkpoint_dir(job: Job) -> str:
    """Shared by every attempt of one run, so a retried attempt resumes from its checkpoints."""
    return (job.trainer or Trainer()).checkpoint_dir or f"${{shared_root}}/outputs/checkpoints/{job.name}/run-{job.run}"


def argv(job: Job, workspace: str) -> list[str]:
    """The job's argv: argus's overrides first, then the user's (which may not touch typed keys)."""
    assert job.data is not None and job.model is not None
    profile, trainer = WORKLOADS[job.workload], job.trainer or Trainer()
    settings: dict[str, object] = {
        "data.train_files": job.data.train,
        "data.val_files": job.data.val,
        profile.model_key: job.model,
        "trainer.nnodes": trainer.nnodes,
        "trainer.n_gpus_per_node": trainer.n_gpus_per_node,
        "trainer.total_training_steps": trainer.total_training_steps,
        "trainer.total_epochs": trainer.total_epochs,
        "trainer.save_freq": trainer.save_freq,
        "trainer.test_freq": trainer.test_freq,
        "trainer.logger": trainer.logger,
        "trainer.project_name": trainer.project or workspace,
        "trainer.experiment_name": trainer.experiment or job.name,
        "trainer.default_local_dir": checkpoint_dir(job),
        "hydra.run.dir": f"${{shared_root}}/outputs/logs/{SUBMISSION_ID_PLACEHOLDER}",
    }
    if job.workload == "grpo":
        settings["algorithm.adv_estimator"] = "grpo"
    # seed 001: SFT's driver has no GPU, so it computes on the CPU unless told otherwise.
    settings["trainer.device"] = trainer.device or ("cpu" if job.workload == "sft" else None)
    ours = [f"{key}={hydra_value(value)}" for key, value in settings.items() if value is not None]
    return ["python3", "-m", profile.module, *ours, *job.overrides]


def override_key(override: str) -> str:
    """`+a.b=1`, `++a.b=1`, `~a.b` all name the key a.b."""
    return re.sub(r"^(\+\+|\+|~)", "", override.split("=", 1)[0]).strip()


def typed_override(override: str, workload: str) -> str | None:
    """The typed field to use instead, when an override sets a key argus owns."""
    key = override_key(override)
    if key.startswith(("hydra.", "hydra/")) and key != "hydra.run.dir":
        # hydra.searchpath and hydra's config groups can make composing import modules at plan time.
        return "(argus keeps Hydra's own settings: hydra.* cannot be overridden)"
    return TYPED_KEYS.get(key) or (GRPO_KEYS.get(key) if workload == "grpo" else None)


def hydra_value(value: object) -> str:
    """A value in Hydra's override grammar. Strings are always quoted, so "null", "1e-6", "~/x" or
    "run#3" arrive as the very string written; only quotes (and backslashes before them) are escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, str(value))
    return "'" + text.replace("'", "\\'") + "'"
