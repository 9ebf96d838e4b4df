"""Review of concurrent apply (reconcile.execute.batch): admissions made ahead never outlive the runs
that need them, and run config files stay safe, equivalent YAML. Real cluster, real dirs."""

from __future__ import annotations

import json

import pytest
import yaml
from ruamel.yaml import YAML

from reconcile.commands.common import load
from reconcile.execute import batch
from reconcile.execute.applier import ApplyContext, apply_plan
from reconcile.execute.cycle import connect, observe_and_plan
from state.code.gitinfo import GitInfo
from state.queue.ledger import LOCK_DIR, LOCK_NAME, QueueUnreadable, read_ledger
from state.runs.records import config_yaml
from tests.support.batches import JOBS, planned, submit_actions

HOSTILE = ["\x85", "a\x85b", "\u2028x", "yes", "on", "No", "~", "null", "0o17", "-0o7", "1e3", "1.5E-3", ".5",
           "0x1F", "1_000", ".inf", "12:30:00", "2021-01-01", "é€😀", "\ufeffbom", " lead", "a: b", "- x", "#c",
           "!tag", "&a", "*a", "%x", "@x", "x\ny", "x\r\ny", "\x00", "\x1b[31m", "a" * 5000, "<<", "---", "..."]


def test_config_yaml_reads_back_the_same_in_yaml_1_1_and_1_2_and_has_no_tags():
    data = {"keys": {h: h for h in HOSTILE}, "list": HOSTILE, "n": [1, 1.5, True, None, 10**30]}
    text = config_yaml(data)
    assert "!!" not in text and "!<" not in text
    for back in (yaml.safe_load(text), YAML(typ="safe").load(text), json.loads(json.dumps(YAML().load(text)))):
        assert back == data


def test_config_yaml_refuses_what_is_not_plain_data():
    with pytest.raises(yaml.representer.RepresenterError):
        config_yaml({"x": object()})


def test_admissions_made_ahead_are_withdrawn_when_a_later_cluster_cannot_admit(workspace):
    other = workspace.root / ".other"
    workspace.write("cluster2.yaml", f"kind: Cluster\nname: zother\naddress: {workspace.address}\n"
                                     "shared_root: .other\njob_defaults: {entrypoint_num_cpus: 0.05}\n")
    plan, ctx, submits, _ = planned(workspace)  # JOBS on cluster local
    workspace.write("jobs/z.yaml", "kind: Job\nname: z\ncluster: zother\nworkload: command\nentrypoint: ['true']\n")
    desired = load(workspace.root)
    ray = connect(desired, 10)
    observed, plan = observe_and_plan(desired, ray)
    ctx = ApplyContext(desired, ray, GitInfo("abc", False), "plan1", observed=observed, echo=lambda _: None)
    lock = other / LOCK_DIR / LOCK_NAME
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.mkdir()  # the second cluster's admission cannot be made: after the first's was written

    with pytest.raises(QueueUnreadable):
        apply_plan(plan, ctx)
    assert submit_actions(workspace) == []
    assert read_ledger(str(workspace.shared), workspace.name) == []  # nothing left holding GPUs


def test_a_long_batch_is_admitted_part_by_part_as_it_is_submitted(workspace, monkeypatch):
    monkeypatch.setattr(batch, "AHEAD", 4)
    plan, ctx, submits, _ = planned(workspace)
    apply_plan(plan, ctx)

    assert {e["outcome"] for e in submit_actions(workspace)} == {"submitted"} and len(submit_actions(workspace)) == JOBS
    held = {e.submission_id: e.admitted for e in read_ledger(str(workspace.shared), workspace.name)}
    first_on_ray = min(json.loads((workspace.shared / "jobs" / s.submission_id / "status.json").read_text())
                       ["submitted_at"] for s in submits[:4])
    last = held[submits[-1].submission_id]
    assert last is not None and last >= _epoch(first_on_ray)  # admitted only once the first part was sent


def _epoch(stamp: str | float) -> float:
    from datetime import datetime

    return stamp if isinstance(stamp, float) else datetime.fromisoformat(stamp).timestamp()
