"""The fetch a Dataset or Model version needs, built at observation into InputState.fetch: the planner is pure
and may read neither the fetcher's program (a file) nor a hub's listing (an answer of the hub).

The destination is the workspace's staging directory (specs.kinds.inputs.staged_rel) under the cluster's shared root,
absolute: the fetcher refuses anything else, and the spec travels encoded, out of reach of `${shared_root}`."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote, urlsplit

from specs.kinds.inputs import Dataset, Model, staged_rel
from state.inputs.fetch_job import entrypoint, hub_spec, url_spec
from state.inputs.hub import repo_of
from state.inputs.shapes import MAX_FILES, MAX_SIZE, HubFile

PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
"""A url's last path part kept as the file's name; anything else is saved as `data`."""


def fetch_command(spec: Dataset | Model, shared_root: str, workspace: str, key: str, *, endpoint: str | None = None,
                  commit: str | None = None, listing: tuple[HubFile, ...] = (), python: str = "python3") -> str | None:
    """The fetch job's entrypoint for this version; None for a source that is not fetched (path, prepare), or a hub
    source without its endpoint, commit or listing."""
    dest = f"{shared_root.rstrip('/')}/{staged_rel(spec, key, workspace)}"
    if spec.hub is not None:
        if not (endpoint and commit and listing):
            return None
        total = sum(f.size or 0 for f in listing)
        fetched = hub_spec(repo_of(spec, endpoint), commit, listing, dest, max_files=MAX_FILES,
                           max_bytes=total or MAX_SIZE)
        return entrypoint(fetched, python=python)
    source = spec.url or spec.ftp
    if source is None:
        return None
    login = {"user": spec.ftp.user, "password_env": spec.ftp.password_variable} if spec.ftp is not None else {}
    return entrypoint(url_spec(source.url, file_name(source.url), source.sha256, dest, max_bytes=MAX_SIZE, **login),
                      python=python)


def file_name(url: str) -> str:
    """The name a url's file is saved under: its last path part when plain, else `data`."""
    name = posixpath.basename(unquote(urlsplit(url).path))
    return name if PLAIN_NAME.fullmatch(name) and name not in (".", "..") else "data"
