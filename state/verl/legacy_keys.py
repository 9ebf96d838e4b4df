"""Top-level keys verl 0.8 moved under `reward.*` and 0.9's main_ppo no longer reads: set, they change
nothing, unless the entry module reads them itself.

verl 0.8.0's main_ppo moved them (migrate_legacy_reward_impl); 0.9.1's still composes them (a compatibility
file keeps them) but reads only `config.reward.*` (main_ppo.py:47 reads config.reward.reward_model.enable).
A recipe's own main may read them: verl-recipe's prime/main_prime.py:110 (48ea0a797fa2) places its reward
model when `config.reward_model.enable`. A recipe's package is read with `ast`, never imported.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from specs.kinds.models import Job
from specs.workloads import verl
from state.verl.files import present
from state.verl.rules import get
from state.verl.version import at_least

LEGACY_KEYS = (("reward_model.enable", "reward.reward_model.enable"),
               ("reward_model.enable_resource_pool", "reward.reward_model.enable_resource_pool"),
               ("custom_reward_function.path", "reward.custom_reward_function.path"))
"""(the key 0.9's main_ppo ignores, where it reads it now)."""
MAX_MODULES = 64
"""Python files of a recipe's package read at most: a recipe has a handful."""
MAX_MODULE_BYTES = 1_000_000
MIGRATES = ("migrate_legacy_reward_impl()",)
"""A call of verl's migration, which copies every legacy key to where verl reads it."""


def legacy_problems(job: Job, config: dict[str, Any], code: Path, module: str, config_name: str,
                    version: str | None) -> list[tuple[str, str]]:
    """(field, message) for each legacy key set that the run's verl ignores, located at the override that
    set it, else at the `entry:` (or `workload:`) whose config set it."""
    if not at_least(version, (0, 9)):
        return []
    found = []
    for legacy, moved in LEGACY_KEYS:
        if get(config, legacy) in (None, False) or legacy in module_reads(code, module):
            continue
        index = verl.last_override(job, (legacy,))
        where = "" if index is not None else f", which the config {config_name} sets (no override does)"
        field = f"overrides.{index}" if index is not None else ("entry" if job.entry else "workload")
        found.append((field, f"{module} of verl {version or '(no version file)'} ignores {legacy}{where} (0.8 moved "
                             f"it to {moved}): the run would train without it; write {moved} in `overrides:`"))
    return found


def module_reads(code: Path, module: str) -> frozenset[str]:
    """The legacy keys the entry module reads itself: as `config.reward_model.enable`,
    `config["reward_model"]["enable"]` or `config.reward_model.get("enable")`, or all of them through verl's
    migrate_legacy_reward_impl (0.9.1's experimental fully_async_main.py:237 calls it; main_ppo no longer
    does). verl's own module is read alone; a recipe's whole package (its main hands the config to its
    trainer)."""
    entry = code / verl.module_path(module)
    paths = [entry] if module.startswith("verl.") else sorted(entry.parent.glob("*.py"))[:MAX_MODULES]
    wanted = {tuple(legacy.split(".")): legacy for legacy, _ in LEGACY_KEYS}
    found: set[str] = set()
    for path in paths:
        for chain in _chains(path):
            found.update(legacy for parts, legacy in wanted.items() if chain == MIGRATES or _reads(chain, parts))
    return frozenset(found)


def _reads(chain: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """`config.reward_model.enable` or `self.config.reward_model.enable`; never `config.reward.reward_model...`."""
    starts = [0] + [i + 1 for i, part in enumerate(chain) if part == "config"]
    return any(chain[start:start + len(parts)] == parts for start in starts)


def _chains(path: Path) -> list[tuple[str, ...]]:
    """Every `name.a.b` read in the file, as (a, b): the keys after a plain name (the config)."""
    try:
        if not present(path, Path.is_file) or path.stat().st_size > MAX_MODULE_BYTES:
            return []
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [chain for node in ast.walk(tree) if (chain := _chain(node))]


def _chain(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "migrate_legacy_reward_impl"
                                       or getattr(node.func, "attr", None) == "migrate_legacy_reward_impl"):
        return MIGRATES
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            parts.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            parts.append(node.args[0].value)
            node = node.func.value
        else:
            break
    return tuple(reversed(parts)) if isinstance(node, ast.Name) and len(parts) > 1 else None
