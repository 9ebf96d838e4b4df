"""An incident record as argus keeps it (state.runs.incident): an OOM of attempt 2 of ws/train, for the tests of
the record on disk and of the report made from it."""

from __future__ import annotations


def incident_record(**fields) -> dict:
    return {"submission_id": "ws.train.abc.1", "workspace": "ws", "job": "train", "cluster": "local", "attempt": 2,
            "kind": "failed", "failure": "oom", "time": "2027-01-01T00:00:00+00:00",
            "log_tail": "step:4\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
            "ray_job": {"status": "FAILED", "driver_exit_code": 1}, "failed_tasks": [], "dead_actors": [],
            "nodes": [], "checkpoint": {"directory": "/x", "step": 40}, "problems": [], **fields}
