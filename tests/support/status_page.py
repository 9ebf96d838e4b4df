"""The serve loop's status page in-process: a plausible TurnReport of workspace llm-rl (failed, retried,
running and queued runs, an apply, the audit, GPUs held; any field overridden), a StatusServer on a free
loopback port fed the way the loop feeds it (`serving`), a plain HTTP client of it (`request`, `get`), and
a real headless Chromium's DOM of a page (`browse_url`).
The status page's and the shared root's tests build on them."""

from __future__ import annotations

import http.client
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconcile.model import Action, Change, Plan, QueueInfo, RunView
from reconcile.report import TurnReport
from reconcile.serve.http import StatusServer
from reconcile.serve.metrics import Metrics
from state.observed import RunStatus

CHROMIUM = "/usr/bin/chromium"
NCCL_LINE = "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE)"


def run(sid: str, status: RunStatus, attempt: int = 1, failure: str | None = None, cluster: str = "gpu",
        started_at: float = 1_714_557_600.0) -> RunView:
    return RunView(submission_id=sid, cluster=cluster, spec_hash="ab" * 32, attempt=attempt, status=status,
                   on_ray=True, failure=failure, started_at=started_at + attempt)


def advised(view: RunView, evidence: tuple[str, ...], advice: str = "Raise NCCL_TIMEOUT; check the fabric.") -> RunView:
    """A run with evidence, and advice where RunView does not derive it from the class itself."""
    fields = RunView.model_fields
    if "evidence" not in fields:
        return _Advised(**view.model_dump(), evidence=evidence, advice=advice)
    return view.model_copy(update={"evidence": evidence, **({"advice": advice} if "advice" in fields else {})})


if "evidence" not in RunView.model_fields:
    class _Advised(RunView):
        """Until RunView carries evidence and advice (the page reads them with getattr)."""

        evidence: tuple[str, ...] = ()
        advice: str | None = None


def report(**fields: object) -> TurnReport:
    ppo_runs = [run("ppo-a1", RunStatus.FAILED, failure="oom"),
                advised(run("ppo-a2", RunStatus.FAILED, attempt=2, failure="nccl_timeout"), (NCCL_LINE,)),
                run("ppo-a3", RunStatus.RUNNING, attempt=3)]
    runs = {"ppo": ppo_runs, "sft": [run("sft-a1", RunStatus.SUCCEEDED)]}
    plan = Plan(workspace="llm-rl", changes=(
        Change(address="job.ppo", action=Action.NOOP, reason="ppo-a3 is RUNNING", current=ppo_runs[-1]),
        Change(address="job.sft", action=Action.NOOP, reason="sft-a1 finished SUCCEEDED", current=runs["sft"][0]),
        Change(address="job.eval", action=Action.SUBMIT, reason="never ran"),
        Change(address="job.big", action=Action.QUEUE, reason="queued #3 on gpu", queue=QueueInfo(
            cluster="gpu", submission_id="big-a1", spec_hash="cd" * 32, attempt=1, demand="8 GPU", gpus=8.0,
            position=3, reason="needs 8 GPU, 2 GPU free; 2 ahead; waits behind vision/vit"))))
    now = time.time()
    values: dict = {"workspace": "llm-rl", "started_at": now - 1.5, "finished_at": now, "ok": True, "interval": 30.0,
                    "sync": "off", "commit": "9f1c2e3d4b5a6978", "plan": plan, "runs": runs, "drift": 2,
                    "retried": (), "notes": ("lock busy: skipped this turn",), "audit_verified": True,
                    "last_apply": {"time": "2024-05-01T10:00:00+00:00", "actor": "ci:alice", "outcome": "applied",
                                   "commit": "9f1c2e3d4b5a6978"},
                    "gpus_held": {"gpu": {"llm-rl": 4.0, "vision": 2.0}}}
    values.update(fields)
    if "finished_at" in fields and "started_at" not in fields:
        values["started_at"] = values["finished_at"] - 1.5
    return TurnReport(**values)


@contextmanager
def serving(metrics: Metrics | None = None, roots: dict[str, str] | None = None):
    """A StatusServer on a free loopback port, and a publish that feeds it the way the loop does."""
    metrics = metrics or Metrics()
    server = StatusServer("127.0.0.1", 0, metrics=metrics, roots=roots or {})

    def publish(turn: TurnReport) -> None:
        metrics.record(turn)
        server.publish(turn)

    try:
        yield server, publish
    finally:
        server.close()


def request(server: StatusServer, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def get(server: StatusServer, path: str) -> tuple[int, str]:
    status, _headers, body = request(server, "GET", path)
    return status, body.decode()


def browse_url(tmp_path: Path, url: str) -> str:
    """The DOM of the page at `url` after a real headless Chromium loaded it."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    profile = tmp_path / "chromium-profile"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--dump-dom", url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout
