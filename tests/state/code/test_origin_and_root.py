"""One reader of a repository's origin URL and one finder of its root (state.code.gitinfo), for links,
plan-file identities, `argus init` and its CI pin: read as data, so a checkout's config is never obeyed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from reconcile.commands.init import repository_root as init_root
from state.code.gitinfo import origin_url, repository_root
from state.code.repository import location_of


def _repo(path: Path, origin: str | None) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", origin], check=True)
    (path / "teams" / "nlp").mkdir(parents=True)
    return path


def test_the_origin_and_the_root_are_found_from_anywhere_inside(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", "https://bot:ghp_TOKEN@github.com/acme/ml.git")
    inside = repo / "teams" / "nlp"
    assert origin_url(inside) == "https://bot:ghp_TOKEN@github.com/acme/ml.git"
    assert repository_root(inside) == repo.resolve() == init_root(inside)
    assert location_of(inside).repository == "github.com/acme/ml"  # the identity drops the token
    assert origin_url(tmp_path) is None and repository_root(tmp_path) is None
    assert init_root(tmp_path) == tmp_path.resolve()  # init outside git writes beside the workspace


def test_an_include_in_the_config_is_never_followed(tmp_path: Path) -> None:
    """git would open the FIFO and wait for a writer for ever; a config is read as a capped file."""
    repo = _repo(tmp_path / "repo", None)
    os.mkfifo(tmp_path / "fifo")
    with (repo / ".git" / "config").open("a") as config:
        config.write(f'[include]\n\tpath = {tmp_path / "fifo"}\n'
                     '[remote "origin"]\n\turl = git@github.com:acme/ml.git\n')
    started = time.monotonic()
    assert origin_url(repo) == "git@github.com:acme/ml.git"
    assert time.monotonic() - started < 2
