"""verl checkpoints, for the planner and on disk: a PPO job of team's, argus's records of its runs, the verl
profile argus read for it, and the errors the planner finds in resuming a checkpoint its own earlier
attempt saved (`errors_for`); and `save_step`, the step folder verl's PPO trainer leaves on disk (FSDP
shards per role and rank, then the tracker). The checkpoint planner's and the checkpoint readers' tests
build on them. The workspace and cluster are support.planning's."""

from __future__ import annotations

from pathlib import Path

from reconcile.model import Change
from reconcile.plan.checkpoints import judge
from reconcile.plan.jobs import plan_job
from specs.desired import DesiredState, Source
from specs.kinds.models import Job
from specs.workloads.checkpoint_state import CheckpointState
from specs.workloads.submission import resolve, spec_hash, submission_id
from specs.workloads.verl_profile import Pool, Resume, VerlProfile
from state.observed import ObservedState, RunRecord
from tests.support.planning import CLUSTER, WS

KINDS = ("model", "optim", "extra_state")


def ppo(name: str = "ppo", gpus: int = 4, **fields) -> Job:
    spec = {"kind": "Job", "name": name, "cluster": "c", "workload": "ppo", "model": "/m",
            "data": {"train": "/d", "val": "/v"}, "trainer": {"nnodes": 1, "n_gpus_per_node": gpus}}
    return Job(**{**spec, **fields})


def desired(*jobs: Job) -> DesiredState:
    sources = {f"job.{j.name}": Source(f"jobs/{j.name}.yaml", 1, {"trainer": 9}) for j in jobs}
    return DesiredState("/ws", WS, {"c": CLUSTER}, {j.name: j for j in jobs}, {}, sources, {"c": "/shared"})


def record(job: Job, when: str = "2026-01-01T00:00:00+00:00", attempt: int = 1, status: str = "SUCCEEDED",
           known: bool = True) -> RunRecord:
    """argus's record of a run of `job` as it was specified then."""
    sub = resolve(WS, CLUSTER, job)
    digest = spec_hash(sub)
    return RunRecord(submission_id=submission_id("team", job.name, digest, attempt), workspace="team", job=job.name,
                     cluster="c", spec_hash=digest, attempt=attempt, status=status, submitted_at=when,
                     updated_at=when, plan_id="p", commit="c", submission=sub if known else None, outputs="workspace")


def profile(mode: str = "auto", path: str | None = None, version: str | None = "0.9.1",
            backend: str = "fsdp") -> VerlProfile:
    return VerlProfile(version=version, knowledge="0.9.x", module="verl.trainer.main_ppo", config_name="ppo_trainer",
                       pools=(Pool(name="global_pool", nnodes=1, gpus_per_node=4, cpus_per_gpu=3),),
                       resume=Resume(mode=mode, path=path), checkpoint_backend=backend)


def observed(state: CheckpointState | None, *records: RunRecord, verl: VerlProfile | None = None,
             job: str = "ppo") -> ObservedState:
    return ObservedState(clusters={}, records={r.submission_id: r for r in records},
                         checkpoints={job: state} if state else {}, verl_profiles={job: verl} if verl else {})


def start(job: Job) -> Change:
    """The change the planner makes for a job with no run of its spec yet: a submit."""
    return plan_job(job, resolve(WS, CLUSTER, job), [])


def judged(job: Job, seen: ObservedState, *others: Job):
    found = judge(desired(job, *others), seen, start(job))
    assert found is not None
    return found


def errors_for(state: CheckpointState | None, gpus: int = 4, verl: VerlProfile | None = None) -> list[str]:
    """The errors of a job whose own earlier attempt saved `state` (so only loading is judged)."""
    job = ppo(gpus=gpus)
    return list(judged(job, observed(state, record(job), verl=verl)).errors)


def save_step(root: Path, step: int, world_size: int, roles: tuple[str, ...] = ("actor",),
              tracker: bool = True) -> Path:
    """What verl's PPO trainer leaves after `_save_checkpoint` (FSDP): shards per role, huggingface/ and
    fsdp_config.json from rank 0, data.pt, then the tracker."""
    folder = root / f"global_step_{step}"
    for role in roles:
        shards = folder / role
        (shards / "huggingface").mkdir(parents=True)
        (shards / "huggingface" / "config.json").write_text("{}")
        (shards / "fsdp_config.json").write_text(f'{{"FSDP_version": 1, "world_size": {world_size}}}')
        for rank in range(world_size):
            for kind in KINDS:
                (shards / f"{kind}_world_size_{world_size}_rank_{rank}.pt").write_bytes(b"torch")
    (folder / "data.pt").write_bytes(b"dataloader")
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return folder
