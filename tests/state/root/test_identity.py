"""The shared root's identity (state.root.identity): written once, read as hostile input, signed when keyed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from state.root.identity import IDENTITY, observe_root, write_identity

KEY = "root-identity-test-key-0123456789abcdef"


def test_a_fresh_root_has_no_identity_and_nothing_of_argus(tmp_path: Path) -> None:
    state = observe_root(str(tmp_path))
    assert (state.identity, state.problem, state.earlier) == (None, None, False)


def test_a_root_laid_out_before_identities_is_told_by_argus_own_directories(tmp_path: Path) -> None:
    (tmp_path / ".argus" / "audit").mkdir(parents=True)
    (tmp_path / ".argus" / "audit" / "team.jsonl").write_text("{}\n")  # what another apply may leave anywhere
    (tmp_path / "jobs").mkdir()
    assert observe_root(str(tmp_path)).earlier is False  # an empty directory proves nothing either
    (tmp_path / "jobs" / "team.train.0123abcd4567.1").mkdir()
    assert observe_root(str(tmp_path)).earlier is True


def test_the_identity_is_written_once_and_read_back(tmp_path: Path) -> None:
    first = write_identity(str(tmp_path), "alice")
    second = write_identity(str(tmp_path), "bob")
    assert second.id == first.id and observe_root(str(tmp_path)).identity == first
    assert json.loads((tmp_path / IDENTITY).read_text())["actor"] == "alice"


def test_a_missing_root_is_never_made(tmp_path: Path) -> None:
    from state.beneath import RootMissing

    with pytest.raises(RootMissing, match="never creates it"):
        write_identity(str(tmp_path / "typo"), "alice")
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("plant", ["malformed", "symlink", "fifo", "huge"])
def test_a_planted_identity_is_a_problem_never_a_crash(tmp_path: Path, plant: str) -> None:
    path = tmp_path / IDENTITY
    path.parent.mkdir(parents=True)
    if plant == "malformed":
        path.write_text('{"id": "not hex"}')
    elif plant == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps({"id": "a" * 32, "created": 1.0}))
        path.symlink_to(tmp_path / "elsewhere.json")
    elif plant == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b" " * 10_000)
    state = observe_root(str(tmp_path))
    assert state.identity is None and state.problem
    if plant in ("symlink", "fifo"):
        write_identity(str(tmp_path), "alice")  # never written over (nor through) what stands there
        assert path.is_symlink() if plant == "symlink" else path.is_fifo()


def test_with_the_key_only_a_signed_identity_is_argus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / IDENTITY
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": "b" * 32, "created": 1.0}))  # what a job can write
    assert observe_root(str(tmp_path)).identity is not None  # without a key nothing tells it apart
    monkeypatch.setenv("ARGUS_ROOT_KEY", KEY)
    assert "signature" in (observe_root(str(tmp_path)).problem or "")
    path.unlink()
    written = write_identity(str(tmp_path), "alice")
    assert observe_root(str(tmp_path)).identity == written
    body = json.loads(path.read_text())
    body["created"] = 2.0  # an edit breaks the signature
    path.write_text(json.dumps(body))
    assert observe_root(str(tmp_path)).problem
