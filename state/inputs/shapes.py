"""What a hub mirror's answers must look like before argus believes them: a commit is 40 hex, a path is a
bounded relative name with no way out of the directory it lands in, a size is a non-negative int, a sha256 is 64
hex. Pure: every check takes the decoded JSON and raises `WrongShape` with what was wrong; the caller names the
endpoint and repository. The fetcher (fetch_script.py) repeats the path rule on the node: it trusts no listing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

COMMIT = re.compile(r"[0-9a-f]{40}")
SHA256 = re.compile(r"[0-9a-f]{64}")
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?")
MAX_FILES = 10_000
"""Files one listing may name: a model or data set repository has tens to a few thousand."""
MAX_PATH = 1024
MAX_SIZE = 1 << 42
"""4 TiB: no single file of a repository argus fetches is larger; a bigger number is a lie."""


class WrongShape(ValueError):
    """An answer that is not what a hub mirror sends."""


@dataclass(frozen=True)
class HubFile:
    """One file of a repository at a commit."""

    path: str
    """Relative, `/`-separated, checked by `safe_path`."""
    size: int | None
    sha256: str | None
    """The LFS oid: the sha256 of the file's bytes, when the mirror gives it."""
    oid: str | None
    """The git blob sha1 (`sha1(b"blob %d\\0" % size + data)`) of a file the mirror lists without LFS."""


def commit_of(body: Any) -> str:
    """The `sha` of a revision answer: the commit a branch or tag points at."""
    sha = body.get("sha") if isinstance(body, dict) else None
    if not isinstance(sha, str) or not COMMIT.fullmatch(sha):
        raise WrongShape(f"its revision answer has no 40-hex commit in `sha` (got {_shown(sha)})")
    return sha


def tree_files(body: Any) -> list[HubFile]:
    """The files of a `/tree/{commit}?recursive=true` answer (an array of entries; directories skipped)."""
    if not isinstance(body, list):
        raise WrongShape(f"its tree answer is not a JSON array (got {type(body).__name__})")
    entries = [entry for entry in body if not (isinstance(entry, dict) and entry.get("type") == "directory")]
    return [_tree_entry(entry) for entry in entries]


def sibling_files(body: Any) -> list[HubFile]:
    """The files of a revision answer's `siblings` (older mirrors, and the fallback when `/tree` is absent)."""
    siblings = body.get("siblings") if isinstance(body, dict) else None
    if not isinstance(siblings, list):
        raise WrongShape("its revision answer has no `siblings` list")
    return [_sibling(entry) for entry in siblings]


def checked(files: list[HubFile]) -> tuple[HubFile, ...]:
    """The whole listing: bounded in count, each path once."""
    if len(files) > MAX_FILES:
        raise WrongShape(f"it lists {len(files)} files, more than the {MAX_FILES} argus reads")
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise WrongShape("it lists a path twice")
    return tuple(sorted(files, key=lambda f: f.path))


def safe_path(path: Any) -> str:
    """A relative path that stays inside the directory it is fetched into."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH:
        raise WrongShape(f"it lists a path that is not a string of 1 to {MAX_PATH} characters: {_shown(path)}")
    parts = path.split("/")
    bad = path.startswith("/") or "\\" in path or any(ord(c) < 32 or c == "\x7f" for c in path)
    if bad or any(part in ("", ".", "..") for part in parts):
        raise WrongShape(f"it lists the path {_shown(path)}, which is not a plain relative path")
    return path


def _tree_entry(entry: Any) -> HubFile:
    if not isinstance(entry, dict):
        raise WrongShape(f"its tree has an entry that is not an object: {_shown(entry)}")
    lfs = entry.get("lfs")
    sha256 = _hex(lfs.get("oid"), SHA256, "lfs.oid") if isinstance(lfs, dict) else None
    oid = entry.get("oid")
    return HubFile(safe_path(entry.get("path")), _size(entry.get("size")), sha256,
                   _hex(oid, COMMIT, "oid") if oid is not None and sha256 is None else None)


def _sibling(entry: Any) -> HubFile:
    if not isinstance(entry, dict):
        raise WrongShape(f"its siblings have an entry that is not an object: {_shown(entry)}")
    lfs = entry.get("lfs")
    sha256 = _hex(lfs.get("sha256"), SHA256, "lfs.sha256") if isinstance(lfs, dict) else None
    size = entry.get("size", lfs.get("size") if isinstance(lfs, dict) else None)
    blob = entry.get("blobId")
    return HubFile(safe_path(entry.get("rfilename")), None if size is None else _size(size), sha256,
                   _hex(blob, COMMIT, "blobId") if blob is not None and sha256 is None else None)


def _size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
        raise WrongShape(f"it gives a size that is not an integer from 0 to {MAX_SIZE}: {_shown(value)}")
    return value


def _hex(value: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise WrongShape(f"it gives a `{what}` that is not lowercase hex of the right length: {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
