"""A `path:` source's fingerprint: stable, changed by any file's change, and refusing links and devices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from state.inputs.fingerprint import NotAdoptable, fingerprint


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "staging" / "gsm8k"
    (path / "sub").mkdir(parents=True)
    (path / "train.parquet").write_bytes(b"a" * 10)
    (path / "sub" / "val.parquet").write_bytes(b"b")
    return path


def test_the_same_files_give_the_same_fingerprint(source: Path):
    assert fingerprint(str(source)) == fingerprint(str(source))


def test_a_changed_size_time_or_new_file_changes_it(source: Path):
    first = fingerprint(str(source))
    (source / "sub" / "val.parquet").write_bytes(b"bb")
    second = fingerprint(str(source))
    os.utime(source / "train.parquet", ns=(1, 1))
    third = fingerprint(str(source))
    (source / "new").write_bytes(b"")
    assert len({first, second, third, fingerprint(str(source))}) == 4


def test_one_file_is_fingerprinted_too(source: Path):
    assert fingerprint(str(source / "train.parquet")) != fingerprint(str(source))


def test_a_symlink_inside_is_refused(source: Path, tmp_path: Path):
    (tmp_path / "secret").write_text("x")
    os.symlink(tmp_path / "secret", source / "sub" / "link")
    with pytest.raises(NotAdoptable, match="symlink"):
        fingerprint(str(source))


def test_a_path_through_a_symlink_is_refused(source: Path, tmp_path: Path):
    os.symlink(source, tmp_path / "alias")
    with pytest.raises(NotAdoptable, match="symlink"):
        fingerprint(str(tmp_path / "alias" / "train.parquet"))


def test_a_fifo_inside_is_refused_and_a_missing_path_said(source: Path):
    os.mkfifo(source / "pipe")
    with pytest.raises(NotAdoptable, match="FIFO"):
        fingerprint(str(source))
    with pytest.raises(NotAdoptable, match="does not exist"):
        fingerprint(str(source / "nope"))
