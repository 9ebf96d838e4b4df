"""`argus serve A B`: several workspaces in one process, one lease each, one page per cluster.

Two teams share conftest's `gpu_cluster` (3 logical GPUs) through one shared root: the vision team's own
loop holds its lease and runs its job, one `argus serve nlp vision --listen` keeps both (active for nlp,
standby for vision), and its page, looked at in headless Chromium, shows both teams' jobs and the shared
queue. The runner of several loops and /healthz are also checked in-process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from reconcile.serve.http import StatusServer
from reconcile.serve.loop import Loop, LoopSettings
from reconcile.serve.loops import run_all
from reconcile.serve.metrics import Metrics
from reconcile.serve.turn import TurnOptions
from reconcile.views.html import Kept, Site, render_page
from state.code.gitinfo import origin_url
from state.observed import RunStatus
from state.queue.lease import lease_path
from state.runs.records import job_dir
from tests.support import gpu_queue
from tests.support.cluster import jobs_of, until
from tests.support.loops import listening, stopped
from tests.support.status_page import browse_url, get, report, run

HOLDS = ["python3", "-c", "import time; time.sleep(120)"]
"""A run that holds its GPUs for the whole test (stopped at its end)."""
WAITS = r"<td>1</td><td>nlp</td><td>job\.train</td><td>2</td><td>2 GPU[^<]*</td>.*1 GPU free"
"""nlp's job in the shared queue: first, behind vision's run holding 2 of the 3 GPUs."""


def test_one_serve_keeps_two_teams_and_its_page_shows_both_and_the_shared_queue(tmp_path, gpu_cluster, shared):
    nlp, vision = (gpu_queue.team(tmp_path, name, gpu_cluster, shared) for name in ("nlp", "vision"))
    vision.job("vit", HOLDS, extra="demand: {GPU: 2}\n")
    nlp.job("train", HOLDS, extra="demand: {GPU: 2}\n")
    own = gpu_queue.serve(vision, "--sync", "auto")  # the vision team's own loop, elsewhere in real life
    both = None
    try:
        # generous: late in the suite another test's run may still hold the session's GPU cluster for a while
        until(lambda: gpu_queue.active(vision) == ["vit"], "the vision loop started its job", 150)
        both = subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(nlp.root), str(vision.root),
                                 "--interval", "1", "--sync", "auto", "--listen", "127.0.0.1:0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        site = listening(both)
        # the shared queue is read at the start of a turn: the turn that queues nlp's job shows it in nlp's
        # section, the next one in the shared queue
        until(lambda: re.search(WAITS, fetch(site)[1].split("Shared queue", 1)[-1].split("</table>", 1)[0]),
              "nlp's job waits in the shared queue", 60)
        status, health = fetch(site + "healthz")
        dom = browse_url(tmp_path, site)
        assert gpu_queue.active(nlp) == [], "nlp's job waits: vision's run holds 2 of the 3 GPUs"
        gpu_queue.stop(own)  # the vision team stops its loop: the shared serve takes its lease over
        until(lambda: "vision: active ok" in fetch(site + "healthz")[1], "the standby took vision's lease", 30)
        taken = json.loads(lease_path(str(shared), "vision").read_text())["holder"]
    finally:
        if own.poll() is None:
            gpu_queue.stop(own)
        code, err = stopped(both) if both is not None else (None, "")
        gpu_queue.stop_all(gpu_cluster.address, nlp, vision)
    assert status == 200, health
    assert "nlp: active ok" in health and f"vision: standby (held by {socket.gethostname()}:{own.pid})" in health
    assert "argus · cluster local" in dom and "nlp</a>: active" in dom and "vision</a>: standby" in dom
    shared_queue = dom.split("Shared queue", 1)[1].split("</table>", 1)[0]
    assert re.search(WAITS, shared_queue), dom
    holding = dom.split("Runs holding resources", 1)[1].split("</table>", 1)[0]
    assert "<td>vision</td><td>job.vit</td>" in holding
    assert re.search(r"<td>vision</td><td>job\.vit</td><td><code>[^<]+</code></td><td>(PENDING|RUNNING)</td>", dom)
    assert f'href="{gpu_cluster.address.rstrip("/")}/#/jobs/' in dom, "the run's page on the Ray dashboard"
    assert '<section id="ws-nlp">' in dom and "job.train" in dom and "<script" not in dom.lower()
    assert "runs are listed above" in dom.split('<section id="ws-vision">', 1)[1]
    assert taken.split(":")[1] == str(both.pid)
    assert code == 0, err
    assert [j.submission_id for j in jobs_of(nlp.address, nlp.name)] == [], "nlp's job never started"


def test_healthz_tells_active_from_standby_per_workspace():
    server = StatusServer("127.0.0.1", 0, Metrics(), kept=[Kept("nlp"), Kept("vision")])
    try:
        first = get(server, "/healthz")
        server.publish(report(workspace="nlp"))
        server.publish(report(workspace="vision", plan=None, runs={}, standby="gpu-7:4242:0a1b2c3d"))
        both = get(server, "/healthz")
        server.publish(report(workspace="vision", plan=None, runs={}, standby="nobody"))
        orphan = get(server, "/healthz")
        server.crashed("nlp", "RuntimeError: boom")
        crashed = get(server, "/healthz")
    finally:
        server.close()
    assert first[0] == 503 and "nlp: no turn has finished yet" in first[1]
    assert both == (200, "ok\nnlp: active ok\nvision: standby (held by gpu-7:4242)\n")
    assert orphan[0] == 503 and orphan[1].startswith("unhealthy: vision\n")
    assert crashed[0] == 503 and crashed[1].startswith("unhealthy: nlp, vision\n")
    assert "nlp: crashed: RuntimeError: boom" in crashed[1]


def test_a_crashing_loop_is_told_and_the_others_go_on_until_a_signal_stops_them(tmp_path):
    shared = tmp_path / "nfs"
    (shared / ".argus").mkdir(parents=True)
    told: list[tuple[str, str]] = []

    def broken(_report) -> None:
        raise RuntimeError("a publisher's bug")

    loops = [Loop(tmp_path / name, str(shared), name, LoopSettings(TurnOptions(interval=1.0), watch=0,
                                                                  publish=[broken] if name == "a" else []))
             for name in ("a", "b")]
    survivor = loops[1]

    def stop_later() -> None:
        try:
            until(lambda: survivor.turns >= 3, "b goes on turning", 30)
        finally:  # the way an operator stops the process: one signal for every loop
            os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_later)
    stopper.start()
    code = run_all(loops, crashed=lambda ws, why: told.append((ws, why)))
    stopper.join(timeout=10)
    assert told == [("a", "RuntimeError: a publisher's bug")]
    assert loops[0].turns == 1 and survivor.turns >= 3 and survivor.stopping.is_set()
    assert code == 1
    assert not lease_path(str(shared), "a").exists() and not lease_path(str(shared), "b").exists()


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_logs_are_served_for_every_kept_workspaces_runs_from_its_own_root_and_nothing_else(tmp_path):
    roots = {name: tmp_path / f"nfs-{name}" for name in ("nlp", "vision")}
    for name, root in roots.items():
        log = job_dir(str(root), f"{name}-a1") / "logs" / "driver.log"
        log.parent.mkdir(parents=True)
        log.write_text(f"{name}'s own log\n")
    other = job_dir(str(roots["vision"]), "audio-a1") / "logs" / "driver.log"
    other.parent.mkdir(parents=True)
    other.write_text("another team's log\n")
    kept = [Kept(name, {"gpu": Site("http://10.0.0.1:8265", str(root))}) for name, root in roots.items()]
    server = StatusServer("127.0.0.1", 0, Metrics(), kept=kept)
    try:
        for name in roots:
            server.publish(report(workspace=name, runs={"train": [run(f"{name}-a1", RunStatus.RUNNING)]}))
        served = {name: get(server, f"/logs/{name}-a1") for name in roots}
        refused = [get(server, path)[0] for path in ("/logs/audio-a1", "/logs/..%2fnfs-vision", "/logs/")]
        page = get(server, "/")[1]
    finally:
        server.close()
    assert served == {name: (200, f"{name}'s own log\n") for name in roots}
    assert refused == [404, 404, 404]
    assert 'href="/logs/nlp-a1"' in page and 'href="/logs/vision-a1"' in page


def test_serve_once_of_a_repository_root_keeps_every_workspace_under_it(tmp_path, gpu_cluster, shared, argus):
    repo = tmp_path / "repo"
    for name in ("nlp", "vision"):
        gpu_queue.team(repo / "teams", name, gpu_cluster, shared)
    result = argus("serve", repo, "--once")
    assert result.code == 0, result.err
    turns = [line for line in result.err.splitlines() if " turn=1 " in f" {line.removeprefix('argus serve: ')} "]
    assert sorted(re.search(r"workspace=(\S+)", line).group(1) for line in turns) == ["nlp", "vision"], result.err
    assert not any(lease_path(str(shared), name).exists() for name in ("nlp", "vision")), "leases released"


def test_origin_url_is_read_from_git_config_and_links_the_commit(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "remote", "add", "origin",
                    "https://ci-bot:ghp_TOKEN@github.com/team/models.git"], check=True)
    (tmp_path / "repo" / "teams" / "nlp").mkdir(parents=True)
    remote = origin_url(str(tmp_path / "repo" / "teams" / "nlp"))
    page = render_page(report(commit="9f1c2e3d4b5a6978"), time.time(), Kept("llm-rl", {"gpu": Site()}, remote))
    assert remote == "https://ci-bot:ghp_TOKEN@github.com/team/models.git"
    assert 'href="https://github.com/team/models/commit/9f1c2e3d4b5a6978"' in page and "TOKEN" not in page
    assert origin_url(str(tmp_path)) is None


def test_one_teams_broken_spec_or_route_never_keeps_serve_from_the_others(tmp_path, gpu_cluster, shared, argus):
    """Issue 37: a team whose desired state does not load, or whose route names an unset variable, is that team's
    error (said, exit 1); the other team's turn runs."""
    repo = tmp_path / "repo"
    for name in ("nlp", "vision", "audio"):
        gpu_queue.team(repo / "teams", name, gpu_cluster, shared)
    (repo / "teams" / "vision" / "jobs").mkdir(parents=True, exist_ok=True)
    (repo / "teams" / "vision" / "jobs" / "bad.yaml").write_text("kind: Job\nname: bad\nentrypoint: 7\n")
    (repo / "teams" / "audio" / "argus.yaml").write_text(
        "kind: Workspace\nname: audio\nnotifications:\n  routes:\n    - name: ops\n"
        "      to: ['${env:AUDIO_NOTIFY_UNSET}']\n")
    result = argus("serve", repo, "--once")
    assert result.code == 1, result.err
    turns = [line for line in result.err.splitlines() if " argus serve: turn=1 " in f" {line} "]
    assert [re.search(r"workspace=(\S+)", line).group(1) for line in turns] == ["nlp"], result.err
    assert "not serving" in result.err and "bad.yaml" in result.err and "AUDIO_NOTIFY_UNSET" in result.err
