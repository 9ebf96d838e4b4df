"""Workspace name claims on the shared root (state.claims): written whole and only where absent, read as
hostile input (a link, a FIFO, a huge file, malformed JSON, another name's claim, a forged unsigned claim
while ARGUS_ROOT_KEY is set), and the repository identity they record (no credential, one for every clone)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from state import claims, root_key
from state.beneath import NotBeneath
from state.observed import Owner

OURS = Owner(repository="github.com/org/models", directory="teams/nlp")
THEIRS = Owner(repository="github.com/org/models", directory="teams/nlp-copy")
KEY = "a root key that only argus processes hold"


def _path(root: Path, workspace: str = "nlp") -> Path:
    return root / ".argus" / "claims" / f"{workspace}.json"


def _plant(root: Path, text: str, workspace: str = "nlp") -> Path:
    path = _path(root, workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _genuine(owner: Owner = THEIRS, workspace: str = "nlp") -> dict:
    return {"workspace": workspace, "repository": owner.repository, "directory": owner.directory,
            "claimed_at": "2026-01-01T00:00:00+00:00", "actor": "ci"}


def test_the_first_claim_is_written_once_and_another_owner_is_refused(tmp_path):
    assert claims.read(str(tmp_path), "nlp").owner is None
    assert claims.claim(str(tmp_path), "nlp", OURS, "alice", "2026-01-01T00:00:00+00:00") is True
    written = _path(tmp_path).read_text()
    assert json.loads(written) == {**_genuine(OURS), "actor": "alice"}
    assert claims.read(str(tmp_path), "nlp").owner == OURS
    assert claims.claim(str(tmp_path), "nlp", OURS, "bob", "later") is False  # ours already: nothing written
    with pytest.raises(claims.ClaimRefused, match="teams/nlp"):
        claims.claim(str(tmp_path), "nlp", THEIRS, "mallory", "later")
    assert _path(tmp_path).read_text() == written
    assert sorted(os.listdir(_path(tmp_path).parent)) == ["nlp.json"], "no temporary file is left behind"


def test_a_rewrite_replaces_the_claim_and_a_planted_link_is_replaced_not_written_through(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("precious\n")
    root = tmp_path / "root"
    _path(root).parent.mkdir(parents=True)
    _path(root).symlink_to(outside)
    assert "symlink" in (claims.read(str(root), "nlp").problem or "")
    claims.rewrite(str(root), "nlp", OURS, "alice", "now")
    assert outside.read_text() == "precious\n" and not _path(root).is_symlink()
    assert claims.read(str(root), "nlp").owner == OURS


def test_a_link_planted_as_the_claim_is_no_claim_and_the_first_apply_is_refused_not_written_through(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_genuine(OURS)))
    root = tmp_path / "root"
    _path(root).parent.mkdir(parents=True)
    _path(root).symlink_to(outside)
    seen = claims.read(str(root), "nlp")
    assert seen.owner is None and "is a symlink, which argus does not follow" in seen.problem
    with pytest.raises(claims.ClaimRefused, match="symlink"):
        claims.claim(str(root), "nlp", OURS, "alice", "now")
    assert json.loads(outside.read_text()) == _genuine(OURS)


def test_a_linked_claims_directory_is_never_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "root"
    (root / ".argus").mkdir(parents=True)
    (root / ".argus" / "claims").symlink_to(elsewhere)
    assert claims.read(str(root), "nlp").problem is not None
    with pytest.raises(NotBeneath):
        claims.claim(str(root), "nlp", OURS, "alice", "now")
    assert list(elsewhere.iterdir()) == []


def test_a_fifo_and_a_huge_file_are_refused_unread_in_bounded_time(tmp_path):
    fifo_root, huge_root = tmp_path / "fifo", tmp_path / "huge"
    _path(fifo_root).parent.mkdir(parents=True)
    os.mkfifo(_path(fifo_root))
    with open(_plant(huge_root, ""), "r+b") as handle:
        handle.truncate(2 << 30)  # a sparse 2 GiB file: refused by its size, never read
    started = time.monotonic()
    fifo, huge = claims.read(str(fifo_root), "nlp"), claims.read(str(huge_root), "nlp")
    assert time.monotonic() - started < 2
    assert "not a regular file (a FIFO)" in fifo.problem and fifo.owner is None
    assert f"larger than {claims.MAX_CLAIM_BYTES} bytes" in huge.problem and huge.owner is None


@pytest.mark.parametrize(("text", "why"), [
    ("{not json", "no claim argus wrote"),
    ("[]", "no claim argus wrote"),
    (json.dumps({**_genuine(), "extra": 1}), "no claim argus wrote"),
    (json.dumps({**_genuine(), "directory": "teams/nlp\n\x1b[2Jok"}), "no claim argus wrote"),
    (json.dumps(_genuine(workspace="vision")), "claims workspace 'vision', not 'nlp'"),
])
def test_malformed_claims_are_problems_never_owners(tmp_path, text, why):
    _plant(tmp_path, text)
    seen = claims.read(str(tmp_path), "nlp")
    assert seen.owner is None and why in seen.problem
    assert "\x1b" not in seen.problem and "\n" not in seen.problem


def test_with_the_key_a_forged_unsigned_claim_is_a_problem_and_argus_own_is_an_owner(tmp_path, monkeypatch):
    _plant(tmp_path, json.dumps(_genuine(THEIRS)))
    assert claims.read(str(tmp_path), "nlp").owner == THEIRS  # without the key a claim cannot be told forged
    monkeypatch.setenv(root_key.KEY_VARIABLE, KEY)
    forged = claims.read(str(tmp_path), "nlp")
    assert forged.owner is None and "not signed with ARGUS_ROOT_KEY" in forged.problem
    claims.rewrite(str(tmp_path), "nlp", OURS, "alice", "now")
    assert claims.read(str(tmp_path), "nlp").owner == OURS
    assert KEY not in _path(tmp_path).read_text()
    monkeypatch.setenv(root_key.KEY_VARIABLE, "another key, of a root argus does not share")
    assert "not signed" in claims.read(str(tmp_path), "nlp").problem


def test_with_the_key_a_signed_claim_edited_or_moved_to_another_name_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.setenv(root_key.KEY_VARIABLE, KEY)
    claims.claim(str(tmp_path), "vision", THEIRS, "ci", "now")
    signed = json.loads(_path(tmp_path, "vision").read_text())
    _plant(tmp_path, json.dumps({**signed, "workspace": "nlp"}))  # moved to nlp's file, its name edited to match
    assert "not signed" in claims.read(str(tmp_path), "nlp").problem
    _plant(tmp_path, json.dumps({**signed, "directory": "teams/other"}), "vision")  # an edited owner
    assert "not signed" in claims.read(str(tmp_path), "vision").problem


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_repository_is_its_origin_without_credentials_or_else_its_first_commit(tmp_path):
    repo = tmp_path / "repo"
    (repo / "teams" / "nlp").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "teams" / "nlp" / "argus.yaml").write_text("kind: Workspace\nname: nlp\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    first = _git(repo, "rev-parse", "HEAD")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "second", "--allow-empty")
    assert claims.owner_of(repo / "teams" / "nlp") == Owner(repository=f"git:{first}", directory="teams/nlp")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)  # origin: a local path
    assert claims.owner_of(clone / "teams" / "nlp") == Owner(repository=f"git:{first}", directory="teams/nlp")
    _git(repo, "remote", "add", "origin", "https://ci-bot:ghp_SECRET@GitHub.com/org/models.git")
    https = claims.owner_of(repo / "teams" / "nlp")
    _git(repo, "remote", "set-url", "origin", "git@github.com:org/models.git")
    assert https == claims.owner_of(repo / "teams" / "nlp") == OURS
    assert "SECRET" not in str(https)
    # claimed before the origin was added: still this repository's; a copy's directory, another history's are not
    before = Owner(repository=f"git:{first}", directory="teams/nlp")
    assert claims.is_ours(before, OURS, repo / "teams" / "nlp")
    assert not claims.is_ours(before.model_copy(update={"directory": "teams/other"}), OURS, repo / "teams" / "nlp")
    assert not claims.is_ours(Owner(repository="git:" + "0" * 40, directory="teams/nlp"), OURS, repo / "teams" / "nlp")
    assert not claims.is_ours(THEIRS, OURS, repo / "teams" / "nlp")


def test_outside_git_a_workspace_is_its_real_path(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    outside = claims.owner_of(tmp_path / "link")
    assert outside == Owner(repository=f"path:{os.path.realpath(tmp_path / 'real')}", directory=".")
    # put in git since its first apply: the claim of its path is still its own
    assert claims.is_ours(outside, Owner(repository="git:" + "1" * 40, directory="."), tmp_path / "real")
    assert not claims.is_ours(outside, Owner(repository="git:" + "1" * 40, directory="."), tmp_path)
