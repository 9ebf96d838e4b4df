"""Attacks on the admission queue and its bugs found in review (issues 15 and 36): each test failed before its fix.

Plain data wherever possible; real files in tmp_path for the ledger adapter. The attacks that need Ray's
own view of what runs (issue 36: capacity from Ray's reservations) run on conftest's `gpu_cluster`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from reconcile.model import Action, StopStep
from reconcile.plan import admission
from reconcile.plan.admission import decide
from reconcile.plan.placement import Demand, Entry
from reconcile.plan.planner import plan
from reconcile.plan.queue import QUEUE_TTL, Want, decide_cluster, held
from reconcile.plan.reviewed import decision_differences
from reconcile.serve.choice import choose
from state.observed import ClusterQueue
from tests.support.planning import HEX, NOW, cluster_of, desired, job, ledger, observed_with, record_of, run_of

FAR_FUTURE = 2.0**52


def want(gpus: float = 1.0, name: str = "small") -> Want:
    from reconcile.model import Ask

    return Want(key=f"team/{name}", submission_id=f"team.{name}.aaaaaaaaaaaa.1", spec_hash=HEX,
                ask=Ask(job=name, spread={"GPU": gpus}))


# --- pure admission: free capacity, spread, preemption -------------------------------------------------------------

def test_a_cpu_only_spread_demand_does_not_eat_the_cpus_of_the_gpu_node():
    """_spread takes each resource from the node that has least of it: a 8-CPU command job is pinned on
    the GPU node's 8 CPUs while a CPU node has 64 idle, and the verl job behind it cannot start."""
    cpu_job = Entry("a/cpu", "a", Demand(spread={"CPU": 8.0}), priority=1)
    verl = Entry("b/v", "b", Demand(bundles=({"GPU": 4.0, "CPU": 8.0},), driver={"CPU": 1.0}))
    decisions = {d.key: d for d in decide([cpu_job, verl], [{"GPU": 4.0, "CPU": 8.0}, {"CPU": 64.0}])}
    assert decisions["a/cpu"].start
    assert decisions["b/v"].start, decisions["b/v"].reason


def test_victim_search_is_not_quadratic_in_forged_ledger_entries(monkeypatch):
    """A ledger is 512 KiB (about 2,000 entries) and 1,000 ledgers are read: n preemptible admitted
    entries under a head that never fits cost n*n placements (1,000: 2.5 s; 20,000: ~15 min, under
    the admission lock at apply, so every workspace gets AdmissionBusy)."""
    calls = {"n": 0}
    real = admission.place

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(admission, "place", counted)
    import reconcile.plan.preemption as preemption
    monkeypatch.setattr(preemption, "place", counted)
    n = 300
    forged = [Entry(f"evil/j{i}", "evil", Demand(spread={"GPU": 0.001}), priority=-5, arrived=i, admitted=True,
                    preemptible=True) for i in range(n)]
    head = Entry("evil/head", "evil", Demand(spread={"GPU": 100.0}), priority=2**31)
    decide([*forged, head], [{"GPU": 8.0}])
    assert calls["n"] < 20 * n, f"{calls['n']} placements for {n} entries"


# --- hostile ledger entries ----------------------------------------------------------------------------------------

def test_a_ledger_priority_above_what_any_spec_may_say_is_refused():
    """Specs cap priority at 1,000,000; the ledger accepts 2**31: only a forged entry has one, and it
    jumps ahead of every real job (and preempts every preemptible run)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ledger("evil", "x", "evil.x.1", priority=2**31)


def test_a_forged_waiting_entry_with_a_future_seen_time_still_expires():
    """`seen` far in the future makes now - seen negative: the entry never reaches QUEUE_TTL."""
    forged = ledger("evil", "hog", "evil.hog.1", seen=FAR_FUTURE, priority=1_000_000, gpus=8.0)
    later = NOW + 10 * QUEUE_TTL
    decisions = decide_cluster("team", cluster_of(8.0), ClusterQueue(entries=(forged,)), [want(1.0)], later)
    assert decisions["team/small"].start, decisions["team/small"].reason


def test_a_forged_admitted_entry_with_a_future_admission_time_holds_nothing():
    """An admitted entry Ray has never heard of holds its demand for ADMIT_GRACE after `admitted`;
    with `admitted` in the future it holds all 8 GPUs forever, and no workspace admits anything."""
    forged = ledger("evil", "hog", "evil.hog.1", admitted=FAR_FUTURE, gpus=8.0)
    assert held(cluster_of(8.0), ClusterQueue(entries=(forged,)), NOW + 10 * QUEUE_TTL, set()) == []


def test_a_waiting_entry_that_can_never_fit_does_not_block_every_backfill():
    """Another workspace's waiting entry bigger than the cluster becomes the head (only our own jobs are
    checked with never_fits): every other job must then not delay it, so nothing ever starts."""
    huge = ledger("evil", "huge", "evil.huge.1", gpus=1000.0, arrived=0.0)
    decisions = decide_cluster("team", cluster_of(8.0), ClusterQueue(entries=(huge,)), [want(1.0)], NOW)
    assert decisions["team/small"].start, decisions["team/small"].reason


def test_admission_uses_the_jobs_current_preemptible_and_priority_not_the_ledgers():
    """A running job the spec now marks `preemptible: false` and priority 100 (both outside the spec
    hash: the run keeps running) is preempted for a priority-10 job, because its admitted ledger entry
    (written at admission, never rewritten; or forged in team.json by any Ray job) still says
    preemptible, priority 0."""
    spec = job("j", demand={"GPU": 2.0}, preemptible=False, priority=100)
    running = run_of(spec, "RUNNING")
    stale = ledger("team", "j", running.submission_id, admitted=NOW - 50, priority=0, preemptible=True)
    head = ledger("other", "big", "other.big.aaaaaaaaaaaa.1", priority=10)
    [change] = plan(desired(spec), observed_with([running], [stale, head], gpus=2.0)).changes
    assert change.action is not Action.PREEMPT, change.reason


def test_a_command_demand_cannot_leave_out_the_drivers_gpus():
    """`demand:` replaces the driver's resources instead of including them: a driver asking 8 GPUs with
    `demand: {CPU: 1}` (or `demand: {}`: no gate, no ledger at all) starts under a 1-GPU quota."""
    quotas = {"team": {"GPU": 1.0}}
    for demand in ({"CPU": 1.0}, {}):
        result = plan(desired(job("k", demand=demand, entrypoint_num_gpus=8)), observed_with([], [], quotas=quotas))
        [change] = result.changes
        assert result.errors or change.action is Action.QUEUE, (demand, change.action, change.steps[0].ask)


# --- ledger files as hostile input ---------------------------------------------------------------------------------

def test_a_deeply_nested_ledger_does_not_crash_every_workspace(tmp_path):
    """400 KB of brackets (under the 512 KiB cap): json raises RecursionError, which read_ledger does
    not catch, so every plan, apply and serve turn on this shared root crashes."""
    from state.queue.ledger import read_ledgers

    folder = tmp_path / ".argus" / "queue"
    folder.mkdir(parents=True)
    (folder / "evil.json").write_text("[" * 200_000 + "]" * 200_000)
    assert read_ledgers(str(tmp_path)) == ()


def test_junk_ledger_files_cannot_hide_the_real_ones(tmp_path):
    """Only the first MAX_LEDGERS names (sorted) are read: 1,000 empty files named 0000.json.. push
    every real workspace's ledger out, and their admitted-but-unallocated demand is counted by nobody."""
    from state.queue.ledger import MAX_LEDGERS, QueueUnreadable, read_ledgers, write_ledger

    write_ledger(str(tmp_path), "team", [ledger("team", "j", "team.j.aaaaaaaaaaaa.1", admitted=NOW)])
    folder = tmp_path / ".argus" / "queue"
    for i in range(MAX_LEDGERS):
        (folder / f"{i:04d}.json").write_text("{}")
    with pytest.raises(QueueUnreadable, match=f"more than {MAX_LEDGERS} ledgers"):  # said, never silently truncated
        read_ledgers(str(tmp_path))
    (folder / "not a workspace name.json").write_text("{}")  # names no workspace can have are not counted
    for i in range(2):
        (folder / f"{i:04d}.json").unlink()
    assert [e.workspace for e in read_ledgers(str(tmp_path))] == ["team"]


def test_a_symlinked_queue_directory_is_not_followed(tmp_path):
    """Quotas refuse a symlink anywhere below the root; the queue follows `.argus/queue` wherever it
    points (to a host-local /tmp, each workspace sees only its own queue: no shared queue at all)."""
    from state.queue.ledger import QueueUnreadable, read_ledgers, write_ledger

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_ledger(str(elsewhere), "evil", [ledger("evil", "hog", "evil.hog.1", admitted=NOW)])
    root = tmp_path / "root"
    (root / ".argus").mkdir(parents=True)
    (root / ".argus" / "queue").symlink_to(elsewhere / ".argus" / "queue")
    with pytest.raises(QueueUnreadable, match="replace it with a directory"):  # said, not silently an empty queue
        read_ledgers(str(root))


def test_a_symlinked_locks_directory_is_not_followed(tmp_path):
    """O_NOFOLLOW guards only the lock file's last component: with `.argus/locks` a symlink to a host-local
    directory, two hosts lock two different files and admit at the same time."""
    from state.queue.ledger import admission_lock

    local = tmp_path / "host-local"
    local.mkdir()
    root = tmp_path / "root"
    (root / ".argus").mkdir(parents=True)
    (root / ".argus" / "locks").symlink_to(local)
    try:
        with admission_lock(str(root), timeout=0.1):
            pass
    except Exception:  # refusing is the fix
        return
    assert not (local / "admission.lock").exists(), "the admission lock was taken outside the shared root"


def test_a_preempting_stop_is_decided_again_before_it_stops_anything(tmp_path, monkeypatch):
    """Submits are re-decided under the admission lock, and so are preemptions: a stop decided from an
    observation minutes old stops nothing when the head it was for has left the queue meanwhile."""
    monkeypatch.setenv("ARGUS_ROOT_KEY", "test-root-key-0123456789")  # another workspace's head must be signed
    from reconcile.execute import ray_steps
    from state.observed import RayJob

    sid = "team.j.aaaaaaaaaaaa.1"
    labels = {"argus.workspace": "team", "argus.job": "j", "argus.spec_hash": HEX, "argus.attempt": "1"}
    running = cluster_of(4.0, (RayJob(submission_id=sid, status="RUNNING", metadata=labels),))
    stopped: list[str] = []
    client = SimpleNamespace(stop=stopped.append, wait_terminal=lambda *a, **k: None,
                             admission_view=lambda: running)
    record = SimpleNamespace(job="j")
    runs = SimpleNamespace(get=lambda _sid: record, update=lambda *a, **k: None)
    chained: list = []  # argus's chain records each stop before Ray is asked (run.stopping)
    world = SimpleNamespace(clients={"c": client}, runs=runs, journal=SimpleNamespace(touched=set()),
                            stop_timeout=1.0, echo=lambda *_: None, roots={"c": str(tmp_path)}, workspace="team",
                            known={}, admins={}, audit=SimpleNamespace(append=lambda _c, event: chained.append(event)))
    from state.queue.ledger import write_ledger

    write_ledger(str(tmp_path), "team", [ledger("team", "j", sid, admitted=NOW, preemptible=True, gpus=4.0)])
    step = StopStep(cluster="c", submission_id=sid, preempted_for="other/gone")
    assert str(ray_steps.stop(step, world)) == "spared"  # the ledger holds no `other/gone` at all
    assert stopped == [], "a preemption for a head that is not waiting any more stopped the run"
    write_ledger(str(tmp_path), "other", [ledger("other", "gone", "other.gone.1", priority=10, gpus=4.0,
                                                 seen=__import__("time").time())])
    ray_steps.stop(step, world)
    assert stopped == [sid]  # the head waits again: now it is stopped
    assert [(e.submission_id, e.why) for e in chained] == [(sid, "preempt")]  # in the chain, and only this one


def test_a_preempted_attempt_does_not_spend_the_retry_budget():
    """Attempts in all include the preempted one: `max_attempts: 2, on: [oom]` means one retry after an
    oom, but after a preemption the oom of attempt 2 is final (the planner says preemptions are
    'never counted against the policy')."""
    spec = job("r", demand={"GPU": 2.0}, preemptible=True, retry={"max_attempts": 2, "on": ["oom"]})
    first, second = run_of(spec, "STOPPED", attempt=1), run_of(spec, "FAILED", attempt=2)
    records = (record_of(first, "STOPPED", failure="preempted", attempt=1),
               record_of(second, "FAILED", failure="oom", attempt=2))
    [change] = plan(desired(spec), observed_with([first, second], [], records=records)).changes
    assert change.action is Action.RETRY, change.reason


def test_a_saved_plan_is_stale_when_priority_preemptible_or_demand_changed():
    """Priority, preemptible and demand are outside the spec hash, and step_key ignores the Ask: a plan
    reviewed at priority 0 / 1 GPU is applied at priority 1,000,000 / 8 GPUs ('no decision changed')."""
    reviewed = plan(desired(job("k", demand={"GPU": 1.0})), observed_with([], []))
    fresh = plan(desired(job("k", demand={"GPU": 8.0}, priority=1_000_000)), observed_with([], []))
    assert fresh.changes[0].steps[0].ask != reviewed.changes[0].steps[0].ask
    assert decision_differences(reviewed, fresh) != []


def test_serve_without_sync_auto_does_not_replace_a_run_on_a_forged_waiting_entry():
    """from_queue trusts the workspace's ledger file, which any Ray job can write: an entry naming the
    (deterministic) submission id of a merged but unapplied spec makes `serve` (no --sync auto) stop
    the running run and submit the new spec."""
    old, new = job("j", demand={"GPU": 1.0}), job("j", demand={"GPU": 1.0}, entrypoint_num_cpus=2)
    running = run_of(old, "RUNNING")
    unapplied = plan(desired(new), observed_with([running], [])).changes[0]
    assert unapplied.action is Action.REPLACE and unapplied not in choose(plan(desired(new),
                                                                               observed_with([running], [])), False)
    new_sid = next(s.submission_id for s in unapplied.steps if s.kind == "submit")
    forged = ledger("team", "j", new_sid, gpus=1.0)
    result = plan(desired(new), observed_with([running], [forged]))
    assert [c.action for c in choose(result, sync_auto=False)] == []


def test_ledger_write_goes_through_a_symlinked_queue_directory(tmp_path):
    """The write side of the symlinked ledger directory: write_ledger follows `.argus/queue`."""
    from state.queue.ledger import QueueUnreadable, write_ledger

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / ".argus").mkdir(parents=True)
    (root / ".argus" / "queue").symlink_to(outside)
    with pytest.raises(QueueUnreadable):
        write_ledger(str(root), "team", [])
    assert not os.listdir(outside), "the ledger was written outside the shared root"
    assert Path(root).exists()


def test_the_victim_is_the_most_recently_admitted_not_the_most_recently_arrived():
    """victims() sorts by `arrived` (when the job entered the queue), but says 'the most recently
    admitted (the least work lost)': a run that waited long and started a minute ago is spared, and
    the one that has trained for hours is stopped."""
    from state.observed import RayJob

    fresh = ledger("other", "fresh", "other.fresh.1", admitted=NOW - 60, arrived=NOW - 9000, preemptible=True)
    old = ledger("other", "old", "other.old.1", admitted=NOW - 8000, arrived=NOW - 8100, preemptible=True)
    head = ledger("third", "head", "third.head.1", priority=10)
    labels = {"argus.workspace": "other", "argus.spec_hash": HEX, "argus.attempt": "1"}
    ray = (RayJob(submission_id="other.fresh.1", status="RUNNING", metadata={**labels, "argus.job": "fresh"}),
           RayJob(submission_id="other.old.1", status="RUNNING", metadata={**labels, "argus.job": "old"}))
    decisions = decide_cluster("team", cluster_of(4.0, ray), ClusterQueue(entries=(fresh, old, head)), [], NOW)
    assert decisions["third/head"].preempts == ("other/fresh",), decisions["third/head"].reason


def test_admission_at_apply_respects_this_workspaces_own_higher_priority_waiting_job(tmp_path):
    """admitted() decides one submit alone: this workspace's own waiting entries are left out
    (waiting() skips them, the plan adds them as wants, admitted() does not). When the plan's first
    job A (priority 10) found no room at apply and was queued, the next submit B (priority 0) starts
    in the room A waits for."""
    from reconcile.execute.admit import admitted
    from reconcile.model import Ask, SubmitStep
    from specs.workloads.submission import Submission
    from state.observed import RayJob
    from state.queue.ledger import write_ledger

    now = __import__("time").time()
    root = str(tmp_path)
    other = ledger("other", "run", "other.run.1", admitted=now - 60, gpus=4.0, seen=now, arrived=now - 100)
    write_ledger(root, "other", [other])
    mine = ledger("team", "a", "team.a.aaaaaaaaaaaa.1", priority=10, gpus=8.0, seen=now, arrived=now - 50)
    write_ledger(root, "team", [mine])
    view = cluster_of(8.0, (RayJob(submission_id="other.run.1", status="RUNNING"),), used={"GPU": 4.0})
    client = SimpleNamespace(admission_view=lambda: view)
    world = SimpleNamespace(roots={"c": root}, clients={"c": client}, workspace="team", admissions={}, known={},
                            admins={})
    sub = Submission(workspace="team", cluster="c", shared_root=root, job="b", run=1, entrypoint="true", env_vars={},
                     entrypoint_num_cpus=None, entrypoint_num_gpus=None, entrypoint_memory=None,
                     entrypoint_resources={})
    step = SubmitStep(cluster="c", submission_id="team.b.bbbbbbbbbbbb.1", spec_hash="b" * 64, attempt=1,
                      submission=sub, ask=Ask(job="b", spread={"GPU": 2.0}))
    assert admitted(step, world) is not None, "job b (priority 0) was admitted in the room job a (priority 10) wants"


def test_a_forged_admitted_entry_cannot_borrow_another_workspaces_running_job():
    """held() trusts any admitted entry whose submission id Ray lists as active, whoever it belongs
    to: one write of `evil.json` naming team's long-running run (ids are deterministic, and listed by
    Ray) with an 8-GPU demand holds the whole cluster for as long as that run lives; no refresh needed,
    nothing of the attacker's running. Ray's job metadata says whose run it is: held() never asks."""
    spec = job("j")
    running = run_of(spec, "RUNNING")
    forged = ledger("evil", "hog", running.submission_id, admitted=NOW - 3 * QUEUE_TTL, gpus=8.0)
    assert held(cluster_of(8.0, (running,)), ClusterQueue(entries=(forged,)), NOW, set()) == []


def test_a_planted_symlink_as_the_lock_file_is_an_argus_error_not_a_crash(tmp_path):
    """Any Ray job can replace `.argus/locks/admission.lock` with a symlink: O_NOFOLLOW then raises a
    bare OSError (ELOOP), which the boundary reports as an argus bug (exit 3), for every workspace."""
    from specs.errors import ArgusError
    from state.queue.ledger import admission_lock

    (tmp_path / ".argus" / "locks").mkdir(parents=True)
    (tmp_path / ".argus" / "locks" / "admission.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ArgusError), admission_lock(str(tmp_path), timeout=0.1):
        pass


def test_an_unreadable_queue_is_the_clusters_problem_not_the_jobs():
    from state.observed import ClusterQueue, ObservedState

    observed = ObservedState(clusters={"c": cluster_of()}, records={}, observed_at=NOW,
                             queues={"c": ClusterQueue(entries=(), problem="quotas.yaml:2: GPU must be a number")})
    errors = plan(desired(job("k", demand={"GPU": 1.0}), job("m", demand={"GPU": 2.0})), observed).errors
    assert [e.message for e in errors] == ["nothing is admitted on cluster 'c' until its admission queue can be "
                                           "read: quotas.yaml:2: GPU must be a number"] * 2


# --- capacity from Ray's own reservations (issue 36), on the real `gpu_cluster` (3 logical GPUs) ------------------

def test_deleting_a_running_jobs_ledger_entry_and_record_never_frees_its_gpus(gpu_cluster, shared, tmp_path, argus):
    """Any job can delete `.argus/queue/<workspace>.json` and `jobs/<id>/status.json`: the running run's 2 GPUs
    (a `demand:` Ray does not reserve) were then admitted again, 2 + 2 on a cluster of 3. Ray still runs it
    under its workspace's labels, stamped with the demand argus admitted: it holds that demand, for every
    workspace, and for its own the demand its spec implies."""
    from tests.support.cluster import jobs_of, until
    from tests.support.gpu_queue import gpu_job, stop_all, team

    a, b = team(tmp_path, "erased", gpu_cluster, shared), team(tmp_path, "beside", gpu_cluster, shared)
    gpu_job(a, shared, "first", seconds=600)
    try:
        assert argus("apply", a.root, "--auto-approve").code == 0
        [run] = until(lambda: [j for j in jobs_of(a.address, a.name) if j.status.value == "RUNNING"], "first runs")
        (shared / ".argus" / "queue" / "erased.json").unlink()
        (shared / "jobs" / run.submission_id / "status.json").unlink()
        gpu_job(b, shared, "second")
        applied = argus("apply", b.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        assert jobs_of(b.address, b.name) == [], applied.out  # never submitted: 2 of 3 GPUs are first's
        assert re.search(r"job\.second +queue +queued", applied.out), applied.out
        gpu_job(a, shared, "again")
        # targeted: with its record gone, `first` is a run argus has no proof of (a plan error of its own)
        mine = argus("apply", a.root, "--auto-approve", "--target", "job.again")
        assert mine.code == 0, mine.out + mine.err
        assert [j.metadata["argus.job"] for j in jobs_of(a.address, a.name)] == ["first"], mine.out
    finally:
        stop_all(gpu_cluster.address, a, b)


def test_a_genuine_ledger_entry_replayed_after_its_run_ended_holds_nothing(gpu_cluster, shared, tmp_path, argus,
                                                                          monkeypatch):
    """With ARGUS_ROOT_KEY set, a signed admitted entry copied aside while its run ran and put back once the
    run ended and was deleted from Ray's table (any job can DELETE a finished job) held its 2 GPUs for ever:
    no workspace admitted a 2-GPU job on the idle cluster again."""
    import subprocess
    import sys

    from tests.support.cluster import jobs_of, sdk, until
    from tests.support.gpu_queue import gpu_job, stop_all, team

    monkeypatch.setenv("ARGUS_ROOT_KEY", "replay-test-root-key-0123456789")
    a, b = team(tmp_path, "replayed", gpu_cluster, shared), team(tmp_path, "after", gpu_cluster, shared)
    gpu_job(a, shared, "done", seconds=1)
    try:
        first = subprocess.run([sys.executable, "-m", "reconcile.cli", "apply", str(a.root), "--auto-approve"],
                               capture_output=True, text=True, timeout=180)
        assert first.returncode == 0, first.stdout + first.stderr
        ledger_file = shared / ".argus" / "queue" / "replayed.json"
        genuine = ledger_file.read_text()
        assert '"submitted": ' in genuine and '"sig": ' in genuine  # a signed entry of a run Ray accepted
        [run] = jobs_of(a.address, a.name)
        until(lambda: jobs_of(a.address, a.name)[0].status.value == "SUCCEEDED", "the run ended", timeout=120)
        sdk(a.address).delete_job(run.submission_id)
        ledger_file.write_text(genuine)  # the replay
        gpu_job(b, shared, "fits")
        applied = argus("apply", b.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        assert [j.metadata["argus.job"] for j in jobs_of(b.address, b.name)] == ["fits"], applied.out
    finally:
        stop_all(gpu_cluster.address, a, b)
