"""Admission decisions from plain data: whole-demand, by shape, in order, backfill that never delays the head."""

from __future__ import annotations

from reconcile.plan.admission import decide, never_fits
from reconcile.plan.placement import Demand, Entry

WORKER = {"GPU": 3.0, "CPU": 8.0}


def gpus(n: float, nodes: int = 1, ws: str = "a", key: str = "", priority: int = 0, arrived: float = 0.0,
         admitted: bool = False) -> Entry:
    demand = Demand(bundles=tuple({"GPU": n} for _ in range(nodes)), driver={"CPU": 1.0})
    return Entry(key=key or f"{ws}/j{n}-{arrived}", workspace=ws, demand=demand, priority=priority, arrived=arrived,
                 admitted=admitted)


def starts(decisions) -> list[str]:
    return [d.key for d in decisions if d.start]


def test_three_jobs_of_two_gpus_on_three_gpus_start_one_at_a_time_in_order():
    queue = [gpus(2, key=f"a/j{i}", arrived=i) for i in (1, 2, 3)]
    decisions = decide(queue, [WORKER])
    assert starts(decisions) == ["a/j1"]
    waiting = {d.key: d for d in decisions if not d.start}
    assert waiting["a/j2"].position == 1 and "needs 2 GPU, 1 GPU free" in waiting["a/j2"].reason
    assert waiting["a/j3"].position == 2 and "1 ahead" in waiting["a/j3"].reason
    running = [gpus(2, key="a/j1", admitted=True), *queue[1:]]
    assert starts(decide(running, [WORKER])) == []  # the admitted run holds its whole demand


def test_priority_goes_first_then_arrival():
    queue = [gpus(2, key="a/early", arrived=1), gpus(2, key="b/urgent", ws="b", arrived=5, priority=10)]
    assert starts(decide(queue, [WORKER])) == ["b/urgent"]


def test_shape_not_total_two_node_jobs_never_hold_one_node_each():
    nodes = [{"GPU": 2.0, "CPU": 8.0}, {"GPU": 2.0, "CPU": 8.0}]
    first, second = gpus(2, nodes=2, key="a/x", arrived=1), gpus(2, nodes=2, key="a/y", arrived=2)
    assert starts(decide([first, second], nodes)) == ["a/x"]
    assert never_fits(gpus(3, nodes=2).demand, nodes) and not never_fits(first.demand, nodes)
    assert never_fits(gpus(4).demand, [WORKER])


def test_backfill_only_when_it_does_not_delay_the_head():
    running = gpus(2, key="a/run", admitted=True)
    head = gpus(3, key="a/big", arrived=1)
    small = gpus(1, key="a/small", arrived=2)
    # the head needs all 3 GPUs once the run ends: a 1-GPU job would hold one of them, so it waits
    decisions = decide([running, head, small], [WORKER])
    assert starts(decisions) == []
    assert "waits behind a/big" in next(d.reason for d in decisions if d.key == "a/small")
    two_nodes = [WORKER, {"CPU": 8.0, "GPU": 1.0}]  # a GPU the head can never use: backfill goes there
    assert starts(decide([running, head, small], two_nodes)) == ["a/small"]


def test_a_quota_holds_a_workspace_to_its_share():
    queue = [gpus(2, key="a/one", arrived=1), gpus(1, key="a/two", arrived=2)]
    decisions = decide(queue, [WORKER, WORKER], quotas={"a": {"GPU": 2}})
    assert starts(decisions) == ["a/one"]
    assert "over the quota of workspace a: GPU 3 of 2 (2 held)" in decisions[1].reason


def test_other_work_counts_against_free_capacity():
    assert starts(decide([gpus(2)], [WORKER], in_use=[{"GPU": 2.0}])) == []


def test_the_head_preempts_the_fewest_lower_priority_preemptible_runs_it_needs():
    node = {"GPU": 4.0}
    low = Entry("a/low", "a", Demand(spread={"GPU": 2.0}), priority=0, arrived=1, admitted=True, preemptible=True)
    later = Entry("a/later", "a", Demand(spread={"GPU": 2.0}), priority=0, arrived=2, admitted=True, preemptible=True)
    urgent = Entry("b/urgent", "b", Demand(spread={"GPU": 2.0}), priority=10, arrived=3)
    small = Entry("b/small", "b", Demand(spread={"GPU": 1.0}), priority=0, arrived=4)
    decisions = {d.key: d for d in decide([low, later, urgent, small], [node])}
    assert decisions["b/urgent"].preempts == ("a/later",)  # one is enough: the most recently admitted
    assert not decisions["b/urgent"].start and not decisions["b/small"].start  # nothing backfills the freed room
    protected = Entry("a/low", "a", Demand(spread={"GPU": 4.0}), priority=0, arrived=1, admitted=True)
    assert decide([protected, urgent], [node])[0].preempts == ()  # not preemptible: never stopped
    higher = Entry("a/low", "a", Demand(spread={"GPU": 4.0}), priority=20, admitted=True, preemptible=True)
    assert decide([higher, urgent], [node])[0].preempts == ()  # only lower priorities give way
    whole = Entry("c/whole", "c", Demand(spread={"GPU": 4.0}), priority=10, arrived=3)
    assert decide([low, later, whole], [node])[0].preempts == ("a/later", "a/low")  # both needed, both stopped
