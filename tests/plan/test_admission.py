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


# --- what Ray holds (issue 36): Ray's reservations, on their nodes; a ledger entry only until Ray holds ----------

def test_what_ray_holds_counts_on_the_node_ray_holds_it_on():
    """The demand view alone would place the run's 2 GPUs on the first node and start a 2-GPU job on the
    second; Ray holds them on the second (its placement group), so the job goes on the first."""
    nodes = [{"GPU": 2.0, "CPU": 8.0}, {"GPU": 2.0, "CPU": 8.0}]
    running = Entry("a/run", "a", Demand(), admitted=True, holds=((1, {"GPU": 2.0}),))
    assert starts(decide([running, gpus(2, key="a/next")], nodes)) == ["a/next"]
    both = Entry("a/run", "a", Demand(), admitted=True, holds=((0, {"GPU": 1.0}), (1, {"GPU": 1.0})))
    assert starts(decide([both, gpus(2, key="a/next")], nodes)) == []  # 1 GPU free on each: no whole node


def test_what_ray_holds_counts_against_the_quota_and_is_freed_by_preemption():
    node = {"GPU": 4.0}
    running = Entry("a/run", "a", Demand(), admitted=True, preemptible=True, holds=((0, {"GPU": 3.0}),))
    decisions = decide([running, gpus(1, key="a/one", arrived=1)], [node], quotas={"a": {"GPU": 3.0}})
    assert "over the quota of workspace a: GPU 4 of 3 (3 held)" in decisions[0].reason
    urgent = Entry("b/urgent", "b", Demand(spread={"GPU": 2.0}), priority=10)
    assert decide([running, urgent], [node])[0].preempts == ("a/run",)


def test_the_rest_of_a_demand_is_what_ray_does_not_hold_yet():
    from reconcile.plan.holdings import remainder
    from state.observed import Hold

    verl = Demand(bundles=({"GPU": 2.0, "CPU": 6.0}, {"GPU": 2.0, "CPU": 6.0}), driver={"CPU": 1.0},
                  pools=("global_pool", "global_pool"))
    group = Hold(kind="group", node_id="n1", resources={"GPU": 2.0, "CPU": 2.0})  # verl's own CPUs per GPU
    driver = Hold(kind="driver", node_id="n1", resources={"CPU": 1.0})
    assert remainder(verl, ()) == verl  # nothing held yet: the whole demand, by shape
    assert remainder(verl, (group, driver)) == Demand(bundles=({"GPU": 2.0, "CPU": 6.0},))  # one node to come
    both = (group, group.model_copy(update={"node_id": "n2"}), driver)
    assert remainder(verl, both) == Demand()  # all held: Ray's holds count, not the demand
    command = Demand(spread={"GPU": 2.0, "CPU": 0.5, "worker_node": 1.0})  # `demand: {GPU: 2}`, driver included
    entrypoint = Hold(kind="driver", node_id="n1", resources={"CPU": 0.5, "worker_node": 1.0})
    assert remainder(command, (entrypoint,)) == Demand(spread={"GPU": 2.0})  # GPUs Ray never reserves: still held


def _team_run(status: str, sid: str = "team.run.aaaaaaaaaaaa.1", workspace: str = "team", job: str = "run"):
    from state.observed import RayJob

    return RayJob(submission_id=sid, status=status, metadata={
        "argus.workspace": workspace, "argus.job": job, "argus.spec_hash": "0" * 64, "argus.attempt": "1"})


def _cluster(jobs=(), holds=None):
    from state.observed import ClusterState, Node

    node = Node(node_id="w", ip="127.0.0.3", is_head=False, resources=dict(WORKER))
    return ClusterState(name="c", address="http://x:1", session_name="s", ray_version="2.60.0", nodes=(node,),
                        jobs=tuple(jobs), holds=holds or {})


def _next(gpus_wanted: float = 2.0):
    from reconcile.model import Ask
    from reconcile.plan.queue import Want

    return Want(key="team/next", submission_id="team.next.bbbbbbbbbbbb.1", spec_hash="b" * 64,
                ask=Ask(job="next", spread={"GPU": gpus_wanted}))


def test_a_run_ray_lists_as_active_holds_its_known_demand_without_any_ledger_entry_or_record():
    """A job deleted the running run's ledger entry and record: Ray still runs it under the workspace's
    labels, so it holds the demand its spec implies; 2 + 2 GPUs are never promised on 3."""
    from reconcile.plan.queue import decide_cluster
    from state.observed import ClusterQueue

    cluster, nothing = _cluster([_team_run("RUNNING")]), ClusterQueue()
    spec = {"team/run": Demand(spread={"GPU": 2.0})}
    assert not decide_cluster("team", cluster, nothing, [_next()], 1000.0, known=spec)["team/next"].start
    assert decide_cluster("team", cluster, nothing, [_next(1.0)], 1000.0, known=spec)["team/next"].start
    from state.observed import Hold

    held = _cluster([_team_run("RUNNING", workspace="other")], {"team.run.aaaaaaaaaaaa.1": (
        Hold(kind="driver", node_id="w", resources={"GPU": 2.0, "CPU": 1.0}),)})
    assert not decide_cluster("team", held, nothing, [_next()], 1000.0)["team/next"].start  # Ray's holds alone


def test_a_replayed_entry_of_an_ended_run_holds_nothing_signed_or_not():
    """A genuine (signed) admitted entry put back after its run ended held its GPUs for ever: Ray lists
    the run as ended, or Ray does not list it at all (deleted) and its admission window is long past."""
    from reconcile.plan.queue import decide_cluster, held
    from state.observed import ClusterQueue, LedgerEntry

    replayed = LedgerEntry(workspace="other", job="run", cluster="c", submission_id="other.run.aaaaaaaaaaaa.1",
                           spec_hash="0" * 64, arrived=10.0, seen=10.0, admitted=10.0, submitted=11.0,
                           spread={"GPU": 3.0}, signed=True)
    queue, now = ClusterQueue(entries=(replayed,)), 100_000.0
    ended = _cluster([_team_run("SUCCEEDED", replayed.submission_id, "other")])
    for cluster in (ended, _cluster()):
        assert held(cluster, queue, now, set()) == []
        assert decide_cluster("team", cluster, queue, [_next()], now)["team/next"].start
    running = _cluster([_team_run("RUNNING", replayed.submission_id, "other")])
    assert [e.key for e in held(running, queue, now, set())] == ["other/run"]  # while Ray runs it, it holds


def test_the_demand_stamped_on_a_ray_job_reads_back_and_a_forged_one_of_another_shape_is_none():
    from reconcile.plan import demand_label

    bundles = ({"GPU": 8.0, "CPU": 24.0},) * 4 + ({"GPU": 2.0, "CPU": 6.0},)
    label = demand_label.stamped(bundles, {"CPU": 1.0}, {})
    assert len(label[demand_label.LABEL]) < 100  # a few dozen bytes: Ray's metadata stays small
    assert demand_label.read(label) == Demand(bundles=bundles, driver={"CPU": 1.0})
    assert demand_label.stamped((), {}, {}) == {}  # asks for nothing: no label
    for forged in ('{"b":[[1000,{"GPU":1}]]}', '{"s":{"GPU":1e400}}', '{"s":{"GPU":NaN}}', '{"x":1}', "[" * 600,
                   '{"b":[[1.5,{"GPU":1}]]}', '{"s":{"bad name!":1}}', '{"d":{"GPU":-1}}', "not json"):
        assert demand_label.read({demand_label.LABEL: forged}) is None, forged


def test_an_entry_a_job_shrank_never_frees_what_the_run_s_stamped_label_says_it_holds():
    """Without the key a job can rewrite a running command job's admitted entry to ask for nothing: the demand
    argus stamped on the Ray job (which no job can rewrite) still holds its 2 GPUs, so 2 more are not promised."""
    from reconcile.plan import demand_label
    from reconcile.plan.queue import decide_cluster
    from state.observed import ClusterQueue, LedgerEntry, RayJob

    run = _team_run("RUNNING", "other.run.aaaaaaaaaaaa.1", "other")
    stamped = RayJob(submission_id=run.submission_id, status="RUNNING",
                     metadata={**run.metadata, **demand_label.stamped((), {}, {"GPU": 2.0})})
    shrunk = LedgerEntry(workspace="other", job="run", cluster="c", submission_id=run.submission_id,
                         spec_hash="0" * 64, arrived=10.0, seen=10.0, admitted=10.0, submitted=11.0)
    queue = ClusterQueue(entries=(shrunk,))
    assert not decide_cluster("team", _cluster([stamped]), queue, [_next()], 100.0)["team/next"].start
    assert decide_cluster("team", _cluster([run]), queue, [_next()], 100.0)["team/next"].start  # no label: as before


def test_the_reason_names_the_real_blocker_and_who_is_ahead():
    """Issue 37: a CPU-only job blocked by the entries ahead was told it "needs ... 2 GPU free"."""
    def cpus(n: float, key: str, arrived: float) -> Entry:
        return Entry(key=key, workspace=key.split("/")[0], demand=Demand(bundles=(), driver={"CPU": n}),
                     priority=0, arrived=arrived)

    queue = [gpus(3, key="vision/a", arrived=1), gpus(3, key="vision/b", arrived=2), gpus(3, key="rl/train", arrived=3),
             cpus(4, "nlp/eval", 4)]
    waiting = {d.key: d for d in decide(queue, [{"GPU": 3.0, "CPU": 4.0}]) if not d.start}
    said = waiting["nlp/eval"].reason
    assert said.startswith("needs 4 CPU, 3 of 4 CPU free; after vision/a, which fit now; 2 ahead (rl/train)"), said
    assert "GPU free" not in said
    assert "waits behind vision/b" in said


def test_an_entry_whose_team_is_away_keeps_its_place_but_holds_nothing():
    """Issue 37: a team without a loop queued a job that fits now; nobody starts it, and it held the GPUs
    against every team behind it. Past the grace it keeps its place (position 1) and the next one starts."""
    from dataclasses import replace

    queue = [gpus(2, key="vision/train", ws="vision", arrived=1), gpus(2, key="nlp/eval", ws="nlp", arrived=2)]
    present = decide(queue, [WORKER])
    assert starts(present) == ["vision/train"]  # vision's own turn would start it; nlp waits behind it
    away = decide([replace(queue[0], away=900.0), queue[1]], [WORKER])
    assert starts(away) == ["nlp/eval"]
    [kept] = [d for d in away if d.key == "vision/train"]
    assert kept.position == 1 and "has not confirmed it for 15 min" in kept.reason and "holds nothing" in kept.reason


def test_only_another_workspaces_entry_unconfirmed_past_the_grace_is_away():
    from reconcile.plan.queue import AWAY_GRACE, waiting
    from state.observed import ClusterQueue, LedgerEntry

    def entry(ws: str, seen: float) -> LedgerEntry:
        return LedgerEntry(workspace=ws, job="j", cluster="c", submission_id=f"{ws}.j.abc.1", spec_hash="a" * 64,
                           arrived=0.0, seen=seen, bundles=({"GPU": 1.0},))

    now = 10_000.0
    queue = ClusterQueue(entries=(entry("vision", now - AWAY_GRACE - 1), entry("rl", now - 60),
                                  entry("nlp", now - AWAY_GRACE - 1)))
    found = {e.key: e.away for e in waiting("nlp", queue, now, [WORKER], own=True)}
    assert found == {"vision/j": AWAY_GRACE + 1, "rl/j": 0.0, "nlp/j": 0.0}  # its own entry: its team is here
