"""Sealing a data set or model version on a real shared root: checked against its pin, described, read-only,
in place in one step; and refused, with no version left, whenever what was staged is not what was pinned."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from state.inputs.manifest import MANIFEST, read_version, stored_versions
from state.inputs.seal import Expected, remove_version
from state.inputs.shapes import HubFile
from state.inputs.walk import NotSealable
from tests.support.hub_mirror import blob_oid
from tests.support.sealing import parquet, sealed, sha, spec, stage, step_for

DATA = b"question,answer\n1+1,2\n"


def url_case(root: Path, data: bytes = DATA) -> tuple:
    input_spec = spec({"url": {"url": "https://h/train.csv", "sha256": sha(data)}})
    step = step_for(input_spec)
    stage(root, step, {"train.csv": data})
    return input_spec, step, Expected(files={"train.csv": sha(data)})


def test_a_fetched_url_file_is_sealed_read_only_with_a_manifest(root: Path):
    input_spec, step, expected = url_case(root)
    result = sealed(root, input_spec, step, expected)
    version = root / step.rel
    assert result.outcome == "created" and not (root / step.staged).exists()
    assert [(f.path, f.size, f.sha256) for f in result.manifest.files] == [("train.csv", len(DATA), sha(DATA))]
    assert sorted(os.listdir(version)) == [MANIFEST, "train.csv"]  # the fetcher's record is no content
    assert stat.S_IMODE(os.stat(version / "train.csv").st_mode) == 0o444
    assert stat.S_IMODE(os.stat(version).st_mode) == 0o555
    assert read_version(root, step.rel) == result.manifest
    assert stored_versions(root) == {step.rel: result.manifest}
    assert result.manifest.workspace == "team-a" and result.manifest.run == "run-1"


def test_a_url_file_of_another_digest_is_refused_and_no_version_is_left(root: Path):
    input_spec, step, _ = url_case(root, b"tampered")
    with pytest.raises(NotSealable, match="sha256"):
        sealed(root, input_spec, step, Expected(files={"train.csv": sha(DATA)}))
    assert not (root / step.rel).exists() and not (root / step.staged).exists()


def test_sealing_again_finds_the_version_there_and_drops_the_staging_dir(root: Path):
    input_spec, step, expected = url_case(root)
    first = sealed(root, input_spec, step, expected)
    stage(root, step, {"train.csv": DATA})
    again = sealed(root, input_spec, step, expected)
    assert again.outcome == "exists" and again.manifest == first.manifest and not (root / step.staged).exists()


def test_a_hub_listing_is_checked_by_lfs_sha256_and_git_blob_sha1(root: Path, tmp_path: Path):
    weights, config = parquet(tmp_path / "w.parquet", rows=7), b'{"max_position_embeddings": 4096}'
    input_spec = spec({"hub": {"repo": "Qwen/Qwen2.5-0.5B", "revision": "main", "endpoint": "https://h"}}, "Model",
                      "qwen")
    step = step_for(input_spec, pin="1" * 40)
    stage(root, step, {"data/w.parquet": weights, "config.json": config})
    listing = (HubFile("config.json", len(config), None, blob_oid(config)),
               HubFile("data/w.parquet", len(weights), sha(weights), None))
    manifest = sealed(root, input_spec, step, Expected(hub=listing, pin="1" * 40)).manifest
    assert {f.path for f in manifest.files} == {"config.json", "data/w.parquet"}
    assert manifest.facts["data/w.parquet"] == {"columns": ["prompt", "reward_model"], "rows": 7}
    assert manifest.facts["config.json"] == {"config": {"max_position_embeddings": 4096}}
    assert manifest.source["pin"] == "1" * 40 and manifest.key == step.key


def test_a_hub_file_whose_blob_sha1_differs_is_refused(root: Path):
    input_spec = spec({"hub": {"repo": "Qwen/Qwen2.5-0.5B", "revision": "main", "endpoint": "https://h"}}, "Model",
                      "qwen")
    step = step_for(input_spec, pin="1" * 40)
    stage(root, step, {"config.json": b'{"a": 2}'})
    listing = (HubFile("config.json", 8, None, blob_oid(b'{"a": 1}')),)
    with pytest.raises(NotSealable, match="hub's digest"):
        sealed(root, input_spec, step, Expected(hub=listing, pin="1" * 40))
    assert not (root / step.rel).exists()


def prepare_spec():
    return spec({"prepare": {"code": "verl", "entrypoint": ["python", "p.py", "${output}"],
                             "outputs": ["train.parquet", "val"]}})


def test_a_prepare_step_that_did_not_write_an_output_is_refused(root: Path, tmp_path: Path):
    input_spec = prepare_spec()
    step = step_for(input_spec, pin="d" * 64)
    stage(root, step, {"train.parquet": parquet(tmp_path / "t.parquet")})
    with pytest.raises(NotSealable, match="did not write val"):
        sealed(root, input_spec, step, Expected(outputs=("train.parquet", "val"), pin="d" * 64))
    assert not (root / step.rel).exists()


def test_a_prepare_step_with_every_output_is_sealed_with_json_keys(root: Path, tmp_path: Path):
    input_spec = prepare_spec()
    step = step_for(input_spec, pin="d" * 64)
    stage(root, step, {"train.parquet": parquet(tmp_path / "t.parquet"), "val/v.jsonl": b'{"prompt": 1, "x": 2}\n'})
    manifest = sealed(root, input_spec, step, Expected(outputs=("train.parquet", "val"), pin="d" * 64)).manifest
    assert manifest.facts["val/v.jsonl"] == {"columns": ["prompt", "x"]}


def test_a_path_is_adopted_by_hard_links_and_made_read_only(root: Path, tmp_path: Path):
    from state.inputs.fingerprint import fingerprint

    source = tmp_path / "staging" / "gsm8k"
    (source / "sub").mkdir(parents=True)
    (source / "train.csv").write_bytes(DATA)
    (source / "sub" / "val.csv").write_bytes(b"v")
    pin = fingerprint(str(source))
    input_spec = spec({"path": str(source)})
    step = step_for(input_spec, pin=pin)
    manifest = sealed(root, input_spec, step, Expected(pin=pin)).manifest
    version = root / step.rel
    assert os.stat(version / "train.csv").st_ino == os.stat(source / "train.csv").st_ino  # no copy
    assert os.stat(version / "sub" / "val.csv").st_ino == os.stat(source / "sub" / "val.csv").st_ino
    assert manifest.run is None and {f.path for f in manifest.files} == {"train.csv", "sub/val.csv"}
    assert stat.S_IMODE(os.stat(version / "sub").st_mode) == 0o555
    assert stat.S_IMODE(os.stat(version / "sub" / "val.csv").st_mode) == 0o444  # root writes anyway: modes only


def test_a_path_changed_since_the_plan_is_refused(root: Path, tmp_path: Path):
    source = tmp_path / "staging" / "gsm8k"
    source.mkdir(parents=True)
    (source / "train.csv").write_bytes(DATA)
    input_spec = spec({"path": str(source)})
    step = step_for(input_spec, pin="e" * 64)
    with pytest.raises(NotSealable, match="changed since the plan"):
        sealed(root, input_spec, step, Expected(pin="e" * 64))
    assert not (root / step.rel).exists() and not (root / step.staged).exists()


def test_remove_version_removes_a_sealed_read_only_version(root: Path):
    input_spec, step, expected = url_case(root)
    sealed(root, input_spec, step, expected)
    remove_version(str(root), step.rel)
    assert not (root / step.rel).exists() and stored_versions(root) == {}


def test_one_file_is_adopted_as_a_version_of_one_file(root: Path, tmp_path: Path):
    from state.inputs.fingerprint import fingerprint

    source = tmp_path / "staging" / "train.csv"
    source.parent.mkdir()
    source.write_bytes(DATA)
    pin = fingerprint(str(source))
    input_spec = spec({"path": str(source)})
    step = step_for(input_spec, pin=pin)
    manifest = sealed(root, input_spec, step, Expected(pin=pin)).manifest
    assert [f.path for f in manifest.files] == ["train.csv"]
    assert os.stat(root / step.rel / "train.csv").st_ino == source.stat().st_ino


def test_across_filesystems_a_path_is_copied_with_its_times(root: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    import errno

    from state.inputs import adopt as adopt_module
    from state.inputs.fingerprint import fingerprint

    def cross_device(*_args, **_kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    source = tmp_path / "staging" / "gsm8k"
    source.mkdir(parents=True)
    (source / "train.csv").write_bytes(DATA)
    pin = fingerprint(str(source))
    monkeypatch.setattr(adopt_module.os, "link", cross_device)
    input_spec = spec({"path": str(source)})
    step = step_for(input_spec, pin=pin)
    manifest = sealed(root, input_spec, step, Expected(pin=pin)).manifest
    copied = root / step.rel / "train.csv"
    assert copied.read_bytes() == DATA and copied.stat().st_ino != (source / "train.csv").stat().st_ino
    assert copied.stat().st_mtime_ns == (source / "train.csv").stat().st_mtime_ns
    assert manifest.files[0].sha256 == sha(DATA)
