"""Runs keep their own record on the shared root, on a real Ray cluster: a stop still reaches the
command inside the wrapper, and `argus logs` serves runs Ray forgot and older attempts from NFS."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from pathlib import Path

from state.runs.records import job_dir, read_end, read_record
from tests.support.cluster import jobs_of, sdk, until, wait_for


def test_a_stop_reaches_the_wrapped_command(workspace, argus, tmp_path):
    marker = tmp_path / "command-got-term"
    script = f'trap "echo cleaning up; touch {marker}; exit 0" TERM; echo started; while true; do sleep 0.1; done'
    workspace.job("stoppable", ["sh", "-c", script])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = [j for j in jobs_of(workspace.address, workspace.name) if j.metadata["argus.job"] == "stoppable"]
    driver_log = job_dir(str(workspace.shared), job.submission_id) / "logs" / "driver.log"
    until(lambda: driver_log.exists() and "started" in driver_log.read_text(), "the run wrote to its NFS log")

    workspace.job("stoppable", ["sh", "-c", script], "state: stopped\n")
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert wait_for(workspace.address, job.submission_id, {"STOPPED"}) == "STOPPED"
    assert marker.exists(), "the stop never reached the command inside the wrapper"
    assert "cleaning up" in driver_log.read_text()
    end = read_end(str(workspace.shared), job.submission_id)
    assert end is not None and end.signalled and end.signal == "TERM"
    assert read_record(str(workspace.shared), job.submission_id).status == "STOPPED"
    # Ray's log holds what the run kept on NFS (Ray adds its own first line).
    assert sdk(workspace.address).get_job_logs(job.submission_id).endswith(driver_log.read_text())


def test_logs_of_a_forgotten_run_and_of_an_older_attempt(workspace, argus):
    workspace.job("echoer", ["sh", "-c", "echo this is run ${submission_id}"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    first = _only(workspace, "echoer")
    wait_for(workspace.address, first, {"SUCCEEDED"})
    again = argus("apply", workspace.root, "--auto-approve", "--replace", "job.echoer")
    assert again.code == 0, again.out + again.err
    second = next(j.submission_id for j in jobs_of(workspace.address, workspace.name)
                  if j.metadata["argus.job"] == "echoer" and j.submission_id != first)
    wait_for(workspace.address, second, {"SUCCEEDED"})
    assert first.endswith(".1") and second.endswith(".2")
    sdk(workspace.address).delete_job(first)  # Ray forgets attempt 1

    current = argus("logs", "echoer", workspace.root)
    assert current.code == 0 and f"this is run {second}" in current.out, current.out + current.err
    older = argus("logs", "echoer", workspace.root, "--attempt", "1")
    assert older.code == 0 and f"this is run {first}" in older.out, older.out + older.err
    by_id = json.loads(argus("logs", "echoer", workspace.root, "--run", first, "--json").out)
    assert by_id["source"] == "nfs" and f"this is run {first}" in by_id["logs"]
    assert by_id["health"] == "forgotten (SUCCEEDED)"
    followed = argus("logs", "echoer", workspace.root, "--attempt", "1", "--follow")
    assert followed.code == 0 and f"this is run {first}" in followed.out  # a finished run: printed, not waited on

    missing = argus("logs", "echoer", workspace.root, "--attempt", "7")
    assert missing.code == 1 and "no attempt 7" in missing.err and first in missing.err and second in missing.err
    wrong = argus("logs", "echoer", workspace.root, "--run", "someone.else.1")
    assert wrong.code == 1 and "has no run someone.else.1" in wrong.err
    nosuch = argus("logs", "nosuchjob", workspace.root)
    assert nosuch.code == 1 and "No such job: job.nosuchjob" in nosuch.err and "echoer" in nosuch.err


def test_follow_tails_the_nfs_log_until_the_run_writes_its_end(workspace, argus, tmp_path):
    gate = tmp_path / "may-end"
    script = f"echo first; while [ ! -e {gate} ]; do sleep 0.1; done; echo last words"
    workspace.job("slow", ["sh", "-c", script])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    sid = _only(workspace, "slow")
    wait_for(workspace.address, sid, {"RUNNING"})
    log = job_dir(str(workspace.shared), sid) / "logs" / "driver.log"
    until(lambda: log.exists() and "first" in log.read_text(), "the run started writing")
    threading.Timer(2.0, gate.touch).start()
    followed = argus("logs", "slow", workspace.root, "--follow")
    assert followed.code == 0, followed.err
    assert followed.out.index("first") < followed.out.index("last words")
    assert read_end(str(workspace.shared), sid) is not None


def _only(workspace, job: str) -> str:
    [sid] = [j.submission_id for j in jobs_of(workspace.address, workspace.name) if j.metadata["argus.job"] == job]
    return sid


def test_a_killed_job_supervisor_is_node_lost_and_retried_as_before(workspace, argus):
    """The worker process that runs the job (Ray's JobSupervisor) dies mid-run: Ray fails the job,
    its process group is SIGKILLed with the wrapper (so no exit.json), and the run is node_lost."""
    script = "echo pid=$$; while true; do sleep 0.1; done"
    workspace.job("doomed", ["sh", "-c", script], "retry: {max_attempts: 2, on: [node_lost]}\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    sid = _only(workspace, "doomed")
    log = job_dir(str(workspace.shared), sid) / "logs" / "driver.log"
    command = until(lambda: log.exists() and re.search(r"pid=(\d+)", log.read_text()), "the run started")
    os.kill(_supervisor_of(int(command.group(1))), signal.SIGKILL)  # the actor running the job this test submitted
    assert wait_for(workspace.address, sid, {"FAILED"}) == "FAILED"
    plan = argus("plan", workspace.root)
    assert f"attempt 2/2: {sid} node_lost" in plan.out
    assert read_end(str(workspace.shared), sid) is None


def _supervisor_of(pid: int) -> int:
    """The ray::JobSupervisor process above a job's command (its wrapper's parent)."""
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"JobSupervisor" in cmdline:
            return pid
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise AssertionError("no JobSupervisor above the job's command")


def test_one_debug_text_for_many_runs_is_written_once_and_a_planted_link_is_replaced_not_followed(tmp_path):
    from state.runs.records import write_debug_to_all

    shared, outside = tmp_path / "shared", tmp_path / "outside.txt"
    outside.write_text("not argus's\n")
    ids = [f"team-j{i}-0123abcd-1" for i in range(3)]
    planted = job_dir(str(shared), ids[2]) / "debug" / "ray_job_list_post.txt"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(outside)

    write_debug_to_all(str(shared), ids, "ray_job_list_post.txt", "SUBMISSION_ID\nteam-j0\n")
    files = [job_dir(str(shared), i) / "debug" / "ray_job_list_post.txt" for i in ids]
    assert [f.read_text() for f in files] == ["SUBMISSION_ID\nteam-j0\n"] * 3
    assert len({f.stat().st_ino for f in files}) == 1  # one file, three names: not three copies
    assert not planted.is_symlink() and outside.read_text() == "not argus's\n"

    write_debug_to_all(str(shared), ids[1:], "ray_job_list_post.txt", "newer\n")
    assert [f.read_text() for f in files] == ["SUBMISSION_ID\nteam-j0\n", "newer\n", "newer\n"]
