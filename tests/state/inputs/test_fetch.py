"""The fetcher a fetch job runs on a node (issue 40), run here as Ray runs it: the entrypoint fetch_job.py builds,
in a shell, with a plain python and no argus on its path. It fetches a repository from the loopback mirror
(tests/support/hub_mirror.py) with every digest verified and a manifest written, and renames into place only
then: a corrupted byte, a wrong sha256, a listing that lies or escapes leaves nothing at the final path."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from state.inputs import fetch_job
from state.inputs.hub import hub_repo, list_files, resolve_revision
from state.inputs.shapes import HubFile
from tests.support.fetching import leftovers, run
from tests.support.hub_mirror import HubMirror

WEIGHTS = bytes(range(256)) * 4
FILES = {"config.json": b'{"architectures": ["X"]}', "model.safetensors": WEIGHTS, "tok/vocab.txt": b"a\nb\n"}


@pytest.fixture
def mirror() -> Iterator[HubMirror]:
    served = HubMirror()
    served.add("acme/tiny", FILES)
    yield served
    served.close()


def planned(mirror: HubMirror, dest: Path, **bounds: int) -> dict:
    hub = hub_repo(mirror.endpoint, "acme/tiny")
    commit = resolve_revision(hub, "main")
    return fetch_job.hub_spec(hub, commit, list_files(hub, commit), str(dest),
                              max_files=bounds.get("max_files", 10), max_bytes=bounds.get("max_bytes", 1 << 20))


def test_a_repository_is_fetched_verified_with_its_manifest(mirror: HubMirror, tmp_path: Path):
    dest = tmp_path / "models" / "tiny" / "k1"
    done = run(planned(mirror, dest))
    assert done.returncode == 0, done.stderr
    for path, data in FILES.items():
        assert (dest / path).read_bytes() == data
    manifest = json.loads((dest / ".argus-fetch.json").read_text())
    assert manifest["files"] == [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                                 for p, d in sorted(FILES.items())]
    assert manifest["source"]["hub"]["commit"] == mirror.repos["models/acme/tiny"].commit
    assert manifest["bytes"] == sum(map(len, FILES.values()))
    assert leftovers(dest.parent) == ["k1"]  # no staging directory left beside it


@pytest.mark.parametrize("corrupted", ["model.safetensors", "config.json"])  # by sha256, by git blob sha1
def test_a_corrupted_file_leaves_nothing_at_the_final_path(mirror: HubMirror, tmp_path: Path, corrupted: str):
    mirror.corrupt.add(corrupted)
    dest = tmp_path / "models" / "tiny" / "k1"
    done = run(planned(mirror, dest))
    assert done.returncode == 1
    assert f"argus-fetch: refused: {corrupted}:" in done.stderr and "Traceback" not in done.stderr
    assert not dest.exists() and leftovers(dest.parent) == []


def test_a_listing_that_escapes_is_refused_on_the_node_too(mirror: HubMirror, tmp_path: Path):
    spec = planned(mirror, tmp_path / "d" / "k1")
    spec["files"].append({"path": "../../escaped", "size": 1, "sha256": None, "oid": None})
    done = run(spec)
    assert done.returncode == 1 and "not a plain relative path" in done.stderr
    assert not (tmp_path / "escaped").exists() and leftovers(tmp_path / "d") == []


def test_a_size_that_lies_is_refused(mirror: HubMirror, tmp_path: Path):
    spec = planned(mirror, tmp_path / "d" / "k1")
    spec["files"][1]["size"] = 10  # the mirror serves 1024 bytes of model.safetensors
    done = run(spec)
    assert done.returncode == 1 and "more than the 10 bytes allowed" in done.stderr
    assert leftovers(tmp_path / "d") == []


@pytest.mark.parametrize(("bounds", "said"), [({"max_files": 2}, "more than max_files=2"),
                                              ({"max_bytes": 100}, "would pass max_bytes=100")])
def test_the_bounds_hold(mirror: HubMirror, tmp_path: Path, bounds: dict, said: str):
    done = run(planned(mirror, tmp_path / "d" / "k1", **bounds))
    assert done.returncode == 1 and said in done.stderr
    assert leftovers(tmp_path / "d") == []


def test_an_existing_final_path_is_never_overwritten(mirror: HubMirror, tmp_path: Path):
    dest = tmp_path / "d" / "k1"
    dest.mkdir(parents=True)
    (dest / "mine").write_text("kept")
    done = run(planned(mirror, dest))
    assert done.returncode == 1 and "already exists" in done.stderr
    assert leftovers(dest) == ["mine"]


def test_a_url_with_its_sha256_is_fetched(mirror: HubMirror, tmp_path: Path):
    commit = mirror.repos["models/acme/tiny"].commit
    url = f"{mirror.endpoint}/acme/tiny/resolve/{commit}/model.safetensors"
    dest = tmp_path / "d" / "k1"
    done = run(fetch_job.url_spec(url, "w.bin", hashlib.sha256(WEIGHTS).hexdigest(), str(dest), max_bytes=1 << 20))
    assert done.returncode == 0, done.stderr
    assert (dest / "w.bin").read_bytes() == WEIGHTS


def test_a_url_with_a_wrong_sha256_is_refused(mirror: HubMirror, tmp_path: Path):
    commit = mirror.repos["models/acme/tiny"].commit
    url = f"{mirror.endpoint}/acme/tiny/resolve/{commit}/model.safetensors"
    dest = tmp_path / "d" / "k1"
    done = run(fetch_job.url_spec(url, "w.bin", "0" * 64, str(dest), max_bytes=1 << 20))
    assert done.returncode == 1 and "w.bin: sha256" in done.stderr and "is not the expected" in done.stderr
    assert leftovers(tmp_path / "d") == []


def test_a_url_without_a_sha256_is_refused(mirror: HubMirror, tmp_path: Path):
    spec = fetch_job.url_spec(f"{mirror.endpoint}/x", "x", "", str(tmp_path / "d" / "k1"), max_bytes=100)
    done = run(spec)
    assert done.returncode == 1 and "needs its sha256" in done.stderr
    assert mirror.seen == []  # refused before anything was asked


def test_a_listing_too_big_for_one_command_word_is_refused_here(tmp_path: Path):
    files = tuple(HubFile(os.urandom(16).hex() + f"/{i}", 1, os.urandom(32).hex(), None) for i in range(5000))
    spec = fetch_job.hub_spec(hub_repo("http://h", "a/b"), "0" * 40, files, str(tmp_path), max_files=10_000,
                              max_bytes=1)
    with pytest.raises(fetch_job.FetchTooBig, match="fetch fewer files at once"):
        fetch_job.entrypoint(spec)


def test_the_fetcher_imports_nothing_but_the_standard_library():
    """Nothing of argus is installed on the nodes: an import of anything else would fail there, not here."""
    import ast

    tree = ast.parse(fetch_job.SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module}
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_a_file_with_no_digest_is_not_fetched(mirror: HubMirror, tmp_path: Path):
    spec = planned(mirror, tmp_path / "d" / "k1")
    spec["files"][0].update(sha256=None, oid=None)
    done = run(spec)
    assert done.returncode == 1 and "config.json: the listing gives no sha256 or git blob oid" in done.stderr
    assert leftovers(tmp_path / "d") == []


def test_max_bytes_counts_what_arrived_when_sizes_are_unknown(mirror: HubMirror, tmp_path: Path):
    spec = planned(mirror, tmp_path / "d" / "k1", max_bytes=len(WEIGHTS) + 10)
    for entry in spec["files"]:
        entry["size"] = None
    done = run(spec)
    assert done.returncode == 1 and "model.safetensors: more than the 1010 bytes" in done.stderr
    assert leftovers(tmp_path / "d") == []


def test_a_mirror_serving_another_commit_is_refused(mirror: HubMirror, tmp_path: Path):
    mirror.claimed_commit = "f" * 40
    done = run(planned(mirror, tmp_path / "d" / "k1"))
    assert done.returncode == 1 and "the mirror served commit 'ffff" in done.stderr
    assert leftovers(tmp_path / "d") == []
