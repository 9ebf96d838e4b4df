"""Observe the world once per command, as much of it as the command needs.

plan and apply: every cluster, this workspace's records, snapshots (sources resolved) and the NFS
layout, verl jobs checked; status: the same without resolving sources or checking configs; logs:
only the runs and the snapshots' manifests.

The door the commands use. May import: specs, state.*.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from specs.desired import DesiredState
from specs.kinds.models import CodeSnapshot
from specs.workloads.checkpoint_state import CheckpointState
from state.code import snapshots
from state.code.cache import cache_root
from state.code.sources import DEFAULT_FETCH_TIMEOUT, resolve_source, unresolved
from state.inputs.observe import observe_inputs, recorded_inputs, stored_inputs
from state.observed import (
    LAYOUT,
    ClusterQueue,
    ClusterState,
    InputState,
    LedgerEntry,
    ObservedState,
    OutputMark,
    Registry,
    RootState,
    RunRecord,
    SnapshotState,
    SourceState,
    legacy_key,
)
from state.ray.client import ClusterAuthFailed, ClusterRequestFailed, ClusterUnreachable, RayClient
from state.root.identity import observe_root
from state.runs.index import RunsRead, keep, read_runs
from state.runs.past import Archive
from state.runs.progress import read_progress

if TYPE_CHECKING:
    from state.verl.checks import JobCheck

MAX_CONCURRENT_CLUSTERS = 8


def observe(desired: DesiredState, ray: dict[str, RayClient], verify_snapshots: bool = False,
            fetch_timeout: float = DEFAULT_FETCH_TIMEOUT, prune: bool = False) -> ObservedState:
    """What plan and apply need: one snapshot (one list_jobs) per cluster, plus what the shared
    roots hold, every snapshot's source resolved and every verl job checked against its code.
    `prune`: every sealed input version on the roots too (each manifest read), which only a prune decides by."""
    clusters, unreachable = read_clusters(ray)
    absent = absent_roots(desired)
    states = {name: observe_snapshot(desired, name, verify_snapshots, absent, fetch_timeout)
              for name in sorted(desired.snapshots)}
    inputs = observe_inputs(desired, states, absent, verify_snapshots)
    runs = read_run_records(desired, clusters, absent)
    world = _world(desired, clusters, absent, states, workload_checks(desired, states, absent, inputs),
                   unreachable, runs, ray)
    versions = stored_inputs(desired, absent) if prune else {}
    return _settled(desired, world.model_copy(update={"inputs": inputs, "stored_inputs": versions}), runs)


def observe_sync(desired: DesiredState, ray: dict[str, RayClient]) -> ObservedState:
    """What `argus status` needs to tell each job's sync state, and no more: no source is resolved
    (no git, no working copy read) and no verl file or Hydra check runs.

    A job's spec hash pins what is on disk (reconcile.plan.code.code_ref takes the manifest first),
    so a materialized snapshot is read from its manifest alone. A snapshot not materialized yet has
    no digest: a job on it cannot be "in sync" anyway, since none of its runs can have run code
    that is not there; its source is left unresolved, and such a job shows as changed or missing.
    """
    clusters, unreachable = read_clusters(ray)
    absent = absent_roots(desired)
    runs = read_run_records(desired, clusters, absent)
    world = _world(desired, clusters, absent, recorded_snapshots(desired, absent), {}, unreachable, runs, ray,
                   with_claims=False)
    return _settled(desired, world.model_copy(update={"inputs": recorded_inputs(desired, absent)}), runs)


def observe_runs(desired: DesiredState, ray: dict[str, RayClient]) -> ObservedState:
    """What `argus logs` needs to name a job's current run: one list_jobs per cluster, this
    workspace's records, and each snapshot's manifest (a job's spec hash pins its code's digest, so
    logs names the run status shows). No source resolved, no layout, no failure read from logs."""
    absent = absent_roots(desired)
    clusters, unreachable = read_clusters(ray)
    runs = read_run_records(desired, clusters, absent)
    return _settled(desired, ObservedState(clusters=clusters, unreachable=unreachable, records=_merged(runs),
                                           absent_roots=absent, snapshots=recorded_snapshots(desired, absent),
                                           inputs=recorded_inputs(desired, absent),
                                           run_index_problems=_index_problems(desired, runs),
                                           registries=read_registries(desired, runs),
                                           past=Archive(runs, desired.workspace.name)), runs)


def _settled(desired: DesiredState, observed: ObservedState, runs: dict[str, RunsRead]) -> ObservedState:
    """With what each run wrote about its own end; records of runs Ray forgot settled to it (state.runs.settle);
    runs settled by now indexed, so the next observation does not open their records again."""
    from state.runs.settle import settle, with_ends

    observed = with_ends(desired, observed)
    refused = {desired.shared_roots[name] for name in observed.refused_claims}
    if refused:  # another owns the name there: its records and index are not this checkout's to write
        return observed
    settle(desired, observed)
    on_ray = _on_ray(desired, observed.clusters)
    for root, read in sorted(runs.items()):
        keep(root, desired.workspace.name, read, on_ray, set(observed.clusters), _vouched(desired, observed, root))
    return observed


def _vouched(desired: DesiredState, observed: ObservedState, root: str) -> Callable[[str], bool]:
    """Whether the verified chain of a cluster on this root holds an id: only such runs are archived."""
    chains = [observed.registries[c] for c, r in desired.shared_roots.items() if r == root and c in observed.registries]
    return lambda sid: any(chain.vouches(sid) for chain in chains)


def read_run_records(desired: DesiredState, clusters: dict[str, ClusterState],
                     absent: tuple[str, ...]) -> dict[str, RunsRead]:
    """This workspace's records on each shared root here: the run index, the runs it marks open and
    those Ray lists (state.runs.index), never a status.json per run in history."""
    trusted = {name for name, state in read_roots(desired, clusters, absent).items() if state.trusted}
    present = {root for name, root in desired.shared_roots.items() if name in trusted}  # never written, if not
    on_ray = _on_ray(desired, clusters)
    return {root: read_runs(root, desired.workspace.name, on_ray) for root in sorted(present)}


def _on_ray(desired: DesiredState, clusters: dict[str, ClusterState]) -> set[str]:
    return {j.submission_id for c in clusters.values() for j in c.jobs if j.workspace == desired.workspace.name}


def _merged(runs: dict[str, RunsRead]) -> dict[str, RunRecord]:
    return {sid: record for read in runs.values() for sid, record in read.records.items()}


def _index_problems(desired: DesiredState, runs: dict[str, RunsRead]) -> dict[str, str]:
    return {name: runs[root].problem for name, root in sorted(desired.shared_roots.items())
            if root in runs and runs[root].problem}


def read_clusters(ray: dict[str, RayClient]) -> tuple[dict[str, ClusterState], dict[str, str]]:
    """One snapshot per cluster, and why each cluster that could not be read could not: a dead
    dashboard (down, silent, or answering with errors) is the planner's to work around (its jobs are
    not planned), never every cluster's end. So is a refused token (ClusterAuthFailed): a runaway on
    another cluster can still be stopped while one cluster's token is being rotated."""
    clusters, unreachable = {}, {}
    if not ray:
        return clusters, unreachable
    # concurrently: a slow or dead dashboard costs its own deadline once, not once per cluster before it
    with ThreadPoolExecutor(max_workers=min(MAX_CONCURRENT_CLUSTERS, len(ray)),
                            thread_name_prefix="argus-observe") as pool:
        futures = {name: pool.submit(client.snapshot) for name, client in ray.items()}
    for name, future in futures.items():
        try:
            clusters[name] = future.result()
        except (ClusterUnreachable, ClusterRequestFailed, ClusterAuthFailed) as err:
            unreachable[name] = str(err)
    return clusters, unreachable


def _world(desired: DesiredState, clusters: dict[str, ClusterState], absent: tuple[str, ...],
           states: dict[str, SnapshotState], checks: dict[str, JobCheck],
           unreachable: dict[str, str], runs: dict[str, RunsRead], ray: dict[str, RayClient],
           with_claims: bool = True) -> ObservedState:
    """with_claims: whose claim the workspace's name is (git is read to name this checkout): plan and apply
    decide by it; `argus status` runs without git and shows what Ray and the records say."""
    records = _merged(runs)
    return ObservedState(
        clusters=clusters,
        unreachable=unreachable,
        records=records,
        snapshots=states,
        stored={name: snapshots.stored(root) for name, root in desired.shared_roots.items()},
        missing_dirs={name: tuple(d for d in LAYOUT if not (Path(root) / d).is_dir())
                      for name, root in desired.shared_roots.items() if name not in absent},
        absent_roots=absent,
        roots=read_roots(desired, clusters, absent),
        workload_checks={name: check.diagnostics for name, check in checks.items()},
        verl_profiles={name: check.profile for name, check in checks.items() if check.profile is not None},
        failures=(classified := unclassified_failures(desired, ray, clusters, records)).found,
        unread_rows=classified.unread,
        queues=read_queues(desired, absent),
        checkpoints=read_checkpoints(desired, absent),
        output_marks=read_output_marks(desired, absent),
        observed_at=time.time(),
        run_index_problems=_index_problems(desired, runs),
        registries=read_registries(desired, runs),
        past=Archive(runs, desired.workspace.name),
        progress=read_progress(desired, clusters, records, time.time()),
        **(read_claims(desired, absent) if with_claims else {}),
    )


def read_registries(desired: DesiredState, runs: dict[str, RunsRead]) -> dict[str, Registry]:
    """Per cluster whose runs were read here: the submissions its shared root's audit log registers, each
    root read once (state.audit.registry, incremental through argus's cache on this machine)."""
    from state.audit import registry

    read = {root: registry.read(root, desired.workspace.name, cache_root()) for root in sorted(runs)}
    return {name: read[root] for name, root in sorted(desired.shared_roots.items()) if root in read}


def read_roots(desired: DesiredState, clusters: dict[str, ClusterState],
               absent: tuple[str, ...]) -> dict[str, RootState]:
    """Each present root's identity, with the runs of this workspace Ray lists on its cluster."""
    found = {}
    for name, root in desired.shared_roots.items():
        if name in absent:
            continue
        ours = [j for j in clusters[name].jobs if j.workspace == desired.workspace.name] if name in clusters else []
        found[name] = observe_root(root).model_copy(update={"runs_on_ray": len(ours)})
    return found


def read_claims(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, Any]:
    """This checkout as a claim names it (`owner`), and who claims this workspace's name on each cluster's
    shared root here (`claims`; a claim naming this checkout as it was named before reads as `owner`)."""
    from state import claims

    ours = claims.owner_of(desired.root)
    read = {root: claims.read(root, desired.workspace.name)
            for name, root in desired.shared_roots.items() if name not in absent}
    for root, seen in read.items():
        if seen.owner is not None and seen.owner != ours and claims.is_ours(seen.owner, ours, desired.root):
            read[root] = seen.model_copy(update={"owner": ours})
    return {"owner": ours,
            "claims": {name: read[root] for name, root in sorted(desired.shared_roots.items()) if root in read}}


def read_output_marks(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, OutputMark]:
    """Per job, whose mark its checkpoint directory carries on its shared root (one small read a job)."""
    from state.root.outputs import checkpoint_path, mark_of

    found = {}
    for name, job in sorted(desired.jobs.items()):
        if job.cluster in absent or job.cluster not in desired.shared_roots:
            continue
        root = desired.shared_roots[job.cluster]
        if (seen := mark_of(root, checkpoint_path(desired, job))) is not None:
            found[name] = seen
    return found


def read_checkpoints(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, CheckpointState]:
    """Per verl job, the checkpoint a new attempt would resume from, as its overrides tell verl: the
    folder trainer.resume_from_path names, or the latest in its checkpoint directory; none with
    trainer.resume_mode=disable (the planner reads the composed config's mode: reconcile.plan.checkpoints)."""
    from specs.workloads import verl
    from specs.workloads.checkpoint_state import reads_path, resume_of
    from specs.workloads.submission import expand
    from state.runs.checkpoints import inspect_checkpoint, inspect_step

    found = {}
    for name, job in sorted(desired.jobs.items()):
        if job.workload == "command" or job.cluster in absent or job.cluster not in desired.shared_roots:
            continue
        root, resume = desired.shared_roots[job.cluster], resume_of(job.overrides)
        if resume.mode == "disable":
            continue
        if reads_path(resume, job.workload) and resume.path is not None:
            found[name] = inspect_step(Path(expand(resume.path, root)))
            continue
        explicit = job.trainer is not None and job.trainer.checkpoint_dir is not None
        for key, legacy in ((name, False), *(() if explicit else ((legacy_key(name), True),))):
            directory = Path(expand(verl.checkpoint_dir(job, desired.workspace.name, legacy), root))
            if (state := inspect_checkpoint(directory)) is not None:
                found[key] = state
    return found


def read_queues(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, ClusterQueue]:
    """Each cluster's admission queue on its shared root: every workspace's ledger, and the quotas."""
    from state.queue.ledger import QueueUnreadable, read_ledgers
    from state.root_key import keyed

    found = {}
    for name, root in sorted(desired.shared_roots.items()):
        if name in absent:
            continue
        ignored: list[str] = []
        try:
            entries = tuple(e for e in read_ledgers(root, ignored) if e.cluster == name)
        except QueueUnreadable as err:
            found[name] = ClusterQueue(problem=str(err), keyed=keyed())
            continue
        found[name] = with_quotas(ClusterQueue(entries=entries, keyed=keyed(), ignored=tuple(ignored),
                                                gone=holders_gone(root, entries)), root, name,
                                   desired.clusters[name].admin)
    return found


def holders_gone(root: str, entries: Iterable[LedgerEntry]) -> frozenset[str]:
    """The admitting processes proven gone, of the admitted entries (one whose run Ray does not list holds
    only while its process may still submit it: reconcile.plan.queue.holds)."""
    from state.queue.holders import gone

    return gone(root, {e.holder for e in entries if e.holder and e.admitted is not None})


def with_quotas(queue: ClusterQueue, root: str, cluster: str, admin: str | None) -> ClusterQueue:
    """The quotas admission obeys there: the admin's applied record, vouched by its audit chain, or (before
    its first apply) the hand-edited file of earlier versions (state.queue.applied_quotas)."""
    from state.queue.applied_quotas import QuotasDistrusted, effective
    from state.queue.quotas import QuotaFileError

    try:
        found = effective(root, cluster, admin, *admin_vouches(root, cluster, admin))
    except (QuotaFileError, QuotasDistrusted) as err:
        return queue.model_copy(update={"problem": str(err)})
    applied = found.applied
    return queue.model_copy(update={"quotas": found.quotas, "legacy_quotas": found.legacy,
                                    "quotas_digest": applied.digest if applied else None,
                                    "quotas_admin": applied.admin if applied else None})


def admin_vouches(root: str, cluster: str, admin: str | None) -> tuple[str | None, str | None]:
    """The digest of the quotas the admin's chain on `root` applied last to `cluster` (None: never), and why
    that chain does not verify (None: it does)."""
    from state.audit import registry

    if admin is None:
        return None, None
    read = registry.read(root, admin, cache_root())
    return read.quotas.get(cluster), "; ".join(read.problems[:2]) or None


class Classified(NamedTuple):
    found: dict[str, str]
    """Submission id -> failure class."""
    unread: dict[str, str]
    """Submission id -> why its log could not be read (it stays unclassified: not retried this time)."""


def unclassified_failures(desired: DesiredState, ray: dict[str, RayClient], clusters: dict,
                          records: dict[str, RunRecord]) -> Classified:
    """Classes of failed runs whose job has a retry policy and whose record has none yet.

    One log read per such run, once: after apply records the class, the record answers. Only
    `clusters` (those that answered) are read: an unreachable cluster's logs are not asked for. Only
    argus's own runs are read (the id derived from the labels, and argus's record on that cluster): a row
    anyone submitted with this workspace's labels costs no request. A log Ray will not give is reported,
    never the end of the command.
    """
    from state.runs.failures import classify, evidence_of

    found, unread = {}, {}
    for name, cluster in clusters.items():
        for job in cluster.jobs:
            spec, run = desired.jobs.get(job.job or ""), job.run_id
            record = records.get(job.submission_id)
            if not (run and run.workspace == desired.workspace.name and run.submission_id == job.submission_id
                    and record and record.cluster == name and not record.failure
                    and job.status == "FAILED" and spec and spec.retry):
                continue
            try:
                logs = ray[name].logs(job.submission_id)
            except (ClusterUnreachable, ClusterRequestFailed, ClusterAuthFailed) as err:
                unread[job.submission_id] = str(err)
                continue
            found[job.submission_id] = classify(evidence_of(job, logs)) or "unknown"
    return Classified(found, unread)


def workload_checks(desired: DesiredState, states: dict[str, SnapshotState],
                    absent: tuple[str, ...], inputs: Mapping[str, InputState] | None = None) -> dict[str, JobCheck]:
    checked = [(name, job) for name, job in sorted(desired.jobs.items())
               if job.workload != "command" and job.code in states and job.cluster not in absent]
    if not checked:  # nor are the checks themselves (~0.03 s of start-up) when only commands run
        return {}
    from state.code.cache import memo_for
    from state.verl.checks import check_job  # Hydra is imported only when there are verl jobs

    memo = memo_for("verl", desired.root)
    found = {name: check_job(desired, job, states[job.code], cache_root(), inputs=inputs or {}, memo=memo)
             for name, job in checked}
    memo.save()
    return found


def absent_roots(desired: DesiredState) -> tuple[str, ...]:
    """Clusters whose absolute shared root is not there: an unmounted NFS is never created by argus.

    A relative shared root lives in the workspace (the local dev cluster) and is simply created.
    """
    return tuple(sorted(name for name, root in desired.shared_roots.items()
                        if Path(desired.clusters[name].shared_root).is_absolute() and not Path(root).is_dir()))


def recorded_snapshots(desired: DesiredState, absent: tuple[str, ...]) -> dict[str, SnapshotState]:
    """Every snapshot as its manifest on disk says, its source left unresolved (see observe_sync)."""
    return {name: _recorded(desired, spec, absent) for name, spec in sorted(desired.snapshots.items())}


def _recorded(desired: DesiredState, spec: CodeSnapshot, absent: tuple[str, ...]) -> SnapshotState:
    if spec.cluster in absent:
        return _no_root(spec)
    return SnapshotState(source=SourceState(), manifest=snapshots.read_manifest(Path(desired.snapshot_dir(spec))))


def observe_snapshot(desired: DesiredState, name: str, verify: bool, absent: tuple[str, ...],
                     fetch_timeout: float = DEFAULT_FETCH_TIMEOUT) -> SnapshotState:
    """A snapshot already on disk is planned from its manifest: its `git:` source is not fetched
    again (no network, nothing of the source's runs); the planner compares the spec's source as
    written with the manifest's. A `path:` source is still read (locally) to report a copy that moved on."""
    spec = desired.snapshots[name]
    if spec.cluster in absent:
        return _no_root(spec)
    target = Path(desired.snapshot_dir(spec))
    manifest = snapshots.read_manifest(target)
    problem = snapshots.verify(target, manifest) if verify and manifest else None
    if manifest is not None and spec.git is not None:
        source = SourceState(commit=manifest.commit, digest=manifest.digest, files=manifest.files,
                             bytes=manifest.bytes, dirty=manifest.dirty)
    else:
        source = resolve_source(spec, desired.root, cache_root(), fetch_timeout)
    return SnapshotState(source=source, manifest=manifest, problem=problem)


def _no_root(spec: CodeSnapshot) -> SnapshotState:
    return SnapshotState(source=unresolved(spec, "cluster", f"cluster {spec.cluster!r} has no shared root here"))
