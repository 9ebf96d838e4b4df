"""argus's own stops go into its audit chain before Ray is asked (run.stopping), with why; not written, not
stopped. The dashboard's job endpoints are faked (as state.ray.jobs_api.JobsApi answers), the log is real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconcile.execute.applier import ApplyContext, apply_plan
from reconcile.model import Plan, StopStep
from reconcile.plan.planner import plan
from specs.errors import ArgusError
from specs.load.loader import load_workspace
from state.audit import log as audit
from state.audit import registry
from state.code.gitinfo import GitInfo
from state.observed import ClusterState, Node, ObservedState, RayJob
from state.ray import client as ray_client
from state.ray.client import RayClient
from state.ray.jobs_api import RayRefused
from state.runs import records

ADDRESS = "http://127.0.0.1:9"  # never reached: the job endpoints are fake
CLUSTER = f"kind: Cluster\nname: local\naddress: {ADDRESS}\nshared_root: .shared\n"
JOB = "kind: Job\nname: held\ncluster: local\nworkload: command\nentrypoint: [sleep, '9']\n"


class FakeJobs:
    """The job endpoints RayClient uses; a stop makes the job STOPPED, as Ray does a moment later."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.stops: list[str] = []
        self.on_stop = lambda submission_id: None

    def submit(self, body: dict[str, Any]) -> None:
        self.jobs[body["submission_id"]] = {
            "submission_id": body["submission_id"], "job_id": None, "status": "RUNNING", "entrypoint": "",
            "metadata": body["metadata"], "message": "", "start_time": 1, "end_time": None, "type": "SUBMISSION",
            "driver_node_id": None, "error_type": None, "driver_exit_code": None}

    def job_info(self, submission_id: str) -> dict[str, Any]:
        if submission_id not in self.jobs:
            raise RayRefused(404, f"Job {submission_id} does not exist.")
        return self.jobs[submission_id]

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def stop(self, submission_id: str) -> None:
        self.on_stop(submission_id)
        self.stops.append(submission_id)
        self.jobs[submission_id]["status"] = "STOPPED"

    def delete(self, submission_id: str) -> None:
        self.jobs.pop(submission_id, None)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeJobs:
    jobs = FakeJobs()
    monkeypatch.setattr(ray_client, "_make_api", lambda address, timeout, token, transport=None: jobs)
    return jobs


def test_a_stop_is_in_the_chain_with_its_why_before_ray_is_asked(tmp_path: Path, fake: FakeJobs):
    stopping, ctx, root = _stopping(tmp_path, fake)
    in_chain_when_asked: list[bool] = []
    fake.on_stop = lambda sid: in_chain_when_asked.append(any(
        e["event"] == "run.stopping" and e["submission_id"] == sid and e["why"] == "plan"
        for e in audit.read(root, "unit")))
    apply_plan(stopping, ctx)
    assert in_chain_when_asked == [True]
    [step] = [s for s in stopping.steps() if isinstance(s, StopStep)]
    assert registry.read(root, "unit").stops == {step.submission_id: "plan"}


def test_a_stop_the_chain_cannot_record_is_not_asked_of_ray(tmp_path: Path, fake: FakeJobs,
                                                            monkeypatch: pytest.MonkeyPatch):
    stopping, ctx, _root = _stopping(tmp_path, fake)
    appended = audit.append_all

    def full(root, workspace, events, stamp=None):
        if any(e.event == "run.stopping" for e in events):
            raise OSError(28, "No space left on device")
        appended(root, workspace, events, stamp)

    monkeypatch.setattr(audit, "append_all", full)
    with pytest.raises((ArgusError, OSError)):
        apply_plan(stopping, ctx)
    assert fake.stops == []


def _stopping(tmp_path: Path, fake: FakeJobs) -> tuple[Plan, ApplyContext, str]:
    """The job applied (Ray runs it), then set `state: stopped`: the plan that stops it, ready to apply."""
    ws = tmp_path / "ws"
    for rel, text in {"argus.yaml": "kind: Workspace\nname: unit\n", "jobs/held.yaml": JOB,
                      "cluster.yaml": CLUSTER}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / ".shared").mkdir()
    desired = load_workspace(ws)
    root = desired.shared_root("local")
    first = _observed(fake, root, with_registry=False)
    submitted = plan(desired, first)
    apply_plan(submitted, ApplyContext(desired, {"local": RayClient("local", ADDRESS)}, GitInfo("abc", False), "p1",
                                       observed=first, echo=lambda _: None))
    (ws / "jobs" / "held.yaml").write_text(JOB + "state: stopped\n")
    desired = load_workspace(ws)
    observed = _observed(fake, root)
    stopping = plan(desired, observed)
    assert [c.action.value for c in stopping.actionable] == ["stop"], stopping.actionable
    return stopping, ApplyContext(desired, {"local": RayClient("local", ADDRESS)}, GitInfo("abc", False), "p2",
                                  observed=observed, echo=lambda _: None, stop_timeout=5.0), root


def _observed(fake: FakeJobs, root: str, with_registry: bool = True) -> ObservedState:
    jobs = tuple(RayJob(submission_id=sid, status=j["status"], metadata=j["metadata"], start_time=1)
                 for sid, j in fake.jobs.items())
    nodes = (Node(node_id="head", ip="127.0.0.1", is_head=True, resources={"CPU": 8.0}),)
    cluster = ClusterState(name="local", address=ADDRESS, session_name="s1", ray_version="2.60.0", nodes=nodes,
                           jobs=jobs)
    return ObservedState(clusters={"local": cluster}, records=records.read_records(root, "unit"),
                         missing_dirs={"local": ()},
                         registries={"local": registry.read(root, "unit")} if with_registry else {})
