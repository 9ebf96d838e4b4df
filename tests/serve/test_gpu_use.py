"""GPU use per run, per workspace and per cluster, on the real `gpu_cluster` through a loopback proxy.

The GPU STATISTICS ARE THE ONE SIMULATED PART (tests.support.gpu_proxy): this machine has no GPU, so the proxy
adds GPUs, in Ray 2.60's own shape, to the real dashboard's node answers, for the pids of the real run's
processes as the real state API and job table list them. The job, its driver and actors, the Ray cluster, argus's
reads, `argus status`, `argus serve`'s page and /metrics are all real.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import sdk, until
from tests.support.gpu_proxy import GpuStats, gpu_proxy, proxied_team
from tests.support.gpu_queue import active, stop_all
from tests.support.loops import listening, stopped
from tests.support.loops import serve as serve_loop
from tests.support.status_page import browse_url

TRAINER = textwrap.dedent("""
    import time, ray
    ray.init()
    @ray.remote(num_gpus=1, num_cpus=0)
    class Rank:
        def ping(self):
            return 1
    ranks = [Rank.remote() for _ in range(2)]
    ray.get([r.ping.remote() for r in ranks])
    print("ranks up:", len(ranks) * 21, flush=True)
    time.sleep(600)
    """)


def test_a_runs_gpus_their_use_and_the_clusters_show_in_status_page_and_metrics(tmp_path, gpu_cluster, shared,
                                                                                argus):
    stats = GpuStats(stranger=os.getpid())  # a pid of no run on the last GPU: never counted as the run's
    with gpu_proxy(gpu_cluster.address, stats) as proxy:
        ws = proxied_team(tmp_path, "gpu-use-team", gpu_cluster, shared, proxy, "trainer", TRAINER,
                          "demand: {GPU: 2}\n")
        try:
            assert argus("apply", ws.root, "--auto-approve").code == 0
            [sid] = until(lambda: [j for j in _running(ws)], "the trainer runs", 120)
            stats.watched = sid
            logs = sdk(gpu_cluster.address)
            try:
                until(lambda: "ranks up: 42" in logs.get_job_logs(sid), "the ranks are up", 120)
            except AssertionError:
                raise AssertionError(logs.get_job_logs(sid)[-3000:]) from None

            status = argus("status", ws.root)
            assert status.code == 0, status.err
            assert re.search(r"job\.trainer .*2 GPU 87% 62/160 GiB .*" + re.escape(sid), status.out), status.out
            machine = argus("status", ws.root, "--format", "json")
            [row] = [r for r in json.loads(machine.out)["jobs"] if r["address"] == "job.trainer"]
            assert row["gpu"] == "2 GPU 87% 62/160 GiB"

            loop = serve_loop(ws, "--interval", "2", "--listen", "127.0.0.1:0")
            try:
                site = listening(loop)
                labels = (("cluster", "local"), ("job", "trainer"), ("run", sid), ("workspace", ws.name))
                until(lambda: _metrics(site).get(("argus_run_gpu_utilization", labels)) == 87, "GPU metrics", 60)
                stats.utilization = 20
                until(lambda: _metrics(site).get(("argus_run_gpu_utilization", labels)) == 20, "a new sample", 60)
                samples = _metrics(site)
                page = urllib.request.urlopen(site, timeout=10).read().decode()
                dom = browse_url(tmp_path, site)  # what a real browser made of it
            finally:
                code, err = stopped(loop)
            assert code == 0, err
            stats.without_nodes = True  # a dashboard without the endpoint: unknown, never an error
            blind = argus("status", ws.root)
            assert blind.code == 0, blind.err
            assert re.search(r"job\.trainer .*RUNNING +unknown +" + re.escape(sid), blind.out), blind.out
        finally:
            stop_all(gpu_cluster.address, ws)
    assert samples[("argus_run_gpus", labels)] == 2
    assert samples[("argus_run_gpu_memory_bytes", labels)] == 2 * 31 * 2**30
    assert samples[("argus_gpus_busy", (("cluster", "local"), ("workspace", ws.name)))] == 2
    assert samples[("argus_gpus_held", (("cluster", "local"), ("workspace", ws.name)))] == 2
    assert samples[("argus_cluster_gpus", (("cluster", "local"),))] == 3
    assert samples[("argus_cluster_gpus_busy", (("cluster", "local"),))] == 3  # the stranger's GPU is busy too
    assert "GPU use per run" in page and "2 GPU 20% 62/160 GiB" in page
    run_line = re.search(r'aria-label="run ' + re.escape(sid) + r'[^"]*".*?points="([^"]+)"', page)
    assert run_line and len(run_line.group(1).split()) >= 2, page  # a drawn timeline of at least two samples
    ys = {float(p.split(",")[1]) for p in run_line.group(1).split()}
    assert len(ys) >= 2  # it drew the fall from 87% to 20%
    assert 'aria-label="cluster local' in page
    drawn = re.findall(r"<svg[^>]*>.*?</svg>", dom, re.S)
    assert len(drawn) >= 2 and all("<polyline" in svg for svg in drawn), dom  # one per cluster and per run
    assert any(p.startswith("GET /nodes?view=summary") for p in stats.seen)


def _running(ws) -> list[str]:
    from tests.support.cluster import jobs_of

    return [j.submission_id for j in jobs_of(ws.address, ws.name) if j.status.value == "RUNNING"]


def _metrics(site: str) -> dict:
    text = urllib.request.urlopen(f"{site}metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


assert active  # the team's helpers: stop_all waits on it
