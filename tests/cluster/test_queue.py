"""The admission queue on a real Ray cluster whose worker has 3 logical GPUs.

Jobs demand 2 GPUs each, so two never fit at once. Each run appends `start NAME T` and `end NAME T`
to a log on the shared root: the tests read what really ran when, not what argus says it did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.cluster import jobs_of, until
from tests.support.gpu_queue import active, gpu_job, ran, serve, stop, stop_all, team
from tests.support.workspace import Workspace


def never_two_at_once(runs: list[tuple[str, float, float]]) -> None:
    for (a, _, a_end), (b, b_start, _) in zip(runs, runs[1:], strict=False):
        assert b_start >= a_end, f"{b} started before {a} ended: the GPUs were promised twice"


def succeeded(ws: Workspace) -> int:
    return sum(j.status.value == "SUCCEEDED" for j in jobs_of(ws.address, ws.name))


def test_three_jobs_of_two_gpus_run_one_at_a_time_in_priority_order(gpu_cluster, shared, tmp_path, argus):
    ws = team(tmp_path, "llm-rl", gpu_cluster, shared)
    for name in ("j1", "j2", "j3"):
        gpu_job(ws, shared, name)
    try:
        first = argus("apply", ws.root, "--auto-approve")
        assert first.code == 0, first.out + first.err
        assert active(ws) == ["j1"]  # same priority, same arrival: by name
        assert "queued #1 on local: needs 2 GPU" in first.out and "queued #2 on local" in first.out
        shown = argus("plan", ws.root)
        assert "Waiting in the admission queue:" in shown.out and "2 job(s) wait in the admission queue" in shown.out
        assert "demand: 2 GPU (priority 0)" not in shown.out  # nothing to do: no change lines, only the waiting list

        gpu_job(ws, shared, "j3", priority=10)  # raised while it waits: it moves ahead of j2
        raised = argus("apply", ws.root, "--auto-approve")
        assert raised.code == 0, raised.out + raised.err
        assert "job.j3" in raised.out and "queued #1" in raised.out
        loop = serve(ws)  # records mode: it admits what the applies queued, nothing else
        try:
            until(lambda: succeeded(ws) == 3, "all three ran", timeout=180)
        finally:
            err = stop(loop)
        runs = ran(shared)
        assert [r[0] for r in runs] == ["llm-rl/j1", "llm-rl/j3", "llm-rl/j2"], (runs, err)
        never_two_at_once(runs)
        ledger = json.loads((shared / ".argus" / "queue" / "llm-rl.json").read_text())
        assert all(e["admitted"] for e in ledger["entries"])  # nothing left waiting
        usage = argus("usage", ws.root, "--json")
        [row] = json.loads(usage.out)
        held = sum(end - start for _job, start, end in runs) * 2 / 3600  # 2 GPUs each, as admission held them
        assert (row["key"], row["runs"], row["succeeded"]) == ("llm-rl", 3, 3)
        assert held <= row["gpu_hours"] <= held + 3 * 2 * 30 / 3600  # submit to end, not only the sleep
    finally:
        stop_all(gpu_cluster.address, ws)


def test_two_workspaces_admitting_at_the_same_moment_never_oversubscribe(gpu_cluster, shared, tmp_path, argus):
    a, b = team(tmp_path, "team-a", gpu_cluster, shared), team(tmp_path, "team-b", gpu_cluster, shared)
    gpu_job(a, shared, "a1")
    gpu_job(b, shared, "b1")
    try:
        both = [subprocess.Popen([sys.executable, "-m", "reconcile.cli", "apply", str(ws.root), "--auto-approve"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for ws in (a, b)]
        outputs = [p.communicate(timeout=180)[0] for p in both]
        assert [p.returncode for p in both] == [0, 0], outputs
        assert len(active(a) + active(b)) == 1, outputs  # 3 GPUs: one 2-GPU job, never both
        assert sum("queued #1" in out for out in outputs) == 1, outputs

        gpu_job(a, shared, "a2", priority=1)
        gpu_job(b, shared, "b2", priority=10)  # team B's priority-10 job goes before team A's priority-1 one
        for ws in (a, b):
            assert argus("apply", ws.root, "--auto-approve").code == 0
        loops = [serve(a), serve(b)]
        try:
            until(lambda: succeeded(a) + succeeded(b) == 4, "all four ran", timeout=240)
        finally:
            errors = [stop(loop) for loop in loops]
        runs = ran(shared)
        never_two_at_once(runs)
        order = [r[0] for r in runs]
        assert order.index("team-b/b2") < order.index("team-a/a2"), (order, errors)
        assert order[1] == "team-b/b2", order  # ahead of the first apply's loser too (priority 0)
    finally:
        stop_all(gpu_cluster.address, a, b)


def test_a_quota_holds_a_workspace_to_its_share(gpu_cluster, shared, tmp_path, argus):
    (shared / ".argus" / "quotas.yaml").write_text("# the platform's caps\nteam-q: {GPU: 1}\n")
    ws = team(tmp_path, "team-q", gpu_cluster, shared)
    gpu_job(ws, shared, "small1", gpus=1)
    gpu_job(ws, shared, "small2", gpus=1)
    try:
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        assert active(ws) == ["small1"]  # 3 GPUs free, but the quota is 1
        assert "over the quota of workspace team-q: GPU 2 of 1 (1 held)" in applied.out

        gpu_job(ws, shared, "big", gpus=2)
        refused = argus("plan", ws.root)
        assert refused.code == 1 and "job.big can never start under workspace team-q's quota" in refused.out
        assert "jobs/big.yaml" in refused.out
    finally:
        stop_all(gpu_cluster.address, ws)


def test_a_broken_quota_file_admits_nothing_and_says_where(gpu_cluster, shared, tmp_path, argus):
    (shared / ".argus" / "quotas.yaml").write_text("team-z:\n  GPU: eight\n")
    ws = team(tmp_path, "team-z", gpu_cluster, shared)
    gpu_job(ws, shared, "j", gpus=1)
    result = argus("apply", ws.root, "--auto-approve")
    assert result.code == 1 and "quotas.yaml:2" in result.out + result.err
    assert active(ws) == []


def test_a_job_bigger_than_the_cluster_is_an_error_not_a_wait(gpu_cluster, shared, tmp_path, argus):
    ws = team(tmp_path, "team-big", gpu_cluster, shared)
    gpu_job(ws, shared, "huge", gpus=4)
    result = argus("plan", ws.root)
    assert result.code == 1
    assert "job.huge can never start on cluster 'local'" in result.out and "4 GPU" in result.out
    assert argus("apply", ws.root, "--auto-approve").code == 1 and active(ws) == []


def test_admission_waits_for_a_lock_held_by_another_admission(gpu_cluster, shared, tmp_path, argus):
    """The admission lock is a real record lock: while another process holds it, apply waits."""
    ws = team(tmp_path, "team-l", gpu_cluster, shared)
    gpu_job(ws, shared, "j", gpus=1)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from state.queue.ledger import admission_lock
        with admission_lock({str(shared)!r}):
            print('held', flush=True)
            time.sleep(3)
        """)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    try:
        assert holder.stdout.readline().strip() == "held"
        began = time.monotonic()
        result = argus("apply", ws.root, "--auto-approve")
        assert result.code == 0, result.out + result.err
        assert time.monotonic() - began >= 1.5  # it waited for the other admission to finish
        assert active(ws) == ["j"]
    finally:
        holder.wait(timeout=30)
        stop_all(gpu_cluster.address, ws)


RESUMABLE = ("import os, sys, time; p = sys.argv[1]; s = int(open(p).read()) if os.path.exists(p) else 0; "
             "print('resumed from step', s, flush=True) if s else None; "
             "[(open(p, 'w').write(str(i)), time.sleep(0.5)) for i in range(s + 1, 21)]; print('done', flush=True)")


def test_a_preemptible_run_gives_way_to_a_higher_priority_job_and_resumes_after(gpu_cluster, shared, tmp_path,
                                                                                 argus, monkeypatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", "queue-test-root-key-0123456789")  # preempting across workspaces needs it
    # workspace names no other test uses: Ray keeps their finished jobs, which `succeeded` counts
    a, b = team(tmp_path, "owner", gpu_cluster, shared), team(tmp_path, "rival", gpu_cluster, shared)
    step = shared / "low.step"
    a.write("jobs/low.yaml", f"""
        kind: Job
        name: low
        cluster: local
        workload: command
        entrypoint: [python3, -c, {json.dumps(RESUMABLE)}, {step}]
        demand: {{GPU: 2}}
        preemptible: true
        """)
    gpu_job(b, shared, "urgent", priority=10)
    try:
        assert argus("apply", a.root, "--auto-approve").code == 0
        until(lambda: step.exists() and int(step.read_text() or 0) >= 3, "low made progress", timeout=60)
        waiting = argus("apply", b.root, "--auto-approve")
        assert waiting.code == 0 and "stops the preemptible owner/low to fit" in waiting.out, waiting.out
        assert active(b) == []
        loops = [serve(a), serve(b)]
        try:
            until(lambda: succeeded(a) == 1 and succeeded(b) == 1, "urgent ran, then low finished", timeout=240)
        finally:
            errors = [stop(loop) for loop in loops]
        runs = {j.metadata["argus.attempt"]: j for j in jobs_of(a.address, a.name)}
        assert sorted(runs) == ["1", "2"], errors  # preempted once, resumed once: never more
        assert runs["1"].status.value == "STOPPED" and runs["2"].status.value == "SUCCEEDED"
        resumed = argus("logs", "low", a.root)
        assert "resumed from step" in resumed.out and "done" in resumed.out
        [(job, urgent_start, urgent_end)] = ran(shared)
        assert runs["1"].end_time / 1000 <= urgent_start + 1 and runs["2"].start_time / 1000 >= urgent_end - 1
        audit_lines = [json.loads(line) for line in (shared / ".argus" / "audit" / "owner.jsonl").read_text()
                       .splitlines()]
        assert any(e.get("action") == "preempt" and e.get("outcome", "").startswith("stopped") for e in audit_lines)
    finally:
        stop_all(gpu_cluster.address, a, b)


def test_a_team_without_a_loop_never_holds_the_queue_past_the_grace(gpu_cluster, shared, tmp_path, argus,
                                                                    monkeypatch):
    """Issue 37: nlp queued a job and has no loop; once it fits, nobody starts it, and it held the GPUs
    against every team behind it until nlp applied again. Past the grace it keeps its place, holds nothing,
    and rl's job starts. Its teams are named as no other test's are: Ray keeps their runs for the session, and
    another test's bare root under a workspace Ray lists runs of is distrusted as unmounted (reconcile.plan.root)."""
    from reconcile.plan import queue as plan_queue

    monkeypatch.setattr(plan_queue, "AWAY_GRACE", 8.0)  # ten minutes in the product
    vision, nlp, rl = (team(tmp_path, name, gpu_cluster, shared) for name in ("away-vision", "away-nlp", "away-rl"))
    gpu_job(vision, shared, "hold", seconds=4)
    gpu_job(nlp, shared, "train")
    gpu_job(rl, shared, "eval")
    try:
        assert argus("apply", vision.root, "--auto-approve").code == 0 and active(vision) == ["hold"]
        queued = argus("apply", nlp.root, "--auto-approve")
        assert queued.code == 0 and "queued #1 on local" in queued.out, queued.out
        confirmed = time.monotonic()
        until(lambda: not active(vision), "vision's run ended", 60)
        behind = argus("apply", rl.root, "--auto-approve")  # nlp's entry fits now: within the grace it holds
        if time.monotonic() - confirmed < 8.0:
            assert behind.code == 0 and active(rl) == [] and "after away-nlp/train, which fit now" in behind.out, \
                behind.out
        time.sleep(max(0.0, confirmed + 9.0 - time.monotonic()))
        started = argus("apply", rl.root, "--auto-approve")
        assert started.code == 0 and active(rl) == ["eval"], started.out + started.err
        shown = argus("queue", rl.root)
        assert "away-nlp/train" in shown.out and "has not confirmed it" in shown.out, shown.out
        assert active(nlp) == []  # nobody started nlp's job for it: it waits for its team
    finally:
        stop_all(gpu_cluster.address, vision, nlp, rl)
