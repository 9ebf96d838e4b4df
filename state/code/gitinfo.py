"""Which git commit the desired state is at, for plans and the audit log."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from state.code.workcopy import WorkingCopy

CONFIG_LIMIT = 1 << 20
"""A repository's config larger than this was not written by git: no origin is read from it."""
_ORIGIN_SECTION = re.compile(r'^\s*\[\s*remote\s+"origin"\s*\]\s*(?:[#;].*)?$', re.I)
"""The section's name is case-insensitive in git (the subsection's, "origin", is not)."""
_URL = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.I)


@dataclass(frozen=True)
class GitInfo:
    commit: str
    """Full SHA of HEAD, or "none" when the workspace is not in a git repository."""
    dirty: bool


def desired_commit(root: str, shared: Iterable[str] = ()) -> GitInfo:
    """HEAD of the repository holding the workspace, and whether the workspace's files (and the `shared`
    files it includes, relative to `root`) differ from it.

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
    files = [os.path.relpath(os.path.realpath(os.path.join(root, file)), copy.root) for file in shared]
    return GitInfo(commit, _differs(copy, commit, "" if under == "." else under)
                   or any(_differs(copy, commit, file, one_file=True) for file in files))


def _differs(copy: WorkingCopy, commit: str, under: str, one_file: bool = False) -> bool:
    """The working files under a directory (or the one file) against HEAD's, by content; what cannot be
    read counts as dirty."""
    from state.code import safegit, workcopy

    tree = posixpath.dirname(under) if one_file else under
    try:
        with workcopy.quarantined(copy) as repo, safegit.ObjectReader(repo) as reader:
            head = _contents(e for e in safegit.commit_files(reader, commit, tree) if not one_file or e[0] == under)
            return head != _contents(workcopy.working_files(copy, repo, under))
    except (safegit.GitError, OSError):
        return True


def _contents(files: Iterable[tuple[str, str, bytes]]) -> set[tuple[str, str, str]]:
    return {(rel, mode, hashlib.sha256(data).hexdigest()) for rel, mode, data in files}


def repository_root(path: str | os.PathLike[str]) -> Path | None:
    """The working tree of the git repository holding `path` (searching upwards, like git), or None."""
    from state.code import workcopy

    copy = workcopy.find_working_copy(path)
    return None if copy is None else copy.root


def changed_since(repository: Path, ref: str, timeout: float = 60.0) -> list[str]:
    """The paths (relative to the repository's root) that differ between `ref` and HEAD as `git diff
    REF...HEAD` names them: since the merge base, so what the base branch did meanwhile is not counted.
    Renames count as a deletion and an addition, so both directories are affected. Runs git in the
    user's own checkout, as CI does; `ref` is refused when git could take it for an option."""
    from specs.errors import ArgusError
    from state.code import safegit

    if not ref or ref.startswith("-") or any(not c.isprintable() or c.isspace() for c in ref):
        raise ArgusError(f"--changed-from {ref!r}: not a git revision; give a branch, tag or commit, e.g. origin/main")
    command = ["git", "-C", str(repository), "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
               "--no-textconv", f"{ref}...HEAD", "--"]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                              env=safegit.git_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ArgusError(f"git diff {ref}...HEAD in {repository} failed: {err}") from err
    if done.returncode:
        why = safegit.last_line(done.stderr.decode(errors="replace"))
        raise ArgusError(f"git diff {ref}...HEAD in {repository} failed: {why}. Is {ref!r} fetched? In CI, check "
                         "out with the history (actions/checkout's fetch-depth: 0).")
    return sorted({os.fsdecode(name) for name in done.stdout.split(b"\0") if name})


def origin_url(root: str | os.PathLike[str]) -> str | None:
    """`remote.origin.url` of the repository holding `root`, or None (no repository, no origin)."""
    from state.code import workcopy

    copy = workcopy.find_working_copy(root)
    return None if copy is None else configured_origin(copy)


def configured_origin(copy: WorkingCopy) -> str | None:
    """The url of [remote "origin"] in the repository's config, or None. Read as data, capped: no git
    runs, so an `include.path` to a FIFO or /dev/zero, or any other setting in a checkout anyone may
    write, is never followed. May hold a user and token: for links and identities that drop them."""
    from state.code import workcopy

    try:
        config = workcopy.read_regular(copy.common_dir / "config", CONFIG_LIMIT).decode(errors="replace")
    except OSError:
        return None
    inside, found = False, None
    for line in config.splitlines():
        if line.lstrip().startswith("["):
            inside = bool(_ORIGIN_SECTION.match(line))
        elif inside and found is None and (url := _URL.match(line)):
            found = _value(url.group(1))  # the first one, as `git remote get-url` says
    return found or None


def _value(text: str) -> str:
    """A config value as git reads it: a `#` or `;` outside double quotes starts a comment; quotes are dropped."""
    value, quoted = [], False
    for char in text:
        if char == '"':
            quoted = not quoted
        elif char in "#;" and not quoted:
            break
        else:
            value.append(char)
    return "".join(value).strip()


def root_commit(root: str) -> str | None:
    """The first commit of the history HEAD descends from along first parents: what stays the same for every
    clone of a repository, whatever its remotes and however many unrelated histories were merged in since.
    None outside git, without a commit, or in a shallow clone (its first commit is not there). git runs in a
    quarantine over the working copy's objects (state.code.workcopy), never in the working copy itself."""
    from state.code import safegit, workcopy

    copy = workcopy.find_working_copy(root)
    if copy is None:
        return None
    try:
        head = workcopy.head_commit(copy)
        with workcopy.quarantined(copy) as repo:
            found = safegit.run(repo, "rev-list", "--first-parent", "--max-parents=0", head, timeout=30).split()
    except (workcopy.NotAWorkingCopy, safegit.GitError, OSError):
        return None
    return found[-1].decode() if len(found) == 1 and safegit.OID.match(found[-1].decode()) else None
