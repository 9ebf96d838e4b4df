"""Workspace name claims: <shared_root>/.argus/claims/<workspace>.json names the repository and the directory
that own a workspace's name on that root (docs/workspaces.md, "One name, one workspace").

A workspace's name is all that ties it to its runs, lock, audit log and queue ledger on a shared root: a
copied team directory, or another repository that happens to pick the same name, would otherwise adopt
them all. The first apply claims the name (created whole and only if absent, so of two first applies one
claims and the other is refused); a plan of the name from another repository or directory is an error
(reconcile.plan.claims); `argus claim --move-from` moves the claim, audited.

A repository is identified by its origin (state.code.repository: host and path, never a user or token), so
an ssh and an https clone, a CI checkout and a laptop's are one repository. Without a usable origin (none,
or a local path), by its first commit (`git:<sha>`): every clone shares it and no other repository has it.
Outside git (or without a commit), by the workspace's real path (`path:<dir>`): one machine's directory.

The file is hostile input like everything on the root (read with state.beneath: no link, no FIFO, capped,
validated), and with ARGUS_ROOT_KEY set it carries an HMAC over its fields scoped to its workspace, so a
job can neither forge one nor move one to another name's file unnoticed. Without the key a job can write
a claim: it can then keep a workspace from applying (and the plan says so), never make one act.

May import: specs, beneath, files, observed, root_key, code.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from specs.base import Frozen
from specs.errors import ArgusError
from specs.kinds.models import Name
from state import root_key
from state.beneath import Refused, made_dir, read_regular
from state.files import replace_in
from state.observed import ClaimSeen, Owner, Shown

CLAIMS_DIR = ".argus/claims"
MAX_CLAIM_BYTES = 4096
"""A claim is a few hundred bytes of JSON."""
KIND = "claim"
"""The HMAC's kind (state.root_key): a claim's signature is valid for nothing else."""


class Claim(Frozen):
    """The file's content."""

    workspace: Name
    repository: Shown
    directory: Shown
    claimed_at: Annotated[str, Field(max_length=40)]
    actor: Annotated[str, Field(max_length=256)]
    signature: Annotated[str, Field(max_length=64)] | None = None

    @property
    def owner(self) -> Owner:
        return Owner(repository=self.repository, directory=self.directory)


class ClaimRefused(ArgusError):
    """The name is claimed by another repository or directory, or its claim cannot be trusted."""


def claim_rel(workspace: str) -> str:
    return f"{CLAIMS_DIR}/{workspace}.json"


def owner_of(workspace_dir: str | Path) -> Owner:
    """This checkout of the workspace, as a claim names it (the module's docstring says why so)."""
    from state.code.gitinfo import repository_root, root_commit
    from state.code.repository import location_of

    where = location_of(workspace_dir)
    if where.repository:
        return Owner(repository=where.repository, directory=where.directory)
    if where.directory:
        first = root_commit(str(workspace_dir))
        kept = f"git:{first}" if first else f"path:{os.path.realpath(repository_root(workspace_dir) or '.')}"
        return Owner(repository=kept, directory=where.directory)
    return Owner(repository=f"path:{os.path.realpath(workspace_dir)}", directory=".")


def is_ours(claimed: Owner, ours: Owner, workspace_dir: str | Path) -> bool:
    """The claim names this checkout: as `ours`, or as it was named before its repository had an origin (its
    first commit) or before it was in git (its real path). A repository pushed to its first remote after its
    first apply stays the owner of its names."""
    if claimed == ours:
        return True
    if claimed.directory == "." and claimed.repository == f"path:{os.path.realpath(workspace_dir)}":
        return True
    if claimed.directory != ours.directory or not claimed.repository.startswith("git:"):
        return False
    from state.code.gitinfo import root_commit

    return claimed.repository == f"git:{root_commit(str(workspace_dir))}"


def read(shared_root: str, workspace: str) -> ClaimSeen:
    """The claim on the root: its owner, none, or why it is no claim argus can trust (never an exception)."""
    rel = claim_rel(workspace)
    path = f"{shared_root}/{rel}"
    try:
        data = read_regular(shared_root, rel, MAX_CLAIM_BYTES)
    except (Refused, OSError) as err:
        return ClaimSeen(path=path, problem=str(err))
    if data is None:
        return ClaimSeen(path=path)
    try:
        found = Claim.model_validate_json(data)
    except ValidationError as err:
        return ClaimSeen(path=path, problem=f"{path} is no claim argus wrote ({_first_error(err)})")
    if found.workspace != workspace:
        return ClaimSeen(path=path, problem=f"{path} claims workspace {found.workspace!r}, not {workspace!r}")
    if root_key.keyed() and not root_key.verify(KIND, workspace, _signed_fields(found), found.signature):
        return ClaimSeen(path=path, problem=f"{path} is not signed with {root_key.KEY_VARIABLE} (written without "
                                            "the key, with another one, or by someone else)")
    return ClaimSeen(path=path, owner=found.owner)


def claim(shared_root: str, workspace: str, owner: Owner, actor: str, now: str) -> bool:
    """Claim the name for `owner` unless it is claimed: True when this call wrote the claim, False when
    `owner` held it already. Created whole and only where absent (a link of a complete file), so of two
    first applies racing one claims; the other is refused (ClaimRefused) as a plan would have refused it."""
    text = _text(workspace, owner, actor, now)
    with made_dir(shared_root, CLAIMS_DIR) as folder:
        temp = f".{workspace}.{uuid.uuid4().hex[:8]}.tmp"
        replace_in(folder, temp, text)
        try:
            os.link(temp, f"{workspace}.json", src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            return True
        except FileExistsError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
    seen = read(shared_root, workspace)
    if seen.owner == owner:
        return False
    theirs = seen.problem or f"it belongs to {seen.owner}"
    raise ClaimRefused(f"workspace name {workspace!r} on {shared_root} was claimed since the plan was made, and not "
                       f"by {owner}: {theirs}. Nothing was changed; run `argus plan` to see what to do.")


def rewrite(shared_root: str, workspace: str, owner: Owner, actor: str, now: str) -> None:
    """The claim replaced by one for `owner` (argus claim, after the person confirmed): readers see the old
    file or the new one, and a link planted in its place is replaced, never written through."""
    with made_dir(shared_root, CLAIMS_DIR) as folder:
        replace_in(folder, f"{workspace}.json", _text(workspace, owner, actor, now))


def _text(workspace: str, owner: Owner, actor: str, now: str) -> str:
    unsigned = Claim(workspace=workspace, repository=owner.repository, directory=owner.directory,
                     claimed_at=now, actor=actor[:256])
    signed = unsigned.model_copy(update={"signature": root_key.sign(KIND, workspace, _signed_fields(unsigned))})
    return json.dumps(signed.model_dump(exclude_none=True), indent=2, sort_keys=True) + "\n"


def _signed_fields(found: Claim) -> dict[str, str]:
    return found.model_dump(exclude={"signature"})


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the file"
    return f"{where}: {first.get('msg', 'invalid')}"[:200]
