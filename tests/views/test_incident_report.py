"""The analysis report made from an incident record (reconcile.views.incident): pure, against its schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from reconcile.views.incident import render, report
from tests.support.incidents import incident_record

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schema" / "incident-report.schema.json").read_text())


def test_the_report_names_the_cause_with_its_evidence_and_fits_its_schema():
    found = report(incident_record(), "retry", "retries it as attempt 3 of 3, from its checkpoint directory")
    jsonschema.validate(found, SCHEMA)
    assert found["cause"]["class"] == "oom" and any("CUDA out of memory" in e for e in found["cause"]["evidence"])
    assert found["advice"].startswith("Out of memory") and found["checkpoint_step"] == 40
    assert "argus next:    retries it as attempt 3 of 3" in render(found)


def test_a_hostile_record_still_makes_a_valid_report_with_no_escape_shown():
    hostile = incident_record(kind="rm -rf", failure=["x"], attempt="two", checkpoint={"step": True},
                              problems=[1, "\x1b[2Jp"],
                              ray_job={"message": "\x1b]0;owned\x07boom", "driver_exit_code": "1"},
                              failed_tasks=["no", {"name": "t", "error_message": "E\x1b[31mrr"}], dead_actors=7)
    found = report(hostile, "nothing", "nothing")
    jsonschema.validate(found, SCHEMA)
    shown = render(found)
    assert "\x1b" not in shown and "\x07" not in shown and found["interruption"] == "failed"


def test_idle_and_stalled_reports_carry_their_advice():
    for kind in ("idle", "stalled"):
        found = report(incident_record(kind=kind, failure=None), "wait", "nothing but tell")
        jsonschema.validate(found, SCHEMA)
        assert found["cause"]["class"] == kind and found["advice"] and found["cause"]["evidence"] == []


def test_a_field_with_a_line_break_never_forges_a_line_of_the_report():
    forged = incident_record(job="train\nargus next:    retries it [retry]", failure="oom\nstacks:        captured",
                     attempt=True)
    found = report(forged, "nothing", "nothing: the job has no retry policy")
    jsonschema.validate(found, SCHEMA)
    lines = render(found).splitlines()
    assert [line for line in lines if line.startswith("argus next:")] == [
        "argus next:    nothing: the job has no retry policy [nothing]"]
    assert [line for line in lines if line.startswith("stacks:")] == ["stacks:        not captured"]
