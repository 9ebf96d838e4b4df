"""A run's incident record: the scene of its interruption, kept in its run directory (jobs/<id>/incident.json)
before anything is cleaned up (docs/incidents.md).

Written once per run, whole (a temporary file renamed over: a link a job planted at the name is replaced,
never written through; no directory on the way is reached through a link), at most MAX_BYTES: what does not
fit is cut from the biggest parts first (stacks, then the log tail, then Ray's rows), and the record says so.
Secrets are masked by the caller before it arrives here (the values argus sent the run). Read back as
hostile input: the run's directory is writable by every job on the cluster.
"""

from __future__ import annotations

import json
from typing import Any

from state.beneath import read_regular, stat_beneath
from state.files import write_beneath
from state.root_key import keyed, sign, verify

NAME = "incident.json"
SIGNED_AS = "incident"
SIGNATURE_ROOM = 256
"""Bytes the signature adds past the cap."""
MAX_BYTES = 256 * 1024
VERSION = 1
SHRINKABLE = ("stacks", "log_tail", "failed_tasks", "dead_actors", "nodes")
"""What is cut, in this order, when the record is too big: the most voluminous, least decisive parts first."""


def rel(submission_id: str) -> str:
    return f"jobs/{submission_id}/{NAME}"


def exists(shared_root: str, submission_id: str) -> bool:
    """Whether the run already has a record (of any kind at the name: one planted there is not replaced
    by a second interruption of the same run, and is not read as argus's either)."""
    return stat_beneath(shared_root, rel(submission_id)) is not None


def write(shared_root: str, submission_id: str, record: dict[str, Any]) -> None:
    """The record, JSON, within MAX_BYTES (and its signature); OSError when the root refuses it (the caller says
    so). With ARGUS_ROOT_KEY set it is signed: a record a job planted at the name is then never read as argus's
    (it would block the real scene, and its words would reach the ops agent as argus's report)."""
    body = json.loads(capped({"version": VERSION, **record}))
    signature = sign(SIGNED_AS, submission_id, body)
    text = _json({**body, "sig": signature}) if signature else _json(body)
    write_beneath(shared_root, rel(submission_id), text, durable=False)


def read(shared_root: str, submission_id: str) -> dict[str, Any] | None:
    """The run's record; None when there is none, or what is there is not one argus wrote (a link, too big,
    not JSON, another run's)."""
    try:
        raw = read_regular(shared_root, rel(submission_id), MAX_BYTES + SIGNATURE_ROOM)
        record = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("submission_id") != submission_id:
        return None
    signature = record.pop("sig", None)
    if keyed() and not verify(SIGNED_AS, submission_id, record, signature):
        return None  # not argus's: a job's, or written without this key
    return record


def capped(record: dict[str, Any]) -> str:
    """The record as JSON text of at most MAX_BYTES, its biggest parts cut first."""
    record = dict(record)
    text = _json(record)
    for key in SHRINKABLE:
        if len(text.encode()) <= MAX_BYTES:
            return text
        record[key] = _shrunk(record.get(key))
        record.setdefault("cut", []).append(key)
        text = _json(record)
    if len(text.encode()) > MAX_BYTES:  # only when its small parts alone are too big: a job wrote them
        keep = ("version", "submission_id", "job", "cluster", "kind", "status", "failure", "time")
        text = _json({**{k: record.get(k) for k in keep}, "cut": ["everything else"]})
    return text


def _shrunk(value: Any) -> Any:
    if isinstance(value, str):
        return "…" + value[-MAX_BYTES // 8:]
    if isinstance(value, list):
        return [_shrunk_item(item) for item in value[:5]]
    return value


def _shrunk_item(item: Any) -> Any:
    if isinstance(item, dict):
        return {k: (v[:2000] + "…" if isinstance(v, str) and len(v) > 2000 else v) for k, v in item.items()}
    return item


def _json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
