"""The input shelf: seal a Dataset's or Model's version, delete one pruned, and check a run's inputs before it is
submitted. Built once per apply from the desired state and the observation the plan was made from.

What a materialisation run left on the shared root is a job's writing, so hostile: the seal (state.inputs.seal)
digests it again and checks it against the pinned source before anything is named by a run. A version is used by a
submit only when its manifest still reads as sealed with the content digest the plan showed.
"""

from __future__ import annotations

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import DeleteInputStep, SealInputStep
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.kinds.inputs import Dataset, Model
from specs.load import input_refs
from specs.workloads.submission import Submission
from state.audit.log import actor
from state.inputs import manifest as manifests
from state.inputs import seal as sealing
from state.inputs.hub import HubError, list_files, repo_of
from state.inputs.materialise import file_name
from state.inputs.seal import Expected
from state.inputs.walk import NotSealable


class InputShelf:
    """The inputs of one apply; each version a submit names is checked once."""

    def __init__(self, desired: DesiredState, commit: str) -> None:
        self._desired, self._commit = desired, commit
        self._checked: dict[tuple[str, str], str | None] = {}

    def seal(self, step: SealInputStep) -> str:
        spec = self._spec(step.address)
        root = self._desired.shared_root(step.cluster)
        try:
            sealed = sealing.seal(root, spec, step, self._desired.workspace.name, self._commit, actor(),
                                  self._expected(spec, step))
        except NotSealable as err:
            raise ArgusError(f"{step.address}: {err}") from err
        return sealed.outcome

    def check(self, sub: Submission, cluster: str) -> None:
        """Before a run is submitted: every version it names is sealed there with the digest the plan saw."""
        root = self._desired.shared_root(cluster)
        for address, rel in sorted((sub.inputs or {}).items()):
            digest = (sub.input_digests or {}).get(address, "")
            key = (rel, digest)
            if key not in self._checked:
                self._checked[key] = _verdict(root, rel, digest)
            if self._checked[key]:
                raise ArgusError(f"{address} at {root}/{rel} {self._checked[key]}; not submitting {sub.job}")

    def _spec(self, address: str) -> Dataset | Model:
        spec = self._desired.inputs.get(address)
        if spec is None:
            raise ArgusError(f"{address} is not in the desired state this apply loaded; run `argus plan` again")
        return spec

    def _expected(self, spec: Dataset | Model, step: SealInputStep) -> Expected:
        """What the version must hold, from the spec and the source itself, never from the run's own word."""
        if spec.url is not None or spec.ftp is not None:
            source = spec.url or spec.ftp
            assert source is not None
            return Expected(files={file_name(source.url): source.sha256}, pin=step.pin)
        if spec.prepare is not None:
            return Expected(outputs=tuple(spec.prepare.outputs), pin=step.pin)
        if spec.path is not None:
            return Expected(pin=step.pin)
        assert spec.hub is not None
        if step.pin is None:
            raise ArgusError(f"{step.address}: the plan pinned no hub commit; run `argus plan` again")
        endpoint = input_refs.hub_endpoint(spec, self._desired.clusters[spec.cluster]) or ""
        try:  # asked again at apply: the listing the run fetched by is the run's word, not the mirror's
            listing = list_files(repo_of(spec, endpoint), step.pin)
        except HubError as err:
            raise ArgusError(f"{step.address}: {err}; the version is not sealed without its listing") from err
        return Expected(hub=listing, pin=step.pin)


def _verdict(root: str, rel: str, digest: str) -> str | None:
    try:
        found = manifests.read_version(root, rel)
    except manifests.Untrusted as err:
        return f"is not a version argus sealed ({err}); run `argus plan` again"
    if found is None:
        return "is not a sealed version (no manifest); run `argus plan` again"
    if digest and found.digest != digest:
        return f"holds content {found.digest[:12]}, not the {digest[:12]} planned; run `argus plan` again"
    damaged = manifests.check_sizes(root, rel, found)
    return f"is damaged: {damaged}" if damaged else None


def seal_input(step: SealInputStep, world: World) -> Done:
    return Done(Outcome(world.inputs.seal(step)))


def delete_input(step: DeleteInputStep, world: World) -> Done:
    """Only a version this workspace sealed, read again now: what a prune deletes is decided at apply too."""
    root = world.roots[step.cluster]
    try:
        found = manifests.read_version(root, step.rel)
    except manifests.Untrusted as err:
        raise ArgusError(f"{root}/{step.rel} is not a version argus sealed ({err}): not deleting it") from err
    if found is None:
        return Done(Outcome.ALREADY_GONE)
    if found.workspace != world.workspace:
        raise ArgusError(f"{root}/{step.rel} is workspace {found.workspace!r}'s version, not this workspace's: "
                         "not deleting it")
    try:
        sealing.remove_version(root, step.rel)
    except OSError as err:
        raise ArgusError(f"{root}/{step.rel} could not be deleted safely: {err}") from err
    return Done(Outcome.DELETED)
