"""Where CI installs argus from: exactly the argus that ran `argus init`, as one line of requirements.txt.

`--install-from` names it (`argus-ray==X`, `git+URL@<40-hex commit>`, or a wheel's path); otherwise it is
read off how the running argus is installed (PEP 610's direct_url.json): from a git checkout (editable
or not) that checkout's `origin` (or its path) at HEAD, from git that URL and commit, from a wheel that
wheel, from the package index its version.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

from reconcile.version import DISTRIBUTION
from specs.errors import ArgusError

if TYPE_CHECKING:
    from state.code.workcopy import WorkingCopy

COMMIT = re.compile(r"[0-9a-f]{40}")
PIN = re.compile(rf"{DISTRIBUTION}==[0-9A-Za-z.!+-]+")
SCP = re.compile(r"(?P<user>[\w.-]+)@(?P<host>[\w.-]+):(?P<path>[^/].*)")
"""git's scp-like address (git@github.com:org/argus.git), which pip reads only as ssh://."""

ADVICE = "Pass --install-from argus-ray==VERSION, git+URL@<40-hex commit> or a wheel's path, or use --no-ci."


@dataclass(frozen=True)
class InstallSource:
    requirement: str
    """The requirements.txt line the CI installs."""
    origin: str
    """Where it came from, said in the file's comment."""
    warning: str = ""
    """Said by init when the pin may not be what the person expects (a dirty checkout)."""


def given(spec: str) -> InstallSource:
    """--install-from: a package-index pin, a git URL at a full commit, or a wheel file."""
    if PIN.fullmatch(spec):
        return InstallSource(spec, f"--install-from {spec} (the package index)")
    shown = f"git+{public(spec[4:])}" if spec.startswith("git+") else public(spec)  # never a credential
    if spec.startswith("git+"):
        url, _, commit = spec.rpartition("@")
        if not url.startswith("git+") or not COMMIT.fullmatch(commit):
            raise ArgusError(f"--install-from {shown}: a git source needs a full commit, git+URL@<40-hex commit>, "
                             "so that CI installs exactly one argus.")
        return InstallSource(f"{DISTRIBUTION} @ git+{public(url[4:])}@{commit}", "--install-from (git)")
    wheel = Path(spec).expanduser()
    if wheel.suffix == ".whl":
        if not wheel.name.startswith("argus_ray-") or not wheel.is_file():
            raise ArgusError(f"--install-from {shown}: no argus_ray-*.whl file there.")
        return InstallSource(f"{DISTRIBUTION} @ {wheel.resolve().as_uri()}",
                             "--install-from (a wheel: the runner must see it at this path)")
    raise ArgusError(f"--install-from {shown}: not a pin, a git source or a wheel. {ADVICE}")


def detect() -> InstallSource:
    """The running argus's own source."""
    distribution = installed()
    direct = distribution.read_text("direct_url.json")
    if not direct:
        return InstallSource(f"{DISTRIBUTION}=={distribution.version}",
                             f"the package index (argus {distribution.version} was installed from it)")
    info = json.loads(direct)
    url = str(info.get("url", ""))
    if "vcs_info" in info and info["vcs_info"].get("vcs") == "git":
        sub = f"#subdirectory={info['subdirectory']}" if info.get("subdirectory") else ""
        return InstallSource(f"{DISTRIBUTION} @ git+{public(url)}@{info['vcs_info']['commit_id']}{sub}",
                             "the git commit the running argus was installed from")
    if "dir_info" in info and url.startswith("file:"):
        return from_checkout(Path(url2pathname(urlsplit(url).path)))
    if "archive_info" in info and url.endswith(".whl"):
        return InstallSource(f"{DISTRIBUTION} @ {public(url)}", "the wheel the running argus was installed from")
    raise ArgusError(f"argus cannot tell where it was installed from ({url or 'no URL'}). {ADVICE}")


def installed() -> importlib.metadata.Distribution:
    """The installed argus-ray: a checkout's own argus_ray.egg-info (left by a build, on sys.path when argus
    runs from there) says nothing of how argus was installed, so one with direct_url.json comes first."""
    found = list(importlib.metadata.distributions(name=DISTRIBUTION))
    if not found:
        raise ArgusError(f"{DISTRIBUTION} is not installed, so argus cannot tell CI which argus to install. {ADVICE}")
    return next((d for d in found if d.read_text("direct_url.json")), found[0])


def from_checkout(directory: Path) -> InstallSource:
    """A local install (editable or not) from a git checkout: its origin (else its path) at HEAD."""
    from state.code import workcopy

    copy = workcopy.find_working_copy(directory)
    if copy is None:
        raise ArgusError(f"argus runs from {directory}, which is no git checkout: CI could not install it. {ADVICE}")
    top = str(copy.root)
    commit = _head(copy)
    if not COMMIT.fullmatch(commit):
        raise ArgusError(f"{top}, where argus runs from, has no commit yet: CI could not install it. {ADVICE}")
    # argus's own checkout, trusted: git's own answer, with its `insteadOf` rewrites (pip reads the URL it gives)
    remote = _git(directory, "remote", "get-url", "origin")
    url = public(remote) if remote else Path(top).as_uri()
    sub = Path(directory).resolve().relative_to(Path(top).resolve()).as_posix()
    requirement = f"{DISTRIBUTION} @ git+{url}@{commit}" + ("" if sub == "." else f"#subdirectory={sub}")
    dirty = _git(directory, "status", "--porcelain", "--untracked-files=no")
    warnings = [f"{top} has uncommitted changes: CI installs its commit {commit[:12]}, without them."] if dirty else []
    if not remote:
        warnings.append(f"{top} has no origin remote: CI installs from that path, which only a runner on this "
                        "machine can read. Add the remote and run init again, or pass --install-from.")
    return InstallSource(requirement, f"the git checkout argus runs from ({'origin' if remote else 'its path'}, "
                                      "at HEAD)", " ".join(warnings))


def public(url: str) -> str:
    """A URL pip can read, without credentials: nothing secret reaches requirements.txt."""
    scp = SCP.fullmatch(url)
    if scp and "://" not in url:
        url = f"ssh://{scp['user']}@{scp['host']}/{scp['path']}"
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    elif parts.scheme == "ssh" and ":" in parts.netloc.rpartition("@")[0]:
        user, _, host = parts.netloc.rpartition("@")
        parts = parts._replace(netloc=f"{user.split(':', 1)[0]}@{host}")
    return urlunsplit(parts)


def _head(copy: WorkingCopy) -> str:
    from state.code import workcopy

    try:
        return workcopy.head_commit(copy)
    except (workcopy.NotAWorkingCopy, OSError):
        return ""


def _git(directory: Path, *args: str) -> str | None:
    """git in argus's own checkout, with argus's git settings (state.code.safegit: no fsmonitor, no hooks)."""
    from state.code.safegit import git_env

    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=30,
                              env=git_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
