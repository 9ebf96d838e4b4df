"""Whether the configs Hydra would compose stay what they seem: files of the snapshot, nothing else.

A snapshot comes from a git source a pull request names, and a materialized one sits on the shared root,
which any job can write. Hydra follows symlinks, resolves a defaults entry's `../..` against the file
system, expands YAML aliases without bound, and quotes what it cannot parse in its errors. So before it
composes anything, every YAML file under the config folders is read here once (per folder and process):
no symlink, no defaults entry that climbs out of the folder it is in, no YAML alias, nothing huge.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1_000_000
MAX_FILES = 5_000
_SCANNED: dict[tuple[str, int], str | None] = {}
"""Verdicts by folder and the names, times and sizes of its files: a folder that changed is read again."""


def config_problem(code: Path, folders: list[Path]) -> str | None:
    """Why the folders' configs may not be composed, naming the file (relative to the snapshot); None: fine."""
    for folder in folders:
        key = (str(folder), _signature(code, folder))
        if key not in _SCANNED:
            if len(_SCANNED) > 1024:  # a long-lived `argus serve` sees snapshots come and go
                _SCANNED.clear()
            _SCANNED[key] = _scan(code, folder)
        if _SCANNED[key] is not None:
            return _SCANNED[key]
    return None


def _signature(code: Path, folder: Path) -> int:
    found = []
    for path in [*(p for p in folder.parents if p.is_relative_to(code)), folder, *folder.rglob("*")]:
        try:
            st = path.lstat()
        except OSError:
            continue
        found.append((str(path), st.st_mtime_ns, st.st_size, st.st_mode))
        if len(found) > MAX_FILES:
            break
    return hash(tuple(sorted(found)))


def _scan(code: Path, folder: Path) -> str | None:
    parents = [p for p in folder.parents if p.is_relative_to(code) and p != code]
    for path in [*reversed(parents), folder]:
        if path.is_symlink():
            return f"{_shown(code, path)} is a symlink: argus composes only configs that are files of the snapshot"
    files = sorted(folder.rglob("*"))
    if len(files) > MAX_FILES:
        return f"{_shown(code, folder)} holds more than {MAX_FILES} entries"
    for path in files:
        problem = _file_problem(code, folder, path)
        if problem:
            return problem
    return None


def _file_problem(code: Path, folder: Path, path: Path) -> str | None:
    shown = _shown(code, path)
    if path.is_symlink():
        return f"{shown} is a symlink: argus composes only configs that are files of the snapshot"
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    if path.stat().st_size > MAX_FILE_BYTES:
        return f"{shown} is larger than {MAX_FILE_BYTES} bytes"
    try:
        document = _load(path.read_bytes())
    except _Alias:
        return f"{shown} uses a YAML alias: argus does not compose configs with aliases (they can expand without bound)"
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        return f"{shown} is not YAML Hydra can read" + (f" (line {mark.line + 1})" if mark is not None else "")
    except RecursionError:  # libyaml's scan takes it; building it in Python overflows, as Hydra's loader would
        return f"{shown} nests deeper than Hydra can read"
    group = posixpath.dirname(path.relative_to(folder).as_posix())
    for entry in _defaults(document):
        if _climbs_out(group, entry):
            return f"{shown} names {entry!r} in its defaults, outside the config folder: argus composes only " \
                   "configs of the snapshot"
    return None


class _Alias(Exception):
    pass


def _load(data: bytes) -> Any:
    """The document, refused at the first alias before anything is built from it."""
    loader = yaml.CSafeLoader(data) if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader(data)
    try:
        events = []
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                raise _Alias
            events.append(event)
    finally:
        loader.dispose()
    return yaml.safe_load(data) if events else None


def _defaults(document: Any) -> list[str]:
    """Every group path and option a defaults list names, as written."""
    entries = document.get("defaults") if isinstance(document, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, dict):
            for key, value in entry.items():
                group = str(key).split()[-1].split("@")[0] if str(key).split() else ""
                found += [group] + ([f"{group}/{value}"] if isinstance(value, str) else
                                    [f"{group}/{v}" for v in value if isinstance(v, str)] if isinstance(value, list)
                                    else [])
    return found


def _climbs_out(group: str, entry: str) -> bool:
    """`../optim` from actor/ is optim/, inside; `../../x` from actor/ leaves the folder."""
    if entry.startswith("/"):
        entry = entry.lstrip("/")
        group = ""
    normal = posixpath.normpath(posixpath.join(group, entry)) if entry else "."
    return normal == ".." or normal.startswith("../") or normal.startswith("/")


def _shown(code: Path, path: Path) -> str:
    return path.relative_to(code).as_posix() if path.is_relative_to(code) else str(path)
