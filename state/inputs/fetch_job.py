"""The fetch job's entrypoint: `python3 -c <fetch_script.py> <spec>`, the program carried in the command itself so
no file on the shared root (which jobs can write) decides what runs. The spec travels zlib+base64 in one argv
word; Linux caps one word at 128 KiB, so a listing too big for that is refused here rather than cut there."""

from __future__ import annotations

import base64
import json
import shlex
import zlib
from pathlib import Path
from typing import Any

from specs.errors import ArgusError
from state.inputs.hub import HubRepo
from state.inputs.shapes import HubFile

SCRIPT = Path(__file__).with_name("fetch_script.py")
MAX_WORD = 120 << 10
"""Bytes of the encoded spec: under Linux's MAX_ARG_STRLEN (32 pages) with room to spare."""


class FetchTooBig(ArgusError):
    """The fetch's listing does not fit in one command word."""


def hub_spec(hub: HubRepo, commit: str, files: tuple[HubFile, ...], dest: str, *, max_files: int,
             max_bytes: int, timeout: float = 60.0) -> dict[str, Any]:
    """What the fetcher needs to fetch these files of a repository at a commit into `dest`."""
    source = {"hub": {"endpoint": hub.endpoint, "repo": hub.repo, "kind": hub.kind, "commit": commit}}
    listed = [{"path": f.path, "size": f.size, "sha256": f.sha256, "oid": f.oid} for f in files]
    return _spec(source, listed, dest, max_files, max_bytes, timeout)


def url_spec(url: str, name: str, sha256: str, dest: str, *, max_bytes: int, size: int | None = None,
             password_env: str | None = None, user: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
    """One file from an http(s) or ftp URL, saved as `name`; its sha256 is required, the fetcher refuses without."""
    source: dict[str, Any] = {"url": url}
    if url.startswith("ftp://"):
        source = {"ftp": {"url": url, "user": user, "password_env": password_env}}
    return _spec(source, [{"path": name, "size": size, "sha256": sha256}], dest, 1, max_bytes, timeout)


def entrypoint(spec: dict[str, Any], python: str = "python3") -> str:
    """The shell command Ray runs: the fetcher's source and the encoded spec, each one quoted word."""
    word = base64.b64encode(zlib.compress(json.dumps(spec, sort_keys=True).encode(), 9)).decode()
    if len(word) > MAX_WORD:
        raise FetchTooBig(f"the fetch of {len(spec['files'])} files into {spec['dest']} encodes to {len(word)} "
                          f"bytes, more than the {MAX_WORD} one command word carries; fetch fewer files at once")
    return f"{python} -c {shlex.quote(SCRIPT.read_text())} {word}"


def _spec(source: dict[str, Any], files: list[dict[str, Any]], dest: str, max_files: int, max_bytes: int,
          timeout: float) -> dict[str, Any]:
    return {"source": source, "files": files, "dest": dest, "max_files": max_files, "max_bytes": max_bytes,
            "timeout": timeout}
