"""A run whose GPUs stay idle, under `argus serve`, on the real `gpu_cluster` through the loopback GPU proxy.

THE GPU STATISTICS ARE THE ONE SIMULATED PART (tests.support.gpu_proxy): this machine has no GPU, so the proxy adds
GPU stats in Ray's own shape for the real run's real processes. The job's `health.idle` says `action: stop`: the
loop tells `idle` once, stops the run through argus's chain (run.stopping, why idle), and the run is classed idle,
neither drift nor started again."""

from __future__ import annotations

import textwrap

from state.audit import log as audit
from tests.support.cluster import jobs_of, until
from tests.support.gpu_proxy import GpuStats, gpu_proxy, proxied_team
from tests.support.gpu_queue import stop_all
from tests.support.loops import serve, stopped

IDLER = textwrap.dedent("""
    import time, ray
    ray.init()
    @ray.remote(num_gpus=1, num_cpus=0)
    class Rank:
        def ping(self):
            return 1
    rank = Rank.remote()
    ray.get(rank.ping.remote())
    print("rank up", flush=True)
    time.sleep(600)
    """)


def test_an_idle_run_is_told_once_and_stopped_as_its_policy_says(tmp_path, gpu_cluster, shared, argus, hook):
    url, events = hook
    stats = GpuStats(utilization=2, stranger=0)
    with gpu_proxy(gpu_cluster.address, stats) as proxy:
        ws = proxied_team(tmp_path, "idle-team", gpu_cluster, shared, proxy, "idler", IDLER,
                          "demand: {GPU: 1}\nhealth: {idle: {below_percent: 10, for: 4s, action: stop}}\n")
        try:
            assert argus("apply", ws.root, "--auto-approve").code == 0
            [sid] = until(lambda: [j.submission_id for j in jobs_of(ws.address, ws.name)
                                   if j.status.value == "RUNNING"], "the idler runs", 120)
            stats.watched = sid
            loop = serve(ws, "--interval", "1", "--notify", url)
            try:
                until(lambda: _status(ws, sid) == "STOPPED", "the idle run stopped", 120)
                until(lambda: [e for e in events if e["kind"] == "idle"], "the idle event", 30)
            finally:
                code, err = stopped(loop)
            [told] = [e for e in events if e["kind"] == "idle"]
            assert told["submission_id"] == sid and "stayed below 10% for 4s" in told["summary"], told
            stops = [e for e in audit.read(str(shared), ws.name) if e.get("event") == "run.stopping"]
            assert [(e["submission_id"], e["why"]) for e in stops] == [(sid, "idle")], err
            assert not [e for e in events if e["kind"] in ("drift", "retried")], events
            after = argus("plan", ws.root)
            assert after.code == 0 and "No changes" in after.out, after.out  # classed idle: not run again
            assert [j.submission_id for j in jobs_of(ws.address, ws.name)] == [sid]
        finally:
            stop_all(gpu_cluster.address, ws)


def _status(ws, sid: str) -> str:
    return next((j.status.value for j in jobs_of(ws.address, ws.name) if j.submission_id == sid), "")
