"""The admission queue of a cluster on its shared root: .argus/queue/<workspace>.json per workspace.

Every workspace using a cluster reads every ledger there (to respect the others' places and their
admitted runs' demand) and writes only its own. Admissions are decided under one short lock per
shared root (.argus/locks/admission.lock, a POSIX record lock: it works over NFS and dies with its
holder), so two workspaces admitting at the same moment never count the same free GPUs.

Ledgers are writable by anyone who can write the shared root: each is read as hostile input (size
capped, symlinks refused, entries that claim another workspace or do not validate are skipped).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from specs.errors import ArgusError
from state.files import write_json
from state.observed import LedgerEntry
from state.records import read_small

QUEUE_DIR = ".argus/queue"
LOCK_FILE = ".argus/locks/admission.lock"
MAX_LEDGER_BYTES = 512 * 1024
MAX_LEDGERS = 1000
LOCK_TIMEOUT = 60.0


class AdmissionBusy(ArgusError):
    """Another admission on this shared root held the lock for longer than any admission takes."""


def ledger_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / QUEUE_DIR / f"{workspace}.json"


def read_ledgers(shared_root: str) -> tuple[LedgerEntry, ...]:
    """Every workspace's entries on this shared root; what cannot be read is not there."""
    folder = Path(shared_root) / QUEUE_DIR
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))[:MAX_LEDGERS]
    except OSError:
        return ()
    found: list[LedgerEntry] = []
    for name in names:
        found += read_ledger(shared_root, name[: -len(".json")])
    return tuple(found)


def read_ledger(shared_root: str, workspace: str) -> list[LedgerEntry]:
    data = read_small(ledger_path(shared_root, workspace), MAX_LEDGER_BYTES)
    try:
        rows = json.loads(data or b"{}").get("entries", [])
    except (ValueError, AttributeError):
        return []
    entries = [_entry(row) for row in rows] if isinstance(rows, list) else []
    return [e for e in entries if e is not None and e.workspace == workspace]  # nobody writes for another


def write_ledger(shared_root: str, workspace: str, entries: list[LedgerEntry]) -> None:
    rows = [e.model_dump(mode="json") for e in sorted(entries, key=lambda e: (e.cluster, e.job, e.submission_id))]
    write_json(ledger_path(shared_root, workspace), {"workspace": workspace, "entries": rows})


@contextlib.contextmanager
def admission_lock(shared_root: str, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Held while one admission reads the queue, decides and writes its ledger: seconds at most."""
    path = Path(shared_root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        _lock(fd, path, timeout)
        yield
    finally:
        os.close(fd)  # closing releases the record lock


def _lock(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            if time.monotonic() >= deadline:
                raise AdmissionBusy(f"{path} stayed locked for {timeout:g}s by another admission; try again "
                                    "(a holder that died releases it by itself)") from None
            time.sleep(0.1)


def _entry(row: object) -> LedgerEntry | None:
    try:
        return LedgerEntry.model_validate(row)
    except ValidationError:
        return None
