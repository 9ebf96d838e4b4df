"""A verl launch, as state.verl.script_shell found it, mapped to a Job spec the way docs/verl.md maps one.

The reverse of specs.workloads.verl.argv: the launcher and module give `workload` and `entry`, the Hydra overrides
of keys argus types give typed fields, every other override is kept verbatim (in order) in `overrides`.
What argus sets itself (hydra.run.dir, the checkpoint directory) is left out and said so. Paths under the
script's $HOME move to the shared root: `$HOME/data/X` to `${shared_root}/datasets/X` (as in
docs/migrating.md), `$HOME/models/X` to `${shared_root}/models/X`, any other `$HOME/X` to `${shared_root}/X`.
Values are read with Hydra's own override parser, so `trainer.logger='["console","wandb"]'` is a list.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from specs.errors import ArgusError
from specs.secrets.literal_secrets import find_secrets
from specs.secrets.secret_names import allowed
from specs.secrets.secret_scan import SECRET_KEY_PATTERN
from specs.secrets.secret_words import secret_assignment, secret_name, secrets_in, worth_hiding
from specs.workloads import verl
from state.verl.script_shell import Call, Evaluated, nested_record

WRAPPERS = {"nohup", "time", "stdbuf", "setsid", "exec"}
PYTHONS = re.compile(r"python(3(\.\d+)?)?")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,200}")
OPTION = re.compile(r"-{1,2}[A-Za-z][A-Za-z0-9_-]{0,60}")
TRAINER_INTS = {"trainer.nnodes": "nnodes", "trainer.n_gpus_per_node": "n_gpus_per_node",
                "trainer.total_training_steps": "total_training_steps", "trainer.total_epochs": "total_epochs"}
TRAINER_FREQS = {"trainer.save_freq": "save_freq", "trainer.test_freq": "test_freq"}
TRAINER_STRINGS = {"trainer.project_name": "project", "trainer.experiment_name": "experiment",
                   "trainer.device": "device"}
MODEL_KEYS = ("actor_rollout_ref.model.path", "model.path", "model.partial_pretrain")
SET_BY_ARGUS = {"trainer.default_local_dir": "argus keeps checkpoints in its own directory on the shared root "
                                             "(set trainer.checkpoint_dir to name another)",
                "hydra.run.dir": "argus sets it: outputs/<workspace>/logs/<submission_id>"}
BASELINE_ENV = {"HOME", "PATH", "PWD", "OLDPWD", "SHLVL", "LANG", "_"}
LAUNCH_ONLY_ENV = {"RAY_ADDRESS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"}
"""Exports that steer the launch, not the run: Ray sets GPUs, argus sets PYTHONPATH and the address."""


class ImportRefused(ArgusError):
    """The script has nothing argus can import as a verl job."""


@dataclass
class Imported:
    spec: dict[str, Any]
    line: int
    """The script's line of the launch imported."""
    mapped: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def import_script(found: Evaluated, path: str, name: str, cluster: str, code: str | None,
                  given: frozenset[str] = frozenset()) -> Imported:
    """The Job spec of the script's verl launch; `given`: the variables set for the script (--env), not the job's."""
    launches = [(call, argv) for call in found.calls if (argv := _launch_argv(call.argv)) is not None]
    if not launches:
        ran = ", ".join(sorted({c.argv[0] for c in found.calls if c.argv})) or "no command"
        stop = f" ({found.error})" if found.error else ""
        raise ImportRefused(f"{path}: no verl launch found (python3 -m ..., torchrun ... -m ...); the script would run "
                            f"{ran}{stop}. Write the Job by hand (docs/verl.md) or use workload: command")
    call, argv = launches[0]
    result = Imported({"kind": "Job", "name": name, "cluster": cluster}, call.line)
    if code:
        result.spec["code"] = code
    result.left_out += [f"line {c.line}: another launch, not imported: {_launch_name(argv)}"
                        for c, argv in launches[1:]]
    if found.error:
        result.left_out.append(found.error)
    if not found.sandboxed:
        result.left_out.append("this machine allows no user namespace: the script ran in the restricted shell "
                               "without a root of its own, so a file it names could be read (check the values)")
    _map_launch(call, argv, found, result, given)
    return result


def secret_values(found: Evaluated) -> list[str]:
    """Every secret value the script's commands carry (their words, their exported variables): never written, and
    redacted from whatever the import prints or writes."""
    words = [word for call in found.calls for word in call.argv]
    words += [f"{name}={value}" for call in found.calls for name, value in call.env.items()]
    found_values = secrets_in(words)
    found_values += [value for call in found.calls for name, value in call.env.items()
                     if SECRET_KEY_PATTERN.search(name) and worth_hiding(value)]
    return found_values


def _launch_name(argv: list[str]) -> str:
    """What a launch left out is, as a message may say it: its launcher and module, never its arguments."""
    if argv[0] == "ray":
        return "ray job submit ... (its options and command not printed)"
    module = argv[argv.index("-m") + 1]
    return f"{posixpath.basename(argv[0])} -m {module if MODULE.fullmatch(module) else '(a module)'}"


def _option_names(words: list[str]) -> str:
    """Options named, their values never shown (`--runtime-env-json` carries env_vars, a token among them)."""
    names = [word.partition("=")[0] for word in words if word.startswith("-")]
    return ", ".join(dict.fromkeys(n if OPTION.fullmatch(n) else "(an option)" for n in names)) or "no options"


def _launch_argv(argv: tuple[str, ...]) -> list[str] | None:
    """The launcher's argv with wrappers (nohup, env A=1, `ray job submit ... --`) taken off, or None."""
    words = list(argv)
    while words and posixpath.basename(words[0]) in WRAPPERS | {"env"}:
        env = posixpath.basename(words[0]) == "env"
        words = words[1:]
        while env and words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    if words[:3] == ["ray", "job", "submit"] and "--" in words:
        return words
    head = posixpath.basename(words[0]) if words else ""
    if PYTHONS.fullmatch(head) or head == "torchrun":
        return words if "-m" in words[:-1] else None
    return None


def _map_launch(call: Call, argv: list[str], found: Evaluated, result: Imported, given: frozenset[str]) -> None:
    if argv[0] == "ray":
        cut = argv.index("--")
        result.left_out.append(f"the `ray job submit` wrapper ({_option_names(argv[3:cut])}: not written): argus "
                               "submits the job itself; its Cluster's address and job_defaults say where and how; "
                               "a secret in --runtime-env-json goes in the Workspace's `secrets:` and the Job's `env:`")
        argv = argv[cut + 1:]
        if not argv or _launch_argv(tuple(argv)) is None or argv[0] == "ray":
            raise ImportRefused(f"line {call.line}: `ray job submit` runs no verl module")
    at = argv.index("-m")
    module, rest = argv[at + 1], argv[at + 2:]
    torchrun = posixpath.basename(argv[0]) == "torchrun"
    config_path, config_name, overrides = _flags(rest, result)
    values = [_mapped_text(v, found, result) for v in overrides]
    workload = _workload(module, values)
    result.spec["workload"] = workload
    entry = _entry(module, torchrun, config_path, config_name, workload, argv[1:at], result)
    if entry:
        result.spec["entry"] = entry
    _overrides(values, workload, result)
    env = _env({k: v for k, v in call.env.items() if k not in given}, found, result)
    if env:
        result.spec["env"] = env


def _flags(rest: list[str], result: Imported) -> tuple[str | None, str | None, list[str]]:
    config_path = config_name = None
    overrides: list[str] = []
    words = iter(rest)
    for word in words:
        flag, eq, value = word.partition("=")
        if flag in ("--config-path", "-cp", "--config-name", "-cn"):
            value = value if eq else next(words, "")
            if flag in ("--config-path", "-cp"):
                config_path = value
            else:
                config_name = value.removesuffix(".yaml")
        elif word.startswith("-"):
            result.left_out.append(f"the option {_option_names([word])}: not a Hydra override argus passes")
        else:
            overrides.append(word)
    return config_path, config_name, overrides


def _workload(module: str, overrides: list[str]) -> str:
    if module in ("verl.trainer.sft_trainer_ray", verl.TORCHRUN_SFT, "verl.trainer.fsdp_sft_trainer"):
        return "sft"
    estimator = [o.partition("=")[2].strip("'\" ") for o in overrides
                 if verl.override_key(o) == "algorithm.adv_estimator"]
    return "grpo" if estimator and estimator[-1] == "grpo" else "ppo"


def _entry(module: str, torchrun: bool, config_path: str | None, config_name: str | None, workload: str,
           launcher_args: list[str], result: Imported) -> dict[str, str]:
    entry: dict[str, str] = {}
    default = verl.TORCHRUN_SFT if torchrun else verl.WORKLOADS[workload].module
    if module != default:
        entry["module"] = module
    if torchrun:
        entry["launcher"] = "torchrun"
        result.left_out.append(f"torchrun's own options ({_option_names(launcher_args)}): argus runs "
                               "torchrun --standalone --nnodes=1 --nproc_per_node=<trainer.n_gpus_per_node>")
    if config_path is not None:
        folder = posixpath.normpath(posixpath.join(posixpath.dirname(verl.module_path(module)), config_path))
        if config_path.startswith("/") or folder.startswith(".."):
            result.left_out.append(f"--config-path={config_path}: outside the code; give entry.config_dir, a folder "
                                   "of the code snapshot")
        elif folder != verl.CONFIG_DIR:
            entry["config_dir"] = folder
    if config_name is not None and (config_name != verl.WORKLOADS[workload].config or "module" in entry):
        entry["config_name"] = config_name
    return entry


def _overrides(values: list[str], workload: str, result: Imported) -> None:
    trainer: dict[str, Any] = {}
    data: dict[str, Any] = {}
    kept: list[str] = []
    for text in values:
        key = verl.override_key(text)
        plain = "=" in text and not text.startswith(("+", "~"))
        if secret_assignment(text) is not None or find_secrets(text):  # first: no typed key skips it
            result.left_out.append(_secret_override(key))
        elif plain and key in SET_BY_ARGUS:
            result.left_out.append(f"{text}: {SET_BY_ARGUS[key]}")
        elif plain and key == "algorithm.adv_estimator" and workload == "grpo":
            result.mapped.append(f"{text} -> workload: grpo")
        elif plain and _typed(key, _value(text), trainer, data, result):
            result.mapped.append(f"{text} -> {verl.TYPED_KEYS[key]}")
        else:
            kept.append(text)
    for key, part in (("data", data), ("trainer", trainer)):
        if part:
            result.spec[key] = part
    if kept:
        result.spec["overrides"] = kept
        result.mapped.append(f"{len(kept)} other override(s) -> overrides (verbatim, in order)")


def _secret_override(key: str) -> str:
    last = key.rpartition(".")[2]
    name = last if re.fullmatch(r"[A-Z_][A-Z0-9_]*", last) and secret_name(last) else "NAME"
    shown = key if MODULE.fullmatch(key) and not find_secrets(key) else "(a key not printed)"
    return (f"the override of {shown}: it holds a secret, never written. Give it through the environment: add {name} "
            f"to the Workspace's `secrets:` and `env: {{{name}: ${{env:{name}}}}}` to the Job (env reaches every "
            f"Ray worker; a config key can read it as `${{oc.env:{name}}}`)")


def _typed(key: str, value: Any, trainer: dict[str, Any], data: dict[str, Any], result: Imported) -> bool:
    """Put a typed key's value in its field; False when it has none or the value does not fit."""
    if key in TRAINER_INTS and _integer(value):
        trainer[TRAINER_INTS[key]] = value
    elif key in TRAINER_FREQS and (_integer(value) or value == "after_each_epoch"):
        trainer[TRAINER_FREQS[key]] = value
    elif key in TRAINER_STRINGS and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        trainer[TRAINER_STRINGS[key]] = str(value)
    elif key == "trainer.logger" and (isinstance(value, str) or _strings(value)):
        trainer["logger"] = value
    elif key in ("data.train_files", "data.val_files") and (isinstance(value, str) or _strings(value)):
        data["train" if key == "data.train_files" else "val"] = value
    elif key in MODEL_KEYS and isinstance(value, str):
        result.spec["model"] = value
    else:
        return False
    return True


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _value(text: str) -> Any:
    """The override's value as Hydra reads it (None when Hydra cannot parse it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_overrides([text])[0].value()
    except HydraException:
        return None


def _mapped_text(value: str, found: Evaluated, result: Imported) -> str:
    """The value with $HOME's paths on the shared root, and a command's unknown output named."""
    command = nested_record(value, found.marker)
    if command is not None:
        raise ImportRefused(f"a value of the launch comes from the output of `{command}`, which argus does not run: "
                            "set the variable that holds it with `--env NAME=VALUE` (as `NAME=VALUE bash FILE` "
                            "would), or edit the script")
    for sub, to in (("/data/", "/datasets/"), ("/models/", "/models/"), ("/", "/")):
        value = value.replace(found.home + sub, verl.SHARED_ROOT + to)
    if found.home in value:
        value = value.replace(found.home, verl.SHARED_ROOT)
        result.left_out.append(f"$HOME itself in {value!r}: now the shared root; check it")
    return value


def _env(exported: dict[str, str], found: Evaluated, result: Imported) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, value in sorted(exported.items()):
        if name in BASELINE_ENV or name in LAUNCH_ONLY_ENV:
            continue
        if SECRET_KEY_PATTERN.search(name) or find_secrets(value) or not allowed(name):
            result.left_out.append(f"env {name}: a secret is never written; add it to the Workspace's `secrets:` "
                                   f"and `env: {{{name}: ${{env:{name}}}}}` to the Job")
        elif "$" in value or found.workdir in value:
            result.left_out.append(f"env {name}: its value names the script's folder or holds `$`: not written")
        else:
            env[name] = _mapped_text(value, found, result)
    if env:
        result.mapped.append(f"exported variables -> env: {', '.join(env)}")
    return env
