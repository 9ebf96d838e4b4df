"""Datasets and Models for the pure planner's tests: specs on cluster `c` of tests/support/planning, their observed
states (pinned, staged, sealed, broken), sealed manifests, and the runs of jobs whose submission names inputs."""

from __future__ import annotations

from specs.desired import DesiredState, Source
from specs.kinds.inputs import Dataset, Model, version_rel
from specs.kinds.models import CodeSnapshot, Job
from specs.workloads.submission import RunId, Submission, labels, spec_hash, submission_id
from state.observed import InputFile, InputManifest, InputState, ObservedState, RayJob, RunRecord
from tests.support.planning import CLUSTER, WS, observed, record_of

KEY_A, KEY_B = "a" * 64, "b" * 64
FETCH = "python3 -c 'print(1)' WORD"
"""Stands for the fetch entrypoint observation builds (state.inputs.fetch_job): the planner takes it as given."""


def url_dataset(name: str = "gsm8k") -> Dataset:
    return Dataset(kind="Dataset", name=name, cluster="c", url={"url": "https://data.test/train.parquet",
                                                                "sha256": "0" * 64})


def hub_model(name: str = "qwen") -> Model:
    return Model(kind="Model", name=name, cluster="c",
                 hub={"repo": "Qwen/Qwen2.5-0.5B", "revision": "main", "endpoint": "http://hub.test"})


def path_dataset(name: str = "local") -> Dataset:
    return Dataset(kind="Dataset", name=name, cluster="c", path="/staging/local")


def prepared(name: str = "prepped") -> Dataset:
    return Dataset(kind="Dataset", name=name, cluster="c",
                   prepare={"code": "prep", "entrypoint": ["python", "prep.py", "--out", "${output}"],
                            "outputs": ["train.parquet"]})


SNAPSHOT = CodeSnapshot(kind="CodeSnapshot", name="prep", cluster="c", path="../prep")


def manifest(spec: Dataset | Model, key: str = KEY_A, workspace: str = "team") -> InputManifest:
    return InputManifest(kind=spec.kind, name=spec.name, key=key, source={}, workspace=workspace, commit="c" * 40,
                         created_by="test", created_at="2026-01-01T00:00:00+00:00",
                         files=(InputFile(path="train.parquet", size=10, sha256="1" * 64),), bytes=10,
                         digest="d" * 64)


def state(spec: Dataset | Model, key: str | None = KEY_A, *, sealed: str | None = None, staged: bool = False,
          problem: str | None = None, fetch: str | None = FETCH) -> InputState:
    """`sealed`: the workspace whose manifest is there; `staged`: this workspace's materialisation awaits its seal."""
    rel = version_rel(spec, key) if key else None
    return InputState(cluster=spec.cluster, key=key, rel=rel, problem=problem,
                      manifest=manifest(spec, key, sealed) if sealed and key else None,
                      staged=f"{rel.rsplit('/', 1)[0]}/.incoming-{key[:12]}-team" if staged and rel and key else None,
                      fetch=None if spec.path or spec.prepare else fetch)


def desired_with(jobs: tuple[Job, ...] = (), inputs: tuple[Dataset | Model, ...] = (),
                 workspace: str = "team") -> DesiredState:
    sources = {f"job.{j.name}": Source(f"jobs/{j.name}.yaml", 1, {"entrypoint": 4}) for j in jobs}
    addresses = {f"{s.kind.lower()}.{s.name}": s for s in inputs}
    sources |= {a: Source("inputs.yaml", 10, {s.source: 12}) for a, s in addresses.items()}
    snapshots = {"prep": SNAPSHOT} if any(s.prepare for s in inputs) else {}
    ws = WS.model_copy(update={"name": workspace})
    return DesiredState("/ws", ws, {"c": CLUSTER}, {j.name: j for j in jobs}, snapshots, sources, {"c": "/shared"},
                        {}, addresses)


def observed_inputs(*ray_jobs: RayJob, states: dict[str, InputState], records: tuple[RunRecord, ...] = (),
                    stored: dict[str, InputManifest] | None = None) -> ObservedState:
    seen = observed(*ray_jobs, records=records)
    return seen.model_copy(update={"inputs": states, "stored_inputs": {"c": stored or {}}})


def ray_run(sub: Submission, status: str, attempt: int = 1) -> tuple[RayJob, RunRecord]:
    """A run of this submission on Ray, and argus's record of it (which keeps the submission)."""
    run = RunId(workspace=sub.workspace, job=sub.job, spec_hash=spec_hash(sub), attempt=attempt)
    ray_job = RayJob(submission_id=submission_id(sub.workspace, sub.job, run.spec_hash, attempt), status=status,
                     entrypoint=sub.entrypoint.replace("${shared_root}", "/shared"),
                     metadata=labels(run, "c", "p"))
    return ray_job, record_of(ray_job, status, submission=sub, attempt=attempt)
