"""Whether argus can keep the Python stacks of a stalled run (docs/incidents.md): the head lets its dashboard dump
them (RAY_DASHBOARD_ENABLE_PROFILING=1), and py-spy, run by a node's agent, can read a live Ray worker (py-spy
installed on the nodes, which ray[default] does, and ptrace allowed: the same user, yama ptrace_scope at most 1,
or CAP_SYS_PTRACE in a container). Proved by dumping one live worker's stacks, as an incident would."""

from __future__ import annotations

from specs.errors import ArgusError
from state.doctor.checks import Check, ok, warn
from state.ray import holds as held
from state.ray import scene
from state.ray.client import RayClient

WORKERS = "/api/v0/workers?detail=false&limit=20&filter_keys=is_alive&filter_predicates=%3D&filter_values=True"
ACTORS = "/api/v0/actors?detail=true&limit=20&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
ENABLE = ("Set RAY_DASHBOARD_ENABLE_PROFILING=1 in the environment of `ray start --head` (and have py-spy on every "
          "node: `pip install 'ray[default]'` installs it) to have them.")


def check(client: RayClient) -> tuple[Check, dict[str, object]]:
    """The stack-dumps check, and its facts."""
    enabled = scene.profiling(client)
    if enabled is not True:
        said = "does not allow them" if enabled is False else "does not say whether it allows them (an older Ray?)"
        return warn("stack-dumps", f"The head's dashboard {said}: incident records of stalled runs will hold no "
                                   f"Python stacks. {ENABLE}"), {"profiling": enabled}
    target = _a_live_worker(client)
    if target is None:
        return ok("stack-dumps", "The dashboard allows stack dumps (RAY_DASHBOARD_ENABLE_PROFILING=1); no live worker "
                                 "was there to prove py-spy on the nodes."), {"profiling": True, "proved": False}
    pid, node = target
    try:
        client.read_text(f"/worker/traceback?pid={pid}&node_id={node}&native=0")
    except ArgusError as err:
        return warn("stack-dumps", f"The dashboard allows stack dumps, but dumping a live worker (pid {pid}) failed: "
                                   f"{str(err)[:400]} py-spy must be installed on every node and may ptrace Ray's "
                                   "workers (the same user; kernel.yama.ptrace_scope at most 1, or CAP_SYS_PTRACE in "
                                   "a container)."), {"profiling": True, "proved": False}
    return ok("stack-dumps", "Stacks of a stalled run's processes can be kept: a live worker's were dumped."), \
        {"profiling": True, "proved": True}


def _a_live_worker(client: RayClient) -> tuple[int, str] | None:
    """A live Ray worker or actor process (pid, node id); None on an idle cluster (Ray starts workers on demand)."""
    for endpoint in (WORKERS, ACTORS):
        try:
            listing = held.listing(client.read_json(endpoint))
        except ArgusError:
            continue
        for row in listing.rows if listing else []:
            pid, node = row.get("pid"), row.get("node_id")
            if row.get("worker_type", "WORKER") == "WORKER" and isinstance(pid, int) and pid > 0 \
                    and isinstance(node, str) and held.HEX_ID.fullmatch(node):
                return pid, node
    return None
