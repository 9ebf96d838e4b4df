"""The registry of argus's submissions: which submission ids the workspace's audit log says argus asked
Ray to run, read once per plan from the chain itself (docs/audit.md, "The registry").

Every submit is registered (run.submitting) before Ray is asked, so an id in the registry may have
reached Ray even when neither Ray nor the shared root remembers it: it is never submitted again. An id
Ray refused is freed (run.refused). A log an argus from before the registry wrote registers the ids its
submit steps' records carry; the first apply of this version adds a registry.adopted record naming the
runs it finds, and from then on a run the log does not name is not argus's.

Cheap whatever the history: the first read verifies the whole log, as `argus audit verify` does, and
keeps the ids and where the log ended in argus's cache on this machine (never on the shared root).
A later read verifies only what was appended since: the line it ended on unchanged, the records after
it chained from it (their HMACs with ARGUS_AUDIT_KEY), the anchor naming the newest. Anything else is
judged by reading everything again. Ids once read stay registered on this machine even if the log later
loses them (rolled back, replaced): at most once holds against what this machine saw.

The same read folds argus's own stops (run.stopping, written before Ray is asked to stop a run; an earlier
version's stop step records): which runs argus stopped, and why. A STOPPED run the chain does not name was
stopped outside argus, whatever its record on the shared root says (docs/shared-root.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pydantic_core

from state.audit import chain
from state.audit import files as audit_files
from state.audit import log as audit
from state.audit.chain import GENESIS, Layout
from state.observed import Registry

SUBMITTING, REFUSED, ADOPTED, STEP = "run.submitting", "run.refused", "registry.adopted", "action"
QUOTAS = "quotas.applied"
IMPORTED = "run.imported"
"""A job submitted outside argus that `argus import ray-job` adopted: the chain names its job and spec hash."""
STOPPING = "run.stopping"
EARLIER_STOP = "stop"
"""Why of a stop an earlier version recorded only as its step's record (`action`, step stop, outcome stopped)."""
SUBMITTED_OUTCOMES = frozenset({"submitted", "exists"})
"""A submit step's outcome that says Ray took the run (records of earlier versions carry the id)."""
CACHE_VERSION = 5
NAME, HASH = re.compile(r"[a-z0-9][a-z0-9-]{0,62}"), re.compile(r"[0-9a-f]{64}")
"""A job name as specs allow it, a spec hash as argus makes it: an imported run's, before the plan builds on it."""


@dataclass
class _Read:
    """What a read of the log found, and where it stopped: the cache's content."""

    adopted: bool = False
    submitted: dict[str, str] = field(default_factory=dict)
    stops: dict[str, str] = field(default_factory=dict)
    """Submission id -> why argus stopped it (run.stopping's `why`; EARLIER_STOP for an earlier version's)."""
    quotas: dict[str, str] = field(default_factory=dict)
    """Cluster -> digest of the quotas this workspace applied last there (quotas.applied), as its admin."""
    imported: dict[str, str] = field(default_factory=dict)
    """Submission id -> "<job>:<spec hash>:<cluster>" of a run adopted by `argus import ray-job` (run.imported)."""
    identity: tuple[int, int] = (0, 0)
    end: int = 0
    """Byte offset just past the last whole record read."""
    seam: str = ""
    """SHA-256 of that record's line (with its newline)."""
    seam_length: int = 0
    records: int = 0
    prev: str = GENESIS
    keyed: bool = False


def read(shared_root: str, workspace: str, cache_dir: str | None = None) -> Registry:
    """The registry of the workspace's log on shared_root; problems when the log does not verify."""
    log = str(audit.audit_path(shared_root, workspace))
    where = _cache_file(cache_dir, shared_root, workspace) if cache_dir else None
    cached = _load(where) if where else None
    found = _onward(shared_root, workspace, cached) if cached is not None else None
    if found is None:
        found, problems = _whole(shared_root, workspace)
        if cached is not None:  # what this machine saw registered stays so (a log cut, rolled back, moved aside)
            found.submitted = {**cached.submitted, **found.submitted}
            found.stops = {**cached.stops, **found.stops}
            found.quotas = {**cached.quotas, **found.quotas}  # quotas once vouched for stay owed a record
            found.imported = {**cached.imported, **found.imported}
        if problems:
            return _registry(log, found, problems)
    if where is not None and found is not cached and found != cached:
        _save(where, found)
    return _registry(log, found, ())


def _registry(log: str, found: _Read, problems: tuple[str, ...]) -> Registry:
    """Built without validating again what is typed already: fold writes only strings, and a cached read is
    checked field by field as it is parsed (_load). Validating the maps again cost as much as parsing them."""
    return Registry.model_construct(log=log, adopted=found.adopted, submitted=found.submitted, stops=found.stops,
                                    quotas=found.quotas, imported=found.imported, problems=tuple(problems))


def fold(entries: Iterable[dict[str, Any]], adopted: bool, submitted: dict[str, str],
         stops: dict[str, str] | None = None, quotas: dict[str, str] | None = None,
         imported: dict[str, str] | None = None) -> bool:
    """The records' registrations added to `submitted`, argus's stops to `stops`, the quotas applied to
    `quotas` and the runs imported to `imported` (all in place), in order; whether the log is adopted."""
    for entry in entries:
        kind, sid = entry.get("event"), entry.get("submission_id")
        if imported is not None and kind == IMPORTED and isinstance(sid, str):
            _fold_import(entry, sid, submitted, imported)
        if quotas is not None and kind == QUOTAS and isinstance(entry.get("cluster"), str) \
                and isinstance(entry.get("digest"), str):
            quotas[entry["cluster"]] = entry["digest"]
        if stops is not None and isinstance(sid, str):
            _fold_stop(entry, kind, sid, stops)
        if kind == SUBMITTING and isinstance(sid, str):
            submitted[sid] = str(entry.get("time", ""))
        elif kind == REFUSED and isinstance(sid, str):
            submitted.pop(sid, None)
        elif kind == STEP and entry.get("step") == "submit" and entry.get("outcome") in SUBMITTED_OUTCOMES \
                and isinstance(sid, str):
            submitted.setdefault(sid, str(entry.get("time", "")))
        elif kind == ADOPTED and isinstance(entry.get("submission_ids"), list):
            adopted = True
            for one in entry["submission_ids"]:
                if isinstance(one, str):
                    submitted.setdefault(one, str(entry.get("time", "")))
    return adopted


def _fold_import(entry: dict[str, Any], sid: str, submitted: dict[str, str], imported: dict[str, str]) -> None:
    """An adopted run is registered like a submitted one (never sent again) and names what it is a run of."""
    job, digest, cluster = entry.get("job"), entry.get("spec_hash"), entry.get("cluster")
    if isinstance(job, str) and isinstance(digest, str) and isinstance(cluster, str) and NAME.fullmatch(job) \
            and HASH.fullmatch(digest) and NAME.fullmatch(cluster):
        submitted.setdefault(sid, str(entry.get("time", "")))
        imported[sid] = f"{job}:{digest}:{cluster}"  # the cluster too: chains of clusters sharing a root are one


def _fold_stop(entry: dict[str, Any], kind: object, sid: str, stops: dict[str, str]) -> None:
    """run.stopping says why; an earlier version's stop step that stopped the run says only that it did."""
    if kind == STOPPING and isinstance(entry.get("why"), str):
        stops[sid] = entry["why"]
    elif kind == STEP and entry.get("step") == "stop" and entry.get("outcome") == "stopped":
        stops.setdefault(sid, EARLIER_STOP)


def _whole(shared_root: str, workspace: str) -> tuple[_Read, tuple[str, ...]]:
    """Everything verified, as `argus audit verify` does, and folded."""
    info, data = audit_files.read_log_since(shared_root, workspace, 0)
    key = audit.audit_key()
    if info is None:  # no log, or none argus can read: as verify says it
        result = audit.check(shared_root, workspace)
    else:  # the bytes just read, not a second read of the whole log
        result = chain.check(data, audit_files.read_anchor(shared_root, workspace), workspace, key)
    found = _advanced(_Read(identity=_identity(info), keyed=key is not None), chain.layout(data), data)
    return found, result.problems


def _onward(shared_root: str, workspace: str, cached: _Read) -> _Read | None:
    """The records appended since the cached read, verified and folded; None when only a whole read can judge."""
    key = audit.audit_key()
    if cached.keyed != (key is not None):
        return None
    info, data = audit_files.read_log_since(shared_root, workspace, cached.end - cached.seam_length)
    if info is None or _identity(info) != cached.identity or not _seam_holds(data, cached):
        return None
    segment = data[cached.seam_length:]
    if not segment:  # nothing appended: the cached read as it is, once the anchor still names its newest
        return cached if _anchored(shared_root, workspace, cached, key) else None
    found = chain.layout(segment)
    if found.bad or chain.segment_problems(found, cached.prev, workspace, key):
        return None
    moved = _advanced(replace(cached, submitted=dict(cached.submitted), stops=dict(cached.stops),
                              quotas=dict(cached.quotas), imported=dict(cached.imported)), found, segment)
    return moved if _anchored(shared_root, workspace, moved, key) else None


def _advanced(read_so_far: _Read, found: Layout, data: bytes) -> _Read:
    """Past the segment's last whole record (a torn tail after it is left for later), its records folded."""
    if not found.records:
        return read_so_far
    newest = found.records[-1]
    consumed = sum(len(part) + 1 for part in data.split(b"\n")[:newest.number])
    line = newest.raw + b"\n"
    adopted = fold((r.entry for r in found.records), read_so_far.adopted, read_so_far.submitted, read_so_far.stops,
                   read_so_far.quotas, read_so_far.imported)
    return replace(read_so_far, adopted=adopted, end=read_so_far.end + consumed, seam=_sha(line),
                   seam_length=len(line), records=read_so_far.records + len(found.records),
                   prev=chain.continues(newest.entry))


def _seam_holds(data: bytes, cached: _Read) -> bool:
    return len(data) >= cached.seam_length and _sha(data[:cached.seam_length]) == cached.seam


def _anchored(shared_root: str, workspace: str, found: _Read, key: bytes | None) -> bool:
    """The anchor names the newest record read and the count: nothing was cut or slipped in unseen."""
    raw = audit_files.read_anchor(shared_root, workspace)
    anchor = chain.parse_anchor(raw) if raw is not None else None
    return anchor is not None and (anchor.records, anchor.hash) == (found.records, found.prev) and \
        chain.anchor_trusted(anchor, found.keyed, workspace, key)


def _identity(info: os.stat_result | None) -> tuple[int, int]:
    return (info.st_dev, info.st_ino) if info is not None else (0, 0)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cache_file(cache_dir: str, shared_root: str, workspace: str) -> Path:
    name = _sha(f"{os.path.realpath(shared_root)}\0{workspace}".encode())[:32]
    return Path(cache_dir) / "registry" / f"{name}.json"


_SCALARS = {"adopted": bool, "end": int, "seam": str, "seam_length": int, "records": int, "prev": str, "keyed": bool}
_MAPS = ("submitted", "stops", "quotas", "imported")
_FIELDS = {"version", "identity", *_SCALARS, *_MAPS}


def _load(where: Path) -> _Read | None:
    """The cached read; None when there is none or it is not one this version wrote (argus's own cache).
    Every field is checked for its type: a damaged cache only makes the read a whole one. Its maps hold an
    entry per registered run (10,000 after 10,000 runs): pydantic's JSON reader parses them in half the time
    of Python's json, and nothing validates them again (_registry)."""
    try:
        raw = where.read_bytes()
        if not raw.startswith(b'{"version":%d,' % CACHE_VERSION):  # _save writes the version first
            return None
        data = pydantic_core.from_json(raw)
    except (OSError, ValueError):
        return None
    if not _typed(data):
        return None
    fields = {name: value for name, value in data.items() if name not in ("version", "identity")}
    return _Read(**fields, identity=tuple(data["identity"]))


def _typed(data: object) -> bool:
    """Exactly the fields _save writes, each of its type (`type is`: no bool for an int), the maps of strings."""
    if not isinstance(data, dict) or set(data) != _FIELDS:
        return False
    identity = data["identity"]
    return type(identity) is list and len(identity) == 2 and all(type(x) is int for x in identity) \
        and all(type(data[name]) is kind for name, kind in _SCALARS.items()) \
        and all(type(data[name]) is dict and all(type(k) is str and type(v) is str for k, v in data[name].items())
                for name in _MAPS)


def _save(where: Path, found: _Read) -> None:
    """Replaced whole; a cache that cannot be written only makes the next read a whole one."""
    data = {"version": CACHE_VERSION, **found.__dict__, "identity": list(found.identity)}
    temporary = where.with_name(f".{where.name}.{secrets.token_hex(6)}")
    try:
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.write_text(json.dumps(data, separators=(",", ":")))
        os.replace(temporary, where)
    except OSError:
        temporary.unlink(missing_ok=True)
