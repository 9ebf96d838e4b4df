"""argus's own stops go into its audit chain before Ray is asked (run.stopping), with why; not written, not
stopped. The dashboard's job endpoints are faked (tests/execute/test_applier_failures.py), the log is real."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconcile.execute.applier import apply_plan
from reconcile.model import StopStep
from reconcile.plan.planner import plan
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.loader import load_workspace
from state.audit import log as audit
from state.audit import registry
from state.observed import ObservedState, RayJob
from state.runs import records
from tests.execute.test_applier_failures import FakeSdk, audit_events, desired, planned, sdk, shared  # noqa: F401


def test_a_stop_is_in_the_chain_with_its_why_before_ray_is_asked(desired, sdk, monkeypatch):  # noqa: F811
    stopped, ctx = _stopping_beta(desired, sdk)
    in_chain_when_asked: list[bool] = []
    ask = sdk.stop

    def watched(submission_id: str) -> None:
        in_chain_when_asked.append(any(e["event"] == "run.stopping" and e["submission_id"] == submission_id
                                       and e["why"] == "plan" for e in audit_events(desired)))
        ask(submission_id)
        sdk.jobs[submission_id]["status"] = "STOPPED"  # as Ray does, a moment later

    monkeypatch.setattr(sdk, "stop", watched)
    apply_plan(stopped, ctx)
    assert in_chain_when_asked == [True]
    [step] = [s for s in stopped.steps() if isinstance(s, StopStep)]
    assert registry.read(str(shared(desired)), "unit").stops == {step.submission_id: "plan"}


def test_a_stop_the_chain_cannot_record_is_not_asked_of_ray(desired, sdk, monkeypatch):  # noqa: F811
    stopped, ctx = _stopping_beta(desired, sdk)
    appended = audit.append_all

    def full(root, workspace, events, stamp=None):
        if any(e.event == "run.stopping" for e in events):
            raise OSError(28, "No space left on device")
        appended(root, workspace, events, stamp)

    monkeypatch.setattr(audit, "append_all", full)
    with pytest.raises((ArgusError, OSError)):
        apply_plan(stopped, ctx)
    assert not [c for c in sdk.calls if c[0] == "stop"]


def _stopping_beta(desired: DesiredState, sdk: FakeSdk):  # noqa: F811
    """Both jobs applied (Ray runs them), then beta set `state: stopped`: the plan that stops it."""
    fresh, ctx, _ = planned(desired)
    apply_plan(fresh, ctx)
    beta = Path(desired.root) / "jobs" / "beta.yaml"
    beta.write_text(beta.read_text() + "state: stopped\n")
    again = load_workspace(Path(desired.root))
    root = str(shared(again))
    jobs = tuple(RayJob(submission_id=sid, status="RUNNING", metadata=j["metadata"], start_time=1)
                 for sid, j in sdk.jobs.items())
    observed: ObservedState = ctx.observed.model_copy(update={
        "clusters": {"local": ctx.observed.clusters["local"].model_copy(update={"jobs": jobs})},
        "records": records.read_records(root, "unit"), "registries": {"local": registry.read(root, "unit")}})
    stopped = plan(again, observed)
    assert [c.action.value for c in stopped.actionable] == ["stop"], stopped.actionable
    ctx.desired, ctx.observed, ctx.stop_timeout = again, observed, 5.0
    return stopped, ctx
