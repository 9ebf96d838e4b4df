"""The verl repository with verl-recipe's recipes beside verl, and a workspace naming each version's snapshot:
the fixtures of the tests that compose verl's example scripts (test_verl_scripts.py, test_recipe_demand.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.verl_scripts import SCRIPTS, VERSIONS, verl_workspace


@pytest.fixture(scope="session")
def scripts_repo(verl_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verl repository with a recipe beside verl (as verl-recipe is checked out): tags v<version>-recipe."""
    repo = tmp_path_factory.mktemp("verl-scripts") / "verl"
    subprocess.run(["git", "clone", "-q", str(verl_repo), str(repo)], check=True)
    for version in VERSIONS:
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
        subprocess.run([*git, "checkout", "-q", f"v{version}"], check=True)
        shutil.rmtree(repo / "recipe", ignore_errors=True)
        shutil.copytree(SCRIPTS / "recipe", repo / "recipe")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"verl {version} with a recipe"], check=True)
        subprocess.run([*git, "tag", f"v{version}-recipe"], check=True)
    return repo


@pytest.fixture(scope="module")
def scripts_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One cache for the module: each snapshot is extracted once, as one argus process would."""
    return str(tmp_path_factory.mktemp("verl-scripts-cache"))


@pytest.fixture
def scripts_ws(tmp_path: Path, scripts_repo: Path, scripts_cache: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", scripts_cache)
    return verl_workspace(tmp_path / "ws", "verl-scripts", scripts_repo, "-recipe")
