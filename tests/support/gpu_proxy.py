"""A loopback proxy in front of a real Ray dashboard that adds GPU statistics to its node answers: THE ONE
SIMULATED PART of the GPU-use tests. This machine has no GPU, so Ray's reporter agents report `gpus: []`;
everything else — the job, its driver, its actors, their pids and nodes, the state API, the job table — is the
real cluster's, passed through unchanged.

On `GET /nodes?view=summary` the proxy asks the real dashboard for the watched run's processes (its job row's
`driver_info.pid` and `driver_node_id`, its alive actors' pids and nodes, from the state API) and gives each node
that offers logical GPUs that many GPUs in Ray 2.60's own shape (reporter_models.GpuUtilizationInfo: index,
name, uuid, utilizationGpu, memoryUsed, memoryTotal in MiB, processesPids [{pid, gpuMemoryUsage}]): the run's
actors one GPU each (its driver beside the first), and the last GPU busy with a process of no run (`stranger`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

SKIPPED = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "content-encoding"}


@dataclass
class GpuStats:
    """What the proxy reports: set by the test while the proxy runs."""

    watched: str = ""
    """The submission id whose processes get GPUs."""
    utilization: int = 87
    memory_used: int = 31 * 1024
    memory_total: int = 80 * 1024
    stranger: int = 1
    """A pid put on the last GPU at 99%: a process of no run of argus (another job's, as far as argus knows)."""
    seen: list[str] = field(default_factory=list)
    without_nodes: bool = False
    """Answer 404 to the node summary, as a dashboard without the endpoint (or a proxy blocking it) does."""


class GpuProxy:
    def __init__(self, upstream: str, stats: GpuStats) -> None:
        self.upstream, self.stats = upstream.rstrip("/"), stats
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                proxy.handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                proxy.handle(self, "POST")

            def do_DELETE(self) -> None:  # noqa: N802
                proxy.handle(self, "DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        self.stats.seen.append(f"{method} {handler.path}")
        if self.stats.without_nodes and handler.path.startswith("/nodes"):
            handler.send_error(404, "Not Found")
            return
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in SKIPPED}
        answer = requests.request(method, self.upstream + handler.path, data=body, headers=headers, timeout=30,
                                  allow_redirects=False)
        content = answer.content
        if method == "GET" and handler.path.startswith("/nodes?") and "view=summary" in handler.path \
                and answer.status_code == 200:
            content = json.dumps(self._with_gpus(answer.json())).encode()
        handler.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in SKIPPED:
                handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def _with_gpus(self, body: dict) -> dict:
        processes = self._processes()
        for node in body["data"]["summary"]:
            node_id = node["raylet"]["nodeId"]
            count = int(node["raylet"].get("resourcesTotal", {}).get("GPU", 0))
            node["gpus"] = [self._gpu(i, count, [p for n, p in processes.get(i, []) if n == node_id])
                            for i in range(count)]
        return body

    def _processes(self) -> dict[int, list[tuple[str, int]]]:
        """GPU index -> the watched run's (node id, pid) on it: actor k on GPU k, the driver on GPU 0."""
        if not self.stats.watched:
            return {}
        job = requests.get(f"{self.upstream}/api/jobs/{self.stats.watched}", timeout=30).json()
        actors = requests.get(f"{self.upstream}/api/v0/actors?limit=1000&filter_keys=state&filter_predicates=%3D"
                              "&filter_values=ALIVE", timeout=30).json()["data"]["result"]["result"]
        mine = sorted((a["node_id"], a["pid"]) for a in actors if a.get("job_id") == job.get("job_id") and a["pid"])
        found = {k: [actor] for k, actor in enumerate(mine)}
        driver = job.get("driver_info") or {}
        if driver.get("pid") and job.get("driver_node_id"):
            found.setdefault(0, []).append((job["driver_node_id"], int(driver["pid"])))
        return found

    def _gpu(self, index: int, count: int, pids: list[int]) -> dict:
        stranger = index == count - 1 and not pids
        used = [*pids, self.stats.stranger] if stranger else pids
        util = 99 if stranger else (self.stats.utilization if pids else 0)
        return {"index": index, "name": "NVIDIA H20 (simulated)", "uuid": f"GPU-simulated-{index}",
                "utilizationGpu": util, "memoryUsed": self.stats.memory_used if used else 0,
                "memoryTotal": self.stats.memory_total, "powerMw": None, "temperatureC": None,
                "processesPids": [{"pid": pid, "gpuMemoryUsage": self.stats.memory_used, "gpuUtilization": None}
                                  for pid in used]}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def gpu_proxy(upstream: str, stats: GpuStats | None = None) -> Iterator[GpuProxy]:
    proxy = GpuProxy(upstream, stats or GpuStats())
    try:
        yield proxy
    finally:
        proxy.close()


def proxied_team(tmp_path, name: str, cluster, shared, proxy: GpuProxy, job: str, script: str, extra: str = ""):
    """Workspace `name` (tests.support.gpu_queue.team) whose Cluster reaches `cluster` through `proxy`, with one
    command job `job` running `script` in this Python; `extra`: more lines of the job's spec (its demand...)."""
    import json
    import sys
    import textwrap

    from tests.support.gpu_queue import team

    ws = team(tmp_path, name, cluster, shared)
    ws.address = proxy.address
    ws.write("cluster.yaml", (ws.root / "cluster.yaml").read_text().replace(cluster.address, proxy.address))
    ws.write(f"jobs/{job}.yaml", f"kind: Job\nname: {job}\ncluster: local\nworkload: command\n"
             f"entrypoint: [{json.dumps(sys.executable)}, -c, {json.dumps(script)}]\n" + textwrap.dedent(extra))
    return ws
