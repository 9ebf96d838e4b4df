"""The registry's cache on this machine (state.audit.registry): a read over nothing appended takes the cached
read as it is, and a damaged cache only makes the read a whole one, with a real log in a real directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.audit import files as audit_files
from state.audit import log as audit
from state.audit import registry
from state.audit.events import RegistryAdopted, RunSubmitting

WS = "team"


def submitting(sid: str) -> RunSubmitting:
    return RunSubmitting(submission_id=sid, address="job.j", job="j", spec_hash="0" * 64, attempt=1, cluster="c")


def _logged(tmp_path: Path) -> tuple[str, str]:
    root, cache = str(tmp_path / "root"), str(tmp_path / "cache")
    (tmp_path / "root").mkdir()
    audit.append_all(root, WS, [RegistryAdopted(submission_ids=()), submitting("a"), submitting("b")])
    return root, cache


def test_nothing_appended_reads_the_cache_as_it_is_and_still_checks_the_anchor(tmp_path: Path) -> None:
    root, cache = _logged(tmp_path)
    first = registry.read(root, WS, cache)
    where = registry._cache_file(cache, root, WS)
    saved = where.stat().st_mtime_ns
    again = registry.read(root, WS, cache)
    assert again == first and set(again.submitted) == {"a", "b"} and again.problems == ()
    assert where.stat().st_mtime_ns == saved  # nothing new: the cache is not written again
    anchor = json.loads(audit_files.read_anchor(root, WS) or b"")
    audit_files.write_anchor(root, WS, json.dumps({**anchor, "records": 2}))  # a job rewrites the anchor
    assert registry.read(root, WS, cache).problems  # judged by reading everything: the anchor no longer agrees


@pytest.mark.parametrize("damage", [
    lambda data: {**data, "submitted": {"a": 1}},  # a registered id's time not a string
    lambda data: {**data, "submitted": ["a", "b"]},
    lambda data: {**data, "identity": "elsewhere"},
    lambda data: {**data, "end": True},  # a bool is no offset
    lambda data: {**data, "planted": {}},
    lambda data: {**data, "version": registry.CACHE_VERSION - 1},
    lambda data: {key: value for key, value in data.items() if key != "version"},
])
def test_a_damaged_cache_only_makes_the_read_a_whole_one(tmp_path: Path, damage) -> None:
    root, cache = _logged(tmp_path)
    registry.read(root, WS, cache)
    where = registry._cache_file(cache, root, WS)
    where.write_text(json.dumps(damage(json.loads(where.read_text())), separators=(",", ":")))
    assert registry._load(where) is None
    found = registry.read(root, WS, cache)
    fresh = registry.read(root, WS, str(tmp_path / "elsewhere"))
    assert found == fresh and set(found.submitted) == {"a", "b"} and found.problems == ()
    assert all(isinstance(v, str) for v in found.submitted.values())
    assert registry._load(where) is not None  # written again whole


def test_a_truncated_cache_only_makes_the_read_a_whole_one(tmp_path: Path) -> None:
    root, cache = _logged(tmp_path)
    registry.read(root, WS, cache)
    where = registry._cache_file(cache, root, WS)
    where.write_bytes(where.read_bytes()[:40])
    assert set(registry.read(root, WS, cache).submitted) == {"a", "b"}
