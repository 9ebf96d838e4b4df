"""The identity of a desired state by its content, not by the git commit that happens to hold it.

A merge commit, a squash or a rebase of an unchanged workspace produce another commit with the
same specs: the digest stays the same, so the reviewed plan still describes what is asked for.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from specs.desired import DesiredState


def desired_digest(desired: DesiredState) -> str:
    """sha256 of every resolved spec as data: not of files, positions, or where the checkout lives."""
    return hashlib.sha256(json.dumps(canonical(desired), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def canonical(desired: DesiredState) -> dict[str, Any]:
    def dump(resources: Any) -> dict[str, Any]:
        return {name: spec.model_dump(mode="json") for name, spec in sorted(resources.items())}

    return {"workspace": desired.workspace.model_dump(mode="json"), "clusters": dump(desired.clusters),
            "snapshots": dump(desired.snapshots), "jobs": dump(desired.jobs)}
