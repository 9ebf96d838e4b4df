"""Ray's side of an interrupted run's scene (issue 38, docs/incidents.md): its job row, its failed tasks and dead
actors with their errors, the nodes it ran on, and, while it still lives, the Python stacks of its processes.

Every answer is hostile input (anyone who reaches the dashboard can submit jobs, name actors, write error
text): rows of the wrong shape are left out, at most MAX_ROWS of each kind are kept, each text is plain and cut
to length. What could not be read is said in `problems`, never raised: a scene half seen is still evidence,
and nothing here may keep argus from settling the run.

Stacks come from the dashboard's reporter (`GET /worker/traceback`), which runs `py-spy dump` on the node. It
answers only when the head runs with RAY_DASHBOARD_ENABLE_PROFILING=1, py-spy is installed on the nodes
(ray[default] installs it) and the agent may ptrace the run's processes (the same user, and the kernel's
yama ptrace_scope at most 1, or CAP_SYS_PTRACE); `profiling()` says whether the head allows it.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from specs.diagnostics import plain
from specs.errors import ArgusError
from state.ray import holds as held
from state.ray.client import RayClient

MAX_ROWS = 50
"""Failed tasks and dead actors kept of each kind: the first errors explain a failure, the thousandth does not."""
MAX_TEXT = 2000
"""Characters of one error message kept (Ray's include the remote traceback)."""
MAX_STACKS = 8
"""Processes whose stacks are dumped: the job's supervisor (with its children: the entrypoint) and a few actors."""
MAX_STACK_CHARS = 24_000
SUPERVISOR = "_ray_internal_job_actor_"
IP = re.compile(r"[0-9a-fA-F.:]{2,45}")


def ray_view(client: RayClient, submission_id: str) -> tuple[dict[str, Any], list[str]]:
    """The job's row as Ray tells it, and what could not be read."""
    try:
        row = client.read_json(f"/api/jobs/{quote(submission_id, safe='')}")
    except ArgusError as err:
        return {}, [f"job row: {_short(str(err), 300)}"]
    if not isinstance(row, dict):
        return {}, ["job row: not a JSON object"]
    keys = ("status", "message", "error_type", "driver_exit_code", "job_id", "driver_node_id", "start_time",
            "end_time", "entrypoint")
    view = {key: _value(row.get(key)) for key in keys if row.get(key) is not None}
    driver = row.get("driver_info")
    if isinstance(driver, dict):
        view["driver"] = {key: _value(driver.get(key)) for key in ("id", "node_ip_address", "pid")}
    return view, []


def failed_tasks(client: RayClient, ray_job_id: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The job's FAILED tasks with Ray's error for each (at most MAX_ROWS)."""
    endpoint = f"/api/v0/tasks?detail=true&limit={MAX_ROWS}" + _filters(("job_id", ray_job_id), ("state", "FAILED"))
    keys = ("task_id", "attempt_number", "name", "func_or_class_name", "type", "state", "node_id", "worker_pid",
            "error_type", "error_message", "actor_id")
    return _rows(client, endpoint, keys, "failed tasks")


def dead_actors(client: RayClient, ray_job_id: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The job's DEAD actors and why each died (at most MAX_ROWS)."""
    endpoint = f"/api/v0/actors?detail=true&limit={MAX_ROWS}" + _filters(("job_id", ray_job_id), ("state", "DEAD"))
    keys = ("actor_id", "class_name", "name", "state", "node_id", "pid", "death_cause")
    return _rows(client, endpoint, keys, "dead actors")


def nodes(client: RayClient, node_ids: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every node's state (the run's first: those in `node_ids`), with its resources; at most MAX_ROWS."""
    try:
        rows = client.node_rows()
    except ArgusError as err:
        return [], [f"nodes: {_short(str(err), 300)}"]
    keys = ("node_id", "node_ip", "state", "state_message", "is_head_node", "resources_total")
    kept = [{key: _value(row.get(key)) for key in keys if key in row} for row in rows]
    for node in kept:
        node_id = node.get("node_id")
        node["ran_this_run"] = isinstance(node_id, str) and node_id in node_ids  # a list there is unhashable
    return sorted(kept, key=lambda n: not n["ran_this_run"])[:MAX_ROWS], []


def processes(client: RayClient, submission_id: str, ray_job_id: str | None,
              driver: dict[str, Any] | None = None) -> list[tuple[int, str, str]]:
    """(pid, where: `node_id=..` or `ip=..`, what it is) of the run's live processes: its driver (when it is a
    Ray driver: verl's trainer), the job's ALIVE actors, then its supervisor (whose children are the
    entrypoint); at most MAX_STACKS. [] when neither Ray's job row nor the state API says."""
    found: list[tuple[int, str, str]] = []
    pid, ip = (driver or {}).get("pid"), (driver or {}).get("node_ip_address")
    if isinstance(pid, str) and pid.isdigit():
        pid = int(pid)
    if isinstance(pid, int) and pid > 0 and isinstance(ip, str) and IP.fullmatch(ip):
        found.append((pid, f"ip={ip}", "driver"))
    endpoint = f"/api/v0/actors?detail=true&limit={MAX_ROWS}" + _filters(("state", "ALIVE"))
    try:
        listing = held.listing(client.read_json(endpoint))
    except ArgusError:
        listing = None
    for row in listing.rows if listing else []:
        name, pid, node = str(row.get("name") or ""), row.get("pid"), row.get("node_id")
        ours = name == SUPERVISOR + submission_id or (ray_job_id and row.get("job_id") == ray_job_id)
        if ours and isinstance(pid, int) and pid > 0 and isinstance(node, str) and held.HEX_ID.fullmatch(node):
            what = "job supervisor (its children run the entrypoint)" if name.startswith(SUPERVISOR) else \
                f"actor {_short(str(row.get('class_name') or '?'), 80)}"
            found.append((pid, f"node_id={node}", what))
    return sorted(found, key=lambda p: p[2].startswith("job"))[:MAX_STACKS]


def stacks(client: RayClient, targets: list[tuple[int, str, str]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The Python stacks of each process (py-spy through the dashboard's reporter); the supervisor's children
    too, when py-spy can follow them (it gives up on a child that is no Python, as a shell is: then without)."""
    dumps, problems = [], []
    for pid, where, what in targets:
        tries = ("1", "0") if what.startswith("job") else ("0",)
        for subprocesses in tries:
            try:
                text = client.read_text(f"/worker/traceback?pid={pid}&{where}&native=0&subprocesses={subprocesses}")
            except ArgusError as err:
                failed = f"stacks of pid {pid} ({what}): {_short(str(err), 400)}"
                continue
            dumps.append({"pid": pid, "where": where, "what": what, "stacks": _short(text, MAX_STACK_CHARS)})
            break
        else:
            problems.append(failed)
    return dumps, problems


def profiling(client: RayClient) -> bool | None:
    """Whether the head lets the dashboard dump stacks (RAY_DASHBOARD_ENABLE_PROFILING=1); None: it does not say."""
    try:
        body = client.read_json("/api/profiling_enabled")
    except ArgusError:
        return None
    data = body.get("data") if isinstance(body, dict) else None
    enabled = (data.get("profilingEnabled", data.get("profiling_enabled"))) if isinstance(data, dict) else None
    return enabled if isinstance(enabled, bool) else None


def _rows(client: RayClient, endpoint: str, keys: tuple[str, ...], what: str) -> tuple[list[dict[str, Any]], list[str]]:
    try:
        listing = held.listing(client.read_json(endpoint))
    except ArgusError as err:
        return [], [f"{what}: {_short(str(err), 300)}"]
    if listing is None:
        return [], [f"{what}: the state API answered in a shape argus cannot read"]
    rows = [{key: _value(row.get(key)) for key in keys if key in row} for row in listing.rows[:MAX_ROWS]]
    return rows, [] if listing.complete else [f"{what}: more than {MAX_ROWS}; the first {len(rows)} are kept"]


def _filters(*pairs: tuple[str, str]) -> str:
    return "".join(f"&filter_keys={quote(k)}&filter_predicates=%3D&filter_values={quote(v, safe='')}"
                   for k, v in pairs)


def _value(value: Any, depth: int = 0) -> Any:
    """A field of Ray's answer as plain JSON: text plain and cut, numbers kept, nesting bounded."""
    if isinstance(value, bool) or value is None or (isinstance(value, (int, float)) and abs(value) < 2**63):
        return value
    if isinstance(value, str):
        return _short(value, MAX_TEXT)
    if depth < 3 and isinstance(value, dict):
        return {_short(str(k), 80): _value(v, depth + 1) for k, v in list(value.items())[:40]}
    if depth < 3 and isinstance(value, list):
        return [_value(v, depth + 1) for v in value[:40]]
    return _short(repr(value), 200)


def _short(text: str, limit: int) -> str:
    text = plain(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
