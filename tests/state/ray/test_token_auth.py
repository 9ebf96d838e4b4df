"""Token authentication (RAY_AUTH_MODE=token) against a real token-authenticated cluster on loopback.

The test process itself holds no Ray token (no RAY_AUTH_* variables, a fresh HOME): the only way a
request can authenticate is the header argus builds from a Cluster's `auth_token:`.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from state.ray import local
from state.ray.auth import MAX_TOKEN_FILE, TokenUnavailable, token_of
from state.ray.client import ClusterAuthFailed, RayClient
from state.ray.transport import transport_of
from tests.support.cluster import QUICK, until
from tests.support.proxies import reverse_proxy
from tests.support.workspace import Result, Workspace, make_workspace

TOKEN_VARIABLE = "ARGUS_TEST_RAY_TOKEN"


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory):
    state_dir = tmp_path_factory.mktemp("auth-cluster")
    cluster = local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8,
                       worker_resources={"worker_node": 8.0}, auth_token=True)
    try:
        yield cluster
    finally:
        local.down(state_dir)
        assert not Path(cluster.auth_token_file).exists(), "down removes the token file"


@pytest.fixture(autouse=True)
def _no_process_token(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in local.AUTH_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def token(auth_cluster: local.LocalCluster) -> str:
    return Path(auth_cluster.auth_token_file).read_text().strip()


def secured(root: Path, name: str, address: str, auth_token: str | None) -> Workspace:
    ws = make_workspace(root, name, address)
    if auth_token is not None:
        with open(ws.root / "cluster.yaml", "a") as spec:
            spec.write(f"auth_token: {auth_token}\n")
    return ws


def ray_jobs(address: str, token: str, workspace: str) -> list:
    """What Ray itself holds, asked with the right token by Ray's own client."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address, headers={"Authorization": f"Bearer {token}"})
    return [j for j in client.list_jobs() if (j.metadata or {}).get("argus.workspace") == workspace]


def finished(address: str, token: str, workspace: str) -> list:
    def done() -> list:
        jobs = ray_jobs(address, token, workspace)
        return jobs if jobs and all(j.status.value == "SUCCEEDED" for j in jobs) else []

    return until(done, f"jobs of {workspace} succeeded")


def test_plan_apply_status_logs_with_a_token_from_the_environment(auth_cluster, token, argus, tmp_path, monkeypatch):
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    ws = secured(tmp_path / "ws", "auth-env", auth_cluster.address, f"${{env:{TOKEN_VARIABLE}}}")
    ws.job("hello", QUICK)
    saved = tmp_path / "plan.json"
    planned = argus("plan", ws.root, "-o", saved)
    assert planned.code == 0, planned.err
    applied = argus("apply", saved, "--dir", ws.root)
    assert applied.code == 0, applied.err
    [job] = finished(auth_cluster.address, token, ws.name)

    status = argus("status", ws.root)
    assert status.code == 0 and job.submission_id in status.out and "SUCCEEDED" in status.out
    logs = argus("logs", "hello", ws.root)
    assert logs.code == 0 and "hello from argus" in logs.out
    followed = argus("logs", "hello", ws.root, "--follow")  # the websocket carries the token too
    assert followed.code == 0 and "hello from argus" in followed.out
    assert token not in json.dumps([job.entrypoint, job.runtime_env, job.metadata])  # Ray's job table
    assert_nowhere(token, [planned, applied, status, logs, followed], [ws.root, tmp_path / "argus-cache", saved])


def test_a_token_file_in_home_or_absolute(auth_cluster, token, argus, tmp_path):
    home_file = Path(os.environ["HOME"]) / ".config" / "ray-token"
    home_file.parent.mkdir(parents=True, exist_ok=True)
    home_file.write_text(token + "\n")
    for name, reference in (("auth-home", "~/.config/ray-token"), ("auth-abs", auth_cluster.auth_token_file)):
        ws = secured(tmp_path / name, name, auth_cluster.address, reference)
        ws.job("hello", QUICK)
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.err
        finished(auth_cluster.address, token, ws.name)
        assert_nowhere(token, [applied], [ws.root])
    shown = json.loads(argus("local", "status", "--json", "--state-dir", auth_cluster.state_dir).out)
    assert shown["auth_token_file"] == auth_cluster.auth_token_file


def test_a_missing_variable_stops_before_anything_is_sent(auth_cluster, token, argus, tmp_path):
    ws = secured(tmp_path / "ws", "auth-unset", auth_cluster.address, "${env:ARGUS_TEST_UNSET_RAY_TOKEN}")
    ws.job("hello", QUICK)
    for result in (argus("plan", ws.root), argus("apply", ws.root, "--auto-approve")):
        assert result.code == 1
        unset = "ARGUS_TEST_UNSET_RAY_TOKEN"
        assert f"Cluster 'local': auth_token is ${{env:{unset}}}, but {unset} is not set" in result.err
    assert ray_jobs(auth_cluster.address, token, ws.name) == []
    assert not (ws.shared / ".argus" / "audit").exists()


def test_a_wrong_or_absent_token_is_one_clear_error_and_never_shown(auth_cluster, token, argus, tmp_path, monkeypatch):
    wrong = secrets.token_hex(32)
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    ws = secured(tmp_path / "ws", "auth-wrong", auth_cluster.address, f"${{env:{TOKEN_VARIABLE}}}")
    ws.job("hello", QUICK)
    saved = tmp_path / "plan.json"
    assert argus("plan", ws.root, "-o", saved).code == 0  # reviewed with the right token ...
    monkeypatch.setenv(TOKEN_VARIABLE, wrong)  # ... applied with a wrong one
    results = [argus("apply", saved, "--dir", ws.root), argus("--debug", "apply", ws.root, "--auto-approve"),
               argus("plan", ws.root), argus("status", ws.root)]
    for result in results:  # the cluster cannot be read: an error at its address, said once
        assert result.code == 1
        rejected = f"Cluster 'local' at {auth_cluster.address}: the dashboard rejected the token"
        assert (result.out + result.err).count(rejected) == 1, result.out + result.err
    assert ray_jobs(auth_cluster.address, token, ws.name) == []

    anonymous = secured(tmp_path / "anonymous", "auth-none", auth_cluster.address, None)
    anonymous.job("hello", QUICK)
    refused = argus("plan", anonymous.root)
    assert refused.code == 1
    assert (refused.out + refused.err).count("the dashboard requires a token (RAY_AUTH_MODE=token)") == 1
    assert "auth_token: ${env:NAME}" in refused.out + refused.err
    for secret in (token, wrong):
        assert_nowhere(secret, [*results, refused], [ws.root, anonymous.root, saved, tmp_path / "argus-cache"])


def test_x_ray_authorization_passes_a_proxy_that_strips_authorization(auth_cluster, token, argus, tmp_path,
                                                                      monkeypatch):
    """Kubernetes' service proxy drops Authorization; Ray also reads X-Ray-Authorization (KubeRay sends it)."""
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    with reverse_proxy(auth_cluster.address, strip=("Authorization",)) as (address, seen):
        stripped = secured(tmp_path / "stripped", "auth-stripped", address.rstrip("/"), f"${{env:{TOKEN_VARIABLE}}}")
        stripped.job("hello", QUICK)
        refused = argus("plan", stripped.root)
        assert refused.code == 1 and "set `auth_header: X-Ray-Authorization`" in refused.out + refused.err

        ws = secured(tmp_path / "ws", "auth-x-ray", address.rstrip("/"), f"${{env:{TOKEN_VARIABLE}}}")
        with open(ws.root / "cluster.yaml", "a") as spec:
            spec.write("auth_header: X-Ray-Authorization\n")
        ws.job("hello", QUICK)
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        [job] = finished(auth_cluster.address, token, ws.name)
        status = argus("status", ws.root)
        assert status.code == 0 and "SUCCEEDED" in status.out
        cluster = load_workspace(ws.root).clusters["local"]
        chunks: list[str] = []
        RayClient("local", cluster.address, 10, token_of(cluster), transport_of(cluster)).follow(
            job.submission_id, chunks.append)  # the websocket carries it the same way
        assert "hello from argus" in "".join(chunks)
    sent = [s for s in seen if s.headers.get("X-Ray-Authorization") == f"Bearer {token}"]
    assert any(s.path == "/api/jobs/" and s.method == "POST" for s in sent)
    assert any(s.path.endswith("/logs/tail") for s in sent)
    assert not any("Authorization" in s.headers for s in sent)  # only the header chosen
    assert_nowhere(token, [refused, applied, status], [ws.root, stripped.root])


def test_this_process_token_never_travels_to_a_cluster_that_names_none(auth_cluster, token, monkeypatch, tmp_path):
    """Ray's stock client adds this process's own token (RAY_AUTH_MODE=token with RAY_AUTH_TOKEN, or
    ~/.ray/auth_token) to every request; argus sends only the token the cluster's spec names."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(token)
    with pytest.raises(ClusterAuthFailed, match="requires a token"):
        RayClient("local", auth_cluster.address).jobs()
    assert RayClient("local", auth_cluster.address, token=token).jobs() is not None


def test_a_literal_token_in_yaml_is_refused_at_its_line(argus, tmp_path):
    literal = secrets.token_hex(32)
    for value, rule in ((literal, "looks like a secret: write `auth_token: ${env:NAME}`"),
                        ("secrets/ray-token", "not relative"),
                        ("Bearer ${env:RAY_TOKEN}", "`${env:NAME}` must be the whole value")):
        ws = secured(tmp_path / f"ws{len(value)}", "literal", "http://127.0.0.1:1", value)
        result = argus("validate", ws.root)
        assert result.code == 1
        assert "cluster.yaml:8: auth_token: Value error, " in result.err and rule in result.err
        assert value not in result.out + result.err


@pytest.mark.parametrize("content, problem", [
    (b"", "is empty"), (b"  \n", "is empty"), (b"tok3n-a\ntok3n-b\n", "is not one token"),
    (b"tok3n-caf\xc3\xa9", "is not one token"), (b"tok3n" * 1000, f"larger than {MAX_TOKEN_FILE} bytes"),
])
def test_token_files_that_hold_no_token_are_refused_unquoted(tmp_path, content, problem):
    path = tmp_path / "ray.token"
    path.write_bytes(content)
    with pytest.raises(TokenUnavailable, match=problem) as caught:
        token_of(cluster_with(str(path)))
    assert "tok3n" not in str(caught.value)


def test_a_token_file_must_be_a_readable_regular_file(tmp_path):
    fifo = tmp_path / "fifo-ray.token"
    os.mkfifo(fifo)
    (tmp_path / "dir-ray.token").mkdir()
    for path, problem in ((tmp_path / "dir-ray.token", "not a regular file"), (fifo, "not a regular file"),
                          (tmp_path / "absent-ray.token", "cannot read its token file")):
        with pytest.raises(TokenUnavailable, match=problem):
            token_of(cluster_with(str(path)))
    (tmp_path / "auth_token").write_text("  abc123  \n")
    assert token_of(cluster_with(str(tmp_path / "auth_token"))) == "abc123"
    assert token_of(cluster_with(None)) is None


def cluster_with(auth_token: str | None):
    from specs.kinds.models import Cluster

    return Cluster(kind="Cluster", name="c", address="http://127.0.0.1:1", shared_root="/mnt/x", auth_token=auth_token)


def assert_nowhere(secret: str, results: list[Result], places: list[Path]) -> None:
    """Not in any output, nor in any file under `places` (shared root, audit log, records, saved plan)."""
    for result in results:
        assert secret not in result.out + result.err
    for place in places:
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file() and not p.is_symlink()]
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


def test_doctor_says_a_token_is_required_and_argus_works_and_never_shows_it(auth_cluster, token, argus, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    ws = secured(tmp_path / "ws", "auth-doctor", auth_cluster.address, f"${{env:{TOKEN_VARIABLE}}}")

    passed = argus("doctor", ws.root)

    assert passed.code == 0, passed.out + passed.err
    assert ("  ok    auth         the dashboard requires a token, and the one the cluster's auth_token names works"
            in passed.out)
    assert "  ok    shared-root  " in passed.out and "  ok    cleanup      " in passed.out
    wrong = secrets.token_hex(32)
    monkeypatch.setenv(TOKEN_VARIABLE, wrong)
    refused = argus("doctor", ws.root, "--json")
    assert refused.code == 1
    [check] = json.loads(refused.out)["clusters"][0]["checks"]
    assert check["check"] == "auth" and check["level"] == "fail" and "rejected the token" in check["message"]
    assert_nowhere(token, [passed, refused], [ws.root])
    assert_nowhere(wrong, [passed, refused], [ws.root])
