"""How argus reaches a dashboard behind what real deployments put in front of it (state.ray.transport):
a TLS-terminating proxy signed by a private CA, a path prefix, an HTTP proxy from the environment, an
authenticating proxy's headers and cookies. All in front of the session's real Ray cluster; every proxy
records what reached it, so the tests assert that the REST calls AND the log websocket travelled as set."""

from __future__ import annotations

import base64
import json
import secrets
import ssl
from pathlib import Path

import pytest

from specs.errors import ArgusError
from specs.load.loader import load_workspace
from state.ray.auth import token_of
from state.ray.client import ClusterTlsFailed, RayClient
from state.ray.transport import Transport, certificate_message, certificate_problem, proxy_for, transport_of
from tests.support.cluster import QUICK, jobs_of, until
from tests.support.proxies import forward_proxy, make_pki, reverse_proxy
from tests.support.workspace import Result, Workspace, make_workspace

UNTRUSTED = "the dashboard's certificate is not trusted"


def behind(root: Path, name: str, address: str, extra: str = "") -> Workspace:
    ws = make_workspace(root, name, address)
    with open(ws.root / "cluster.yaml", "a") as spec:
        spec.write(extra)
    return ws


def finished(address: str, workspace: str) -> list:
    def done() -> list:
        jobs = jobs_of(address, workspace)
        return jobs if jobs and all(j.status.value == "SUCCEEDED" for j in jobs) else []

    return until(done, f"jobs of {workspace} succeeded")


def lifecycle(argus, ws: Workspace, upstream: str) -> list[Result]:
    """Submit through the proxy, wait for Ray to finish it, then status and the followed log: all through it."""
    applied = argus("apply", ws.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    finished(upstream, ws.name)
    status = argus("status", ws.root)
    assert status.code == 0 and "SUCCEEDED" in status.out, status.out + status.err
    followed = argus("logs", "hello", ws.root, "--follow")
    assert followed.code == 0 and "hello from argus" in followed.out, followed.out + followed.err
    # A finished run's log is read from the shared root: Ray's websocket is followed as argus does for a
    # run whose log is not kept there, by the client argus builds from the same spec.
    assert "hello from argus" in follow_as_argus(ws, jobs_of(upstream, ws.name)[0].submission_id)
    return [applied, status, followed]


def follow_as_argus(ws: Workspace, submission_id: str) -> str:
    cluster = load_workspace(ws.root).clusters["local"]
    chunks: list[str] = []
    RayClient("local", cluster.address, 10, token_of(cluster), transport_of(cluster)).follow(submission_id,
                                                                                           chunks.append)
    return "".join(chunks)


def paths(seen: list) -> list[str]:
    return [s.path for s in seen]


def test_a_private_ca_is_trusted_by_rest_and_websocket_alike(ray_cluster, argus, tmp_path):
    pki = make_pki(tmp_path / "pki")
    with reverse_proxy(ray_cluster.address, tls=pki) as (address, seen):
        ws = behind(tmp_path / "ws", "tls-ca", address.rstrip("/"), f"tls: {{ca_bundle: {pki.ca}}}\n")
        ws.job("hello", QUICK)
        lifecycle(argus, ws, ray_cluster.address)
        assert any(p == "/api/jobs/" for p in paths(seen)), paths(seen)  # submit and list over TLS
        assert any(p.endswith("/logs/tail") for p in paths(seen)), paths(seen)  # the websocket too
        [job] = jobs_of(ray_cluster.address, ws.name)

        untrusting = behind(tmp_path / "ws2", "tls-ca", address.rstrip("/"))
        untrusting.job("hello", QUICK)
        before = len(seen)
        for result in (argus("status", untrusting.root), argus("apply", untrusting.root, "--auto-approve"),
                       argus("logs", "hello", untrusting.root, "--follow")):
            assert result.code == 1
            assert UNTRUSTED in result.out + result.err and "set `tls: {ca_bundle:" in result.out + result.err
            assert "Is the head running" not in result.out + result.err
        assert len(seen) == before, "no request got past a handshake argus refused"

        # The websocket alone (the REST calls above stop a command first): same store, same message.
        chunks: list[str] = []
        with pytest.raises(ClusterTlsFailed, match=UNTRUSTED):
            RayClient("local", address, 10).follow(job.submission_id, chunks.append)
        RayClient("local", address, 10, transport=Transport(ca_bundle=str(pki.ca))).follow(
            job.submission_id, chunks.append)
        assert "hello from argus" in "".join(chunks)


def test_a_client_certificate_is_presented_on_both_paths(ray_cluster, argus, tmp_path):
    pki = make_pki(tmp_path / "pki")
    with reverse_proxy(ray_cluster.address, tls=pki, require_client_cert=True) as (address, seen):
        tls = f"tls: {{ca_bundle: {pki.ca}, client_cert: {pki.client_cert}, client_key: {pki.client_key}}}\n"
        ws = behind(tmp_path / "ws", "tls-mutual", address.rstrip("/"), tls)
        ws.job("hello", QUICK)
        lifecycle(argus, ws, ray_cluster.address)
        assert any(p.endswith("/logs/tail") for p in paths(seen))
        anonymous = behind(tmp_path / "ws2", "tls-mutual", address.rstrip("/"), f"tls: {{ca_bundle: {pki.ca}}}\n")
        before = len(seen)
        refused = argus("status", anonymous.root)
        assert refused.code == 1 and len(seen) == before, refused.out + refused.err
        assert "tls.client_cert" in refused.out + refused.err


def test_an_http_proxy_from_the_environment_carries_both_paths(ray_cluster, argus, tmp_path, monkeypatch):
    with forward_proxy() as (proxy, seen):
        for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
            monkeypatch.delenv(name, raising=False)
        with_login = proxy.replace("http://", "http://argus:pr0xy-pass@")  # a login both paths send
        monkeypatch.setenv("http_proxy", with_login)
        monkeypatch.setenv("HTTP_PROXY", with_login)
        ws = behind(tmp_path / "ws", "via-proxy", ray_cluster.address)
        ws.job("hello", QUICK)
        lifecycle(argus, ws, ray_cluster.address)
        targets = paths(seen)
        assert f"{ray_cluster.address}/api/jobs/" in targets, targets  # REST, forwarded by the proxy
        assert any(t.startswith(ray_cluster.address) and t.endswith("/logs/tail") for t in targets), targets
        login = "Basic " + base64.b64encode(b"argus:pr0xy-pass").decode()
        assert all(s.headers.get("Proxy-Authorization") == login for s in seen), seen

        # https through the same proxy: a CONNECT tunnel each, with the login, for REST and the websocket
        pki = make_pki(tmp_path / "pki")
        monkeypatch.setenv("https_proxy", with_login)
        monkeypatch.setenv("HTTPS_PROXY", with_login)
        with reverse_proxy(ray_cluster.address, tls=pki) as (tls_address, behind_tls):
            client = RayClient("local", tls_address, 10, transport=Transport(ca_bundle=str(pki.ca)))
            [job] = [j for j in client.jobs() if j.metadata.get("argus.workspace") == ws.name]
            chunks: list[str] = []
            client.follow(job.submission_id, chunks.append)
        assert "hello from argus" in "".join(chunks)
        tunnel = tls_address.removeprefix("https://").rstrip("/")
        connects = [s for s in seen if s.method == "CONNECT" and s.path == tunnel]
        assert len(connects) >= 2 and all(s.headers.get("Proxy-Authorization") == login for s in connects)
        assert "/api/jobs/" in paths(behind_tls) and any(p.endswith("/logs/tail") for p in paths(behind_tls))

        monkeypatch.setenv("no_proxy", "127.0.0.1")  # NO_PROXY: both paths go direct
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        before = len(seen)
        status = argus("status", ws.root)
        assert status.code == 0 and "hello from argus" in follow_as_argus(ws, jobs_of(ray_cluster.address,
                                                                                      ws.name)[0].submission_id)
        assert len(seen) == before, paths(seen)[before:]


def test_an_address_under_a_path_prefix(ray_cluster, argus, tmp_path):
    prefix = "/api/v1/namespaces/ray/services/head:8265/proxy/"
    with reverse_proxy(ray_cluster.address, prefix=prefix) as (address, seen):
        ws = behind(tmp_path / "ws", "prefixed", address)
        ws.job("hello", QUICK)
        lifecycle(argus, ws, ray_cluster.address)
        assert all(p.startswith(prefix) for p in paths(seen)), paths(seen)
        assert f"{prefix}api/jobs/" in paths(seen) and any(p.endswith("/logs/tail") for p in paths(seen))


def test_an_authenticating_proxy_gets_its_header_and_cookie_on_both_paths_and_they_go_nowhere_else(
        ray_cluster, argus, tmp_path, monkeypatch):
    header, cookie = secrets.token_hex(24), secrets.token_hex(24)
    monkeypatch.setenv("PROD_RAY_PROXY_HEADER", f"Bearer {header}")
    cookie_file = Path.home() / ".config" / "ray-proxy.cookie"
    cookie_file.parent.mkdir(parents=True)
    cookie_file.write_text(cookie + "\n")
    with reverse_proxy(ray_cluster.address) as (address, seen):
        extra = ("headers: {X-Proxy-Auth: '${env:PROD_RAY_PROXY_HEADER}'}\n"
                 "cookies: {session: ~/.config/ray-proxy.cookie}\n")
        ws = behind(tmp_path / "ws", "proxy-auth", address.rstrip("/"), extra)
        ws.job("hello", QUICK)
        saved = tmp_path / "plan.json"
        planned = argus("plan", ws.root, "-o", saved)
        assert planned.code == 0, planned.err
        results = [planned, *lifecycle(argus, ws, ray_cluster.address)]
        for request in seen:  # REST and websocket alike
            assert request.headers.get("X-Proxy-Auth") == f"Bearer {header}", request
            assert request.headers.get("Cookie") == f"session={cookie}", request
        assert any(s.path.endswith("/logs/tail") for s in seen)

        monkeypatch.setenv("ARGUS_TOKEN_HOSTS", "dashboard.example:443")  # pinned like a token
        before = len(seen)
        pinned = argus("status", ws.root)
        assert pinned.code == 1 and "ARGUS_TOKEN_HOSTS" in pinned.err and len(seen) == before
    [job] = jobs_of(ray_cluster.address, ws.name)
    table = json.dumps([job.entrypoint, job.runtime_env, job.metadata])
    for secret in (header, cookie):
        assert secret not in table
        assert_nowhere(secret, [*results, pinned], [ws.root, saved, tmp_path / "argus-cache"])


@pytest.mark.parametrize("field, reference", [
    ("headers", "{X-Proxy-Auth: '${env:GITHUB_TOKEN}'}"),
    ("cookies", "{session: '${env:AWS_SECRET_ACCESS_KEY}'}"),
    ("headers", "{X-Proxy-Auth: ~/.git-credentials}"),
    ("cookies", "{session: /etc/ssh/ssh_host_ed25519_key}"),
])
def test_a_reference_to_another_secret_is_refused_at_validate_and_never_read(
        argus, tmp_path, monkeypatch, field, reference):
    stolen = secrets.token_hex(24)
    monkeypatch.setenv("GITHUB_TOKEN", stolen)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", stolen)
    (Path.home() / ".git-credentials").write_text(f"https://x:{stolen}@github.com\n")
    with reverse_proxy("http://127.0.0.1:9") as (address, seen):
        ws = behind(tmp_path / "ws", "stealing", address.rstrip("/"), f"{field}: {reference}\n")
        ws.job("hello", QUICK)
        results = [argus("validate", ws.root), argus("plan", ws.root), argus("apply", ws.root, "--auto-approve")]
        for result in results:
            assert result.code == 1
            assert f"cluster.yaml:8: {field}" in result.err and "RAY and one of" in result.err, result.err
        assert seen == [], "nothing was sent anywhere"
    assert_nowhere(stolen, results, [ws.root, tmp_path / "argus-cache"])


def assert_nowhere(secret: str, results: list[Result], places: list[Path]) -> None:
    """Not in any output, nor in any file under `places` (shared root, audit log, records, saved plan)."""
    for result in results:
        assert secret not in result.out + result.err
    for place in places:
        if not place.exists():
            continue
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file() and not p.is_symlink()]
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


def spec(**fields: object):
    from specs.kinds.models import Cluster

    return Cluster(kind="Cluster", name="c", address=fields.pop("address", "https://ray.example:8265/prefix/"),
                   shared_root="/mnt/x", **fields)


def test_references_are_read_when_argus_connects_and_refused_unquoted(tmp_path, monkeypatch):
    monkeypatch.setenv("PROD_RAY_PROXY_HEADER", " Bearer abc \n")
    cookie = tmp_path / "ray-proxy.cookie"
    cookie.write_text("s3cr3t-cookie\n")
    made = transport_of(spec(auth_header="X-Ray-Authorization", cookies={"session": str(cookie)},
                             headers={"X-Proxy-Auth": "${env:PROD_RAY_PROXY_HEADER}"}))
    assert made.headers == {"X-Proxy-Auth": "Bearer abc", "Cookie": "session=s3cr3t-cookie"}
    assert made.auth_header == "X-Ray-Authorization" and set(made.secrets) == {"Bearer abc", "s3cr3t-cookie"}

    link = tmp_path / "ray-link.cookie"
    (tmp_path / "id_rsa").write_text("s3cr3t-key")
    link.symlink_to(tmp_path / "id_rsa")  # named right, pointing at another secret
    monkeypatch.setenv("RAY_BAD_COOKIE", "a;b=s3cr3t")
    for fields, problem in (({"cookies": {"session": str(link)}}, "link to a file of another name"),
                            ({"cookies": {"session": "${env:RAY_BAD_COOKIE}"}}, "not one cookie value"),
                            ({"headers": {"X-A": "${env:RAY_UNSET_HEADER}"}}, "RAY_UNSET_HEADER is not set"),
                            ({"tls": {"ca_bundle": str(tmp_path / "absent.pem")}}, "is not a readable file")):
        with pytest.raises(ArgusError, match=problem) as caught:
            transport_of(spec(**fields))
        assert "s3cr3t" not in str(caught.value)

    monkeypatch.setenv("ARGUS_TOKEN_HOSTS", "ray.example:8265")
    assert transport_of(spec(cookies={"session": str(cookie)})).headers["Cookie"] == "session=s3cr3t-cookie"
    with pytest.raises(ArgusError, match="ARGUS_TOKEN_HOSTS"):
        transport_of(spec(address="https://elsewhere.example/", cookies={"session": str(cookie)}))


def test_one_proxy_choice_for_both_paths(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https://ray.example/") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert proxy_for("https://ray.example/prefix/api/jobs/") == "http://proxy.example:3128"
    assert proxy_for("https://head.internal.example:8265/") is None
    assert proxy_for("http://ray.example/") is None  # HTTPS_PROXY is for https URLs only
    options = Transport().requests_options("https://ray.example/")
    assert options["proxies"] == {"http": "http://proxy.example:3128", "https": "http://proxy.example:3128"}


def test_one_ca_file_for_both_paths_from_the_spec_else_the_machines_environment(monkeypatch, tmp_path):
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    import certifi

    assert Transport().verify == certifi.where()
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "openssl.pem"))
    assert Transport().verify == str(tmp_path / "openssl.pem")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "company.pem"))
    assert Transport().verify == str(tmp_path / "company.pem")  # requests' own variable first, as before
    spec = Transport(ca_bundle=str(tmp_path / "cluster.pem"))
    assert spec.verify == spec.requests_options("https://ray.example/")["verify"] == str(tmp_path / "cluster.pem")


def test_only_tls_failures_are_worded_as_tls():
    assert certificate_problem(ConnectionRefusedError(111, "Connection refused")) is None
    refused = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:2580)")
    assert certificate_problem(refused) == "tlsv1 alert unknown ca"
    untrusted = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                                "unable to get local issuer certificate (_ssl.c:1006)")
    wrapped = ConnectionError("HTTPSConnectionPool: Max retries exceeded")
    wrapped.__context__ = untrusted
    assert certificate_problem(wrapped) == "certificate verify failed: unable to get local issuer certificate"
    assert "set `tls: {ca_bundle:" in certificate_message("c", "https://x/", certificate_problem(wrapped))
    assert "client_cert" in certificate_message("c", "https://x/", "tlsv1 alert unknown ca")
