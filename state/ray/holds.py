"""What Ray holds for each job, from the dashboard's state API: the reservations admission counts.

Ray's job table does not say what a job holds (its JobDetails leaves out the entrypoint resources). The
state API does, in three places, read once per observation:
- `GET /api/v0/placement_groups?detail=true`: each CREATED group's `creator_job_id` (Ray's hex job id,
  the jobs list's `job_id`) and its bundles, each with the node it is reserved on (`unit_resources`);
- `GET /api/v0/actors?detail=true`, ALIVE ones: the job's entrypoint reservation is the actor Ray's job
  manager names `_ray_internal_job_actor_<submission_id>` in SUPERVISOR_ACTOR_RAY_NAMESPACE (its
  `required_resources` are the job's entrypoint_num_cpus/gpus/resources, on its node); and the actors of
  the job itself that hold accelerators outside any placement group.
Tasks are not read (a listing of every task is the state API's most expensive; tasks holding GPUs
outside a group are still in Ray's per-node report, which admission also weighs).

The answers are hostile input: rows of the wrong shape, unknown states, odd amounts and names are left
out, at most MAX_ROWS rows of each kind are used, and an answer cut short says so (`complete`). Leaving
a hold out is safe: admission counts a run's known demand where Ray shows no hold for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from state.observed import Hold, RayJob

MAX_ROWS = 10_000
"""Rows of each listing argus asks for; a cluster with more says so, and what is missing counts as unheld."""
GROUPS = f"/api/v0/placement_groups?detail=true&limit={MAX_ROWS}&filter_keys=state&filter_predicates=%3D" \
         "&filter_values=CREATED"
ACTORS = f"/api/v0/actors?detail=true&limit={MAX_ROWS}&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
SUPERVISOR_NAMESPACE = "SUPERVISOR_ACTOR_RAY_NAMESPACE"
SUPERVISOR_PREFIX = "_ray_internal_job_actor_"
NOT_ACCELERATORS = frozenset({"CPU", "memory", "object_store_memory"})
"""What an actor outside a group is not counted for: Ray schedules an actor with 1 CPU and runs it with 0,
so its `required_resources` overstate its CPUs; its accelerators (and custom resources) it holds."""
HEX_ID = re.compile(r"[0-9a-fA-F]{1,64}")
RESOURCE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


class Listing(NamedTuple):
    rows: list[dict[str, Any]]
    complete: bool


def listing(body: Any) -> Listing | None:
    """A state API answer's rows (objects only), and whether they are all there is; None: not its shape."""
    result = body.get("data", {}).get("result") if isinstance(body, dict) and isinstance(body.get("data"), dict) \
        else None
    rows = result.get("result") if isinstance(result, dict) else None
    if not isinstance(rows, list):
        return None
    kept = [r for r in rows[:MAX_ROWS] if isinstance(r, dict)]
    complete = len(kept) == len(rows) and not result.get("partial_failure_warning") \
        and _count(result.get("num_filtered"), len(rows)) <= len(rows) \
        and _count(result.get("num_after_truncation"), 0) >= _count(result.get("total"), 0)
    return Listing(kept, bool(complete))


def holds_by_run(jobs: Iterable[RayJob], groups: list[dict[str, Any]],
                 actors: list[dict[str, Any]]) -> dict[str, tuple[Hold, ...]]:
    """Submission id -> what Ray holds for it, for the jobs Ray lists as PENDING or RUNNING."""
    active = [j for j in jobs if j.status in ("PENDING", "RUNNING")]
    by_ray_id = {j.ray_job_id.lower(): j.submission_id for j in active if j.ray_job_id}
    found: dict[str, list[Hold]] = {}
    for row in groups:
        sid = by_ray_id.get(_text(row.get("creator_job_id")).lower())
        if sid is not None:
            found.setdefault(sid, []).extend(_group(row))
    ids = {j.submission_id for j in active}
    for row in actors:
        sid, hold = _actor(row, ids, by_ray_id)
        if sid is not None and hold is not None:
            found.setdefault(sid, []).append(hold)
    return {sid: tuple(h) for sid, h in sorted(found.items()) if h}


def _group(row: Mapping[str, Any]) -> list[Hold]:
    """A group's bundles summed per node: one hold per node it reserves (verl's groups are one node each)."""
    bundles = row.get("bundles")
    per_node: dict[str, dict[str, float]] = {}
    for bundle in bundles[:MAX_ROWS] if isinstance(bundles, list) else ():
        node, amounts = _text(bundle.get("node_id")) if isinstance(bundle, dict) else "", None
        if node and HEX_ID.fullmatch(node):
            amounts = _amounts(bundle.get("unit_resources"))
        if amounts:
            summed = per_node.setdefault(node, {})
            for name, amount in amounts.items():
                summed[name] = summed.get(name, 0.0) + amount
    return [Hold(kind="group", node_id=node, resources=res) for node, res in sorted(per_node.items())]


def _actor(row: Mapping[str, Any], ids: set[str], by_ray_id: Mapping[str, str]) -> tuple[str | None, Hold | None]:
    node, amounts = _text(row.get("node_id")), _amounts(row.get("required_resources"))
    if row.get("state") != "ALIVE" or not HEX_ID.fullmatch(node) or not amounts:
        return None, None
    name = _text(row.get("name"))
    if row.get("ray_namespace") == SUPERVISOR_NAMESPACE and name.startswith(SUPERVISOR_PREFIX):
        sid = name[len(SUPERVISOR_PREFIX):]
        return (sid, Hold(kind="driver", node_id=node, resources=amounts)) if sid in ids else (None, None)
    if row.get("placement_group_id"):  # what it uses is its group's, counted with the group
        return None, None
    held = {k: v for k, v in amounts.items() if k not in NOT_ACCELERATORS}
    sid = by_ray_id.get(_text(row.get("job_id")).lower())
    return (sid, Hold(kind="actor", node_id=node, resources=held)) if sid and held else (None, None)


def _amounts(value: Any) -> dict[str, float]:
    """Resource name -> a positive finite amount; at most 32 of them, others left out."""
    found: dict[str, float] = {}
    for name, amount in value.items() if isinstance(value, dict) else ():
        if isinstance(name, str) and RESOURCE.fullmatch(name) and not isinstance(amount, bool) \
                and isinstance(amount, int | float) and 0 < amount < 2**53 and len(found) < 32:
            found[name] = float(amount)
    return found


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
