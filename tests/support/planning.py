"""The pure planner's inputs as plain data, no Ray and no disk: a workspace `team` with one cluster `c`,
its command jobs, the desired state that holds them, the Ray jobs and argus's run records observed for
them, the admission queue's ledger entries on a cluster of GPUs, and a run record as the version before
the typed run wrote it to status.json. The planner's, the queue's and the run records' tests build on them."""

from __future__ import annotations

from specs.desired import DesiredState, Source
from specs.kinds.models import Cluster, Job, Workspace
from specs.workloads.submission import resolve, spec_hash, submission_id
from state.observed import ClusterQueue, ClusterState, LedgerEntry, Node, ObservedState, RayJob, RunRecord

WS = Workspace(kind="Workspace", name="team")
CLUSTER = Cluster(kind="Cluster", name="c", address="http://x:1", shared_root="/shared",
                  job_defaults={"entrypoint_num_cpus": 1, "entrypoint_resources": {"worker_node": 1}})


def job(name: str = "j", **fields) -> Job:
    return Job(kind="Job", name=name, cluster="c", workload="command", entrypoint=["echo", name], **fields)


def desired(*jobs: Job) -> DesiredState:
    sources = {f"job.{j.name}": Source(f"jobs/{j.name}.yaml", 1, {"protect": 7}) for j in jobs}
    return DesiredState("/ws", WS, {"c": CLUSTER}, {j.name: j for j in jobs}, {}, sources, {"c": "/shared"})


def run_of(spec: Job, status: str, attempt: int = 1, workspace: str = "team", started: int = 0) -> RayJob:
    digest = spec_hash(resolve(WS, CLUSTER, spec))
    return RayJob(submission_id=submission_id(workspace, spec.name, digest, attempt), status=status,
                  start_time=started,
                  metadata={"argus.workspace": workspace, "argus.job": spec.name,
                            "argus.spec_hash": digest, "argus.attempt": str(attempt)})


def observed(*jobs: RayJob, records: tuple[RunRecord, ...] = (), unrecorded: tuple[str, ...] = ()) -> ObservedState:
    """Ray's jobs and argus's records; a job argus would have submitted has its record (argus writes
    it before every submit) unless the test names it in `unrecorded` or gives its record."""
    cluster = ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0",
                           nodes=(), jobs=tuple(jobs))
    given = {r.submission_id: r for r in records}
    implied = {j.submission_id: record_of(j, "PENDING", attempt=j.attempt) for j in jobs
               if j.workspace == "team" and j.run_id.submission_id == j.submission_id
               and j.submission_id not in unrecorded}
    return ObservedState(clusters={"c": cluster}, records={**implied, **given})


def record_of(ray_job: RayJob, status: str, **fields) -> RunRecord:
    return RunRecord(**{"submission_id": ray_job.submission_id, "workspace": ray_job.workspace or "team",
                        "job": ray_job.job or "", "cluster": "c", "spec_hash": ray_job.spec_hash or "", "attempt": 1,
                        "status": status, "updated_at": "2026-01-01T00:00:00+00:00", "plan_id": "p", "commit": "c",
                        "outputs": "workspace", **fields})


# --- the admission queue: ledger entries and a cluster of GPUs --------------------------------------------------

NOW = 1_800_000_000.0
HEX = "0" * 64


def ledger(ws: str, name: str, sid: str, admitted: float | None = None, priority: int = 0, preemptible: bool = False,
           gpus: float = 2.0, seen: float = NOW, arrived: float = NOW - 100, cluster: str = "c",
           signed: bool = True) -> LedgerEntry:
    """An entry as argus reads it from a ledger; `signed`: its ARGUS_ROOT_KEY signature was checked."""
    return LedgerEntry(workspace=ws, job=name, cluster=cluster, submission_id=sid, spec_hash=HEX, priority=priority,
                       preemptible=preemptible, arrived=arrived, seen=seen, admitted=admitted, spread={"GPU": gpus},
                       signed=signed)


def cluster_of(gpus: float = 8.0, jobs=(), used: dict | None = None) -> ClusterState:
    node = Node(node_id="w", ip="127.0.0.3", is_head=False, resources={"GPU": gpus, "CPU": 64.0, "worker_node": 1.0},
                used=used or {})
    return ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0", nodes=(node,),
                        jobs=tuple(jobs))


def observed_with(ray_jobs, entries, gpus: float = 8.0, records=(), quotas=None) -> ObservedState:
    implied = {j.submission_id: record_of(j, j.status.value) for j in ray_jobs if j.workspace == "team"}
    implied.update({r.submission_id: r for r in records})
    return ObservedState(clusters={"c": cluster_of(gpus, ray_jobs)}, records=implied, observed_at=NOW,
                         queues={"c": ClusterQueue(entries=tuple(entries), quotas=quotas or {})})


# --- a run record on disk, as the version before the typed run wrote it --------------------------------------------

PPO_HASH = "0d3b16c73fd55c16655400e4cfcbfab58a991750bade31697736e7ac830ee3f0"
ENTRYPOINT = ("cd '${shared_root}/common/code/verl/verl' && python3 -m verl.trainer.main_ppo "
              "'data.train_files='\"'\"'/d'\"'\"'' 'actor_rollout_ref.model.path='\"'\"'/m'\"'\"'' trainer.nnodes=1 "
              "trainer.n_gpus_per_node=4 'trainer.project_name='\"'\"'team'\"'\"'' "
              "'trainer.experiment_name='\"'\"'ppo'\"'\"'' "
              "'trainer.default_local_dir='\"'\"'${shared_root}/outputs/checkpoints/ppo/run-1'\"'\"'' "
              "'hydra.run.dir='\"'\"'${shared_root}/outputs/logs/${submission_id}'\"'\"''")


PREVIOUS_VERSION_RECORD = {
    "attempt": 1, "cluster": "c", "commit": "c0ffee", "error": None, "failure": None, "job": "ppo", "plan_id": "p1",
    "protect": False, "session_name": "s1", "spec_hash": PPO_HASH, "status": "RUNNING",
    "submission": {
        "cluster": "c",
        "code": {"commit": "c0" * 20, "digest": "d0" * 32, "path": "${shared_root}/common/code/verl/verl",
                 "snapshot": "verl"},
        "entrypoint": ENTRYPOINT, "entrypoint_memory": None, "entrypoint_num_cpus": 1.0, "entrypoint_num_gpus": None,
        "entrypoint_resources": {"worker_node": 1.0},
        "env_vars": {"K": "${env:K}",
                     "PYTHONPATH": "${shared_root}/common/code/verl/verl:${shared_root}/user/code:${PYTHONPATH}",
                     "PYTHONPYCACHEPREFIX": "/tmp/argus-pycache"},
        "gpus": 4, "job": "ppo", "run": 1, "shared_root": "/shared", "workspace": "team"},
    "submission_id": "team.ppo.0d3b16c73fd5.1", "submitted_at": "2026-01-01T00:00:00+00:00",
    "updated_at": "2026-01-01T00:00:00+00:00", "workspace": "team"}
"""status.json exactly as the version before the typed run wrote it (submission as a plain dict)."""
