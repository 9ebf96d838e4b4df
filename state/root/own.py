"""The roots argus may make: a relative shared root is the workspace's own folder (the local dev cluster)."""

from __future__ import annotations

import os
from pathlib import Path

from specs.desired import DesiredState


def make_workspace_roots(desired: DesiredState) -> None:
    """Before an apply or a serve turn takes its lock there. An absolute root (a mount) is never made:
    an NFS not mounted or a typo'd path stays absent, and the plan says so."""
    for name, root in sorted(desired.shared_roots.items()):
        if not Path(desired.clusters[name].shared_root).is_absolute():
            os.makedirs(root, exist_ok=True)


def lockable_roots(desired: DesiredState) -> list[str]:
    """The roots an apply locks: those that are there. A root that is not is in the plan's errors, and
    nothing is carried out on its cluster; its absence must not stop `--target` elsewhere, nor be made."""
    make_workspace_roots(desired)
    return sorted({root for root in desired.shared_roots.values() if Path(root).is_dir()})
