"""What Ray holds for each job, read from the state API (state.ray.holds): on the real `gpu_cluster`, and
the answers' hostile shapes from plain data."""

from __future__ import annotations

import sys
import textwrap

from state.observed import Hold, RayJob
from state.ray.client import RayClient
from state.ray.holds import holds_by_run, listing
from tests.support.cluster import sdk, until

JOB = textwrap.dedent("""
    import time, ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    ray.init()
    group = placement_group([{"GPU": 1, "CPU": 1}], strategy="STRICT_PACK")
    ray.get(group.ready())
    @ray.remote(num_gpus=1)
    class Holder:
        def ping(self):
            return 1
    inside = Holder.options(scheduling_strategy=PlacementGroupSchedulingStrategy(group)).remote()
    outside = Holder.options(num_cpus=0).remote()
    ray.get([inside.ping.remote(), outside.ping.remote()])
    print("holding", 40 + 2, flush=True)
    time.sleep(300)
    """)


def test_a_jobs_groups_entrypoint_and_actors_are_read_on_the_nodes_ray_holds_them(gpu_cluster):
    sid = "holds-read-1"
    sdk(gpu_cluster.address).submit_job(entrypoint=f"{sys.executable} -c '{JOB}'", submission_id=sid,
                                        entrypoint_num_cpus=0.5, entrypoint_resources={"worker_node": 1.0})
    try:
        client = RayClient("local", gpu_cluster.address)
        until(lambda: "holding 42" in sdk(gpu_cluster.address).get_job_logs(sid), "the job holds", timeout=120)
        state = client.snapshot()
        worker = next(n.node_id for n in state.nodes if n.resources.get("GPU"))
        held = {(h.kind, h.node_id): h.resources for h in state.holds[sid]}
        assert held == {("group", worker): {"GPU": 1.0, "CPU": 1.0},  # the group, not its actor inside it
                        ("driver", worker): {"CPU": 0.5, "worker_node": 1.0},
                        ("actor", worker): {"GPU": 1.0}}, state.holds
        assert state.holds_problem == ""
        assert client.admission_view().holds == state.holds  # what apply decides from under the lock
    finally:
        sdk(gpu_cluster.address).stop_job(sid)  # and ended before the next test: its GPUs are Ray's in use
        until(lambda: sdk(gpu_cluster.address).get_job_status(sid).value not in ("PENDING", "RUNNING"),
              "the job stopped", timeout=60)


def _job(status: str = "RUNNING") -> RayJob:
    return RayJob(submission_id="s1", status=status, ray_job_id="02000000")


def test_hostile_answers_hold_nothing_they_do_not_say_plainly():
    node = "ab" * 28
    good = {"creator_job_id": "02000000", "bundles": [{"node_id": node, "unit_resources": {"GPU": 1.0}}]}
    forged = [{"creator_job_id": "02000000", "bundles": "x"},
              {"creator_job_id": "02000000", "bundles": [{"node_id": "../etc", "unit_resources": {"GPU": 8}}]},
              {"creator_job_id": "02000000", "bundles": [{"node_id": node, "unit_resources": {
                  "GPU": float("nan"), "CPU": -4, "bad name!": 1, "TPU": True}}]},
              {"creator_job_id": ["02000000"], "bundles": []}, "not an object"]
    rows = [r for r in forged if isinstance(r, dict)]
    assert holds_by_run([_job()], [good, *rows], []) == {"s1": (Hold(kind="group", node_id=node,
                                                                      resources={"GPU": 1.0}),)}
    assert holds_by_run([_job("SUCCEEDED")], [good], []) == {}  # an ended job holds nothing
    supervisor = {"state": "ALIVE", "node_id": node, "name": "_ray_internal_job_actor_s1",
                  "ray_namespace": "SUPERVISOR_ACTOR_RAY_NAMESPACE", "required_resources": {"CPU": 1.0}}
    elsewhere = {**supervisor, "name": "_ray_internal_job_actor_unknown"}
    dead = {**supervisor, "state": "DEAD"}
    assert holds_by_run([_job()], [], [supervisor, elsewhere, dead]) == {
        "s1": (Hold(kind="driver", node_id=node, resources={"CPU": 1.0}),)}


def test_an_answer_cut_short_says_so_and_one_of_another_shape_is_none():
    body = {"data": {"result": {"result": [{}, {}], "total": 5, "num_after_truncation": 5, "num_filtered": 3}}}
    assert listing(body) == ([{}, {}], False)
    whole = {"data": {"result": {"result": [{}], "total": 1, "num_after_truncation": 1, "num_filtered": 1}}}
    assert listing(whole) == ([{}], True)
    assert listing({"data": {"result": {"result": {}}}}) is None and listing([]) is None
