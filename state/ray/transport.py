"""How every request to one dashboard travels: the one place that decides its TLS trust, client certificate,
proxy and headers, for the REST calls (requests) and the log websocket (aiohttp) alike.

Two libraries left to themselves disagree: requests trusts certifi's CAs (or REQUESTS_CA_BUNDLE) and
honours HTTP(S)_PROXY/NO_PROXY, aiohttp trusts the system's store and, without trust_env (which would
also read ~/.netrc), ignores proxies. So argus decides here and hands each library the same choice:
the CA file (the cluster's tls.ca_bundle, else certifi's), the client certificate, and the proxy the
environment names for the dashboard's URL (NO_PROXY honoured).

Header and cookie values are read from their references (`${env:NAME}` or a file, named as
specs.kinds.transport says) when argus connects, sent only to the cluster's address (pinned like tokens,
ARGUS_TOKEN_HOSTS), and masked in whatever the dashboard answers.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specs.errors import ArgusError
from specs.kinds.models import Cluster
from specs.kinds.transport import SECRET_REF, is_reference_file_name
from state.ray.auth import MAX_TOKEN_FILE, TokenUnavailable, check_host_allowed, read_regular

HEADER_TEXT = re.compile(r"[\x20-\x7e]+")
"""One header line's value: visible ASCII and spaces, no line breaks (that would add a header)."""
COOKIE_TEXT = re.compile(r"[\x21-\x7e]+")
COOKIE_FORBIDDEN = set(';,"\\')
ENVIRONMENT_CA_FILES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
"""Where requests, then OpenSSL, look for a CA file this machine's operator chose (never a spec: a pull
request cannot set them)."""


class TransportUnavailable(ArgusError):
    """A cluster's TLS files, headers or cookies cannot be used as its spec says."""


@dataclass(frozen=True)
class Transport:
    """What every request to one dashboard carries and trusts, besides its address."""

    auth_header: str = "Authorization"
    headers: dict[str, str] = field(default_factory=dict)
    """Extra headers, the Cookie header included, values read from their references."""
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values masked in the dashboard's answers: every extra header's, and each cookie's."""
        values = [value for name, value in self.headers.items() if name != "Cookie"]
        values += [part.split("=", 1)[-1] for part in self.headers.get("Cookie", "").split("; ")]
        return tuple(value for value in values if value)

    @property
    def verify(self) -> str:
        """The CA file both paths trust: the cluster's tls.ca_bundle, else the one this machine's environment
        names for requests or OpenSSL (a company CA set once for every tool: the REST calls trusted it before
        argus had tls:), else certifi's public CAs. One file either way, so the two paths never disagree."""
        if self.ca_bundle is not None:
            return self.ca_bundle
        for variable in ENVIRONMENT_CA_FILES:
            if os.environ.get(variable):
                return os.environ[variable]
        import certifi  # requests' own default store; the websocket now trusts the same

        return certifi.where()

    def requests_options(self, url: str) -> dict[str, Any]:
        """requests' keyword arguments for a request to `url` (its session ignores the environment)."""
        proxy = proxy_for(url)
        options: dict[str, Any] = {"verify": self.verify, "proxies": {"http": proxy, "https": proxy} if proxy else {}}
        if self.client_cert is not None:
            options["cert"] = (self.client_cert, self.client_key) if self.client_key else self.client_cert
        return options

    def ssl_context(self) -> ssl.SSLContext:
        """The websocket's TLS: the same CA file and client certificate as the REST calls."""
        trusted = self.verify  # requests takes a directory of CA files too (REQUESTS_CA_BUNDLE may name one)
        context = ssl.create_default_context(**({"capath": trusted} if os.path.isdir(trusted) else {"cafile": trusted}))
        if self.client_cert is not None:
            context.load_cert_chain(self.client_cert, self.client_key)
        return context


def transport_of(cluster: Cluster) -> Transport:
    """The cluster's transport, its references read now; a reference that cannot be used stops here."""
    headers = {name: _header_value(cluster, name, reference) for name, reference in cluster.headers.items()}
    cookies = {name: _cookie_value(cluster, name, reference) for name, reference in cluster.cookies.items()}
    if cookies:
        headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in cookies.items())
    tls = cluster.tls
    if headers or tls.client_cert:
        check_host_allowed(cluster)
    return Transport(auth_header=cluster.auth_header, headers=headers, ca_bundle=_tls_file(cluster, "ca_bundle"),
                     client_cert=_tls_file(cluster, "client_cert"), client_key=_tls_file(cluster, "client_key"))


def proxy_for(url: str) -> str | None:
    """The proxy HTTP(S)_PROXY/ALL_PROXY name for `url`, or None (none set, or NO_PROXY covers its host)."""
    from requests.utils import get_environ_proxies, select_proxy

    return select_proxy(url, get_environ_proxies(url))


def websocket_proxy(url: str) -> tuple[str | None, dict[str, str]]:
    """proxy_for's choice as aiohttp takes it: the proxy URL without credentials, and those as the proxy's
    own Proxy-Authorization header (requests reads them from the URL itself; aiohttp would send none)."""
    proxy = proxy_for(url)
    if proxy is None:
        return None, {}
    from yarl import URL

    parsed = URL(proxy)
    if parsed.user is None:
        return proxy, {}
    login = base64.b64encode(f"{parsed.user}:{parsed.password or ''}".encode()).decode()
    return str(parsed.with_user(None)), {"Proxy-Authorization": f"Basic {login}"}


def certificate_problem(err: BaseException) -> str | None:
    """What a TLS failure says, when `err` (requests' or aiohttp's) is one; None otherwise."""
    text = " ".join(str(e) for e in _chain(err))
    if not any(isinstance(e, ssl.SSLError) or any("SSL" in t.__name__ for t in type(e).__mro__) for e in _chain(err)):
        return None
    verify = re.search(r"certificate verify failed: ([^()'\"]+)", text)
    return f"certificate verify failed: {verify.group(1).strip()}" if verify else _ssl_reason(text)


def certificate_message(cluster: str, address: str, problem: str) -> str:
    if problem.startswith("certificate verify failed"):
        return (f"Cluster {cluster!r} at {address}: the dashboard's certificate is not trusted ({problem}). If it "
                "is signed by a private CA, set `tls: {ca_bundle: /path/to/ca.pem}` in the cluster's spec; both the "
                "REST calls and the log stream trust that file.")
    return (f"Cluster {cluster!r} at {address}: the TLS handshake with the dashboard failed ({problem}). Check the "
            "cluster's `tls:` (ca_bundle, and client_cert/client_key if the dashboard asks for a client certificate).")


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [err]
    while todo and len(seen) < 20:
        one = todo.pop()
        if one is None or any(one is s for s in seen):
            continue
        seen.append(one)
        todo += [one.__cause__, one.__context__, *(a for a in one.args if isinstance(a, BaseException))]
        todo += [getattr(one, "reason", None) if isinstance(getattr(one, "reason", None), BaseException) else None]
    return seen


def _ssl_reason(text: str) -> str:
    reason = re.search(r"\[SSL: ([A-Z0-9_]+)\]", text) or re.search(r"(SSL[A-Za-z]*Error)", text)
    return reason.group(1).lower().replace("_", " ") if reason else "TLS error"


def _tls_file(cluster: Cluster, name: str) -> str | None:
    path = getattr(cluster.tls, name)
    if path is None:
        return None
    try:
        expanded = Path(path).expanduser()
    except RuntimeError:
        raise TransportUnavailable(f"Cluster {cluster.name!r}: its tls.{name} {path} starts with ~, but argus's home "
                                   "directory is unknown (HOME is not set).") from None
    if not expanded.is_file():
        raise TransportUnavailable(f"Cluster {cluster.name!r}: its tls.{name} {expanded} is not a readable file.")
    return str(expanded)


def _reference(cluster: Cluster, what: str, reference: str) -> str:
    """The text a header's or cookie's reference points at, stripped; never quoted in a message."""
    variable = SECRET_REF.match(reference)
    if variable:
        value = os.environ.get(variable.group(1))
        if value is None:
            raise TokenUnavailable(f"Cluster {cluster.name!r}: {what} is {reference}, but {variable.group(1)} is not "
                                   "set in argus's environment. Export it and run the command again.")
        return value.strip()
    try:
        path = Path(reference).expanduser()
    except RuntimeError:
        raise TokenUnavailable(f"Cluster {cluster.name!r}: {what} {reference} starts with ~, but argus's home "
                               "directory is unknown (HOME is not set).") from None
    if not is_reference_file_name(os.path.basename(os.path.realpath(path))):
        raise TokenUnavailable(f"Cluster {cluster.name!r}: {what} {path} is a link to a file of another name; "
                               "the file itself must be named as for a reference (ray and token/header/cookie).")
    data = read_regular(cluster.name, path, f"{what} file {path}")
    if len(data) > MAX_TOKEN_FILE:
        raise TokenUnavailable(f"Cluster {cluster.name!r}: {what} file {path} is larger than {MAX_TOKEN_FILE} bytes.")
    return data.decode("ascii", errors="replace").strip()


def _header_value(cluster: Cluster, name: str, reference: str) -> str:
    value = _reference(cluster, f"header {name}", reference)
    if not HEADER_TEXT.fullmatch(value):
        raise TokenUnavailable(f"Cluster {cluster.name!r}: header {name}'s value ({reference}) is empty or not one "
                               "header value (visible ASCII and spaces, one line).")
    return value


def _cookie_value(cluster: Cluster, name: str, reference: str) -> str:
    value = _reference(cluster, f"cookie {name}", reference)
    if not COOKIE_TEXT.fullmatch(value) or COOKIE_FORBIDDEN & set(value):
        raise TokenUnavailable(f"Cluster {cluster.name!r}: cookie {name}'s value ({reference}) is empty or not one "
                               "cookie value (visible ASCII, no spaces, ; , \" or \\).")
    return value
