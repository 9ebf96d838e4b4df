"""Planning quotas in the admin workspace: pure, from plain data (tests.support.planning)."""

from __future__ import annotations

from reconcile.model import Action, QuotasStep
from reconcile.plan.planner import plan
from reconcile.plan.quotas import spec_text
from specs.desired import DesiredState, Source
from specs.kinds.models import Cluster, Quotas, Workspace
from specs.parse.safe_yaml import load_walked
from state.observed import ClusterQueue
from tests.support.planning import CLUSTER, observed_with

ADMINISTERED = CLUSTER.model_copy(update={"admin": "team"})
CAPS = Quotas(kind="Quotas", cluster="c", workspaces={"team": {"GPU": 2}})


def desired(quotas: Quotas | None, cluster: Cluster = ADMINISTERED) -> DesiredState:
    sources = {"cluster.c": Source("cluster.yaml", 1, {}), "quotas.c": Source("quotas.yaml", 1, {})}
    return DesiredState("/ws", Workspace(kind="Workspace", name="team"), {"c": cluster}, {}, {}, sources,
                        {"c": "/shared"}, {"c": quotas} if quotas else {})


def with_queue(**fields) -> object:
    base = observed_with([], [])
    return base.model_copy(update={"queues": {"c": ClusterQueue(**fields)}})


def quota_changes(state: DesiredState, observed) -> list:
    return [c for c in plan(state, observed).changes if c.address == "quotas.c"]


def test_first_quotas_are_created_and_applied_ones_are_left_alone() -> None:
    [change] = quota_changes(desired(CAPS), with_queue())
    assert change.action is Action.CREATE and change.steps == (QuotasStep(cluster="c", workspaces=CAPS.workspaces),)
    assert quota_changes(desired(CAPS), with_queue(quotas=CAPS.workspaces, quotas_digest=CAPS.digest("team"))) == []


def test_a_changed_cap_is_an_update_with_its_diff() -> None:
    old = Quotas(kind="Quotas", cluster="c", workspaces={"team": {"GPU": 1}})
    [change] = quota_changes(desired(CAPS), with_queue(quotas=old.workspaces, quotas_digest=old.digest("team")))
    assert change.action is Action.UPDATE
    assert [(d.path, d.before, d.after) for d in change.diff] == [("workspaces.team.GPU", 1.0, 2.0)]


def test_a_record_that_cannot_be_trusted_is_applied_again() -> None:
    [change] = quota_changes(desired(CAPS), with_queue(problem="a job may have written or removed them"))
    assert change.action is Action.CREATE and "can't be trusted" in change.reason


def test_removing_the_spec_lifts_the_caps_only_where_some_were_applied() -> None:
    [change] = quota_changes(desired(None), with_queue(quotas=CAPS.workspaces, quotas_digest=CAPS.digest("team")))
    assert change.action is Action.DELETE and change.steps == (QuotasStep(cluster="c", workspaces={}),)
    assert quota_changes(desired(None), with_queue()) == []


def test_only_the_admin_plans_quotas_and_the_old_file_is_shown_as_a_spec() -> None:
    assert quota_changes(desired(None, CLUSTER), with_queue(quotas=CAPS.workspaces, legacy_quotas=True)) == []
    made = plan(desired(None), with_queue(quotas={"team": {"GPU": 8.0}, "x-1": {"my:res": 0.5}}, legacy_quotas=True))
    [warning] = [d for d in made.diagnostics if "hand-edited" in d.message]
    assert warning.severity == "warning" and "kind: Quotas" in (warning.hint or "")


def test_the_spec_text_loads_back_to_the_same_caps() -> None:
    caps = {"team": {"GPU": 8.0}, "x-1": {"my: res": 0.5}}
    [walked] = load_walked(spec_text("c", caps))
    assert Quotas.model_validate(walked.value).workspaces == caps
