"""Code sources: a CodeSnapshot's git ref or working copy, resolved to a commit and a content digest.

The digest covers sorted (path, git mode, sha256 of content) and is the same whether computed from
git objects (at plan time, before anything is exported) or from a directory on disk (to verify a
snapshot), so a plan can name the exact content a job will run.

Specs are data and the shared filesystem is hostile: git runs only as state.code.safegit runs it, and
argus's git cache on the shared root is used only while it looks exactly as argus made it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

from specs.address import Address
from specs.diagnostics import Diagnostic
from specs.errors import ArgusError
from specs.kinds import git_urls
from specs.kinds.models import CodeSnapshot, GitSource
from state.code import safegit
from state.code.workcopy import (
    SMALL,
    NotAWorkingCopy,
    disk_entry,
    head_commit,
    open_working_copy,
    quarantined,
    read_regular,
    working_files,
)
from state.observed import SourceState

DEFAULT_FETCH_TIMEOUT = 300.0
"""Seconds a fetch may take: a first clone of a large repository needs minutes."""
REMOTE_HEAD = "refs/argus/remote-head"
"""Where the source's own HEAD is kept in the cache: `ref: HEAD` means the source's, not the cache's."""
FETCH_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", f"+HEAD:{REMOTE_HEAD}")
CACHE_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
CACHE_HEAD = b"ref: refs/heads/main\n"
CACHE_ENTRIES = frozenset({"HEAD", "config", "objects", "refs", "packed-refs"})
"""All a cache argus made ever holds: no hooks, no info/, no logs, nothing else that changes git."""
_PACKED_REF = re.compile(rb"^[0-9a-f]{40} refs/(heads|tags|argus)/[^\x00-\x20\x7f~^:?*\[\\]+$")
_ABBREVIATED = re.compile(r"^[0-9a-fA-F]{4,40}$")

Entry = safegit.Entry


def resolve_source(snapshot: CodeSnapshot, workspace_root: str, shared_root: str,
                   fetch_timeout: float = DEFAULT_FETCH_TIMEOUT) -> SourceState:
    field = "git.url" if snapshot.git else "path"
    try:
        if snapshot.git is not None:
            return _resolve_git(snapshot, snapshot.git, workspace_root, shared_root, fetch_timeout)
        return _resolve_path(snapshot, workspace_root)
    except NotAWorkingCopy as err:
        return unresolved(snapshot, "path", str(err))
    except safegit.GitError as err:
        return unresolved(snapshot, field, f"git failed: {err}")
    except OSError as err:
        return unresolved(snapshot, field, f"cannot read the source: {err}")


def entries(snapshot: CodeSnapshot, source: SourceState, workspace_root: str, shared_root: str) -> Iterator[Entry]:
    """The files of the resolved source, from git objects (or the working tree when dirty)."""
    try:
        if snapshot.git is not None:
            yield from _cached_commit_files(locate(snapshot.git.url, workspace_root), source.commit or "",
                                            shared_root)
            return
        copy = open_working_copy(locate(snapshot.path or "", workspace_root))
        with quarantined(copy) as repo:
            if source.dirty:
                yield from working_files(copy, repo)
                return
            with safegit.ObjectReader(repo) as reader:
                yield from safegit.commit_files(reader, source.commit or "")
    except (safegit.GitError, NotAWorkingCopy, OSError) as err:
        raise ArgusError(f"code.{snapshot.name}: cannot read its source ({err}); run `argus plan` again") from err


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
                yield disk_entry(path, rel)


def locate(location: str, workspace_root: str) -> str:
    """A relative local path is taken from the workspace root; URLs are left as they are."""
    if "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location) or os.path.isabs(location):
        return location
    return str((Path(workspace_root) / location).resolve())


def checked_cache(shared_root: str, url: str) -> Path:
    """argus's bare cache of a source, discarded and made again unless it is exactly as argus made it.

    Any Ray job can write to the shared root: a planted hook, config or alternates file must never
    be used. It is only a cache: the next fetch fills it again.
    """
    cache = Path(shared_root) / ".argus" / "git" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"
    if _is_ours(cache):
        return cache
    if os.path.lexists(cache):
        _discard(cache)
    _create(cache)
    if not _is_ours(cache):
        raise safegit.GitError(f"argus's git cache {cache} is changed by someone else while argus makes it; "
                               "check who writes under .argus/ on the shared root")
    return cache


def _resolve_git(snapshot: CodeSnapshot, source: GitSource, workspace_root: str, shared_root: str,
                 timeout: float) -> SourceState:
    url = locate(source.url, workspace_root)
    token = _token(source)
    if token is None and source.token is not None:
        variable = git_urls.token_variable(source.url)
        return unresolved(snapshot, "git.token", f"{variable} is not set: export it where argus runs (plan and "
                                                 f"apply), holding the token for {source.url}")
    cache = checked_cache(shared_root, url)
    with safegit.quarantine(cache / "objects", packed_refs=_cached_refs(cache)) as repo:
        try:
            _fetch(repo, url, timeout, _auth(source.url, token))
        except safegit.GitTimeout:
            return unresolved(snapshot, "git.url", f"git fetch did not finish within {timeout:g} s and was stopped: "
                               f"check that {source.url} is reachable from here, or give a first clone of a large "
                               "repository more time with --fetch-timeout")
        _keep_refs(repo, cache)
        commit = _commit_of(repo, source.ref)
        if commit is None:
            return unresolved(snapshot, "git.ref", f"ref {source.ref!r} not found in {source.url}: give a tag, "
                               "branch or a commit reachable from one")
        with safegit.ObjectReader(repo) as reader:
            return _state(commit, safegit.commit_files(reader, commit))


def _token(source: GitSource) -> str | None:
    """The token the spec's `${env:GIT_TOKEN_<HOST>}` names (the model checked the name), or None."""
    if source.token is None:
        return None
    return os.environ.get(git_urls.token_variable(source.url)) or None


def _auth(url: str, token: str | None) -> tuple[tuple[str, str], ...]:
    if token is None:
        return ()
    scope, user = git_urls.token_scope(url)
    return safegit.auth_config(scope, user, token)


def _fetch(repo: Path, url: str, timeout: float, auth: tuple[tuple[str, str], ...]) -> None:
    """Every ref of the source into the cache; a token (in `auth`) is kept out of any message of git's."""
    try:
        # `--` before the URL: whatever the spec says, git never reads it as an option.
        safegit.run(repo, "fetch", "--quiet", "--prune", "--no-auto-gc", "--no-recurse-submodules", "--", url,
                    *FETCH_REFSPECS, timeout=timeout, config=auth)
    except safegit.GitTimeout:
        raise
    except safegit.GitError as err:
        if not auth:
            raise
        message = str(err)
        for secret in _auth_secrets(auth):
            message = message.replace(secret, "<redacted>")
        raise safegit.GitError(message) from None


def _auth_secrets(auth: tuple[tuple[str, str], ...]) -> list[str]:
    """The header's encoded credentials and the token they decode to: neither may be shown."""
    encoded = [value.rsplit(" ", 1)[-1] for key, value in auth if key.endswith(".extraHeader")]
    decoded = [base64.b64decode(e).decode(errors="replace").split(":", 1)[-1] for e in encoded]
    return [*encoded, *decoded]


def _resolve_path(snapshot: CodeSnapshot, workspace_root: str) -> SourceState:
    """Dirty or not is decided by content digests, never by `git status`: that would run the
    working copy's fsmonitor and clean filters, which anyone who can write to it may have set."""
    where = locate(snapshot.path or "", workspace_root)
    copy = open_working_copy(where)
    commit = head_commit(copy)
    with quarantined(copy) as repo, safegit.ObjectReader(repo) as reader:
        head = _state(commit, safegit.commit_files(reader, commit))
        work = _state(commit, working_files(copy, repo), dirty=True)
    if work.digest == head.digest:
        return head
    if not snapshot.allow_dirty:
        return unresolved(snapshot, "path", f"{where} has uncommitted changes: commit them, or set "
                           "`allow_dirty: true` to snapshot the working files as they are", commit=commit, dirty=True)
    return work


def unresolved(snapshot: CodeSnapshot, field: str, message: str, **known: Any) -> SourceState:
    """Why the source does not resolve, blaming one field of the snapshot's spec (located by the planner)."""
    error = Diagnostic(severity="error", address=Address.code(snapshot.name), field=field, message=message)
    return SourceState(error=error, **known)


def _state(commit: str, files: Iterable[Entry], dirty: bool = False) -> SourceState:
    found = [(rel, mode, hashlib.sha256(data).hexdigest(), len(data)) for rel, mode, data in files]
    return SourceState(commit=commit, dirty=dirty, digest=digest_of((p, m, s) for p, m, s, _ in found),
                       files=len(found), bytes=sum(n for *_, n in found))


def _commit_of(repo: Path, ref: str) -> str | None:
    """The commit a ref names; a commit id only if a branch or tag of the source holds it (an object
    planted in the cache is not the source's)."""
    try:
        name = REMOTE_HEAD if ref == "HEAD" else ref
        commit = safegit.run(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")
        commit = commit.decode().strip()
        if _ABBREVIATED.match(ref):
            holders = safegit.run(repo, "for-each-ref", "--count=1", "--contains", commit, "--format=%(refname)")
            return commit if holders.strip() else None
    except safegit.GitError:
        return None
    return commit


def _cached_commit_files(url: str, commit: str, shared_root: str) -> Iterator[Entry]:
    cache = checked_cache(shared_root, url)
    with safegit.quarantine(cache / "objects") as repo, safegit.ObjectReader(repo) as reader:
        yield from safegit.commit_files(reader, commit)


def _cached_refs(cache: Path) -> bytes:
    """The refs the last fetch left, as data: they only tell the server what argus already has."""
    try:
        text = read_regular(cache / "packed-refs", 64 << 20)
    except OSError:
        return b""
    return b"".join(line + b"\n" for line in text.splitlines() if _PACKED_REF.match(line) and b".." not in line)


def _keep_refs(repo: Path, cache: Path) -> None:
    listed = safegit.run(repo, "for-each-ref", "--format=%(objectname) %(refname)")
    tmp = cache.with_name(f".refs-{cache.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(listed)
    os.replace(tmp, cache / "packed-refs")


def _is_ours(cache: Path) -> bool:
    try:
        if not stat.S_ISDIR(cache.lstat().st_mode) or not {p.name for p in cache.iterdir()} <= CACHE_ENTRIES:
            return False
        if not all(stat.S_ISDIR((cache / d).lstat().st_mode) for d in ("objects", "refs")):
            return False
        if read_regular(cache / "config", SMALL) != CACHE_CONFIG or read_regular(cache / "HEAD", SMALL) != CACHE_HEAD:
            return False
        info = cache / "objects" / "info"  # alternates, http-alternates, commit-graphs: none of argus's
        return not os.path.lexists(info) or (stat.S_ISDIR(info.lstat().st_mode) and not any(info.iterdir()))
    except OSError:
        return False


def _create(cache: Path) -> None:
    """Built beside its place and renamed into it, so no other argus sees half a cache."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".tmp-{cache.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    for folder in ("objects/pack", "objects/info", "refs"):
        (tmp / folder).mkdir(parents=True)
    (tmp / "config").write_bytes(CACHE_CONFIG)
    (tmp / "HEAD").write_bytes(CACHE_HEAD)
    try:
        os.rename(tmp, cache)
    except OSError:  # another argus made it first
        _remove(tmp)


def _discard(cache: Path) -> None:
    aside = cache.with_name(f".discarded-{cache.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with suppress(FileNotFoundError):  # another argus discarded it first
        os.rename(cache, aside)
        _remove(aside)


def _remove(path: Path) -> None:
    """rmtree that first makes directories writable again, never following a planted symlink."""
    if path.is_symlink():
        path.unlink()
        return
    for folder, dirs, _ in os.walk(path):
        for name in [".", *dirs]:
            target = Path(folder) / name
            if not target.is_symlink():
                with suppress(OSError):
                    os.chmod(target, 0o755)
    shutil.rmtree(path, ignore_errors=True)
