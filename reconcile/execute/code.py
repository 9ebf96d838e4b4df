"""The code shelf: each snapshot's source resolved, and each snapshot on disk verified, at most once
per command.

The observation the plan was made from already resolved every source that has no snapshot on disk
yet (state.observe): exporting reuses that answer instead of fetching again. A snapshot used by
several jobs is re-hashed before the first submit only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.workloads.submission import CodeRef, expand
from state.code import snapshots
from state.code.cache import cache_root
from state.code.sources import DEFAULT_FETCH_TIMEOUT, resolve_source
from state.observed import SourceState


class CodeShelf:
    """Snapshot sources and verdicts for one command; every answer is asked for once."""

    def __init__(self, desired: DesiredState, observed: Mapping[str, SourceState],
                 fetch_timeout: float | None = None) -> None:
        self._desired = desired
        self._sources = {name: source for name, source in observed.items() if source.digest and not source.error}
        self._fetch_timeout = fetch_timeout or DEFAULT_FETCH_TIMEOUT
        self._verdicts: dict[tuple[str, str], str | None] = {}
        """(snapshot directory, digest) → None when its files matched, else what is wrong."""

    def export(self, name: str, commit: str, digest: str, progress: Callable[[str], None]) -> str:
        """Export snapshot `name` exactly at the commit and digest the plan showed: "created", or
        "exists" when it is already there (materialize checks the digest of what it wrote, too)."""
        spec = self._desired.snapshots[name]
        source = self._source(name, commit, digest)
        if source.error or (source.commit, source.digest) != (commit, digest):
            now = source.error.message if source.error else f"now commit {str(source.commit)[:12]}"
            raise ArgusError(f"code.{name}: the source no longer matches the plan ({now}); run `argus plan` again")
        return snapshots.materialize(spec, source, self._desired.workspace.name, self._desired.root,
                                     self._desired.shared_root(spec.cluster), Path(self._desired.snapshot_dir(spec)),
                                     progress=progress)

    def check(self, code: CodeRef, cluster: str) -> None:
        """Before a job is submitted: its snapshot is there and its files still match the digest."""
        target = Path(expand(code.path, self._desired.shared_root(cluster)))
        key = (str(target), code.digest)
        if key not in self._verdicts:
            self._verdicts[key] = _verdict(target, code)
        if self._verdicts[key]:
            raise ArgusError(f"code.{code.snapshot} at {target} {self._verdicts[key]}")

    def _source(self, name: str, commit: str, digest: str) -> SourceState:
        """The observed source when it is the planned one; otherwise (a plan made elsewhere) resolved again, once."""
        known = self._sources.get(name)
        if known is None or (known.commit, known.digest) != (commit, digest):
            known = resolve_source(self._desired.snapshots[name], self._desired.root, cache_root(), self._fetch_timeout)
            self._sources[name] = known
        return known


def _verdict(target: Path, code: CodeRef) -> str | None:
    manifest = snapshots.read_manifest(target)
    if manifest is None or manifest.digest != code.digest:
        return "is missing or holds other content than planned; run `argus plan` again"
    problem = snapshots.verify(target, manifest)
    return f"is damaged: {problem}. Not submitting." if problem else None
