"""Which verl a snapshot holds, and which range of argus's verl knowledge applies to it.

argus's knowledge of verl (entry modules, resource pools, worker checks, checkpoint layouts) is kept per
range of minor versions and checked against the released wheels of each (docs/verl.md). A snapshot
outside every range is still composed and checked, with a warning: the rules of the nearest range may
not hold for it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

VERSION_FILE = "verl/version/version"
"""verl's own: verl/__init__.py reads __version__ from it."""
SUPPORTED = ("0.8", "0.9")
"""Minor releases argus's knowledge covers: the last two on the package index, read from the 0.8.0 and 0.9.1
wheels (tests/state/verl/test_verl_scripts.py VERSIONS composes them)."""
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)(?:\.([0-9]+))?[0-9A-Za-z.+-]*")


def read_version(code: Path) -> str | None:
    """The snapshot's verl version, or None when it has no version file (not verl, or very old)."""
    try:
        fd = os.open(code / VERSION_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 65).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if _VERSION.fullmatch(text) else None


def minor(version: str | None) -> tuple[int, int] | None:
    match = _VERSION.fullmatch(version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def knowledge_for(version: str | None) -> str | None:
    """"0.9.x" when argus's knowledge covers the version; None otherwise."""
    found = minor(version)
    label = f"{found[0]}.{found[1]}" if found else None
    return f"{label}.x" if label in SUPPORTED else None


def at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    """Whether the snapshot's verl is that minor release or newer; an unknown version counts as the newest
    argus knows, since a snapshot without a version file is most likely verl's main branch."""
    found = minor(version)
    return found is None or found >= wanted


def older_than_known(version: str | None) -> bool:
    """Older than every range argus knows: its rules describe a later verl, so they are not applied."""
    found, oldest = minor(version), minor(SUPPORTED[0] + ".0")
    return found is not None and oldest is not None and found < oldest


def checked_words(version: str | None) -> str:
    """What was applied to the snapshot, as check_job applies it: the plan says the same."""
    if knowledge := knowledge_for(version):
        return f"argus's verl {knowledge} rules"
    if older_than_known(version):
        return "outside argus's verl knowledge: composed only"
    return f"outside argus's verl knowledge: composed and checked with its {SUPPORTED[-1]}.x rules, as warnings"


def outside_warning(version: str | None) -> str:
    known = " and ".join(f"{v}.x" for v in SUPPORTED)
    shown = f"verl {version}" if version else f"a verl without {VERSION_FILE}"
    if older_than_known(version):
        checked = "only its Hydra config was composed; verl's start-up checks, pools and checkpoint layouts of " \
                  f"{SUPPORTED[0]}.x and later were not applied"
    else:
        checked = f"it was checked with the rules of {SUPPORTED[-1]}.x, which may not all hold for it (as warnings)"
    return f"the snapshot holds {shown}, outside what argus's verl knowledge covers ({known}): {checked}"
