"""A run that stops stepping but stays alive, on the real test cluster under `argus serve`: one `stalled` event,
told by its step (not by a quiet log: it keeps printing), and an incident record taken while it lives, with its
processes' stacks (the test cluster runs with RAY_DASHBOARD_ENABLE_PROFILING=1 and py-spy, state.ray.local)."""

from __future__ import annotations

import json
import sys
import time

from tests.support.cluster import until
from tests.support.loops import runs_of, serve, stopped

# Three steps a second apart, then a loop that still prints (its log keeps growing) but never steps again.
HANGS = ("import itertools, time; [print(f'argus:progress step={s} total=100', flush=True) or time.sleep(1) "
         "for s in (1, 2, 3)]; [print('waiting for rank 3', flush=True) or time.sleep(0.5) for _ in itertools.count()]")
POLICY = "health: {stall: {factor: 2, floor: 4s}}\n"


def test_a_run_that_stops_stepping_is_stalled_once_with_its_scene(workspace, argus, hook):
    url, events = hook
    workspace.job("hangs", [sys.executable, "-c", HANGS], extra=POLICY)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [sid] = runs_of(workspace, "hangs")
    loop = serve(workspace, "--interval", "1", "--notify", url)
    err = ""
    try:
        until(lambda: [e for e in events if e["kind"] == "stalled"] or loop.poll() is not None, "the stalled event",
              120)
        time.sleep(3)  # more turns: still one event
    finally:
        code, err = stopped(loop)
    [stall] = [e for e in events if e["kind"] == "stalled"] or [err[-2000:]]
    assert stall["submission_id"] == sid and "its step (3) has not advanced" in stall["summary"], stall
    record = json.loads((workspace.shared / "jobs" / sid / "incident.json").read_text())
    assert record["kind"] == "stalled" and "step (3)" in record["detail"]
    assert record.get("stacks"), record.get("problems")  # taken while it lived
    assert any("time.sleep" in str(stack) or "<module>" in str(stack) for stack in record["stacks"]), record["stacks"]
    assert stall["report"]["cause"]["class"] == "stalled", (stall, err)  # the analysis report rides along
