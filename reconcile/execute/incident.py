"""The scene of a run's interruption, gathered and kept (issue 38 item 4, docs/incidents.md).

`keep_scene` is called once per run, at the moment argus first sees it failed, lost, stopped at its
deadline (execute.refresh, before its driver log is kept and its row pruned), or, by the loop, stalled or
idle while it still lives (then with `live=True`: the Python stacks of its processes are dumped too). It reads
what argus already has (the run's record and log tail on the shared root, its last checkpoint) and what only
Ray has now (state.ray.scene), masks the secret values the run was sent, and writes jobs/<id>/incident.json
(state.runs.incident). It never raises: a scene that cannot be kept is a warning, and settling goes on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specs.diagnostics import plain
from specs.errors import ArgusError
from specs.workloads.submission import held_secrets
from state.observed import RunRecord
from state.ray import scene
from state.ray.client import RayClient
from state.runs import incident, records
from state.runs.checkpoints import inspect_checkpoint
from state.runs.failures import tail

KINDS = ("failed", "lost", "deadline", "stalled", "idle")
LOG_LINES = 200
CHECKPOINT_DIR = re.compile(r"trainer\.default_local_dir=(?:'([^']+)'|(\S+))")


def kind_of(failure: str | None) -> str:
    """The kind of interruption a failure class is (KINDS)."""
    return {"node_lost": "lost", "lost": "lost", "deadline": "deadline"}.get(failure or "", "failed")


def keep_scene(client: RayClient | None, root: str, record: RunRecord, kind: str, *, failure: str | None = None,
               redact: Callable[[str], str] = str, live: bool = False, detail: str = "",
               echo: Callable[[str], None] = print) -> dict[str, Any] | None:
    """Gather and write the run's incident record; the record written, or None when it could not be. Never
    raises: it runs before the run's record is updated, so a failure here would come back every turn."""
    try:
        found = gather(client, root, record, kind, failure=failure, live=live, detail=detail)
        masked = _masked(found, _redactor(record, redact))
        incident.write(root, record.submission_id, masked)
    except (ArgusError, OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else f"{type(err).__name__}: {err}"
        echo(f"  warning: the incident record of run {record.submission_id} could not be kept "
             f"({plain(why, False)[:300]}); `argus logs` still shows its log.")
        return None
    return masked


def keep_scene_once(client: RayClient | None, root: str, record: RunRecord, kind: str, **options: Any
                    ) -> dict[str, Any] | None:
    """keep_scene, unless the run already has a record of this kind: what the loop calls each turn a run is
    found stalled or idle (live=True), so the scene is the one of the moment it was first found."""
    kept = incident.read(root, record.submission_id)
    if kept is not None and kept.get("kind") == kind:
        return None
    return keep_scene(client, root, record, kind, **options)


def gather(client: RayClient | None, root: str, record: RunRecord, kind: str, *, failure: str | None = None,
           live: bool = False, detail: str = "") -> dict[str, Any]:
    """The record as plain data, secrets not yet masked: argus's side, then Ray's, then what could not be read."""
    sid = record.submission_id
    found: dict[str, Any] = {
        "submission_id": sid, "workspace": record.workspace, "job": record.job, "cluster": record.cluster,
        "attempt": record.attempt, "kind": kind, "status": str(record.status), "failure": failure or record.failure,
        "detail": detail, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "log_tail": tail(records.log_tail(root, sid), LOG_LINES), "checkpoint": _checkpoint(root, record),
    }
    problems: list[str] = []
    if client is not None:
        problems += _ray_side(client, record, found, live)
    found["problems"] = problems
    return found


def _ray_side(client: RayClient, record: RunRecord, found: dict[str, Any], live: bool) -> list[str]:
    view, problems = scene.ray_view(client, record.submission_id)
    found["ray_job"] = view
    job_id = view.get("job_id") if isinstance(view.get("job_id"), str) else None
    found["failed_tasks"], found["dead_actors"] = [], []
    if job_id and scene.held.HEX_ID.fullmatch(job_id):
        found["failed_tasks"], more = scene.failed_tasks(client, job_id)
        problems += more
        found["dead_actors"], more = scene.dead_actors(client, job_id)
        problems += more
    ran_on = {n for row in (*found["failed_tasks"], *found["dead_actors"]) if isinstance(n := row.get("node_id"), str)}
    if isinstance(view.get("driver_node_id"), str):
        ran_on.add(view["driver_node_id"])
    found["nodes"], more = scene.nodes(client, ran_on)
    problems += more
    if live:
        found["stacks"], more = scene.stacks(client, scene.processes(client, record.submission_id, job_id,
                                                                  view.get("driver")))
        problems += more or ([] if found["stacks"] else ["stacks: no live process of the run was found"])
    return problems


def _checkpoint(root: str, record: RunRecord) -> dict[str, Any] | None:
    """The last checkpoint the run would resume from (verl's tracker in its trainer.default_local_dir)."""
    entrypoint = record.submission.entrypoint if record.submission else ""
    match = CHECKPOINT_DIR.search(entrypoint)
    if match is None:
        return None
    directory = (match.group(1) or match.group(2)).replace("${shared_root}", root)
    real_root = os.path.realpath(root)
    inside = os.path.isabs(directory) and os.path.realpath(directory).startswith(real_root + os.sep)
    # only beneath the shared root: the record on the root is any job's to rewrite, and this one is read by all
    state = inspect_checkpoint(Path(directory)) if inside else None
    return {"directory": directory, **(state.model_dump(mode="json") if state else {"step": None})}


def _redactor(record: RunRecord, redact: Callable[[str], str]) -> Callable[[str], str]:
    """The caller's secrets, and those of the run's own `${env:NAME}` references this process holds."""
    env = record.submission.env_vars if record.submission else {}
    held = [value for value in held_secrets(env, os.environ).values() if value]

    def masked(text: str) -> str:
        text = redact(text)
        for value in held:
            text = text.replace(value, "***")
        return text

    return masked


def _masked(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): _masked(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, redact) for v in value]
    return value
