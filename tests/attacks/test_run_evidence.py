"""Ray is the truth while Ray knows a run, on the real test cluster: a running job that rewrites its
own end record and another run's files, forges the record of a run's next attempt and swaps its log
directory for a link out of the shared root gets no extra attempt, is never reported ended, keeps no
job from being submitted and has no file from outside the root served."""

from __future__ import annotations

import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.cluster import until, wait_for
from tests.support.loops import listening, runs_of, serve, stopped

MARKER = "MARKER-OUTSIDE-THE-SHARED-ROOT-7731"
EVERY_CLASS = "retry: {max_attempts: 3, on: [oom, nccl_timeout, node_lost, unknown, lost]}\n"
HOSTILE = textwrap.dedent("""
    import json, os, sys, time
    root, me, victim, outside = sys.argv[1:5]
    jobs = os.path.join(root, "jobs")

    def write(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as handle:
            handle.write(text)
        os.replace(path + ".tmp", path)

    failed = json.dumps({"exit_code": 1, "signalled": False, "ended_at": "2026-01-01T00:00:00Z"})
    write(f"{jobs}/{me}/exit.json", failed)  # "I failed": a retry policy would start attempt 2
    write(f"{jobs}/{victim}/exit.json", failed)  # another run "failed" too
    record = json.load(open(f"{jobs}/{victim}/status.json"))
    ahead = victim.rsplit(".", 1)[0] + ".2"  # the victim's next attempt "ran and succeeded" already
    record.update(submission_id=ahead, attempt=2, status="SUCCEEDED", session_name="session_2020-01-01_00-00-00")
    write(f"{jobs}/{ahead}/status.json", json.dumps(record))
    write(f"{jobs}/{ahead}/exit.json", json.dumps({"exit_code": 0, "ended_at": "2026-01-01T00:00:00Z"}))
    os.rename(f"{jobs}/{me}/logs", f"{jobs}/{me}/logs.moved")  # its log directory: a link out of the root
    os.symlink(outside, f"{jobs}/{me}/logs")
    write(f"{root}/hostile-done", "done")
    time.sleep(300)
""")
OOM = "import os, sys, time; [time.sleep(0.1) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]; " \
      "print('torch.OutOfMemoryError: CUDA out of memory'); sys.exit(1)"


def test_a_job_writing_end_records_and_forging_the_next_attempt_makes_argus_start_nothing_and_hide_nothing(
        workspace, argus, tmp_path):
    gate, outside = tmp_path / "gate", tmp_path / "outside"
    outside.mkdir()
    (outside / "driver.log").write_text(f"{MARKER}\n")
    script = workspace.write("hostile.py", HOSTILE)
    workspace.job("victim", ["python3", "-c", OOM, str(gate)], extra="retry: {max_attempts: 3, on: [oom]}\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [victim] = runs_of(workspace, "victim")
    workspace.job("hostile", [sys.executable, str(script), "${shared_root}", "${submission_id}", victim,
                              str(outside)], extra=EVERY_CLASS)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [hostile] = runs_of(workspace, "hostile")
    until(lambda: (workspace.shared / "hostile-done").exists(), "the hostile job wrote its files", 60)
    wait_for(workspace.address, hostile, {"RUNNING"})

    for _ in range(2):  # records refreshed, then planned from them: still nothing to retry
        assert argus("apply", workspace.root, "--auto-approve").code == 0
    turn = argus("serve", workspace.root, "--once")
    assert turn.code == 0, turn.err
    assert runs_of(workspace, "hostile") == [hostile]  # no extra attempt beside the one Ray runs
    assert runs_of(workspace, "victim") == [victim]
    status = argus("status", workspace.root)
    rows = {line.split()[0]: line for line in status.out.splitlines() if line.startswith("job.")}
    assert "RUNNING" in rows["job.hostile"] and "RUNNING" in rows["job.victim"], status.out
    assert wait_for(workspace.address, hostile, {"RUNNING"})

    gate.write_text("go")  # the victim now fails for real: its retry runs, whatever record was forged
    wait_for(workspace.address, victim, {"FAILED"})
    for _ in range(2):
        assert argus("apply", workspace.root, "--auto-approve").code == 0
    second = victim.removesuffix(".1") + ".2"
    assert runs_of(workspace, "victim") == [victim, second]

    shown = argus("logs", workspace.root, "hostile")
    assert MARKER not in shown.out + shown.err
    loop = serve(workspace, "--interval", "60", "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        page = until(lambda: _page(f"{site}logs/{hostile}"), "the loop's first turn serves the run's log", 60)
        index = until(lambda: _page(site), "the status page", 60)
    finally:
        stopped(loop)
    assert MARKER not in page and MARKER not in index
    assert Path(outside / "driver.log").read_text() == f"{MARKER}\n"  # the outside file is untouched too


def _page(url: str) -> str | None:
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except urllib.error.HTTPError:  # 404 until the loop's first turn knows the run
        return None
