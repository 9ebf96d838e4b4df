"""A `path:` source is a pull request's to write: argus (on the runner's machine) links what it names into the
shared root, where every job of the cluster reads it, and seals it read-only. A reviewer who sees
`path: /home/runner/datasets` must not thereby publish the runner's keys (hidden files, files only their owner may
read) or loosen their modes. Each test asserts the secret never reaches the shared root and keeps its mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from state.inputs.fingerprint import NotAdoptable, fingerprint
from state.inputs.seal import Expected
from state.inputs.walk import NotSealable
from tests.support.sealing import sealed, spec, step_for

KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"


def _published(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.read_bytes() == KEY]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The runner's home: some data, and its ssh key (0600, in a hidden directory)."""
    home = tmp_path / "home" / "runner"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(KEY)
    os.chmod(home / ".ssh" / "id_ed25519", 0o600)
    (home / "train.csv").write_bytes(b"q,a\n")
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    return shared


def test_a_home_directory_with_hidden_keys_is_never_published(root: Path, home: Path):
    input_spec = spec({"path": str(home)})
    with pytest.raises(NotSealable, match="hidden"):
        pin = fingerprint(str(home))
        sealed(root, input_spec, step_for(input_spec, pin=pin), Expected(pin=pin))
    assert _published(root) == []
    assert stat.S_IMODE(os.stat(home / ".ssh" / "id_ed25519").st_mode) == 0o600  # never made 0444


def test_a_file_only_its_owner_may_read_is_never_published(root: Path, tmp_path: Path):
    source = tmp_path / "staging" / "keys"
    source.mkdir(parents=True)
    (source / "id_ed25519").write_bytes(KEY)
    os.chmod(source / "id_ed25519", 0o600)
    (source / "train.csv").write_bytes(b"q,a\n")
    input_spec = spec({"path": str(source)})
    with pytest.raises(NotAdoptable, match="not readable by others"):
        pin = fingerprint(str(source))
        sealed(root, input_spec, step_for(input_spec, pin=pin), Expected(pin=pin))
    assert _published(root) == []
    assert stat.S_IMODE(os.stat(source / "id_ed25519").st_mode) == 0o600


def test_one_private_file_named_by_path_is_never_published(root: Path, tmp_path: Path):
    source = tmp_path / "staging" / "id_ed25519"
    source.parent.mkdir(parents=True)
    source.write_bytes(KEY)
    os.chmod(source, 0o600)
    input_spec = spec({"path": str(source)})
    with pytest.raises(NotAdoptable, match="not readable by others"):
        pin = fingerprint(str(source))
        sealed(root, input_spec, step_for(input_spec, pin=pin), Expected(pin=pin))
    assert _published(root) == []
    assert stat.S_IMODE(os.stat(source).st_mode) == 0o600


def _racing(monkeypatch, harm) -> None:
    """A job on the cluster writes into the adoption's staging dir (a predictable name on a root every job may
    write) while apply links the path's files into it: `harm(folder_fd, name)` after each real link."""
    from state.inputs import adopt as adopt_module

    real = adopt_module._link

    def link(source, folder, name, info):
        real(source, folder, name, info)
        harm(folder, name)
    monkeypatch.setattr(adopt_module, "_link", link)


def _staged_path_case(tmp_path: Path):
    source = tmp_path / "staging" / "gsm8k"
    source.mkdir(parents=True)
    (source / "train.csv").write_bytes(b"q,a\n1+1,2\n")
    pin = fingerprint(str(source))
    input_spec = spec({"path": str(source)})
    return input_spec, step_for(input_spec, pin=pin), pin


def test_a_file_a_job_adds_to_an_adoption_is_never_sealed_into_the_version(root: Path, tmp_path: Path, monkeypatch):
    def plant(folder, _name):
        fd = os.open("poison.csv", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folder)
        os.write(fd, b"poisoned")
        os.close(fd)
    _racing(monkeypatch, plant)
    input_spec, step, pin = _staged_path_case(tmp_path)
    with pytest.raises(NotSealable):
        sealed(root, input_spec, step, Expected(pin=pin))
    assert not (root / step.rel).exists()
    assert not [p for p in root.rglob("poison.csv")]


def test_a_file_a_job_swaps_in_an_adoption_is_never_sealed_into_the_version(root: Path, tmp_path: Path, monkeypatch):
    def swap(folder, name):
        os.unlink(name, dir_fd=folder)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folder)
        os.write(fd, b"poisoned!!")  # the same size as the original
        os.close(fd)
    _racing(monkeypatch, swap)
    input_spec, step, pin = _staged_path_case(tmp_path)
    with pytest.raises(NotSealable):
        sealed(root, input_spec, step, Expected(pin=pin))
    assert not (root / step.rel).exists()
    assert (tmp_path / "staging" / "gsm8k" / "train.csv").read_bytes() == b"q,a\n1+1,2\n"


def test_files_in_a_directory_others_cannot_enter_are_never_published(root: Path, tmp_path: Path):
    """A home directory is often 0700: the files in it are the owner's alone, whatever their own mode says.
    (The path's ancestors are not checked: pytest's own tmp dirs are 0700.)"""
    home = tmp_path / "home" / "runner"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "token.txt").write_bytes(KEY)  # 0644, but nobody else can reach it
    (home / "train.csv").write_bytes(b"q,a\n")
    os.chmod(home, 0o700)
    input_spec = spec({"path": str(home)})
    with pytest.raises(NotAdoptable, match="others cannot"):
        pin = fingerprint(str(home))
        sealed(root, input_spec, step_for(input_spec, pin=pin), Expected(pin=pin))
    os.chmod(home, 0o755)
    os.chmod(home / "notes", 0o700)
    with pytest.raises(NotAdoptable, match="others cannot"):
        pin = fingerprint(str(home))
        sealed(root, input_spec, step_for(input_spec, pin=pin), Expected(pin=pin))
    assert _published(root) == []
    assert stat.S_IMODE(os.stat(home / "notes" / "token.txt").st_mode) == 0o644
