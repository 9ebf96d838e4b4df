"""apply carries out independent submits concurrently (reconcile.execute.batch): each run exactly once
on Ray, in its record and in the audit log; the first failure stops the submits not yet started;
what a submit needs (its code snapshot) is done before it. On the session's real Ray cluster."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from reconcile.execute.applier import apply_plan
from state.audit import log as audit
from state.queue.ledger import read_ledger
from state.ray.client import SubmitConflict
from tests.support.batches import JOBS, planned, submit_actions, tiny_jobs
from tests.support.cluster import jobs_of, sdk
from tests.support.progress import wait_all

MAKE_REPO = Path(__file__).resolve().parents[2] / "examples" / "multi-version" / "make-repo.sh"


def test_a_concurrent_apply_submits_each_job_once_after_its_snapshot(workspace, argus):
    subprocess.run([MAKE_REPO, workspace.root / ".repo" / "marker"], check=True, capture_output=True)
    workspace.write("code.yaml", "kind: CodeSnapshot\nname: marker-a\ncluster: local\n"
                                 "git: {url: .repo/marker, ref: v1}\n")
    tiny_jobs(workspace, JOBS, extra="code: marker-a\n")
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err

    on_ray = Counter((j.metadata or {}).get("argus.job") for j in jobs_of(workspace.address, workspace.name))
    assert on_ray == Counter(f"j{i:02d}" for i in range(JOBS))  # each job once, none twice
    actions = [e for e in audit.read(str(workspace.shared), workspace.name) if e["event"] == "action"]
    submits = [e for e in actions if e["step"] == "submit"]
    assert Counter(e["submission_id"] for e in submits) == Counter({s: 1 for s in submitted_ids(workspace)})
    assert {e["outcome"] for e in submits} == {"submitted"}
    assert [e["step"] for e in actions].index("snapshot") < actions.index(submits[0])
    assert {status(workspace, e["submission_id"]) for e in submits} <= {"PENDING", "RUNNING", "SUCCEEDED"}
    assert argus("audit", "verify", workspace.root).code == 0  # threads appending never forked the chain

    lines = applied.out.split("Apply complete")[0].splitlines()
    steps = [line for line in lines if line.startswith(("job.", "code."))]
    assert steps[0].startswith("code.marker-a: export") and len(steps) == JOBS + 1
    for line in steps[1:]:  # every line whole: nothing of another thread's line inside it
        assert re.fullmatch(r"job\.j\d\d: submit \S+ to cluster local", line), line
    summary = [line.split()[0] for line in applied.out.split("Apply complete")[1].splitlines()[2:]]
    assert summary[-JOBS:] == [f"job.j{i:02d}" for i in range(JOBS)]  # in plan order, after the files
    # drivers still starting would slow the next tests; on a loaded machine they start slowly, so the wait
    # lasts while they make progress (a hang still fails: nothing moving for STALL seconds)
    wait_all(workspace.address, [j.submission_id for j in jobs_of(workspace.address, workspace.name)], {"SUCCEEDED"})


def test_the_first_failure_stops_the_submits_not_yet_started(workspace, monkeypatch):
    from reconcile.execute import batch

    # two threads: on a loaded machine eight could take every other submit before the failing one's answer came
    monkeypatch.setattr(batch, "WORKERS", 2)
    plan, ctx, submits, said = planned(workspace)
    taken = submits[1].submission_id  # the first goes alone and through; this one fails beside others
    sdk(workspace.address).submit_job(entrypoint="true", submission_id=taken)  # by hand: not argus's
    with pytest.raises(SubmitConflict):
        apply_plan(plan, ctx)

    outcomes = {e["submission_id"]: e["outcome"] for e in submit_actions(workspace)}
    attempted = set(outcomes)
    assert outcomes.pop(taken) == "failed" and set(outcomes.values()) == {"submitted"}
    assert submits[0].submission_id in outcomes
    on_ray = {j.submission_id for j in jobs_of(workspace.address, workspace.name)}
    assert on_ray == set(outcomes)  # what the log says was submitted is exactly what Ray has
    never = {s.submission_id for s in submits} - attempted
    assert never, "every submit had started before the failure: the test proves nothing"
    assert {p.name for p in (workspace.shared / "jobs").iterdir()} == attempted  # no record of the others
    assert {e.submission_id for e in read_ledger(str(workspace.shared), workspace.name)} <= attempted
    assert any(line.startswith(f"Stopped after the first failure: {len(never)} submission(s)")
               for line in said)
    assert [row[0] for row in ctx.outcomes if row[0].startswith("job.")] == [
        f"job.{s.submission.job}" for s in submits if s.submission_id in outcomes]
    last = audit.read(str(workspace.shared), workspace.name)[-1]
    assert (last["event"], last["outcome"]) == ("apply.end", "failed")


def test_a_refused_first_submit_is_the_only_one_attempted(workspace):
    plan, ctx, submits, _ = planned(workspace)
    sdk(workspace.address).submit_job(entrypoint="true", submission_id=submits[0].submission_id)
    with pytest.raises(SubmitConflict):
        apply_plan(plan, ctx)

    actions = submit_actions(workspace)
    assert [(e["submission_id"], e["outcome"]) for e in actions] == [(submits[0].submission_id, "failed")]
    assert jobs_of(workspace.address, workspace.name) == []
    held = [e.submission_id for e in read_ledger(str(workspace.shared), workspace.name)]
    assert held == []  # the refused run's admission is withdrawn (it holds nothing), and so are the others' admissions


def submitted_ids(workspace) -> set[str]:
    return {j.submission_id for j in jobs_of(workspace.address, workspace.name)}


def status(workspace, submission_id: str) -> str:
    return json.loads((workspace.shared / "jobs" / submission_id / "status.json").read_text())["status"]
