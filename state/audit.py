"""The append-only audit log: <shared_root>/.argus/audit/<workspace>.jsonl, one JSON line an event.

Tamper-evident: each record carries its own hash and the hash of the record before it, so an
edited, removed, inserted or reordered record breaks the chain where it happened.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from state.audit_events import AuditEvent
from state.files import append_line
from state.records import now

# CI systems name the person behind a run in these variables; the first one set wins.
CI_ACTOR_VARIABLES = ("GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILDKITE_BUILD_CREATOR", "ARGUS_ACTOR")


def audit_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "audit" / f"{workspace}.jsonl"


GENESIS = "0" * 64


def append(shared_root: str, workspace: str, event: AuditEvent, stamp: dict[str, Any] | None = None) -> None:
    """One record: who, where, when, the caller's stamp (plan id, commit...), the event, the chain."""
    path = audit_path(shared_root, workspace)
    body = {**(stamp or {}), **_fields(event)}
    entry = {"time": now(), "actor": actor(), "host": socket.gethostname(), **body, "prev": _last_hash(path)}
    entry["hash"] = record_hash(entry)
    append_line(path, json.dumps(entry, sort_keys=True))


OMITTED_WHEN_EMPTY = frozenset({"error", "changes", "reason"})
"""Keys a record leaves out when they have no value; every other key is written, null or not, as always."""


def _fields(event: AuditEvent) -> dict[str, Any]:
    return {k: v for k, v in event.model_dump(mode="json").items() if v is not None or k not in OMITTED_WHEN_EMPTY}


def record_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def verify(shared_root: str, workspace: str) -> tuple[int, list[str]]:
    """(records, problems): each problem names the record (line, time, event) where the chain breaks."""
    path = audit_path(shared_root, workspace)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    problems, previous = [], GENESIS
    for number, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
        except ValueError:
            problems.append(f"line {number}: not a JSON record (edited by hand?)")
            previous = ""
            continue
        name = f"line {number} ({entry.get('time', '?')} {entry.get('event', '?')})"
        if entry.get("hash") != record_hash(entry):
            problems.append(f"{name}: its content does not match its hash: the record was edited")
        elif entry.get("prev") != previous:
            problems.append(f"{name}: it does not follow the record before it: a record was removed, inserted "
                            "or reordered just before this one")
        previous = entry.get("hash", "")
    return len(lines), problems


def _last_hash(path: Path) -> str:
    """The hash of the file's last record, read from its tail (the log only grows)."""
    if not path.exists() or path.stat().st_size == 0:
        return GENESIS
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - 65536))
        last = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        return json.loads(last).get("hash") or GENESIS
    except ValueError:
        return GENESIS


def read(shared_root: str, workspace: str) -> list[dict[str, Any]]:
    path = audit_path(shared_root, workspace)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


_acting_as: str | None = None


def act_as(name: str | None) -> None:
    """Who this process is in every audit record and lock from now on (`argus serve@host`); None: the user."""
    global _acting_as
    _acting_as = name


def actor() -> str:
    if _acting_as:
        return _acting_as
    for name in CI_ACTOR_VARIABLES:
        if os.environ.get(name):
            return f"{os.environ[name]} (via {name})"
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"
