"""Where argus may link: a Ray dashboard, a run's page on it, a commit on a git web host; and the links an
event carries when serve sends it (the status page, the run's log there, the commit). Pure.

Every address comes from a spec, a lease or git config anyone with push access (or any job writing the
shared root) controls: a link is made only of an http(s) URL with a host and nothing a browser could
read otherwise (no spaces, quotes, angle brackets or control characters); anything else is shown as
text. The caller still escapes what it returns (reconcile.views.html._e). The status page and serve's
notifications link a commit the same way: only on a git web host argus knows the commit page of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from reconcile.report import Event

SAFE_URL = re.compile(r"^https?://[A-Za-z0-9._~%!$&'()*+,;=:@\[\]-]+(/[A-Za-z0-9._~%!$&()*+,;=:@/#?-]*)?$")
"""An absolute http(s) URL with a host, of characters that need no thought inside a quoted attribute."""
COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
FORGES = {"github.com": "/commit/", "codeberg.org": "/commit/", "gitlab.com": "/-/commit/",
          "bitbucket.org": "/commits/"}
"""Git web hosts whose commit page is known: host -> the path between the repository and the hash."""
REPO_PATH = re.compile(r"^/?([A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+)/?$")
"""owner/repo (or group/sub/repo), no segment starting with a dot (no `..`)."""
SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!//)(.+)$")
"""git@github.com:team/repo.git"""


@dataclass(frozen=True)
class Links:
    """What serve adds to each event it sends."""

    page_url: str | None = None
    """The status page, ending in `/`."""
    remote: str | None = None
    """The workspace repository's origin URL: commits link to their page on its web host (commit_url)."""

    def add(self, event: Event) -> Event:
        found: dict[str, str] = {}
        if self.page_url:
            found["page_url"] = self.page_url
            if event.submission_id:
                found["log_url"] = f"{self.page_url}logs/{quote(event.submission_id, safe='')}"
        if commit := commit_url(self.remote, event.commit):
            found["commit_url"] = commit
        return event.model_copy(update=found) if found else event


def page_url(public_url: str | None, host: str, port: int) -> str:
    """The status page's address as people use it: serve's `--public-url`, else where it listens."""
    if public_url:
        return public_url if public_url.endswith("/") else public_url + "/"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def web_url(address: str | None) -> str | None:
    """`address` as a link target, or None when it is not a plain http(s) URL (javascript:, data:, ...)."""
    if not address or not SAFE_URL.fullmatch(address):
        return None
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    return address


def ray_job_url(dashboard: str | None, submission_id: str) -> str | None:
    """The run's page on its cluster's Ray dashboard (the job detail page takes a submission id)."""
    base = web_url(dashboard)
    if base is None:
        return None
    return f"{base.rstrip('/')}/#/jobs/{quote(submission_id, safe='')}"


def commit_url(remote: str | None, commit: str | None) -> str | None:
    """The commit's page when the remote is a known git web host (its https or ssh URL; any user or
    token in it is dropped, never shown); None otherwise: the page shows the hash."""
    if not remote or not commit or not COMMIT.fullmatch(commit):
        return None
    host, path = _host_and_path(remote.strip())
    between = FORGES.get((host or "").lower())
    repo = REPO_PATH.fullmatch((path or "").rstrip("/").removesuffix(".git"))
    if between is None or repo is None:
        return None
    return web_url(f"https://{host.lower()}/{repo.group(1)}{between}{commit}")


def _host_and_path(remote: str) -> tuple[str | None, str | None]:
    if remote.startswith(("https://", "ssh://")):
        parts = urlsplit(remote)
        if parts.port not in (None, 22, 443) or parts.query or parts.fragment:
            return None, None
        return parts.hostname, parts.path
    scp = SCP_LIKE.fullmatch(remote)
    return (scp.group(1), scp.group(2)) if scp else (None, None)
