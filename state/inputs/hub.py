"""A hub mirror (an `HF_ENDPOINT`-style base URL) read at plan time: a branch, tag or commit of a model or data set
repository resolved to its commit, and the files at that commit with their sizes and digests.

Plain `requests`, not huggingface_hub: two GETs need no client library, huggingface_hub checks only sizes, and
with hf_xet installed a mirror's xet headers send downloads elsewhere (issue 40's research). Every answer is
hostile until checked: one deadline for the whole read, a byte cap on every JSON body, shapes checked by
shapes.py, and each failure a `HubError` naming the endpoint and the repository, never a traceback."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urljoin, urlsplit

from specs.errors import ArgusError
from specs.kinds.inputs import Dataset, Model
from state.inputs import shapes
from state.inputs.shapes import HubFile, WrongShape

if TYPE_CHECKING:
    import requests

Kind = Literal["model", "dataset"]
MAX_BODY = 8 << 20
"""Bytes of one JSON answer: a listing of MAX_FILES entries is about 2 MiB."""
MAX_PAGES = 20
"""Pages of one `/tree` listing followed through `Link: rel="next"`."""
TIMEOUT = 20.0
"""Seconds for one whole request, connect to last byte: a mirror that drips is as dead as one that hangs."""


class HubError(ArgusError):
    """The mirror could not be read, or answered something a hub mirror does not send."""


@dataclass(frozen=True)
class HubRepo:
    """One repository on one mirror."""

    endpoint: str
    """The mirror's base URL, as HF_ENDPOINT gives it (no trailing slash)."""
    repo: str
    kind: Kind = "model"

    @property
    def api(self) -> str:
        return f"{self.endpoint}/api/{self.kind}s/{self.repo}"

    def resolve_url(self, commit: str, path: str) -> str:
        """Where the bytes of one file are: `/{repo}/resolve/...`, or `/datasets/{repo}/resolve/...`."""
        prefix = "datasets/" if self.kind == "dataset" else ""
        return f"{self.endpoint}/{prefix}{self.repo}/resolve/{commit}/{quote(path)}"

    def where(self) -> str:
        return f"hub mirror {self.endpoint}: {self.kind} {self.repo}"


def hub_repo(endpoint: str, repo: str, kind: Kind = "model") -> HubRepo:
    """A repository on a mirror, its URL and name checked before anything is sent."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise HubError(f"hub mirror {endpoint!r}: not an http(s) base URL; give one like https://hf-mirror.example")
    if not shapes.REPO.fullmatch(repo) or ".." in repo:
        raise HubError(f"hub mirror {endpoint}: {repo!r} is not a repository id like owner/name")
    if kind not in ("model", "dataset"):
        raise HubError(f"hub mirror {endpoint}: {kind!r} is not a repository type (model or dataset)")
    return HubRepo(endpoint.rstrip("/"), repo, kind)


def repo_of(spec: Dataset | Model, endpoint: str) -> HubRepo:
    """The repository a Dataset's or Model's `hub:` source names, on this mirror."""
    assert spec.hub is not None
    return hub_repo(endpoint, spec.hub.repo, "dataset" if spec.kind == "Dataset" else "model")


def resolve_revision(hub: HubRepo, revision: str, timeout: float = TIMEOUT) -> str:
    """The 40-hex commit a branch, tag or commit names on the mirror."""
    if not revision or len(revision) > 256 or any(ord(c) < 32 for c in revision):
        raise HubError(f"{hub.where()}: {revision!r} is not a revision (a branch, tag or commit)")
    body, _ = _get_json(hub, f"{hub.api}/revision/{quote(revision, safe='')}", timeout)
    try:
        return shapes.commit_of(body)
    except WrongShape as err:
        raise HubError(f"{hub.where()} at {revision!r}: {err}") from None


def list_files(hub: HubRepo, commit: str, timeout: float = TIMEOUT) -> tuple[HubFile, ...]:
    """Every file at a commit: from `/tree/{commit}?recursive=true`, or the revision's `siblings` where the mirror
    has no tree endpoint (404)."""
    if not shapes.COMMIT.fullmatch(commit):
        raise HubError(f"{hub.where()}: {commit!r} is not a 40-hex commit; resolve the revision first")
    deadline = time.monotonic() + timeout
    try:
        files = _tree(hub, commit, deadline)
        if files is None:
            body, _ = _get_json(hub, f"{hub.api}/revision/{commit}?blobs=true", _left(hub, deadline))
            files = shapes.sibling_files(body)
        return shapes.checked(files)
    except WrongShape as err:
        raise HubError(f"{hub.where()} at {commit}: {err}") from None


def _tree(hub: HubRepo, commit: str, deadline: float) -> list[HubFile] | None:
    url: str | None = f"{hub.api}/tree/{commit}?recursive=true"
    files: list[HubFile] = []
    for _ in range(MAX_PAGES):
        if url is None:
            return files
        body, response = _get_json(hub, url, _left(hub, deadline), missing_ok=True)
        if response is None:
            return None
        files.extend(shapes.tree_files(body))
        if len(files) > shapes.MAX_FILES:
            raise WrongShape(f"it lists more than the {shapes.MAX_FILES} files argus reads")
        url = _next_page(hub, response)
    raise WrongShape(f"its tree listing runs past {MAX_PAGES} pages")


def _next_page(hub: HubRepo, response: requests.Response) -> str | None:
    """The `Link: <url>; rel="next"` page, on the mirror's own host only: a listing cannot send argus elsewhere."""
    link = response.links.get("next", {}).get("url")
    if not link:
        return None
    url = urljoin(response.url, link)
    if urlsplit(url).netloc != urlsplit(hub.endpoint).netloc:
        raise WrongShape(f"its next page is on another host: {url[:120]!r}")
    return url


def _get_json(hub: HubRepo, url: str, timeout: float, missing_ok: bool = False) -> tuple[Any, Any]:
    """The decoded body of one GET and its response; (None, None) for a 404 when `missing_ok`."""
    import requests  # only a plan with a hub input asks a hub (importing it costs every plan 50 ms)

    deadline = time.monotonic() + timeout
    try:
        with requests.get(url, timeout=timeout, stream=True, allow_redirects=False,
                          headers={"Accept": "application/json", "Accept-Encoding": "identity"}) as response:
            if missing_ok and response.status_code == 404:
                return None, None
            if response.status_code != 200:
                raise HubError(f"{hub.where()}: GET {_path(url)} answered HTTP {response.status_code}")
            return _decoded(hub, url, _body(hub, url, response, deadline)), response
    except requests.Timeout:
        raise HubError(f"{hub.where()}: GET {_path(url)} gave no answer within {timeout:.0f}s") from None
    except requests.RequestException as err:
        raise HubError(f"{hub.where()}: GET {_path(url)} failed: {type(err).__name__}") from None


def _body(hub: HubRepo, url: str, response: requests.Response, deadline: float) -> bytes:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise HubError(f"{hub.where()}: GET {_path(url)} answered {declared} bytes, more than {MAX_BODY} argus reads")
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=64 << 10):
        size += len(chunk)
        if size > MAX_BODY:
            raise HubError(f"{hub.where()}: GET {_path(url)} answered more than the {MAX_BODY} bytes argus reads")
        if time.monotonic() > deadline:
            import requests

            raise requests.Timeout()
        chunks.append(chunk)
    return b"".join(chunks)


def _decoded(hub: HubRepo, url: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise HubError(f"{hub.where()}: GET {_path(url)} answered something that is not JSON") from None


def _left(hub: HubRepo, deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HubError(f"{hub.where()}: the listing took longer than argus waits")
    return left


def _path(url: str) -> str:
    return urlsplit(url).path[:160]
