"""`argus serve` loops as real child processes on the session's Ray cluster (the conftest `workspace`):
start one with its stdout on a pipe, read the status page's address from the line it prints, stop it the
way an operator would (a signal), and list a job's runs on Ray, the independent witness of what the loop
did. The serve loop's, the drift's and the run evidence's tests build on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.support.cluster import jobs_of


def serve(workspace, *args: str) -> subprocess.Popen:
    """`argus serve` of the workspace with `args`, its stdout and stderr on pipes."""
    return subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(workspace.root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stopped(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Stop a loop the way an operator would and return its exit code and stderr."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


def runs_of(workspace, job: str) -> list[str]:
    """The submission ids of the runs of `job` Ray lists, sorted."""
    return sorted(j.submission_id for j in jobs_of(workspace.address, workspace.name)
                  if (j.metadata or {}).get("argus.job") == job)


def listening(loop: subprocess.Popen) -> str:
    """The address of the status page a loop started with `--listen` says it serves."""
    line = loop.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    return line.split("listening on ", 1)[1].strip()
