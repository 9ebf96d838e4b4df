"""The contract with Ray's own SDK: the same lifecycle (submit with env_vars, metadata and entrypoint
resources; status; logs; stop; delete) through ray.job_submission.JobSubmissionClient (imported only
here) and through argus's RayClient against one real cluster leaves the same rows in Ray's job table,
ids and times aside."""

from __future__ import annotations

import re
from typing import Any

from state.ray.client import RayClient
from tests.support.cluster import sdk, until, wait_for

VARYING = {"submission_id", "job_id", "start_time", "end_time", "driver_info", "driver_agent_http_address",
           "driver_node_id", "driver_exit_code"}
"""What differs between two runs of one submission whoever sends it."""
ENTRYPOINT = "echo contract-start && sleep 300"
ENV = {"env_vars": {"CONTRACT": "yes"}}
META = {"argus.test": "contract"}


def _driver_output(log: str) -> list[str]:
    """The entrypoint's own lines: Ray's preamble carries times and the job's id."""
    return [line for line in log.splitlines()
            if not re.match(r"\d{4}-\d\d-\d\d |Running entrypoint for job ", line)]


def _row(address: str, submission_id: str) -> dict[str, Any]:
    [row] = [r for r in RayClient("read", address)._api.list_jobs() if r.get("submission_id") == submission_id]
    return {key: value for key, value in row.items() if key not in VARYING}


def test_sdk_and_argus_leave_the_same_rows_in_rays_job_table(ray_cluster) -> None:
    theirs, ours = sdk(ray_cluster.address), RayClient("c", ray_cluster.address, timeout=30)
    theirs.submit_job(entrypoint=ENTRYPOINT, submission_id="contract-sdk", runtime_env=ENV, metadata=META,
                      entrypoint_num_cpus=0.1, entrypoint_memory=10**6)
    assert ours.submit("contract-argus", {"entrypoint": ENTRYPOINT, "runtime_env": ENV, "metadata": META,
                                          "entrypoint_num_cpus": 0.1, "entrypoint_memory": 10**6}) == "submitted"
    for sid in ("contract-sdk", "contract-argus"):
        wait_for(ray_cluster.address, sid, {"RUNNING"})
        until(lambda sid=sid: "\ncontract-start" in ours.logs(sid), f"{sid}'s first log line")
    assert _driver_output(theirs.get_job_logs("contract-sdk")) == _driver_output(ours.logs("contract-argus")) \
        == ["contract-start"]
    assert _row(ray_cluster.address, "contract-sdk") == _row(ray_cluster.address, "contract-argus")

    assert theirs.stop_job("contract-sdk") is True
    ours.stop("contract-argus")
    for sid in ("contract-sdk", "contract-argus"):
        assert wait_for(ray_cluster.address, sid, {"STOPPED", "SUCCEEDED", "FAILED"}) == "STOPPED"
    sdk_row, argus_row = _row(ray_cluster.address, "contract-sdk"), _row(ray_cluster.address, "contract-argus")
    assert sdk_row == argus_row and sdk_row["status"] == "STOPPED"
    assert sdk_row["runtime_env"]["env_vars"] == ENV["env_vars"] and sdk_row["metadata"] == META

    assert theirs.delete_job("contract-sdk") is True
    ours.delete("contract-argus")
    left = {r.get("submission_id") for r in ours._api.list_jobs()}
    assert not left & {"contract-sdk", "contract-argus"}
