"""The applier's failure paths, as unit tests of its own logic.

Only the dashboard's job endpoints are faked (under a real RayClient, so errors are translated as in production);
the plan comes from the real planner, and the records and the audit log are real files in tmp_path.
"""

from __future__ import annotations

import json
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from reconcile.execute.applier import ApplyContext, apply_plan
from reconcile.execute.refresh import refresh_records
from reconcile.model import Plan, SubmitStep
from reconcile.plan.planner import plan
from specs.desired import DesiredState
from specs.load.loader import load_workspace
from state.audit import log as audit
from state.code.gitinfo import GitInfo
from state.observed import ClusterState, Node, ObservedState, RunRecord, RunStatus
from state.ray import client as ray_client
from state.ray.client import ClusterRequestFailed, ClusterUnreachable, RayClient, SubmitConflict
from state.ray.jobs_api import RayRefused
from state.runs import records
from state.runs.settle import SECRETS_GRACE, settle

SECRET = "hunter2-never-print-me"
ADDRESS = "http://127.0.0.1:9"  # never reached: the job endpoints are fake


class FakeSdk:
    """The dashboard's job endpoints (state.ray.jobs_api.JobsApi) as far as RayClient uses them.
    `refuse` makes submit raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.sent: list[dict[str, Any]] = []
        self.jobs: dict[str, dict[str, Any]] = {}
        self.refuse: Any = None

    def submit(self, body: dict[str, Any]) -> None:
        submission_id = body["submission_id"]
        payload = {k: v for k, v in body.items() if k != "submission_id"}
        self.calls.append(("submit", submission_id))
        self.sent.append(payload)
        if self.refuse is not None:
            raise self.refuse(submission_id, payload)
        self.jobs[submission_id] = ray_job(submission_id, payload["metadata"])

    def job_info(self, submission_id: str) -> dict[str, Any]:
        self.calls.append(("get", submission_id))
        if submission_id not in self.jobs:
            raise RayRefused(404, f"Job {submission_id} does not exist.")
        return self.jobs[submission_id]

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def stop(self, submission_id: str) -> None:
        self.calls.append(("stop", submission_id))

    def delete(self, submission_id: str) -> None:
        self.calls.append(("delete", submission_id))


def ray_job(submission_id: str, metadata: dict[str, str], status: str = "RUNNING") -> dict[str, Any]:
    return {"submission_id": submission_id, "job_id": None, "status": status, "entrypoint": "", "metadata": metadata,
            "message": "", "start_time": 1, "end_time": None, "type": "SUBMISSION", "driver_node_id": None,
            "error_type": None, "driver_exit_code": None}


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch) -> FakeSdk:
    fake = FakeSdk()
    monkeypatch.setattr(ray_client, "_make_api", lambda address, timeout, token, transport=None: fake)
    return fake


@pytest.fixture
def desired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DesiredState:
    """Two command jobs, alpha and beta; alpha's env holds a secret reference."""
    monkeypatch.setenv("JOB_UNIT_SECRET", SECRET)
    files = {
        "argus.yaml": "kind: Workspace\nname: unit\nsecrets: [JOB_UNIT_SECRET]\n",
        "cluster.yaml": f"kind: Cluster\nname: local\naddress: {ADDRESS}\nshared_root: .shared\n",
        "jobs/alpha.yaml": "kind: Job\nname: alpha\ncluster: local\nworkload: command\nentrypoint: [sleep, '9']\n"
                           "env: {TOKEN: '${env:JOB_UNIT_SECRET}'}\n",
        "jobs/beta.yaml": "kind: Job\nname: beta\ncluster: local\nworkload: command\nentrypoint: [sleep, '9']\n",
    }
    for rel, text in files.items():
        (tmp_path / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "ws" / rel).write_text(text)
    (tmp_path / "ws" / ".shared").mkdir()
    return load_workspace(tmp_path / "ws")


def observed_empty(session: str = "s1", known: dict[str, RunRecord] | None = None) -> ObservedState:
    nodes = (Node(node_id="head", ip="127.0.0.1", is_head=True, resources={"CPU": 8.0}),)
    cluster = ClusterState(name="local", address=ADDRESS, session_name=session, ray_version="2.60.0", nodes=nodes,
                           jobs=())
    return ObservedState(clusters={"local": cluster}, records=known or {}, missing_dirs={"local": ()})


def planned(desired: DesiredState) -> tuple[Plan, ApplyContext, list[SubmitStep]]:
    observed = observed_empty()
    fresh = plan(desired, observed)
    assert not fresh.errors, fresh.errors
    submits = [s for s in fresh.steps() if isinstance(s, SubmitStep)]
    assert [s.submission.job for s in submits] == ["alpha", "beta"]
    ctx = ApplyContext(desired, {"local": RayClient("local", ADDRESS)}, GitInfo("abc", False), "plan1",
                       observed=observed, echo=lambda _: None)
    return fresh, ctx, submits


def shared(desired: DesiredState) -> Path:
    return Path(desired.shared_root("local"))


def status_of(desired: DesiredState, submission_id: str) -> dict[str, Any]:
    return json.loads((records.job_dir(str(shared(desired)), submission_id) / "status.json").read_text())


def audit_events(desired: DesiredState) -> list[dict[str, Any]]:
    return audit.read(str(shared(desired)), "unit")


def refused_with(message: str):
    """A submit Ray answers with HTTP 400 and this text."""
    return lambda sid, payload: RayRefused(400, message.format(**payload))


def test_a_refused_submit_is_recorded_and_later_steps_are_not_attempted(desired, sdk):
    fresh, ctx, (alpha, beta) = planned(desired)
    sdk.refuse = refused_with("ValueError: entrypoint_resources: unknown resource 'worker_nod'")
    with pytest.raises(ClusterRequestFailed, match="refused to submit"):
        apply_plan(fresh, ctx)

    record = status_of(desired, alpha.submission_id)
    assert record["status"] == RunStatus.SUBMIT_FAILED and "unknown resource 'worker_nod'" in record["error"]
    assert sdk.calls == [("submit", alpha.submission_id)]
    assert not records.job_dir(str(shared(desired)), beta.submission_id).exists()
    events = audit_events(desired)
    [action] = [e for e in events if e["event"] == "action"]
    assert (action["submission_id"], action["outcome"]) == (alpha.submission_id, "failed")
    assert (events[-1]["event"], events[-1]["outcome"]) == ("apply.end", "failed")
    log = (records.job_dir(str(shared(desired)), alpha.submission_id) / "logs" / "submit.out").read_text()
    assert "submit failed: " in log and "worker_nod" in log


def test_a_lost_submit_leaves_the_record_submitting(desired, sdk):
    """The connection broke mid-request: Ray may have the job, so the record must not say it failed."""
    fresh, ctx, (alpha, beta) = planned(desired)
    sdk.refuse = lambda sid, payload: requests.ConnectionError("Connection aborted: RemoteDisconnected")
    with pytest.raises(ClusterUnreachable):
        apply_plan(fresh, ctx)

    record = status_of(desired, alpha.submission_id)
    assert record["status"] == RunStatus.SUBMITTING and "Cannot reach the Ray dashboard" in record["error"]
    assert record["session_name"] == "s1"  # the next plan tells "never reached Ray" from "Ray forgot it" by this
    assert sdk.calls == [("submit", alpha.submission_id)]  # a write is never retried
    assert (records.job_dir(str(shared(desired)), alpha.submission_id) / ".secrets.env").exists()  # Ray may run it
    [action] = [e for e in audit_events(desired) if e["event"] == "action"]
    assert action["outcome"] == "failed"


def test_a_conflicting_submission_id_is_never_stopped_or_taken_over(desired, sdk):
    fresh, ctx, (alpha, beta) = planned(desired)
    theirs = {"argus.workspace": "unit", "argus.job": "alpha", "argus.spec_hash": "f" * 64, "argus.attempt": "1"}
    sdk.jobs[alpha.submission_id] = ray_job(alpha.submission_id, theirs)
    sdk.refuse = refused_with("ValueError: Job with submission_id {metadata[argus.job]} already exists. "
                              "Please use a different submission_id.")
    with pytest.raises(SubmitConflict, match="another spec"):
        apply_plan(fresh, ctx)

    assert sdk.calls == [("submit", alpha.submission_id), ("get", alpha.submission_id)]
    assert sdk.jobs[alpha.submission_id]["metadata"] == theirs
    record = status_of(desired, alpha.submission_id)
    assert record["status"] == RunStatus.SUBMIT_FAILED and "f" * 12 in record["error"]
    assert not records.job_dir(str(shared(desired)), beta.submission_id).exists()
    [action] = [e for e in audit_events(desired) if e["event"] == "action"]
    assert action["outcome"] == "failed" and "argus will not touch it" in action["error"]


def test_ray_never_gets_a_secret_and_a_refused_run_leaves_none_behind(desired, sdk):
    fresh, ctx, (alpha, _) = planned(desired)
    sdk.refuse = refused_with("ValueError: runtime_env {runtime_env} is invalid")
    with pytest.raises(ClusterRequestFailed) as raised:
        apply_plan(fresh, ctx)

    assert SECRET not in json.dumps(sdk.sent) and "TOKEN" not in json.dumps(sdk.sent)  # it goes by file, not Ray
    printed = "".join(traceback.format_exception(raised.value))
    assert SECRET not in printed
    written = [p for p in shared(desired).rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"status.json", "submit.out", "unit.jsonl", "submit_payload.json"}
    assert ".secrets.env" not in {p.name for p in written}  # Ray refused the run: its secrets go too
    for path in written:
        assert SECRET not in path.read_text(errors="replace"), path
    assert "runtime_env" in status_of(desired, alpha.submission_id)["error"]


def test_a_secret_in_an_error_reaches_no_record_log_audit_or_message(desired, sdk):
    fresh, ctx, (alpha, _) = planned(desired)
    sdk.refuse = refused_with(f"ValueError: the cluster says {SECRET} is wrong")  # an error that echoes one
    with pytest.raises(ClusterRequestFailed) as raised:
        apply_plan(fresh, ctx)

    printed = "".join(traceback.format_exception(raised.value))
    assert SECRET not in printed and "***" in str(raised.value)
    assert SECRET not in raised.value.detail
    for path in [p for p in shared(desired).rglob("*") if p.is_file()]:
        assert SECRET not in path.read_text(errors="replace"), path
    assert "***" in status_of(desired, alpha.submission_id)["error"]



def test_only_a_run_with_secrets_asks_its_wrapper_for_them(desired, sdk):
    """The wrapper reads .secrets.env only when its entrypoint says the run has one: a file planted beside a
    run without secrets is never sourced, and a run with secrets whose file is missing fails saying so."""
    fresh, ctx, (alpha, beta) = planned(desired)
    apply_plan(fresh, ctx)

    alpha_sent, beta_sent = sdk.sent
    assert alpha_sent["entrypoint"].endswith(" secrets") and not beta_sent["entrypoint"].endswith(" secrets")
    written = records.job_dir(str(shared(desired)), alpha.submission_id) / ".secrets.env"
    assert written.stat().st_mode & 0o777 == 0o600 and written.read_text() == f"export TOKEN={SECRET}\n"
    assert not (records.job_dir(str(shared(desired)), beta.submission_id) / ".secrets.env").exists()


def secrets_file(desired: DesiredState, submission_id: str) -> Path:
    return records.job_dir(str(shared(desired)), submission_id) / ".secrets.env"


def test_a_run_sent_to_a_head_that_restarted_since_leaves_no_secrets_file(desired, sdk):
    """Ray forgot a pending run when its head restarted: its wrapper never ran, and never will."""
    fresh, ctx, (alpha, _) = planned(desired)
    apply_plan(fresh, ctx)
    assert secrets_file(desired, alpha.submission_id).exists()  # no wrapper ran: the fake Ray starts nothing
    written = records.read_record(str(shared(desired)), alpha.submission_id)
    assert written.status == RunStatus.PENDING

    settle(desired, observed_empty("s2", {alpha.submission_id: written}))
    assert secrets_file(desired, alpha.submission_id).exists()  # just written: an apply may be sending it to s2
    known = {alpha.submission_id: aged(desired, written)}
    settle(desired, observed_empty("s1", known))  # the same head not listing it: the file waits
    assert secrets_file(desired, alpha.submission_id).exists()
    settle(desired, observed_empty("s2", known))  # a new head, an hour on: Ray forgot the run
    assert not secrets_file(desired, alpha.submission_id).exists()


def aged(desired: DesiredState, record: RunRecord) -> RunRecord:
    """The record as written more than SECRETS_GRACE ago."""
    old = (datetime.now(timezone.utc) - timedelta(seconds=SECRETS_GRACE + 60)).isoformat(timespec="seconds")
    older = record.model_copy(update={"updated_at": old})
    records.write_status(str(shared(desired)), older)
    return older


def test_a_run_whose_submit_never_reached_ray_and_is_not_sent_again_leaves_no_secrets_file(desired, sdk, tmp_path):
    """An apply lost its submit; the spec changed before the next apply, which sends the new run, not that one."""
    fresh, ctx, (alpha, _) = planned(desired)
    sdk.refuse = lambda sid, payload: requests.ConnectionError("Connection aborted: RemoteDisconnected")
    with pytest.raises(ClusterUnreachable):
        apply_plan(fresh, ctx)
    assert secrets_file(desired, alpha.submission_id).exists()  # Ray may have it: kept

    spec = tmp_path / "ws" / "jobs" / "alpha.yaml"
    spec.write_text(spec.read_text().replace("'9'", "'10'"))
    changed = load_workspace(tmp_path / "ws")
    lost = records.read_record(str(shared(desired)), alpha.submission_id)
    observed = observed_empty("s1", {alpha.submission_id: lost})
    second = plan(changed, observed)
    sdk.refuse = None
    world = apply_plan(second, ApplyContext(changed, {"local": RayClient("local", ADDRESS)}, GitInfo("def", False),
                                            "plan2", observed=observed, echo=lambda _: None))
    refresh_records(world, observed.clusters)
    assert secrets_file(desired, alpha.submission_id).exists()  # lost a moment ago: Ray may yet accept it
    world.runs._known[alpha.submission_id] = aged(desired, lost)
    refresh_records(world, observed.clusters)

    sent = [sid for verb, sid in sdk.calls if verb == "submit"]
    assert alpha.submission_id not in sent[1:] and len(sent) == 3  # the lost one, then the new alpha and beta
    assert not secrets_file(desired, alpha.submission_id).exists()
    new_alpha = next(sid for sid in sent[1:] if ".alpha." in sid)
    assert secrets_file(desired, new_alpha).exists()  # sent by this apply: its wrapper takes it


def test_every_submit_is_registered_in_the_audit_log_before_ray_is_asked(desired, sdk, monkeypatch):
    fresh, ctx, (alpha, beta) = planned(desired)
    registered_when_sent: dict[str, bool] = {}
    send = sdk.submit

    def watched(body: dict[str, Any]) -> None:
        events = audit_events(desired)
        registered_when_sent[body["submission_id"]] = any(
            e["event"] == "run.submitting" and e["submission_id"] == body["submission_id"] for e in events)
        send(body)

    monkeypatch.setattr(sdk, "submit", watched)
    from state.observed import Registry

    ctx.observed = ctx.observed.model_copy(update={"registries": {"local": Registry(log="read: nothing there")}})
    apply_plan(fresh, ctx)
    assert registered_when_sent == {alpha.submission_id: True, beta.submission_id: True}
    kinds = [e["event"] for e in audit_events(desired)]
    assert kinds.index("registry.adopted") < kinds.index("run.submitting")  # the registry starts before any submit


def test_a_submit_ray_refused_frees_its_id(desired, sdk):
    from state.audit import registry

    fresh, ctx, (alpha, _beta) = planned(desired)
    sdk.refuse = refused_with("ValueError: no")
    with pytest.raises(ClusterRequestFailed):
        apply_plan(fresh, ctx)
    assert alpha.submission_id not in registry.read(str(shared(desired)), "unit").submitted


def test_a_submit_whose_answer_was_lost_stays_registered(desired, sdk):
    from state.audit import registry

    fresh, ctx, (alpha, _beta) = planned(desired)
    sdk.refuse = lambda sid, payload: requests.ConnectionError("Connection aborted")
    with pytest.raises(ClusterUnreachable):
        apply_plan(fresh, ctx)
    assert alpha.submission_id in registry.read(str(shared(desired)), "unit").submitted
