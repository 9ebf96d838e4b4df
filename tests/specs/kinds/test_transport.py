"""A Cluster's transport fields (specs.kinds.transport): what a pull request may write there, and what it may not."""

from __future__ import annotations

import secrets

import pytest
from pydantic import ValidationError

from specs.kinds.models import Cluster
from tests.support.workspace import make_workspace


def cluster(**fields: object) -> Cluster:
    return Cluster(kind="Cluster", name="c", address=fields.pop("address", "https://ray.example:8265"),
                   shared_root="/mnt/x", **fields)


@pytest.mark.parametrize("address", [
    "http://10.0.0.1:8265", "https://ray.example/", "https://k8s.example/api/v1/namespaces/ray/services/head:8265/proxy/",
    "https://ingress.example/teams/nlp/ray",
])
def test_dashboard_addresses_with_and_without_a_path_prefix(address):
    assert cluster(address=address).address == address


@pytest.mark.parametrize("address", ["10.0.0.1:8265", "https://ray.example/?next=x", "https://ray.example/#x",
                                     "https://ray example/", "ftp://ray.example/"])
def test_addresses_argus_refuses(address):
    with pytest.raises(ValidationError, match="must be the dashboard URL"):
        cluster(address=address)


def test_references_that_say_what_they_hold_are_accepted():
    made = cluster(auth_header="X-Ray-Authorization",
                   headers={"X-Proxy-Auth": "${env:PROD_RAY_PROXY_HEADER}", "X-Team": "/run/secrets/ray-team.header"},
                   cookies={"session": "~/.config/ray-proxy.cookie", "oauth": "${env:RAY_OAUTH_COOKIE}"},
                   tls={"ca_bundle": "~/ca.pem", "client_cert": "/etc/argus/client.pem", "client_key": "/k.pem"})
    assert made.auth_header == "X-Ray-Authorization" and made.tls.ca_bundle == "~/ca.pem"
    assert cluster().auth_header == "Authorization" and cluster().headers == {} and cluster().tls.ca_bundle is None


@pytest.mark.parametrize("field, value, problem", [
    ("headers", {"X-Proxy-Auth": "${env:GITHUB_TOKEN}"}, "RAY and one of"),
    ("headers", {"X-Proxy-Auth": "~/.git-credentials"}, "RAY and one of"),
    ("cookies", {"session": "${env:RAY_ADDRESS}"}, "RAY and one of"),
    ("cookies", {"session": "ray-proxy.cookie"}, "RAY and one of"),  # relative: a file in the pull request
    ("headers", {"X-Proxy-Auth": "Bearer ${env:RAY_PROXY_TOKEN}"}, "RAY and one of"),
    ("headers", {"Authorization": "${env:RAY_PROXY_TOKEN}"}, "argus sets this header itself"),
    ("headers", {"cookie": "${env:RAY_PROXY_COOKIE}"}, "argus sets this header itself"),
    ("headers", {"X-Bad\nHeader": "${env:RAY_PROXY_HEADER}"}, "is not a header name"),
    ("cookies", {"a;b": "${env:RAY_PROXY_COOKIE}"}, "is not a cookie name"),
    ("auth_header", "Proxy-Authorization", "Authorization"),
    ("tls", {"ca_bundle": "certs/ca.pem"}, "absolute path or ~/"),
    ("tls", {"client_key": "/k.pem"}, "client_key needs client_cert"),
])
def test_what_is_refused_and_the_value_is_never_echoed(field, value, problem):
    with pytest.raises(ValidationError, match=problem):
        cluster(**{field: value})


def test_a_literal_secret_in_a_header_or_cookie_is_refused_at_its_line_unquoted(argus, tmp_path):
    literal = secrets.token_hex(24)
    ws = make_workspace(tmp_path / "ws", "literal", "https://ray.example/")
    with open(ws.root / "cluster.yaml", "a") as spec:
        spec.write(f"headers: {{X-Proxy-Auth: 'Bearer {literal}'}}\ncookies: {{session: {literal}}}\n")
    result = argus("validate", ws.root)
    assert result.code == 1
    assert "cluster.yaml:8: headers: " in result.err and "cluster.yaml:9: cookies: " in result.err, result.err
    assert literal not in result.out + result.err
