"""Sealing one version of a Dataset or Model (apply's SealInputStep): what its materialisation left in the staging
dir (or a `path:` source, linked in) walked without following links, hashed, checked against the pinned source,
described by a signed manifest, made read-only and renamed to its version's place in one step.

Any refusal raises NotSealable saying what and what to do, and leaves no version at `rel`: the staging dir is
removed (a fetch is then retried from scratch). What is checked against is the caller's, read at apply
(Expected): a url/ftp file's sha256 from the spec, a hub listing re-read at the pinned commit, a prepare step's
outputs, a path's fingerprint.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import PurePosixPath
from typing import Protocol

from specs.kinds.inputs import Dataset, Model, version_key, version_rel
from state import beneath
from state.inputs.adopt import adopt
from state.inputs.manifest import MANIFEST, Untrusted, read_version, write_manifest
from state.inputs.shapes import HubFile
from state.inputs.walk import NotSealable, Walked, digest_of, make_read_only, remove_staging, walk
from state.observed import InputFile, InputManifest
from state.root_key import keyed

FETCH_MANIFEST = ".argus-fetch.json"
"""The fetcher's own record (state/inputs/fetch_script.py): not content."""


class SealInputStep(Protocol):
    """reconcile.model.SealInputStep, as far as sealing reads it (state never imports reconcile)."""

    key: str
    rel: str
    staged: str
    run: str | None
    adopt: str | None


@dataclass(frozen=True)
class Expected:
    """What the sealed files must be, by source (one of these is given)."""

    files: Mapping[str, str] | None = None
    """url/ftp: {file name: sha256} from the spec."""
    hub: tuple[HubFile, ...] | None = None
    """hub: the listing at the pinned commit, re-read at apply."""
    outputs: tuple[str, ...] | None = None
    """prepare: the spec's outputs, each a file or directory that must exist."""
    pin: str | None = None
    """What keyed the version beyond the spec (hub commit, path fingerprint, prepare code digest)."""


@dataclass(frozen=True)
class Sealed:
    outcome: str
    """"created", or "exists" when `rel` already held a trusted version (the staging dir then dropped)."""
    manifest: InputManifest


def seal(shared_root: str, spec: Dataset | Model, step: SealInputStep, workspace: str, commit: str, user: str,
         expected: Expected) -> Sealed:
    """Seal step.staged as step.rel; NotSealable (and no version at rel) when anything is not as expected."""
    _check_step(spec, step, expected)
    existing = _existing(shared_root, step.rel)
    if existing is not None:
        remove_staging(shared_root, step.staged)
        return Sealed("exists", existing)
    try:
        adopted = adopt(step.adopt, shared_root, step.staged, expected.pin) if step.adopt else None
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return _seal(shared_root, spec, step, workspace, commit, user, expected, now, adopted)
    except beneath.NotBeneath as err:  # a link or a non-directory on the way (planted by a job)
        remove_staging(shared_root, step.staged)
        raise NotSealable(f"{err}: argus follows no link on the shared root; not sealed. Remove it and run "
                          "again") from None
    except OSError as err:  # a file vanished or a disk refused: said, never a traceback
        remove_staging(shared_root, step.staged)
        raise NotSealable(f"{spec.kind.lower()}.{spec.name}: sealing {step.staged} failed ({err}): not sealed; "
                          "run again") from None
    except BaseException:
        remove_staging(shared_root, step.staged)
        raise


def remove_version(shared_root: str, rel: str) -> None:
    """Delete a sealed version (prune): moved aside first, so no reader ever sees half of it."""
    beneath.remove_beneath(shared_root, rel, f".{PurePosixPath(rel).name}.delete-{os.getpid()}")


def _seal(shared_root: str, spec: Dataset | Model, step: SealInputStep, workspace: str, commit: str, user: str,
          expected: Expected, now: str, adopted: Mapping[str, tuple[int, int]] | None = None) -> Sealed:
    for name in (FETCH_MANIFEST, MANIFEST):  # a manifest a job planted is never argus's
        beneath.unlink_beneath(shared_root, f"{step.staged}/{name}")
    blobs = frozenset(f.path for f in expected.hub or () if f.sha256 is None)
    known: dict[str, int | None] | None = None  # names (and sizes) checked before any file is hashed
    if expected.files is not None:
        known = dict.fromkeys(expected.files)
    if expected.hub is not None:
        known = {f.path: f.size for f in expected.hub}
    files, identity = walk(shared_root, step.staged, spec.kind, blobs, known)
    if adopted is not None and {f.path: f.identity for f in files} != dict(adopted):
        raise NotSealable(f"{spec.kind.lower()}.{spec.name}: {step.staged} changed while argus adopted {step.adopt} "
                          "into it (a file added, removed or swapped by a job?): not sealed; run again")
    _check(spec, files, expected)
    manifest = _manifest(spec, step, files, workspace, commit, user, expected, now)
    with beneath.opened_dir(shared_root, step.staged) as fd:
        if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != identity:
            raise NotSealable(f"{step.staged} was replaced while argus sealed it: not sealed; run again")
        write_manifest(fd, step.rel, manifest)
    make_read_only(shared_root, step.staged)
    return _rename(shared_root, step, identity, manifest)


def _rename(shared_root: str, step: SealInputStep, identity: tuple[int, int], manifest: InputManifest) -> Sealed:
    parent = str(PurePosixPath(step.rel).parent)
    staged, key12 = PurePosixPath(step.staged).name, PurePosixPath(step.rel).name
    with beneath.opened_dir(shared_root, parent) as fd:
        try:
            os.rename(staged, key12, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
            existing = _existing(shared_root, step.rel)  # another workspace sealed it meanwhile
            if existing is None:
                raise NotSealable(f"{shared_root}/{step.rel} already holds something that is no version argus "
                                  f"sealed: remove it and apply again") from None
            remove_staging(shared_root, step.staged)
            return Sealed("exists", existing)
        moved = os.stat(key12, dir_fd=fd, follow_symlinks=False)
        swapped = (moved.st_dev, moved.st_ino) != identity
    if swapped:  # something swapped in for the staging dir between the check and the rename: take it back
        remove_staging(shared_root, step.rel)
        raise NotSealable(f"{step.staged} was replaced (by a symlink?) while argus sealed it: not sealed; "
                          "remove what is there and run again")
    return Sealed("created", manifest.model_copy(update={"signed": keyed()}))


def _existing(shared_root: str, rel: str) -> InputManifest | None:
    try:
        return read_version(shared_root, rel)
    except Untrusted as err:
        raise NotSealable(f"{err}") from None


def _check_step(spec: Dataset | Model, step: SealInputStep, expected: Expected) -> None:
    key = version_key(spec, expected.pin)
    rel = version_rel(spec, key)
    if (key, rel) != (step.key, step.rel) or not step.staged.startswith(f"{rel.rsplit('/', 1)[0]}/.incoming-"
                                                                        f"{key[:12]}-"):
        raise NotSealable(f"{spec.kind.lower()}.{spec.name}: the spec or its pin changed since the plan "
                          f"({step.rel} planned, {rel} now): run `argus plan` again")
    if (spec.source == "path") != bool(step.adopt) or (step.adopt and step.adopt != spec.path):
        raise NotSealable(f"{spec.kind.lower()}.{spec.name}: the step adopts {step.adopt!r}, the spec's path is "
                          f"{spec.path!r}: run `argus plan` again")


def _check(spec: Dataset | Model, files: list[Walked], expected: Expected) -> None:
    what = f"{spec.kind.lower()}.{spec.name}"
    if not files:
        raise NotSealable(f"{what}: its materialisation left no file: nothing to seal; see the run's log")
    found = {f.path: f for f in files}
    if expected.files is not None:
        _same_names(what, found, set(expected.files))
        for name, sha in expected.files.items():
            if found[name].sha256 != sha:
                raise NotSealable(f"{what}: {name} has sha256 {found[name].sha256}, the spec says {sha}: not "
                                  "sealed; fix the spec's sha256 or the file at its source")
    if expected.hub is not None:
        _same_names(what, found, {f.path for f in expected.hub})
        for listed in expected.hub:
            _check_hub_file(what, found[listed.path], listed)
    for output in expected.outputs or ():
        if output not in found and not any(path.startswith(f"{output}/") for path in found):
            raise NotSealable(f"{what}: its prepare step did not write {output} (one of its `outputs`): not "
                              "sealed; see the run's log, fix the program or the spec's outputs")


def _same_names(what: str, found: Mapping[str, Walked], names: set[str]) -> None:
    missing, extra = sorted(names - set(found)), sorted(set(found) - names)
    if missing or extra:
        said = ", ".join([*(f"{m} missing" for m in missing[:5]), *(f"{e} not expected" for e in extra[:5])])
        raise NotSealable(f"{what}: the files are not the ones pinned ({said}): not sealed; run again")


def _check_hub_file(what: str, walked: Walked, listed: HubFile) -> None:
    if listed.size is not None and walked.size != listed.size:
        raise NotSealable(f"{what}: {listed.path} is {walked.size} bytes, the hub lists {listed.size}: not sealed")
    if listed.sha256 is not None:
        ok = walked.sha256 == listed.sha256
    elif listed.oid is not None:
        ok = walked.blob_sha1 == listed.oid
    else:
        raise NotSealable(f"{what}: the hub lists {listed.path} with no digest (no lfs sha256, no git oid): argus "
                          "cannot check it; use a mirror that lists digests")
    if not ok:
        raise NotSealable(f"{what}: {listed.path} does not match the hub's digest at the pinned commit: not sealed; "
                          "run again (the fetch was damaged or the mirror lies)")


def _manifest(spec: Dataset | Model, step: SealInputStep, files: list[Walked], workspace: str, commit: str,
              user: str, expected: Expected, now: str) -> InputManifest:
    source = getattr(spec, spec.source)
    origin = {spec.source: source if isinstance(source, str) else source.model_dump(mode="json")}
    if expected.pin is not None:
        origin["pin"] = expected.pin
    return InputManifest(kind=spec.kind, name=spec.name, key=step.key, source=origin, workspace=workspace,
                         commit=commit, created_by=user, created_at=now, run=step.run,
                         files=tuple(InputFile(path=f.path, size=f.size, sha256=f.sha256) for f in files),
                         bytes=sum(f.size for f in files),
                         digest=digest_of([(f.path, f.size, f.sha256) for f in files]),
                         facts={f.path: f.facts for f in files if f.facts})
