"""The version key of an input: a digest of its pinned source, stable, and changed by each pinned part alone."""

from __future__ import annotations

from typing import Any

import pytest

from specs.kinds.inputs import Dataset, Model, version_key, version_rel

DIGEST = "a" * 64
COMMIT = "1" * 40
SOURCES: dict[str, tuple[dict[str, Any], str | None]] = {
    "hub": ({"hub": {"repo": "openai/gsm8k", "revision": "main", "endpoint": "https://h"}}, COMMIT),
    "url": ({"url": {"url": "https://h/train.parquet", "sha256": DIGEST}}, None),
    "ftp": ({"ftp": {"url": "ftp://h/train.parquet", "sha256": DIGEST}}, None),
    "path": ({"path": "/staging/gsm8k"}, "c" * 64),
    "prepare": ({"prepare": {"code": "verl", "entrypoint": ["python", "p.py", "${output}"],
                             "outputs": ["train.parquet"]}}, "d" * 64),
}


def dataset(source: dict[str, Any], **top: Any) -> Dataset:
    return Dataset.model_validate({"kind": "Dataset", "name": "gsm8k", "cluster": "h20", **source, **top})


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_a_key_is_stable_and_ignores_what_is_not_pinned(source: str) -> None:
    spec, pin = SOURCES[source]
    key = version_key(dataset(spec), pin)
    assert len(key) == 64 and key == version_key(dataset(spec), pin)
    assert version_key(dataset(spec, description="new words", cluster="a100"), pin) == key
    assert version_rel(dataset(spec), key) == f"datasets/gsm8k/{key[:12]}"


CHANGES = [
    ("hub", ["hub", "repo"], "openai/gsm8k-2", None),
    ("hub", None, None, "2" * 40),
    ("url", ["url", "url"], "https://h/other.parquet", None),
    ("url", ["url", "sha256"], "b" * 64, None),
    ("ftp", ["ftp", "sha256"], "b" * 64, None),
    ("path", ["path"], "/staging/other", None),
    ("path", None, None, "e" * 64),
    ("prepare", ["prepare", "entrypoint"], ["python", "q.py", "${output}"], None),
    ("prepare", ["prepare", "outputs"], ["train.parquet", "test.parquet"], None),
    ("prepare", None, None, "f" * 64),
]


@pytest.mark.parametrize(("source", "field", "value", "pin"), CHANGES)
def test_each_pinned_part_changes_the_key(source: str, field: list[str] | None, value: Any, pin: str | None) -> None:
    spec, old_pin = SOURCES[source]
    changed = {**spec, source: {**spec[source], field[-1]: value}} if field and len(field) == 2 else dict(spec)
    if field and len(field) == 1:
        changed = {source: value}
    before = version_key(dataset(spec), old_pin)
    assert version_key(dataset(changed), pin or old_pin) != before


def test_a_prepare_step_is_keyed_by_its_codes_digest_not_its_name() -> None:
    spec, pin = SOURCES["prepare"]
    renamed = {"prepare": {**spec["prepare"], "code": "verl-copy"}}
    assert version_key(dataset(renamed), pin) == version_key(dataset(spec), pin)


def test_the_hub_endpoint_is_not_part_of_the_version() -> None:
    """A mirror serves the same commit's bytes: moving to a mirror never fetches a model again."""
    spec, pin = SOURCES["hub"]
    mirrored = {"hub": {**spec["hub"], "endpoint": "https://mirror.example"}}
    assert version_key(dataset(mirrored), pin) == version_key(dataset(spec), pin)


def test_a_dataset_and_a_model_of_one_source_differ() -> None:
    spec, pin = SOURCES["url"]
    model = Model.model_validate({"kind": "Model", "name": "gsm8k", "cluster": "h20", **spec})
    key = version_key(model, pin)
    assert key != version_key(dataset(spec), pin) and version_rel(model, key).startswith("models/gsm8k/")


@pytest.mark.parametrize(("source", "pin", "words"), [
    ("hub", None, "resolved 40-hex commit"),
    ("hub", "main", "resolved 40-hex commit"),
    ("url", "x", "no pin"),
    ("path", None, "needs its pin"),
    ("prepare", "", "needs its pin"),
])
def test_a_missing_or_wrong_pin_is_a_programming_error(source: str, pin: str | None, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        version_key(dataset(SOURCES[source][0]), pin)


def test_a_revision_that_is_a_commit_resolves_to_itself() -> None:
    pinned = dataset({"hub": {"repo": "o/n", "revision": COMMIT, "endpoint": "https://h"}})
    assert version_key(pinned, COMMIT)
    with pytest.raises(ValueError, match="resolves to itself"):
        version_key(pinned, "2" * 40)


def test_a_key_that_is_not_a_digest_is_no_directory() -> None:
    with pytest.raises(ValueError, match="not a version key"):
        version_rel(dataset(SOURCES["url"][0]), "../../etc")
