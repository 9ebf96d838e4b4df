"""Which module runs a verl job and which Hydra config it composes, found in the snapshot itself.

The module's own `@hydra.main(config_path=..., config_name=...)` names its config when the spec does
not (a recipe's main_dapo.py names recipe/dapo/config/dapo_trainer.yaml); it is read with `ast`, never
imported. A config's `hydra.searchpath` (recipes reach verl's configs through `file://verl/trainer/config`)
is followed only into folders of the snapshot: `pkg://` would import an installed package to find it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from specs.kinds.models import CONFIG_NAME_PATTERN, Job
from specs.workloads import verl
from state.verl.configs import config_problem
from state.verl.files import present

MAX_MODULE_BYTES = 1_000_000
VERL_CONFIG_PACKAGE = "pkg://verl.trainer.config"


@dataclass(frozen=True)
class ResolvedEntry:
    module: str
    config_dir: str
    """Relative to the snapshot."""
    config_name: str
    searchpath: list[str] = field(default_factory=list)
    """`hydra.searchpath=[...]` as an override with absolute folders inside the snapshot, or nothing."""


@dataclass(frozen=True)
class EntryProblem:
    field: str
    message: str


def resolve_entry(code: Path, job: Job) -> ResolvedEntry | EntryProblem:
    point = verl.entry_point(job)
    module_file = code / verl.module_path(point.module)
    if not present(module_file, Path.is_file):
        return EntryProblem("entry" if job.entry else "workload", _missing_module(job, point.module))
    config = _config_of(module_file, job, point.config_dir, point.config_name)
    if isinstance(config, EntryProblem):
        return config
    config_dir, config_name = config
    if verl.model_key(job.workload, config_name) != point.model_key:
        return EntryProblem("entry", f"the @hydra.main of {point.module} composes config {config_name}, whose model "
                                     f"is {verl.model_key(job.workload, config_name)}, not {point.model_key}: name it "
                                     f"in `entry: {{config_name: {config_name}}}` so argus sets the model there")
    primary = code / config_dir / f"{config_name}.yaml"
    if not present(primary, Path.is_file):
        return EntryProblem("entry", _missing_config(code, job, point.module, config_dir, config_name))
    searchpath = _searchpath(code, primary)
    if isinstance(searchpath, EntryProblem):
        return searchpath
    problem = config_problem(code, [code / config_dir, *(Path(s) for s in _folders(searchpath))])
    return EntryProblem("entry", f"code.{job.code}: {problem}") if problem else \
        ResolvedEntry(point.module, config_dir, config_name, searchpath)


def _config_of(module_file: Path, job: Job, config_dir: str, config_name: str) -> tuple[str, str] | EntryProblem:
    """(config folder relative to the snapshot, config name) the run composes."""
    entry = job.entry
    if entry is None or not entry.module or (entry.config_dir and entry.config_name):
        return config_dir, config_name
    declared_dir, declared_name = _declared_config(module_file, entry.module)
    if not (entry.config_dir or declared_dir) or not (entry.config_name or declared_name):
        # composing verl's own config instead would check something else than what the run composes
        return EntryProblem("entry", f"the @hydra.main of {entry.module} does not name its config_path and "
                                     "config_name as plain strings inside the snapshot: name them in "
                                     "`entry: {config_dir, config_name}` (config_dir relative to the snapshot)")
    return entry.config_dir or declared_dir or config_dir, entry.config_name or declared_name or config_name


def _missing_config(code: Path, job: Job, module: str, config_dir: str, config_name: str) -> str:
    text = f"config {config_dir}/{config_name}.yaml is not in code.{job.code}"
    package = "/".join(module.split(".")[:-1])
    beside = f"{package}/{config_dir}"
    if job.entry is not None and job.entry.config_dir == config_dir and present(
            code / beside / f"{config_name}.yaml", Path.is_file):
        # a script's `--config-path=config` is read by Hydra against the module's package
        return (f"{text}: entry.config_dir is relative to the snapshot, while a script's --config-path={config_dir} "
                f"is resolved by Hydra against the module's package ({module} is in {package}/): write "
                f"`entry: {{config_dir: {beside}}}`")
    return f"{text}: name the config the script uses in `entry: {{config_dir, config_name}}` (config_dir relative " \
           "to the snapshot)"


def _folders(searchpath: list[str]) -> list[str]:
    inside = searchpath[0].removeprefix("hydra.searchpath=[").removesuffix("]") if searchpath else ""
    return [entry.removeprefix("file://") for entry in inside.split(",") if entry]


def _missing_module(job: Job, module: str) -> str:
    text = f"entry module {module} is not in code.{job.code} (no {verl.module_path(module)})"
    if module == "verl.trainer.fsdp_sft_trainer":
        return text + ": verl 0.8 replaced it with verl.trainer.sft_trainer; write `entry: {launcher: torchrun}`"
    if job.entry is None:
        return text + ": an older verl? pick a snapshot that has it"
    return text + ": check `entry.module` against the snapshot"


def _declared_config(module_file: Path, module: str) -> tuple[str | None, str | None]:
    """(config_dir relative to the snapshot, config_name) from the module's @hydra.main, where literal."""
    try:
        if module_file.stat().st_size > MAX_MODULE_BYTES:
            return None, None
        tree = ast.parse(module_file.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_hydra_main(node.func):
            words = {k.arg: k.value.value for k in node.keywords
                     if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
            package = "/".join(module.split(".")[:-1])
            path, name = words.get("config_path"), words.get("config_name")
            relative = None if path is None or path.startswith("/") or ".." in path else f"{package}/{path}".strip("/")
            return relative, name if name and re.fullmatch(CONFIG_NAME_PATTERN, name) else None
    return None, None


def _is_hydra_main(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "main" and isinstance(func.value, ast.Name)
            and func.value.id == "hydra")


def _searchpath(code: Path, primary: Path) -> list[str] | EntryProblem:
    try:
        data = yaml.safe_load(primary.read_bytes())  # Hydra reads the same file with the same loader
    except Exception as err:  # noqa: BLE001 - any YAML it cannot read is the config's problem, for people
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return EntryProblem("entry", f"{primary.relative_to(code)} is not YAML Hydra can read{where}")
    hydra = data.get("hydra") if isinstance(data, dict) else None
    paths = hydra.get("searchpath") if isinstance(hydra, dict) else None
    if paths is None:
        return []
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        return EntryProblem("entry", f"{primary.relative_to(code)}: hydra.searchpath is not a list of paths")
    folders = []
    for path in paths:
        folder = _inside(code, path)
        if folder is None:
            return EntryProblem("entry", f"{primary.relative_to(code)}: hydra.searchpath {path!r} leads outside the "
                                         "snapshot or to a Python package: argus composes only configs in the snapshot "
                                         "(file://<folder of the snapshot>, or pkg://verl.trainer.config)")
        folders.append(f"file://{folder}")
    return [f"hydra.searchpath=[{','.join(folders)}]"]


def _inside(code: Path, path: str) -> Path | None:
    """The snapshot's folder a searchpath entry names (relative to the run's working directory, the
    snapshot), or None when it leads elsewhere."""
    if path.rstrip("/") == VERL_CONFIG_PACKAGE:
        relative = verl.CONFIG_DIR
    elif path.startswith("file://") and not path.startswith("file:///"):
        relative = path.removeprefix("file://")
    else:
        return None
    try:
        folder = (code / relative).resolve()
        inside = folder.is_dir() and folder.is_relative_to(code.resolve())
    except (OSError, ValueError, RuntimeError):  # a NUL, a name too long, a symlink loop
        return None
    return folder if inside else None
