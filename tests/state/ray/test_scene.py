"""Ray's side of an incident record, read from a hostile dashboard on loopback (no cluster needed: every
answer here is one a dashboard anyone can submit to could give): rows of the wrong shape left out, text
plain and cut, at most MAX_ROWS kept, a refused read said in `problems`, never raised."""

from __future__ import annotations

import json

import pytest

from state.ray import scene
from state.ray.client import RayClient
from tests.support.hostile_dashboard import HostileDashboard

JOB = "02000000"


@pytest.fixture
def dashboard():
    hostile = HostileDashboard()
    yield hostile
    hostile.close()


def _listing(rows: list) -> tuple[int, str]:
    return 200, json.dumps({"data": {"result": {"result": rows, "total": len(rows)}}})


def test_hostile_task_rows_are_cleaned_bounded_and_never_raise(dashboard):
    rows = ["not a row", 7, *({"task_id": f"t{i}", "name": "\x1b[2Jshard", "error_message": "E" * 10_000,
                               "worker_pid": 2**70} for i in range(200))]
    tasks = "/api/v0/tasks?detail=true&limit=50" + scene._filters(("job_id", JOB), ("state", "FAILED"))
    dashboard.answers[tasks] = _listing(rows)
    found, problems = scene.failed_tasks(RayClient("c", dashboard.address, timeout=5), JOB)
    assert len(found) == scene.MAX_ROWS and "\x1b" not in found[0]["name"]
    assert len(found[0]["error_message"]) <= scene.MAX_TEXT and isinstance(found[0]["worker_pid"], str)
    assert problems and "the first 50 are kept" in problems[0]


def test_a_refused_or_misshapen_answer_is_a_problem_not_an_error(dashboard):
    client = RayClient("c", dashboard.address, timeout=5)
    actors = "/api/v0/actors?detail=true&limit=50" + scene._filters(("job_id", JOB), ("state", "DEAD"))
    dashboard.answers[actors] = (200, json.dumps({"data": ["nope"]}))
    found, problems = scene.dead_actors(client, JOB)
    assert found == [] and "cannot read" in problems[0]
    view, problems = scene.ray_view(client, "ws.train.abc.1")  # 404 here
    assert view == {} and problems and problems[0].startswith("job row:")
    assert scene.profiling(client) is None


def test_processes_take_only_the_runs_own_with_sane_pids_and_nodes(dashboard):
    node = "ab" * 28
    rows = [{"name": "_ray_internal_job_actor_ws.a.1", "pid": 10, "node_id": node},
            {"name": "_ray_internal_job_actor_ws.other.1", "pid": 11, "node_id": node},
            {"class_name": "Rank", "job_id": JOB, "pid": -1, "node_id": node},
            {"class_name": "Rank", "job_id": JOB, "pid": 12, "node_id": "../../etc"},
            {"class_name": "Rank", "job_id": JOB, "pid": 13, "node_id": node}]
    dashboard.answers["/api/v0/actors?detail=true&limit=50" + scene._filters(("state", "ALIVE"))] = _listing(rows)
    found = scene.processes(RayClient("c", dashboard.address, timeout=5), "ws.a.1", JOB,
                            {"pid": "14", "node_ip_address": "127.0.0.2&pid=1"})
    assert [pid for pid, *_ in found] == [13, 10]
