"""argus's private cache on the machine it runs on: git sources, extracted verl configs, Hydra verdicts.

Never on the shared root. Every Ray job can write there, and a relative shared root inside the
workspace is even written by the pull request: a cache there could be planted (a symlink that turns
an extraction into a write anywhere, a verdict that lets a broken config pass). Here only the user
running argus writes, and `argus plan` writes nothing on the shared filesystem at all.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from state.memo import Memo

CACHE_VARIABLE = "ARGUS_CACHE_DIR"


def cache_root() -> str:
    """ARGUS_CACHE_DIR, else ~/.cache/argus (XDG_CACHE_HOME respected); created private to this user."""
    chosen = os.environ.get(CACHE_VARIABLE)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "argus"
    root = Path(chosen) if chosen else base
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(root)


def memo_for(what: str, workspace_root: str) -> Memo:
    """The memo of one kind of work (`specs`, `verl`) for one workspace, in this user's private cache."""
    name = hashlib.sha256(workspace_root.encode()).hexdigest()[:24]
    try:
        root = cache_root()
    except OSError:  # no home, a read-only one: a memo that keeps nothing (only slower)
        return Memo(None, f"{what}-{name}")
    return Memo(root, f"{what}-{name}")
