"""Submit, stop and delete answers are checked: a loopback dashboard answering 200 with shapes Ray never
sends (a proxy's login page, a hostile server) gets an error, and nothing is taken as done."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from state.ray.client import ClusterRequestFailed, RayClient
from tests.support.hostile_dashboard import HostileDashboard


@pytest.fixture
def hostile() -> Iterator[HostileDashboard]:
    """A loopback dashboard that answers each path as a test says (one method per path in these tests)."""
    dashboard = HostileDashboard()
    yield dashboard
    dashboard.close()


PAYLOAD = {"entrypoint": "true", "metadata": {"argus.run": "x"}}


@pytest.mark.parametrize("body", ["<html>login</html>", "{}", json.dumps({"submission_id": "other"}),
                                  json.dumps({"submission_id": 7}), json.dumps(["a"])])
def test_a_submit_answered_with_a_wrong_shape_is_not_submitted(hostile, body: str) -> None:
    address, answers, seen = hostile.address, hostile.answers, hostile.seen
    answers["/api/jobs/"] = (200, body)
    with pytest.raises(ClusterRequestFailed, match="not known to be submitted") as err:
        RayClient("c", address, timeout=5).submit("mine", PAYLOAD)
    assert "as not done" in str(err.value) and seen == [("POST", "/api/jobs/")]


def test_the_right_submit_answer_is_submitted(hostile) -> None:
    address, answers = hostile.address, hostile.answers
    answers["/api/jobs/"] = (200, json.dumps({"submission_id": "mine", "job_id": None}))
    assert RayClient("c", address, timeout=5).submit("mine", PAYLOAD) == "submitted"


@pytest.mark.parametrize("body", ["OK", "{}", json.dumps({"stopped": "yes"}), json.dumps({"deleted": True})])
def test_a_stop_answered_with_a_wrong_shape_is_an_error(hostile, body: str) -> None:
    address, answers = hostile.address, hostile.answers
    answers["/api/jobs/j/stop"] = (200, body)
    with pytest.raises(ClusterRequestFailed, match=r'not Ray\'s \{"stopped": true\|false\}'):
        RayClient("c", address, timeout=5).stop("j")


@pytest.mark.parametrize("body", ["OK", "{}", json.dumps({"deleted": 1}), json.dumps({"deleted": False})])
def test_a_delete_not_confirmed_is_an_error(hostile, body: str) -> None:
    address, answers = hostile.address, hostile.answers
    answers["/api/jobs/j"] = (200, body)
    with pytest.raises(ClusterRequestFailed):
        RayClient("c", address, timeout=5).delete("j")


def test_rays_own_stop_and_delete_answers_are_taken(hostile) -> None:
    address, answers, seen = hostile.address, hostile.answers, hostile.seen
    answers["/api/jobs/j/stop"] = (200, json.dumps({"stopped": False}))
    answers["/api/jobs/j"] = (200, json.dumps({"deleted": True}))
    client = RayClient("c", address, timeout=5)
    client.stop("j")
    client.delete("j")
    assert seen == [("POST", "/api/jobs/j/stop"), ("DELETE", "/api/jobs/j")]
