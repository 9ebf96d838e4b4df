"""Which GPUs each run really uses, from two answers of Ray's dashboard (Ray 2.60, checked in its source):

- `GET /nodes?view=summary` (dashboard/modules/node/node_head.py): `data.summary` is one object per node, the
  physical stats its reporter agent gathers (reporter/reporter_agent.py, shaped by reporter_models.StatsPayload),
  with the node's id at `raylet.nodeId` and its GPUs at `gpus`: each {index, name, uuid, utilizationGpu (%),
  memoryUsed, memoryTotal (MiB), processesPids: [{pid, gpuMemoryUsage (MiB)}]}. The agent fills `gpus` only where
  NVML (or AMD's SMI) works on the node; elsewhere it is empty.
- `GET /api/v0/actors` (the state API), ALIVE ones: each actor's `job_id`, `pid` and `node_id`. With the job's
  driver (its job row's `driver_info.pid` on `driver_node_id`) these are the run's processes.

A GPU is the run's when one of its processes (node and pid: pids repeat across nodes) is on it. Both answers
are hostile input: rows of another shape are left out, numbers must be finite and in range (a utilisation
outside 0..100, NaN or of the wrong type is unknown, never 0 or 100), at most MAX_NODES nodes, MAX_GPUS GPUs
per node, MAX_ALL_GPUS in all and MAX_PROCESSES processes per GPU are read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from state.observed import RayJob

NODES = "/nodes?view=summary"
MAX_NODES = 10_000
MAX_GPUS = 64
MAX_PROCESSES = 128
MAX_ALL_GPUS = 8192
"""GPUs read of one answer in all: a cluster of 1000 nodes of 8 fits; a forged answer costs a turn no more."""
MAX_PID = 2**22
"""Linux's largest pid (pid_max's ceiling): anything beyond is not a process."""
MIB = 2**20
MAX_MIB = 2**24
"""16 TiB of GPU memory: more is not a GPU's."""
BUSY = 5.0
"""Utilisation (%) from which a GPU counts as busy: an idle GPU with a process reads 0 to 2."""


@dataclass(frozen=True)
class Gpu:
    """One GPU of one node as the reporter agent last saw it."""

    node_id: str
    index: int
    name: str
    utilization: float | None
    """Percent, 0 to 100; None when the node did not say (or said nonsense)."""
    memory_used: int
    """Bytes."""
    memory_total: int
    pids: frozenset[int]

    @property
    def busy(self) -> bool:
        return self.utilization is not None and self.utilization >= BUSY


@dataclass(frozen=True)
class RunGpus:
    """The GPUs one run's processes are on."""

    submission_id: str
    workspace: str
    job: str
    gpus: tuple[Gpu, ...]

    @property
    def utilization(self) -> float | None:
        """The mean over its GPUs that report one; None when none does."""
        known = [g.utilization for g in self.gpus if g.utilization is not None]
        return sum(known) / len(known) if known else None

    @property
    def memory_used(self) -> int:
        return sum(g.memory_used for g in self.gpus)

    @property
    def memory_total(self) -> int:
        return sum(g.memory_total for g in self.gpus)


@dataclass(frozen=True)
class ClusterGpus:
    """One cluster's GPUs and which runs use them; `problem` says why it is unknown (then nothing else is)."""

    cluster: str
    problem: str = ""
    gpus: tuple[Gpu, ...] = ()
    runs: Mapping[str, RunGpus] = field(default_factory=dict)
    """By submission id: every active run argus labelled (any workspace) whose processes were found."""

    @property
    def known(self) -> bool:
        return not self.problem

    @property
    def busy(self) -> int:
        return sum(g.busy for g in self.gpus)

    def busy_by_workspace(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for run in self.runs.values():
            found[run.workspace] = found.get(run.workspace, 0) + sum(g.busy for g in run.gpus)
        return found


def node_gpus(body: Any) -> tuple[Gpu, ...] | None:
    """Every GPU of the summary answer; None when the answer is not the summary's shape at all."""
    summary = body.get("data", {}).get("summary") if isinstance(body, dict) and isinstance(body.get("data"), dict) \
        else None
    if not isinstance(summary, list):
        return None
    found: list[Gpu] = []
    for node in summary[:MAX_NODES]:
        raylet = node.get("raylet") if isinstance(node, dict) else None
        node_id = raylet.get("nodeId") if isinstance(raylet, dict) else None
        gpus = node.get("gpus") if isinstance(node, dict) else None
        if not _hex(node_id) or not isinstance(gpus, list):
            continue
        found += [gpu for row in gpus[:MAX_GPUS] if (gpu := _gpu(node_id, row)) is not None]
        if len(found) >= MAX_ALL_GPUS:
            break
    return tuple(found[:MAX_ALL_GPUS])


def run_processes(jobs: Iterable[RayJob], actors: list[dict[str, Any]]) -> dict[str, set[tuple[str, int]]]:
    """Submission id -> the (node id, pid) of its driver and of its alive actors, for argus's active runs."""
    active = [j for j in jobs if j.status in ("PENDING", "RUNNING") and j.run_id is not None]
    found: dict[str, set[tuple[str, int]]] = {j.submission_id: set() for j in active}
    for job in active:
        if job.driver_pid is not None and _hex(job.driver_node_id):
            found[job.submission_id].add((str(job.driver_node_id).lower(), job.driver_pid))
    by_ray_id = {j.ray_job_id.lower(): j.submission_id for j in active if j.ray_job_id}
    for row in actors:
        sid = by_ray_id.get(row["job_id"].lower()) if isinstance(row.get("job_id"), str) else None
        pid, node = _pid(row.get("pid")), row.get("node_id")
        if sid is not None and pid is not None and _hex(node) and row.get("state", "ALIVE") == "ALIVE":
            found[sid].add((node.lower(), pid))
    return found


def use_by_run(cluster: str, jobs: Iterable[RayJob], gpus: tuple[Gpu, ...],
               actors: list[dict[str, Any]]) -> ClusterGpus:
    """One pass over the GPUs' processes whatever the number of runs: (node, pid) -> its run, looked up."""
    jobs = tuple(jobs)
    labels = {j.submission_id: j for j in jobs}
    processes = run_processes(jobs, actors)
    owner = {process: sid for sid, found in processes.items() for process in found}
    mine: dict[str, list[Gpu]] = {sid: [] for sid in processes}
    for gpu in gpus:
        for sid in sorted({owner[(gpu.node_id, pid)] for pid in gpu.pids if (gpu.node_id, pid) in owner}):
            mine[sid].append(gpu)
    runs = {sid: RunGpus(submission_id=sid, workspace=labels[sid].workspace or "", job=labels[sid].job or "",
                         gpus=tuple(found)) for sid, found in mine.items()}
    return ClusterGpus(cluster=cluster, gpus=gpus, runs=runs)


def _gpu(node_id: str, row: Any) -> Gpu | None:
    if not isinstance(row, dict):
        return None
    index, name = _count(row.get("index"), MAX_GPUS * 16), row.get("name")
    total, used = _count(row.get("memoryTotal"), MAX_MIB), _count(row.get("memoryUsed"), MAX_MIB)
    if index is None:
        return None
    processes = row.get("processesPids")
    pids = frozenset(pid for p in (processes[:MAX_PROCESSES] if isinstance(processes, list) else ())
                     if isinstance(p, dict) and (pid := _pid(p.get("pid"))) is not None)
    return Gpu(node_id=node_id.lower(), index=index, name=_name(name), utilization=_percent(row.get("utilizationGpu")),
               memory_used=(used or 0) * MIB, memory_total=(total or 0) * MIB, pids=pids)


def _percent(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value) if 0 <= value <= 100 else None


def _count(value: Any, ceiling: int) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= ceiling else None


def _pid(value: Any) -> int | None:
    """A pid as Ray sends one: an int (the state API, the reporter) or a decimal string (driver_info)."""
    if isinstance(value, str) and value.isdigit() and len(value) <= 8:
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PID else None


def _hex(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 64 and all(c in "0123456789abcdefABCDEF" for c in value)


def _name(value: Any) -> str:
    """A GPU's model name, shown on the page: printable ASCII only, short."""
    text = value if isinstance(value, str) else ""
    return "".join(c for c in text[:64] if " " <= c <= "~")


def driver_pid(info: Any) -> int | None:
    """A job row's `driver_info.pid` (Ray sends it as a string), or None."""
    return _pid(info.get("pid")) if isinstance(info, dict) else None
