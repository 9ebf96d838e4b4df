"""The queue made visible: `argus queue`, `argus status --json`, the serve page and /metrics.

Views are tested on plain data; two tests on a real cluster with 3 GPUs (one shared by two workspaces).
"""

from __future__ import annotations

import itertools
import json

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconcile.model import Action, Change, Plan, QueueInfo
from reconcile.report import TurnReport
from reconcile.serve.metrics import Metrics
from reconcile.views.html import render_page
from reconcile.views.machine import status_json
from reconcile.views.queue import gpus_held, queue_json, queues_of, render, view
from state.observed import ClusterQueue, ClusterState, LedgerEntry, Node, ObservedState, RayJob, RunStatus
from tests.support.cluster import jobs_of, until
from tests.support.gpu_queue import stop_all, team

NOW = 1_750_000_000.0
HASH = "ab" * 32


def entry(workspace: str, job: str, gpus: float, priority: int = 0, arrived: float = NOW - 600,
          admitted: float | None = None, seen: float = NOW - 10) -> LedgerEntry:
    return LedgerEntry(workspace=workspace, job=job, cluster="local", submission_id=f"{workspace}.{job}.1",
                       spec_hash=HASH, priority=priority, arrived=arrived, seen=seen, admitted=admitted,
                       spread={"GPU": gpus})


def cluster(*jobs: tuple[str, RunStatus], gpus: float = 3.0) -> ClusterState:
    worker = Node(node_id="w", ip="10.0.0.2", is_head=False, resources={"GPU": gpus, "CPU": 8.0})
    return ClusterState(name="local", address="http://10.0.0.1:8265", session_name="s", ray_version="2",
                        nodes=(worker,), jobs=tuple(RayJob(submission_id=sid, status=st, metadata=_labels(sid))
                                                    for sid, st in jobs))


def _labels(sid: str) -> dict[str, str]:
    """As argus labels its runs (an entry holds only a Ray job labelled as its own run)."""
    workspace, job, attempt = sid.split(".")
    return {"argus.workspace": workspace, "argus.job": job, "argus.spec_hash": HASH, "argus.attempt": attempt}


def busy_queue(**extra: object) -> ClusterQueue:
    """team-a's a1 runs on 2 of 3 GPUs; a2 (priority 0) and team-b's b1 (priority 5) wait."""
    entries = (entry("team-a", "a1", 2, admitted=NOW - 300), entry("team-a", "a2", 2, arrived=NOW - 500),
               entry("team-b", "b1", 2, priority=5, arrived=NOW - 100),
               entry("team-a", "done", 1, admitted=NOW - 5000),  # its run ended: holds nothing
               entry("team-c", "gone", 1, seen=NOW - 7200))  # nobody confirmed it for two hours: expired
    return ClusterQueue(entries=entries, **extra)


RUNNING = cluster(("team-a.a1.1", RunStatus.RUNNING), ("team-a.done.1", RunStatus.SUCCEEDED))


def test_the_whole_queue_holds_runs_and_orders_every_workspace_waiting_entry():
    shown = view(RUNNING, busy_queue(), NOW)
    assert [(h.workspace, h.job, h.gpus, h.admitted) for h in shown.held] == [("team-a", "a1", 2.0, NOW - 300)]
    assert [(w.position, w.workspace, w.job) for w in shown.waiting] == [(1, "team-b", "b1"), (2, "team-a", "a2")]
    assert shown.waiting[0].reason == "needs 2 GPU, 1 GPU free"
    assert shown.waiting[1].reason == "needs 2 GPU, 1 GPU free; 1 ahead; waits behind team-b/b1, which must not " \
                                      "be delayed"
    assert shown.waiting[1].demand == "2 GPU" and shown.gpus_held == {"team-a": 2.0} and shown.gpus == 3.0


def test_a_waiting_entry_that_fits_now_is_next_and_says_who_starts_it():
    idle = view(cluster(), ClusterQueue(entries=(entry("team-b", "b1", 2),)), NOW)
    [row] = idle.waiting
    assert row.position is None and row.reason == "fits now: its workspace's next apply or serve turn starts it"
    assert "next  team-b/b1" in render([idle])


def test_quota_reasons_and_the_quotas_are_shown():
    capped = view(RUNNING, busy_queue(quotas={"team-a": {"GPU": 2.0}}), NOW)
    a2 = next(w for w in capped.waiting if w.job == "a2")
    assert a2.reason == "over the quota of workspace team-a: GPU 4 of 2 (2 held)"
    assert "  Quotas (the hand-edited .argus/quotas.yaml, not reviewed: its admin's Quotas replace it): team-a GPU 2" \
        in render([capped]).splitlines()


def test_render_lists_held_runs_then_the_queue_then_gpus_per_workspace():
    text = render([view(RUNNING, busy_queue(), NOW)])
    assert text.splitlines() == [
        "Cluster local (3 GPU on its alive nodes)",
        "  Holding resources:",
        "    WORKSPACE  JOB  SUBMISSION ID  GPUS  PRIORITY  ADMITTED",
        "    team-a     a1   team-a.a1.1    2     0         2025-06-15 15:01:40 UTC",
        "  Waiting, in queue order:",
        "    #  WORKSPACE/JOB  GPUS  DEMAND  PRIORITY  WAITING SINCE            REASON",
        "    1  team-b/b1      2     2 GPU   5         2025-06-15 15:05:00 UTC  needs 2 GPU, 1 GPU free",
        "    2  team-a/a2      2     2 GPU   0         2025-06-15 14:58:20 UTC  needs 2 GPU, 1 GPU free; 1 ahead; "
        "waits behind team-b/b1, which must not be delayed",
        "  GPUs held per workspace: team-a 2"]


def test_json_has_every_cluster_and_says_which_could_not_be_read():
    observed = ObservedState(clusters={"local": RUNNING}, records={}, queues={"local": busy_queue()},
                             unreachable={"down": "did not answer within 10 s"}, observed_at=NOW)
    data = json.loads(queue_json(queues_of(observed, ["down", "local", "elsewhere"])))
    down, local, elsewhere = data["clusters"]
    assert down["unseen"] == "cluster not read: did not answer within 10 s" and down["waiting"] == []
    assert "shared root is not on this machine" in elsewhere["unseen"]
    assert [(w["position"], w["workspace"], w["job"], w["priority"]) for w in local["waiting"]] == \
        [(1, "team-b", "b1", 5), (2, "team-a", "a2", 0)]
    assert local["held"] == [{"workspace": "team-a", "job": "a1", "submission_id": "team-a.a1.1", "gpus": 2.0,
                              "priority": 0, "admitted_at": "2025-06-15T15:01:40+00:00"}]
    assert local["gpus_held"] == {"team-a": 2.0} and local["waiting"][0]["waiting_since"] == "2025-06-15T15:05:00+00:00"
    assert gpus_held(observed) == {"local": {"team-a": 2.0}}


def queued_plan(reason: str = "needs 2 GPU, 1 GPU free; 1 ahead") -> Plan:
    info = QueueInfo(cluster="local", submission_id="team-a.a2.1", spec_hash=HASH, attempt=1, demand="2 GPU",
                     gpus=2.0, priority=0, position=2, reason=reason)
    return Plan(workspace="team-a", changes=(
        Change(address="job.a1", action=Action.NOOP, reason="running"),
        Change(address="job.a2", action=Action.QUEUE, reason=f"queued #2 on local: {reason}", queue=info)))


def test_status_json_has_each_queued_jobs_place_and_the_gpus_held():
    data = json.loads(status_json(queued_plan(), {"a1", "a2"}, gpus_held={"local": {"team-a": 2.0}}))
    a1, a2 = data["jobs"]
    assert "queue" not in a1 and a2["sync"] == "queued #2"
    assert a2["queue"] == {"cluster": "local", "position": 2, "reason": "needs 2 GPU, 1 GPU free; 1 ahead",
                           "demand": "2 GPU", "gpus": 2.0, "priority": 0}
    assert data["gpus_held"] == {"local": {"team-a": 2.0}}


def report(plan: Plan | None, held: dict) -> TurnReport:
    return TurnReport(workspace="team-a", started_at=NOW - 1, finished_at=NOW, ok=True, interval=30.0, sync="off",
                      plan=plan, gpus_held=held)


def test_the_page_shows_queued_jobs_and_gpus_held_with_hostile_text_escaped():
    page = render_page(report(queued_plan("<script>x</script> waits"), {"local": {"team-a": 2.0, "<b>": 1.0}}),
                       now=NOW)
    assert "<h2>Admission queue</h2>" in page and "<td>#2</td>" in page
    assert "&lt;script&gt;x&lt;/script&gt; waits" in page and "<script>" not in page
    assert "<h2>GPUs held per workspace</h2>" in page and "<td>team-a</td><td>2</td>" in page
    assert "<td>&lt;b&gt;</td>" in page
    assert "Admission queue" not in render_page(report(None, {}), now=NOW)


def test_metrics_gauge_waiting_jobs_positions_and_gpus_held_and_drop_what_is_gone():
    metrics = Metrics()
    metrics.record(report(queued_plan(), {"local": {"team-a": 2.0, "team-b": 1.0}}))
    first = samples(metrics)
    metrics.record(report(Plan(workspace="team-a", changes=()), {"local": {}}))
    second = samples(metrics)
    team_a = ("workspace", "team-a")
    assert first[("argus_queue_waiting", (("cluster", "local"), team_a))] == 1
    assert first[("argus_queue_position", (("cluster", "local"), ("job", "a2"), team_a))] == 2
    assert first[("argus_gpus_held", (("cluster", "local"), ("workspace", "team-b")))] == 1
    assert second[("argus_queue_waiting", (("cluster", "local"), team_a))] == 0
    assert not [key for key in second if key[0] in ("argus_queue_position", "argus_gpus_held")]


def samples(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_two_workspaces_on_one_shared_root_see_one_queue(gpu_cluster, shared, tmp_path, argus):
    a, b = team(tmp_path, "view-a", gpu_cluster, shared), team(tmp_path, "view-b", gpu_cluster, shared)
    holding(a, "a1")
    holding(a, "a2")
    holding(b, "b1", priority=5)
    try:
        for ws in (a, b):
            applied = argus("apply", ws.root, "--auto-approve")
            assert applied.code == 0, applied.out + applied.err
        until(lambda: [j.status.value for j in jobs_of(a.address, "view-a")] == ["RUNNING"], "a1 runs")
        shown = argus("queue", a.root)
        assert shown.code == 0, shown.out + shown.err
        lines = [line.split() for line in shown.out.splitlines()]
        assert lines[3][:2] == ["view-a", "a1"] and lines[3][3] == "2"
        assert [row[:2] for row in lines if row[:1] in (["1"], ["2"])] == [["1", "view-b/b1"], ["2", "view-a/a2"]]
        assert "  GPUs held per workspace: view-a 2" in shown.out.splitlines()
        as_json = json.loads(argus("queue", b.root, "--json").out)["clusters"][0]
        assert [(w["position"], w["workspace"], w["job"]) for w in as_json["waiting"]] == \
            [(1, "view-b", "b1"), (2, "view-a", "a2")]

        status = argus("status", a.root, "--json")
        data = json.loads(status.out)
        a2 = next(row for row in data["jobs"] if row["address"] == "job.a2")
        assert a2["sync"] == "queued #2" and a2["queue"]["position"] == 2 and a2["queue"]["gpus"] == 2.0
        assert a2["queue"]["reason"] == ("needs 2 GPU (and 0.5 CPU, 1 worker_node), 1 GPU free; 1 ahead; waits "
                                         "behind view-b/b1, which must not be delayed")
        assert data["gpus_held"] == {"local": {"view-a": 2.0}}
    finally:
        stop_all(gpu_cluster.address, a, b)


def holding(ws, name: str, priority: int = 0) -> None:
    """A job that holds 2 GPUs until it is stopped."""
    ws.write(f"jobs/{name}.yaml", f"""
        kind: Job
        name: {name}
        cluster: local
        workload: command
        entrypoint: [python3, -c, "import time; time.sleep(600)"]
        demand: {{GPU: 2}}
        priority: {priority}
        """)


def test_a_queued_job_shows_its_argv_in_every_plan_format_as_a_submitted_one(gpu_cluster, shared, tmp_path,
                                                                            argus):
    """argus serve submits a queued job later, without another plan: the plan that queues it is its review."""
    ws = team(tmp_path, "argv-queued", gpu_cluster, shared)
    for name in ("j1", "j2"):  # 2 GPUs each of 3: j1 (first by name) starts, j2 waits
        ws.write(f"jobs/{name}.yaml", f"""
            kind: Job
            name: {name}
            cluster: local
            workload: command
            entrypoint: [python3, -c, "print('it''s a, b $HOME')"]
            demand: {{GPU: 2}}
            """)
    argv = ["python3", "  -c", "  print('it''s a, b $HOME')"]
    human, markdown = (argus("plan", ws.root, "--format", f) for f in ("human", "markdown"))
    as_json = argus("plan", ws.root, "--format", "json")
    assert (human.code, markdown.code, as_json.code) == (0, 0, 0), human.out + human.err
    assert "~ job.j2  (queue: queued #1 on local" in human.out and "+ job.j1  (submit" in human.out
    for text in (human.out, markdown.out):
        assert entrypoint_shown(text, "job.j2  (queue") == entrypoint_shown(text, "job.j1  (submit") == argv
    changes = {c["address"]: c for c in json.loads(as_json.out)["changes"]}
    j1, j2 = changes["job.j1"], changes["job.j2"]
    assert j2["action"] == "queue" and j2["queue"]["position"] == 1 and j2["queue"]["wanted"] == "submit"
    assert j2["after"]["entrypoint"] == j1["after"]["entrypoint"] == j1["steps"][0]["submission"]["entrypoint"]


def entrypoint_shown(text: str, head: str) -> list[str]:
    """The argv lines under the change whose head line contains `head`, unindented to its first item;
    [] when that change shows no entrypoint."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if head in line)
    block = list(itertools.takewhile(lambda line: _indent(line) > _indent(lines[start]), lines[start + 1:]))
    at = next((i for i, line in enumerate(block) if line.strip() == "entrypoint:"), None)
    if at is None:
        return []
    shown = list(itertools.takewhile(lambda line: _indent(line) > _indent(block[at]), block[at + 1:]))
    return [line[_indent(shown[0]):] for line in shown]


def _indent(line: str) -> int:
    """A blank line ends every block."""
    return len(line) - len(line.lstrip()) if line.strip() else -1
