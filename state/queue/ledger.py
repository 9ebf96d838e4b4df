"""The admission queue of a cluster on its shared root: .argus/queue/<workspace>.json per workspace.

Every workspace using a cluster reads every ledger there (to respect the others' places and their
admitted runs' demand) and writes only its own. Admissions are decided under one short lock per
shared root (.argus/locks/admission.lock, a POSIX record lock: it works over NFS and dies with its
holder), so two workspaces admitting at the same moment never count the same free GPUs.

Ledgers are writable by anyone who can write the shared root (any Ray job can): each is read as
hostile input. Nothing below the shared root is followed if it is a symlink (a queue or lock
directory pointing at a host's own /tmp would split the queue per host), files are size-capped,
and entries that claim another workspace or do not validate are skipped. With ARGUS_ROOT_KEY set,
each entry is written with an HMAC over its fields and its ledger's workspace (state.root_key), and
one without a valid HMAC is skipped too (its file is named in `ignored`): a job cannot forge a place,
an admission or a preemption. Without the key entries read unsigned (LedgerEntry.signed False).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from specs.errors import ArgusError
from specs.kinds.models import NAME_PATTERN
from state.beneath import NotBeneath, Refused, names_in, opened_dir
from state.files import lock_within, replace_in
from state.observed import LedgerEntry
from state.root_key import keyed, sign, verify
from state.runs.records import read_small

QUEUE_DIR = ".argus/queue"
LOCK_DIR = ".argus/locks"
LOCK_NAME = "admission.lock"
MAX_LEDGER_BYTES = 512 * 1024
MAX_LEDGERS = 1000
LOCK_TIMEOUT = 60.0
SIGNED_AS = "queue-entry"
"""The kind of entry a ledger row's HMAC says it is (state.root_key); its scope is the ledger's workspace."""


class AdmissionBusy(ArgusError):
    """Another admission on this shared root held the lock for longer than any admission takes."""


class QueueUnreadable(ArgusError):
    """The queue or lock directory is not a plain directory of the shared root, or holds too much."""


def ledger_path(shared_root: str, workspace: str) -> Path:
    """Where a workspace's ledger is, for people (argus itself opens it relative to its directory)."""
    return Path(shared_root) / QUEUE_DIR / f"{workspace}.json"


def read_ledgers(shared_root: str, ignored: list[str] | None = None) -> tuple[LedgerEntry, ...]:
    """Every workspace's entries on this shared root; a file that cannot be read is not there.
    `ignored` gets the path of each ledger whose unsigned entries were left out (a key is set)."""
    with _ledgers_dir(shared_root, create=False) as fd:
        if fd is None:
            return ()
        try:  # listed entry by entry: a directory of a million names is never held in memory
            names = [n[: -len(".json")] for n in names_in(fd, _ledger_name, MAX_LEDGERS)]
        except Refused:
            raise QueueUnreadable(f"{shared_root}/{QUEUE_DIR} holds more than {MAX_LEDGERS} ledgers: "
                                  "remove the ones no workspace writes") from None
        found = []
        for name in names:
            entries, left_out = _entries(fd, name)
            found += entries
            if left_out and ignored is not None:
                ignored.append(str(ledger_path(shared_root, name)))
        return tuple(found)


def read_ledger(shared_root: str, workspace: str) -> list[LedgerEntry]:
    """This workspace's own entries (those it signed, with a key set): what it writes back."""
    with _ledgers_dir(shared_root, create=False) as fd:
        return [] if fd is None else _entries(fd, workspace)[0]


def write_ledger(shared_root: str, workspace: str, entries: list[LedgerEntry]) -> None:
    """Atomically (a temp file renamed in place), in the queue directory opened without following links."""
    rows = [_signed(e.model_dump(mode="json"), workspace)
            for e in sorted(entries, key=lambda e: (e.cluster, e.job, e.submission_id))]
    text = json.dumps({"workspace": workspace, "entries": rows}, indent=2, sort_keys=True) + "\n"
    with _ledgers_dir(shared_root, create=True) as fd:
        replace_in(fd, f"{workspace}.json", text)


@contextlib.contextmanager
def admission_lock(shared_root: str, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Held while one admission reads the queue, decides and writes its ledger: seconds at most."""
    with queue_dir(shared_root, LOCK_DIR, create=True) as folder:
        try:
            fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644,
                         dir_fd=folder)
        except OSError as err:
            raise QueueUnreadable(f"{shared_root}/{LOCK_DIR}/{LOCK_NAME} cannot be opened as the admission lock "
                                  f"({err.strerror}; a symlink?): remove it, argus creates it again") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise QueueUnreadable(f"{shared_root}/{LOCK_DIR}/{LOCK_NAME} is not a regular file: remove it")
        _lock(fd, shared_root, timeout)
        yield
    finally:
        os.close(fd)  # closing releases the record lock


def _lock(fd: int, shared_root: str, timeout: float) -> None:
    """Admission must exclude: on NFS without a lock manager it refuses rather than admit unlocked."""
    where = f"{shared_root}/{LOCK_DIR}/{LOCK_NAME}"
    try:
        held = lock_within(fd, timeout, unlocked_ok=False)
    except OSError as err:
        raise QueueUnreadable(f"{where} cannot be locked ({err.strerror or err}): admission needs POSIX record "
                              "locks on the shared root (on NFS, the server's lock manager)") from None
    if not held:
        raise AdmissionBusy(
            f"{where} stayed locked for {timeout:g}s. An admission holds it for "
            "a moment, so the holder is more likely a stuck argus or any other process that can open the file "
            "(a job on the cluster can): `fuser -v` on it names a local holder (on NFS, ask the server's lock "
            "manager); a holder that dies releases it by itself. Try again once it is free")


@contextlib.contextmanager
def _ledgers_dir(shared_root: str, create: bool) -> Iterator[int | None]:
    with queue_dir(shared_root, QUEUE_DIR, create) as fd:
        yield fd


@contextlib.contextmanager
def queue_dir(shared_root: str, rel: str, create: bool) -> Iterator[int | None]:
    """rel below the shared root, opened without following symlinks; None when absent (and not created)."""
    if create:
        made_queue_dirs(shared_root, rel)
    stack = contextlib.ExitStack()
    try:
        fd = stack.enter_context(opened_dir(shared_root, rel))
    except NotBeneath as err:
        if create or not isinstance(err.__cause__, FileNotFoundError):
            raise QueueUnreadable(f"{err}: the admission queue lives in plain directories of the shared root; "
                                  "replace it with a directory") from None
        fd = None
    except FileNotFoundError:
        if create:
            raise
        fd = None
    with stack:
        yield fd


def made_queue_dirs(shared_root: str, rel: str) -> None:
    """Each component created in its parent opened without following links."""
    built = ""
    for part in rel.split("/"):
        with contextlib.suppress(FileExistsError), queue_dir(shared_root, built, create=False) as fd:
            if fd is not None:
                os.mkdir(part, 0o755, dir_fd=fd)
        built = f"{built}/{part}".lstrip("/")


def _entries(folder: int, workspace: str) -> tuple[list[LedgerEntry], int]:
    """The ledger's valid entries, and how many rows were left out for want of a valid signature."""
    data = read_small(f"{workspace}.json", MAX_LEDGER_BYTES, dir_fd=folder)
    try:
        rows = json.loads(data or b"{}").get("entries", [])
    except (ValueError, AttributeError, RecursionError):
        return [], 0
    entries = [_entry(row, workspace) for row in rows] if isinstance(rows, list) else []
    found = [e for e in entries if e is not None and e.workspace == workspace]  # nobody writes for another
    if not keyed():
        return found, 0
    return [e for e in found if e.signed], sum(1 for e in entries if e is None or not e.signed)


def _signed(row: dict, workspace: str) -> dict:
    """The row with its HMAC over its fields and its ledger's workspace (no key: as it is)."""
    signature = sign(SIGNED_AS, workspace, row)
    return row if signature is None else {**row, "sig": signature}


def _ledger_name(name: str) -> bool:
    return name.endswith(".json") and re.fullmatch(NAME_PATTERN.rstrip("$"), name[: -len(".json")]) is not None


def _entry(row: object, workspace: str) -> LedgerEntry | None:
    """The row as an entry, `signed` when its HMAC is valid (checked over the row as written, so a
    field another version adds or drops never makes argus's own entries read as forged)."""
    if not isinstance(row, dict):
        return None
    fields = {k: v for k, v in row.items() if k not in ("sig", "signed")}  # `signed` is never the file's to say
    try:
        entry = LedgerEntry.model_validate(fields)
    except (ValidationError, RecursionError):
        return None
    return entry.model_copy(update={"signed": True}) if verify(SIGNED_AS, workspace, fields, row.get("sig")) \
        else entry
