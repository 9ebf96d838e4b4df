"""Hand-off and alert latency of `argus serve --interval 60`: with its watch (the default) against
without (`--watch 0`, turns only every interval), both measured in this run.

Targets (issue 25): a queued job starts within 5 s of capacity freeing, and a failure reaches the
webhook within 10 s, whatever the interval. Starts its own local Ray cluster (3 logical GPUs) on
loopback and stops it. A chain of jobs each holding all 3 GPUs (in Ray too) runs one after another;
a job of no demand fails meanwhile. Times come from the jobs themselves (each writes when it starts,
ends or fails), from Ray (when it took each submission), from a poller of Ray's report of GPUs in use
(when it shows the GPUs free: the report admission reads, written by Ray's autoscaler monitor every
few seconds) and from a loopback webhook (when the `failed` event arrives), not from argus's word.
Each hand-off is split into Ray's part (end -> reported free, submitted -> driver runs) and argus's
(reported free -> submitted):
    .venv/bin/python bench/handoff.py [chain length with the watch, default 4]
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specs.errors import ArgusError  # noqa: E402
from state.ray import local  # noqa: E402
from state.ray.client import RayClient  # noqa: E402

INTERVAL = 60
RUN_SECONDS = 3


def main() -> None:
    chain = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cluster = local.up(root / "cluster", dashboard_port=local._free_port(), cpus_per_node=8, worker_gpus=3,
                           worker_resources={"worker_node": 8.0})
        try:
            watched = _scenario(root / "watched", cluster.address, chain, [])
            baseline = _scenario(root / "baseline", cluster.address, 2, ["--watch", "0"])
        finally:
            local.down(root / "cluster")
    for name, result in (("with the watch", watched), ("--watch 0", baseline)):
        print(f"{name:>15}, {len(result.handoffs)} hand-off(s), medians: end -> Ray reports the GPUs free "
              f"{_median(result, 0):.2f} s, -> argus submits the next {_median(result, 1):.2f} s, -> its driver "
              f"runs {_median(result, 2):.2f} s; end -> next runs {_median(result, 3):.2f} s; failure -> webhook "
              f"{result.alert:.2f} s")
    handoff, base_handoff = _median(watched, 1), _median(baseline, 1)
    print(f"--interval {INTERVAL}: capacity free -> queued job submitted {handoff:.2f} s (target < 5 s), "
          f"{handoff / INTERVAL:.3f} of the interval, {base_handoff / handoff:.0f}x faster than without the watch; "
          f"failure -> webhook {watched.alert:.2f} s (target < 10 s), {watched.alert / INTERVAL:.3f} of the interval, "
          f"{baseline.alert / watched.alert:.0f}x faster")


@dataclass
class Result:
    handoffs: list[tuple[float, float, float, float]]
    """Per hand-off: end -> reported free, reported free -> submitted, submitted -> runs, end -> runs."""
    alert: float


def _median(result: Result, part: int) -> float:
    return statistics.median(h[part] for h in result.handoffs)


def _scenario(root: Path, address: str, chain: int, flags: list[str]) -> Result:
    shared = root / "nfs"
    (shared / ".argus").mkdir(parents=True)
    ws = root / "ws"
    _workspace(ws, root.name, address, shared, chain)
    arrivals: list[float] = []
    hook = _webhook(arrivals)
    freed, done = [], threading.Event()
    poller = threading.Thread(target=_poll_free, args=(RayClient("local", address), freed, done), daemon=True)
    poller.start()
    loop = subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(ws), "--interval", str(INTERVAL),
                             "--sync", "auto", "--notify", f"json://127.0.0.1:{hook.server_address[1]}/", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _until(lambda: "start c1" in _log(shared), 120)
        (shared / "fail-now").touch()
        _until(lambda: arrivals and _log(shared).count("end c") == chain, 3 * INTERVAL * chain)
    finally:
        os.kill(loop.pid, signal.SIGTERM)
        loop.wait(timeout=300)
        hook.shutdown()
        done.set()
    times = {(what, job): float(at) for what, job, at in (line.split() for line in _log(shared).splitlines())}
    submitted = {j.metadata.get("argus.job"): j.start_time / 1000 for j in RayClient("local", address).jobs()
                 if j.metadata.get("argus.workspace") == root.name and j.start_time}
    handoffs = []
    for i in range(1, chain):
        ended, runs, sent = times[("end", f"c{i}")], times[("start", f"c{i + 1}")], submitted[f"c{i + 1}"]
        free = min((t for t in freed if t >= ended), default=sent)
        handoffs.append((free - ended, sent - free, runs - sent, runs - ended))
    return Result(handoffs, arrivals[0] - times[("failed", "doomed")])


def _poll_free(ray: RayClient, freed: list[float], done: threading.Event) -> None:
    """The times Ray's report of GPUs in use went from some to none."""
    was = 0.0
    while not done.wait(0.25):
        with contextlib.suppress(ArgusError):
            now = ray.resources_in_use().get("GPU", 0.0)
            if was > 0 and now == 0:
                freed.append(time.time())
            was = now


def _workspace(ws: Path, name: str, address: str, shared: Path, chain: int) -> None:
    (ws / "jobs").mkdir(parents=True)
    (ws / "argus.yaml").write_text(f"kind: Workspace\nname: {name}\n")
    (ws / "cluster.yaml").write_text(f"kind: Cluster\nname: local\naddress: {address}\nshared_root: {shared}\n"
                                     "job_defaults: {entrypoint_num_cpus: 0.5, entrypoint_resources: "
                                     "{worker_node: 1}}\n")
    log = str(shared / "ran.log")
    for i in range(1, chain + 1):
        code = (f"import time; f = open({log!r}, 'a'); f.write('start c{i} %f\\n' % time.time()); f.flush(); "
                f"time.sleep({RUN_SECONDS}); f.write('end c{i} %f\\n' % time.time())")
        (ws / "jobs" / f"c{i}.yaml").write_text(f"kind: Job\nname: c{i}\ncluster: local\nworkload: command\n"
                                                f"entrypoint: [python3, -c, {json.dumps(code)}]\n"
                                                f"entrypoint_num_gpus: 3\ndemand: {{GPU: 3}}\npriority: {chain - i}\n")
    gate = str(shared / "fail-now")
    code = (f"import os, sys, time; [time.sleep(0.05) for _ in iter(lambda: os.path.exists({gate!r}), True)]; "
            f"open({log!r}, 'a').write('failed doomed %f\\n' % time.time()); sys.exit(3)")
    (ws / "jobs" / "doomed.yaml").write_text(f"kind: Job\nname: doomed\ncluster: local\nworkload: command\n"
                                             f"entrypoint: [python3, -c, {json.dumps(code)}]\n")


def _webhook(arrivals: list[float]) -> ThreadingHTTPServer:
    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if json.loads(body["message"])["kind"] == "failed":
                arrivals.append(time.time())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _log(shared: Path) -> str:
    path = shared / "ran.log"
    return path.read_text() if path.exists() else ""


def _until(check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: still waiting after {timeout:g} s")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
