"""argus's fetcher: the program a fetch job runs on a Ray node, carried in the job's entrypoint (fetch_job.py),
never read off the shared root, where a job could swap it. Standard library only: nothing of argus is installed
on the nodes. It must never import argus.

    python3 -c "<this file>" '<spec JSON, or zlib+base64 of it>'

The spec names the final directory (`dest`), the bounds (`max_files`, `max_bytes`, `timeout`), the `source` (one
of `hub: {endpoint, repo, kind, commit}`, `url: http(s)://...`, `ftp: {url, user, password_env}`) and the `files`
with what is known of each (`size`, `sha256`, the git blob `oid`). Files land in a fresh staging directory beside
`dest`; each is checked against its size and digests (url and ftp need a sha256); a manifest `.argus-fetch.json`
records each file's size and sha256; only when all of it verified is the staging directory renamed to `dest`, in
one step. On any refusal the staging directory is removed, nothing is at `dest`, and the exit code is 1.
An ftp password comes from the environment variable the spec names (the job's secrets), never from argv."""

from __future__ import annotations

import base64
import ftplib
import hashlib
import http.client
import json
import os
import shutil
import sys
import urllib.parse
import urllib.request
import zlib

MANIFEST = ".argus-fetch.json"
CHUNK = 1 << 20


class Refused(Exception):
    """Something did not verify: the fetch leaves nothing behind."""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("argus-fetch: usage: fetch SPEC", file=sys.stderr)
        return 2
    staging = None
    try:
        spec = _spec(argv[1])
        dest = _dest(spec)
        staging = _staging(dest)
        entries = _fetch_all(spec, staging)
        _write_manifest(staging, spec, entries)
        os.rename(staging, dest)  # one step: dest has all of it or none of it
        print(f"argus-fetch: done files={len(entries)} bytes={sum(e['size'] for e in entries)} dest={dest}")
        return 0
    except (Refused, OSError, ftplib.Error, http.client.HTTPException, ValueError, KeyError, TypeError) as err:
        print(f"argus-fetch: refused: {err}", file=sys.stderr)
        return 1
    finally:
        if staging and os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


def _spec(text: str) -> dict:
    raw = text if text.lstrip().startswith("{") else zlib.decompress(base64.b64decode(text)).decode()
    spec = json.loads(raw)
    if not isinstance(spec, dict) or not isinstance(spec.get("files"), list):
        raise Refused("the spec is not an object with a `files` list")
    if len(spec["files"]) > int(spec["max_files"]):
        raise Refused(f"{len(spec['files'])} files listed, more than max_files={spec['max_files']}")
    return spec


def _dest(spec: dict) -> str:
    dest = spec.get("dest")
    if not isinstance(dest, str) or not os.path.isabs(dest) or "\0" in dest:
        raise Refused(f"dest {dest!r} is not an absolute path")
    dest = os.path.normpath(dest)
    if os.path.lexists(dest):
        raise Refused(f"{dest} already exists; argus fetches only into a new directory")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    return dest


def _staging(dest: str) -> str:
    staging = os.path.join(os.path.dirname(dest), f".tmp-{os.path.basename(dest)}.{os.getpid()}")
    os.mkdir(staging, 0o755)  # fails if it exists: a leftover is never reused
    return staging


def _fetch_all(spec: dict, staging: str) -> list[dict]:
    """Each file in turn; max_bytes counts what arrived for the whole fetch, not what the listing claimed."""
    left, entries = int(spec["max_bytes"]), []
    for entry in spec["files"]:
        size = entry.get("size")
        if size is not None and size > left:
            raise Refused(f"{entry.get('path')!r} ({size} bytes) would pass max_bytes={spec['max_bytes']}")
        entries.append(_fetch_one(spec, staging, entry, left))
        left -= entries[-1]["size"]
    return entries


def _fetch_one(spec: dict, staging: str, entry: dict, budget: int) -> dict:
    path = _safe_path(entry.get("path"))
    source = spec.get("source") or {}
    if "hub" not in source and not entry.get("sha256"):
        raise Refused(f"{path}: a url or ftp source needs its sha256")
    if not entry.get("sha256") and not entry.get("oid"):
        raise Refused(f"{path}: the listing gives no sha256 or git blob oid to check it against")
    target = os.path.join(staging, *path.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    limit = min(budget, entry["size"]) if entry.get("size") is not None else budget
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as sink:
        writer = _Writer(sink, limit, path)
        _download(source, path, writer, float(spec.get("timeout", 60)))
    return _verified(entry, path, target, writer)


def _download(source: dict, path: str, writer: _Writer, timeout: float) -> None:
    if "hub" in source:
        hub = source["hub"]
        _http(_resolve_url(hub, path), writer, timeout, hub.get("commit"))
    elif "url" in source:
        url = source["url"]
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise Refused(f"{url[:120]!r} is not an http(s) URL")
        _http(url, writer, timeout, None)
    elif "ftp" in source:
        _ftp(source["ftp"], writer, timeout)
    else:
        raise Refused("the source is none of hub, url, ftp")


def _resolve_url(hub: dict, path: str) -> str:
    commit = hub.get("commit", "")
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise Refused(f"the hub commit {commit!r} is not 40 hex")
    repo = str(hub.get("repo", ""))
    if not repo or ".." in repo or repo.startswith("/") or any(not (c.isalnum() or c in "_.-/") for c in repo):
        raise Refused(f"the hub repository {repo[:80]!r} is not an id like owner/name")
    prefix = "datasets/" if hub.get("kind") == "dataset" else ""
    return f"{hub['endpoint'].rstrip('/')}/{prefix}{repo}/resolve/{commit}/{urllib.parse.quote(path)}"


def _http(url: str, writer: _Writer, timeout: float, commit: str | None) -> None:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity", "User-Agent": "argus-fetch"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        said = answer.headers.get("X-Repo-Commit")
        if commit and said and said != commit:
            raise Refused(f"{writer.path}: the mirror served commit {said[:40]!r}, not {commit}")
        while chunk := answer.read(CHUNK):
            writer.write(chunk)


def _ftp(ftp: dict, writer: _Writer, timeout: float) -> None:
    parts = urllib.parse.urlsplit(ftp["url"])
    if parts.scheme != "ftp" or not parts.hostname:
        raise Refused(f"{ftp['url'][:120]!r} is not an ftp:// URL")
    password = os.environ.get(ftp["password_env"], "") if ftp.get("password_env") else ""
    client = ftplib.FTP(timeout=timeout)
    try:
        client.connect(parts.hostname, parts.port or 21)
        client.login(ftp.get("user") or "anonymous", password)
        client.voidcmd("TYPE I")
        client.retrbinary(f"RETR {urllib.parse.unquote(parts.path)}", writer.write, blocksize=CHUNK)
    except ftplib.Error as err:
        raise Refused(f"{writer.path}: ftp {parts.hostname}:{parts.port or 21} answered {str(err)[:200]}") from None
    finally:
        client.close()


class _Writer:
    """Bytes to the file and the hash, refused past the limit while they arrive, not after."""

    def __init__(self, sink, limit: int, path: str) -> None:
        self.sink, self.limit, self.path = sink, limit, path
        self.size, self.sha256 = 0, hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise Refused(f"{self.path}: more than the {self.limit} bytes allowed for it")
        self.sha256.update(chunk)
        self.sink.write(chunk)


def _verified(entry: dict, path: str, target: str, writer: _Writer) -> dict:
    got = writer.sha256.hexdigest()
    if entry.get("size") is not None and writer.size != entry["size"]:
        raise Refused(f"{path}: {writer.size} bytes arrived, the listing says {entry['size']}")
    if entry.get("sha256") and got != entry["sha256"]:
        raise Refused(f"{path}: sha256 {got} is not the expected {entry['sha256']}")
    if entry.get("oid") and _blob_sha1(target, writer.size) != entry["oid"]:
        raise Refused(f"{path}: its git blob sha1 is not the expected {entry['oid']}")
    return {"path": path, "size": writer.size, "sha256": got}


def _blob_sha1(target: str, size: int) -> str:
    digest = hashlib.sha1(b"blob %d\0" % size)
    with open(target, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _safe_path(path: object) -> str:
    """The listing is not trusted here either: a path stays inside the staging directory."""
    if not isinstance(path, str) or not path or len(path) > 1024 or path == MANIFEST:
        raise Refused(f"the path {str(path)[:80]!r} is not a file name argus fetches")
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(ord(c) < 32 or c == "\x7f" for c in path) \
            or any(p in ("", ".", "..") for p in parts):
        raise Refused(f"the path {path[:80]!r} is not a plain relative path")
    return path


def _write_manifest(staging: str, spec: dict, entries: list[dict]) -> None:
    manifest = {"source": _shown_source(spec["source"]), "files": entries, "bytes": sum(e["size"] for e in entries)}
    with open(os.path.join(staging, MANIFEST), "x") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


def _shown_source(source: dict) -> dict:
    """The source as the manifest keeps it: an ftp password's variable name, never its value."""
    return {kind: dict(value) if isinstance(value, dict) else value for kind, value in source.items()}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
