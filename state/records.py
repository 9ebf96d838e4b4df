"""Per-run records on the shared filesystem: jobs/<submission_id>/{config/,logs/,status.json,exit.json}.

Ray forgets jobs (a head restart without persistence, delete_job); these records are how argus
still knows a run happened, so that it is reported, never silently submitted again. status.json
is argus's; logs/driver.log and exit.json are written by the run itself (reconcile.execute.wrapper).
Every file here is writable by every job on the cluster, so each is read as hostile input: size
capped, symlinks refused, and anything malformed is "not there", never a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from state.beneath import opened_dir
from state.files import write_atomic, write_json
from state.observed import RunEnd, RunRecord

MAX_END_BYTES = 4096
MAX_RECORD_BYTES = 1024 * 1024
OMITTED_WHEN_EMPTY = ("evidence", "advice", "gpus", "stop_asked")
"""Fields added after `failure`: left out of a record that has none, so the records of runs that did
not fail still read in the versions before them (their models forbid unknown keys)."""
SUBMISSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A run directory's name: one component, never `..` nor a path."""
TAIL_BYTES = 64 * 1024
"""How much of a driver log's end is read to classify a failure: the traceback is at the end."""


def job_dir(shared_root: str, submission_id: str) -> Path:
    return Path(shared_root) / "jobs" / submission_id


def write_intent(shared_root: str, record: RunRecord, configs: Mapping[str, str], payload: dict[str, Any]) -> None:
    """Before submitting: the configs as seed 001 lists them (name -> `config_yaml` text), then status SUBMITTING."""
    base = job_dir(shared_root, record.submission_id)
    (base / "logs").mkdir(parents=True, exist_ok=True)
    for name, text in configs.items():  # copies for people: only the status decides, and it is made durable
        write_atomic(base / "config" / f"{name}.yaml", text, durable=False)
    write_json(base / "config" / "submit_payload.json", payload, durable=False)
    write_status(shared_root, record)


def write_status(shared_root: str, record: RunRecord) -> None:
    # Validated again on the way out: model_copy(update=...) does not validate, and what is
    # written here must read back as the same record.
    checked = RunRecord.model_validate(dict(record))
    empty = {name for name in OMITTED_WHEN_EMPTY if not getattr(checked, name)}
    write_json(job_dir(shared_root, record.submission_id) / "status.json",
               checked.model_dump(mode="json", exclude=empty))


def append_submit_log(shared_root: str, submission_id: str, text: str) -> None:
    path = job_dir(shared_root, submission_id) / "logs" / "submit.out"
    previous = path.read_text(encoding="utf-8") if path.exists() else ""
    write_atomic(path, previous + f"{now()} {text}\n", durable=False)  # for people; the status and audit log decide


def write_log(shared_root: str, submission_id: str, name: str, text: str) -> None:
    write_atomic(job_dir(shared_root, submission_id) / "logs" / name, text)


def has_log(shared_root: str, submission_id: str, name: str) -> bool:
    return (job_dir(shared_root, submission_id) / "logs" / name).exists()


def write_debug(shared_root: str, submission_id: str, name: str, text: str) -> None:
    write_atomic(job_dir(shared_root, submission_id) / "debug" / name, text, durable=False)


def write_debug_to_all(shared_root: str, submission_ids: Sequence[str], name: str, text: str) -> None:
    """The same debug text in each run's debug directory: written once, then linked into the others
    (the job list after an apply of N runs has N lines: a copy for each run would be N² lines)."""
    if not submission_ids:
        return
    first, *others = dict.fromkeys(submission_ids)  # once each: a name linked over itself would stay behind
    write_debug(shared_root, first, name, text)
    written = job_dir(shared_root, first) / "debug" / name
    for submission_id in others:
        target = job_dir(shared_root, submission_id) / "debug" / name
        try:
            _link_over(written, target)
        except OSError:  # a file system without hard links: a copy then
            write_debug(shared_root, submission_id, name, text)


def _link_over(source: Path, target: Path) -> None:
    """`target` becomes another name of `source`, replacing what was there whole (never half)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.urandom(4).hex()}")
    os.link(source, temporary, follow_symlinks=False)
    try:
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def read_records(shared_root: str, workspace: str) -> dict[str, RunRecord]:
    """This workspace's records under shared_root; unreadable ones are skipped, not fatal."""
    records: dict[str, RunRecord] = {}
    for name in _run_dirs_of(Path(shared_root) / "jobs", workspace):
        record = _read(Path(shared_root) / "jobs" / name / "status.json")
        if record is not None and record.workspace == workspace:
            records[record.submission_id] = record
    return records


def _run_dirs_of(jobs: Path, workspace: str) -> list[str]:
    """The run directories whose name may be this workspace's: a submission id starts with the
    workspace name (trimmed when long) and a dot, so the other workspaces' runs on a shared root are
    never opened. Names only: one directory listing, no file opened for them."""
    try:
        names = os.listdir(jobs)
    except OSError:
        return []
    return sorted(n for n in names if (head := n.split(".", 1)[0]) and workspace.startswith(head) and "." in n)


def read_record(shared_root: str, submission_id: str) -> RunRecord | None:
    return _read(job_dir(shared_root, submission_id) / "status.json")


def read_end(shared_root: str, submission_id: str) -> RunEnd | None:
    """The run's exit.json, or None when it has not ended (or wrote something that is not one)."""
    raw = read_small(job_dir(shared_root, submission_id) / "exit.json", MAX_END_BYTES)
    try:
        return RunEnd.model_validate_json(raw) if raw is not None else None
    except ValidationError:
        return None


def read_ends(shared_root: str, submission_ids: list[str]) -> dict[str, RunEnd]:
    found = {sid: read_end(shared_root, sid) for sid in submission_ids}
    return {sid: end for sid, end in found.items() if end is not None}


def driver_log(shared_root: str, submission_id: str) -> Path | None:
    """The run's own log on NFS, when it is a regular file beneath the root (no link on the way)."""
    fd = open_driver_log(shared_root, submission_id, os.O_NONBLOCK)
    if fd is None:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    return job_dir(shared_root, submission_id) / "logs" / "driver.log" if regular else None


def open_driver_log(shared_root: str, submission_id: str, flags: int = 0) -> int | None:
    """The run's log opened beneath the root: its place derived from the submission id alone, every
    directory on the way opened without following a link (a job may swap jobs/<id> or its logs/ for
    one that leads out of the root), the file itself too. None when it is not there so."""
    if not SUBMISSION_ID.fullmatch(submission_id):
        return None
    try:
        with opened_dir(shared_root, f"jobs/{submission_id}/logs") as folder:
            return os.open("driver.log", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, dir_fd=folder)
    except OSError:
        return None


def log_tail(shared_root: str, submission_id: str, limit: int = TAIL_BYTES) -> str:
    fd = open_driver_log(shared_root, submission_id, os.O_NONBLOCK)
    if fd is None:
        return ""
    with contextlib.suppress(OSError), os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        handle.seek(max(0, info.st_size - limit))
        return handle.read(limit).decode("utf-8", errors="replace")
    return ""


def read_small(path: Path | str, limit: int, dir_fd: int | None = None) -> bytes | None:
    """A regular file's bytes, if it is no bigger than limit; symlinks are not followed. `dir_fd`:
    the directory `path` is relative to, itself opened without following links."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def older_than(record: RunRecord, seconds: float) -> bool:
    """Whether the record was last written more than `seconds` ago; False when its time cannot be read."""
    try:
        written = datetime.fromisoformat(record.updated_at)
    except (TypeError, ValueError):
        return False
    if written.tzinfo is None:
        return False
    return (datetime.now(timezone.utc) - written).total_seconds() > seconds


def _read(path: Path) -> RunRecord | None:
    """A record argus did not write, or cannot read any more, is skipped: never a crash. Nor is a
    symlink followed or a huge file read; and a record must live in its own run's directory."""
    raw = read_small(path, MAX_RECORD_BYTES)
    try:
        record = RunRecord.model_validate(json.loads(raw)) if raw is not None else None
    except (ValueError, RecursionError, ValidationError):
        return None
    return record if record is not None and record.submission_id == path.parent.name else None


def config_yaml(data: Any) -> str:
    """Plain data (a model dumped as JSON) as block YAML. libyaml's emitter: ruamel's took ~10 ms a
    file, two files per submit, the larger part of argus's own time in an apply of many jobs."""
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """The safe dumper (plain data only, never a python tag) quoting also the strings that YAML 1.2
    (ruamel, yq, Go's yaml.v3) reads as numbers though PyYAML's YAML 1.1 does not: "0o17", "1e3"."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?0o[0-7]+$"), list("-+0"))
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
                              list("-+.0123456789"))
