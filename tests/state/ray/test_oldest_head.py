"""The oldest Ray head argus supports (Makefile `ray-oldest`: Ray 2.9.3 in .cache/ray-2.9.3, a
virtualenv of its own, made by `make test`), started on loopback and driven through argus's whole
lifecycle: submit, status, logs, stop, delete. Its /api/version has no session_name: the one warning
says head-restart detection is lost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from state.ray import local
from state.ray.client import RayClient
from tests.support.cluster import until

OLDEST = Path(__file__).resolve().parents[3] / ".cache" / "ray-2.9.3"


@pytest.fixture
def oldest_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if not (OLDEST / ".installed").exists():
        if os.environ.get("CI"):  # .ci/run runs `make test`, which makes it: missing there is a failure, not a skip
            pytest.fail(f"{OLDEST} is not installed, although `make test` makes it (make ray-oldest)")
        pytest.skip(f"{OLDEST} is not installed: `make ray-oldest` makes it (`make test` does)")
    monkeypatch.setattr(local, "ray_cli", lambda: OLDEST / "bin" / "ray")
    cluster = local.up(tmp_path / "ray", dashboard_port=local._free_port(), cpus_per_node=4)
    try:
        yield cluster
    finally:
        local.down(tmp_path / "ray")


def test_the_oldest_supported_head_through_argus_lifecycle(oldest_head) -> None:
    client = RayClient("old", oldest_head.address, timeout=30)
    state = client.snapshot()
    assert state.ray_version == "2.9.3"
    assert "head-restart detection (no session_name)" in state.version_warning
    assert client.submit("oldest-echo", {"entrypoint": "echo from-the-oldest-head", "metadata": {"argus.test": "1"},
                                         "runtime_env": {"env_vars": {"A": "1"}}, "entrypoint_num_cpus": 0.1}) \
        == "submitted"
    until(lambda: (job := client.job("oldest-echo")) is not None and job.status == "SUCCEEDED", "the echo to end")
    assert "from-the-oldest-head" in client.logs("oldest-echo")
    client.submit("oldest-sleep", {"entrypoint": "sleep 300", "metadata": {"argus.test": "1"}})
    until(lambda: client.job("oldest-sleep").status == "RUNNING", "the sleep to run")
    client.stop("oldest-sleep")
    assert client.wait_terminal("oldest-sleep", 60).status == "STOPPED"
    for sid in ("oldest-echo", "oldest-sleep"):
        client.delete(sid)
        assert client.job(sid) is None
