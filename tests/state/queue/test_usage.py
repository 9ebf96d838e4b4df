"""argus usage: GPU-hours and run counts from real record files on a real shared root, no Ray cluster."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from specs.workloads.submission import Submission
from state.audit import log as audit
from state.audit.events import ApplyStarted
from state.files import write_json
from state.observed import RunEnd, RunRecord, RunStatus
from state.queue.usage import Run, Usage, read_runs, run_gpus, summarize
from state.runs import records
from tests.support.workspace import make_workspace

S, F, X, R = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.RUNNING
NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)


def at(hhmm: str) -> str:
    return f"2026-01-01T{hhmm}:00Z"


def submission(workspace: str, job: str, gpus: int | None = None, driver_gpus: float | None = None) -> Submission:
    return Submission(workspace=workspace, cluster="local", shared_root=".shared", job=job, run=1, entrypoint="true",
                      env_vars={}, entrypoint_num_cpus=1.0, entrypoint_num_gpus=driver_gpus, entrypoint_memory=None,
                      entrypoint_resources={}, gpus=gpus)


def record(workspace: str, job: str, status: RunStatus, submitted: str | None, updated: str, plan: str = "p0",
           attempt: int = 1, **gpus: float) -> RunRecord:
    return RunRecord(submission_id=f"{workspace}.{job}.000000000000.{attempt}", workspace=workspace, job=job,
                     cluster="local", spec_hash="0" * 64, attempt=attempt, status=status, submitted_at=submitted,
                     updated_at=updated, plan_id=plan, commit="c0ffee", submission=submission(workspace, job, **gpus))


def put(root: Path, run: RunRecord, ended: str | None = None, exit_code: int = 0, signalled: bool = False) -> None:
    records.write_status(str(root), run)
    if ended:
        write_json(records.job_dir(str(root), run.submission_id) / "exit.json",
                   {"exit_code": exit_code, "signalled": signalled, "ended_at": ended})


def applied(root: Path, workspace: str, plan: str, actor: str) -> None:
    audit.act_as(actor)
    try:
        audit.append(str(root), workspace, ApplyStarted(changes=1, options={}), {"plan_id": plan})
    finally:
        audit.act_as(None)


def two_workspaces(root: Path) -> None:
    """team-a: alice's train (8 GPUs, 2 h) and eval (1 GPU, 30 min), bob's refused retry; team-b: a ppo
    nobody's audit log names (4 GPUs, 3 h), bob's CPU-only job (1 h)."""
    put(root, record("team-a", "train", S, at("00:00"), at("02:05"), "pa1", gpus=8), at("02:00"))
    put(root, record("team-a", "eval", F, at("01:00"), at("01:30"), "pa1", driver_gpus=1))
    put(root, record("team-a", "train", RunStatus.SUBMIT_FAILED, None, at("03:00"), "pa2", attempt=2, gpus=8))
    put(root, record("team-b", "ppo", X, at("00:30"), at("03:31"), "pb1", gpus=4), at("03:30"), 143, True)
    put(root, record("team-b", "cpu", S, at("00:00"), at("01:00"), "pb2"), at("01:00"))
    applied(root, "team-a", "pa1", "alice")
    applied(root, "team-a", "pa2", "bob")
    applied(root, "team-b", "pb2", "bob")


def table(rows: list[Usage]) -> list[tuple]:
    return [(r.key, r.runs, r.succeeded, r.failed, r.refused, r.gpu_hours) for r in rows]


def test_gpu_hours_and_runs_by_workspace_job_and_actor(tmp_path: Path):
    two_workspaces(tmp_path)
    runs = read_runs([str(tmp_path), str(tmp_path)])  # two clusters on one shared root: read once
    assert table(summarize(runs, "workspace", NOW)) == [("team-a", 2, 1, 1, 1, 16.5), ("team-b", 2, 1, 0, 0, 12.0)]
    assert table(summarize(runs, "job", NOW)) == [
        ("team-a/train", 1, 1, 0, 1, 16.0), ("team-b/ppo", 1, 0, 0, 0, 12.0), ("team-a/eval", 1, 0, 1, 0, 0.5),
        ("team-b/cpu", 1, 1, 0, 0, 0.0)]
    assert table(summarize(runs, "actor", NOW)) == [
        ("alice", 2, 1, 1, 0, 16.5), ("unknown", 1, 0, 0, 0, 12.0), ("bob", 1, 1, 0, 1, 0.0)]


def test_since_counts_only_the_part_after_it_and_leaves_out_runs_ended_before(tmp_path: Path):
    two_workspaces(tmp_path)
    since = datetime(2026, 1, 1, 1, 45, tzinfo=timezone.utc)
    assert table(summarize(read_runs([str(tmp_path)]), "workspace", NOW, since)) == [
        ("team-b", 1, 0, 0, 0, 7.0), ("team-a", 1, 1, 0, 1, 2.0)]
    later = datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)  # the refusal at 03:00 is not before it
    assert table(summarize(read_runs([str(tmp_path)]), "job", NOW, later)) == [
        ("team-b/ppo", 1, 0, 0, 0, 2.0), ("team-a/train", 0, 0, 0, 1, 0.0)]


def test_runs_still_going_count_until_now_and_a_stale_record_takes_its_end_from_exit_json():
    now = datetime(2026, 1, 1, 1, 0, tzinfo=timezone.utc)
    running = record("ws", "a", R, at("00:00"), at("00:00"), gpus=2)
    submitting = record("ws", "b", RunStatus.SUBMITTING, None, at("00:30"), driver_gpus=1)
    ended = record("ws", "c", R, at("00:00"), at("00:00"), gpus=4)
    runs = [Run(running, None, "x"), Run(submitting, None, "x"),
            Run(ended, RunEnd(exit_code=1, ended_at=at("00:15")), "x")]
    assert table(summarize(runs, "job", now)) == [
        ("ws/a", 1, 0, 0, 0, 2.0), ("ws/c", 1, 0, 1, 0, 1.0), ("ws/b", 1, 0, 0, 0, 0.5)]


def test_run_gpus_prefers_verls_count_then_the_drivers():
    assert run_gpus(record("ws", "a", S, None, at("00:00"), gpus=8, driver_gpus=1)) == 8.0
    assert run_gpus(record("ws", "a", S, None, at("00:00"), driver_gpus=0.5)) == 0.5
    assert run_gpus(record("ws", "a", S, None, at("00:00"))) == 0.0
    assert run_gpus(record("ws", "a", S, None, at("00:00")).model_copy(update={"submission": None})) == 0.0


def test_hostile_records_are_skipped_and_symlinks_never_followed(tmp_path: Path):
    root, outside = tmp_path / "shared", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    put(root, record("team-a", "good", S, at("00:00"), at("01:00"), driver_gpus=1), at("01:00"))
    greedy = record("team-a", "evil", S, at("00:00"), at("01:00"), gpus=1000)
    for name in ("linked", "linked-dir", "huge", "copied"):
        put(outside, greedy.model_copy(update={"submission_id": name}))
    jobs = root / "jobs"
    (jobs / "linked").mkdir()
    (jobs / "linked" / "status.json").symlink_to(outside / "jobs" / "linked" / "status.json")
    (jobs / "linked-dir").symlink_to(outside / "jobs" / "linked-dir", target_is_directory=True)
    (jobs / "huge").mkdir()
    (jobs / "huge" / "status.json").write_text(greedy.model_copy(update={"submission_id": "huge"})
                                               .model_dump_json() + " " * (2 << 20))
    (jobs / "copied").mkdir()  # a record that names another run: its directory is not its own
    (jobs / "copied" / "status.json").write_text(greedy.model_dump_json())
    for name, text in (("garbage", "{not json"), ("deep", "[" * 100_000), ("binary", "\udcff")):
        (jobs / name).mkdir()
        (jobs / name / "status.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    (jobs / "fifo").mkdir()
    os.mkfifo(jobs / "fifo" / "status.json")
    assert table(summarize(read_runs([str(root)]), "workspace", NOW)) == [("team-a", 1, 1, 0, 0, 1.0)]


def test_a_hostile_audit_log_names_no_one_it_should_not(tmp_path: Path):
    put(tmp_path, record("team-a", "train", S, at("00:00"), at("01:00"), "pa1", gpus=1), at("01:00"))
    put(tmp_path, record("team-b", "train", S, at("00:00"), at("01:00"), "pa1", gpus=2), at("01:00"))
    log = audit.audit_path(str(tmp_path), "team-a")
    log.parent.mkdir(parents=True)
    overlong = json.dumps({"plan_id": "pa1", "actor": "mallory", "pad": "x" * 100_000})
    log.write_text("\n".join(["{broken", "[]", "[" * 100_000, overlong, '{"plan_id": 7, "actor": "eve"}']) + "\n")
    applied(tmp_path, "team-a", "pa1", "alice")
    audit.audit_path(str(tmp_path), "team-b").symlink_to(log)
    rows = summarize(read_runs([str(tmp_path)]), "actor", NOW)
    assert table(rows) == [("unknown", 1, 1, 0, 0, 2.0), ("alice", 1, 1, 0, 0, 1.0)]


def test_the_command_prints_a_table_and_json_and_refuses_a_bad_since(tmp_path: Path, argus):
    ws = make_workspace(tmp_path / "ws", "team-a", "http://127.0.0.1:9")
    two_workspaces(ws.shared)
    shown = argus("usage", ws.root, "--by", "job")
    assert shown.code == 0, shown.err
    assert all(k in shown.out for k in ("runs", "succeeded", "failed", "refused", "GPU-hours", "16.00"))
    order = [shown.out.index(k) for k in ("team-a/train", "team-b/ppo", "team-a/eval", "team-b/cpu")]
    assert order == sorted(order)
    data = json.loads(argus("usage", ws.root, "--json", "--since", "2026-01-01T02:45+01:00").out)
    assert data == [{"key": "team-b", "runs": 1, "succeeded": 0, "failed": 0, "refused": 0, "gpu_hours": 7.0},
                    {"key": "team-a", "runs": 1, "succeeded": 1, "failed": 0, "refused": 1, "gpu_hours": 2.0}]
    assert json.loads(argus("usage", ws.root, "--json", "--since", "2026-01-03").out) == []
    assert "No runs since 2026-01-03." in argus("usage", ws.root, "--since", "2026-01-03").out
    for bad in (["--since", "yesterday"], ["--by", "team"]):
        refused = argus("usage", ws.root, *bad)
        assert refused.code == 1 and bad[0] in refused.err and "Traceback" not in refused.err


def test_a_shared_root_not_mounted_here_is_noted_not_fatal(tmp_path: Path, argus):
    ws = make_workspace(tmp_path / "ws", "team-a", "http://127.0.0.1:9")
    shown = argus("usage", ws.root)
    assert (shown.code, shown.out.strip()) == (0, "No runs.")
    assert f"{ws.shared}/jobs is not a directory here" in shown.err
