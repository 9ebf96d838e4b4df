"""One typed run: identity, labels, status and submission, from the planner to Ray and to the record on NFS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconcile.model import Plan, PlanOptions
from reconcile.plan.planner import plan
from reconcile.views.human import render_status
from reconcile.views.machine import plan_json, status_json
from specs.workloads.submission import RunId, labels, parse_labels, resolve, spec_hash
from state.observed import ACTIVE, MAYBE_RUNNING, TERMINAL, UNCONFIRMED, RayJob, RunRecord, RunStatus
from state.runs import records
from state.runs.failures import ADVICE
from tests.support.planning import (
    CLUSTER,
    PPO_HASH,
    PREVIOUS_VERSION_RECORD,
    WS,
    desired,
    job,
    observed,
    record_of,
    run_of,
)


def write_record(root: Path, data: object, name: str = "team.ppo.0d3b16c73fd5.1") -> None:
    (root / "jobs" / name).mkdir(parents=True, exist_ok=True)
    (root / "jobs" / name / "status.json").write_text(data if isinstance(data, str) else json.dumps(data))


def test_a_record_written_by_the_previous_version_loads_with_its_typed_submission(tmp_path: Path):
    write_record(tmp_path, PREVIOUS_VERSION_RECORD)
    [record] = records.read_records(str(tmp_path), "team").values()
    assert record.status is RunStatus.RUNNING and record.submission is not None
    assert spec_hash(record.submission) == PPO_HASH == record.spec_hash
    later = {"follows", "derived_checkpoints"}  # fields added since, unset on a record of before
    assert record.submission.model_dump(exclude=later) == PREVIOUS_VERSION_RECORD["submission"]


def test_a_record_round_trips_in_the_same_format(tmp_path: Path):
    record = RunRecord.model_validate(PREVIOUS_VERSION_RECORD)
    records.write_status(str(tmp_path), record)
    written = json.loads((tmp_path / "jobs" / record.submission_id / "status.json").read_text())
    assert written == PREVIOUS_VERSION_RECORD
    assert records.read_record(str(tmp_path), record.submission_id) == record


@pytest.mark.parametrize("submission", [{}, {"gpus": 4}, [], "x", {**PREVIOUS_VERSION_RECORD["submission"], "new": 1},
                                        {**PREVIOUS_VERSION_RECORD["submission"], "run": "one"}])
def test_a_submission_of_another_shape_is_unknown_not_a_crash(tmp_path: Path, submission: object):
    write_record(tmp_path, {**PREVIOUS_VERSION_RECORD, "submission": submission})
    [record] = records.read_records(str(tmp_path), "team").values()
    assert record.submission is None and record.status is RunStatus.RUNNING


def test_a_record_without_a_submission_still_counts(tmp_path: Path):
    write_record(tmp_path, {k: v for k, v in PREVIOUS_VERSION_RECORD.items() if k != "submission"})
    [record] = records.read_records(str(tmp_path), "team").values()
    assert record.submission is None


@pytest.mark.parametrize("damage", [
    {"status": "EXPLODED"}, {"attempt": 0}, {"attempt": "one"}, {"job": "Not A Name"}, {"workspace": None},
])
def test_a_record_argus_could_not_have_written_is_skipped(tmp_path: Path, damage: dict):
    write_record(tmp_path, {**PREVIOUS_VERSION_RECORD, **damage})
    assert records.read_records(str(tmp_path), "team") == {}


@pytest.mark.parametrize("text", ["", "{", "[]", "null", "\"x\"", "[" * 100_000, "\udcff"])
def test_an_unreadable_record_file_is_skipped(tmp_path: Path, text: str):
    write_record(tmp_path, "x")
    (tmp_path / "jobs" / "team.ppo.0d3b16c73fd5.1" / "status.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert records.read_records(str(tmp_path), "team") == {}


@pytest.mark.parametrize("damage", [
    {"evidence": [1]}, {"evidence": "line"}, {"evidence": ["x" * 5000]}, {"evidence": ["x"] * 100},
    {"advice": 7}, {"advice": "x" * 10_000},
])
def test_evidence_or_advice_of_another_shape_is_unknown_not_a_hidden_run(tmp_path: Path, damage: dict):
    write_record(tmp_path, {**PREVIOUS_VERSION_RECORD, **damage})
    [record] = records.read_records(str(tmp_path), "team").values()
    assert (record.evidence, record.advice, record.status) == ((), None, RunStatus.RUNNING)


def test_a_failed_runs_evidence_and_advice_round_trip(tmp_path: Path):
    failed = {"status": "FAILED", "failure": "oom", "evidence": ["CUDA out of memory"], "advice": ADVICE["oom"]}
    record = RunRecord.model_validate({**PREVIOUS_VERSION_RECORD, **failed})
    records.write_status(str(tmp_path), record)
    written = json.loads((tmp_path / "jobs" / record.submission_id / "status.json").read_text())
    assert written == {**PREVIOUS_VERSION_RECORD, **failed}
    assert records.read_record(str(tmp_path), record.submission_id) == record


@pytest.mark.parametrize("on_ray", [True, False])
def test_a_failed_run_is_explained_by_status_but_its_evidence_stays_out_of_plan_json(on_ray: bool):
    spec = job()
    ray_job = run_of(spec, "FAILED")
    evidence = tuple(f"[rank{r}] CUDA out of memory" for r in range(5))
    record = record_of(ray_job, "FAILED", failure="oom", evidence=evidence, advice="stale words")
    result = plan(desired(spec), observed(*([ray_job] if on_ray else []), records=(record,)))
    [change] = result.changes
    assert change.current.evidence == evidence and change.current.advice == ADVICE["oom"]  # today's advice
    assert "evidence" not in json.loads(plan_json(result))["changes"][0]["current"]

    shown = render_status(result, {"j"}).splitlines()
    advice = shown[3:len(shown) - 4]
    assert shown[2] == "    failure: oom" and shown[3].startswith("    advice:  Out of memory. On a GPU")
    assert " ".join(line.strip() for line in advice).removeprefix("advice:  ") == ADVICE["oom"]
    assert all(len(line) <= 100 for line in advice)
    assert shown[-4:] == ["    log:     [rank2] CUDA out of memory", "             [rank3] CUDA out of memory",
                          "             [rank4] CUDA out of memory",
                          "             (2 earlier line(s): argus status --format json)"]
    [row] = json.loads(status_json(result, {"j"}))["jobs"]
    assert (row["failure"], row["advice"], row["evidence"]) == ("oom", ADVICE["oom"], list(evidence))


def test_status_explains_no_run_that_did_not_fail():
    spec = job()
    ray_job = run_of(spec, "STOPPED")
    result = plan(desired(spec), observed(ray_job, records=(record_of(ray_job, "STOPPED", failure="stopped"),)))
    assert len(render_status(result, {"j"}).splitlines()) == 2
    [row] = json.loads(status_json(result, {"j"}))["jobs"]
    assert (row["failure"], row["advice"], row["evidence"]) == (None, None, [])


def test_a_record_of_a_run_that_vanished_while_stopping_reads_as_stopped(tmp_path: Path):
    """Earlier versions recorded "gone"; written again, it is a status of the enum."""
    write_record(tmp_path, {**PREVIOUS_VERSION_RECORD, "status": "gone"})
    [record] = records.read_records(str(tmp_path), "team").values()
    assert record.status is RunStatus.STOPPED
    records.write_status(str(tmp_path), record.model_copy(update={"status": "gone"}))
    assert json.loads((tmp_path / "jobs" / record.submission_id / "status.json").read_text())["status"] == "STOPPED"


def test_statuses_are_one_enum_and_its_sets():
    assert {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED} == TERMINAL
    assert {RunStatus.PENDING, RunStatus.RUNNING} == ACTIVE
    assert ACTIVE | {RunStatus.SUBMITTING} == MAYBE_RUNNING
    assert {RunStatus.SUBMITTING, RunStatus.SUBMIT_FAILED} == UNCONFIRMED
    assert f"{RunStatus.RUNNING}" == "RUNNING" and "RUNNING" in ACTIVE


def test_the_run_id_derives_the_submission_id_and_the_labels_name_it_back():
    sub = resolve(WS, CLUSTER, job())
    run = RunId.of(sub, attempt=2)
    assert run.spec_hash == spec_hash(sub) and run.submission_id == "team.j.cbf1c50a18b2.2"
    stamped = labels(run, commit="c0ffee", plan_id="p1")
    assert stamped == {"argus.workspace": "team", "argus.job": "j", "argus.spec_hash": run.spec_hash,
                       "argus.attempt": "2", "argus.commit": "c0ffee", "argus.plan": "p1"}
    assert parse_labels(stamped) == run
    ray_job = RayJob(submission_id=run.submission_id, status="RUNNING", metadata=stamped)
    assert (ray_job.run_id, ray_job.workspace, ray_job.job, ray_job.spec_hash, ray_job.attempt) == (
        run, "team", "j", run.spec_hash, 2)


GOOD = labels(RunId(workspace="team", job="j", spec_hash="a" * 64, attempt=1), commit="c", plan_id="p")


@pytest.mark.parametrize("metadata", [
    {},
    {k: v for k, v in GOOD.items() if k != "argus.attempt"},
    {k: v for k, v in GOOD.items() if k != "argus.spec_hash"},
    {**GOOD, "argus.attempt": "one"}, {**GOOD, "argus.attempt": "01"}, {**GOOD, "argus.attempt": "0"},
    {**GOOD, "argus.attempt": "-1"}, {**GOOD, "argus.attempt": " 1"}, {**GOOD, "argus.attempt": "1_0"},
    {**GOOD, "argus.attempt": "1.0"}, {**GOOD, "argus.attempt": "9" * 5000}, {**GOOD, "argus.attempt": 1},
    {**GOOD, "argus.spec_hash": "abc"}, {**GOOD, "argus.spec_hash": "A" * 64}, {**GOOD, "argus.job": "Job"},
    {**GOOD, "argus.workspace": ""}, {**GOOD, "argus.job": None}, {**GOOD, "argus.job": ["j"]},
])
def test_labels_argus_could_not_have_written_parse_as_none(metadata: dict):
    assert parse_labels(metadata) is None
    assert RayJob(submission_id="x", status="RUNNING", metadata={k: str(v) for k, v in metadata.items()}).attempt in (
        None, 1)


def test_a_job_with_a_forged_attempt_is_unmanaged_never_planned_on():
    spec = job()
    forged = run_of(spec, "RUNNING")
    forged = forged.model_copy(update={"metadata": {**forged.metadata, "argus.attempt": "one"}})
    result = plan(desired(), observed(forged))
    assert result.changes == () and [(j.submission_id, j.owner) for j in result.unmanaged] == [
        (forged.submission_id, None)]


def test_targets_that_are_not_addresses_keep_nothing_and_raise_nothing():
    spec = job()
    options = PlanOptions(targets=("job", "nonsense", "job.j"))
    assert [c.address for c in plan(desired(spec), observed(), options).changes] == ["job.j"]
    assert plan(desired(spec), observed(), PlanOptions(targets=("what?",))).changes == ()


def test_the_run_carries_its_recorded_submission_to_the_plan_but_not_into_its_json():
    old = job()
    ray_job = run_of(old, "RUNNING")
    seen = observed(ray_job, records=(record_of(ray_job, "RUNNING", submission=resolve(WS, CLUSTER, old)),))
    result = plan(desired(job(entrypoint_num_cpus=2)), seen)
    [change] = result.changes
    assert change.current.submission == resolve(WS, CLUSTER, old)
    assert change.before == resolve(WS, CLUSTER, old).model_dump()
    shown = json.loads(plan_json(result))["changes"][0]
    assert "submission" not in shown["current"] and shown["current"]["status"] == "RUNNING"
    assert Plan.model_validate(result.model_dump(mode="json")).changes[0].current.submission is None


def test_a_snapshot_an_unfinished_run_uses_is_not_pruned():
    from reconcile.plan.code import plan_prune
    from reconcile.plan.runs import runs_by_job
    from specs.workloads.submission import CodeRef
    from state.observed import Manifest, ObservedState

    rel = "common/code/verl/old"
    manifest = Manifest(workspace="team", name="old", repo="verl", source={"path": "/v"}, commit="c" * 40,
                        digest="d" * 64, files=1, bytes=1, created_at="t", created_by="me")
    code = CodeRef(snapshot="old", path=f"${{shared_root}}/{rel}", commit="c" * 40, digest="d" * 64)
    ray_job = run_of(job(), "RUNNING")
    using = record_of(ray_job, "RUNNING", submission=resolve(WS, CLUSTER, job(), code))
    base = observed(ray_job, records=(using,))
    seen = ObservedState(clusters=base.clusters, records=base.records, stored={"c": {rel: manifest}})
    changes, [error] = plan_prune(desired(job()), seen, runs_by_job("team", seen), prune=True)
    assert changes == [] and ray_job.submission_id in error.message
