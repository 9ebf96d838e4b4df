"""`argus status` and `argus plan` on a cluster shared with other teams: one line per other workspace, jobs
argus did not submit listed while active and counted once finished, never thousands of lines."""

from __future__ import annotations

from reconcile.model import Plan, UnmanagedJob
from reconcile.views.human import render_plan, render_status
from reconcile.views.machine import plan_json, status_json
from reconcile.views.others import ACTIVE_LISTED, HINT, WORKSPACES_LISTED


def other(i: int, owner: str | None, status: str = "SUCCEEDED", cluster: str = "h20", claims: str | None = None):
    return UnmanagedJob(cluster=cluster, submission_id=f"raysubmit_{i}", status=status, owner=owner, claims=claims)


def shared(jobs: list[UnmanagedJob]) -> Plan:
    return Plan(workspace="llm-rl", changes=(), unmanaged=tuple(jobs))


def block(text: str) -> list[str]:
    """The lines of the not-managed block, stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Not managed by this workspace" in line)
    return [line.strip() for line in lines[start + 1:] if line.strip()]


def test_each_other_workspace_is_one_line_however_many_runs_it_kept():
    jobs = [other(i, "nlp", "RUNNING" if i < 3 else "SUCCEEDED") for i in range(44)]
    jobs += [other(100 + i, "vision", "PENDING", cluster="a100") for i in range(2)]
    jobs += [other(200, "vision", "FAILED")]
    lines = block(render_status(shared(jobs), set()))
    assert lines == ["workspace nlp: 3 running, 41 finished on h20",
                     "workspace vision: 2 pending, 1 finished on a100, h20", HINT]


def test_jobs_argus_did_not_submit_are_listed_while_active_and_counted_once_finished():
    jobs = [other(1, None, "RUNNING"), other(2, None, "PENDING", cluster="a100")]
    jobs += [other(10 + i, None, "STOPPED") for i in range(500)]
    lines = block(render_status(shared(jobs), set()))
    assert lines == ["not submitted by argus, on h20: raysubmit_1 RUNNING",
                     "not submitted by argus, on a100: raysubmit_2 PENDING",
                     "not submitted by argus: 500 finished on h20", HINT]


def test_a_job_wearing_this_workspaces_labels_is_not_summed_with_a_team():
    """Labels are anyone's to write: a job claiming to be ours without the proof is shown as foreign, by id."""
    jobs = [other(1, "llm-rl", "RUNNING", claims="llm-rl/ppo")]
    lines = block(render_status(shared(jobs), set()))
    assert lines == ["not submitted by argus, on h20: raysubmit_1 RUNNING (claims to be llm-rl/ppo)"]


def test_thousands_of_jobs_and_labels_stay_a_bounded_block():
    """Anyone can submit thousands of jobs, each with its own workspace label, or thousands by hand."""
    jobs = [other(i, f"team-{i:04d}", "RUNNING" if i % 3 == 0 else "SUCCEEDED") for i in range(3000)]
    jobs += [other(5000 + i, None, "RUNNING") for i in range(300)]
    jobs += [other(9000 + i, None, "FAILED") for i in range(1000)]
    lines = block(render_status(shared(jobs), set()))
    assert len(lines) == WORKSPACES_LISTED + 1 + ACTIVE_LISTED + 2 + 1
    assert f"{3000 - WORKSPACES_LISTED} more workspace(s): 980 running, 2000 finished on h20" in lines
    assert all(line.endswith("1 running on h20") for line in lines[:WORKSPACES_LISTED])  # the active ones first
    assert f"not submitted by argus: {300 - ACTIVE_LISTED} more active on h20" in lines
    assert "not submitted by argus: 1000 finished on h20" in lines


def test_all_workspaces_lists_every_job_one_a_line():
    jobs = [other(i, "nlp") for i in range(30)] + [other(99, None, "RUNNING")]
    lines = block(render_status(shared(jobs), set(), all_workspaces=True))
    assert len(lines) == 31 and HINT not in lines
    assert "h20: raysubmit_29 SUCCEEDED (owner: nlp)" in lines
    assert "h20: raysubmit_99 RUNNING (owner: none, submitted by hand)" in lines


def test_plan_sums_up_the_same_way_and_lists_on_request():
    jobs = [other(i, "nlp") for i in range(41)] + [other(99, None, "RUNNING")]
    text = render_plan(shared(jobs))
    assert "  Not managed by this workspace (never touched):\n    workspace nlp: 41 finished on h20\n" in text
    assert "    not submitted by argus, on h20: raysubmit_99 RUNNING\n" in text
    assert "raysubmit_40" not in text
    listed = render_plan(shared(jobs), all_workspaces=True)
    assert all(f"    h20: raysubmit_{i} SUCCEEDED (owner: nlp)" in listed for i in range(41))


def test_a_label_cannot_forge_lines_of_the_output():
    jobs = [other(1, None, "RUNNING").model_copy(update={"submission_id": "x\nworkspace evil: 0 running"})]
    lines = block(render_status(shared(jobs), set()))
    assert lines == ["not submitted by argus, on h20: x\\nworkspace evil: 0 running RUNNING"]


def test_the_json_views_keep_every_job():
    jobs = [other(i, "nlp") for i in range(50)] + [other(99, None, "RUNNING")]
    for text in (plan_json(shared(jobs)), status_json(shared(jobs), set())):
        assert all(f'"submission_id": "raysubmit_{i}"' in text for i in [*range(50), 99])
