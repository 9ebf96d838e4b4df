"""What the audit log's bytes and its anchor say, as pure functions: which line is a record, whether
the chain holds, whether the anchor agrees, whether the HMACs match. state.audit.log reads and writes the
files; nothing here touches the disk. docs/audit.md says what each check can and cannot see.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

GENESIS = "0" * 64
"""The `prev` of a log's first record."""
RECOVERED, ANCHOR_MISMATCH = "audit.recovered", "audit.anchor-mismatch"
BOOKKEEPING = frozenset({RECOVERED, ANCHOR_MISMATCH})
"""Records an append writes about the log itself, before the record it was called for."""


@dataclass(frozen=True)
class Line:
    number: int
    raw: bytes
    """The line's bytes without its newline."""
    entry: dict[str, Any] | None
    """The JSON object on it; None when it holds none (torn, or not argus's)."""


@dataclass(frozen=True)
class Anchor:
    """<shared_root>/.argus/anchors/<workspace>.json: the log's newest hash and record count."""

    records: int
    hash: str
    hmac: str | None = None


@dataclass(frozen=True)
class Layout:
    """The log's lines sorted out: records, a torn tail, torn lines a recovery names, and the rest."""

    records: tuple[Line, ...]
    torn: tuple[Line, ...]
    """A crash's leftovers: the lines without a record after the last record (a torn append leaves
    part of a line, or that part and the newline before it)."""
    recovered: dict[int, tuple[Line, ...]] = field(default_factory=dict)
    """Line number of an audit.recovered record -> the torn lines it names, just before it."""
    bad: tuple[Line, ...] = ()
    """Lines without a record that no recovery explains: nobody but an editor writes those."""


@dataclass(frozen=True)
class Verification:
    records: int
    problems: tuple[str, ...]
    """Tampering or loss: `argus audit verify` exits 1."""
    warnings: tuple[str, ...] = ()
    """What a crash leaves, a log older than anchors, HMACs not checked: reported, exit 0."""
    hmac_checked: bool = False


def layout(data: bytes) -> Layout:
    """Records; before each, lines without one that a recovery there names (torn) or not (bad)."""
    lines = lines_of(data)
    torn_from = len(lines)
    while torn_from and lines[torn_from - 1].entry is None:
        torn_from -= 1
    records, recovered, bad, pending = [], {}, [], []
    for line in lines[:torn_from]:
        if line.entry is None:
            pending.append(line)
            continue
        if pending and recovers(line.entry, b"\n".join(p.raw for p in pending)):
            recovered[line.number] = tuple(pending)
        else:
            bad.extend(pending)
        pending = []
        records.append(line)
    return Layout(tuple(records), tuple(lines[torn_from:]), recovered, tuple(bad))


def lines_of(data: bytes) -> list[Line]:
    parts = data.split(b"\n")
    if parts[-1] == b"":  # the newline that ends the file ends its last line; it starts none
        parts.pop()
    return [Line(number, raw, entry_of(raw)) for number, raw in enumerate(parts, start=1)]


def recovers(entry: dict[str, Any], torn: bytes) -> bool:
    return (entry.get("event") == RECOVERED and entry.get("torn_bytes") == len(torn)
            and entry.get("torn_sha256") == hashlib.sha256(torn).hexdigest())


def record_hash(entry: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(entry)).hexdigest()


def record_hmac(key: bytes, workspace: str, entry: dict[str, Any]) -> str:
    """Over the bytes record_hash hashes (`prev` included), the workspace's name in front: a keyed
    record cannot be moved into another workspace's log either."""
    return _mac(key, b"argus-audit-record", workspace, _canonical(entry))


def anchor_hmac(key: bytes, workspace: str, records: int, newest: str) -> str:
    return _mac(key, b"argus-audit-anchor", workspace, json.dumps({"hash": newest, "records": records},
                                                                  sort_keys=True).encode())


def parse_anchor(raw: bytes) -> Anchor | None:
    """None when the bytes are not an anchor argus wrote."""
    data = entry_of(raw.strip())
    if data is None or not set(data) <= {"records", "hash", "hmac"}:
        return None
    records, newest, mac = data.get("records"), data.get("hash"), data.get("hmac")
    if type(records) is not int or records < 0 or not isinstance(newest, str) or not isinstance(mac, (str, type(None))):
        return None
    return Anchor(records, newest, mac)


def check(data: bytes | None, anchor_raw: bytes | None, workspace: str, key: bytes | None) -> Verification:
    """Everything verify reports about a log (None: there is no file) and its anchor (None: none)."""
    found = layout(data or b"")
    problems, warnings = _chain(found), _torn(found)
    anchor = parse_anchor(anchor_raw) if anchor_raw is not None else None
    if anchor_raw is not None and anchor is None:
        problems.append("the anchor is not one argus wrote (edited?): records removed from the end cannot be "
                        "counted")
    else:
        more_problems, more_warnings = anchor_findings(found.records, anchor, data is not None)
        problems += more_problems
        warnings += more_warnings
    more_problems, more_warnings = _hmacs(found.records, anchor, workspace, key)
    return Verification(len(found.records), tuple(problems + more_problems), tuple(warnings + more_warnings),
                        hmac_checked=key is not None)


def anchor_findings(records: tuple[Line, ...], anchor: Anchor | None, exists: bool) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the log's records against its anchor."""
    if anchor is None:
        if any("hmac" in r.entry for r in records):
            return ["the anchor is gone, though the log's records carry HMACs (argus keeps one beside a keyed "
                    "log): records removed from the end cannot be counted"], []
        return [], (["no anchor: records removed from the end cannot be seen (the log predates anchors, or the "
                     "anchor was deleted); the next append writes one"] if records else [])
    if not records and anchor.records:
        return [f"the log is {'empty' if exists else 'gone'} but its anchor says {anchor.records} record(s)"], []
    position = next((i for i in range(len(records), 0, -1) if records[i - 1].entry.get("hash") == anchor.hash), 0)
    if not position and anchor.records:
        if len(records) < anchor.records:
            return [f"{anchor.records - len(records)} record(s) removed from the end (the anchor says "
                    f"{anchor.records})"], []
        return [f"the anchor's newest record ({anchor.hash[:12]}) is not in the log: the log was rewritten"], []
    problems = [] if position == anchor.records else [
        f"{position} record(s) up to the anchor's newest (line {records[position - 1].number}), but the anchor "
        f"counted {anchor.records}: records were removed or inserted before it"]
    return _beyond(records[position:], problems)


def _beyond(extra: tuple[Line, ...], problems: list[str]) -> tuple[list[str], list[str]]:
    """Records after the anchor's newest: one append's worth is a crash before the anchor was updated."""
    if not extra:
        return problems, []
    if _one_append(extra):
        return problems, [f"the anchor is {len(extra)} record(s) behind the log: an append was interrupted between "
                          "writing its record and updating the anchor (a crash); the next append brings it up to date"]
    return problems + [f"{len(extra)} record(s) from line {extra[0].number} on were not counted by the anchor: "
                       "appended by something other than this argus, or an older anchor was put back"], []


def continues(entry: dict[str, Any] | None) -> str:
    """The `prev` of the record after this one: its hash, as verify reads it."""
    newest = (entry or {}).get("hash", GENESIS)
    return newest if isinstance(newest, str) else ""


def anchor_trusted(anchor: Anchor, keyed_log: bool, workspace: str, key: bytes | None) -> bool:
    """Without a key nothing can be told; with one, the anchor's HMAC must match, unless neither it nor
    the log carries any (a log begun before the key was set)."""
    if key is None or (anchor.hmac is None and not keyed_log):
        return True
    return _same(anchor.hmac, anchor_hmac(key, workspace, anchor.records, anchor.hash))


def entry_of(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def span(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> "lines 1-3, 7"."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"line{'s' if len(numbers) > 1 else ''} {text}"


def segment_problems(found: Layout, previous: str, workspace: str, key: bytes | None) -> list[str]:
    """Problems of records appended after a record already verified (its hash: previous): the chain
    goes on from it, recoveries name torn lines in the segment, HMACs match. No anchor is weighed here."""
    return _chain(found, previous) + _hmacs(found.records, None, workspace, key)[0]


def _chain(found: Layout, previous: str = GENESIS) -> list[str]:
    by_line = {line.number: f"line {line.number}: not a JSON record (edited by hand?)" for line in found.bad}
    for line in found.records:
        entry, name = line.entry, _name(line)
        if entry.get("hash") != _safe_hash(entry):
            by_line[line.number] = f"{name}: its content does not match its hash: the record was edited"
        elif entry.get("prev") != previous:
            by_line[line.number] = (f"{name}: it does not follow the record before it: a record was removed, "
                                    "inserted or reordered just before this one")
        elif entry.get("event") == RECOVERED and line.number not in found.recovered:
            by_line[line.number] = (f"{name}: it records the recovery of {entry.get('torn_bytes')} torn byte(s) "
                                    "that are not just before it: lines were removed or added there")
        elif entry.get("event") == ANCHOR_MISMATCH:
            by_line[line.number] = (f"{name}: when argus appended here, the log did not match its anchor: "
                                    + "; ".join(str(f) for f in entry.get("found") or ["(no finding named)"]))
        previous = continues(entry)
    return [by_line[number] for number in sorted(by_line)]


def _torn(found: Layout) -> list[str]:
    warnings = [f"{span([t.number for t in torn])}: {_size(torn)} torn byte(s) from an interrupted append, "
                f"recovered at line {number}" for number, torn in sorted(found.recovered.items())]
    if found.torn:
        warnings.append(f"{span([t.number for t in found.torn])}: a torn record ({_size(found.torn)} byte(s) after "
                        "the last whole record): an append interrupted by a crash; the next append records the "
                        "recovery and goes on from the last whole record")
    return warnings


def _hmacs(records: tuple[Line, ...], anchor: Anchor | None, workspace: str,
           key: bytes | None) -> tuple[list[str], list[str]]:
    keyed = [r for r in records if "hmac" in r.entry]
    if key is None:
        if not keyed and not (anchor and anchor.hmac):
            return [], []
        return [], [f"{len(keyed)} record(s) carry an HMAC, but ARGUS_AUDIT_KEY is not set: HMACs were not "
                    "checked, so a rewrite with recomputed hashes (and anchor) would pass"]
    missing = [r.number for r in records if "hmac" not in r.entry]
    wrong = [r.number for r in keyed
             if _safe_hash(r.entry) is None or not _same(r.entry["hmac"], record_hmac(key, workspace, r.entry))]
    problems = [f"{span(missing)}: no HMAC, though ARGUS_AUDIT_KEY is set: written without the key, or "
                "rewritten by someone without it"] if missing else []
    problems += [f"{span(wrong)}: the HMAC does not match: rewritten by someone without the key (or written "
                 "with another key)"] if wrong else []
    if anchor is not None and not anchor_trusted(anchor, bool(keyed), workspace, key):
        problems.append("the anchor's HMAC does not match: the anchor was rewritten by someone without the key")
    return problems, []


def _size(lines: tuple[Line, ...]) -> int:
    return len(b"\n".join(line.raw for line in lines))


def _same(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def _mac(key: bytes, purpose: bytes, workspace: str, body: bytes) -> str:
    return hmac.new(key, purpose + b"\0" + workspace.encode() + b"\0" + body, hashlib.sha256).hexdigest()


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in entry.items() if k not in ("hash", "hmac")}, sort_keys=True).encode()


def _safe_hash(entry: dict[str, Any]) -> str | None:
    try:
        return record_hash(entry)
    except (ValueError, RecursionError):  # nested past what json.dumps takes: not argus's record
        return None


def _one_append(extra: tuple[Line, ...]) -> bool:
    """What one append writes: its record, after at most a recovery and an anchor mismatch."""
    return 0 < len(extra) <= 3 and all(_kind(line) in BOOKKEEPING for line in extra[:-1])


def _kind(line: Line) -> str:
    kind = line.entry.get("event")
    return kind if isinstance(kind, str) else "?"


def _name(line: Line) -> str:
    return f"line {line.number} ({line.entry.get('time', '?')} {line.entry.get('event', '?')})"
