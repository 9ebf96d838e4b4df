"""`argus serve --git-pull`: bring the serving checkout up to its upstream, by fast-forward only.

The checkout is the operator's clone of the reviewed branch. A dirty or diverged one means someone
is working in it: it is reported and left alone, never merged, reset or applied.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from state.code import safegit

PULL_TIMEOUT = 120.0


@dataclass(frozen=True)
class Pulled:
    ok: bool
    """True when the checkout now equals its upstream (fast-forwarded, or already there)."""
    message: str
    before: str = ""
    after: str = ""


def pull(directory: Path, timeout: float = PULL_TIMEOUT) -> Pulled:
    """Fetch the upstream and fast-forward to it; nothing changes unless that is all it takes."""
    top, git_dir = _repository(directory, timeout)
    run = _runner(git_dir, top, timeout)
    try:
        upstream = run("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}").strip()
    except safegit.GitError:
        return Pulled(False, f"the checkout at {top} has no upstream branch: `git branch -u origin/main` there")
    run("fetch", "--quiet", "--no-tags")  # the current branch's own remote, whatever its name
    before = run("rev-parse", "HEAD").strip()
    dirty = run("status", "--porcelain", "--untracked-files=all")
    if dirty.strip():
        return Pulled(False, f"the checkout at {top} has uncommitted or untracked files: not pulled, not applied",
                      before, before)
    ahead, behind = (int(n) for n in run("rev-list", "--left-right", "--count", f"HEAD...{upstream}").split())
    if ahead:
        return Pulled(False, f"the checkout at {top} has {ahead} commit(s) that {upstream} lacks (diverged): "
                             "not pulled, not applied", before, before)
    if behind:
        run("merge", "--ff-only", "--quiet", upstream)
    after = run("rev-parse", "HEAD").strip()
    return Pulled(True, f"fast-forwarded {before[:12]}..{after[:12]}" if behind else "up to date", before, after)


def untracked(directory: Path, files: list[str], timeout: float = PULL_TIMEOUT) -> list[str]:
    """Of the spec files argus read (relative to `directory`), those git does not track: an ignored
    file is invisible to `git status`, but the loader reads every *.yaml on disk."""
    top, git_dir = _repository(directory, timeout)
    paths = [str((directory / f).resolve().relative_to(top.resolve())) for f in files]
    tracked = set(_runner(git_dir, top, timeout)("ls-files", "-z", "--", *paths).split("\0")) if paths else set()
    return sorted(f for f, p in zip(files, paths, strict=True) if p not in tracked)


def _repository(directory: Path, timeout: float) -> tuple[Path, Path]:
    """The checkout's top directory and its git directory, in one discovery."""
    top, git_dir = _git(directory, "rev-parse", "--show-toplevel", "--absolute-git-dir", timeout=timeout).splitlines()
    return Path(top), Path(git_dir)


def _runner(git_dir: Path, work_tree: Path, timeout: float):
    def run(*args: str) -> str:
        return safegit.run(git_dir, *args, work_tree=work_tree, timeout=timeout).decode(errors="replace")
    return run


def _git(directory: Path, *args: str, timeout: float) -> str:
    """Discovery of the checkout's own repository: the operator's, so discovery is what is meant."""
    done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=timeout,
                          env=safegit.git_env(), stdin=subprocess.DEVNULL)
    if done.returncode:
        raise safegit.GitError(safegit.last_line(done.stderr) or f"{directory} is not a git checkout")
    return done.stdout
