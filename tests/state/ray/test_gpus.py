"""Which GPUs each run uses (state.ray.gpus), from plain data in Ray 2.60's own shapes: what a hostile or broken
dashboard answers is unknown, never a number argus made up, and another job's processes never count as a run's."""

from __future__ import annotations

import json
import time

from state.observed import ClusterState, RayJob
from state.ray.gpu_read import read_cluster
from state.ray.gpus import MAX_ALL_GPUS, MAX_PROCESSES, MIB, driver_pid, node_gpus, use_by_run

NODE, OTHER_NODE = "ab" * 28, "cd" * 28
LABELS = {"argus.workspace": "team-a", "argus.job": "train", "argus.spec_hash": "0" * 64, "argus.attempt": "1",
          "argus.commit": "c", "argus.plan": "p"}


def _summary(*nodes: dict) -> dict:
    return {"result": True, "msg": "Node summary fetched.", "data": {"summary": list(nodes)}}


def _node(node_id: str, *gpus: dict) -> dict:
    return {"raylet": {"nodeId": node_id, "state": "ALIVE"}, "gpus": list(gpus), "hostname": "h"}


def _gpu(index: int, util, pids=(), used=1024, total=81920) -> dict:
    return {"index": index, "name": "NVIDIA H20", "uuid": f"GPU-{index}", "utilizationGpu": util,
            "memoryUsed": used, "memoryTotal": total,
            "processesPids": [{"pid": p, "gpuMemoryUsage": 512, "gpuUtilization": None} for p in pids]}


def _job(sid="team-a-train-1", ray_id="02000000", driver=None, status="RUNNING") -> RayJob:
    from specs.workloads.submission import parse_labels

    labels = dict(LABELS)
    if parse_labels(labels) is None:  # labels must be argus's for the run to count
        raise AssertionError("test labels are not argus's")
    return RayJob(submission_id=sid, status=status, metadata=labels, ray_job_id=ray_id, driver_pid=driver,
                  driver_node_id=NODE)


def _actor(pid, job_id="02000000", node=NODE) -> dict:
    return {"actor_id": "a", "job_id": job_id, "pid": pid, "node_id": node, "state": "ALIVE"}


def test_a_run_gets_the_gpus_its_driver_and_actors_are_on_and_nothing_else():
    body = _summary(_node(NODE, _gpu(0, 90, [100]), _gpu(1, 80, [200]), _gpu(2, 70, [300])),
                    _node(OTHER_NODE, _gpu(0, 60, [200])))  # pid 200 on another node is another process
    gpus = node_gpus(body)
    use = use_by_run("c", [_job(driver=100)], gpus, [_actor(200), _actor(300, job_id="03000000")])
    run = use.runs["team-a-train-1"]
    assert [(g.node_id, g.index) for g in run.gpus] == [(NODE, 0), (NODE, 1)]
    assert run.utilization == 85.0
    assert run.memory_used == 2 * 1024 * MIB and run.memory_total == 2 * 81920 * MIB
    assert use.busy == 4 and use.busy_by_workspace() == {"team-a": 2}


def test_hostile_gpu_rows_are_unknown_not_numbers():
    rows = [_gpu(0, float("nan"), [1]), _gpu(1, -5, [1]), _gpu(2, 250, [1]), _gpu(3, "90", [1]),
            _gpu(4, True, [1]), {**_gpu(5, 50, [1]), "memoryUsed": -1, "memoryTotal": 2**60},
            {**_gpu(6, 50), "index": "x"}, "not a gpu", {**_gpu(7, 50), "processesPids": "everything"},
            {**_gpu(8, 50), "processesPids": [{"pid": -1}, {"pid": 2**40}, {"pid": "7"}, {"pid": True}, "x"]}]
    gpus = {g.index: g for g in node_gpus(_summary(_node(NODE, *rows)))}
    assert [gpus[i].utilization for i in range(5)] == [None] * 5
    assert gpus[5].utilization == 50.0 and gpus[5].memory_used == 0 and gpus[5].memory_total == 0
    assert 6 not in gpus and gpus[7].pids == frozenset()
    assert gpus[8].pids == frozenset({7})  # a decimal string is how Ray itself sends the driver's pid
    assert not any(g.busy for i, g in gpus.items() if g.utilization is None)


def test_answers_of_another_shape_are_none_and_bad_nodes_are_left_out():
    for body in (None, [], {"data": []}, {"data": {"summary": "x"}}, "<html>login</html>"):
        assert node_gpus(body) is None
    bad_nodes = [{"raylet": {"nodeId": "../../x"}, "gpus": [_gpu(0, 50)]}, {"raylet": "x", "gpus": []},
                 {"gpus": [_gpu(0, 50)]}, {"raylet": {"nodeId": NODE}, "gpus": {"0": _gpu(0, 50)}}, 7]
    assert node_gpus(_summary(*bad_nodes)) == ()


def test_a_huge_answer_is_read_only_up_to_the_bounds():
    many = _node(NODE, *[_gpu(i, 50, list(range(1, 200))) for i in range(1000)])  # 199 > MAX_PROCESSES
    started = time.monotonic()
    gpus = node_gpus(_summary(many, *[many] * 20_000))
    assert len(gpus) == MAX_ALL_GPUS and all(len(g.pids) == MAX_PROCESSES for g in gpus)
    assert len({g.index for g in gpus}) == 64
    assert time.monotonic() - started < 5  # a forged answer costs a turn a bounded moment


def test_pids_of_another_job_and_runs_not_argus_s_get_no_gpu():
    gpus = node_gpus(_summary(_node(NODE, _gpu(0, 99, [100]))))
    theirs = RayJob(submission_id="by-hand", status="RUNNING", ray_job_id="03000000", driver_pid=100,
                    driver_node_id=NODE)  # no argus labels: never a run of argus, whatever it holds
    use = use_by_run("c", [_job(driver=None), theirs], gpus, [_actor(100, job_id="03000000")])
    assert use.runs["team-a-train-1"].gpus == () and "by-hand" not in use.runs
    assert use.runs["team-a-train-1"].utilization is None  # no GPU: unknown, not idle
    ended = use_by_run("c", [_job(driver=100, status="SUCCEEDED")], gpus, [])
    assert ended.runs == {}


def test_driver_pid_is_read_as_ray_sends_it():
    assert driver_pid({"id": "01000000", "node_ip_address": "10.0.0.1", "pid": "4242"}) == 4242
    assert [driver_pid(v) for v in (None, "4242", {"pid": "-1"}, {"pid": "1e9"}, {"pid": 99_999_999})] == [None] * 5


class _Client:
    """A client whose every answer is given: what a dashboard without the endpoint, or a broken one, says."""

    def __init__(self, *answers) -> None:
        self.answers, self.asked = list(answers), []

    def read_once(self, endpoint: str):
        self.asked.append(endpoint)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _state() -> ClusterState:
    return ClusterState(name="c", address="http://x", session_name="", ray_version="", nodes=(), jobs=(_job(),))


def test_a_dashboard_without_the_endpoint_or_answering_garbage_is_unknown_never_an_error():
    from state.ray.client import ClusterRequestFailed

    for answers in ([ClusterRequestFailed("Ray cluster 'c' refused to GET /nodes: 404", status=404)],
                    [{"data": {"summary": 3}}], [_summary(), {"data": "x"}], [ZeroDivisionError()],
                    [_summary(), ClusterRequestFailed("too large")]):
        client = _Client(*answers)
        use = read_cluster(client, _state())
        assert not use.known and use.problem and use.runs == {}, answers
        assert len(client.asked) <= 2
    fine = read_cluster(_Client(_summary(), {"data": {"result": {"result": [], "total": 0}}}), _state())
    assert fine.known and fine.runs["team-a-train-1"].gpus == ()
    json.dumps(fine.problem)
