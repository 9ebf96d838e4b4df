"""Which argus this is: its version and, when known, the git commit it was installed from.

One lookup for `argus --version` and serve's `argus_build_info`. It must stay cheap: --version runs
before any command, so nothing heavy is imported here and git is never run (state.code.workcopy
reads HEAD as files).

May import: state.code.
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "argus-ray"
"""The name on the package index (`argus` there is another project); the command is `argus`."""
SHORT = 12
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
"""A full SHA-1 or SHA-256 object name; anything else in install metadata is not believed."""
SOURCE = Path(__file__).resolve().parents[1]
"""The directory holding the reconcile package: a source checkout when argus runs from one."""


@dataclass(frozen=True)
class Build:
    version: str
    commit: str
    """Full commit SHA argus was installed from, or "" when unknown (an index or wheel install)."""
    python: str

    def line(self) -> str:
        """`argus 0.1.0 (git 1a2b3c4d5e6f)`, or `argus 0.1.0` when the commit is unknown."""
        return f"argus {self.version}" + (f" (git {self.commit[:SHORT]})" if self.commit else "")


@cache
def build() -> Build:
    """Looked up once a process: the install does not change under a running argus."""
    return Build(installed_version(), installed_commit(), platform.python_version())


def installed_version() -> str:
    try:
        return distribution(DISTRIBUTION).version
    except PackageNotFoundError:
        return "unknown"


def installed_commit() -> str:
    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:
        recorded = None
    return commit_from(recorded, SOURCE)


def commit_from(direct_url: str | None, source: Path) -> str:
    """From PEP 610's direct_url.json: a VCS install records its commit; an editable install points at
    its checkout, whose HEAD is read now. Without that metadata (not installed, or an egg-info in the
    checkout), the checkout argus runs from (`source`), if it is one: site-packages is not."""
    origin = _direct_url(direct_url)
    if origin is None:
        return _head(source)
    commit = str((origin.get("vcs_info") or {}).get("commit_id") or "")
    if commit:
        return commit if _COMMIT.match(commit) else ""
    if (origin.get("dir_info") or {}).get("editable") is True:
        url = urlparse(str(origin.get("url") or ""))
        return _head(Path(unquote(url.path))) if url.scheme == "file" else ""
    return ""  # a plain directory or wheel install: its commit is not recorded


def _direct_url(text: str | None) -> dict | None:
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _head(checkout: Path) -> str:
    """HEAD of exactly this checkout (not of a repository somewhere above it), or ""."""
    from state.code import workcopy

    if not (checkout / ".git").exists():
        return ""
    try:
        commit = workcopy.head_commit(workcopy.open_working_copy(checkout))
    except (workcopy.NotAWorkingCopy, OSError):
        return ""
    return commit if _COMMIT.match(commit) else ""
