"""A long-running reader of one audit log (`argus serve`): the newest apply and whether the log
verifies, each turn, reading what was appended since the turn before, not the whole log.

The first turn verifies the whole log as `argus audit verify` does (state.audit.log.check) and remembers
where its last whole record ends, that record's line, its hash and the count. A later turn reads
from the start of that line on: the line must be unchanged, the records after it must go on from
its hash (with their HMACs, when ARGUS_AUDIT_KEY is set), and the anchor must name the newest of
them and the new count. Anything else (a log replaced, deleted, shrunk, that line edited, a record
no chain explains, an anchor that disagrees, even for a crash's or an append's moment) is judged by
a full verification, which names the problem as verify would, or finds only a crash's traces.

What a turn cannot see: an edit of an older record that keeps the log's size and its newest
record (hashes chain backwards, so only reading it tells). A full verification every FULL_EVERY
turns catches it, and `argus audit verify` always verifies everything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from state.audit import chain as audit_chain
from state.audit import files as audit_files
from state.audit import log as audit
from state.audit.chain import GENESIS, Layout

FULL_EVERY = 100
"""Turns between two full verifications."""
SHOWN = ("time", "actor", "outcome", "commit")
"""Of the newest apply.end record: what the status page shows."""


@dataclass(frozen=True)
class Followed:
    last_apply: dict[str, Any] | None
    problems: tuple[str, ...]
    """Tampering or loss, as `argus audit verify` reports it."""


@dataclass(frozen=True)
class _Cursor:
    identity: tuple[int, int]
    """(device, inode) of the log verified: a log replaced by another file starts over."""
    end: int
    """Byte offset just past the last whole record verified."""
    seam: bytes
    """That record's line, with its newline."""
    records: int
    prev: str
    last_apply: dict[str, Any] | None
    turns: int = 0


class AuditFollower:
    """One per process; remembers each (shared root, workspace) log it verified."""

    def __init__(self) -> None:
        self._cursors: dict[tuple[str, str], _Cursor] = {}

    def view(self, shared_root: str, workspace: str) -> Followed:
        key = (shared_root, workspace)
        cursor = self._cursors.get(key)
        found = _onward(shared_root, workspace, cursor) if cursor and cursor.turns < FULL_EVERY else None
        if found is None:
            found = _whole(shared_root, workspace)
        if found.problems:
            self._cursors.pop(key, None)
            return Followed(None, found.problems)
        self._cursors[key] = found.cursor
        return Followed(found.cursor.last_apply, ())


@dataclass(frozen=True)
class _Found:
    cursor: _Cursor
    problems: tuple[str, ...] = ()


def _whole(shared_root: str, workspace: str) -> _Found:
    """Verify everything, as `argus audit verify` does, and remember where the log ends."""
    info, data = audit_files.read_log_since(shared_root, workspace, 0)
    if info is None:  # none, or none to read: as verify says it
        result = audit.check(shared_root, workspace)
    else:  # the bytes just read, not a second read of the whole log
        anchor = audit_files.read_anchor(shared_root, workspace)
        result = audit_chain.check(data, anchor, workspace, audit.audit_key())
    found = audit_chain.layout(data)
    cursor = _advanced(_Cursor(_identity(info), 0, b"", 0, GENESIS, None), found)
    return _Found(cursor, result.problems)


def _onward(shared_root: str, workspace: str, cursor: _Cursor) -> _Found | None:
    """The records appended since the cursor, verified; None when only a full verification can judge."""
    start = cursor.end - len(cursor.seam)
    info, data = audit_files.read_log_since(shared_root, workspace, start)
    if info is None or _identity(info) != cursor.identity or not data.startswith(cursor.seam):
        return None
    found = audit_chain.layout(data[len(cursor.seam):])
    if found.bad or audit_chain.segment_problems(found, cursor.prev, workspace, audit.audit_key()):
        return None
    moved = _advanced(cursor, found)
    return _Found(replace(moved, turns=cursor.turns + 1)) if _anchored(shared_root, workspace, moved) else None


def _advanced(cursor: _Cursor, found: Layout) -> _Cursor:
    """The cursor past the segment's last whole record (a torn tail after it is left for later)."""
    if not found.records:
        return cursor
    newest = found.records[-1]
    consumed = sum(len(line.raw) + 1 for line in _lines_until(found, newest.number))
    ended = [line.entry for line in found.records if line.entry.get("event") == "apply.end"]
    last = {k: ended[-1].get(k) for k in SHOWN} if ended else cursor.last_apply
    return _Cursor(cursor.identity, cursor.end + consumed, newest.raw + b"\n", cursor.records + len(found.records),
                   audit_chain.continues(newest.entry), last)


def _lines_until(found: Layout, number: int) -> list[audit_chain.Line]:
    every = [*found.records, *found.torn, *found.bad, *(t for torn in found.recovered.values() for t in torn)]
    return [line for line in every if line.number <= number]


def _anchored(shared_root: str, workspace: str, cursor: _Cursor) -> bool:
    raw = audit_files.read_anchor(shared_root, workspace)
    anchor = audit_chain.parse_anchor(raw) if raw is not None else None
    if anchor is None:
        return False
    keyed = b'"hmac"' in cursor.seam
    return (anchor.records, anchor.hash) == (cursor.records, cursor.prev) and \
        audit_chain.anchor_trusted(anchor, keyed, workspace, audit.audit_key())


def _identity(info: Any) -> tuple[int, int]:
    return (info.st_dev, info.st_ino) if info is not None else (0, 0)
