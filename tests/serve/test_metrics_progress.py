"""/metrics of running runs' progress: step, total and ETA per run, only while it runs and only what is known."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from reconcile.model import Plan
from reconcile.serve.metrics import Metrics
from reconcile.views.html import render_page
from specs.workloads.run_progress import Progress
from state.observed import RunStatus
from tests.support.status_page import report, run


def test_running_runs_export_step_total_and_eta_and_ended_ones_nothing() -> None:
    going = run("ppo-a1", RunStatus.RUNNING).model_copy(
        update={"progress": Progress(step=12, total=100, rate=0.5, eta_seconds=176.0, seen_at=1.0)})
    unsure = run("sft-a1", RunStatus.RUNNING).model_copy(update={"progress": Progress(step=3, seen_at=1.0)})
    ended = run("old-a1", RunStatus.SUCCEEDED).model_copy(update={"progress": Progress(step=9, total=9, seen_at=1.0)})
    metrics = Metrics()
    turn = report(workspace="nlp", plan=Plan(workspace="nlp", changes=()),
                  runs={"ppo": [going], "sft": [unsure], "old": [ended]})
    metrics.record(turn)
    samples = {(s.name, s.labels["submission_id"]): s.value
               for family in text_string_to_metric_families(metrics.exposition().decode())
               for s in family.samples if "submission_id" in s.labels}
    assert samples == {("argus_run_step", "ppo-a1"): 12, ("argus_run_steps_total", "ppo-a1"): 100,
                       ("argus_run_eta_seconds", "ppo-a1"): 176.0, ("argus_run_step", "sft-a1"): 3}
    page = render_page(turn, now=2.0)
    assert '<progress value="12" max="100"' in page and "12/100 (12%) eta 2m56s" in page
    assert page.count("<progress") == 2, "the ended run has no bar"
