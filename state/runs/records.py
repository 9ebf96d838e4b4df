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

from state.beneath import (
    Refused,
    made_dir,
    make_dirs,
    names_in,
    opened_dir,
    opened_regular,
    read_regular,
    read_regular_at,
    stat_beneath,
)
from state.files import write_beneath
from state.observed import RunEnd, RunRecord

MAX_END_BYTES = 4096
MAX_RECORD_BYTES = 1024 * 1024
OMITTED_WHEN_EMPTY = ("evidence", "advice", "gpus", "stop_asked", "bindings", "outputs", "progress")
"""Fields added after `failure`: left out of a record that has none, so the records of runs that did
not fail still read in the versions before them (their models forbid unknown keys)."""
TAIL_BYTES = 64 * 1024
"""How much of a driver log's end is read to classify a failure: the traceback is at the end."""
MAX_SUBMIT_LOG_BYTES = 1024 * 1024
"""logs/submit.out: a line per submit; a bigger one (written by a job) is started again, not read."""
MAX_RUN_DIRS = 200_000
"""Run directories of one workspace in jobs/: far more than any history; more are not read (a job made them)."""


def job_dir(shared_root: str, submission_id: str) -> Path:
    return Path(shared_root) / "jobs" / submission_id


def write_intent(shared_root: str, record: RunRecord, configs: Mapping[str, str], payload: dict[str, Any]) -> None:
    """Before submitting: the configs as seed 001 lists them (name -> `config_yaml` text), then status SUBMITTING."""
    base = f"jobs/{record.submission_id}"
    make_dirs(shared_root, f"{base}/logs")
    for name, text in configs.items():  # copies for people: only the status decides, and it is made durable
        write_beneath(shared_root, f"{base}/config/{name}.yaml", text, durable=False)
    write_beneath(shared_root, f"{base}/config/submit_payload.json", _json(payload), durable=False)
    write_status(shared_root, record)


def write_status(shared_root: str, record: RunRecord) -> None:
    # Validated again on the way out: model_copy(update=...) does not validate, and what is
    # written here must read back as the same record.
    checked = RunRecord.model_validate(dict(record))
    empty: dict[str, Any] = {name: True for name in OMITTED_WHEN_EMPTY if not getattr(checked, name)}
    if checked.submission is not None:  # fields added later, left out when unset: the record reads in earlier versions
        unset = {name for name in ("follows", "derived_checkpoints") if getattr(checked.submission, name) is None}
        if unset:
            empty["submission"] = unset
    write_beneath(shared_root, f"jobs/{record.submission_id}/status.json",
                  _json(checked.model_dump(mode="json", exclude=empty)))


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def append_submit_log(shared_root: str, submission_id: str, text: str) -> None:
    rel = f"jobs/{submission_id}/logs/submit.out"
    previous = _text_or_empty(shared_root, rel, MAX_SUBMIT_LOG_BYTES)
    # for people; the status and audit log decide
    write_beneath(shared_root, rel, previous + f"{now()} {text}\n", durable=False)


def write_log(shared_root: str, submission_id: str, name: str, text: str) -> None:
    write_beneath(shared_root, f"jobs/{submission_id}/logs/{name}", text)


def has_log(shared_root: str, submission_id: str, name: str) -> bool:
    """Whether the run kept the log `name` as a regular file beneath the root (never through a link)."""
    found = stat_beneath(shared_root, f"jobs/{submission_id}/logs/{name}")
    return found is not None and stat.S_ISREG(found.st_mode)


def write_debug(shared_root: str, submission_id: str, name: str, text: str) -> None:
    write_beneath(shared_root, f"jobs/{submission_id}/debug/{name}", text, durable=False)


def write_debug_to_all(shared_root: str, submission_ids: Sequence[str], name: str, text: str) -> None:
    """The same debug text in each run's debug directory: written once, then linked into the others
    (the job list after an apply of N runs has N lines: a copy for each run would be N² lines)."""
    if not submission_ids:
        return
    first, *others = dict.fromkeys(submission_ids)  # once each: a name linked over itself would stay behind
    write_debug(shared_root, first, name, text)
    for submission_id in others:
        try:
            _link_over(shared_root, f"jobs/{first}/debug", f"jobs/{submission_id}/debug", name)
        except OSError:  # a file system without hard links: a copy then (none where a job made a link)
            with contextlib.suppress(OSError):
                write_debug(shared_root, submission_id, name, text)


def _link_over(shared_root: str, source: str, target: str, name: str) -> None:
    """target/name becomes another name of source/name, replacing what was there whole (never half);
    neither directory is reached through a link."""
    temporary = f".{name}.{os.urandom(4).hex()}"
    with opened_dir(shared_root, source) as origin, made_dir(shared_root, target) as folder:
        os.link(name, temporary, src_dir_fd=origin, dst_dir_fd=folder, follow_symlinks=False)
        try:
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            os.unlink(temporary, dir_fd=folder)
            raise


def read_records(shared_root: str, workspace: str) -> dict[str, RunRecord]:
    """This workspace's records under shared_root; unreadable ones are skipped, not fatal."""
    records: dict[str, RunRecord] = {}
    for name in _run_dirs_of(shared_root, workspace):
        record = _read(shared_root, name)
        if record is not None and record.workspace == workspace:
            records[record.submission_id] = record
    return records


def _run_dirs_of(shared_root: str, workspace: str) -> list[str]:
    """The run directories whose name may be this workspace's: a submission id starts with the
    workspace name (trimmed when long) and a dot, so the other workspaces' runs on a shared root are
    never opened. Names only: one directory listing, no file opened for them, and no more than
    MAX_RUN_DIRS of them kept (Refused beyond: a job filled jobs/, and reading half of it would be a lie)."""
    def ours(name: str) -> bool:
        head = name.split(".", 1)[0]
        return bool(head) and workspace.startswith(head) and "." in name

    try:
        with opened_dir(shared_root, "jobs") as folder:
            return names_in(folder, ours, MAX_RUN_DIRS, f"{shared_root}/jobs")
    except Refused:
        raise
    except OSError:  # no jobs/ here (yet), or it is a symlink: no record is read through it
        return []


def read_record(shared_root: str, submission_id: str) -> RunRecord | None:
    return _read(shared_root, submission_id)


def read_end(shared_root: str, submission_id: str) -> RunEnd | None:
    """The run's exit.json, or None when it has not ended (or wrote something that is not one)."""
    raw = _small_or_none(shared_root, f"jobs/{submission_id}/exit.json", MAX_END_BYTES)
    try:
        return RunEnd.model_validate_json(raw) if raw is not None else None
    except ValidationError:
        return None


def read_ends(shared_root: str, submission_ids: list[str]) -> dict[str, RunEnd]:
    found = {sid: read_end(shared_root, sid) for sid in submission_ids}
    return {sid: end for sid, end in found.items() if end is not None}


DRIVER_LOG = "logs/driver.log"


def driver_log_rel(submission_id: str) -> str:
    """The run's own log, relative to the shared root (read with state.beneath, never as a path)."""
    return f"jobs/{submission_id}/{DRIVER_LOG}"


def driver_log(shared_root: str, submission_id: str) -> Path | None:
    """The run's own log on NFS, when it is a regular file beneath the root (no link on the way)."""
    return job_dir(shared_root, submission_id) / DRIVER_LOG if has_log(shared_root, submission_id, "driver.log") \
        else None


def log_tail(shared_root: str, submission_id: str, limit: int = TAIL_BYTES) -> str:
    """The log's last `limit` bytes; "" when the run kept none or it is no regular file beneath the root."""
    try:
        with opened_regular(shared_root, driver_log_rel(submission_id)) as fd:
            if fd is None:
                return ""
            size = os.fstat(fd).st_size
            return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", errors="replace")
    except OSError:
        return ""


def read_small(path: Path | str, limit: int, dir_fd: int) -> bytes | None:
    """The regular file `path` of the directory `dir_fd` (opened without following links), if it is no
    bigger than limit; None for anything else (state.beneath.read_regular_at says why)."""
    try:
        return read_regular_at(dir_fd, str(path), limit)
    except OSError:
        return None


def _small_or_none(shared_root: str, rel: str, limit: int) -> bytes | None:
    """read_regular, with what cannot be read as not there: a run's files are evidence, never a crash."""
    try:
        return read_regular(shared_root, rel, limit)
    except OSError:
        return None


def _text_or_empty(shared_root: str, rel: str, limit: int) -> str:
    raw = _small_or_none(shared_root, rel, limit)
    return raw.decode("utf-8", errors="replace") if raw is not None else ""


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


def _read(shared_root: str, submission_id: str) -> RunRecord | None:
    """A record argus did not write, or cannot read any more, is skipped: never a crash. Nor is a
    symlink followed or a huge file read; and a record must live in its own run's directory."""
    raw = _small_or_none(shared_root, f"jobs/{submission_id}/status.json", MAX_RECORD_BYTES)
    try:
        record = RunRecord.model_validate(json.loads(raw)) if raw is not None else None
    except (ValueError, RecursionError, ValidationError):
        return None
    return record if record is not None and record.submission_id == submission_id else None


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
