"""Clusters are isolated: one that does not answer is an error on its own address, its jobs are not
planned (never submitted: argus cannot see whether their run exists), and every other cluster is
planned, applied (`--target`) and shown as usual."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconcile.model import Action, PlanOptions
from reconcile.plan.planner import plan
from reconcile.plan.unreachable import hidden_jobs
from specs.desired import DesiredState, Source
from specs.diagnostics import Where
from specs.kinds.models import Cluster, Job, Workspace
from specs.workloads.submission import resolve, spec_hash, submission_id
from state.observed import ClusterState, ObservedState, RayJob, RunRecord
from state.ray import local
from state.runs import records
from tests.support.cluster import QUICK, SLEEP, jobs_of, sdk, wait_for

# -- the planner, on plain data -------------------------------------------------------------------

WS = Workspace(kind="Workspace", name="team")
DEFAULTS = {"entrypoint_num_cpus": 1, "entrypoint_resources": {"worker_node": 1}}
UP = Cluster(kind="Cluster", name="up", address="http://up:8265", shared_root="/shared", job_defaults=DEFAULTS)
DOWN = Cluster(kind="Cluster", name="down", address="http://127.0.0.9:8265", shared_root="/shared-down",
               job_defaults=DEFAULTS)
WHY = "Cannot reach the Ray dashboard of cluster 'down' at http://127.0.0.9:8265 (GET /api/version)."


def job(name: str, cluster: str, **fields) -> Job:
    return Job(kind="Job", name=name, cluster=cluster, workload="command", entrypoint=["echo", name], **fields)


def desired(*jobs: Job) -> DesiredState:
    sources = {f"job.{j.name}": Source(f"jobs/{j.name}.yaml", 1, {"cluster": 3}) for j in jobs}
    sources |= {f"cluster.{c}": Source(f"clusters/{c}.yaml", 1, {"address": 3}) for c in ("up", "down")}
    return DesiredState("/ws", WS, {"up": UP, "down": DOWN}, {j.name: j for j in jobs}, {}, sources,
                        {"up": "/shared", "down": "/shared-down"})


def observed(*on_up: RayJob, recorded: tuple[RunRecord, ...] = ()) -> ObservedState:
    """Cluster "up" with these jobs (each with the record that proves it argus's), "down" unreachable."""
    up = ClusterState(name="up", address=UP.address, session_name="s1", ray_version="2.60.0", nodes=(),
                      jobs=on_up)
    proofs = tuple(RunRecord(submission_id=j.submission_id, workspace="team", job=j.job, cluster="up",
                             spec_hash=j.spec_hash, attempt=1, status="PENDING", session_name="s1",
                             updated_at="2026-01-01T00:00:00+00:00", plan_id="p", commit="c") for j in on_up)
    return ObservedState(clusters={"up": up}, unreachable={"down": WHY},
                         records={r.submission_id: r for r in proofs + recorded})


def running_on_up(spec: Job) -> RayJob:
    digest = spec_hash(resolve(WS, UP, spec))
    return RayJob(submission_id=submission_id("team", spec.name, digest, 1), status="RUNNING",
                  metadata={"argus.workspace": "team", "argus.job": spec.name, "argus.spec_hash": digest,
                            "argus.attempt": "1"})


def record_on_down(spec: Job, status: str, session: str = "s0") -> RunRecord:
    digest = spec_hash(resolve(WS, DOWN, spec.model_copy(update={"cluster": "down"})))
    return RunRecord(submission_id=submission_id("team", spec.name, digest, 1), workspace="team", job=spec.name,
                     cluster="down", spec_hash=digest, attempt=1, status=status, session_name=session,
                     updated_at="2026-01-01T00:00:00+00:00", plan_id="p", commit="c")


def test_an_unreachable_cluster_is_an_error_at_its_address_and_its_jobs_are_not_planned():
    result = plan(desired(job("here", "up"), job("there", "down")), observed())
    changes = {c.address: c for c in result.changes}
    assert changes["job.here"].action is Action.SUBMIT
    assert changes["job.there"].action is Action.NOOP and changes["job.there"].steps == ()
    assert changes["job.there"].reason == "cluster 'down' unreachable: not planned"
    [error] = result.errors
    assert (error.address, error.where) == ("cluster.down", Where("clusters/down.yaml", 3))
    assert "cluster 'down' at http://127.0.0.9:8265 cannot be read" in error.message
    assert error.message.endswith(WHY) and "its jobs are not planned" in error.message and "--target" in error.message


def test_a_job_on_a_dead_cluster_is_never_submitted_whatever_its_records_say():
    """No run, a run last seen RUNNING in an older session (lost, were the cluster up) with a retry
    policy on `lost`, an unconfirmed submit: argus sees none of them now, so none is submitted."""
    spec = job("there", "down", retry={"max_attempts": 3, "on": ["lost"]})
    for recorded in ((), (record_on_down(spec, "RUNNING"),), (record_on_down(spec, "SUBMITTING", "s1"),),
                     (record_on_down(spec, "SUBMIT_FAILED"),)):
        result = plan(desired(spec), observed(recorded=recorded))
        [change] = result.changes
        assert change.action is Action.NOOP and result.steps() == (), recorded
        assert [d.address for d in result.diagnostics] == ["cluster.down"], result.diagnostics
    forced = plan(desired(spec), observed(), PlanOptions(replace=("job.there",)))
    assert forced.steps() == ()


def test_runs_recorded_on_a_dead_cluster_are_neither_lost_nor_on_a_removed_cluster():
    spec = job("there", "down")
    run = record_on_down(spec, "RUNNING")
    for jobs in ((spec,), ()):  # its spec still there, or removed
        result = plan(desired(*jobs), observed(recorded=(run,)))
        [change] = result.changes
        assert change.action is Action.NOOP and change.current.submission_id == run.submission_id
        assert not change.current.lost and "lost" not in change.current.health
        assert [d.address for d in result.diagnostics] == ["cluster.down"]


def test_a_job_that_moved_off_a_dead_cluster_waits_for_its_old_run():
    """Its earlier run may still run on the dead cluster and cannot be stopped: a new run must not overlap it."""
    old = record_on_down(job("moved", "down"), "RUNNING")
    result = plan(desired(job("moved", "up")), observed(recorded=(old,)))
    assert [c.action for c in result.changes] == [Action.NOOP]
    moved = next(d for d in result.errors if d.address == "job.moved")
    assert old.submission_id in moved.message and "'down'" in moved.message
    assert moved.where == Where("jobs/moved.yaml", 3)
    finished = record_on_down(job("moved", "down"), "SUCCEEDED")
    assert plan(desired(job("moved", "up")), observed(recorded=(finished,))).changes[0].action is Action.SUBMIT


def test_a_target_keeps_only_the_diagnostics_of_its_own_cluster():
    here, there, runaway = job("here", "up"), job("there", "down"), job("runaway", "up", state="stopped")
    state = observed(running_on_up(runaway))
    elsewhere = plan(desired(here, there, runaway), state, PlanOptions(targets=("job.here", "job.runaway")))
    assert elsewhere.errors == ()
    assert {c.address: c.action for c in elsewhere.changes} == {"job.here": Action.SUBMIT,
                                                                "job.runaway": Action.STOP}
    on_the_dead_one = plan(desired(here, there), state, PlanOptions(targets=("job.there",)))
    assert [d.address for d in on_the_dead_one.errors] == ["cluster.down"]


def test_status_rows_hidden_by_a_dead_cluster_are_the_ones_the_planner_left_out():
    old = record_on_down(job("gone", "down"), "RUNNING")
    hidden = hidden_jobs(desired(job("here", "up"), job("there", "down")), observed(recorded=(old,)))
    assert hidden == {"job.there": "down", "job.gone": "down"}


# -- the CLI, against the real cluster and two that do not answer ----------------------------------

DEAD_CLUSTER = """
kind: Cluster
name: {name}
address: http://127.0.0.1:{port}
shared_root: .shared-{name}
job_defaults: {{entrypoint_num_cpus: 0.5, entrypoint_resources: {{worker_node: 1}}}}
"""


@pytest.fixture
def mute_port() -> Iterator[int]:
    """A dashboard that accepts connections and never answers: the kernel completes the handshake
    for a listening socket, nothing ever reads or replies."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def _dead_job(ws, name: str, cluster: str, extra: str = "") -> None:
    ws.write(f"jobs/{name}.yaml", f"kind: Job\nname: {name}\ncluster: {cluster}\nworkload: command\n"
                                  f"entrypoint: {json.dumps(QUICK)}\n{extra}")


def _plant_run(ws, name: str) -> RunRecord:
    """A run argus submitted to the dead cluster in an earlier session, last seen RUNNING."""
    from reconcile.commands.common import load

    state = load(ws.root)
    spec = state.jobs[name]
    digest = spec_hash(resolve(state.workspace, state.cluster_of(spec), spec))
    run = RunRecord(submission_id=submission_id(ws.name, name, digest, 1), workspace=ws.name, job=name,
                    cluster=spec.cluster, spec_hash=digest, attempt=1, status="RUNNING", session_name="old",
                    updated_at="2026-01-01T00:00:00+00:00", plan_id="p", commit="c")
    Path(state.shared_root(spec.cluster)).mkdir(exist_ok=True)  # as an earlier apply made it
    records.write_status(state.shared_root(spec.cluster), run)
    return run


def _record_dirs(ws, job_name: str) -> list[str]:
    return sorted(p.name for root in ws.root.glob(".shared*") for p in (root / "jobs").glob(f"*.{job_name}.*"))


def test_a_dead_cluster_blocks_nothing_on_the_healthy_one(workspace, argus, ray_cluster):
    ws = workspace
    ws.write("clusters/dead.yaml", DEAD_CLUSTER.format(name="dead", port=local._free_port()))
    ws.job("healthy", QUICK)
    ws.job("runaway", SLEEP)
    _dead_job(ws, "stranded", "dead")
    _dead_job(ws, "ghost", "dead", "retry: {max_attempts: 3, on: [lost]}\n")
    ghost = _plant_run(ws, "ghost")
    t = ("--timeout", "5")

    planned = argus("plan", ws.root, *t)
    assert planned.code == 1, planned.out + planned.err
    assert "+ job.healthy" in planned.out and "+ job.runaway" in planned.out
    assert "job.stranded: cluster 'dead' unreachable: not planned" in planned.out
    assert "job.ghost: cluster 'dead' unreachable: not planned" in planned.out
    assert "Error: clusters/dead.yaml:3: cluster 'dead' at http://127.0.0.1:" in planned.out
    assert "lost" not in planned.out and "no longer in the desired state" not in planned.out
    assert "Plan: 2 to create, 2 to submit, 0 to replace, 0 to stop." in planned.out  # the layouts are NFS only

    refused = argus("apply", ws.root, "--auto-approve", *t)
    assert refused.code == 1 and jobs_of(ray_cluster.address, ws.name) == []

    applied = argus("apply", ws.root, "--auto-approve", "--target", "job.healthy", "--target", "job.runaway", *t)
    assert applied.code == 0, applied.out + applied.err
    ids = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(ray_cluster.address, ws.name)}
    assert sorted(ids) == ["healthy", "runaway"]
    wait_for(ray_cluster.address, ids["healthy"], {"SUCCEEDED"})
    wait_for(ray_cluster.address, ids["runaway"], {"RUNNING"})

    ws.job("runaway", SLEEP, "state: stopped\n")  # the runaway is stopped while the other cluster is down
    stopped = argus("apply", ws.root, "--auto-approve", "--target", "job.runaway", *t)
    assert stopped.code == 0, stopped.out + stopped.err
    assert sdk(ray_cluster.address).get_job_info(ids["runaway"]).status.value == "STOPPED"

    _assert_status_marks_the_dead_cluster(argus, ws, ghost, *t)
    # Nothing of the dead cluster's jobs was ever submitted, anywhere, nor recorded as submitted.
    assert sorted(j.metadata["argus.job"] for j in jobs_of(ray_cluster.address, ws.name)) == ["healthy", "runaway"]
    assert _record_dirs(ws, "stranded") == [] and _record_dirs(ws, "ghost") == [ghost.submission_id]


def _assert_status_marks_the_dead_cluster(argus, ws, ghost: RunRecord, *options: str) -> None:
    human = argus("status", ws.root, *options)
    assert human.code == 1, human.out + human.err
    rows = {line.split()[0]: line for line in human.out.splitlines() if line.startswith("job.")}
    assert "in sync" in rows["job.healthy"] and "SUCCEEDED" in rows["job.healthy"]
    assert "unknown" in rows["job.stranded"] and "cluster dead unreachable" in rows["job.stranded"]
    assert "cluster dead unreachable (last seen RUNNING)" in rows["job.ghost"]
    assert ghost.submission_id in rows["job.ghost"]
    assert "cluster 'dead' at http://127.0.0.1:" in human.out

    shown = argus("status", ws.root, "--format", "json", *options)
    assert shown.code == 1
    data = json.loads(shown.out)
    assert list(data["unreachable"]) == ["dead"] and "Cannot reach" in data["unreachable"]["dead"]
    by_address = {row["address"]: row for row in data["jobs"]}
    assert (by_address["job.healthy"]["sync"], by_address["job.healthy"]["health"]) == ("in sync", "SUCCEEDED")
    assert by_address["job.stranded"] == {"address": "job.stranded", "sync": "unknown",
                                          "health": "cluster dead unreachable", "submission_id": None,
                                          "failure": None, "advice": None, "evidence": []}

    markdown = argus("status", ws.root, "--format", "markdown", *options)
    assert markdown.code == 1 and "cluster dead unreachable" in markdown.out


def test_a_dashboard_that_never_answers_costs_a_few_timeouts_and_blocks_nothing_else(workspace, argus, mute_port):
    ws = workspace
    ws.write("clusters/mute.yaml", DEAD_CLUSTER.format(name="mute", port=mute_port))
    ws.job("healthy", QUICK)
    _dead_job(ws, "quiet", "mute")

    planned = argus("plan", ws.root, "--timeout", "2", "--format", "json")
    assert planned.code == 1, planned.err
    data = json.loads(planned.out)
    jobs = {c["address"]: c["action"] for c in data["changes"] if c["address"].startswith("job.")}
    assert jobs == {"job.healthy": "submit", "job.quiet": "no-op"}
    [error] = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert error["address"] == "cluster.mute" and error["where"] == "clusters/mute.yaml:3"
    assert f"cluster 'mute' at http://127.0.0.1:{mute_port} cannot be read" in error["message"]
    assert "did not answer within 2s" in error["message"]
    assert _record_dirs(ws, "quiet") == []


def test_a_plan_that_could_not_read_a_cluster_never_says_the_clusters_match():
    from reconcile.views.human import summary

    spec = job("here", "up")
    result = plan(desired(spec, job("there", "down")), observed(running_on_up(spec)))
    assert not result.actionable and result.errors
    assert summary(result) == "No changes planned, and the desired state is not confirmed: fix the 1 error(s) above."
    assert "match the desired state" not in summary(result)


def test_a_cluster_not_read_never_exits_0_nor_says_they_match_even_with_detailed_exitcode(workspace, argus):
    """Terraform's choice: a refresh that failed is an error (exit 1), never "no changes" (0) nor
    "changes" (2), which a scheduled drift check would read as in sync or as ordinary drift."""
    ws = workspace
    ws.job("healthy", SLEEP)
    assert argus("apply", ws.root, "--auto-approve").code == 0
    assert argus("plan", ws.root, "--detailed-exitcode").code == 0  # all read, all in sync
    ws.write("clusters/dead.yaml", DEAD_CLUSTER.format(name="dead", port=local._free_port()))
    _dead_job(ws, "elsewhere", "dead")
    for extra in ((), ("--detailed-exitcode",), ("--detailed-exitcode", "--format", "markdown")):
        planned = argus("plan", ws.root, "--timeout", "2", *extra)
        assert planned.code == 1, planned.out + planned.err
        assert "match the desired state" not in planned.out and "cluster 'dead'" in planned.out
    targeted = argus("plan", ws.root, "--timeout", "2", "--detailed-exitcode", "--target", "job.healthy")
    assert targeted.code == 0 and "No changes for the targets." in targeted.out, targeted.out
    assert "match the desired state" not in targeted.out
