"""/metrics of one serve keeping several workspaces: one Metrics fed by every loop, each workspace's series
its own, a standby's marked, argus's build named."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from reconcile.model import Plan
from reconcile.report import TurnReport
from reconcile.serve.metrics import Metrics
from reconcile.version import build
from state.observed import RunStatus
from tests.support.status_page import report, run

NLP, VISION = ("workspace", "nlp"), ("workspace", "vision")


def samples(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


def nlp(**fields: object) -> TurnReport:
    values: dict = {"workspace": "nlp", "plan": Plan(workspace="nlp", changes=()), "drift": 1,
                    "runs": {"bert": [run("bert-a1", RunStatus.FAILED, failure="oom", cluster="a100"),
                                      run("bert-a2", RunStatus.RUNNING, attempt=2, cluster="a100")]},
                    "gpus_held": {"a100": {"nlp": 2.0, "vision": 4.0}}}
    return report(**{**values, **fields})


def vision(**fields: object) -> TurnReport:
    values: dict = {"workspace": "vision", "plan": Plan(workspace="vision", changes=()), "drift": 0,
                    "runs": {"vit": [run("vit-a1", RunStatus.RUNNING, cluster="a100")]},
                    "gpus_held": {"a100": {"nlp": 2.0, "vision": 4.0}}}
    return report(**{**values, **fields})


def test_two_workspaces_export_distinct_series_and_replacing_one_leaves_the_other():
    metrics = Metrics()
    metrics.record(nlp(retried=("bert-a2",)))
    metrics.record(vision(ok=False, error="ray unreachable"))
    both = samples(metrics)
    metrics.record(nlp(runs={"gpt": [run("gpt-a1", RunStatus.SUCCEEDED, cluster="h20")]}, drift=0, retried=()))
    after = samples(metrics)

    a100 = ("cluster", "a100")
    assert both[("argus_runs", (a100, ("job", "bert"), ("status", "FAILED"), NLP))] == 1
    assert both[("argus_run_failures", (("class", "oom"), a100, ("job", "bert"), NLP))] == 1
    assert both[("argus_runs", (a100, ("job", "vit"), ("status", "RUNNING"), VISION))] == 1
    assert (both[("argus_drift_changes", (NLP,))], both[("argus_drift_changes", (VISION,))]) == (1, 0)
    assert both[("argus_retries_total", (("job", "bert"), NLP))] == 1
    assert both[("argus_loop_errors_total", (VISION,))] == 1 and ("argus_loop_errors_total", (NLP,)) not in both
    assert ("argus_last_success_timestamp_seconds", (NLP,)) in both
    assert ("argus_last_success_timestamp_seconds", (VISION,)) not in both, "vision has not succeeded yet"

    assert not [key for key in after if key[0] == "argus_runs" and ("job", "bert") in key[1]], "nlp's bert is gone"
    assert after[("argus_runs", (("cluster", "h20"), ("job", "gpt"), ("status", "SUCCEEDED"), NLP))] == 1
    assert after[("argus_runs", (a100, ("job", "vit"), ("status", "RUNNING"), VISION))] == 1, "vision's stay"
    assert after[("argus_loop_errors_total", (VISION,))] == 1 and after[("argus_drift_changes", (NLP,))] == 0
    assert after[("argus_retries_total", (("job", "bert"), NLP))] == 1, "a counter never goes back"


def test_gpus_held_are_the_newest_turns_view_of_each_cluster_once():
    metrics = Metrics()
    now = time.time()
    metrics.record(nlp(finished_at=now, gpus_held={"a100": {"nlp": 2.0, "vision": 4.0}}))
    metrics.record(vision(finished_at=now + 5, gpus_held={"a100": {"nlp": 2.0}, "h20": {}}))
    metrics.record(nlp(finished_at=now + 1, gpus_held={"a100": {"nlp": 3.0, "vision": 4.0}}))  # late, and older
    held = {key: value for key, value in samples(metrics).items() if key[0] == "argus_gpus_held"}
    waiting = {key: value for key, value in samples(metrics).items() if key[0] == "argus_queue_waiting"}
    assert held == {("argus_gpus_held", (("cluster", "a100"), ("workspace", "nlp"))): 2.0}
    assert waiting[("argus_queue_waiting", (("cluster", "h20"), VISION))] == 0
    assert ("argus_queue_waiting", (("cluster", "h20"), NLP)) not in waiting, "nlp never read h20's queue"


def test_a_standby_is_marked_inactive_and_exports_no_runs_of_its_own():
    metrics = Metrics()
    metrics.record(nlp())
    metrics.record(vision())
    active = samples(metrics)
    took_over = time.time() + 1  # a later turn, clearly
    metrics.record(TurnReport(workspace="nlp", started_at=took_over, finished_at=took_over, ok=True, interval=30.0,
                              sync="off", notes=("standby: host-b:4242 holds the lease of this workspace",)))
    standby = samples(metrics)
    assert active[("argus_loop_active", (NLP,))] == 1 and standby[("argus_loop_active", (NLP,))] == 0
    assert standby[("argus_loop_active", (VISION,))] == 1
    assert not [key for key in standby if key[0] in ("argus_runs", "argus_drift_changes") and NLP in key[1]]
    assert [key for key in standby if key[0] == "argus_runs" and VISION in key[1]]
    assert standby[("argus_last_success_timestamp_seconds", (NLP,))] < took_over, "a standby turn is no success"


def test_build_info_names_the_running_argus():
    info = build()
    found = samples(Metrics())
    [labels] = [dict(key[1]) for key, value in found.items() if key[0] == "argus_build_info" and value == 1]
    assert labels == {"version": info.version, "commit": info.commit, "python": info.python}
    assert info.version not in ("", "unknown"), "the test environment installs argus"
