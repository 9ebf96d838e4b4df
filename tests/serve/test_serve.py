"""`argus serve` against the real test cluster: the loop retries, syncs, stands by and takes over.

Long-running loops run as real processes (`python -m reconcile.cli serve`), stopped with the
signals an operator would send; `--once` turns run in-process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from state.audit import log as audit
from state.queue.lease import lease_path
from tests.support.cluster import QUICK, until, wait_for
from tests.support.loops import listening, runs_of, serve, stopped

# Attempt 1 saves a checkpoint and dies of an NCCL timeout; the next attempt resumes from it.
RESUMING = ("import os, sys; d = sys.argv[1]; os.makedirs(d, exist_ok=True); p = os.path.join(d, 'step'); "
            "r = os.path.exists(p); print('resumed from step', open(p).read()) if r else (open(p, 'w').write('40'), "
            "print('[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) "
            "ran for 600012 milliseconds before timing out.')); sys.exit(0 if r else 1)")
POLICY = "retry: {max_attempts: 3, on: [nccl_timeout]}\n"
SLEEPER = ["python3", "-c", "import time; time.sleep(300)"]


def test_the_loop_retries_notifies_once_and_shows_it(workspace, argus, hook, tmp_path):
    url, events = hook
    checkpoints = "${shared_root}/outputs/checkpoints/flaky"
    workspace.job("flaky", ["python3", "-c", RESUMING, checkpoints], extra=POLICY)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = runs_of(workspace, "flaky")
    wait_for(workspace.address, first, {"FAILED"})
    failed_at = time.monotonic()
    loop = serve(workspace, "--interval", "3", "--log-format", "json", "--notify", url, "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        second = until(lambda: [s for s in runs_of(workspace, "flaky") if s != first], "a second attempt", 30)[0]
        assert time.monotonic() - failed_at < 2 * 3 + 10  # within two intervals (plus the loop's start-up)
        assert second.endswith(".2")
        wait_for(workspace.address, second, {"SUCCEEDED"})
        log = workspace.shared / "jobs" / second / "logs" / "driver.log"
        until(lambda: log.exists() and "resumed from step 40" in log.read_text(), "attempt 2 resumed")
        until(lambda: {"failed", "retried", "recovered"} <= {e["kind"] for e in events}, "the events arrived")
        ws = ("workspace", workspace.name)
        succeeded = ("argus_runs", (("cluster", "local"), ("job", "flaky"), ("status", "SUCCEEDED"), ws))
        until(lambda: _metrics(site).get(succeeded), "metrics")
        samples = _metrics(site)
        assert samples[("argus_retries_total", (("job", "flaky"), ws))] == 1
        assert samples[("argus_loop_active", (ws,))] == 1
        assert urllib.request.urlopen(f"{site}healthz", timeout=10).status == 200
        page = _browse(tmp_path, site)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    assert "finishing this turn, then stopping" in err and "lease released" in err
    assert not lease_path(str(workspace.shared), workspace.name).exists()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(second in line.get("retried", ()) for line in lines)
    entries = audit.read(str(workspace.shared), workspace.name)
    submitted = [e for e in entries if e["event"] == "action" and e.get("submission_id") == second]
    assert submitted and all(e["actor"].startswith("argus serve@") for e in submitted)
    assert runs_of(workspace, "flaky") == [first, second]  # exactly one retry, never a duplicate

    [failed] = [e for e in events if e["kind"] == "failed"]
    assert (failed["argus_event_version"], failed["submission_id"], failed["failure"]) == (1, first, "nccl_timeout")
    assert failed["advice"] and failed["attempt"] == 1 and failed["max_attempts"] == 3
    assert failed["next"].startswith("retries it as attempt 2 of 3")
    assert (failed["report"]["cause"]["class"], failed["report"]["next"]["action"]) == ("nccl_timeout", "retry")
    assert any("Watchdog caught collective operation timeout" in line for line in failed["evidence"])
    assert "flaky" in page and second in page and "SUCCEEDED" in page

    again = argus("serve", workspace.root, "--once", "--notify", url)  # a restarted loop
    assert again.code == 0, again.err
    kinds = [e["kind"] for e in events]
    assert kinds.count("failed") == 1 and kinds.count("retried") == 1 and kinds.count("recovered") == 1


def _metrics(site: str) -> dict:
    text = urllib.request.urlopen(f"{site}metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _browse(tmp_path: Path, site: str) -> str:
    chromium = "/usr/bin/chromium"
    assert os.access(chromium, os.X_OK), "chromium is missing: `make test` installs Debian's chromium"
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", site]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


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
    logged = [json.loads(line) for line in again.err.strip().splitlines()]  # every line one JSON object
    line = logged[-2]
    assert line["drift"] == 0 and line["applied"] == [] and line["ok"] is True


def test_a_standby_takes_over_after_the_active_loop_is_killed(workspace, argus):
    workspace.job("steady", SLEEPER)
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # lays out the shared root
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
    (workspace.root / ".gitignore").write_text(".shared/\nlocal/\n")
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

    assert argus("apply", workspace.root, "--auto-approve").code == 0  # lays out the shared root
    (workspace.root / "scratch.yaml").write_text("# someone is editing here\n")
    dirty = argus("serve", workspace.root, "--once", "--sync", "auto", "--git-pull")
    assert "uncommitted or untracked files: not pulled, not applied" in dirty.err
    assert not (workspace.root / "jobs" / "pulled.yaml").exists() and runs_of(workspace, "pulled") == []

    (workspace.root / "scratch.yaml").unlink()
    (workspace.root / "local").mkdir()  # ignored by git, read by the loader
    (workspace.root / "local" / "mine.yaml").write_text("kind: Job\nname: unreviewed\ncluster: local\n"
                                                       "workload: command\nentrypoint: [python3, -c, 'print(2)']\n")
    hidden = argus("serve", workspace.root, "--once", "--sync", "auto", "--git-pull")
    assert "spec files git does not track (ignored or new): local/mine.yaml" in hidden.err, hidden.err
    assert runs_of(workspace, "unreviewed") == [] and runs_of(workspace, "pulled") == []
    (workspace.root / "local" / "mine.yaml").unlink()
    clean = argus("serve", workspace.root, "--once", "--sync", "auto", "--git-pull")
    assert clean.code == 0, clean.err
    assert (workspace.root / "jobs" / "pulled.yaml").exists()
    [pulled] = runs_of(workspace, "pulled")
    wait_for(workspace.address, pulled, {"SUCCEEDED"})


def test_serve_refuses_a_bad_listen_address(workspace, argus):
    result = argus("serve", workspace.root, "--once", "--listen", "nowhere")
    assert result.code == 1 and "--listen 'nowhere': give HOST:PORT" in result.err
    assert not Path(lease_path(str(workspace.shared), workspace.name)).exists()
