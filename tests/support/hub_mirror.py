"""A hub mirror on loopback, for tests: this stands in for the mirror (hf-mirror.com or an intranet HF_ENDPOINT).
A real HTTP server in a thread that serves fake repositories the way a mirror does:
`GET /api/{models|datasets}/{repo}/revision/{rev}` (id, sha, siblings), `GET .../tree/{commit}?recursive=true`
(entries with size, git blob oid and, for LFS files, lfs.oid = sha256) and `GET|HEAD /[datasets/]{repo}/resolve/
{commit}/{path}` with X-Repo-Commit, ETag and Content-Length. Tests can corrupt one byte of a served file (the
listing keeps the true digest), swap any answer for a hostile one, or delay answers. Everything asked is recorded."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

LFS_FROM = 64
"""Files at least this long are listed as LFS files (with a sha256); smaller ones only by git blob sha1."""


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the timeout and byte-cap tests) closes mid-answer: expected, not news


def blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    kind: str = "model"
    commit: str = "c0ffee" + "0" * 34
    branches: dict[str, str] = field(default_factory=lambda: {"main": ""})

    def entry(self, path: str) -> dict[str, Any]:
        data = self.files[path]
        found: dict[str, Any] = {"type": "file", "path": path, "size": len(data), "oid": blob_oid(data)}
        if len(data) >= LFS_FROM:
            found["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
        return found


    def sibling(self, path: str) -> dict[str, Any]:
        """The entry the revision answer lists: LFS files with their sha256, the rest with their blob id."""
        entry = self.entry(path)
        found: dict[str, Any] = {"rfilename": path, "size": entry["size"]}
        if "lfs" in entry:
            return {**found, "lfs": {"sha256": entry["lfs"]["oid"], "size": entry["size"]}}
        return {**found, "blobId": entry["oid"]}


class HubMirror:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        """'models/owner/name' or 'datasets/owner/name' -> the repository served."""
        self.corrupt: set[str] = set()
        """Paths whose served bytes have their first byte flipped; the listings keep the true digests."""
        self.answers: dict[str, tuple[int, bytes] | Callable[[BaseHTTPRequestHandler], None]] = {}
        """Path (query included) -> (status, body), or a function that writes the whole answer: a hostile mirror."""
        self.no_tree = False
        """Answer 404 to /tree, as an older mirror does: the client falls back to siblings."""
        self.delay = 0.0
        self.claimed_commit: str | None = None
        """Sent as X-Repo-Commit instead of the true one: a mirror serving another commit than asked."""
        self.seen: list[str] = []
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                mirror.handle(self)

            do_HEAD = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Quiet(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def add(self, repo: str, files: dict[str, bytes], kind: str = "model") -> FakeRepo:
        fake = FakeRepo(files, kind)
        fake.branches["main"] = fake.commit
        self.repos[f"{kind}s/{repo}"] = fake
        return fake

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        self.seen.append(h.path)
        if self.delay:
            time.sleep(self.delay)
        answer = self.answers.get(h.path)
        if callable(answer):
            return answer(h)
        if answer is not None:
            return self.send(h, answer[0], answer[1])
        path = unquote(urlsplit(h.path).path)
        api = re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)/(revision|tree)/([^/]+)", path)
        if api:
            return self._api(h, f"{api[1]}/{api[2]}", api[3], api[4])
        resolve = re.fullmatch(r"/(datasets/)?([^/]+/[^/]+)/resolve/([0-9a-f]{40})/(.+)", path)
        if resolve:
            return self._resolve(h, f"{'datasets' if resolve[1] else 'models'}/{resolve[2]}", resolve[3], resolve[4])
        self.send(h, 404, b'{"error": "not found"}')

    def _api(self, h: BaseHTTPRequestHandler, key: str, what: str, rev: str) -> None:
        repo = self.repos.get(key)
        commit = repo and (repo.branches.get(rev) or (rev if rev == repo.commit else None))
        if repo is None or not commit:
            return self.send(h, 404, b'{"error": "Revision Not Found"}')
        if what == "tree":
            if self.no_tree:
                return self.send(h, 404, b'{"error": "no tree here"}')
            return self.send(h, 200, json.dumps([repo.entry(p) for p in sorted(repo.files)]).encode())
        siblings = [repo.sibling(p) for p in sorted(repo.files)]
        self.send(h, 200, json.dumps({"id": key.split("/", 1)[1], "sha": commit, "siblings": siblings}).encode())

    def _resolve(self, h: BaseHTTPRequestHandler, key: str, commit: str, path: str) -> None:
        repo = self.repos.get(key)
        if repo is None or commit != repo.commit or path not in repo.files:
            return self.send(h, 404, b"Entry not found")
        data, entry = repo.files[path], repo.entry(path)
        if path in self.corrupt:
            data = bytes([data[0] ^ 1]) + data[1:]
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        headers = {"X-Repo-Commit": self.claimed_commit or commit, "ETag": f'"{etag}"'}
        self.send(h, 200, data, headers, "application/octet-stream")

    def send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None,
             content_type: str = "application/json") -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
