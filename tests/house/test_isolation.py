"""The autouse fixture isolates every test: no cluster, CI actor, git config, home or cache of the
machine's user leaks in. These tests check the fixture itself, as any test sees it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from state.audit import log as audit
from state.code.cache import cache_root
from tests.support.isolation import GIT_KEPT, UNSET


def test_nothing_reaches_a_cluster_or_names_a_ci_actor():
    assert [name for name in UNSET if name in os.environ] == []
    assert set(audit.CI_ACTOR_VARIABLES) <= set(UNSET)  # follows the code: a new actor variable is covered


def test_home_and_caches_are_the_tests_own(tmp_path: Path):
    assert Path.home() == tmp_path / "home"
    assert Path(cache_root()) == tmp_path / "argus-cache"
    assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "home" / ".cache")
    assert os.environ["ARGUS_LOCAL_DIR"] == str(tmp_path / "local-cluster")


def test_git_sees_only_the_tests_config(tmp_path: Path):
    leaked = [n for n in os.environ if n.startswith("GIT_") and n not in GIT_KEPT and n != "GIT_CONFIG_NOSYSTEM"]
    assert leaked == []
    shown = subprocess.run(["git", "config", "--list", "--show-origin"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert shown == [f"file:{tmp_path / 'home' / '.gitconfig'}\tuser.name=argus-tests",
                     f"file:{tmp_path / 'home' / '.gitconfig'}\tuser.email=tests@localhost"]
