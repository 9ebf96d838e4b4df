"""Files a verl job's composed config names, checked where the run will look for them.

verl opens them only once its workers are up (datasets in the trainer, the reward function in the
reward workers, tool and agent-loop configs in the rollout workers): a missing one costs the GPU minutes
spent getting there. Paths are read from the composed config, so an override that names one is checked
like a typed field. A relative path is the run's: verl resolves it against the working directory,
the code snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from specs.kinds.models import Job
from state.verl.inputs import input_findings
from state.verl.rules import A, get
from state.verl.sealed import Inside, JobInputs

DATA_KEYS = ("data.train_files", "data.val_files")
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")
"""What verl's RLHFDataset and SFT datasets read (rl_dataset.py): anything else is 'Unsupported file format'."""
CODE_FILE_KEYS = ("reward.custom_reward_function.path", "custom_reward_function.path", "data.custom_cls.path",
                  "reward.reward_manager.module.path", f"{A}.rollout.multi_turn.tool_config_path",
                  f"{A}.rollout.agent.agent_loop_config_path")
REMOTE = ("hdfs://", "pkg://", "s3://", "gs://")

Finding = tuple[tuple[str, ...], str, str]
"""(keys, message, severity)."""


def present(path: Path, test: Callable[[Path], bool] = Path.exists) -> bool:
    """Whether the path is there, for a path a spec or a snapshot wrote: a name too long for the
    filesystem, or a NUL (Python 3.10 raises on it), is simply not there."""
    try:
        return test(path)
    except (OSError, ValueError):
        return False


def missing_files(job: Job, config: dict[str, Any], shared_root: str, code: Path,
                  inputs: JobInputs | None = None) -> list[Finding]:
    inputs = inputs or JobInputs(shared_root=shared_root)
    found: list[Finding] = []
    notes: set[str] = set()  # inputs said to be not ready: one note each, however many paths name them
    for key in DATA_KEYS:
        found += _data_files(key, get(config, key), inputs, notes)
    for key in CODE_FILE_KEYS:
        value = get(config, key)
        if isinstance(value, str) and value and not value.startswith(REMOTE):
            path = _where(value.removeprefix("file://"), code)
            if (at := inputs.inside(str(path))) is not None:
                found += _in_input(key, at, notes, at.holds_file)
            elif not present(path, Path.is_file):
                found.append(((key,), f"{key} names {value}, which does not exist where the run looks for it "
                                      f"({path}): verl fails on it once the GPUs are held", "error"))
    model_key = "model.path" if job.workload == "sft" else f"{A}.model.path"
    model = get(config, model_key) or get(config, "model.partial_pretrain")
    if isinstance(model, str):
        at = inputs.inside(model)
        found += _in_input(model_key, at, notes, at.holds_dir) if at is not None else _model(model_key, model,
                                                                                           shared_root)
    return found + input_findings(job, config, shared_root, inputs)  # what is inside: columns, config, tokenizer


def _in_input(key: str, at: Inside, notes: set[str], held: Callable[[], bool]) -> list[Finding]:
    """A path into a data set or model: its sealed manifest must list it; not sealed yet, checked later."""
    if at.manifest is None:
        if at.address in notes:
            return []
        notes.add(at.address)
        return [((key,), at.not_ready(), "warning")]
    return [] if held() else [((key,), at.not_listed(), "error")]


def _data_files(key: str, value: Any, inputs: JobInputs, notes: set[str]) -> list[Finding]:
    found = []
    for path in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        if not isinstance(path, str) or path.startswith(REMOTE):
            continue
        if not path.endswith(DATA_SUFFIXES):
            found.append(((key,), f"{path}: verl reads {', '.join(DATA_SUFFIXES)} files only", "error"))
        elif (at := inputs.inside(path)) is not None:
            found += _in_input(key, at, notes, at.holds_file)
        elif not present(Path(path)):
            found.append(((key,), f"{path} does not exist on the shared filesystem", "error"))
    return found


def _model(key: str, model: str, root: str) -> list[Finding]:
    if model.startswith("/"):
        return [] if present(Path(model)) else [((key,), f"model path {model} does not exist", "error")]
    if model.startswith(REMOTE) or present(Path(root) / "hf" / "hub" / f"models--{model.replace('/', '--')}",
                                           Path.is_dir):
        return []
    return [((key,), f"{model} is only a hub id and is not cached under {root}/hf: the cluster has no internet; "
                     f"download it there first (`HF_HOME={root}/hf huggingface-cli download {model}`), and give "
                     "the runs `env: {HF_HOME: ${shared_root}/hf}` (the cluster's job_defaults, as `argus init` "
                     "writes it) so they look there", "warning")]


def _where(path: str, code: Path) -> Path:
    return Path(path) if path.startswith("/") else code / path
