"""The dashboard can't wedge a workspace (issue 25, deliverable 5) and malformed answers are errors.

A real HTTP server on loopback (tests.support.hostile_dashboard) plays the dashboard: alone, answering odd JSON
types, bodies of hundreds of megabytes, failures, and HTML, markdown and terminal escapes in its texts;
or in front of the session's real Ray cluster, adding rows anyone could submit and refusing to delete
one. The effects are asserted: what argus asked the dashboard for, what it printed, what memory it took.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconcile.report import TurnReport
from reconcile.views.html import render_page
from state.ray.client import ClusterRequestFailed, RayClient
from state.ray.deadline import MAX_ANSWER_BYTES
from tests.support.cluster import QUICK, sdk, wait_for
from tests.support.hostile_dashboard import HostileDashboard, endless
from tests.support.workspace import make_workspace

NODES = "/api/v0/nodes?limit=10000&detail=true"
POLICY = "retry: {max_attempts: 2, on: [nccl_timeout, node_lost]}\n"
"""A retry policy: argus reads the log of a failed run of the job to classify it, if the run is argus's own."""
HOSTILE = "ValueError: <script>alert(1)</script> **bold** | cell [x](http://evil) @team \x1b[31mRED\x1b[0m\r```\nnext"


@pytest.fixture
def dashboard() -> Iterator[HostileDashboard]:
    fake = HostileDashboard()
    fake.answers[NODES] = (200, json.dumps({"data": {"result": {"result": []}}}))
    fake.answers["/api/cluster_status"] = (200, json.dumps({"data": {"clusterStatus": None}}))
    fake.answers["/api/jobs/"] = (200, "[]")
    yield fake
    fake.close()


@pytest.mark.parametrize(("path", "body", "why"), [
    ("/api/jobs/", {"jobs": []}, "the job list is a JSON object, not a list"),
    ("/api/jobs/", None, "the job list is a JSON null, not a list"),
    ("/api/jobs/", "all good", "the job list is a JSON string, not a list"),
    ("/api/jobs/", [1, 2], "a row of the job list is a JSON number, not an object"),
    ("/api/jobs/", [{"type": "SUBMISSION", "submission_id": 5, "status": "RUNNING"}], "has no submission id"),
    ("/api/version", ["2.60.0"], "the version is a JSON list, not an object"),
    (NODES, {"data": {"result": {"result": {"n1": {}}}}}, "not a list of node objects"),
    (NODES, {"data": {"result": {"result": ["n1"]}}}, "not a list of node objects"),
    ("/api/cluster_status", {"data": {"clusterStatus": "busy"}}, "holds no usageByNode object"),
])
def test_an_answer_of_the_wrong_shape_is_an_error_never_an_empty_table(dashboard, path, body, why) -> None:
    dashboard.answers[path] = (200, json.dumps(body))
    with pytest.raises(ClusterRequestFailed, match="gave an answer argus cannot read") as failed:
        RayClient("c", dashboard.address, timeout=5).snapshot()
    assert why in str(failed.value) and failed.value.malformed and "'c'" in str(failed.value)


def test_an_unread_cluster_admits_nothing_and_never_matches(dashboard, tmp_path: Path, argus) -> None:
    """A job list that is an object: the cluster is not read, so apply submits nothing on it and plan says so."""
    ws = make_workspace(tmp_path / "ws", "unread", dashboard.address)
    ws.job("quick", QUICK)
    dashboard.answers["/api/jobs/"] = (200, json.dumps({"jobs": []}))
    plan = argus("plan", ws.root, "--detailed-exitcode")
    assert plan.code == 1, plan.out + plan.err
    assert "cannot read" in plan.out + plan.err and "match the desired state" not in plan.out
    applied = argus("apply", ws.root, "--auto-approve")
    assert applied.code == 1
    assert [s for s in dashboard.seen if s[0] != "GET"] == []  # nothing was submitted, stopped or deleted


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_huge_answer_is_refused_promptly_in_bounded_memory(dashboard, declared: bool) -> None:
    """200 MB offered (made as it is sent): argus reads at most the cap, says so, and the memory it took stays
    near the cap (with the length declared, nothing at all), where reading it whole would take 200 MB."""
    dashboard.answers["/api/jobs/"] = endless(200 * 2**20, declared)
    client = RayClient("c", dashboard.address, timeout=30)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ClusterRequestFailed) as refused:
            client.jobs()
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(refused.value)
    assert "'c'" in message and dashboard.address in message and "more than 64 MiB" in message
    assert elapsed < 15, f"took {elapsed:.1f}s"
    assert peak < (2 * 2**20 if declared else MAX_ANSWER_BYTES + 16 * 2**20), f"peak {peak / 2**20:.0f} MiB"


def test_a_command_against_a_dashboard_failing_twice_per_request_takes_one_deadline(dashboard, tmp_path: Path,
                                                                                     argus) -> None:
    """Every request's first two tries hang until cut: `plan --timeout 2` ends within the one deadline."""
    ws = make_workspace(tmp_path / "ws", "flaky", dashboard.address)
    ws.job("quick", QUICK)
    argus("validate", ws.root)  # the command's own start-up (imports, loading) is not the dashboard's time
    dashboard.fail_first, dashboard.fail_how = 2, "hang"
    started = time.monotonic()
    result = argus("plan", ws.root, "--timeout", "2")
    elapsed = time.monotonic() - started
    assert result.code == 1 and "'local'" in result.out + result.err
    assert elapsed < 2 + 1.5, f"plan took {elapsed:.1f}s"  # without the budget: 4 reads x (3 tries) x 2 s


def test_texts_from_a_dashboard_reach_no_output_as_markup_or_escapes(dashboard, tmp_path: Path, argus) -> None:
    """Ray's error text carries HTML, markdown, a table cell's end, a code fence, ANSI colours and a \\r."""
    ws = make_workspace(tmp_path / "ws", "escaped", dashboard.address)
    ws.job("quick", QUICK)
    dashboard.answers["/api/jobs/"] = (500, HOSTILE)
    outputs = {f: argus("plan", ws.root, "--format", f) for f in ("human", "markdown")}
    status = argus("status", ws.root, "--format", "markdown")
    for result in (*outputs.values(), status):
        assert result.code == 1
        shown = result.out + result.err
        assert "\x1b" not in shown and "\r" not in shown and "RED" in shown
    markdown = outputs["markdown"].out
    assert "&lt;script&gt;" in markdown and "<script>" not in markdown
    assert r"\*\*bold\*\* \| cell \[x\](http\://evil) \@team" in markdown
    fence = status.out.splitlines()[0]
    assert set(fence) == {"`"} and len(fence) > 3 and status.out.rstrip().endswith(fence)  # ``` inside can't end it
    page = render_page(TurnReport(workspace="w", started_at=0, finished_at=1, ok=False, interval=30, sync="off",
                                  error=HOSTILE, notes=(HOSTILE,)), now=2)
    assert "&lt;script&gt;" in page and "<script>" not in page and "\x1b" not in page and "\r" not in page


def test_serve_logs_one_json_object_per_line_whatever_the_dashboard_says(dashboard, tmp_path: Path, argus) -> None:
    """The loop's apply fails on Ray's refusal of a submit, whose text has line breaks and escapes."""
    ws = make_workspace(tmp_path / "ws", "logged", dashboard.address)
    ws.job("quick", QUICK)
    (ws.shared / ".argus").mkdir(parents=True)  # as an apply leaves it: the loop's lease lives there
    dashboard.refused["POST", "/api/jobs/"] = HOSTILE
    result = argus("serve", ws.root, "--once", "--sync", "auto", "--log-format", "json")
    lines = result.err.strip().splitlines()
    logged = [json.loads(line) for line in lines]  # each line a whole JSON object
    assert all(isinstance(entry, dict) for entry in logged) and len(logged) >= 2
    assert "\x1b" not in result.err and "\\u001b" not in result.err
    assert any("RED" in json.dumps(entry) for entry in logged)


def test_rows_argus_cannot_act_on_are_reported_and_the_rest_proceeds(ray_cluster, tmp_path: Path, argus) -> None:
    """In front of the real cluster: rows labelled as this workspace's runs with ids argus would never send
    (a '/', dots, HTML, escapes), and one real finished run of argus's own that Ray refuses to delete.
    Every command still succeeds, no request names a forged row, the refused row is named with what to do."""
    proxy = HostileDashboard(upstream=ray_cluster.address)
    try:
        ws = make_workspace(tmp_path / "ws", "undeletable", proxy.address)
        runs = []
        for counter in (1, 2):
            ws.job("quick", QUICK, extra=f"run: {counter}\n{POLICY}")
            assert argus("apply", ws.root, "--auto-approve").code == 0
            [run] = [j.submission_id for j in sdk(ray_cluster.address).list_jobs()
                     if (j.metadata or {}).get("argus.workspace") == "undeletable"
                     and j.submission_id not in runs]
            wait_for(ray_cluster.address, run, {"SUCCEEDED"})
            runs.append(run)
        labels = {j.submission_id: j.metadata for j in sdk(ray_cluster.address).list_jobs()}[runs[0]]
        forged = ["x/../../api/version", "..", "<b>bold</b>\x1b[2J", "undeletable.quick.000000000000.1"]
        proxy.extra_rows = [{"type": "SUBMISSION", "submission_id": sid, "status": "FAILED", "metadata": labels,
                             "message": HOSTILE, "entrypoint": "rm -rf /", "start_time": 1}
                            for sid in forged]
        proxy.refused["DELETE", f"/api/jobs/{runs[0]}"] = "ValueError: Job is not in a terminal state"
        planted = ws.shared / "jobs" / forged[-1] / "logs" / "driver.log"  # any job can write the shared root
        planted.parent.mkdir(parents=True)
        planted.write_text("kept\n")

        applied = argus("apply", ws.root, "--auto-approve", "--keep-finished", "1")
        assert applied.code == 0, applied.out + applied.err
        assert f"finished job {runs[0]} stays in the job table" in applied.out and "ray job delete" in applied.out
        assert ("DELETE", f"/api/jobs/{runs[0]}") in proxy.seen  # tried once, refused, reported
        assert not [s for s in proxy.seen if any(f in s[1] for f in ("x%2F", "%2E", "bold", ".000000000000."))]
        assert runs[0] in {j.submission_id for j in sdk(ray_cluster.address).list_jobs()}
        plan = argus("plan", ws.root, "--detailed-exitcode")
        assert plan.code == 0, plan.out + plan.err  # the forged rows are warned about, never planned on
        assert "claims to be undeletable/quick" in plan.out and "\x1b" not in plan.out + plan.err
        assert argus("apply", ws.root, "--auto-approve", "--keep-finished", "1").code == 0  # and again
    finally:
        proxy.close()


def test_plain_drops_escape_sequences_and_control_characters_and_keeps_the_text() -> None:
    """CSI colours, an OSC hyperlink, a DCS string, \\r, NUL, a one-byte CSI, a bidi override, NEL, a reset."""
    from specs.diagnostics import plain

    hostile = ("a\x1b[31mred\x1b[0m \x1b]8;;http://evil\x07link\x1b]8;;\x1b\\ \x1bPq#0\x1b\\x\r\x00\x9b2J"
               "\u202eb\x85\tc\nd\x1bc")
    assert plain(hostile) == "ared link xb\tc\nd"
    assert plain(hostile, lines=False) == "ared link xb c d"
