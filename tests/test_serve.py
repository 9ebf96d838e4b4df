"""`argus serve` against the real test cluster: the loop retries, syncs, stands by and takes over.

Long-running loops run as real processes (`python -m reconcile.cli serve`), stopped with the
signals an operator would send; `--once` turns run in-process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import QUICK, jobs_of, until, wait_for

from state import audit
from state.lease import lease_path

# Attempt 1 saves a checkpoint and dies of an NCCL timeout; the next attempt resumes from it.
RESUMING = ("import os, sys; d = sys.argv[1]; os.makedirs(d, exist_ok=True); p = os.path.join(d, 'step'); "
            "r = os.path.exists(p); print('resumed from step', open(p).read()) if r else (open(p, 'w').write('40'), "
            "print('[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) "
            "ran for 600012 milliseconds before timing out.')); sys.exit(0 if r else 1)")
POLICY = "retry: {max_attempts: 3, on: [nccl_timeout]}\n"
SLEEPER = ["python3", "-c", "import time; time.sleep(300)"]


def serve(workspace, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(workspace.root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stopped(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Stop a loop the way an operator would and return its exit code and stderr."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


def runs_of(workspace, job: str) -> list[str]:
    return sorted(j.submission_id for j in jobs_of(workspace.address, workspace.name)
                  if (j.metadata or {}).get("argus.job") == job)


def test_the_loop_retries_a_retryable_failure_without_any_apply(workspace, argus):
    checkpoints = "${shared_root}/outputs/checkpoints/flaky"
    workspace.job("flaky", ["python3", "-c", RESUMING, checkpoints], extra=POLICY)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = runs_of(workspace, "flaky")
    wait_for(workspace.address, first, {"FAILED"})
    failed_at = time.monotonic()
    loop = serve(workspace, "--interval", "3", "--log-format", "json")
    try:
        second = until(lambda: [s for s in runs_of(workspace, "flaky") if s != first], "a second attempt", 30)[0]
        assert time.monotonic() - failed_at < 2 * 3 + 10  # within two intervals (plus the loop's start-up)
        assert second.endswith(".2")
        wait_for(workspace.address, second, {"SUCCEEDED"})
        log = workspace.shared / "jobs" / second / "logs" / "driver.log"
        until(lambda: log.exists() and "resumed from step 40" in log.read_text(), "attempt 2 resumed")
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    assert "finishing this turn, then stopping" in err and "lease released" in err
    assert not lease_path(str(workspace.shared), workspace.name).exists()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(second in line["retried"] for line in lines)
    entries = audit.read(str(workspace.shared), workspace.name)
    submitted = [e for e in entries if e["event"] == "action" and e.get("submission_id") == second]
    assert submitted and all(e["actor"].startswith("argus serve@") for e in submitted)
    assert runs_of(workspace, "flaky") == [first, second]  # exactly one retry, never a duplicate


def test_sync_off_changes_nothing_but_records_and_sync_auto_applies(workspace, argus):
    workspace.job("kept", SLEEPER)
    workspace.job("gone", SLEEPER)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.remove("jobs/gone.yaml")
    workspace.job("added", QUICK)

    off = argus("serve", workspace.root, "--once")
    assert off.code == 0, off.err
    assert "drift=2" in off.err
    assert runs_of(workspace, "added") == []
    [gone] = runs_of(workspace, "gone")
    assert wait_for(workspace.address, gone, {"RUNNING", "PENDING"})

    auto = argus("serve", workspace.root, "--once", "--sync", "auto")
    assert auto.code == 0, auto.err
    assert "job.added" in auto.err and "job.gone" in auto.err
    wait_for(workspace.address, gone, {"STOPPED"})
    [added] = runs_of(workspace, "added")
    wait_for(workspace.address, added, {"SUCCEEDED"})
    again = argus("serve", workspace.root, "--once", "--sync", "auto", "--log-format", "json")
    line = json.loads(again.err.strip().splitlines()[-2])
    assert line["drift"] == 0 and line["applied"] == [] and line["ok"] is True


def test_a_standby_takes_over_after_the_active_loop_is_killed(workspace, argus):
    workspace.job("steady", SLEEPER)
    interval = 2.0
    first = serve(workspace, "--interval", str(interval), "--sync", "auto")
    lease = lease_path(str(workspace.shared), workspace.name)
    until(lambda: lease.exists(), "the first loop holds the lease", 30)
    second = serve(workspace, "--interval", str(interval), "--sync", "auto")
    try:
        until(lambda: runs_of(workspace, "steady"), "the active loop submitted the job", 30)
        holder = json.loads(lease.read_text())["holder"]
        assert holder.split(":")[1] == str(first.pid)
        time.sleep(interval * 2)
        assert json.loads(lease.read_text())["holder"] == holder  # the standby waits while the holder renews
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
        killed_at = time.monotonic()
        until(lambda: json.loads(lease.read_text())["holder"].split(":")[1] == str(second.pid),
              "the standby took the lease", 3 * interval + 5)
        assert time.monotonic() - killed_at <= 3 * interval + 1
        workspace.job("later", QUICK)
        until(lambda: runs_of(workspace, "later"), "the new active loop applies", 30)
    finally:
        code, err = stopped(second)
    assert "standby:" not in err or "active for workspace" in err
    assert len(runs_of(workspace, "steady")) == 1  # no duplicate run across the takeover
    assert code == 0, err


def test_git_pull_fast_forwards_and_refuses_a_dirty_checkout(workspace, argus, tmp_path):
    origin = tmp_path / "origin.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(workspace.root)], check=True)
    (workspace.root / ".gitignore").write_text(".shared/\n")
    subprocess.run([*git, "-C", str(workspace.root), "add", "."], check=True)
    subprocess.run([*git, "-C", str(workspace.root), "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(workspace.root), str(origin)], check=True)
    subprocess.run([*git, "-C", str(workspace.root), "remote", "add", "origin", str(origin)], check=True)
    subprocess.run([*git, "-C", str(workspace.root), "fetch", "-q", "origin"], check=True)
    subprocess.run([*git, "-C", str(workspace.root), "branch", "-q", "-u", "origin/main"], check=True)

    pusher = tmp_path / "pusher"
    subprocess.run([*git, "clone", "-q", str(origin), str(pusher)], check=True)
    (pusher / "jobs").mkdir(exist_ok=True)
    (pusher / "jobs" / "pulled.yaml").write_text("kind: Job\nname: pulled\ncluster: local\nworkload: command\n"
                                                 "entrypoint: [python3, -c, 'print(1)']\n")
    subprocess.run([*git, "-C", str(pusher), "add", "."], check=True)
    subprocess.run([*git, "-C", str(pusher), "commit", "-qm", "add pulled"], check=True)
    subprocess.run([*git, "-C", str(pusher), "push", "-q", "origin", "main"], check=True)

    (workspace.root / "scratch.yaml").write_text("# someone is editing here\n")
    dirty = argus("serve", workspace.root, "--once", "--sync", "auto", "--git-pull")
    assert "uncommitted or untracked files: not pulled, not applied" in dirty.err
    assert not (workspace.root / "jobs" / "pulled.yaml").exists() and runs_of(workspace, "pulled") == []

    (workspace.root / "scratch.yaml").unlink()
    clean = argus("serve", workspace.root, "--once", "--sync", "auto", "--git-pull")
    assert clean.code == 0, clean.err
    assert (workspace.root / "jobs" / "pulled.yaml").exists()
    [pulled] = runs_of(workspace, "pulled")
    wait_for(workspace.address, pulled, {"SUCCEEDED"})


def test_serve_refuses_a_bad_listen_address(workspace, argus):
    result = argus("serve", workspace.root, "--once", "--listen", "nowhere")
    assert result.code == 1 and "--listen 'nowhere': give HOST:PORT" in result.err
    assert not Path(lease_path(str(workspace.shared), workspace.name)).exists()
