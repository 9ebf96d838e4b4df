"""The append-only audit log: <shared_root>/.argus/audit/<workspace>.jsonl, one JSON line an event,
and its anchor: <shared_root>/.argus/anchors/<workspace>.json, the newest record's hash and the count.

Tamper-evident: each record carries its own hash and the hash of the record before it, so an
edited, removed, inserted or reordered record breaks the chain where it happened; the anchor,
rewritten with each append, shows records removed from the end and a deleted log. With
ARGUS_AUDIT_KEY set, records and anchor carry an HMAC, so a rewrite with recomputed hashes shows too.
A crash that tears the last line is recorded by the next append, which goes on from the last whole
record. docs/audit.md says what each mode detects and what it cannot.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specs.errors import ArgusError
from state.audit import chain, files
from state.audit.chain import GENESIS, Verification, record_hash
from state.audit.events import AnchorMismatch, AuditEvent, Recovered
from state.root_key import AUDIT_KEY_VARIABLE
from state.runs.records import now

# CI systems name the person behind a run in these variables; the first one set wins.
CI_ACTOR_VARIABLES = ("GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILDKITE_BUILD_CREATOR", "ARGUS_ACTOR")
KEY_VARIABLE = AUDIT_KEY_VARIABLE
"""Set, records and anchor carry an HMAC made with it, and verify checks them; its value is never written."""
TAIL_BYTES = 64 * 1024


def audit_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "audit" / f"{workspace}.jsonl"


def anchor_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "anchors" / f"{workspace}.json"


def append(shared_root: str, workspace: str, event: AuditEvent, stamp: dict[str, Any] | None = None) -> None:
    """One record: who, where, when, the caller's stamp (plan id, commit...), the event, the chain;
    then the anchor. A torn tail is recorded first (audit.recovered), and so is an anchor the log
    disagrees with (audit.anchor-mismatch), before the anchor is rewritten."""
    append_all(shared_root, workspace, [event], stamp)


def append_all(shared_root: str, workspace: str, events: list[AuditEvent], stamp: dict[str, Any] | None = None) -> None:
    """A record for each event, in order, as `append` writes one: one lock, one write, one anchor for all."""
    key = audit_key()
    with files.locked_log(shared_root, workspace) as fd:
        tail = _tail(fd)
        count, findings = _anchored(fd, tail, shared_root, workspace, key)
        if tail.size == 0 and not count and not findings:  # a new log's anchor comes first: a crash in its
            files.write_anchor(shared_root, workspace, _anchor_text(0, GENESIS, workspace, key))  # first append
        found = [*_recovery(tail.torn), *([AnchorMismatch(found=tuple(findings))] if findings else []), *events]
        lines, newest = _records(found, stamp, tail.prev, workspace, key)
        files.append_bytes(fd, (b"\n" if tail.unterminated else b"") + "".join(f"{ln}\n" for ln in lines).encode())
        files.write_anchor(shared_root, workspace, _anchor_text(count + len(lines), newest, workspace, key))


def check(shared_root: str, workspace: str) -> Verification:
    """Records, problems (tampering, loss) and warnings (a crash's traces, HMACs not checked)."""
    data, problem = files.read_log(shared_root, workspace)
    if problem:
        return Verification(0, (problem,))
    return chain.check(data, files.read_anchor(shared_root, workspace), workspace, audit_key())


def verify(shared_root: str, workspace: str) -> tuple[int, list[str]]:
    """(records, problems): each problem names the record (line, time, event) where the chain breaks."""
    result = check(shared_root, workspace)
    return result.records, list(result.problems)


@dataclass(frozen=True)
class Reading:
    """The log as a reader takes it: never an exception for what a crash or an editor left."""

    entries: tuple[dict[str, Any], ...]
    skipped: tuple[str, ...] = ()
    """Lines that are no record and no crash explains (tampering), or why the log cannot be read."""
    torn: str | None = None
    """A torn last line a crash left, skipped: not tampering."""


def reading(shared_root: str, workspace: str) -> Reading:
    data, problem = files.read_log(shared_root, workspace)
    if problem:
        return Reading((), (problem,))
    found = chain.layout(data or b"")
    skipped = tuple(f"line {line.number}: not a record, skipped (edited by hand? run `argus audit verify`)"
                    for line in found.bad)
    torn = (f"{chain.span([t.number for t in found.torn])}: a torn record left by a crash, skipped; the next "
            "append records the recovery") if found.torn else None
    return Reading(tuple(line.entry for line in found.records), skipped, torn)


def read(shared_root: str, workspace: str) -> list[dict[str, Any]]:
    return list(reading(shared_root, workspace).entries)


def audit_key() -> bytes | None:
    value = os.environ.get(KEY_VARIABLE)
    return value.encode() if value else None


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


OMITTED_WHEN_EMPTY = frozenset({"error", "changes", "reason"})
"""Keys a record leaves out when they have no value; every other key is written, null or not, as always."""


@dataclass(frozen=True)
class _Tail:
    """The end of the log as an append finds it."""

    size: int
    prev: str
    """What the next record's `prev` is: the hash of the last whole record (GENESIS: none)."""
    last: dict[str, Any] | None
    torn: bytes | None
    """The bytes after the last record's line, but a newline they end with (the recovering append
    would have written it, so verify cannot tell who did): what a torn append left. None: nothing."""
    unterminated: bool
    """The file does not end with a newline: the next record must not be glued to its last line."""


def _tail(fd: int) -> _Tail:
    """Read from the end (the log only grows); the whole file only when its tail holds no record."""
    size = os.fstat(fd).st_size
    start = max(0, size - TAIL_BYTES)
    data = files.read_at(fd, start, size - start)
    return _tail_of(data, size, whole=start == 0) or _tail_of(_whole(fd, size), size, whole=True)


def _whole(fd: int, size: int) -> bytes:
    """The whole log, when it is no bigger than argus reads one (a job can write the shared root)."""
    if size > files.MAX_LOG_BYTES:
        raise ArgusError(f"the audit log is {size} bytes, more than the {files.MAX_LOG_BYTES >> 20} MiB argus reads "
                         "whole, and its end holds no record or disagrees with its anchor (written by a job?): "
                         "run `argus audit verify`, then move the log aside")
    return files.read_at(fd, 0, size)


def _tail_of(data: bytes, size: int, whole: bool) -> _Tail | None:
    parts = data.split(b"\n")
    unterminated = parts[-1] != b""
    if not unterminated:
        parts.pop()
    for index in range(len(parts) - 1, -1 if whole else 0, -1):  # parts[0] of a window may be half a line
        entry = chain.entry_of(parts[index])
        if entry is not None:
            rest = parts[index + 1:]
            return _Tail(size, chain.continues(entry), entry, b"\n".join(rest) if rest else None, unterminated)
    if not whole:
        return None
    return _Tail(size, GENESIS, None, b"\n".join(parts) if parts else None, unterminated)


def _anchored(fd: int, tail: _Tail, shared_root: str, workspace: str, key: bytes | None) -> tuple[int, list[str]]:
    """(records in the log, what disagrees with the anchor): from the anchor when it names the last
    record, else (a crash, tampering, a log older than anchors) from reading the whole log."""
    raw = files.read_anchor(shared_root, workspace)
    anchor = chain.parse_anchor(raw) if raw is not None else None
    keyed = tail.last is not None and "hmac" in tail.last
    if anchor is not None and anchor.hash == tail.prev and chain.anchor_trusted(anchor, keyed, workspace, key):
        return anchor.records, []
    if raw is None and tail.size == 0:
        return 0, []
    found = chain.layout(_whole(fd, tail.size))
    if raw is not None and anchor is None:
        return len(found.records), ["the anchor was not one argus wrote (edited?)"]
    problems, _warnings = chain.anchor_findings(found.records, anchor, exists=tail.size > 0)
    if anchor is not None and not chain.anchor_trusted(anchor, keyed, workspace, key):
        problems.append("the anchor's HMAC did not match: rewritten by someone without the key")
    return len(found.records), problems


def _recovery(torn: bytes | None) -> list[AuditEvent]:
    return [] if torn is None else [Recovered(torn_bytes=len(torn), torn_sha256=hashlib.sha256(torn).hexdigest())]


def _records(events: list[AuditEvent], stamp: dict[str, Any] | None, prev: str, workspace: str,
             key: bytes | None) -> tuple[list[str], str]:
    lines = []
    for event in events:
        entry = {"time": now(), "actor": actor(), "host": socket.gethostname(), **(stamp or {}), **_fields(event),
                 "prev": prev}
        entry["hash"] = prev = record_hash(entry)
        if key is not None:
            entry["hmac"] = chain.record_hmac(key, workspace, entry)
        lines.append(json.dumps(entry, sort_keys=True))
    return lines, prev


def _fields(event: AuditEvent) -> dict[str, Any]:
    return {k: v for k, v in event.model_dump(mode="json").items() if v is not None or k not in OMITTED_WHEN_EMPTY}


def _anchor_text(records: int, newest: str, workspace: str, key: bytes | None) -> str:
    anchor: dict[str, Any] = {"records": records, "hash": newest}
    if key is not None:
        anchor["hmac"] = chain.anchor_hmac(key, workspace, records, newest)
    return json.dumps(anchor, sort_keys=True) + "\n"
