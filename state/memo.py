"""argus's memo: per-job work kept between plans, keyed by the content of everything the work read.

A plan does the same work for every unchanged spec every time (parse, validate, scan for secrets, compose a verl
job's config against its snapshot). The memo keeps each result under a key made of the bytes the work read and of
argus's own code (code(), below): a key can only be asked for with exactly the inputs that produced its value, so a
value found is the value the work would give again. What it guards against, and how:
- stale: no entry is ever found stale; a changed input is another key (the old entry is dropped when saved);
- missing, truncated, unreadable: a miss, and the work is done again;
- forged or swapped: the pack carries an HMAC-SHA256 over its bytes with a key only this user can read
  (`memo.key`, 0600, in argus's private cache: state.code.cache); a pack that fails it is never unpickled.
So a memo can only cost time, never change a result. One pack per (what, workspace), read once and written once
(atomic rename; the last of two concurrent writers wins, which costs the other's entries only time).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pickle
import secrets
import stat as stat_module
import sys
from functools import cache
from pathlib import Path
from typing import Any

from state.files import write_atomic

MAGIC = b"ARGUS-MEMO-1\n"
KEY_FILE = "memo.key"
DIRECTORY = "memo-v1"
KEY_BYTES = 32


class Memo:
    """One pack of entries: get and put by key, then save once. Entries not asked for are dropped on save, so a
    pack holds what the last plan of its workspace used, not everything ever planned."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None, name: str) -> None:
        """`cache_dir` None (no cache could be had): a memo that keeps nothing."""
        self._folder = Path(cache_dir or ".") / DIRECTORY / code()[:16]
        self._path = self._folder / f"{name}.pack"
        self._secret = _secret(Path(cache_dir)) if cache_dir is not None else None
        self._binding = f"{code()}\0{name}\0".encode()  # a pack moved to another argus's or workspace's place
        self._entries: dict[str, Any] = _read(self._path, self._secret, self._binding) if self._secret else {}
        self._used: dict[str, Any] = {}
        self.hits = self.misses = 0

    def get(self, key: str) -> Any | None:
        """The value kept under `key`, shared with every other get of it: values are read, never changed (one
        pickle for the whole pack loads in a fraction of the time of one per entry)."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._used[key] = found
        return found

    def put(self, key: str, value: Any) -> None:
        self._used[key] = value

    def save(self) -> None:
        """Write what this plan used, when it differs from what was read; a write that fails only costs time."""
        if self._secret is None or not self._used or self._used.keys() == self._entries.keys():
            return
        payload = pickle.dumps(self._used, protocol=pickle.HIGHEST_PROTOCOL)
        with contextlib.suppress(OSError):
            self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(self._path, MAGIC + _mac(self._secret, self._binding + payload) + payload, durable=False)
        self._entries = dict(self._used)


def key_of(*parts: str | bytes) -> str:
    """One key from the parts a result was made of, each length-prefixed (no two part lists share a key)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


@cache
def code() -> str:
    """argus as installed (where, which version, each source or compiled file's name, size, times and inode:
    reading them all would cost a small plan 5%) and the libraries that decide what a spec means and how a verl
    config composes: a new, moved or edited argus is a new memo."""
    digest = hashlib.sha256()
    base = Path(__file__).resolve().parents[1]
    installed = _installed(("argus_ray", "hydra_core", "omegaconf", "pydantic", "pydantic_core", "ruamel_yaml",
                            "pyyaml"))
    digest.update(f"{base}\0{installed}\0{sys.version}\0".encode())
    for floor in ("specs", "state", "reconcile"):
        for path in sorted((base / floor).rglob("*.py*")):
            if "__pycache__" in path.parts:
                continue  # compiled beside the sources, again whenever Python likes (a sourceless install's are not)
            stat = path.stat()
            digest.update(f"{path.relative_to(base)}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}\0"
                          f"{stat.st_ino}\n".encode())
    return digest.hexdigest()


def _installed(distributions: tuple[str, ...]) -> list[str]:
    """The dist-info folders of these distributions on sys.path (`hydra_core-1.3.2.dist-info`): their versions, as
    the installer wrote them, without importlib.metadata (importing it costs a small plan 40 ms)."""
    wanted = tuple(f"{name.lower()}-" for name in distributions)
    found = []
    for folder in sys.path:
        with contextlib.suppress(OSError), os.scandir(folder or ".") as entries:
            found += [entry.name for entry in entries
                      if entry.name.endswith(".dist-info") and entry.name.lower().startswith(wanted)]
    return sorted(found)


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def _read(path: Path, secret: bytes, binding: bytes) -> dict[str, Any]:
    try:  # never a FIFO's wait, nor a link's target
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read() if stat_module.S_ISREG(os.fstat(handle.fileno()).st_mode) else b""
    except OSError:
        return {}
    head, mac, payload = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if head != MAGIC or not hmac.compare_digest(mac, _mac(secret, binding + payload)):
        return {}  # not argus's own, or not whole: never unpickled
    try:
        entries = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - a pack of an argus whose classes moved: only a miss
        return {}
    return {key: value for key, value in entries.items() if isinstance(key, str)} if isinstance(entries, dict) else {}


@cache
def _secret(cache_dir: Path) -> bytes | None:
    """This user's memo key, made on first use; None when it cannot be had (no memo then, only slower plans): a
    cache folder others own or may write (they could swap packs), or a key others could know."""
    try:
        folder = os.stat(cache_dir, follow_symlinks=False)
    except OSError:
        return None
    if not stat_module.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid() or folder.st_mode & 0o022:
        return None
    for _ in range(2):  # a key file left empty by an argus that died making it is made again, once
        _make_key(cache_dir / KEY_FILE)
        key = _read_key(cache_dir / KEY_FILE)
        if key != b"":
            return key
        with contextlib.suppress(OSError):
            (cache_dir / KEY_FILE).unlink()
    return None


def _make_key(path: Path) -> None:
    with contextlib.suppress(OSError):  # FileExistsError: made before
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))


def _read_key(path: Path) -> bytes | None:
    """The key; b"" for a short key file of ours (to be made again); None for one nobody may trust."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(KEY_BYTES + 1)
    except OSError:
        return None
    if not stat_module.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077 \
            or info.st_nlink != 1:
        return None  # another's, readable by others, or linked from elsewhere
    if len(key) != KEY_BYTES:
        return b"" if len(key) < KEY_BYTES else None
    return key
