"""Nothing stranded by a cancel, and admitted capacity never oversubscribed, on the real Ray cluster
whose worker has 3 logical GPUs (gpu_cluster).

An apply killed between writing its admission and submitting leaves an admitted entry Ray never lists:
the same job planned again reuses it (it is that very run), and any other argus releases it as soon
as the admitting process is gone (its liveness lock is free), not ten minutes later."""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from reconcile.plan.queue import decide_cluster, holds
from state.observed import ClusterQueue, ClusterState, LedgerEntry, Node, RayJob, RunStatus
from state.queue.ledger import read_ledger
from tests.support.cluster import jobs_of, until
from tests.support.gpu_queue import serve, stop, stop_all, team

KILLS = 30
ACTIVE = ("PENDING", "RUNNING")


def held_job(ws, name: str, gate: Path, gpus: int = 1, seconds: float | None = None) -> None:
    """A command job demanding `gpus` that runs until `gate` exists (or for `seconds`)."""
    wait = f"time.sleep({seconds})" if seconds else \
        f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(gate)!r}), True)]"
    ws.write(f"jobs/{name}.yaml", f"""
        kind: Job
        name: {name}
        cluster: local
        workload: command
        entrypoint: [python3, -c, {json.dumps(f"import os, time; {wait}")}]
        demand: {{GPU: {gpus}}}
        """)


def cli(*args: str | Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reconcile.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _hung_up(connection: socket.socket) -> bool:
    readable, _, _ = select.select([connection], [], [], 0)
    return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""


class SlowSubmits:
    """A loopback proxy in front of the real dashboard that holds each submit for `delay` seconds before
    passing it on (a busy head), and drops it if its apply hung up meanwhile: a kill then often falls
    between an admission and Ray accepting its run, which then never reaches Ray."""

    def __init__(self, upstream: str, delay: float) -> None:
        import requests

        self.held: set[str] = set()
        """Jobs whose submits are held until their apply hangs up: a kill then always strands them."""
        held = self.held

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "POST" and self.path.rstrip("/") == "/api/jobs":
                    time.sleep(delay)
                    while _job_of(body) in held and not _hung_up(self.connection):
                        time.sleep(0.05)
                    if _hung_up(self.connection):
                        return  # its apply was killed: this submit never reaches Ray
                answer = requests.request(self.command, upstream + self.path, data=body, timeout=30,
                                          headers={"Content-Type": self.headers.get("Content-Type", "")})
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # an apply killed mid-request leaves a broken pipe: that is the point

        self.server = Server(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _job_of(body: bytes) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        return json.loads(body).get("metadata", {}).get("argus.job")
    return None


def kill_at_a_random_point(apply: subprocess.Popen, rng: random.Random, shared: Path, workspace: str,
                           admits: bool, last: bool = False) -> None:
    """SIGKILL the apply (its whole process group) after a random delay, or, half of the time while it
    still `admits` anything, a random moment after it wrote its first admission (then its first submit
    is held by the proxy): on a loaded machine a delay alone would mostly kill it while it starts. The
    `last` kill falls after the admissions, so the one apply that follows faces them."""
    started = time.time()
    if not admits or (not last and rng.random() < 0.5):
        time.sleep(rng.uniform(0.1, 2.5))
    else:
        deadline = time.monotonic() + 10
        while apply.poll() is None and time.monotonic() < deadline and not any(
                (e.admitted or 0) >= started for e in read_ledger(str(shared), workspace)):
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4 if last else 0.8))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(apply.pid, signal.SIGKILL)
    apply.communicate(timeout=30)


def test_thirty_killed_applies_then_one_apply_runs_every_job_once_at_once(gpu_cluster, shared, tmp_path):
    proxy = SlowSubmits(gpu_cluster.address, delay=0.7)
    ws, gate = team(tmp_path, "cancelled", proxy, shared), tmp_path / "gate"
    for name in ("a", "b", "c"):  # 3 GPUs, 3 jobs of one: a stale admission counted twice queues one
        held_job(ws, name, gate)
    rng, stranded, on_ray = random.Random(25), 0, set()
    proxy.held.add("c")  # c's submits never reach Ray while applies are killed: the last kill strands one
    try:
        for kill in range(KILLS):
            kill_at_a_random_point(cli("apply", ws.root, "--auto-approve"), rng, shared, ws.name, len(on_ray) < 3,
                                   last=kill == KILLS - 1)
            on_ray = {j.submission_id for j in jobs_of(ws.address, ws.name)}
            stranded = sum(bool(e.admitted) and e.submission_id not in on_ray
                           for e in read_ledger(str(shared), ws.name))
        assert "c" not in {j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name)}, stranded
        proxy.held.clear()
        final = cli("apply", ws.root, "--auto-approve")
        out = final.communicate(timeout=120)[0]
        assert final.returncode == 0, out
        assert "queued #" not in out, out  # nothing waits behind its own admission on an idle cluster
        # a submit a kill cut short is in argus's chain but may never have reached Ray: at most once, argus does
        # not send that id again by itself (the plan says so); --replace asks for a new attempt, once
        missing = {"a", "b", "c"} - {j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name)}
        if missing:
            assert "not resubmitted" in out, out
            replaced = cli("apply", ws.root, "--auto-approve", *[f"--replace=job.{name}" for name in sorted(missing)])
            assert replaced.communicate(timeout=120)[0] is not None and replaced.returncode == 0
        on_ray = Counter(j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name))
        assert on_ray == Counter({"a": 1, "b": 1, "c": 1}), on_ray  # each job exactly once, none twice
        ledger = read_ledger(str(shared), ws.name)  # each admission says Ray accepted it, and in which session
        assert sorted(e.job for e in ledger if e.submitted and e.session) == ["a", "b", "c"], ledger
        until(lambda: len([j for j in jobs_of(ws.address, ws.name) if j.status.value in ACTIVE]) == 3,
              "all three running at once", timeout=30)
    finally:
        gate.touch()
        stop_all(gpu_cluster.address, ws)
        proxy.close()


GHOST = textwrap.dedent("""
    import sys, time
    from state.queue import holders as admission_holders
    from state.observed import LedgerEntry
    from state.queue.ledger import write_ledger
    root = sys.argv[1]
    entry = LedgerEntry(workspace="ghost", job="big", cluster="local", submission_id="ghost.big.000000000000.1",
                        spec_hash="0" * 64, arrived=time.time(), seen=time.time(), admitted=time.time(),
                        spread={"GPU": 3.0}, holder=admission_holders.token(root))
    write_ledger(root, "ghost", [entry])
    print("admitted", flush=True)
    time.sleep(600)
""")


def test_an_admission_whose_apply_died_before_submitting_is_released_within_seconds(gpu_cluster, shared, tmp_path,
                                                                                     argus):
    """Another workspace's process admits all three GPUs and dies before submitting: while it lives, the
    GPUs are its; the moment it is SIGKILLed, a plan sees them free (not after ADMIT_GRACE)."""
    ws, gate = team(tmp_path, "bystander", gpu_cluster, shared), tmp_path / "gate"
    held_job(ws, "small", gate)
    ghost = subprocess.Popen([sys.executable, "-c", GHOST, str(shared)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    try:
        assert ghost.stdout is not None and ghost.stdout.readline().strip() == "admitted"
        while_alive = argus("plan", ws.root)
        assert "queued #1" in while_alive.out, while_alive.out + while_alive.err  # its admission holds
        os.killpg(ghost.pid, signal.SIGKILL)
        ghost.wait(timeout=10)
        killed_at = time.monotonic()
        after = argus("plan", ws.root)
        assert "queued #" not in after.out and "step: submit bystander.small" in after.out, after.out + after.err
        assert time.monotonic() - killed_at < 10
        assert argus("apply", ws.root, "--auto-approve").code == 0
        until(lambda: [j for j in jobs_of(ws.address, ws.name) if j.status.value in ACTIVE], "small runs")
    finally:
        if ghost.poll() is None:
            os.killpg(ghost.pid, signal.SIGKILL)
        gate.touch()
        stop_all(gpu_cluster.address, ws)


def test_command_demand_gpus_are_never_oversubscribed_under_serve(gpu_cluster, shared, tmp_path, argus):
    """Four command jobs of one GPU each on three GPUs (Ray reserves none of them: argus alone keeps
    count). Ray's job list, polled while they run, never shows more than three at once; all four run.
    The plan says Ray does not reserve the demand."""
    ws, gate = team(tmp_path, "counted", gpu_cluster, shared), tmp_path / "gate"
    for name in ("w", "x", "y", "z"):
        held_job(ws, name, gate, seconds=3)
    applied = argus("apply", ws.root, "--auto-approve")  # three start, the fourth waits
    assert applied.code == 0, applied.out + applied.err
    assert "Ray reserves only what its driver asks (0 GPU)" in applied.out + applied.err
    assert applied.out.count("queued #1") == 1, applied.out
    loop = serve(ws)  # records mode: it admits what the apply queued once a GPU is free
    most, deadline = 0, time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            jobs = jobs_of(ws.address, ws.name)
            most = max(most, sum(j.status.value in ACTIVE for j in jobs))
            if sum(j.status.value == "SUCCEEDED" for j in jobs) == 4:
                break
            time.sleep(0.1)
    finally:
        stop(loop)
        stop_all(gpu_cluster.address, ws)
    done = Counter(j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name) if j.status.value == "SUCCEEDED")
    assert done == Counter({"w": 1, "x": 1, "y": 1, "z": 1}), done
    assert 2 <= most <= 3  # never a fourth run beside three holding every GPU (and the jobs did share the GPUs)


HOLDER = textwrap.dedent("""
    import sys, time
    from state.queue import holders as admission_holders
    print(admission_holders.token(sys.argv[1]), flush=True)
    time.sleep(600)
""")


def test_a_holder_is_alive_while_its_process_lives_and_gone_the_moment_it_is_killed(tmp_path):
    from state.queue import holders as admission_holders

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert holder.stdout is not None
        token = holder.stdout.readline().strip()
        assert admission_holders.gone(str(tmp_path), [token]) == frozenset()
        assert admission_holders.gone(str(tmp_path), [token]) == frozenset()  # asking twice takes nothing from it
        mine = admission_holders.token(str(tmp_path))
        assert admission_holders.gone(str(tmp_path), [mine]) == frozenset()  # this process's own: alive
        holder.kill()
        holder.wait(timeout=10)
        assert admission_holders.gone(str(tmp_path), [token, mine]) == {token}
        assert not (tmp_path / ".argus/locks/alive" / f"{token}.lock").exists()  # its file is cleaned up
        assert admission_holders.gone(str(tmp_path), ["../../etc/passwd", "0" * 32]) == {"0" * 32}
    finally:
        holder.kill()


# The pure rule (reconcile.plan.queue.holds / decide_cluster), each line of it.

def _entry(sid: str = "ws.j.abc.1", **update) -> LedgerEntry:
    return LedgerEntry(workspace="ws", job="j", cluster="c", submission_id=sid, spec_hash="a" * 64, arrived=1.0,
                       seen=1.0, admitted=1000.0, spread={"GPU": 2.0}, holder="f" * 32).model_copy(update=update)


def _ray(status: str, sid: str = "ws.j.abc.1", job: str = "j") -> RayJob:
    return RayJob(submission_id=sid, status=RunStatus(status), entrypoint="x",
                  metadata={"argus.workspace": "ws", "argus.job": job, "argus.spec_hash": "a" * 64,
                            "argus.attempt": "1"})


def test_an_unsubmitted_admission_holds_while_its_apply_lives_and_not_once_it_is_gone():
    assert holds(_entry(), None, 1001.0)
    assert not holds(_entry(), None, 1001.0, gone=frozenset({"f" * 32}))
    assert not holds(_entry(), None, 1000.0 + 601)  # the grace still bounds it (a forged live holder)


def test_a_submitted_admission_ray_does_not_list_holds_for_its_admission_window_only():
    """Ray lists every job it has: one it does not list is not running, whatever the entry says (signed
    or not). A replayed entry of a run that ended and was deleted from Ray holds nothing."""
    for signed in (False, True):
        submitted = _entry(submitted=1001.0, signed=signed)
        assert holds(submitted, None, 1000.0 + 599)
        assert not holds(submitted, None, 1000.0 + 601)
        assert not holds(submitted, None, 1001.0, gone=frozenset({"f" * 32}))
        assert holds(submitted, _ray("RUNNING"), 10_000.0)  # while Ray lists it running, Ray says
        assert not holds(submitted, _ray("SUCCEEDED"), 1001.0)  # Ray says it ended
        assert not holds(submitted, _ray("RUNNING", job="other"), 1001.0)  # cannot borrow another's run


def test_a_run_planned_again_does_not_wait_behind_its_own_admission():
    from reconcile.model import Ask
    from reconcile.plan.queue import Want

    cluster = ClusterState(name="c", address="x", session_name="s", ray_version="2", jobs=(),
                           nodes=(Node(node_id="n", ip="::1", is_head=False, resources={"GPU": 3.0, "CPU": 8.0}),))
    own = _entry(spread={"GPU": 2.0})
    want = Want(key="ws/j", submission_id=own.submission_id, spec_hash="a" * 64,
                ask=Ask(job="j", spread={"GPU": 2.0}))
    queue = ClusterQueue(entries=(own,))
    assert decide_cluster("ws", cluster, queue, [want], 1001.0)["ws/j"].start  # 2 of 3 GPUs: it, not it twice
    other = Want(key="ws/k", submission_id="ws.k.abc.1", spec_hash="a" * 64, ask=Ask(job="k", spread={"GPU": 2.0}))
    assert not decide_cluster("ws", cluster, queue, [other], 1001.0)["ws/k"].start  # another run: it holds
    foreign = ClusterQueue(entries=(own.model_copy(update={"workspace": "them"}),))
    assert not decide_cluster("ws", cluster, foreign, [want], 1001.0)["ws/j"].start  # only this workspace's own
