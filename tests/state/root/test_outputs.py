"""Marks of checkpoint directories on the shared root (state.root.outputs): written once, hostile input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.root.outputs import DIR, mark, mark_of

KEY = "output-marks-test-key-0123456789abcdef"


def test_the_first_workspace_marks_a_directory_and_nobody_writes_over_it(tmp_path: Path) -> None:
    path = f"{tmp_path}/outputs/team/checkpoints/train/run-1"
    assert mark_of(str(tmp_path), path) is None
    mark(str(tmp_path), path, "team", "train")
    mark(str(tmp_path), path, "vision", "train")
    seen = mark_of(str(tmp_path), path)
    assert seen is not None and (seen.workspace, seen.job) == ("team", "train")
    assert mark_of(str(tmp_path), path + "-other") is None


def test_a_linked_marks_folder_costs_the_mark_never_the_submit(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".argus").mkdir()
    (tmp_path / DIR).symlink_to(elsewhere)
    mark(str(tmp_path), f"{tmp_path}/x", "team", "train")  # no exception: argus submits on
    assert list(elsewhere.iterdir()) == [] and mark_of(str(tmp_path), f"{tmp_path}/x") is None


def test_a_planted_mark_is_no_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = f"{tmp_path}/outputs/team/checkpoints/train/run-1"
    mark(str(tmp_path), path, "team", "train")
    [written] = (tmp_path / DIR).iterdir()
    written.write_text(json.dumps({"path": "/elsewhere", "workspace": "evil", "job": "x"}))  # moved from another dir
    assert mark_of(str(tmp_path), path) is None
    written.unlink()
    (tmp_path / "target.json").write_text(json.dumps({"path": path, "workspace": "evil", "job": "x"}))
    written.symlink_to(tmp_path / "target.json")
    assert mark_of(str(tmp_path), path) is None
    written.unlink()
    written.write_text(json.dumps({"path": path, "workspace": "evil", "job": "x"}))  # what a job can write
    assert mark_of(str(tmp_path), path) is not None
    monkeypatch.setenv("ARGUS_ROOT_KEY", KEY)
    assert mark_of(str(tmp_path), path) is None  # with the key only argus's own counts
    written.unlink()
    mark(str(tmp_path), path, "team", "train")
    assert mark_of(str(tmp_path), path) is not None
