"""Which git commit the desired state is at, for plans and the audit log."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from state.code.workcopy import WorkingCopy


@dataclass(frozen=True)
class GitInfo:
    commit: str
    """Full SHA of HEAD, or "none" when the workspace is not in a git repository."""
    dirty: bool


def desired_commit(root: str) -> GitInfo:
    """HEAD of the repository holding the workspace, and whether the workspace's files differ from it.

    The workspace may be anyone's checkout (on the shared filesystem, too): git never runs in it,
    so its config cannot hook fsmonitor or clean filters (state.code.workcopy says how).
    """
    from state.code import workcopy  # imported here: validate and --help must not pay for it

    copy = workcopy.find_working_copy(root)
    if copy is None:
        return GitInfo("none", False)
    try:
        commit = workcopy.head_commit(copy)
    except (workcopy.NotAWorkingCopy, OSError):
        return GitInfo("none", False)
    under = os.path.relpath(os.path.realpath(root), copy.root)
    return GitInfo(commit, _differs(copy, commit, "" if under == "." else under))


def _differs(copy: WorkingCopy, commit: str, under: str) -> bool:
    """The workspace's working files against HEAD's, by content; what cannot be read counts as dirty."""
    from state.code import safegit, workcopy

    try:
        with workcopy.quarantined(copy) as repo, safegit.ObjectReader(repo) as reader:
            head = _contents(safegit.commit_files(reader, commit, under))
            return head != _contents(workcopy.working_files(copy, repo, under))
    except (safegit.GitError, OSError):
        return True


def _contents(files: Iterable[tuple[str, str, bytes]]) -> set[tuple[str, str, str]]:
    return {(rel, mode, hashlib.sha256(data).hexdigest()) for rel, mode, data in files}


def origin_url(root: str) -> str | None:
    """`remote.origin.url` of the repository holding the workspace, or None (no repository, no origin).
    For links only: read with git's own config parser, never a program the repository names."""
    from state.code import safegit, workcopy

    copy = workcopy.find_working_copy(root)
    if copy is None:
        return None
    try:
        found = safegit.run(copy.common_dir, "config", "--get", "remote.origin.url", timeout=10)
    except (safegit.GitError, OSError):
        return None
    return found.decode(errors="replace").strip() or None
