"""Observe the world once: every cluster, this workspace's records, snapshots and the NFS layout."""

from __future__ import annotations

from pathlib import Path

from specs.desired import DesiredState
from state import snapshots
from state.cache import cache_root
from state.observed import LAYOUT, Finding, ObservedState, RunRecord, SnapshotState, SourceState
from state.ray_client import DEFAULT_TIMEOUT, RayClient
from state.records import read_records
from state.sources import DEFAULT_FETCH_TIMEOUT, resolve_source


def clients(desired: DesiredState, timeout: float = DEFAULT_TIMEOUT) -> dict[str, RayClient]:
    """One client per cluster, bound to the address its spec names."""
    return {name: RayClient(name, c.address, timeout) for name, c in sorted(desired.clusters.items())}


def observe(desired: DesiredState, ray: dict[str, RayClient], verify_snapshots: bool = False,
            fetch_timeout: float = DEFAULT_FETCH_TIMEOUT) -> ObservedState:
    """One snapshot (one list_jobs) per cluster, plus what the shared roots hold."""
    clusters = {name: client.snapshot() for name, client in ray.items()}
    records = _records(desired)
    absent = absent_roots(desired)
    states = {name: observe_snapshot(desired, name, verify_snapshots, absent, fetch_timeout)
              for name in sorted(desired.snapshots)}
    return ObservedState(
        clusters=clusters,
        records=records,
        snapshots=states,
        stored={name: snapshots.stored(root) for name, root in desired.shared_roots.items()},
        missing_dirs={name: tuple(d for d in LAYOUT if not (Path(root) / d).is_dir())
                      for name, root in desired.shared_roots.items() if name not in absent},
        absent_roots=absent,
        workload_checks=workload_checks(desired, states, absent),
        failures=unclassified_failures(desired, ray, clusters, records),
    )


def _records(desired: DesiredState) -> dict[str, RunRecord]:
    records: dict[str, RunRecord] = {}
    for root in sorted(set(desired.shared_roots.values())):
        records.update(read_records(root, desired.workspace.name))
    return records


def unclassified_failures(desired: DesiredState, ray: dict[str, RayClient], clusters: dict,
                          records: dict[str, RunRecord]) -> dict[str, str]:
    """Classes of failed runs whose job has a retry policy and whose record has none yet.

    One log read per such run, once: after apply records the class, the record answers.
    """
    from state.failures import classify, evidence_of

    found = {}
    for name, cluster in clusters.items():
        for job in cluster.jobs:
            spec = desired.jobs.get(job.job or "")
            record = records.get(job.submission_id)
            if (job.workspace == desired.workspace.name and job.status == "FAILED" and spec and spec.retry
                    and not (record and record.failure)):
                found[job.submission_id] = classify(evidence_of(job, ray[name].logs(job.submission_id))) or "unknown"
    return found


def workload_checks(desired: DesiredState, states: dict[str, SnapshotState],
                    absent: tuple[str, ...]) -> dict[str, tuple[Finding, ...]]:
    from state.verl_checks import check_job  # Hydra is imported only when there are verl jobs

    return {name: check_job(desired, job, states[job.code], cache_root())
            for name, job in sorted(desired.jobs.items())
            if job.workload != "command" and job.code in states and job.cluster not in absent}


def absent_roots(desired: DesiredState) -> tuple[str, ...]:
    """Clusters whose absolute shared root is not there: an unmounted NFS is never created by argus.

    A relative shared root lives in the workspace (the local dev cluster) and is simply created.
    """
    return tuple(sorted(name for name, root in desired.shared_roots.items()
                        if Path(desired.clusters[name].shared_root).is_absolute() and not Path(root).is_dir()))


def observe_snapshot(desired: DesiredState, name: str, verify: bool, absent: tuple[str, ...],
                     fetch_timeout: float = DEFAULT_FETCH_TIMEOUT) -> SnapshotState:
    """A snapshot already on disk is planned from its manifest: its `git:` source is not fetched
    again (no network, nothing of the source's runs); the planner compares the spec's source as
    written with the manifest's. A `path:` source is still read (locally) to report a copy that moved on."""
    spec = desired.snapshots[name]
    if spec.cluster in absent:
        return SnapshotState(source=SourceState(error=f"cluster {spec.cluster!r} has no shared root here",
                                                error_field="cluster"))
    target = Path(desired.snapshot_dir(spec))
    manifest = snapshots.read_manifest(target)
    problem = snapshots.verify(target, manifest) if verify and manifest else None
    if manifest is not None and spec.git is not None:
        source = SourceState(commit=manifest.commit, digest=manifest.digest, files=manifest.files,
                             bytes=manifest.bytes, dirty=manifest.dirty)
    else:
        source = resolve_source(spec, desired.root, cache_root(), fetch_timeout)
    return SnapshotState(source=source, manifest=manifest, problem=problem)
