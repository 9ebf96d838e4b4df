"""Compose a verl job's Hydra config as its entry module would, without importing verl or torch.

Every bad override is found in one plan: a composition that fails blames one override, which is left
out and the rest composed again, until the config composes (or nothing of the user's is left to
blame). A key Hydra does not know gets the nearest key the snapshot's config has, not Hydra's "+key"
advice, which is wrong for a typo or a key that moved between verl versions.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from specs.workloads import verl

MAX_ROUNDS = 16
"""Compositions per job at most: one per bad override found, then the one that passes."""


@dataclass
class Composed:
    """The composed, resolved config as plain data (None when even argus's own part fails), and the
    errors: (index of the user's override blamed, or None for the config itself, message)."""

    config: dict[str, Any] | None = None
    errors: list[tuple[int | None, str]] = field(default_factory=list)
    final: bool = True
    """Hydra's and OmegaConf's verdicts are final (cacheable); other failures are not."""


def compose_job(config_dir: Path, name: str, ours: list[str], users: list[str], label: str = "") -> Composed:
    """`ours`: argus's overrides (searchpath included); `users`: the spec's, blamed by index; `label`: the
    config as people know it ("verl 0.9.1's config ppo_trainer")."""
    result, left = Composed(), list(range(len(users)))
    for _ in range(MAX_ROUNDS):
        config, error, final = _compose(config_dir, name, ours + [users[i] for i in left])
        result.final = result.final and final
        if error is None:
            result.config = config
            return result
        blamed = _blamed(error, users, left)
        if blamed is None:
            result.errors.append((None, _readable(error, config_dir, name, ours, label=label)))
            return result
        result.errors.append((blamed, _readable(error, config_dir, name, ours, users[blamed], label)))
        left.remove(blamed)
    return result


def _compose(config_dir: Path, name: str, overrides: list[str]) -> tuple[dict[str, Any] | None, str | None, bool]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    _contained(OmegaConf)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            cfg = hydra_compose(config_name=name, overrides=overrides)
        return _plain(OmegaConf, cfg), None, True
    except (HydraException, OmegaConfBaseException) as err:
        return None, " ".join(str(err).split())[:500] or type(err).__name__, True
    except Exception as err:  # noqa: BLE001 - reported, but not remembered as the config's fault
        return None, f"{type(err).__name__}: {err}"[:500], False
    finally:
        GlobalHydra.instance().clear()


ENV_MARK = "<read from the environment at run time: {}>"
"""What `${oc.env:NAME}` composes to here. The run resolves it on its node, from its own environment; argus
never reads the machine it plans on (a CI runner's secrets would reach the plan, its file and the cache)."""
_CONTAINED: list[bool] = []


def _contained(omegaconf: Any) -> None:
    """Once per process: `oc.env` yields a mark instead of a value, and Hydra looks for its plugins
    (`hydra_plugins`, imported) everywhere but in the working directory, which may be a workspace a pull
    request wrote (`python -m` puts it first on sys.path)."""
    if _CONTAINED:
        return
    omegaconf.register_new_resolver("oc.env", lambda name, default=None: ENV_MARK.format(name), replace=True)
    from hydra.core.plugins import Plugins

    saved, here = list(sys.path), {"", ".", os.getcwd()}
    sys.path[:] = [entry for entry in sys.path if entry not in here]
    try:
        Plugins.instance()
    finally:
        sys.path[:] = saved
    _CONTAINED.append(True)


def _plain(omegaconf: Any, cfg: Any) -> dict[str, Any]:
    """Resolved where it can be: an interpolation verl resolves with its own resolvers stays as text."""
    try:
        return omegaconf.to_container(cfg, resolve=True)
    except Exception:  # noqa: BLE001 - a resolver only verl registers; the unresolved text is kept
        return omegaconf.to_container(cfg, resolve=False)


def _blamed(error: str, users: list[str], left: list[int]) -> int | None:
    """The user's override Hydra cannot parse, or whose key or value the error names."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for index in left:
        try:
            parser.parse_overrides([users[index]])
        except HydraException:
            return index
    for index in left:
        key, _, value = users[index].partition("=")
        if f"'{verl.override_key(users[index])}'" in error or (value and f"/{value}'" in error):
            return index
    return None


def _readable(error: str, config_dir: Path, name: str, ours: list[str], override: str | None = None,
              label: str = "") -> str:
    """Hydra's message, its "+key" advice replaced by the nearest keys the config has."""
    error = re.sub(r"\s*To append to your config use \+\S+", "", error)
    unknown = re.search(r"Could not override '([^']+)'|Key '([^']+)' is not in struct", error)
    if unknown is None or override is None:
        return error
    key, keys = verl.override_key(override), known_keys(config_dir, name, ours)
    if key in keys:  # the key is there: Hydra refused the value, and says why
        return error
    near = nearest_keys(key, keys)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return f"no key {key!r} in {label or 'config ' + name}{hint} (`+{key}=...` adds a new key on purpose)"


def nearest_keys(key: str, keys: list[str]) -> list[str]:
    """Typos by spelling; keys that moved by their last part (custom_reward_function.path in 0.9 is
    reward.custom_reward_function.path)."""
    near = get_close_matches(key, keys, n=2, cutoff=0.75)
    moved = [k for k in keys if k.endswith("." + key) or k.split(".")[-2:] == key.split(".")[-2:]]
    return list(dict.fromkeys([*near, *sorted(moved, key=len)[:2]]))[:3]


_KNOWN: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}


def known_keys(config_dir: Path, name: str, ours: list[str]) -> list[str]:
    """Every dotted key of the config composed with argus's overrides alone (once per process)."""
    cache_key = (str(config_dir), name, tuple(ours))
    if cache_key not in _KNOWN:
        config, _, _ = _compose(config_dir, name, ours)
        _KNOWN[cache_key] = list(dotted(config or {}))
    return _KNOWN[cache_key]


def dotted(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a.b.c": value} for every leaf (and empty dict) of a nested dict."""
    found: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found.update(dotted(value, path + "."))
        else:
            found[path] = value
    return found
