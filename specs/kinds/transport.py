"""How argus reaches a cluster's dashboard beyond its address: TLS files, the token's header, and the
extra headers and cookies an authenticating proxy in front of it wants (docs/clusters.md, "Reaching a
dashboard behind TLS and proxies").

A pull request writes these fields, so every value that could be a secret is a reference, never the
secret: `${env:NAME}` or a file path, with names that say what they hold (as for auth_token, whose
rules these follow). Nothing here reads a file or a variable: state.ray.transport does, when argus connects.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ValidationInfo, field_validator

from specs.base import Frozen

SECRET_REF = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
COOKIE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
RESERVED_HEADERS = frozenset({"authorization", "x-ray-authorization", "cookie", "host", "content-length",
                              "content-type", "transfer-encoding", "connection", "upgrade", "te", "trailer",
                              "keep-alive", "proxy-authorization", "proxy-connection", "accept-encoding"})
"""Headers argus or HTTP itself sets: the token travels only as `auth_header:` says, cookies only as `cookies:`."""
KINDS = ("TOKEN", "HEADER", "COOKIE")
REFERENCE_RULE = ("a header's or cookie's value is a reference: `${env:NAME}` with NAME holding RAY and one of "
                  "TOKEN, HEADER or COOKIE (like PROD_RAY_PROXY_COOKIE), or a file, absolute or ~/..., whose "
                  "name holds ray and one of token, header or cookie (like /run/secrets/ray-proxy.cookie): argus "
                  "sends it to the cluster's address, so it must never read another secret of the machine it "
                  "runs on; the value itself never goes in a spec")
TLS_PATH_RULE = "a TLS file is an absolute path or ~/... (not relative: that file would be in the workspace, in git)"


def is_reference_variable(name: str) -> bool:
    upper = name.upper()
    return "RAY" in upper and any(kind in upper for kind in KINDS)


def is_reference_file_name(name: str) -> bool:
    lower = name.lower()
    return lower == "auth_token" or ("ray" in lower and any(kind.lower() in lower for kind in KINDS))


def check_value_reference(key: str, reference: str) -> str:
    """`${env:NAME}` or a path, named as REFERENCE_RULE says; anything else is refused without being
    echoed (it may be the secret itself)."""
    variable = SECRET_REF.match(reference)
    if variable and is_reference_variable(variable.group(1)):
        return reference
    if not variable and "${env:" not in reference and reference.startswith(("/", "~/")) \
            and not any(ord(c) < 32 or ord(c) == 127 for c in reference) \
            and is_reference_file_name(reference.rsplit("/", 1)[-1]):
        return reference
    raise ValueError(f"{key}: {REFERENCE_RULE}")


class ClusterTls(Frozen):
    """The files both the REST calls and the log stream use to trust the dashboard and prove who argus is."""

    ca_bundle: str | None = None
    """PEM file of the CA(s) that sign the dashboard's certificate; without it, the public CAs requests ships
    (certifi). Absolute or ~/..."""
    client_cert: str | None = None
    """PEM certificate argus presents (mutual TLS); with client_key unless the key is in the same file."""
    client_key: str | None = None
    """PEM private key of client_cert, unencrypted."""

    @field_validator("ca_bundle", "client_cert", "client_key")
    @classmethod
    def _absolute(cls, path: str | None) -> str | None:
        if path is not None and (not path.startswith(("/", "~/")) or any(ord(c) < 32 or ord(c) == 127 for c in path)):
            raise ValueError(TLS_PATH_RULE)
        return path

    @field_validator("client_key")
    @classmethod
    def _with_a_certificate(cls, key: str | None, info: ValidationInfo) -> str | None:
        if key is not None and info.data.get("client_cert") is None:
            raise ValueError("client_key needs client_cert (the certificate it belongs to)")
        return key


AuthHeader = Literal["Authorization", "X-Ray-Authorization"]


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    for name, reference in headers.items():
        if not HEADER_NAME.match(name):
            raise ValueError(f"{name[:64]!r} is not a header name (letters, digits and -)")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"{name}: argus sets this header itself (the token goes as `auth_header:` says, "
                             "cookies under `cookies:`)")
        check_value_reference(name, reference)
    return headers


def check_cookies(cookies: dict[str, str]) -> dict[str, str]:
    for name, reference in cookies.items():
        if not COOKIE_NAME.match(name):
            raise ValueError(f"{name[:64]!r} is not a cookie name (letters, digits, _ . -)")
        check_value_reference(name, reference)
    return cookies
