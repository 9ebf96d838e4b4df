"""max_runtime under `argus serve` (--sync off) on the real test cluster: a run past its limit is stopped, classed
`deadline` in its record and in `argus status`, told once, and not retried unless `retry.on` names deadline; a
verl-shaped run saves a checkpoint before its deadline (from the variable verl reads) and the next attempt
resumes from it; what a run writes on the shared root never moves its deadline."""

from __future__ import annotations

import json
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import sdk, until, wait_for
from tests.support.loops import listening, runs_of, serve, stopped

# Rewrites its own record (and an exit.json) on the shared root again and again while it runs: it claims
# to be preempted, submitted in 2099 and finished. None of it may keep argus from stopping it on time.
FORGER = ("import json, os, sys, time\n"
          "d, told = sys.argv[1], False\n"
          "while True:\n"
          "    p = os.path.join(d, 'status.json')\n"
          "    try:\n"
          "        r = json.load(open(p))\n"
          "        r.update(failure='preempted', submitted_at='2099-01-01T00:00:00+00:00')\n"
          "        open(p + '.f', 'w').write(json.dumps(r)); os.replace(p + '.f', p)\n"
          "        open(os.path.join(d, 'exit.json'), 'w').write(json.dumps({'exit_code': 0}))\n"
          "        told or print('forged its record and exit.json', flush=True); told = True\n"
          "    except (OSError, ValueError):\n"
          "        pass\n"
          "    time.sleep(0.3)\n")

# verl-shaped: each step it reads MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP as verl's should_save_ckpt_esi
# does and saves (global_step_N/ and latest_checkpointed_iteration.txt, verl's layout) when what remains is at
# most the time a save takes plus the longest step; at start it resumes from the latest checkpoint. verl takes
# 60 s for a save (plus trainer.esi_redundant_time); this test's runs last seconds, so 2 s here.
VERL_SHAPED = (
    "import os, sys, time\n"
    "d = sys.argv[1]; os.makedirs(d, exist_ok=True)\n"
    "latest = os.path.join(d, 'latest_checkpointed_iteration.txt')\n"
    "step = int(open(latest).read()) if os.path.exists(latest) else 0\n"
    "print(f'resumed from global_step_{step}' if step else 'starting fresh', flush=True)\n"
    "expires = float(os.environ['MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP'])\n"
    "print(f'expires at {expires}', flush=True)\n"
    "longest = 0.0\n"
    "while step < 1000:\n"
    "    began = time.time(); time.sleep(0.5); step += 1; longest = max(longest, time.time() - began)\n"
    "    remaining = expires - time.time()\n"
    "    if remaining > 0 and longest > 0 and remaining <= 2.0 + longest:\n"
    "        os.makedirs(os.path.join(d, f'global_step_{step}'), exist_ok=True)\n"
    "        open(latest + '.tmp', 'w').write(str(step)); os.replace(latest + '.tmp', latest)\n"
    "        print(f'saved global_step_{step} {remaining:.2f}s before the deadline', flush=True)\n")


def test_a_run_past_its_max_runtime_is_stopped_classed_told_once_and_not_retried(workspace, argus, hook):
    url, events = hook
    script = _script(workspace, "forger.py", FORGER)
    workspace.job("hung", ["python3", script, "${shared_root}/jobs/${submission_id}"], extra="max_runtime: 12s\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = runs_of(workspace, "hung")
    loop = serve(workspace, "--interval", "2", "--notify", url, "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        gauge = ("argus_run_deadline_timestamp_seconds", (("cluster", "local"), ("job", "hung"),
                                                           ("workspace", workspace.name)))
        shown_at = until(lambda: _metrics(site).get(gauge), "the deadline on /metrics", 30)
        started = sdk(workspace.address).get_job_info(first).start_time / 1000
        assert abs(shown_at - (started + 12)) < 0.01  # Ray's start time + max_runtime: not the forged record's
        page = urllib.request.urlopen(site, timeout=10).read().decode()
        assert "deadline 20" in page  # the job's row on the status page: "RUNNING; deadline 2026-..."
        # the attack runs before the deadline (the gauge shows as soon as Ray runs the job, before its python starts)
        until(lambda: "forged its record and exit.json" in _log(workspace, first), "the forger at work", 11)
        wait_for(workspace.address, first, {"STOPPED"}, timeout=60)
        info = sdk(workspace.address).get_job_info(first)
        assert info.end_time / 1000 - started >= 12  # never before its deadline
        until(lambda: _record(workspace, first).get("failure") == "deadline", "the record classed deadline", 30)
        until(lambda: [e for e in events if e["kind"] == "deadline"], "the deadline event", 30)
        told_at = time.time()
        until(lambda: _last_turn(site) > told_at + 6, "three more turns", 60)  # time to retry or tell again
        samples = _metrics(site)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    [told] = [e for e in events if e["kind"] == "deadline"]
    assert (told["submission_id"], told["failure"]) == (first, "deadline") and "max_runtime of 12s" in told["summary"]
    assert runs_of(workspace, "hung") == [first]  # no attempt 2: retry.on does not name deadline
    scene = json.loads((workspace.shared / "jobs" / first / "incident.json").read_text())  # docs/incidents.md
    assert scene["kind"] == "deadline" and scene["stacks"], scene["problems"]  # kept before the stop, while it lived
    assert (told["report"]["interruption"], told["report"]["cause"]["class"]) == ("deadline", "deadline")
    assert samples[("argus_deadline_stops_total", (("job", "hung"), ("workspace", workspace.name)))] == 1
    status = argus("status", workspace.root)
    assert "STOPPED (deadline)" in status.out and "failure: deadline" in status.out, status.out
    rows = json.loads(argus("status", workspace.root, "--format", "json").out)["jobs"]
    assert [(r["address"], r["failure"]) for r in rows] == [("job.hung", "deadline")]


def test_a_verl_shaped_run_saves_before_its_deadline_and_the_next_attempt_resumes_from_it(workspace, argus):
    checkpoints = "${shared_root}/outputs/checkpoints/rl"
    workspace.job("rl", ["python3", _script(workspace, "verl_shaped.py", VERL_SHAPED), checkpoints],
                  extra="max_runtime: 10s\nretry: {max_attempts: 2, on: [deadline]}\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = runs_of(workspace, "rl")
    loop = serve(workspace, "--interval", "2")
    try:
        wait_for(workspace.address, first, {"STOPPED"}, timeout=60)
        second = until(lambda: [s for s in runs_of(workspace, "rl") if s != first], "attempt 2", 30)[0]
        assert second.endswith(".2")
        resumed = until(lambda: _resumed(workspace, second), "attempt 2 resumed", 60)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    log = _log(workspace, first)
    saves = [line.split() for line in log.splitlines() if line.startswith("saved global_step_")]
    assert saves and all(float(words[2].rstrip("s")) > 0 for words in saves), log  # before the deadline
    assert resumed == saves[-1][1]  # from the last checkpoint attempt 1 took, not from scratch
    root = workspace.shared / "outputs" / "checkpoints" / "rl"
    assert (root / resumed).is_dir() and int(resumed.removeprefix("global_step_")) > 0
    expires = float(next(line for line in log.splitlines() if line.startswith("expires at")).split()[-1])
    started = sdk(workspace.address).get_job_info(first).start_time / 1000
    assert abs(expires - (started + 10)) < 3  # submit time + max_runtime: the deadline argus stops it at
    assert _record(workspace, first)["failure"] == "deadline"


def _script(workspace, name: str, text: str) -> str:
    """The script on the shared root, where every node reads it; its path as the spec names it."""
    (workspace.shared / "scripts").mkdir(parents=True, exist_ok=True)
    (workspace.shared / "scripts" / name).write_text(text)
    return f"${{shared_root}}/scripts/{name}"


def _resumed(workspace, sid: str) -> str | None:
    for line in _log(workspace, sid).splitlines():
        if line.startswith("resumed from "):
            return line.split()[-1]
    return None


def _log(workspace, sid: str) -> str:
    path = workspace.shared / "jobs" / sid / "logs" / "driver.log"
    return path.read_text() if path.exists() else ""


def test_a_run_an_apply_starts_between_turns_is_stopped_within_two_seconds_of_its_deadline(workspace, argus):
    """Issue 37: the loop wakes for a run's deadline (and the watch for the start of a run with one), so a 20 s
    max_runtime under --interval 60 is kept to about 2 s, not to the next turn's."""
    hung = ["python3", "-c", "import time; time.sleep(600)"]
    workspace.job("hung", hung, extra="max_runtime: 20s\nstate: stopped\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # the root laid out, nothing run
    loop = serve(workspace, "--interval", "60", "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        until(lambda: _last_turn(site) > 0, "the loop's first turn", 60)  # the run starts between turns
        workspace.job("hung", hung, extra="max_runtime: 20s\n")
        assert argus("apply", workspace.root, "--auto-approve").code == 0
        [run] = runs_of(workspace, "hung")
        wait_for(workspace.address, run, {"STOPPED"}, timeout=60)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    info = sdk(workspace.address).get_job_info(run)
    late = info.end_time / 1000 - (info.start_time / 1000 + 20)
    # the target is 2 s, met on a quiet machine (bench/serve_deadline.py: 1.5-1.9 s); a loaded CI machine
    # measured 2.03 s once. Before, the stop came up to an interval (60 s) late.
    assert 0 <= late < 3, (late, err)
    assert "run(s) with a max_runtime started" in err  # the watch woke the loop for it


def _record(workspace, sid: str) -> dict:
    try:
        return json.loads((workspace.shared / "jobs" / sid / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _metrics(site: str) -> dict:
    text = urllib.request.urlopen(f"{site}metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _last_turn(site: str) -> float:
    """When the newest successful turn finished, as /metrics says it (turns are --interval apart)."""
    return max((v for (name, _labels), v in _metrics(site).items() if name == "argus_last_success_timestamp_seconds"),
               default=0.0)
