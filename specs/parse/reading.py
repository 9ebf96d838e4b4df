"""Which files of a workspace argus reads, and how: every spec file is hostile input.

A pull request's author (or whatever lies on a developer's machine when the pre-commit hook runs)
controls every file under the workspace. `argus validate` must answer with located diagnostics; it
must never block on a FIFO, stream /dev/zero, read outside the workspace, or parse without bound.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from specs.diagnostics import Diagnostic

WORKSPACE_FILE = "argus.yaml"
STATE_DIR = ".argus"
"""argus's own state directory: a directory holding one (other than the root) is a shared root."""
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 32 * 1024
"""Real specs are a few KB. Loading reads ~100 KiB/s of real specs here and ~40 KiB/s of ruamel's slowest
input (a long list of tiny items): a file at the cap loads in 0.3 s, 0.8 s at worst (bench/loader_cap.py)."""
MAX_FILES = 10_000
MAX_TOTAL_BYTES = 16 * 1024 * 1024
"""Bounds one validate to a couple of minutes, whatever a pull request adds (5,000 jobs take ~3 MB)."""

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


@dataclass(frozen=True)
class SpecFile:
    """One file to read: `rel` is what diagnostics name, `path` what is opened (a symlink's target)."""

    rel: str
    path: Path


class Walk:
    """The workspace's spec files, shallowest first, each read once and within bounds.

    Shallowest first so that a Cluster's spec is normally read before anything under its relative
    shared root, which `exclude` then keeps unlisted. Pruned, never listed: hidden directories,
    nested workspaces (a directory holding argus.yaml), directories holding argus's `.argus/`
    state, excluded shared roots. Directory symlinks are never followed.
    """

    def __init__(self, root: Path, diagnostics: list[Diagnostic]):
        self.root = root
        self.diagnostics = diagnostics
        self.excluded: list[Path] = []
        self.read_files: dict[str, SpecFile] = {}
        self._bytes = 0
        self._stopped = False

    def files(self) -> Iterator[SpecFile]:
        """Level by level; `exclude` may be called between two files and is obeyed from then on."""
        level = [self.root]
        while level and not self._stopped:
            deeper: list[Path] = []
            for folder in level:
                if not self._is_excluded(folder):  # checked late: a cluster read a moment ago counts
                    yield from self._listing(folder, deeper)
            level = deeper

    def exclude(self, directory: Path) -> list[str]:
        """Never list `directory` (resolved); return what was read under it or sits at its top as specs."""
        self.excluded.append(directory)
        read = [f.rel for f in self.read_files.values() if self._under(f.path, directory)]
        return read + self._specs_at_top(directory)

    def in_excluded(self, rel: str) -> bool:
        """Whether the file `rel` (or the file its link led to) lies under an excluded directory. As text, a `/`
        closing each directory: asked of every file of a workspace whose shared root lies inside it."""
        if not self.excluded:
            return False
        prefixes = tuple(f"{d}/" for d in self.excluded)
        spec = self.read_files.get(rel)
        return f"{self.root}/{rel}".startswith(prefixes) or (spec is not None and str(spec.path).startswith(prefixes))

    def read(self, spec: SpecFile) -> str | None:
        """The file's text, or None after recording why not (no blocking open, at most cap+1 bytes)."""
        if self._over_budget(spec):
            return None
        data = self._read_bytes(spec)
        if data is None:
            return None
        self.read_files[spec.rel] = spec
        self._bytes += len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data[: err.start].count(b"\n") + 1
            self._problem(spec.rel, f"not UTF-8 text (byte {err.start}): save the file as UTF-8", line)
            return None

    def other_file(self, rel: str, path: Path, info: os.stat_result) -> SpecFile | None:
        """A file from outside the walk (an included one: `path` resolved, `info` its stat), checked as the walk
        checks its own: a regular file within the size cap, else None after recording why."""
        return self._plain_file(rel, path, info)

    def _listing(self, folder: Path, deeper: list[Path]) -> Iterator[SpecFile]:
        try:
            with os.scandir(folder) as listed:
                entries = sorted(listed, key=lambda e: e.name)
        except OSError as err:
            self._problem(self._rel(folder), f"cannot list the directory: {err.strerror or err}")
            return
        prefix = "" if folder == self.root else f"{self._rel(folder)}/"  # once per folder, not per file
        for entry in entries:
            if entry.name.startswith("."):
                continue  # .git, .shared, .argus: never read, and may be huge
            if entry.is_symlink():
                found = self._symlink(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                found = None
                if not self._holds_other_workspace(path := Path(entry.path)):
                    deeper.append(path)
            elif _is_spec(entry.name):
                found = self._plain_file(prefix + entry.name, Path(entry.path), entry.stat(follow_symlinks=False))
            else:
                found = None
            if found is not None:
                yield found

    def _plain_file(self, rel: str, path: Path, info: os.stat_result) -> SpecFile | None:
        return SpecFile(rel, path) if self._regular_and_small(rel, info) else None

    def _symlink(self, link: Path) -> SpecFile | None:
        """A link is read only as a regular file inside the workspace, outside every pruned directory."""
        rel = self._rel(link)
        target = Path(os.path.realpath(link))
        try:
            info = os.stat(target)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            self._directory_link(rel, target)
            return None
        if not _is_spec(link.name):
            return None
        if not self._inside(target):
            self._problem(rel, f"a symlink to {target}, outside the workspace: argus reads only files inside "
                               "the workspace; copy the file in, or remove the link")
        elif info is None:
            self._problem(rel, f"a symlink to {self._rel(target)}, which does not exist (or loops): fix or "
                               "remove the link")
        elif self._pruned(target.parent):
            self._problem(rel, f"a symlink to {self._rel(target)}, in a directory argus never reads (hidden, "
                               "a nested workspace or a shared root): move the spec out of it")
        elif self._regular_and_small(rel, info):
            return SpecFile(rel, target)
        return None

    def _directory_link(self, rel: str, target: Path) -> None:
        """A link to a directory read anyway is harmless; one to elsewhere would hide specs silently."""
        if (target == self.root or self._inside(target)) and not self._pruned(target):
            return
        where = self._rel(target) if self._inside(target) else str(target)
        self._problem(rel, f"a symlink to the directory {where}, which argus does not read: argus never "
                           "follows directory symlinks; move the specs into the workspace, or remove the link")

    def _regular_and_small(self, rel: str, info: os.stat_result) -> bool:
        if not stat.S_ISREG(info.st_mode):
            self._problem(rel, f"not a regular file ({_kind(info.st_mode)}): argus reads only regular files; "
                               "remove it, or rename it so it does not end in .yaml")
            return False
        if info.st_size > MAX_FILE_BYTES:
            self._too_big(rel, f"{info.st_size} bytes")
            return False
        return True

    def _read_bytes(self, spec: SpecFile) -> bytes | None:
        # O_NONBLOCK: if the file was swapped for a FIFO since it was checked, opening it does not wait.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(spec.path, flags)
        except OSError as err:
            self._problem(spec.rel, f"cannot read the file: {err.strerror or err}")
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self._problem(spec.rel, "not a regular file any more: argus reads only regular files")
                return None
            data = read_at_most(fd, MAX_FILE_BYTES + 1)
        except OSError as err:
            self._problem(spec.rel, f"cannot read the file: {err.strerror or err}")
            return None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            self._too_big(spec.rel, "more than that")
            return None
        return data

    def _over_budget(self, spec: SpecFile) -> bool:
        if self._stopped:
            return True
        if len(self.read_files) < MAX_FILES and self._bytes < MAX_TOTAL_BYTES:
            return False
        self._stopped = True
        self._problem(spec.rel, f"the workspace holds more than {MAX_FILES} spec files or "
                                f"{MAX_TOTAL_BYTES // 2**20} MiB of them: argus stopped reading here; "
                                "move what is not a spec out of the workspace, or split it into several")
        return True

    def _too_big(self, rel: str, size: str) -> None:
        self._problem(rel, f"the file is too big ({size}); a spec file is at most {MAX_FILE_BYTES // 1024} KiB: "
                           "split it into several files")

    def _holds_other_workspace(self, folder: Path) -> bool:
        """Its own argus.yaml (a file), or argus's state directory: an empty `.argus` file or an
        `argus.yaml` directory is no reason to drop the specs beside it."""
        marker, state = folder / WORKSPACE_FILE, folder / STATE_DIR
        return (os.path.lexists(marker) and not marker.is_dir()) or (state.is_dir() and not state.is_symlink())

    def _pruned(self, folder: Path) -> bool:
        """Whether a walk from the root skips `folder` (resolved): it, or a directory above it, is pruned."""
        while folder != self.root and self._inside(folder):
            if folder.name.startswith(".") or self._holds_other_workspace(folder) or self._is_excluded(folder):
                return True
            folder = folder.parent
        return False

    def _specs_at_top(self, directory: Path) -> list[str]:
        """Names only, never read: argus writes no spec-like file at the top of a shared root, a user might."""
        try:
            with os.scandir(directory) as listed:
                names = [e.name for e in listed if _is_spec(e.name) and not e.name.startswith(".")]
            return sorted(self._rel(directory / name) for name in names)
        except OSError:
            return []

    def _is_excluded(self, folder: Path) -> bool:
        return any(folder == d or self._under(folder, d) for d in self.excluded)

    def _inside(self, path: Path) -> bool:
        return self._under(path, self.root)

    @staticmethod
    def _under(path: Path, directory: Path) -> bool:
        """`directory in path.parents`, part by part without building each parent (called per file)."""
        inner, outer = path.parts, directory.parts
        return len(inner) > len(outer) and inner[:len(outer)] == outer

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path == self.root or self._inside(path) else str(path)

    def _problem(self, rel: str, message: str, line: int = 1) -> None:
        self.diagnostics.append(Diagnostic.in_file(rel, line, "", message))


def folder_is_state(folder: Path) -> bool:
    """`folder/.argus` is a real directory: argus's state lives in `folder` (a shared root)."""
    try:
        return stat.S_ISDIR(os.lstat(folder / STATE_DIR).st_mode)
    except OSError:
        return False


def _is_spec(name: str) -> bool:
    return name.endswith(SPEC_SUFFIXES)


def _kind(mode: int) -> str:
    return next((name for check, name in _KINDS if check(mode)), "not a regular file")


def read_at_most(fd: int, limit: int) -> bytes:
    """A read may return less than asked (NFS): read on until the limit or the end."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
