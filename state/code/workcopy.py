"""A local git working copy read as data: its HEAD commit and its files, without running its config.

The working copy may sit on the shared filesystem, where any Ray job can write: its `.git/config`
may set core.fsmonitor or a clean filter that `git status` would run. So nothing here runs git in
it: HEAD and refs are read as files, and the file list comes from `git ls-files` in a quarantine
(state.code.safegit) that borrows only the working copy's objects, index and ignore rules.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from state.code import safegit

SMALL = 1 << 16
"""HEAD, a .git file, a ref: anything larger was not written by git."""
PACKED_REFS_LIMIT = 64 << 20
_REF_NAME = re.compile(r"^refs/[^\x00-\x20\x7f~^:?*\[\\]+$")


class NotAWorkingCopy(Exception):
    """The path is not a git working copy argus can read; the message says why and what to do."""


@dataclass(frozen=True)
class WorkingCopy:
    root: Path
    """The working tree."""
    git_dir: Path
    """Its .git directory (or where a `.git` file points, for a linked worktree)."""
    common_dir: Path
    """Where objects and branches live: git_dir, or the main repository's of a linked worktree."""


def open_working_copy(where: str | Path) -> WorkingCopy:
    """The working copy at exactly `where`; a bare repository is refused (it has no files to snapshot)."""
    root = Path(where)
    dot = root / ".git"
    if dot.is_dir():
        git_dir = dot
    elif dot.is_file():
        pointer = read_regular(dot, SMALL).decode(errors="replace").strip()
        if not pointer.startswith("gitdir: "):
            raise NotAWorkingCopy(f"{where}: its .git file does not point to a git directory")
        git_dir = root / pointer.removeprefix("gitdir: ").strip()
    elif (root / "HEAD").is_file() and (root / "objects").is_dir():
        raise NotAWorkingCopy(f"{where} is a bare git repository, not a working copy: `path:` snapshots the files "
                              "of a checkout; for a repository write `git: {url: ..., ref: ...}`")
    else:
        raise NotAWorkingCopy(f"{where} is not a git working copy with a commit")
    common = git_dir / "commondir"
    if common.is_file():
        return WorkingCopy(root, git_dir, git_dir / read_regular(common, SMALL).decode(errors="replace").strip())
    return WorkingCopy(root, git_dir, git_dir)


def find_working_copy(start: str | Path) -> WorkingCopy | None:
    """The working copy that holds `start` (searching upwards, like git), or None."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            try:
                return open_working_copy(folder)
            except (NotAWorkingCopy, OSError):
                return None
    return None


def head_commit(copy: WorkingCopy) -> str:
    """The commit HEAD names, read from HEAD, loose refs and packed-refs (no git runs)."""
    try:
        value = read_regular(copy.git_dir / "HEAD", SMALL).decode(errors="replace").strip()
        for _ in range(5):  # symbolic refs may chain, never loop
            if safegit.OID.match(value):
                return value
            name = value.removeprefix("ref: ").strip()
            if not value.startswith("ref: ") or not _REF_NAME.match(name) or ".." in name:
                break
            value = _ref_value(copy, name)
    except OSError as err:
        raise NotAWorkingCopy(f"{copy.root}: cannot read its HEAD ({err.strerror or err})") from err
    raise NotAWorkingCopy(f"{copy.root} is not a git working copy with a commit (HEAD names none)")


def working_files(copy: WorkingCopy, quarantine: Path, under: str = "") -> Iterator[safegit.Entry]:
    """Tracked and untracked, not ignored, files of the working tree (under a directory, if given)."""
    pathspec = ["--", under] if under else []
    listed = safegit.run(quarantine, "ls-files", "-z", "-c", "-o", "--exclude-standard", *pathspec,
                         work_tree=copy.root, extra_env={"GIT_INDEX_FILE": str(copy.git_dir / "index"),
                                                         "GIT_LITERAL_PATHSPECS": "1"})
    inside = os.path.realpath(copy.root)
    for rel in sorted({os.fsdecode(p) for p in listed.split(b"\0") if p}):
        path = copy.root / rel
        if not _stays_inside(inside, rel):
            raise safegit.GitError(f"{copy.root}: {rel!r} leads out of the working copy (a symlinked directory?)")
        if path.is_symlink() or path.is_file():
            yield disk_entry(path, rel)


@contextlib.contextmanager
def quarantined(copy: WorkingCopy) -> Iterator[Path]:
    """A quarantine (state.code.safegit) borrowing the working copy's objects and ignore rules, nothing else."""
    with safegit.quarantine(Path(os.path.abspath(copy.common_dir / "objects")), borrow=True,
                            exclude=_exclude_rules(copy)) as repo:
        yield repo


def disk_entry(path: Path, rel: str) -> safegit.Entry:
    """A file as git would store it; a FIFO or device (never in a checkout) reads as an odd mode."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return rel, "120000", os.fsencode(os.readlink(path))
    if not stat.S_ISREG(info.st_mode):
        return rel, "special", b""  # never opened: a FIFO would block argus for ever
    return rel, "100755" if info.st_mode & stat.S_IXUSR else "100644", read_regular(path)


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """A regular file's bytes; anything else (a FIFO planted on the shared filesystem) is refused unopened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise OSError(f"{path} is larger than git ever writes it")
    return data


def _ref_value(copy: WorkingCopy, name: str) -> str:
    loose = copy.common_dir / name
    if loose.is_file():
        return read_regular(loose, SMALL).decode(errors="replace").strip()
    packed = copy.common_dir / "packed-refs"
    if packed.is_file():
        for line in read_regular(packed, PACKED_REFS_LIMIT).decode(errors="replace").splitlines():
            oid, _, ref = line.partition(" ")
            if ref == name and safegit.OID.match(oid):
                return oid
    raise NotAWorkingCopy(f"{copy.root} is not a git working copy with a commit ({name} has none yet)")


def _exclude_rules(copy: WorkingCopy) -> bytes:
    """The working copy's own ignore rules (.git/info/exclude), as data."""
    try:
        return read_regular(copy.common_dir / "info" / "exclude", SMALL * 16)
    except OSError:
        return b""


def _stays_inside(inside: str, rel: str) -> bool:
    """No `..` and no symlinked directory on the way: a planted index must not make argus read
    files of the machine it runs on (and copy them into a snapshot)."""
    parts = rel.split("/")
    if os.path.isabs(rel) or ".." in parts:
        return False
    parent = os.path.join(inside, *parts[:-1])
    return os.path.realpath(parent) == os.path.normpath(parent)
