"""`.argus-input.json`: the manifest argus writes into a data set or model version when it seals it, and the
trust argus puts in it when read back.

The shared root is writable by every job, so a manifest proves nothing by being there. A version is used only
if its manifest is a regular file (no link on the way, bounded in size), parses, and names the kind, name and
key of the directory it is in; and, when ARGUS_ROOT_KEY is set, only if its HMAC (state.root_key, kind
"input-manifest", scope the version's rel) verifies: jobs never hold the key, so none can forge a version.
Without a key it is trusted as code snapshots' manifests are (docs/shared-root.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from pydantic import ValidationError

from specs.errors import ArgusError
from state import beneath
from state.inputs.walk import NotSealable
from state.observed import InputManifest
from state.root_key import keyed, sign, verify

MANIFEST = ".argus-input.json"
SIGNED_AS = "input-manifest"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""A manifest of 100k files with their facts; anything bigger is not one argus wrote."""
REL = re.compile(r"(datasets|models)/([a-z0-9][a-z0-9-]{0,62})/([0-9a-f]{12})")
KINDS = {"datasets": "Dataset", "models": "Model"}
CHUNK = 1 << 20


class Untrusted(ArgusError):
    """A version's manifest argus cannot trust: the message is what the observer shows (InputState.problem)."""


def read_version(shared_root: str | Path, rel: str) -> InputManifest | None:
    """The trusted manifest of the version at rel; None when there is none. Untrusted when one is there but
    is not argus's: a link or a FIFO, not JSON, naming another version, or not signed under ARGUS_ROOT_KEY."""
    match = REL.fullmatch(rel)
    if match is None:
        raise Untrusted(f"{rel!r} is not where argus keeps a version (datasets|models/NAME/KEY12)")
    try:
        raw = beneath.read_regular(shared_root, f"{rel}/{MANIFEST}", MAX_MANIFEST_BYTES)
    except OSError as err:
        raise Untrusted(f"{rel}/{MANIFEST} cannot be read ({err}): not argus's; remove {rel}") from None
    if raw is None:
        return None
    manifest, signature = _parsed(raw, rel)
    top, name, key12 = match.groups()
    if (manifest.kind, manifest.name, manifest.key[:12]) != (KINDS[top], name, key12):
        raise Untrusted(f"{rel}/{MANIFEST} names {manifest.kind} {manifest.name!r} version {manifest.key[:12]}, "
                        f"not the one it is in: not argus's; remove {rel}")
    signed = verify(SIGNED_AS, rel, _fields(manifest), signature)
    if keyed() and not signed:
        raise Untrusted(f"{rel}: its manifest is not signed by argus (ARGUS_ROOT_KEY is set): not used; remove "
                        f"{rel} and apply again to seal it anew")
    return manifest.model_copy(update={"signed": signed})


def write_manifest(directory: int, rel: str, manifest: InputManifest) -> None:
    """Write the manifest into `directory` (a descriptor of argus's staging dir, opened without following a
    link, about to become `rel`), signed for `rel`; a file already there is refused (O_EXCL)."""
    fields = _fields(manifest)
    signature = sign(SIGNED_AS, rel, fields)
    body = fields if signature is None else {**fields, "sig": signature}
    text = json.dumps(body, indent=1, sort_keys=True, allow_nan=False) + "\n"
    if len(text.encode()) > MAX_MANIFEST_BYTES:  # one argus could not read back is no version
        raise NotSealable(f"{rel}: its manifest would be {len(text.encode())} bytes, more than the "
                          f"{MAX_MANIFEST_BYTES} argus reads: too many files; not sealed")
    fd = os.open(MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444,
                 dir_fd=directory)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def stored_versions(shared_root: str | Path) -> dict[str, InputManifest]:
    """Every trusted version on the root, by rel: datasets/*/KEY12 and models/*/KEY12 real directories
    named as argus names them (a symlink or odd name planted there never becomes a path argus deletes)."""
    found: dict[str, InputManifest] = {}
    for top in KINDS:
        for rel in _candidates(shared_root, top):
            try:
                manifest = read_version(shared_root, rel)
            except Untrusted:
                continue
            if manifest is not None:
                found[rel] = manifest
    return found


def check_sizes(shared_root: str | Path, rel: str, manifest: InputManifest) -> str | None:
    """Why the version's files are not as sealed (missing, not a regular file, size changed), or None:
    a stat of each, no read (observation's cheap check)."""
    for entry in manifest.files:
        info = beneath.stat_beneath(shared_root, f"{rel}/{entry.path}")
        if info is None or not _regular(info):
            return f"{rel}/{entry.path} is missing or no longer a regular file (damaged): remove {rel} and apply again"
        if info.st_size != entry.size:
            return (f"{rel}/{entry.path} is {info.st_size} bytes, sealed as {entry.size} (damaged): remove {rel} "
                    "and apply again")
    return None


def verify_digests(shared_root: str | Path, rel: str, manifest: InputManifest) -> str | None:
    """check_sizes, then every file re-hashed against its sealed sha256 (apply's deep verification)."""
    problem = check_sizes(shared_root, rel, manifest)
    if problem:
        return problem
    for entry in manifest.files:
        if _sha256(shared_root, f"{rel}/{entry.path}") != entry.sha256:
            return f"{rel}/{entry.path} no longer matches its sealed sha256 (damaged): remove {rel} and apply again"
    return None


def _parsed(raw: bytes, rel: str) -> tuple[InputManifest, object]:
    try:
        body = json.loads(raw)
        signature = body.pop("sig", None) if isinstance(body, dict) else None
        return InputManifest.model_validate(body), signature
    except (ValueError, RecursionError, ValidationError, TypeError):
        raise Untrusted(f"{rel}/{MANIFEST} is not a manifest argus wrote: not used; remove {rel}") from None


def _fields(manifest: InputManifest) -> dict:
    return manifest.model_dump(mode="json")  # `signed` is excluded: never the file's to say


def _candidates(shared_root: str | Path, top: str) -> list[str]:
    """datasets/NAME/KEY12 directories, listed without following a link (beneath.opened_dir refuses one)."""
    rels: list[str] = []
    for name in _names(shared_root, top, r"[a-z0-9][a-z0-9-]{0,62}"):
        rels += [f"{top}/{name}/{key}" for key in _names(shared_root, f"{top}/{name}", r"[0-9a-f]{12}")]
    return rels


def _names(shared_root: str | Path, rel: str, pattern: str) -> list[str]:
    try:
        with beneath.opened_dir(shared_root, rel) as fd:
            return beneath.names_in(fd, lambda n: bool(re.fullmatch(pattern, n)), 100_000, f"{shared_root}/{rel}")
    except OSError:  # absent, a link, or more names than argus lists
        return []


def _regular(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode)


def _sha256(shared_root: str | Path, rel: str) -> str | None:
    try:
        with beneath.opened_regular(shared_root, rel) as fd:
            if fd is None:
                return None
            h = hashlib.sha256()
            while chunk := os.read(fd, CHUNK):
                h.update(chunk)
            return h.hexdigest()
    except OSError:
        return None
