"""Routes of argus.yaml through a real serve turn on the shared test cluster: one job's failures go to
receiver A, everything else to receiver B, a receiver that is down hears nothing; the events carry
the run's exit code and end, and links to the page, the log and the commit; the turn's log line says
"sent" for exactly what the receivers took."""

from __future__ import annotations

import json
import socket
import subprocess

from tests.support.cluster import wait_for
from tests.support.loops import runs_of
from tests.support.receivers import Receiver

ROUTES = """
notifications:
  routes:
    - name: train-a
      events: [failed]
      jobs: [train-a]
      to: ["${env:ARGUS_NOTIFY_A}"]
      template: short
      stop: true
    - name: rest
      to: ["${env:ARGUS_NOTIFY_B}"]
    - name: pager
      events: [failed]
      jobs: [eval]
      to: ["${env:ARGUS_NOTIFY_DOWN}"]
  templates:
    short:
      title: "${job} exited ${exit_code}"
"""


def _git(root, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_route_sends_one_jobs_failures_to_a_and_the_rest_to_b(workspace, argus, monkeypatch):
    a, b = Receiver(), Receiver()
    with socket.create_server(("127.0.0.1", 0)) as sock:
        down = sock.getsockname()[1]
    monkeypatch.setenv("ARGUS_NOTIFY_A", f"json://127.0.0.1:{a.port}/a")
    monkeypatch.setenv("ARGUS_NOTIFY_B", f"json://127.0.0.1:{b.port}/b")
    monkeypatch.setenv("ARGUS_NOTIFY_DOWN", f"json://127.0.0.1:{down}/down?cto=1&rto=1")
    workspace.write("argus.yaml", f"kind: Workspace\nname: {workspace.name}\n{ROUTES}")
    workspace.write(".gitignore", ".shared/\n")
    workspace.job("train-a", ["python3", "-c", "import sys; sys.exit(3)"])
    workspace.job("eval", ["python3", "-c", "import sys; print('<!channel> @here'); sys.exit(1)"])
    _git(workspace.root, "init", "-q")
    _git(workspace.root, "remote", "add", "origin", "https://github.com/acme/training.git")
    _git(workspace.root, "add", ".")
    _git(workspace.root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "routes")
    commit = _git(workspace.root, "rev-parse", "HEAD")
    try:
        assert argus("apply", workspace.root, "--auto-approve").code == 0
        [train] = runs_of(workspace, "train-a")
        [evaluation] = runs_of(workspace, "eval")
        for run in (train, evaluation):
            wait_for(workspace.address, run, {"FAILED"})

        turn = argus("serve", workspace.root, "--once", "--listen", "127.0.0.1:0", "--log-format", "json")
        assert turn.code == 0, turn.err
        page = turn.out.split("listening on ", 1)[1].split()[0]

        [to_a] = a.events()
        assert (to_a["kind"], to_a["job"], to_a["submission_id"]) == ("failed", "train-a", train)
        assert json.loads(a.received[0]["body"])["title"] == f"[{workspace.name}] train-a exited 3"
        assert to_a["exit_code"] == 3 and to_a["ended_at"] and to_a["status"] == "FAILED"
        assert (to_a["page_url"], to_a["log_url"]) == (page, f"{page}logs/{train}")
        assert to_a["commit"] == commit and to_a["commit_url"] == f"https://github.com/acme/training/commit/{commit}"
        assert [(e["kind"], e["job"]) for e in b.events()] == [("failed", "eval")]  # train-a's stopped at route A
        assert b.events()[0]["exit_code"] == 1

        [line] = [json.loads(x) for x in turn.err.splitlines() if x.startswith("{") and "turn" in json.loads(x)]
        assert sorted(line["sent"]) == sorted([f"failed to route train-a $ARGUS_NOTIFY_A#1 json://127.0.0.1:{a.port}",
                                               f"failed to route rest $ARGUS_NOTIFY_B#1 json://127.0.0.1:{b.port}"])
        assert f"route pager $ARGUS_NOTIFY_DOWN#1 json://127.0.0.1:{down}: event" in turn.err  # a problem, not sent

        again = argus("serve", workspace.root, "--once", "--log-format", "json")  # the next turn: nothing new
        [line] = [json.loads(x) for x in again.err.splitlines() if x.startswith("{") and "turn" in json.loads(x)]
        assert line["sent"] == [] and "failed" in line["events"]
        assert len(a.received) == 1 and len(b.received) == 1
    finally:
        a.close()
        b.close()
