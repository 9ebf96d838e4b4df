"""Where a workspace sits in its git repository, and which repository that is: what a saved plan
records so `argus apply PLAN.json` finds its workspace from anywhere in another checkout.

Read as data, like state.code.workcopy: git never runs, a checkout's config is parsed, never obeyed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from state.code import workcopy

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")
"""git@github.com:org/repo.git, the scp-like form git accepts besides URLs."""


@dataclass(frozen=True)
class Location:
    repository: str
    """The identity of the repository: its origin's host and path (github.com/org/repo), never a user
    or token; "" when it has no origin."""
    directory: str
    """The workspace's directory relative to the repository's root, in / form ("." for the root); "" when
    the workspace is not in a git working copy."""


def location_of(workspace: str | Path) -> Location:
    copy = workcopy.find_working_copy(workspace)
    if copy is None:
        return Location("", "")
    under = os.path.relpath(os.path.realpath(workspace), os.path.realpath(copy.root))
    return Location(identity(copy), PurePosixPath(*Path(under).parts).as_posix())


def repository_at(start: str | Path) -> tuple[Path, str] | None:
    """The root of the working copy holding `start`, and its identity; None outside any."""
    copy = workcopy.find_working_copy(start)
    return None if copy is None else (Path(os.path.realpath(copy.root)), identity(copy))


def identity(copy: workcopy.WorkingCopy) -> str:
    from state.code.gitinfo import configured_origin

    return normalized(configured_origin(copy) or "")


def normalized(url: str) -> str:
    """host/path, lower-case host, without scheme, user, password, port or `.git`: an https and an ssh
    checkout of one repository are the same repository, and a token in a URL is never recorded."""
    scp = _SCP.match(url) if "://" not in url else None
    if scp:
        host, path = scp.group(1), scp.group(2)
    elif "://" in url:
        rest = url.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2].split(":")[0]
    else:
        return ""  # a local path: no identity worth comparing across machines
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host.lower()}/{path}" if host and path else ""


def directory_in(root: Path, directory: str) -> Path | None:
    """root/directory when `directory` (read from a hostile file) is a plain relative path that names a
    directory and stays inside root once symlinks are followed; else None."""
    if not directory or "\\" in directory or "\x00" in directory:
        return None
    path = PurePosixPath(directory)
    if path.is_absolute() or ".." in path.parts:
        return None
    top = root.resolve()
    candidate = (top / path).resolve()
    return candidate if (candidate == top or top in candidate.parents) and candidate.is_dir() else None
