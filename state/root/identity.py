"""<shared_root>/.argus/root.json: the identity argus writes when it first lays a shared root out.

An NFS that is not mounted leaves an empty directory at the root's path, and a typo names another
directory: both look like a fresh root, where every job would be planned as never run. The identity
tells them apart from the root argus laid out. A root without one is fresh only if it holds nothing of
argus's (a root argus laid out before identities existed holds its audit logs or run index: it gets
one written) and Ray lists no run of the workspace on the cluster (the planner decides that:
reconcile.plan.root). Any job can write the root, so the file is hostile input: capped, never through
a link, validated; with ARGUS_ROOT_KEY set it must carry argus's signature.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

from pydantic import ValidationError

from state import root_key
from state.beneath import NotBeneath, made_dir, opened_dir, read_regular
from state.files import replace_in
from state.observed import RootIdentity, RootState

IDENTITY = ".argus/root.json"
MAX_BYTES = 4096
KIND = "root-identity"
EARLIER_MARKS = (".argus/runs", "jobs")
"""Where argus keeps its runs' records: a root holding anything there was laid out by argus. Not the audit log,
the queue or the lock: an apply targeted at another cluster, a serve or another workspace may have written those
on an empty mount point, and they must not make it look like argus's record."""


def observe_root(shared_root: str) -> RootState:
    """The identity on the root (or why it cannot be used), and whether argus laid the root out before."""
    try:
        raw = read_regular(shared_root, IDENTITY, MAX_BYTES)
    except (NotBeneath, OSError) as err:
        return RootState(problem=f"{shared_root}/{IDENTITY} cannot be read safely ({err})")
    if raw is None:
        return RootState(earlier=_laid_out_before(shared_root))
    identity, problem = parse(raw)
    return RootState(identity=identity, problem=problem)


def parse(raw: bytes) -> tuple[RootIdentity | None, str | None]:
    """The identity, or why it is not argus's: malformed, or unsigned (or wrongly signed) while keyed."""
    try:
        data = json.loads(raw)
        identity = RootIdentity.model_validate({k: v for k, v in data.items() if k != "signature"})
    except (ValueError, ValidationError, AttributeError, RecursionError):
        return None, f"{IDENTITY} is not an identity argus wrote (malformed)"
    if root_key.keyed() and not root_key.verify(KIND, identity.id, identity.signed_fields(), data.get("signature")):
        return None, f"{IDENTITY} does not carry argus's signature (ARGUS_ROOT_KEY): a job may have written it"
    return identity, None


def write_identity(shared_root: str, actor: str) -> RootIdentity:
    """Lay the identity down once: never over one that is there (O_EXCL), so two applies agree on it."""
    identity = RootIdentity(id=uuid.uuid4().hex, created=time.time(), host=socket.gethostname()[:255],
                            actor=actor[:255])
    body = identity.model_dump(mode="json")
    signature = root_key.sign(KIND, identity.id, identity.signed_fields())
    if signature is not None:
        body["signature"] = signature
    with made_dir(shared_root, ".argus") as folder:
        if _present(folder):
            return observe_root(shared_root).identity or identity
        replace_in(folder, "root.json", json.dumps(body, indent=2, sort_keys=True) + "\n")
    return identity


def _present(folder: int) -> bool:
    """Anything named root.json (a link or a FIFO a job planted too): never written over; the next plan names it."""
    try:
        os.stat("root.json", dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _laid_out_before(shared_root: str) -> bool:
    for rel in EARLIER_MARKS:
        try:
            with opened_dir(shared_root, rel) as folder, os.scandir(folder) as entries:
                if any(True for _ in entries):
                    return True
        except (NotBeneath, OSError):
            continue
    return False
