"""The planner with argus's audit log as the registry of its submissions, on plain data (reconcile.plan.registry)."""

from __future__ import annotations

from reconcile.model import Action
from reconcile.plan.planner import plan
from state.observed import PastRuns, Registry, RunRecord
from tests.support.planning import desired, job, observed, record_of, run_of

LOG = "/shared/.argus/audit/team.jsonl"


def with_registry(state, *ids: str, adopted: bool = True, problems: tuple[str, ...] = ()):
    registry = Registry(log=LOG, adopted=adopted, submitted=dict.fromkeys(ids, "2026-01-01T00:00:00+00:00"),
                        problems=problems)
    return state.model_copy(update={"registries": {"c": registry}})


def test_a_registered_run_neither_ray_nor_a_record_remembers_is_never_submitted_again():
    spec = job()
    sid = run_of(spec, "SUCCEEDED").submission_id
    result = plan(desired(spec), with_registry(observed(), sid))
    [change] = result.changes
    assert change.action is Action.NOOP and "forgotten (argus submitted it" in change.reason
    assert any("never submitted again" in d.message for d in result.diagnostics)
    forced = plan(desired(spec), with_registry(observed(), sid), options=_replace("job.j")).changes[0]
    assert forced.action is Action.SUBMIT and forced.steps[0].attempt == 2  # --replace: a new attempt, a new id


def test_an_unconfirmed_submit_the_chain_registered_is_not_sent_again_even_in_the_same_session():
    spec = job()
    unconfirmed = record_of(run_of(spec, "PENDING"), "SUBMITTING", session_name="s1")
    assert plan(desired(spec), observed(records=(unconfirmed,))).changes[0].action is Action.SUBMIT  # as before
    result = plan(desired(spec), with_registry(observed(records=(unconfirmed,)), unconfirmed.submission_id))
    assert result.changes[0].action is Action.NOOP
    refused = record_of(run_of(spec, "PENDING"), "SUBMIT_FAILED")  # Ray refused: the chain freed the id
    assert plan(desired(spec), with_registry(observed(records=(refused,)))).changes[0].action is Action.SUBMIT


def test_a_forged_succeeded_predecessor_releases_no_follower_and_is_named():
    prep, train = job("prep"), job("train", after=["prep"])
    forged = run_of(prep, "SUCCEEDED")
    released = plan(desired(prep, train), observed(forged))  # without the registry: Ray's word and a record
    assert {c.address: c.action for c in released.changes}["job.train"] is Action.SUBMIT
    result = plan(desired(prep, train), with_registry(observed(forged)))
    actions = {c.address: c.action for c in result.changes}
    assert actions == {"job.prep": Action.SUBMIT, "job.train": Action.WAIT}
    warning, squatter = sorted((d for d in result.diagnostics if forged.submission_id in d.message),
                               key=lambda d: d.severity, reverse=True)
    assert warning.severity == "warning" and "argus never submitted it" in warning.message
    assert squatter.severity == "error" and "argus will not adopt it" in squatter.message  # prep's own id is taken


def test_a_forged_later_attempt_is_no_attempt_of_the_predecessor():
    prep, train = job("prep"), job("train", after=["prep"], rerun_with_predecessors=True)
    first, forged = run_of(prep, "SUCCEEDED"), run_of(prep, "SUCCEEDED", attempt=2, started=5)
    ran = plan(desired(prep, train), with_registry(observed(first), first.submission_id))
    [step] = [c for c in ran.changes if c.address == "job.train"][0].steps
    train_run = run_of(train, "SUCCEEDED").model_copy(update={"submission_id": step.submission_id, "metadata": {
        "argus.workspace": "team", "argus.job": "train", "argus.spec_hash": step.spec_hash, "argus.attempt": "1"}})
    ids = (first.submission_id, step.submission_id)
    result = plan(desired(prep, train), with_registry(observed(first, forged, train_run), *ids))
    assert {c.address: c.action for c in result.changes} == {"job.prep": Action.NOOP, "job.train": Action.NOOP}


def test_a_record_of_a_run_argus_never_submitted_counts_for_nothing():
    spec = job()
    forged = record_of(run_of(spec, "SUCCEEDED"), "SUCCEEDED")
    result = plan(desired(spec), with_registry(observed(records=(forged,))))
    assert result.changes[0].action is Action.SUBMIT
    assert any("argus never submitted it" in d.message and forged.submission_id in d.message
               for d in result.diagnostics)


def test_a_log_from_before_the_registry_trusts_runs_as_before_with_a_warning():
    spec = job()
    ran = run_of(spec, "SUCCEEDED")
    result = plan(desired(spec), with_registry(observed(ran), adopted=False))
    assert result.changes[0].action is Action.NOOP
    [warning] = result.diagnostics
    assert warning.address == "cluster.c" and "does not register this workspace's submissions yet" in warning.message
    assert plan(desired(spec), with_registry(observed(), adopted=False)).diagnostics == ()  # nothing to adopt


def test_a_damaged_log_is_an_error_on_its_cluster():
    result = plan(desired(job()), with_registry(observed(), problems=("line 3: the record was edited",)))
    [error] = result.errors
    assert error.address == "cluster.c" and "does not verify: line 3" in error.message
    assert "argus audit verify" in error.message


def _replace(address: str):
    from reconcile.model import PlanOptions

    return PlanOptions(replace=(address,))


class Archived(PastRuns):
    """The run index's archive as data (state.runs.past.Archive reads it from the shared root)."""

    def __init__(self, *runs: RunRecord) -> None:
        self.runs, self.asked = runs, []

    def of(self, job: str, spec_hash: str) -> tuple[RunRecord, ...]:
        self.asked.append(job)
        return tuple(r for r in self.runs if r.job == job and r.spec_hash == spec_hash)


def test_a_spec_reverted_to_finds_its_archived_runs_and_is_not_run_again():
    spec = job()
    done = record_of(run_of(spec, "SUCCEEDED"), "SUCCEEDED")
    state = with_registry(observed(), done.submission_id)
    archive = Archived(done)
    result = plan(desired(spec), state.model_copy(update={"past": archive}))
    assert archive.asked == ["j"]
    [change] = result.changes
    assert change.action is Action.NOOP and "forgotten (SUCCEEDED)" in change.reason  # as its record said
    lost = plan(desired(spec), state).changes[0]  # the archive gone (a job deleted it): the chain still holds it
    assert lost.action is Action.NOOP and "forgotten (argus submitted it" in lost.reason


def test_an_archived_row_argus_chain_does_not_hold_counts_for_nothing():
    spec = job()
    forged = record_of(run_of(spec, "SUCCEEDED"), "SUCCEEDED")
    result = plan(desired(spec), with_registry(observed()).model_copy(update={"past": Archived(forged)}))
    assert result.changes[0].action is Action.SUBMIT  # the forged row neither blocks nor releases anything


def test_a_spec_with_runs_shown_never_asks_the_archive():
    spec = job()
    ran = run_of(spec, "SUCCEEDED")
    archive = Archived()
    plan(desired(spec), with_registry(observed(ran), ran.submission_id).model_copy(update={"past": archive}))
    assert archive.asked == []  # the steady state reads no history


def test_an_imported_run_is_ours_only_on_the_cluster_the_chain_names():
    """Two clusters sharing a shared root share one chain: a job with the adopted id on the other cluster is not
    the job adopted (it would be counted, in sync, and then stopped or replaced as ours)."""
    from reconcile.plan.registry import imported_run
    from state.audit.registry import fold

    digest = "a" * 64
    submitted: dict[str, str] = {}
    imported: dict[str, str] = {}
    fold([{"event": "run.imported", "submission_id": "hand-1", "job": "trainer", "spec_hash": digest, "cluster": "c"},
          {"event": "run.imported", "submission_id": "hand-2", "job": "trainer", "spec_hash": digest}],
         True, submitted, imported=imported)
    assert set(imported) == {"hand-1"}  # a record naming no cluster adopts nothing
    chain = Registry(log=LOG, adopted=True, submitted=submitted, imported=imported)
    state = observed().model_copy(update={"registries": {"c": chain, "d": chain}})
    assert imported_run(state, "c", "hand-1") == ("trainer", digest)
    assert imported_run(state, "d", "hand-1") is None
    assert imported_run(state, "c", "hand-2") is None
