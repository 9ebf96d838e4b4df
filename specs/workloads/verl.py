"""verl workloads: how a typed Job becomes `python3 -m verl.trainer...` (or torchrun) with Hydra overrides.

Pure functions of the specs. What the snapshot's own verl makes of them (its composed config, the GPUs it
asks for, its checks) is state/verl/checks.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specs.kinds.models import Entry, Job, Trainer

SUBMISSION_ID_PLACEHOLDER = "${submission_id}"
SHARED_ROOT = "${shared_root}"


@dataclass(frozen=True)
class Workload:
    module: str
    config: str
    """Hydra config name under verl/trainer/config."""
    cpus_per_gpu: int
    """CPUs verl asks per GPU when the composed config cannot be read: a node fits only if it has them."""


WORKLOADS = {
    "ppo": Workload("verl.trainer.main_ppo", "ppo_trainer", 3),
    "grpo": Workload("verl.trainer.main_ppo", "ppo_trainer", 3),
    "sft": Workload("verl.trainer.sft_trainer_ray", "sft_trainer_engine", 10),
}
TORCHRUN_SFT = "verl.trainer.sft_trainer"
"""verl 0.8+'s SFT trainer for torchrun (verl.trainer.fsdp_sft_trainer before 0.8)."""
CONFIG_DIR = "verl/trainer/config"
LEGACY_SFT_CONFIG = "sft_trainer"
"""fsdp_sft_trainer's config (verl <= 0.7): its model is model.partial_pretrain."""
MODULE_CONFIGS = {"verl.trainer.fsdp_sft_trainer": LEGACY_SFT_CONFIG}
"""verl modules whose own @hydra.main names another config than their workload's (fsdp_sft_trainer.py:799 of
v0.5.0, and verl's main branch before 0.8: config_name="sft_trainer"): the run composes it, so the model goes there."""

# Keys argus sets from typed fields; an override of one is an error naming the field to use.
TYPED_KEYS = {
    "trainer.nnodes": "trainer.nnodes", "trainer.n_gpus_per_node": "trainer.n_gpus_per_node",
    "trainer.total_training_steps": "trainer.total_training_steps", "trainer.total_epochs": "trainer.total_epochs",
    "trainer.save_freq": "trainer.save_freq", "trainer.test_freq": "trainer.test_freq",
    "trainer.logger": "trainer.logger", "trainer.project_name": "trainer.project",
    "trainer.experiment_name": "trainer.experiment", "trainer.default_local_dir": "trainer.checkpoint_dir",
    "trainer.device": "trainer.device", "hydra.run.dir": "(argus sets it: outputs/<workspace>/logs/<submission_id>)",
    "data.train_files": "data.train", "data.val_files": "data.val",
    "actor_rollout_ref.model.path": "model", "model.path": "model", "model.partial_pretrain": "model",
}
GRPO_KEYS = {"algorithm.adv_estimator": "workload: grpo"}
"""Typed for GRPO only (where `grpo` itself may still be written): PPO jobs may pick any estimator."""


@dataclass(frozen=True)
class EntryPoint:
    """What runs: the module, the Hydra config it composes and how it is launched."""

    module: str
    config_dir: str
    """Relative to the code snapshot."""
    config_name: str
    launcher: str
    custom_dir: bool
    """The spec names the config directory: the run is told it with --config-path."""
    model_key: str


def entry_point(job: Job) -> EntryPoint:
    """The job's entry point: the workload's default, changed by what `entry:` names."""
    default, entry = WORKLOADS[job.workload], job.entry or Entry()
    torchrun = entry.launcher == "torchrun"
    module = entry.module or (TORCHRUN_SFT if torchrun else default.module)
    config_name = entry.config_name or MODULE_CONFIGS.get(module) or default.config
    return EntryPoint(module=module, config_dir=entry.config_dir or CONFIG_DIR, config_name=config_name,
                      launcher=entry.launcher, custom_dir=entry.config_dir is not None,
                      model_key=model_key(job.workload, config_name))


def model_key(workload: str, config_name: str) -> str:
    """The key of the model in the config the run composes."""
    if workload != "sft":
        return "actor_rollout_ref.model.path"
    return "model.partial_pretrain" if config_name == LEGACY_SFT_CONFIG else "model.path"


def module_path(module: str) -> str:
    """The entry module as a file inside the code snapshot."""
    return module.replace(".", "/") + ".py"


def outputs_dir(workspace: str, legacy: bool = False) -> str:
    """Where argus puts a workspace's run outputs: `outputs/<workspace>/`, so two teams' `train` never share
    one. `legacy`: as an argus before that put them (`outputs/`), which runs made then keep (their records say)."""
    return f"{SHARED_ROOT}/outputs" if legacy else f"{SHARED_ROOT}/outputs/{workspace}"


def checkpoint_dir(job: Job, workspace: str, legacy: bool = False) -> str:
    """Shared by every attempt of one run, so a retried attempt resumes from its checkpoints."""
    explicit = (job.trainer or Trainer()).checkpoint_dir
    return explicit or f"{outputs_dir(workspace, legacy)}/checkpoints/{job.name}/run-{job.run}"


def log_dir(workspace: str, legacy: bool = False) -> str:
    """hydra.run.dir: one folder per submission."""
    return f"{outputs_dir(workspace, legacy)}/logs/{SUBMISSION_ID_PLACEHOLDER}"


def argv(job: Job, workspace: str, code_path: str | None = None) -> list[str]:
    """The job's argv: launcher, module, config flags, then its Hydra overrides (`overrides`)."""
    point, trainer = entry_point(job), job.trainer or Trainer()
    launch = ["python3", "-m", point.module]
    if point.launcher == "torchrun":
        launch = ["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={trainer.n_gpus_per_node}",
                  "-m", point.module]
    if point.custom_dir:
        # Hydra reads a relative --config-path against the module's package: give the snapshot's own folder
        launch.append(f"--config-path={code_path or '.'}/{point.config_dir}")
    if job.entry is not None and job.entry.config_name is not None:
        launch.append(f"--config-name={point.config_name}")
    return [*launch, *overrides(job, workspace)]


def overrides(job: Job, workspace: str) -> list[str]:
    """argus's overrides first, then the user's (which may not touch typed keys)."""
    assert job.data is not None and job.model is not None
    trainer = job.trainer or Trainer()
    settings: dict[str, object] = {
        "data.train_files": job.data.train,
        "data.val_files": job.data.val,
        entry_point(job).model_key: job.model,
        "trainer.nnodes": trainer.nnodes,
        "trainer.n_gpus_per_node": trainer.n_gpus_per_node,
        "trainer.total_training_steps": trainer.total_training_steps,
        "trainer.total_epochs": trainer.total_epochs,
        "trainer.save_freq": trainer.save_freq,
        "trainer.test_freq": trainer.test_freq,
        "trainer.logger": trainer.logger,
        "trainer.project_name": trainer.project or workspace,
        "trainer.experiment_name": trainer.experiment or job.name,
        "trainer.default_local_dir": checkpoint_dir(job, workspace),
        "hydra.run.dir": log_dir(workspace),
    }
    if job.workload == "grpo":
        settings["algorithm.adv_estimator"] = "grpo"
    # No default device: verl's own (cuda) is right; `cpu` made verl 0.8 ask Ray for a resource named cpu.
    settings["trainer.device"] = trainer.device
    ours = [f"{key}={hydra_value(value)}" for key, value in settings.items() if value is not None]
    return [*ours, *job.overrides]


def override_key(override: str) -> str:
    """`+a.b=1`, `++a.b=1`, `~a.b` all name the key a.b."""
    return re.sub(r"^(\+\+|\+|~)", "", override.split("=", 1)[0]).strip()


def last_override(job: Job, keys: tuple[str, ...] | set[str]) -> int | None:
    """Index of the user's last override that sets one of the keys (the one Hydra keeps), or None."""
    return next((i for i in reversed(range(len(job.overrides))) if override_key(job.overrides[i]) in keys), None)


def unsafe_override(override: str) -> str | None:
    """Why an override may not be composed at all, or None. A config group chosen with `..` or an absolute
    path would make Hydra read (and quote) a file outside the snapshot; one that sets a node holding keys argus
    types (`trainer={nnodes: 4}`, `~trainer`, a group merged `@trainer` or `@_global_`) would change what argus
    counts and where the run writes."""
    head, _, value = override.partition("=")
    key = override_key(override)
    path, _, package = key.partition("@")
    group_like = bool(package) or "/" in path or "." not in path
    if group_like and re.search(r"(^|[/,\[\s'\"])(\.\.(?=[/,\]\s'\"]|$)|/)", value):
        return "names a config outside the snapshot's config folders (with `..` or an absolute path)"
    # `model=hf_model` picks a config of a group: argus's own overrides are applied over it, as over any value
    whole = head.lstrip().startswith("~") or value.strip().startswith("{") or value.strip() in ("null", "~")
    for node in [path.replace("/", ".")] * whole + [package] * bool(package):
        owned = sorted(k for k in TYPED_KEYS if node == "_global_" or k.startswith(node + "."))
        if owned:
            return f"sets `{node}` as a whole, which holds keys argus types ({', '.join(owned[:3])}): set its " \
                   "other keys one by one"
    return None


def hydra_flag(override: str, module: str) -> str | None:
    """Why a Hydra command-line flag (`--config-path=config`, `-cn x`) is not an override, and what to write."""
    flag, _, value = override.strip().replace(" ", "=", 1).partition("=")
    value = value.strip().strip("'\"")
    if flag in ("--config-name", "-cn"):
        return f"is Hydra's flag, not an override: write `entry: {{config_name: {value or '<name>'}}}`"
    if flag not in ("--config-path", "-cp"):
        return None
    package = "/".join(module.split(".")[:-1])
    where = "/".join(filter(None, (package, value))) if value and not value.startswith("/") else \
        "<folder of the snapshot>"
    return (f"is Hydra's flag, not an override: Hydra resolves a relative --config-path against the entry module's "
            f"package ({module} is in {package}/), so it names {where}; write `entry: {{config_dir: {where}}}` "
            "(config_dir is relative to the snapshot)")


def typed_override(override: str, workload: str) -> str | None:
    """The typed field to use instead, when an override sets a key argus owns."""
    key = override_key(override)
    if key == "hydra" or key.startswith(("hydra.", "hydra/", "hydra@")) and key != "hydra.run.dir":
        # hydra.searchpath and hydra's config groups can make composing import modules at plan time.
        return "(argus keeps Hydra's own settings: hydra.* cannot be overridden)"
    if workload == "grpo" and key in GRPO_KEYS and override.partition("=")[2].strip("'\" ") == "grpo":
        return None  # what a GRPO job sets anyway: verl's GRPO scripts write it
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
