"""A saved plan is a file anyone with the repository can edit, and its plain seal can be recomputed: what its
fields say reaches the reader's terminal as plain text, never as escape sequences or forged lines."""

from __future__ import annotations

import json

from reconcile import saved
from reconcile.model import Action, Change, Plan

ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[31mAPPROVED\x1b[0m\r\nSaved plan by security team"


def test_show_prints_a_forged_plans_fields_as_plain_text(tmp_path, argus):
    plan = Plan(workspace="nlp", changes=(Change(address="job.bert", action=Action.SUBMIT, reason="never ran"),))
    values = {"format_version": saved.FORMAT_VERSION, "argus_version": "0.1.0" + ESCAPES, "workspace": "nlp",
              "plan_id": "3f2a9c1b7d0e" + ESCAPES, "created_at": "2026-11-22T09:00:00+00:00" + ESCAPES,
              "desired_digest": "d" * 64, "commit": "c" * 40, "plan": plan,
              "workspace_dir": "teams/nlp" + ESCAPES, "repository": "github.com/acme/ml" + ESCAPES}
    forged = saved.SavedPlan(**values)
    data = json.loads(forged.model_dump_json()) | {"digest": saved.content_digest(forged)}
    (tmp_path / "forged.json").write_text(json.dumps(data))

    shown = argus("show", tmp_path / "forged.json")
    assert shown.code == 0, shown.err
    header = shown.out.splitlines()[0]
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\r" not in shown.out
    assert header.startswith("Saved plan 3f2a9c1b7d0e") and "APPROVED" in header, "shown, as text, on its line"
    assert not any(line.startswith("Saved plan by security team") for line in shown.out.splitlines())


def test_show_prints_a_forged_plans_changes_as_plain_text(tmp_path, argus):
    """Issue 37: not only the header: a reason (or any text of a change) carrying escapes is shown as text."""
    change = Change(address="job.bert", action=Action.SUBMIT, reason="never ran" + ESCAPES)
    plan = Plan(workspace="nlp", changes=(change,))
    values = {"format_version": saved.FORMAT_VERSION, "argus_version": "0.1.0", "workspace": "nlp",
              "plan_id": "3f2a9c1b7d0e", "created_at": "2026-11-22T09:00:00+00:00", "desired_digest": "d" * 64,
              "commit": "c" * 40, "plan": plan, "workspace_dir": "teams/nlp", "repository": "github.com/acme/ml"}
    forged = saved.SavedPlan(**values)
    data = json.loads(forged.model_dump_json()) | {"digest": saved.content_digest(forged)}
    (tmp_path / "forged.json").write_text(json.dumps(data))

    shown = argus("show", tmp_path / "forged.json")
    assert shown.code == 0, shown.err
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\r" not in shown.out
    assert "never ran" in shown.out and "APPROVED" in shown.out
