"""A job can write anything on the shared root: what it plants in a staging dir or a version never becomes a
version argus trusts, never makes argus read or chmod a file outside, and a forged manifest is refused."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from state.inputs import seal as seal_module
from state.inputs.manifest import MANIFEST, Untrusted, check_sizes, read_version, stored_versions, verify_digests
from state.inputs.seal import Expected
from state.inputs.walk import NotSealable
from tests.support.sealing import sealed, sha, spec, stage, step_for

DATA = b"prompt,answer\n1+1,2\n"
SECRET = b"AKIA-the-runner-s-secret-key"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "credentials"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def url_case(root: Path, files: dict[str, bytes] | None = None) -> tuple:
    input_spec = spec({"url": {"url": "https://h/train.csv", "sha256": sha(DATA)}})
    step = step_for(input_spec)
    stage(root, step, {"train.csv": DATA} if files is None else files)
    return input_spec, step, Expected(files={"train.csv": sha(DATA)})


def nothing_mentions_the_secret(root: Path) -> None:
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            assert path.is_symlink() or SECRET not in path.read_bytes()


def test_a_symlink_planted_in_staging_is_refused_and_the_secret_is_neither_read_nor_chmodded(root: Path,
                                                                                             secret: Path):
    input_spec, step, expected = url_case(root)
    os.symlink(secret, root / step.staged / "train.csv.bak")
    with pytest.raises(NotSealable, match="symlink"):
        sealed(root, input_spec, step, expected)
    assert not (root / step.rel).exists() and read_version(root, step.rel) is None
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_bytes() == SECRET
    nothing_mentions_the_secret(root)


def test_a_symlink_in_place_of_the_expected_file_is_refused(root: Path, secret: Path):
    input_spec, step, expected = url_case(root, files={})
    os.symlink(secret, root / step.staged / "train.csv")
    with pytest.raises(NotSealable):
        sealed(root, input_spec, step, Expected(files={"train.csv": sha(SECRET)}))  # even with the secret's digest
    assert not (root / step.rel).exists()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_a_fifo_in_staging_is_refused_without_blocking(root: Path):
    input_spec, step, expected = url_case(root)
    os.mkfifo(root / step.staged / "pipe")
    with pytest.raises(NotSealable, match="FIFO"):
        sealed(root, input_spec, step, expected)
    assert not (root / step.rel).exists()


def test_a_staging_dir_that_is_a_symlink_is_refused_and_its_target_left_alone(root: Path, tmp_path: Path):
    input_spec = spec({"url": {"url": "https://h/train.csv", "sha256": sha(DATA)}})
    step = step_for(input_spec)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.csv").write_bytes(DATA)
    (root / step.staged).parent.mkdir(parents=True)
    os.symlink(elsewhere, root / step.staged)
    with pytest.raises(NotSealable, match="symlink"):
        sealed(root, input_spec, step, Expected(files={"train.csv": sha(DATA)}))
    assert not os.path.lexists(root / step.rel) and not os.path.lexists(root / step.staged)
    assert (elsewhere / "train.csv").read_bytes() == DATA and not (elsewhere / MANIFEST).exists()
    assert stat.S_IMODE(elsewhere.stat().st_mode) != 0o555


def test_a_staging_dir_swapped_for_a_symlink_before_the_rename_leaves_no_version(root: Path, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    input_spec, step, expected = url_case(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.csv").write_bytes(b"the attacker's data")
    real = seal_module.make_read_only

    def then_swap(shared_root: str, rel: str) -> None:
        real(shared_root, rel)
        os.rename(root / rel, root / (rel + "-moved"))
        os.symlink(elsewhere, root / rel)

    monkeypatch.setattr(seal_module, "make_read_only", then_swap)
    with pytest.raises(NotSealable, match="replaced"):
        sealed(root, input_spec, step, expected)
    assert not os.path.lexists(root / step.rel) and stored_versions(root) == {}
    assert (elsewhere / "train.csv").exists()


def test_a_manifest_planted_in_staging_is_replaced_by_argus_s_own(root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", "k" * 32)
    input_spec, step, expected = url_case(root)
    (root / step.staged / MANIFEST).write_text(json.dumps({"forged": True}))
    manifest = sealed(root, input_spec, step, expected).manifest
    assert read_version(root, step.rel) == manifest and read_version(root, step.rel).signed


def forge(root: Path, rel: str, body: dict) -> None:
    (root / rel).mkdir(parents=True)
    (root / rel / MANIFEST).write_text(json.dumps(body))


def test_a_forged_unsigned_manifest_is_refused_when_a_key_is_set(root: Path, monkeypatch: pytest.MonkeyPatch):
    input_spec, step, expected = url_case(root)
    body = sealed(root, input_spec, step, expected).manifest.model_dump(mode="json")  # sealed without a key
    monkeypatch.setenv("ARGUS_ROOT_KEY", "k" * 32)
    with pytest.raises(Untrusted, match="not signed by argus"):
        read_version(root, step.rel)
    assert stored_versions(root) == {}
    other = step.rel[:-12] + "0" * 12
    forge(root, other, {**body, "key": "0" * 64, "sig": "f" * 64})
    with pytest.raises(Untrusted, match="not signed by argus"):
        read_version(root, other)


def test_a_signed_manifest_copied_to_another_version_is_refused(root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", "k" * 32)
    input_spec, step, expected = url_case(root)
    sealed(root, input_spec, step, expected)
    raw = json.loads((root / step.rel / MANIFEST).read_text())
    other = step.rel[:-12] + "0" * 12
    forge(root, other, {**raw, "key": "0" * 64})  # names the directory it is in, signature of another
    with pytest.raises(Untrusted):
        read_version(root, other)
    assert list(stored_versions(root)) == [step.rel]


def test_seal_refuses_to_call_a_forged_version_its_own(root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", "k" * 32)
    input_spec, step, expected = url_case(root)
    forge(root, step.rel, {"kind": "Dataset", "name": "gsm8k", "key": step.key, "source": {}, "workspace": "x",
                           "created_by": "x", "created_at": "x", "files": [], "bytes": 0, "digest": "0"})
    with pytest.raises(NotSealable, match="not signed"):
        sealed(root, input_spec, step, expected)
    assert (root / step.rel / MANIFEST).exists() and not (root / step.rel / "train.csv").exists()


def test_a_file_changed_after_the_seal_is_found(root: Path):
    input_spec, step, expected = url_case(root)
    manifest = sealed(root, input_spec, step, expected).manifest
    target = root / step.rel / "train.csv"
    assert check_sizes(root, step.rel, manifest) is None and verify_digests(root, step.rel, manifest) is None
    target.chmod(0o644)
    target.write_bytes(DATA.replace(b"2", b"3"))  # same size: only the deep check sees it
    assert check_sizes(root, step.rel, manifest) is None
    assert "no longer matches" in verify_digests(root, step.rel, manifest)
    target.write_bytes(DATA + b"more")
    assert "sealed as" in check_sizes(root, step.rel, manifest)
    target.unlink()
    os.symlink("/etc/passwd", target)
    assert "no longer a regular file" in check_sizes(root, step.rel, manifest)


HUGE = 20 * 1024 ** 3
"""A sparse 20 GiB file: hashing it would hold apply for a long while."""


def test_a_huge_file_planted_beside_a_fetched_one_is_refused_without_being_read(root: Path):
    import time

    input_spec, step, expected = url_case(root)
    with open(root / step.staged / "zz-huge.bin", "wb") as f:
        f.truncate(HUGE)
    started = time.monotonic()
    with pytest.raises(NotSealable, match="not expected"):
        sealed(root, input_spec, step, expected)
    assert time.monotonic() - started < 5
    assert not (root / step.rel).exists()


def test_a_hub_file_swapped_for_a_huge_one_is_refused_by_its_listed_size_without_being_read(root: Path):
    import time

    from state.inputs.shapes import HubFile

    input_spec = spec({"hub": {"repo": "o/m", "revision": "c" * 40, "endpoint": "http://hub.test"}}, kind="Model")
    step = step_for(input_spec, pin="c" * 40)
    stage(root, step, {})
    with open(root / step.staged / "model.safetensors", "wb") as f:
        f.truncate(HUGE)
    listing = (HubFile("model.safetensors", 4, sha(b"abcd"), None),)
    started = time.monotonic()
    with pytest.raises(NotSealable):
        sealed(root, input_spec, step, Expected(hub=listing, pin="c" * 40))
    assert time.monotonic() - started < 5
    assert not (root / step.rel).exists()
