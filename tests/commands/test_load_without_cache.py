"""A workspace loads when argus's cache cannot be had (a read-only or absent HOME: a Nix build, a Bazel sandbox, a CI
container as a uid with no home): the memo (state.memo) costs time when it is missing, never the command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconcile.commands.common import load
from state import memo as memo_module

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_workspace_loads_when_argus_cache_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "quickstart", root)
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # nobody, root included, makes a directory beneath a file
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(blocked / "argus"))
    memo_module._secret.cache_clear()
    assert load(root).workspace.name == "quickstart"
    assert load(root).workspace.name == "quickstart"
