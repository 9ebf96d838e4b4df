"""Where notifications go: the --notify URLs and argus.yaml's routes as apprise channels, and what may be said
about them.

A URL carries tokens and passwords. No message names more of it than its place in the list, its
scheme and, for services addressed by a host, that host. apprise's own log lines may quote URLs, so
they never reach the log: `CAPTURE` keeps them for the one send that caused them, and `scrub`
cuts the URL's parts out of the one line a problem quotes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import apprise

from specs.errors import ArgusError
from specs.kinds.notifications import URL_FILE_RULE, URL_REFERENCE, Notifications, Template, is_url_file_name

STRUCTURED = ("json", "jsons")
"""Schemes that get the JSON event (docs/notifications.md) instead of text for people."""
MAX_URL_FILE = 65536
"""Bytes of a route's URL file: a few URLs; anything near this is no URL file."""
EXAMPLES = "slack://, feishu://, lark://, dingtalk://, wecombot://, mailto://, mailtos://, json://, jsons://"


class NotifyError(ArgusError):
    """A --notify URL apprise cannot use: found at start-up, all of them at once."""


@dataclass(frozen=True)
class Channel:
    label: str
    """"#2 slack://…", "#1 json://ops.internal:8080", "$ARGUS_NOTIFY#1 wecombot://…": what messages
    may show of the URL (its place, its scheme, and the host of services addressed by one)."""
    id: str
    """The ledger's name for the channel: a slow salted hash of the URL, so the ledger, readable
    by every job on the shared root, does not let anyone test guesses of a token cheaply."""
    scheme: str
    plugin: Any
    secrets: tuple[str, ...]
    route: str | None = None
    """The argus.yaml route it belongs to; None for a --notify URL, which hears every event."""
    template: Template | None = None


def channels(urls: Sequence[str]) -> list[Channel]:
    """One channel a distinct URL; raises NotifyError naming every URL apprise cannot use."""
    found: dict[str, Channel] = {}
    errors = []
    for place, url in _places(urls, errors):
        try:
            channel = _channel(place, url)
        except ValueError as err:
            errors.append(str(err))
            continue
        found.setdefault(channel.id, channel)  # the same URL twice is one channel
    if errors:
        raise NotifyError("\n".join(errors))
    return list(found.values())


def route_channels(notifications: Notifications) -> list[Channel]:
    """One channel a URL of each route of argus.yaml's `notifications:`; raises NotifyError naming every
    reference that holds no URL and every URL apprise cannot use. A channel's ledger id is its route's
    name with its URL: changing a route's filters or template sends nothing again; the same URL in two
    routes hears each event the two routes match twice, once in each route's words."""
    found: dict[str, Channel] = {}
    errors: list[str] = []
    for route in notifications.routes:
        template = notifications.templates.get(route.template) if route.template else None
        for place, url in _route_places(route.to, errors, what=f"route {route.name}: to"):
            try:
                channel = _channel(f"route {route.name} {place}", url, salt=f"route {route.name}\n")
            except ValueError as err:
                errors.append(str(err))
                continue
            found.setdefault(channel.id, replace(channel, route=route.name, template=template))
    if errors:
        raise NotifyError("\n".join(errors))
    return list(found.values())


def _route_places(references: Sequence[str], errors: list[str], what: str) -> list[tuple[str, str]]:
    """(place, URL) of a route's `to`: `${env:NAME}` as --notify's env:NAME; a file's URLs as
    "/run/secrets/ops-notify.url#1"."""
    places = []
    for number, reference in enumerate(references, start=1):
        variable = URL_REFERENCE.match(reference)
        if variable is not None:
            places += _places([f"env:{variable.group(1)}"], errors, what, first=number)
            continue
        found = _file_urls(reference, errors, f"{what} #{number} {reference}")
        places += [(f"{reference}#{k}", url) for k, url in enumerate(found, start=1)]
    return places


def _file_urls(reference: str, errors: list[str], where: str) -> list[str]:
    """The URLs in a file (whitespace between them), or [] with the reason in `errors`. Its content is
    never quoted. Symlinks are followed (secret mounts use them), but the file they reach must be
    named as a notification URL file too: a link in a checkout must not lead to ~/.git-credentials."""
    try:
        path = Path(reference).expanduser()
        real = os.path.realpath(path)
        if not is_url_file_name(os.path.basename(real)):
            errors.append(f"{where}: a link to a file of another name; {URL_FILE_RULE}")
            return []
        with os.fdopen(os.open(real, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:  # a FIFO must not hang start-up
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                errors.append(f"{where}: not a regular file")
                return []
            data = file.read(MAX_URL_FILE + 1)
    except (OSError, RuntimeError) as err:
        errors.append(f"{where}: cannot be read ({getattr(err, 'strerror', None) or type(err).__name__})")
        return []
    found = data[:MAX_URL_FILE].decode("utf-8", errors="replace").split() if len(data) <= MAX_URL_FILE else []
    if not found:
        errors.append(f"{where}: holds no URL" + (f" (or is larger than {MAX_URL_FILE} bytes)"
                                                   if len(data) > MAX_URL_FILE else ""))
    return found


def _places(urls: Sequence[str], errors: list[str], what: str = "--notify", first: int = 1) -> list[tuple[str, str]]:
    """(place, URL): "#2" for the second --notify; "$ARGUS_NOTIFY#1" for the first URL in the
    variable that `--notify env:ARGUS_NOTIFY` names (whitespace between URLs), which keeps tokens
    out of the command line every local user can read."""
    places = []
    for number, given in enumerate(urls, start=first):
        name = given.removeprefix("env:") if given.startswith("env:") else None
        if name is None:
            places.append((f"#{number}", given))
            continue
        found = os.environ.get(name, "").split() if name.isidentifier() else []
        if not found:
            errors.append(f"{what} #{number} env:{name}: the environment variable {name} holds no URL")
        places += [(f"${name}#{k}", url) for k, url in enumerate(found, start=1)]
    return places


def _channel(place: str, url: str, salt: str = "") -> Channel:
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    shown = scheme if scheme.isascii() and scheme.replace("+", "").isalnum() and len(scheme) <= 20 else "?"
    with CAPTURE.lines():  # apprise says why it refuses a URL by quoting the URL
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        raise ValueError(_refusal(place, scheme, shown))
    with_host = any("{host}" in template for template in getattr(plugin, "templates", ()))
    host = str(plugin.host) if with_host and getattr(plugin, "host", None) else "…"
    port = f":{plugin.port}" if host != "…" and isinstance(getattr(plugin, "port", None), int) else ""
    return Channel(label=f"{place} {shown}://{host}{port}", id=_channel_id(salt + url), scheme=scheme, plugin=plugin,
                   secrets=_secrets(url, keep=host))


def _refusal(place: str, scheme: str, shown: str) -> str:
    place = place if place.startswith("route ") else f"--notify {place}"
    if not scheme:
        return f"{place}: not a URL (no scheme://); give an apprise URL such as {EXAMPLES}"
    service = _services().get(scheme)
    if service is None:
        return (f"{place} ({shown}://…): not a notification service apprise knows; "
                f"give an apprise URL such as {EXAMPLES}")
    name, setup_url = service
    return (f"{place} ({shown}://…): not a valid {name} URL, or the service is disabled here "
            f"(a missing package); the form of the URL: {setup_url}")


def _services() -> dict[str, tuple[str, str]]:
    """Scheme -> (service name, setup page), of every service this apprise knows."""
    found = {}
    for schema in apprise.Apprise().details().get("schemas", []):
        for scheme in (*(schema.get("protocols") or ()), *(schema.get("secure_protocols") or ())):
            found[scheme] = (schema.get("service_name", scheme), schema.get("setup_url", ""))
    return found


def _channel_id(url: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", url.encode("utf-8"), b"argus notify channel", 100_000).hex()[:16]


def _secrets(url: str, keep: str) -> tuple[str, ...]:
    """Every part of the URL a message could leak, longest first, in the forms they may appear."""
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        userinfo, _, hostport = parts.netloc.rpartition("@")
        host = hostport.rsplit(":", 1)[0] if not hostport.endswith("]") else hostport
        pieces = [url, parts.netloc if userinfo else "", *userinfo.split(":"), host if host != keep else "",
                  *parts.path.split("/"),
                  *(value for _, value in parse_qsl(parts.query)), parts.fragment]
        forms = {form for piece in pieces if piece for form in (piece, unquote(piece), quote(unquote(piece), safe=""))
                 if len(form) >= 4}
        return tuple(sorted(forms, key=len, reverse=True))
    return (url,)


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class Capture(logging.Handler):
    """apprise's warnings, kept per thread for as long as a `lines()` block runs, dropped otherwise."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._local = threading.local()

    @contextlib.contextmanager
    def lines(self) -> Iterator[list[str]]:
        self._local.lines = []
        try:
            yield self._local.lines
        finally:
            self._local.lines = None

    def emit(self, record: logging.LogRecord) -> None:
        lines = getattr(self._local, "lines", None)
        if lines is not None:
            with contextlib.suppress(Exception):
                lines.append(record.getMessage())


CAPTURE = Capture()


def quiet_apprise() -> None:
    """apprise logs URLs ("Could not load Slack URL: slack://..."): its records stop at CAPTURE."""
    logger = logging.getLogger("apprise")
    if CAPTURE not in logger.handlers:
        logger.addHandler(CAPTURE)
    logger.propagate = False
