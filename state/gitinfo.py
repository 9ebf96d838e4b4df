"""Which git commit the desired state is at, for plans and the audit log."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GitInfo:
    commit: str
    """Full SHA of HEAD, or "none" when the workspace is not in a git repository."""
    dirty: bool


def desired_commit(root: str) -> GitInfo:
    import git  # imported here: validate and --help must not pay for gitpython

    try:
        repo = git.Repo(root, search_parent_directories=True)
        commit = repo.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return GitInfo("none", False)
    return GitInfo(commit, repo.is_dirty(untracked_files=True, path=root))
