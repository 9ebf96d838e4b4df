"""argus's marks are argus's, on the real test cluster: a run that deletes its own record is still stopped at
its max_runtime and wedges no apply of its workspace; a record rewritten after argus's deadline stop (its
stop_asked cleared) makes no drift and so no restart; a record claiming a deadline stop argus never made gives
no `deadline` notice and hides no drift. Which runs argus stopped, and why, is read from its audit chain."""

from __future__ import annotations

import json
import time

from tests.support.cluster import SLEEP, sdk, until, wait_for
from tests.support.loops import runs_of

# Deletes its own record on the shared root, again and again, while it runs.
HIDER = ("import os, sys, time\n"
         "p = os.path.join(sys.argv[1], 'status.json')\n"
         "while True:\n"
         "    try:\n"
         "        os.remove(p); print('record deleted', flush=True)\n"
         "    except OSError:\n"
         "        pass\n"
         "    time.sleep(0.2)\n")

# Rewrites every record of job `victim` on the shared root: no stop_asked, no failure class, status RUNNING.
ERASER = ("import glob, json, os, sys, time\n"
          "while True:\n"
          "    for p in glob.glob(os.path.join(sys.argv[1], '*', 'status.json')):\n"
          "        try:\n"
          "            r = json.load(open(p))\n"
          "            if r.get('job') == 'victim' and (r.get('stop_asked') or r.get('failure')):\n"
          "                r.pop('stop_asked', None); r['failure'] = None\n"
          "                open(p + '.e', 'w').write(json.dumps(r)); os.replace(p + '.e', p)\n"
          "                print('erased', p, flush=True)\n"
          "        except (OSError, ValueError):\n"
          "            pass\n"
          "    time.sleep(0.1)\n")


def test_a_run_that_deletes_its_record_is_stopped_at_its_deadline_and_wedges_no_apply(workspace, argus):
    workspace.job("hider", ["python3", _script(workspace, "hider.py", HIDER), "${shared_root}/jobs/${submission_id}"],
                  extra="max_runtime: 15s\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [hider] = runs_of(workspace, "hider")
    record = workspace.shared / "jobs" / hider / "status.json"
    wait_for(workspace.address, hider, {"RUNNING"})
    until(lambda: not record.exists(), "the run deleted its record", 30)

    workspace.job("other", SLEEP)  # another job of the workspace: its apply works beside the hidden run
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert len(runs_of(workspace, "other")) == 1
    assert runs_of(workspace, "hider") == [hider]  # no second attempt beside the one Ray runs

    started = sdk(workspace.address).get_job_info(hider).start_time / 1000
    time.sleep(max(0.0, started + 15.5 - time.time()))
    stopping = argus("apply", workspace.root, "--auto-approve")
    assert stopping.code == 0, stopping.out + stopping.err
    wait_for(workspace.address, hider, {"STOPPED"}, timeout=60)
    assert sdk(workspace.address).get_job_info(hider).end_time / 1000 - started >= 15
    assert _stops(workspace) == [(hider, "deadline")]  # argus's own stop, in its chain
    assert runs_of(workspace, "hider") == [hider]


def test_a_record_cleared_after_a_deadline_stop_makes_no_drift_and_no_restart(workspace, argus, hook):
    url, events = hook
    workspace.job("eraser", ["python3", _script(workspace, "eraser.py", ERASER), "${shared_root}/jobs"])
    workspace.job("victim", SLEEP, extra="max_runtime: 10s\non_drift: restart\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [victim] = runs_of(workspace, "victim")
    wait_for(workspace.address, victim, {"RUNNING"})
    started = sdk(workspace.address).get_job_info(victim).start_time / 1000
    time.sleep(max(0.0, started + 10.5 - time.time()))
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # the deadline stop
    wait_for(workspace.address, victim, {"STOPPED"}, timeout=60)
    record = workspace.shared / "jobs" / victim / "status.json"
    until(lambda: "stop_asked" not in json.loads(record.read_text()), "the eraser cleared the record", 30)

    for sync in ("off", "auto", "auto", "auto"):  # the loop would restart drift: it finds none
        turn = argus("serve", workspace.root, "--once", "--sync", sync, "--notify", url)
        assert turn.code == 0, turn.err
        assert argus("apply", workspace.root, "--auto-approve").code == 0
    assert runs_of(workspace, "victim") == [victim]  # never started again
    assert not [e for e in events if e["kind"] in ("drift", "retried") and e.get("submission_id") == victim]
    assert [e["submission_id"] for e in events if e["kind"] == "deadline"] == [victim]
    assert "STOPPED (deadline)" in argus("status", workspace.root).out


def test_a_forged_deadline_record_gives_no_deadline_notice_and_hides_no_drift(workspace, argus, hook):
    url, events = hook
    workspace.job("trainer", SLEEP)  # no max_runtime at all
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [run] = runs_of(workspace, "trainer")
    wait_for(workspace.address, run, {"RUNNING"})
    assert sdk(workspace.address).stop_job(run)  # stopped outside argus, through Ray's API as any job can
    wait_for(workspace.address, run, {"STOPPED"})
    record = workspace.shared / "jobs" / run / "status.json"
    forged = json.loads(record.read_text())
    forged.update(status="STOPPED", failure="deadline", stop_asked="2026-01-01T00:00:00+00:00")
    record.write_text(json.dumps(forged))  # what a job writing the shared root can make it say

    for _ in range(2):
        turn = argus("serve", workspace.root, "--once", "--notify", url)
        assert turn.code == 0, turn.err
    assert not [e for e in events if e["kind"] == "deadline"]
    [drift] = [e for e in events if e["kind"] == "drift" and e.get("submission_id") == run]
    assert "stopped outside argus" in drift["summary"] and drift.get("failure") != "deadline"
    status = argus("status", workspace.root)
    assert "STOPPED (deadline)" not in status.out and "stopped outside argus" in status.out, status.out
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 2  # drift, shown
    assert _stops(workspace) == []


def _stops(workspace) -> list[tuple[str, str]]:
    """The run.stopping records of the workspace's audit log: argus's own stops, as its chain says."""
    log = workspace.shared / ".argus" / "audit" / f"{workspace.name}.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [(e["submission_id"], e["why"]) for e in entries if e.get("event") == "run.stopping"]


def _script(workspace, name: str, text: str) -> str:
    (workspace.shared / "scripts").mkdir(parents=True, exist_ok=True)
    (workspace.shared / "scripts" / name).write_text(text)
    return f"${{shared_root}}/scripts/{name}"
