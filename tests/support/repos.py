"""git in a test's own repository, as a developer would type it (a throwaway identity)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          capture_output=True, text=True, check=True)
    return done.stdout
