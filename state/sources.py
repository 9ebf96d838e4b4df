"""Code sources: a CodeSnapshot's git ref or working copy, resolved to a commit and a content digest.

The digest covers sorted (path, git mode, sha256 of content) and is the same whether computed from
git objects (at plan time, before anything is exported) or from a directory on disk (to verify a
snapshot), so a plan can name the exact content a job will run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from specs.models import CodeSnapshot
from state.files import write_json
from state.observed import SourceState

REMOTE_HEAD = "refs/argus/remote-head"
"""Where the source's own HEAD is kept in the cache: `ref: HEAD` means the source's, not the cache's."""
FETCH_TIMEOUT = 600

Entry = tuple[str, str, bytes]
"""(relative path, git mode, content); a symlink's content is its target."""


def resolve_source(snapshot: CodeSnapshot, workspace_root: str, shared_root: str) -> SourceState:
    import git  # imported here: validate and --help must not pay for gitpython

    try:
        if snapshot.git is not None:
            return _resolve_git(snapshot, workspace_root, shared_root)
        return _resolve_path(snapshot, workspace_root, shared_root)
    except git.GitCommandError as err:
        field = "git.url" if snapshot.git else "path"
        return SourceState(error=f"git failed: {_last_line(err.stderr) or err}", error_field=field)


def entries(snapshot: CodeSnapshot, source: SourceState, workspace_root: str, shared_root: str) -> Iterator[Entry]:
    """The files of the resolved source, from git objects (or the working tree when dirty)."""
    if source.dirty:
        yield from _working_files(locate(snapshot.path or "", workspace_root))
        return
    repo = _repo_for(snapshot, workspace_root, shared_root)
    yield from _tree_entries(repo.commit(source.commit))


def digest_of(items: Iterable[tuple[str, str, str]]) -> str:
    """sha256 over sorted (path, mode, content sha256) lines."""
    lines = (f"{path}\0{mode}\0{sha}\n" for path, mode, sha in sorted(items))
    # surrogateescape: a file name that is not UTF-8 is hashed as the bytes it is.
    return hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def directory_entries(root: Path, skip: set[str]) -> Iterator[Entry]:
    for folder, dirs, files in os.walk(root):
        links = [d for d in dirs if (Path(folder) / d).is_symlink()]  # a symlink is an entry, not a dir
        dirs[:] = sorted(set(dirs) - set(links))
        for name in [*files, *links]:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel not in skip:
                yield _disk_entry(path, rel)


def locate(location: str, workspace_root: str) -> str:
    """A relative local path is taken from the workspace root; URLs are left as they are."""
    if "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location) or os.path.isabs(location):
        return location
    return str((Path(workspace_root) / location).resolve())


def _resolve_git(snapshot: CodeSnapshot, workspace_root: str, shared_root: str) -> SourceState:
    import git

    assert snapshot.git is not None
    repo = _repo_for(snapshot, workspace_root, shared_root)
    ref = REMOTE_HEAD if snapshot.git.ref == "HEAD" else snapshot.git.ref
    try:
        commit = repo.git.rev_parse("--verify", "--end-of-options", f"{ref}^{{commit}}")
    except git.GitCommandError:
        return SourceState(error=f"ref {snapshot.git.ref!r} not found in {snapshot.git.url}: give a tag, branch "
                                 "or a commit reachable from one", error_field="git.ref")
    return _with_digest(commit, shared_root, lambda: _tree_entries(repo.commit(commit)))


def _resolve_path(snapshot: CodeSnapshot, workspace_root: str, shared_root: str) -> SourceState:
    import git

    where = locate(snapshot.path or "", workspace_root)
    try:
        repo = git.Repo(where)
        commit = repo.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return SourceState(error=f"{where} is not a git working copy with a commit", error_field="path")
    if not repo.is_dirty(untracked_files=True):
        return _with_digest(commit, shared_root, lambda: _tree_entries(repo.commit(commit)))
    if not snapshot.allow_dirty:
        return SourceState(commit=commit, dirty=True, error_field="path",
                           error=f"{where} has uncommitted changes: commit them, or set `allow_dirty: true` "
                                 "to snapshot the working files as they are")
    found = [_summary(e) for e in _working_files(where)]
    return SourceState(commit=commit, dirty=True, digest=digest_of((p, m, s) for p, m, s, _ in found),
                       files=len(found), bytes=sum(n for *_, n in found))


def _with_digest(commit: str, shared_root: str, files: Callable[[], Iterable[Entry]]) -> SourceState:
    """The digest of a commit never changes: computed once, then read from argus's cache."""
    cache = Path(shared_root) / ".argus" / "git" / "digests" / f"{commit}.json"
    if cache.exists():
        return SourceState(commit=commit, **json.loads(cache.read_text()))
    found = [_summary(e) for e in files()]
    facts = {"digest": digest_of((p, m, s) for p, m, s, _ in found), "files": len(found),
             "bytes": sum(n for *_, n in found)}
    write_json(cache, facts)
    return SourceState(commit=commit, **facts)


def _repo_for(snapshot: CodeSnapshot, workspace_root: str, shared_root: str):
    """A bare cache of the source under the shared root, fetched up to date (tags may move)."""
    import git

    if snapshot.path is not None:
        return git.Repo(locate(snapshot.path, workspace_root))
    assert snapshot.git is not None
    url = locate(snapshot.git.url, workspace_root)
    cache = Path(shared_root) / ".argus" / "git" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"
    repo = git.Repo(cache) if cache.exists() else git.Repo.init(cache, bare=True, mkdir=True)
    # Never wait for a password in CI: a source that needs credentials fails instead of hanging.
    repo.git.update_environment(GIT_TERMINAL_PROMPT="0", GIT_SSH_COMMAND="ssh -o BatchMode=yes")
    repo.git.fetch(url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", f"+HEAD:{REMOTE_HEAD}",
                   "--prune", "--quiet", kill_after_timeout=FETCH_TIMEOUT)
    return repo


def _tree_entries(commit) -> Iterator[Entry]:
    for item in commit.tree.traverse():
        if item.type == "blob":  # trees are implied by paths; submodules have no content here
            yield item.path, _git_mode(item.mode), item.data_stream.read()


def _git_mode(mode: int) -> str:
    """The three modes a checkout can reproduce (old trees also hold 100664 and the like)."""
    if stat.S_ISLNK(mode):
        return "120000"
    return "100755" if mode & 0o111 else "100644"


def _working_files(where: str) -> Iterator[Entry]:
    import git

    repo = git.Repo(where)
    listed = repo.git.ls_files("-co", "--exclude-standard", "-z").split("\0")
    for rel in sorted(p for p in listed if p):
        path = Path(where) / rel
        if path.is_symlink() or path.is_file():
            yield _disk_entry(path, rel)


def _disk_entry(path: Path, rel: str) -> Entry:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return rel, "120000", os.fsencode(os.readlink(path))
    mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    return rel, mode, path.read_bytes()


def _summary(entry: Entry) -> tuple[str, str, str, int]:
    rel, mode, data = entry
    return rel, mode, hashlib.sha256(data).hexdigest(), len(data)


def _last_line(text: str | None) -> str:
    """git's own diagnosis: its `fatal:` line, else its last words."""
    lines = [line.strip().strip("'") for line in (text or "").strip().splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("stderr: 'fatal:", "fatal:"))]
    chosen = fatal[0] if fatal else (lines[-1] if lines else "")
    return chosen.removeprefix("stderr: ").strip("'")
