"""Each Dataset and Model of the desired state as the world holds it: its pinned version and its sealed manifest.

Pinning is the only network this does: a hub source's branch or tag resolved to a commit through the hub mirror
(and its file listing, only while the version is not sealed yet: the fetch job needs it). A 40-hex revision whose
version is sealed asks nothing. A `path:` source is pinned by its files' fingerprint (state.inputs.fingerprint), a
`prepare:` one by its CodeSnapshot's content digest. What is on the shared root is hostile: a version is used only
when its manifest reads as argus wrote it (signed, when ARGUS_ROOT_KEY is set) and its files still have their sizes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from specs.desired import DesiredState
from specs.kinds.inputs import COMMIT_PATTERN, TOP, Dataset, Model, staged_rel, version_key, version_rel
from specs.load import input_refs
from state.inputs import manifest as manifests
from state.inputs.fetch_job import FetchTooBig
from state.inputs.fingerprint import fingerprint
from state.inputs.hub import HubError, list_files, repo_of, resolve_revision
from state.inputs.materialise import fetch_command
from state.inputs.walk import NotSealable
from state.observed import InputManifest, InputState, SnapshotState


def observe_inputs(desired: DesiredState, snapshots: Mapping[str, SnapshotState], absent: tuple[str, ...],
                   verify: bool = False) -> dict[str, InputState]:
    """Every input by address; one whose cluster's shared root is not here is pinned where it can be, never read."""
    return {address: observe_input(desired, spec, snapshots, absent, verify)
            for address, spec in sorted(desired.inputs.items())}


def stored_inputs(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, dict[str, InputManifest]]:
    """Per cluster whose shared root is here: every sealed version on it (what a prune decides by), each root read
    once however many clusters share it."""
    roots = {root for name, root in desired.shared_roots.items() if name not in absent}
    read = {root: manifests.stored_versions(root) for root in sorted(roots)}
    return {name: read[root] for name, root in sorted(desired.shared_roots.items()) if root in read}


def observe_input(desired: DesiredState, spec: Dataset | Model, snapshots: Mapping[str, SnapshotState],
                  absent: tuple[str, ...], verify: bool) -> InputState:
    root = desired.shared_roots.get(spec.cluster)
    if root is None:
        return InputState(cluster=spec.cluster, problem=f"no Cluster named {spec.cluster!r}")
    pin, problem = _pin(desired, spec, snapshots, spec.cluster in absent)
    if problem is not None:
        return InputState(cluster=spec.cluster, problem=problem)
    key = version_key(spec, pin)
    rel = version_rel(spec, key)
    state = InputState(cluster=spec.cluster, key=key, pin=pin, rel=rel)
    if spec.cluster in absent:
        return state
    try:
        found = manifests.read_version(root, rel)
    except manifests.Untrusted as err:
        return state.model_copy(update={"problem": f"{rel}: {err}"})
    if found is not None:
        return state.model_copy(update=_sealed(root, rel, spec, key, found, verify))
    staged = staged_rel(spec, key, desired.workspace.name)
    if _real_dir(Path(root), staged):
        state = state.model_copy(update={"staged": staged})
    return _with_fetch(desired, spec, state, root)


def _sealed(root: str, rel: str, spec: Dataset | Model, key: str, found: InputManifest, verify: bool) -> dict:
    if (found.kind, found.name, found.key) != (spec.kind, spec.name, key):
        return {"problem": f"{rel} holds a manifest of {found.kind} {found.name!r} version {found.key[:12]}, not "
                           f"this one: remove {rel} (a job wrote it?) and apply again"}
    damaged = manifests.verify_digests(root, rel, found) if verify else manifests.check_sizes(root, rel, found)
    if damaged is not None:
        return {"problem": f"{rel} is damaged: {damaged}; jobs naming it are not submitted. Versions never change "
                           f"in place, and prune never deletes one a spec names: once no run reads it, remove it "
                           f"(chmod -R u+w {root}/{rel} && rm -rf {root}/{rel}) and apply to make it again"}
    return {"manifest": found}


def _pin(desired: DesiredState, spec: Dataset | Model, snapshots: Mapping[str, SnapshotState],
         away: bool) -> tuple[str | None, str | None]:
    """What pins the version beyond the spec, or why it cannot be pinned now."""
    if spec.url is not None or spec.ftp is not None:
        return None, None
    if spec.prepare is not None:
        state = snapshots.get(spec.prepare.code)
        pinned = (state.manifest or state.source) if state is not None else None
        digest = pinned.digest if pinned is not None else None
        return (digest, None) if digest else \
            (None, f"code.{spec.prepare.code} has no content digest yet (its source did not resolve)")
    if spec.path is not None:
        if away:
            return None, f"its cluster's shared root is not on this machine: {spec.path} cannot be read here"
        try:
            return fingerprint(spec.path), None
        except NotSealable as err:
            return None, str(err)
    return _hub_commit(desired, spec)


def _hub_commit(desired: DesiredState, spec: Dataset | Model) -> tuple[str | None, str | None]:
    assert spec.hub is not None
    if re.fullmatch(COMMIT_PATTERN, spec.hub.revision):
        return spec.hub.revision, None
    endpoint = input_refs.hub_endpoint(spec, desired.clusters[spec.cluster])
    if endpoint is None:
        return None, "no hub endpoint (the loader said where to set one)"
    try:
        return resolve_revision(repo_of(spec, endpoint), spec.hub.revision), None
    except HubError as err:
        return None, (f"{err}; the revision {spec.hub.revision!r} cannot be pinned without the mirror: pin a 40-hex "
                      "commit to plan while it is away")


def _with_fetch(desired: DesiredState, spec: Dataset | Model, state: InputState, root: str) -> InputState:
    """The fetch job's command of a version not sealed yet (the planner may read neither the fetcher's program
    nor the mirror): a hub source's files listed from the mirror at the pinned commit."""
    if spec.hub is None and spec.url is None and spec.ftp is None:
        return state
    assert state.key is not None
    endpoint, listing = None, ()
    if spec.hub is not None:
        endpoint = input_refs.hub_endpoint(spec, desired.clusters[spec.cluster])
        try:
            listing = list_files(repo_of(spec, endpoint or ""), state.pin or "")
        except HubError as err:
            return state.model_copy(update={"problem": f"{err}; its files cannot be listed to fetch them"})
    try:
        command = fetch_command(spec, root, desired.workspace.name, state.key, endpoint=endpoint, commit=state.pin,
                                listing=listing)
    except FetchTooBig as err:
        return state.model_copy(update={"problem": str(err)})
    return state.model_copy(update={"fetch": command})


def _real_dir(root: Path, rel: str) -> bool:
    """A directory there, reached through no link (a planted symlink is nobody's staging)."""
    path = root
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return False
    return True


def recorded_inputs(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, InputState]:
    """Every input as the shared root's sealed versions say, with no network and no fingerprint (status, logs): the
    newest version sealed from the spec's source as written. A branch that moved since shows as that version until
    the next plan pins the new one."""
    found, stored = {}, {}
    for address, spec in sorted(desired.inputs.items()):
        root = desired.shared_roots.get(spec.cluster)
        state = InputState(cluster=spec.cluster)
        if root is not None and spec.cluster not in absent:
            if root not in stored:  # once per root: a listing reads every manifest on it
                stored[root] = manifests.stored_versions(root)
            versions = [m for rel, m in stored[root].items()
                        if rel.startswith(f"{TOP[spec.kind]}/{spec.name}/") and m.source.get(spec.source)
                        == spec.model_dump(mode="json")[spec.source]]
            if versions:
                newest = max(versions, key=lambda m: m.created_at)
                state = InputState(cluster=spec.cluster, key=newest.key, rel=version_rel(spec, newest.key),
                                   manifest=newest)
        found[address] = state
    return found
