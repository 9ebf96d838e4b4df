"""One cluster examined, in the order a new user's problems come: the dashboard (and its auth), the nodes and
their GPUs, then the probe job and what it proves of the shared root, argus's state and the clocks.

A check that fails early ends the examination where the next ones would only repeat it: no dashboard, no
probe. Everything that goes to Ray goes through argus's own client (state.ray.client), with the cluster's
token, TLS and headers, and nothing of Ray is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from specs.errors import ArgusError
from specs.kinds.models import Cluster
from state.doctor import stacks, verdicts
from state.doctor.checks import Check, ClusterExam, fail
from state.doctor.probe import ProbeResult, delete_leftovers, run_probe
from state.observed import Node
from state.ray.client import DEFAULT_TIMEOUT, ClusterAuthFailed, RayClient


def examine(cluster: Cluster, shared_root: str, timeout: float) -> ClusterExam:
    """Every check of one cluster; `timeout` bounds the probe's wait, and each request to the dashboard."""
    checks: list[Check] = []
    facts: dict[str, Any] = {"argus_uid": os.geteuid()}
    try:
        _examine(cluster, shared_root, timeout, checks, facts)
    except ArgusError as err:  # the dashboard failed half-way: said as what it is, the checks so far kept
        checks.append(fail("dashboard", str(err)))
    return ClusterExam(cluster.name, cluster.address, shared_root, tuple(checks), facts)


def _examine(cluster: Cluster, root: str, timeout: float, checks: list[Check], facts: dict[str, Any]) -> None:
    try:  # the token, TLS files, headers and cookies the spec points to, read now
        client = _client(cluster, None if cluster.auth_token is None else _token(cluster), timeout)
    except ArgusError as err:
        checks.append(fail("auth", str(err)))
        return
    try:
        body = client.version()
    except ClusterAuthFailed as err:
        checks.append(fail("auth", str(err)))
        return
    facts["ray_version"] = body.get("ray_version")
    checks.append(verdicts.dashboard(body, cluster.address))
    required = _token_required(cluster, timeout)
    facts["token_required"] = required
    checks.append(verdicts.auth(required, cluster.auth_token is not None))
    checks.append(verdicts.keys(os.environ))
    nodes = client.alive_nodes()
    facts["gpus"] = {node.ip or node.node_id: node.resources.get("GPU", 0.0) for node in nodes}
    checks.append(verdicts.gpus(nodes))
    stack_check, facts["stack_dumps"] = stacks.check(client)
    checks.append(stack_check)
    blocked = _root_absent(cluster, root) or verdicts.unplaceable(nodes, cluster.job_defaults)
    if blocked is not None:
        checks.append(blocked)
        return
    delete_leftovers(client, client.jobs())
    result = run_probe(client, root, cluster.job_defaults, timeout)
    facts["probe"] = _probe_facts(result, nodes)
    checks.extend(verdicts.probe(result, nodes, timeout, verdicts.driver_needs(cluster.job_defaults)))


def _client(cluster: Cluster, token: str | None, timeout: float) -> RayClient:
    from state.ray.transport import transport_of

    return RayClient(cluster.name, cluster.address, min(timeout, DEFAULT_TIMEOUT), token, transport_of(cluster))


def _token(cluster: Cluster) -> str | None:
    from state.ray.auth import token_of

    return token_of(cluster)


def _token_required(cluster: Cluster, timeout: float) -> bool | None:
    """Whether the dashboard refuses a request that carries no token: asked once, without one."""
    try:
        _client(cluster, None, timeout).version()
    except ClusterAuthFailed:
        return True
    except ArgusError:
        return None
    return False


def _root_absent(cluster: Cluster, root: str) -> Check | None:
    """An absolute shared root that is not here is an NFS not mounted: never made by argus (a relative one
    lives in the workspace, the local cluster's, and is made as apply would)."""
    if not Path(cluster.shared_root).is_absolute() or Path(root).is_dir():
        return None
    return fail("shared-root", f"the shared root {root} is not there where argus runs (not mounted?): mount it "
                               "here as on every node, then run `argus doctor` again. No probe was submitted")


def _probe_facts(result: ProbeResult, nodes: tuple[Node, ...]) -> dict[str, Any]:
    report = result.report
    node = next((n for n in nodes if n.node_id == result.driver_node_id), None)
    return {"submission_id": result.submission_id, "status": result.status, "seconds": round(result.seconds, 3),
            "node": node.ip if node else result.driver_node_id, "uid": report.uid, "user": report.user,
            "argus_owner_uid": report.owner, "sees_argus_file": report.sees, "wrote_answer": report.wrote,
            "argus_read_answer": result.answer is not None and result.answer == f"{result.nonce} {report.uid}",
            "writable": dict(report.writable), "head_skew_seconds": verdicts.head_skew(result),
            "node_skew_seconds": verdicts.node_skew(result), "deleted": result.deleted, "left": list(result.left)}
