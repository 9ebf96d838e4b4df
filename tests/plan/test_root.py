"""Whether a shared root is the one argus laid out (reconcile.plan.root), on plain data: an empty directory
at the root's path never makes argus submit again what ran, nor lays its layout out there."""

from __future__ import annotations

from reconcile.model import Action, RootStep
from reconcile.plan.planner import plan
from specs.desired import DesiredState, Source
from specs.kinds.models import Cluster, Job, Workspace
from specs.workloads.submission import resolve, spec_hash, submission_id
from state.observed import LAYOUT, ClusterState, ObservedState, RayJob, RootIdentity, RootState, RunRecord

WS = Workspace(kind="Workspace", name="team")
C = Cluster(kind="Cluster", name="c", address="http://c:8265", shared_root="/nfs",
            job_defaults={"entrypoint_num_cpus": 1})
TRAIN = Job(kind="Job", name="train", cluster="c", workload="command", entrypoint=["echo", "hi"])
KNOWN = RootIdentity(id="a" * 32, created=1.0)


def desired() -> DesiredState:
    sources = {"job.train": Source("jobs/train.yaml", 1, {"cluster": 3}),
               "cluster.c": Source("cluster.yaml", 1, {"shared_root": 4})}
    return DesiredState("/ws", WS, {"c": C}, {"train": TRAIN}, {}, sources, {"c": "/nfs"})


def finished_run() -> RayJob:
    digest = spec_hash(resolve(WS, C, TRAIN))
    return RayJob(submission_id=submission_id("team", "train", digest, 1), status="SUCCEEDED",
                  metadata={"argus.workspace": "team", "argus.job": "train", "argus.spec_hash": digest,
                            "argus.attempt": "1"})


def observed(root: RootState, *jobs: RayJob, missing: tuple[str, ...] = ()) -> ObservedState:
    """Ray's jobs, each with its record on the root when the root is trusted (else the records are not there)."""
    cluster = ClusterState(name="c", address=C.address, session_name="s1", ray_version="2.60.0", nodes=(), jobs=jobs)
    trusted = root.identity is not None or root.earlier or root.problem is not None
    records = {j.submission_id: RunRecord(submission_id=j.submission_id, workspace="team", job=j.job, cluster="c",
                                          spec_hash=j.spec_hash, attempt=1, status=j.status, session_name="s1",
                                          updated_at="2026-01-01T00:00:00+00:00", plan_id="p", commit="c")
               for j in jobs if trusted}
    return ObservedState(clusters={"c": cluster}, records=records, roots={"c": root}, missing_dirs={"c": missing})


def test_an_empty_mount_point_under_runs_ray_lists_is_an_error_and_nothing_is_planned_there() -> None:
    """The NFS not mounted: no identity, nothing of argus's, yet Ray lists a run of the workspace."""
    result = plan(desired(), observed(RootState(runs_on_ray=1), finished_run(), missing=LAYOUT))
    [error] = result.errors
    assert error.address == "cluster.c" and error.field == "shared_root" and "looks unmounted" in error.message
    assert str(error.where) == "cluster.yaml:4"
    assert result.steps() == ()  # neither a submit of what ran, nor directories laid on the empty mount point
    [change] = result.changes
    assert change.action is Action.NOOP and "shared root argus does not trust" in change.reason


def test_a_fresh_root_gets_its_layout_and_identity() -> None:
    result = plan(desired(), observed(RootState(), missing=LAYOUT))
    assert not result.errors
    dirs = next(c for c in result.changes if c.address == "dirs.c")
    assert dirs.steps[-1] == RootStep(cluster="c")
    assert dirs.reason == "10 directories of the layout and argus's identity missing under /nfs"
    assert next(c for c in result.changes if c.address == "job.train").action is Action.SUBMIT


def test_a_root_laid_out_before_identities_gets_one_and_is_planned_as_always() -> None:
    result = plan(desired(), observed(RootState(earlier=True, runs_on_ray=1), finished_run()))
    assert not result.errors
    [dirs] = [c for c in result.changes if c.address == "dirs.c"]
    assert dirs.steps == (RootStep(cluster="c"),)
    assert next(c for c in result.changes if c.address == "job.train").action is Action.NOOP


def test_a_root_with_its_identity_needs_nothing() -> None:
    result = plan(desired(), observed(RootState(identity=KNOWN, runs_on_ray=1), finished_run()))
    assert not result.errors and not result.actionable


def test_an_identity_a_job_replaced_is_a_warning_and_the_root_is_planned_as_always() -> None:
    """A mounted root (something wrote the file): one write must not freeze every stop there, deadlines included."""
    root = RootState(problem=".argus/root.json does not carry argus's signature (ARGUS_ROOT_KEY)", runs_on_ray=1)
    result = plan(desired(), observed(root, finished_run(), missing=("jobs",)))
    assert not result.errors
    [warning] = [d for d in result.diagnostics if d.address == "cluster.c"]
    assert warning.severity == "warning" and "signature" in warning.message
    dirs = next(c for c in result.changes if c.address == "dirs.c")
    assert all(not isinstance(step, RootStep) for step in dirs.steps)  # never written over what stands there
