"""A submit answered 200 in a shape Ray never sends (issue 29, deliverable 6), through `argus apply`: the
apply fails saying so, the write is not retried, and the run is not recorded as submitted. Ray may have taken
it (a proxy may have mangled only the answer), so, as for an answer lost on the way, the record stays
SUBMITTING and the run's secrets are kept, never SUBMIT_FAILED with them removed beneath a live run."""

from __future__ import annotations

import json
from pathlib import Path

from state.runs.records import read_records
from tests.support.cluster import QUICK
from tests.support.hostile_dashboard import HostileDashboard, send
from tests.support.workspace import make_workspace


def test_apply_takes_a_submit_answered_for_another_id_as_unknown_never_done(tmp_path: Path, argus) -> None:
    dashboard = HostileDashboard()
    posts: list[str] = []

    def jobs(handler) -> None:  # the job list stays empty; a submit is answered for another id
        if handler.command == "POST":
            posts.append(handler.path)
            return send(handler, 200, json.dumps({"submission_id": "someone-else", "job_id": "someone-else"}))
        return send(handler, 200, "[]")

    try:
        dashboard.answers["/api/v0/nodes?limit=10000&detail=true"] = (200, json.dumps({"data": {"result": {
            "result": []}}}))
        dashboard.answers["/api/cluster_status"] = (200, json.dumps({"data": {"clusterStatus": None}}))
        dashboard.answers["/api/jobs/"] = jobs
        ws = make_workspace(tmp_path / "ws", "unclear", dashboard.address)
        ws.job("quick", QUICK)
        applied = argus("apply", ws.root, "--auto-approve")
    finally:
        dashboard.close()
    shown = applied.out + applied.err
    assert applied.code == 1, shown
    assert "not known to be submitted" in shown and "'someone-else'" in shown, shown
    assert posts == ["/api/jobs/"]  # a write is never retried
    [record] = read_records(str(ws.shared), "unclear").values()
    assert record.status.value == "SUBMITTING" and record.submitted_at is None, record
