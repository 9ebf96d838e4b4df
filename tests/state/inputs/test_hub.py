"""A hub mirror read at plan time (issue 40): a branch resolved to its commit, the files at that commit listed with
sizes and digests, and every hostile answer (huge, mistyped, escaping paths, no commit, too slow) a clear HubError
naming the mirror and the repository. The mirror is tests/support/hub_mirror.py on loopback."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from state.inputs.hub import MAX_BODY, HubError, hub_repo, list_files, resolve_revision
from tests.support.hub_mirror import HubMirror, blob_oid

WEIGHTS = b"w" * 200
CONFIG = b'{"architectures": ["Qwen2ForCausalLM"]}'


@pytest.fixture
def mirror() -> Iterator[HubMirror]:
    served = HubMirror()
    served.add("acme/tiny", {"config.json": CONFIG, "model.safetensors": WEIGHTS, "sub/tok.json": b"{}"})
    served.add("acme/gsm8k", {"main/train.parquet": b"p" * 100}, kind="dataset")
    yield served
    served.close()


def test_a_branch_resolves_to_its_commit(mirror: HubMirror):
    hub = hub_repo(mirror.endpoint + "/", "acme/tiny")
    assert resolve_revision(hub, "main") == mirror.repos["models/acme/tiny"].commit
    assert mirror.seen == ["/api/models/acme/tiny/revision/main"]


def test_a_dataset_resolves_under_datasets(mirror: HubMirror):
    hub = hub_repo(mirror.endpoint, "acme/gsm8k", "dataset")
    commit = resolve_revision(hub, "main")
    assert [f.path for f in list_files(hub, commit)] == ["main/train.parquet"]
    assert hub.resolve_url(commit, "main/train.parquet") == \
        f"{mirror.endpoint}/datasets/acme/gsm8k/resolve/{commit}/main/train.parquet"


def test_the_files_at_a_commit_come_with_sizes_and_digests(mirror: HubMirror):
    hub = hub_repo(mirror.endpoint, "acme/tiny")
    files = {f.path: f for f in list_files(hub, resolve_revision(hub, "main"))}
    assert sorted(files) == ["config.json", "model.safetensors", "sub/tok.json"]
    weights = files["model.safetensors"]
    assert (weights.size, weights.sha256, weights.oid) == (200, hashlib.sha256(WEIGHTS).hexdigest(), None)
    assert (files["config.json"].sha256, files["config.json"].oid) == (None, blob_oid(CONFIG))


def test_a_mirror_without_tree_is_read_from_siblings(mirror: HubMirror):
    mirror.no_tree = True
    hub = hub_repo(mirror.endpoint, "acme/tiny")
    files = {f.path: f for f in list_files(hub, resolve_revision(hub, "main"))}
    assert files["model.safetensors"].sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    assert files["config.json"].oid == blob_oid(CONFIG)
    assert mirror.seen[-1].endswith("?blobs=true")  # without it a real hub lists names only, nothing to verify


def test_an_unknown_revision_is_a_clear_error(mirror: HubMirror):
    with pytest.raises(HubError, match=r"hub mirror http://127.0.0.1:\d+: model acme/tiny: .*HTTP 404"):
        resolve_revision(hub_repo(mirror.endpoint, "acme/tiny"), "nope")


REVISION = "/api/models/acme/tiny/revision/main"
TREE = "/api/models/acme/tiny/tree/{commit}?recursive=true"


@pytest.mark.parametrize(("path", "body", "said"), [
    (REVISION, {"sha": "not-a-commit"}, "no 40-hex commit"),
    (REVISION, {"sha": "A" * 40}, "no 40-hex commit"),
    (REVISION, {"sha": 12}, "no 40-hex commit"),
    (REVISION, ["sha"], "no 40-hex commit"),
    (TREE, {"path": "x"}, "not a JSON array"),
    (TREE, [{"type": "file", "path": "../../etc/passwd", "size": 1, "oid": "0" * 40}], "not a plain relative path"),
    (TREE, [{"type": "file", "path": "/etc/passwd", "size": 1, "oid": "0" * 40}], "not a plain relative path"),
    (TREE, [{"type": "file", "path": "a/../b", "size": 1, "oid": "0" * 40}], "not a plain relative path"),
    (TREE, [{"type": "file", "path": "a\x00b", "size": 1, "oid": "0" * 40}], "not a plain relative path"),
    (TREE, [{"type": "file", "path": "x" * 2000, "size": 1, "oid": "0" * 40}], "1 to 1024 characters"),
    (TREE, [{"type": "file", "path": 7, "size": 1, "oid": "0" * 40}], "not a string"),
    (TREE, [{"type": "file", "path": "a", "size": "1", "oid": "0" * 40}], "size that is not an integer"),
    (TREE, [{"type": "file", "path": "a", "size": -1, "oid": "0" * 40}], "size that is not an integer"),
    (TREE, [{"type": "file", "path": "a", "size": True, "oid": "0" * 40}], "size that is not an integer"),
    (TREE, [{"type": "file", "path": "a", "size": 1, "lfs": {"oid": "zz"}}], "lfs.oid"),
    (TREE, [{"type": "file", "path": "a", "size": 1, "oid": "0" * 40}] * 2, "lists a path twice"),
    (TREE, [{"type": "file", "path": f"f{i}", "size": 1} for i in range(10_001)], "more than the 10000"),
    (TREE, ["just a string"], "not an object"),
])
def test_a_hostile_answer_is_a_clear_error(mirror: HubMirror, path: str, body: object, said: str):
    commit = mirror.repos["models/acme/tiny"].commit
    mirror.answers[path.format(commit=commit)] = (200, json.dumps(body).encode())
    hub = hub_repo(mirror.endpoint, "acme/tiny")
    with pytest.raises(HubError, match=r"hub mirror http://127\.0\.0\.1:\d+: model acme/tiny") as caught:
        list_files(hub, resolve_revision(hub, "main"))
    assert said in str(caught.value)


def test_a_huge_answer_is_refused_before_it_is_read_whole(mirror: HubMirror):
    def endless(h: BaseHTTPRequestHandler) -> None:  # no Content-Length: only the byte count can stop it
        h.send_response(200)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b'{"sha": "' + b"a" * (MAX_BODY + (1 << 20)))

    mirror.answers[REVISION] = endless
    with pytest.raises(HubError, match="more than the 8388608 bytes argus reads"):
        resolve_revision(hub_repo(mirror.endpoint, "acme/tiny"), "main")


def test_a_declared_huge_answer_is_refused_unread(mirror: HubMirror):
    def declared(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(1 << 40))
        h.end_headers()

    mirror.answers[REVISION] = declared
    with pytest.raises(HubError, match="answered 1099511627776 bytes"):
        resolve_revision(hub_repo(mirror.endpoint, "acme/tiny"), "main")


def test_not_json_is_a_clear_error(mirror: HubMirror):
    mirror.answers[REVISION] = (200, b"<html>login</html>")
    with pytest.raises(HubError, match="not JSON"):
        resolve_revision(hub_repo(mirror.endpoint, "acme/tiny"), "main")


def test_a_slow_mirror_times_out(mirror: HubMirror):
    mirror.delay = 3
    with pytest.raises(HubError, match="no answer within 1s"):
        resolve_revision(hub_repo(mirror.endpoint, "acme/tiny"), "main", timeout=1)


def test_a_next_page_on_another_host_is_refused(mirror: HubMirror):
    commit = mirror.repos["models/acme/tiny"].commit

    def paged(h: BaseHTTPRequestHandler) -> None:
        body = json.dumps([{"type": "file", "path": "a", "size": 1, "oid": "0" * 40}]).encode()
        mirror.send(h, 200, body, {"Link": '<http://attacker.invalid/next>; rel="next"'})

    mirror.answers[TREE.format(commit=commit)] = paged
    with pytest.raises(HubError, match="next page is on another host"):
        list_files(hub_repo(mirror.endpoint, "acme/tiny"), commit)


@pytest.mark.parametrize(("endpoint", "repo", "said"), [
    ("file:///etc", "acme/tiny", "not an http"),
    ("http://h", "../x", "not a repository id"),
    ("http://h", "a/b/c", "not a repository id"),
    ("http://h?x=1", "acme/tiny", "not an http"),
])
def test_a_bad_endpoint_or_repo_is_refused_before_anything_is_sent(endpoint: str, repo: str, said: str):
    with pytest.raises(HubError, match=said):
        hub_repo(endpoint, repo)


def test_listing_needs_a_commit_not_a_branch(mirror: HubMirror):
    with pytest.raises(HubError, match="not a 40-hex commit"):
        list_files(hub_repo(mirror.endpoint, "acme/tiny"), "main")
    assert mirror.seen == []
