"""`argus --version`: the version and the commit argus was installed from, without importing heavy modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reconcile.version import build, commit_from, installed_version

ROOT = Path(__file__).resolve().parents[2]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
PROBE = ("import sys; from reconcile.cli import main; code = main(['--version']); "
         "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'prometheus_client', 'apprise', 'git'})); "
         "sys.exit(code)")


def checkout(path: Path) -> str:
    path.mkdir()
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("x\n")
    subprocess.run([*GIT, "-C", str(path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "one"], check=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_version_prints_the_version_and_commit_and_imports_nothing_heavy(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line, heavy = done.stdout.splitlines()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    expected = f"argus {installed_version()}" + (f" (git {head.strip()[:12]})" if (ROOT / ".git").exists() else "")
    assert line == expected == build().line()
    assert installed_version() not in ("", "unknown")
    assert heavy == "[]", "--version must not import ray, prometheus_client, apprise or gitpython"


def test_the_commit_comes_from_install_metadata_or_the_checkout(tmp_path):
    head = checkout(tmp_path / "src")
    sha = "1a2b3c4d5e6f" + "0" * 28
    vcs = {"url": "https://github.com/acme/argus.git", "vcs_info": {"vcs": "git", "commit_id": sha}}
    assert commit_from(json.dumps(vcs), tmp_path) == sha
    assert commit_from(json.dumps({**vcs, "vcs_info": {"commit_id": "main; rm -rf /"}}), tmp_path) == ""
    editable = {"url": (tmp_path / "src").as_uri(), "dir_info": {"editable": True}}
    assert commit_from(json.dumps(editable), tmp_path) == head
    assert commit_from(json.dumps({**editable, "dir_info": {}}), tmp_path / "src") == "", "a copy, not the checkout"
    assert commit_from(json.dumps({"archive_info": {}, "url": "file:///w.whl"}), tmp_path / "src") == ""
    assert commit_from(None, tmp_path / "src") == head, "run from a checkout without install metadata"
    assert commit_from("{not json", tmp_path) == "" and commit_from(None, tmp_path) == ""
