"""Saved plans: what was reviewed is exactly what is applied, or nothing is.

`argus plan -o plan.json` writes a SavedPlan; `argus apply plan.json` re-observes and refuses it
when anything it was made from has moved since (Terraform's stale-plan rule).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import ValidationError

from reconcile.model import Plan
from specs.base import Frozen
from specs.errors import ArgusError

FORMAT_VERSION = 1


class SavedPlan(Frozen):
    format_version: int
    argus_version: str
    workspace: str
    plan_id: str
    created_at: str
    commit: str
    """Git commit of the desired state the plan was made from."""
    dirty: bool
    fingerprint: str
    """Digest of the observed state the plan depends on (ObservedState.fingerprint)."""
    last_applied_plan: str | None
    """The newest finished apply when the plan was made; another apply since makes it stale."""
    plan: Plan


def argus_version() -> str:
    try:
        return version("argus")
    except PackageNotFoundError:
        return "unknown"


def write(path: Path, saved: SavedPlan) -> None:
    if saved.plan.errors:
        raise ArgusError("A plan with errors cannot be saved for apply; fix the errors above first.")
    path.write_text(json.dumps(saved.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")


def read(path: Path) -> SavedPlan:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ArgusError(f"Cannot read the saved plan {path}: {err}") from err
    found = data.get("format_version") if isinstance(data, dict) else None
    if found != FORMAT_VERSION:
        raise ArgusError(f"{path} is a saved plan of format version {found} (argus "
                         f"{data.get('argus_version', '?') if isinstance(data, dict) else '?'}); this argus reads "
                         f"version {FORMAT_VERSION}. Run `argus plan -o` again with this argus.")
    try:
        return SavedPlan.model_validate(data)
    except ValidationError as err:
        raise ArgusError(f"{path} is not a valid saved plan: {err.error_count()} problem(s), first: "
                         f"{err.errors()[0]['msg']} at {'.'.join(map(str, err.errors()[0]['loc']))}") from err


def staleness(saved: SavedPlan, workspace: str, commit: str, dirty: bool, fingerprint: str,
              last_applied: str | None) -> list[str]:
    """What moved since the plan was made; empty when it may be applied."""
    moved = []
    if saved.workspace != workspace:
        moved.append(f"it belongs to workspace {saved.workspace!r}, not {workspace!r}")
    if (saved.commit, saved.dirty) != (commit, dirty):
        moved.append(f"the desired state is now at {commit[:12]}{' (dirty)' if dirty else ''}, the plan was made "
                     f"at {saved.commit[:12]}{' (dirty)' if saved.dirty else ''}")
    if saved.last_applied_plan != last_applied:
        moved.append(f"plan {last_applied} was applied since")
    if saved.fingerprint != fingerprint:
        moved.append("the clusters or the shared filesystem changed (a job started, finished, was submitted or "
                     "stopped, a head restarted, or a snapshot changed)")
    return moved
