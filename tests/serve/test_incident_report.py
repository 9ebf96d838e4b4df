"""The scene of an interruption, on the real test cluster: a CPU job that fails leaves an incident record in
its run directory (its log tail, Ray's view of the job, its failed task with the error, the nodes), secrets
masked; `argus status --run` renders the analysis report; `argus serve` sends it as a structured JSON event,
valid against schema/incident-report.schema.json, to a loopback webhook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema

from tests.support.cluster import until, wait_for
from tests.support.loops import runs_of

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schema" / "incident-report.schema.json").read_text())
SECRET = "s3cr3t-incident-value-9f1c"
# A Ray task that raises, then the driver: the failed task's error is in Ray's state API, the driver's in the log.
FAILING = ("import os, ray; ray.init(); print('token is', os.environ['B_TOKEN'], flush=True); "
           "exec('@ray.remote(num_cpus=0, max_retries=0)\\ndef shard(): raise ValueError(\\'shard 3 has no rows\\')"
           "\\nray.get(shard.remote())')")


def test_a_failed_run_leaves_its_scene_and_a_report(workspace, argus, hook, monkeypatch):
    url, events = hook
    monkeypatch.setenv("B_TOKEN", SECRET)
    workspace.allow("B_TOKEN")
    workspace.job("broken", [sys.executable, "-c", FAILING], extra="env: {B_TOKEN: '${env:B_TOKEN}'}\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [sid] = runs_of(workspace, "broken")
    wait_for(workspace.address, sid, {"FAILED"})
    turn = argus("serve", workspace.root, "--once", "--notify", url)
    assert turn.code == 0, turn.err

    path = workspace.shared / "jobs" / sid / "incident.json"
    text = path.read_text()
    assert SECRET not in text and "***" in text  # the log echoed it: masked like every other output
    record = json.loads(text)
    assert (record["submission_id"], record["kind"], record["failure"]) == (sid, "failed", "user_code")
    assert "ValueError: shard 3 has no rows" in record["log_tail"]
    assert record["ray_job"]["status"] == "FAILED"
    assert any("shard 3 has no rows" in (t.get("error_message") or "") for t in record["failed_tasks"])
    assert any(n["ran_this_run"] and n["state"] == "ALIVE" for n in record["nodes"])
    assert len(text.encode()) <= 256 * 1024

    shown = argus("status", workspace.root, "--run", sid)
    assert shown.code == 0, shown.err
    assert "likely cause:  user_code" in shown.out and "ValueError: shard 3 has no rows" in shown.out
    assert "argus next:    nothing: the job has no retry policy" in shown.out and "[nothing]" in shown.out
    as_json = argus("status", workspace.root, "--run", sid, "--json")
    jsonschema.validate(json.loads(as_json.out), SCHEMA)

    until(lambda: [e for e in events if e["kind"] == "failed"], "the failed event")
    [failed] = [e for e in events if e["kind"] == "failed"]
    report = failed["report"]
    jsonschema.validate(report, SCHEMA)
    assert (report["submission_id"], report["cause"]["class"], report["next"]["action"]) == (sid, "user_code",
                                                                                           "nothing")
    assert any("shard 3 has no rows" in line for line in report["cause"]["evidence"])
    assert SECRET not in json.dumps(failed)


def test_status_run_without_a_record_says_so(workspace, argus):
    shown = argus("status", workspace.root, "--run", f"{workspace.name}.nothing.0000.1")
    assert shown.code == 1 and "has no incident record" in shown.err


def test_the_page_links_a_failed_run_to_the_report_its_event_carried():
    from reconcile.report import Event
    from reconcile.views.incident import report as analysed
    from tests.support.status_page import get, serving
    from tests.support.status_page import report as turn_report

    record = {"submission_id": "ppo-a1", "workspace": "llm-rl", "job": "ppo", "cluster": "gpu", "attempt": 1,
              "kind": "failed", "failure": "oom", "time": "2027-01-01T00:00:00+00:00",
              "log_tail": "torch.OutOfMemoryError: CUDA out of memory\n\x1b[2Jcleared", "problems": []}
    told = Event(kind="failed", key="failed:ppo-a1", workspace="llm-rl", summary="job.ppo: attempt 1 failed (oom)",
                 time="2027-01-01T00:00:00+00:00", submission_id="ppo-a1",
                 report=analysed(record, "nothing", "nothing: the job has no retry policy"))
    with serving() as (server, publish):
        publish(turn_report(events=(told,)))
        page = get(server, "/")[1]
        status, text = get(server, "/report/ppo-a1")
        missing = get(server, "/report/ppo-a3")
    assert 'href="/report/ppo-a1">report</a>' in page
    assert status == 200 and "likely cause:  oom" in text and "argus next:    nothing: the job has no retry" in text
    assert "\x1b" not in text
    assert missing[0] == 404 and "argus status DIR --run ppo-a3" in missing[1]
