"""Plain-text views of a cluster for jobs/<id>/debug/ (seed 001), gathered through the dashboard's job API."""

from __future__ import annotations

from datetime import datetime, timezone

from state.observed import ClusterState


def cluster_status(cluster: ClusterState) -> str:
    """Like `ray status`: alive nodes, their resources, and what jobs are active."""
    lines = [f"cluster {cluster.name} at {cluster.address} (Ray {cluster.ray_version}, {cluster.session_name})",
             f"alive nodes: {len(cluster.nodes)}"]
    for node in sorted(cluster.nodes, key=lambda n: (not n.is_head, n.node_id)):
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(node.resources.items()) if not k.startswith("node:"))
        lines.append(f"  {'head  ' if node.is_head else 'worker'} {node.node_id[:12]} {node.ip}: {shown}")
    active = [j for j in cluster.jobs if j.status in ("PENDING", "RUNNING")]
    lines.append(f"active jobs: {len(active)}")
    lines += [f"  {j.submission_id} {j.status}" for j in active]
    return "\n".join(lines) + "\n"


def job_list(cluster: ClusterState) -> str:
    """Like `ray job list`: every submission job on the cluster."""
    lines = [f"{'SUBMISSION_ID':<60} {'STATUS':<10} {'START':<20} OWNER"]
    for job in sorted(cluster.jobs, key=lambda j: j.start_time or 0):
        start = datetime.fromtimestamp((job.start_time or 0) / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{job.submission_id:<60} {job.status:<10} {start:<20} {job.workspace or '-'}")
    return "\n".join(lines) + "\n"
