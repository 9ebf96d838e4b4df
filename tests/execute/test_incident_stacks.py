"""The scene of a still-living stalled run, on the real test cluster: the Python stacks of its processes, dumped
by py-spy through the dashboard's reporter (`argus local` runs its head with RAY_DASHBOARD_ENABLE_PROFILING=1),
kept in its incident record. Skipped, saying why, where this machine refuses ptrace."""

from __future__ import annotations

import json
import sys

import pytest

from reconcile.execute.incident import keep_scene
from state.ray import scene
from state.ray.client import RayClient
from state.runs import records
from tests.support.cluster import until, wait_for
from tests.support.loops import runs_of

# A Ray driver (as verl's trainer is) whose actor hangs in a collective that never ends.
HUNG = ("import ray, time; ray.init(); print('step:3 - loss:0.1', flush=True); "
        "exec('@ray.remote(num_cpus=0)\\nclass Rank:\\n    def wait_in_allreduce(self):\\n        time.sleep(300)\\n"
        "rank = Rank.remote()\\nray.get(rank.wait_in_allreduce.remote())')")


def test_a_stalled_run_keeps_the_stacks_of_its_processes(workspace, argus):
    workspace.job("hung", [sys.executable, "-c", HUNG])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [sid] = runs_of(workspace, "hung")
    wait_for(workspace.address, sid, {"RUNNING"})
    root = str(workspace.shared)
    until(lambda: "step:3" in records.log_tail(root, sid), "the run's first step line")
    client = RayClient("local", workspace.address, timeout=30)
    assert scene.profiling(client) is True, "argus local starts its head with stack dumps enabled"
    job_id = scene.ray_view(client, sid)[0]["job_id"]
    until(lambda: any(what == "actor Rank" for *_, what in scene.processes(client, sid, job_id)), "the hung actor")
    record = records.read_record(root, sid)
    assert record is not None

    kept = keep_scene(client, root, record, "stalled", live=True, detail="step 3 has not advanced for 50 min")
    assert kept is not None
    refused = [p for p in kept["problems"] if "ptrace" in p.lower() or "permission" in p.lower()]
    if refused:
        pytest.skip(f"this machine refuses ptrace to py-spy, so no stack can be dumped: {refused[0][:200]}")
    written = json.loads((workspace.shared / "jobs" / sid / "incident.json").read_text())
    dumped = {s["what"]: s["stacks"] for s in written["stacks"]}
    assert "wait_in_allreduce" in dumped.get("actor Rank", ""), written["problems"]
    assert "ray.get" in dumped.get("driver", "") or "get_objects" in dumped.get("driver", ""), written["problems"]
    assert written["kind"] == "stalled" and "step:3" in written["log_tail"]
