"""apply asks before acting, and talks only to the address the spec names."""

from __future__ import annotations

import io

import pytest
from conftest import QUICK, jobs_of


def test_apply_without_auto_approve_needs_the_word_yes(workspace, argus, monkeypatch: pytest.MonkeyPatch):
    workspace.job("asked", QUICK)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    declined = argus("apply", workspace.root)
    assert declined.code == 1 and "Apply cancelled" in declined.err
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    closed = argus("apply", workspace.root)
    assert closed.code == 1 and "--auto-approve" in closed.err
    assert jobs_of(workspace.address, workspace.name) == []

    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    accepted = argus("apply", workspace.root)
    assert accepted.code == 0, accepted.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_ray_address_variables_never_redirect_argus(workspace, argus, monkeypatch: pytest.MonkeyPatch):
    workspace.job("pinned", QUICK)
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:9")
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://127.0.0.1:9")
    result = argus("apply", workspace.root, "--auto-approve")
    assert result.code == 0, result.err
    monkeypatch.delenv("RAY_ADDRESS")  # Ray's own client obeys these: the check below must not
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS")
    assert len(jobs_of(workspace.address, workspace.name)) == 1
