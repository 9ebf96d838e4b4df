"""Saved plans: a record of what was reviewed, never a program.

`argus plan -o plan.json` writes a SavedPlan. `argus apply plan.json` plans again from the desired
state at hand and the world now, and executes the *fresh* steps only when their decisions are
the reviewed ones (reconcile.plan.reviewed). Nothing in the file is ever executed: a hand-edited file
is refused as such. A forger who recomputes a plain seal can at most make apply do what `argus
apply` of the desired state at hand would do with the options the file records (--prune,
--replace, ...); with ARGUS_PLAN_KEY set where plans are made and applied, not even that.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from reconcile.model import Plan, SubmitStep
from specs.base import Frozen
from specs.errors import ArgusError
from specs.workloads.submission import spec_hash, submission_id

FORMAT_VERSION = 3
READABLE_VERSIONS = (2, 3)
"""Version 3 added where the workspace sits in its repository (workspace_dir, repository); a version 2
file is read as before: its workspace is --dir, or the current directory."""
LOCATION_FIELDS = {"workspace_dir", "repository"}
PLAN_KEY = "ARGUS_PLAN_KEY"
"""Set it where plans are made and applied (CI secrets), and a plan file can't be forged without it."""


class SavedPlan(Frozen):
    format_version: int
    argus_version: str
    workspace: str
    plan_id: str
    created_at: str
    desired_digest: str
    """Content digest of the resolved desired state (specs.load.content): what the reviewers saw."""
    commit: str
    """Git commit of the desired state when planned: for the audit trail only, never compared."""
    plan: Plan
    workspace_dir: str = ""
    """The workspace's directory relative to its git repository's root ("." for the root), "" when it was
    not in one: `argus apply PLAN.json` finds the workspace there in the repository it runs in."""
    repository: str = ""
    """The repository's identity (its origin's host/path, never credentials), "" when unknown: apply
    refuses a plan of another repository's workspace."""
    seal: Literal["sha256", "hmac-sha256"] = "sha256"
    """hmac-sha256 when ARGUS_PLAN_KEY was set: only who holds the key can write a plan apply accepts."""
    digest: str = ""
    """The seal over everything above: a file edited after argus wrote it is refused."""


def write(path: Path, saved: SavedPlan) -> None:
    if saved.plan.errors:
        raise ArgusError("A plan with errors cannot be saved for apply; fix the errors above first.")
    seal = "hmac-sha256" if os.environ.get(PLAN_KEY) else "sha256"
    unsealed = saved.model_copy(update={"seal": seal})
    sealed = unsealed.model_copy(update={"digest": content_digest(unsealed)})
    body = sealed.model_dump(mode="json", exclude=_later_fields(saved.format_version))
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")


def check_destination(path: Path) -> None:
    """Before planning: a plan that cannot be written is refused before anything is observed."""
    if path.suffix in (".yaml", ".yml"):
        raise ArgusError(f"{path}: a saved plan is JSON, and a .yaml file in a workspace would be read as a spec; "
                         "name it plan.json")
    if not path.parent.is_dir():
        raise ArgusError(f"{path}: the directory {path.parent} does not exist; create it or pick another path")
    if path.is_dir():
        raise ArgusError(f"{path} is a directory; give a file name such as {path / 'plan.json'}")
    if not _can_write_in(path.parent) or (path.exists() and not os.access(path, os.W_OK)):
        raise ArgusError(f"{path}: argus cannot write there (permissions, or a read-only filesystem); "
                         "pick a path you can write")


def _can_write_in(directory: Path) -> bool:
    """By trying: os.access says yes to root on a read-only filesystem, and NFS may refuse what mode bits allow."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".argus-plan-check."):
            return True
    except OSError:
        return False


def read(path: Path) -> SavedPlan:
    data = _load(path)
    found = data.get("format_version")
    if found not in READABLE_VERSIONS:
        raise ArgusError(f"{path} is a saved plan of format version {found} (argus {data.get('argus_version', '?')}); "
                         f"this argus reads versions {', '.join(map(str, READABLE_VERSIONS))}. Run `argus plan -o` "
                         "again with this argus.")
    data = {key: value for key, value in data.items() if key not in _later_fields(found)}  # unsealed: dropped
    try:
        saved = SavedPlan.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise ArgusError(f"{path} is not a valid saved plan: {err.error_count()} problem(s), first: {first['msg']} "
                         f"at {'.'.join(map(str, first['loc']))}. Run `argus plan -o` again.") from err
    edits = hand_edits(saved, data)
    if edits:
        raise ArgusError(f"{path} was edited after argus wrote it ({'; '.join(edits)}). A saved plan is a record "
                         "of what was reviewed: run `argus plan -o` again and review that.")
    return saved


def content_digest(saved: SavedPlan) -> str:
    """sha256 of the content; with ARGUS_PLAN_KEY set in the environment, an HMAC keyed by it."""
    unsealed = {"digest"} | _later_fields(saved.format_version)
    return _body_digest(saved.model_dump(mode="json", exclude=unsealed), saved.seal)


def written_digest(written: dict[str, Any]) -> str:
    """The seal of a saved plan's content as its file holds it (its `digest` left out): what read checks."""
    content = {key: value for key, value in written.items() if key != "digest"}
    return _body_digest(content, str(content.get("seal", "sha256")))


def _body_digest(content: dict[str, Any], seal: str) -> str:
    body = json.dumps(content, sort_keys=True, separators=(",", ":"))
    if seal == "hmac-sha256":
        return hmac.new(os.environ.get(PLAN_KEY, "").encode(), body.encode(), hashlib.sha256).hexdigest()
    return hashlib.sha256(body.encode()).hexdigest()


def _later_fields(format_version: int) -> set[str]:
    """Fields a file of this version does not have: it is written and sealed as that version wrote it."""
    return LOCATION_FIELDS if format_version < 3 else set()


def hand_edits(saved: SavedPlan, written: dict[str, Any]) -> list[str]:
    """What shows the file is not as argus wrote it: its seal, and each submit step's identity.

    The seal is checked over the file's content as `written`, not over the plan read from it: a plan an
    earlier argus wrote lacks the fields added since (a change's `deadline_at`), which the model fills
    with defaults; re-dumped, it would look edited. Any edit of the file still breaks the seal."""
    found = _seal_problems(saved, written)
    for change in saved.plan.changes:
        found += [f"{change.address}: the submission does not match its spec hash"
                  for step in change.steps if step.kind == "submit" and not _identity_holds(step)]
    return found


def _seal_problems(saved: SavedPlan, written: dict[str, Any]) -> list[str]:
    keyed = bool(os.environ.get(PLAN_KEY))
    if keyed and saved.seal != "hmac-sha256":
        return [f"it is not signed, and {PLAN_KEY} is set here: plans must be made where the key is"]
    if saved.seal == "hmac-sha256" and not keyed:
        return [f"it is signed with {PLAN_KEY}, which is not set here: set it to check the signature"]
    matches = hmac.compare_digest(saved.digest, written_digest(written))
    return [] if matches else ["its content does not match its seal"]


def _identity_holds(step: SubmitStep) -> bool:
    sub = step.submission
    try:
        digest = spec_hash(sub)
        return (step.spec_hash, step.submission_id) == (digest, submission_id(sub.workspace, sub.job, digest,
                                                                              step.attempt))
    except (AssertionError, ValueError, OverflowError):  # an id argus could never have made
        return False


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ArgusError(f"Cannot read the saved plan {path}: {err}") from err
    if not isinstance(data, dict):
        raise ArgusError(f"{path} is not a saved plan (not a JSON object). Run `argus plan -o` again.")
    return data
