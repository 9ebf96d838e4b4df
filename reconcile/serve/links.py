"""Links an event carries when it is sent: the status page, the run's log there, the commit on the web. Pure.

The page is the serve's own (`--listen`), or `--public-url` when people reach it through a proxy. A
commit link is made only for a remote on a web host (https, or ssh to a host argus knows the web
form of); credentials in the remote are never part of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from reconcile.report import Event

COMMIT_PATHS = {"github.com": "commit", "gitlab.com": "-/commit", "bitbucket.org": "commits",
                "codeberg.org": "commit"}
"""Where a host shows one commit; any other https host gets `commit` (GitHub Enterprise, Gitea, Forgejo)
unless its name says GitLab."""
SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/][^\s]*)$")
SAFE_PATH = re.compile(r"^/[A-Za-z0-9._~/-]+$")


@dataclass(frozen=True)
class Links:
    page_url: str | None = None
    """The status page, ending in `/`."""
    commit_base: str | None = None
    """`https://host/owner/repo/commit/`: the commit id follows."""

    def add(self, event: Event) -> Event:
        found: dict[str, str] = {}
        if self.page_url:
            found["page_url"] = self.page_url
            if event.submission_id:
                found["log_url"] = f"{self.page_url}logs/{quote(event.submission_id, safe='')}"
        if self.commit_base and event.commit and re.fullmatch(r"[0-9a-f]{7,64}", event.commit):
            found["commit_url"] = self.commit_base + event.commit
        return event.model_copy(update=found) if found else event


def page_url(public_url: str | None, host: str, port: int) -> str:
    """The page's address as people use it: `--public-url`, else where the serve listens."""
    if public_url:
        return public_url if public_url.endswith("/") else public_url + "/"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def commit_base(remote: str | None) -> str | None:
    """`https://host/owner/repo/<commit path>/` of a git remote on a web host; None for any other remote."""
    if not remote:
        return None
    host, path = _host_path(remote.strip())
    if not host or not path:
        return None
    path = path.removesuffix("/").removesuffix(".git")
    if not SAFE_PATH.match(path) or path.count("/") < 2 or "/../" in path + "/":
        return None
    kind = COMMIT_PATHS.get(host) or ("-/commit" if "gitlab" in host else "commit")
    return f"https://{host}{path}/{kind}/"


def _host_path(remote: str) -> tuple[str | None, str | None]:
    if remote.startswith(("https://", "ssh://")):
        parts = urlsplit(remote)
        host = parts.hostname
        if remote.startswith("ssh://") and host not in COMMIT_PATHS:
            return None, None
        port = f":{parts.port}" if remote.startswith("https://") and parts.port else ""
        return (f"{host}{port}" if host else None), parts.path
    scp = SCP_LIKE.match(remote)
    if scp and scp["host"] in COMMIT_PATHS:  # an ssh remote: its web form is known only for known hosts
        return scp["host"], "/" + scp["path"]
    return None, None
