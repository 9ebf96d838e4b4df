"""Plan-time checks of verl jobs that read files: the snapshot's verl version, entry module, Hydra
composition, verl's own start-up checks, the resource pools it will ask for, and the files it names.

Hydra composes the job's overrides against the snapshot's own config (no torch, no verl import). What
verl would only find once the job holds its GPUs is found here, in the pull request.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic, Severity
from specs.kinds.models import Job, Trainer
from specs.load.after import stand_ins
from specs.workloads import verl
from specs.workloads.submission import expand
from specs.workloads.verl_profile import VerlProfile
from state.code.sources import entries
from state.memo import Memo, key_of
from state.observed import InputState, SnapshotState
from state.verl import files as verl_files
from state.verl import pools as verl_pools
from state.verl import recipe_demand
from state.verl import rules as verl_rules
from state.verl import rules_limits as verl_limits
from state.verl import version as verl_version
from state.verl.compose import Composed, compose_job
from state.verl.entry import EntryProblem, resolve_entry
from state.verl.legacy_keys import legacy_problems
from state.verl.sealed import JobInputs

FAKE_ID = "SUBMISSION_ID"
CODE_CACHE = "verl-code-v2"
"""Snapshots extracted whole (recipes bring their own modules and configs); v1 held verl/trainer only."""


@dataclass(frozen=True)
class JobCheck:
    diagnostics: tuple[Diagnostic, ...] = ()
    profile: VerlProfile | None = None


def check_job(desired: DesiredState, job: Job, snapshot: SnapshotState, cache_root: str,
              files: bool = True, inputs: Mapping[str, InputState] | None = None, memo: Memo | None = None) -> JobCheck:
    """Everything that can be known about a verl job before it takes a GPU, located in its spec.

    `inputs`: ObservedState.inputs (by address, `dataset.NAME`). A `${dataset:...}`/`${model:...}` whose
    version is sealed is composed as its directory and checked from its manifest; any other as a stand-in
    (not checked yet). None (`argus validate --deep`, or an observer that knows no inputs): all stand-ins.
    `memo`: the judgement of the job's config, kept by the content of all it read (`_judgement_key`); whether
    the files it names exist is the world's business, asked again every time.
    """
    known = JobInputs(inputs or {}, desired.shared_root(job.cluster))
    code = _code_files(desired, job, snapshot, cache_root)
    if code is None:
        return JobCheck()  # the snapshot's own errors already explain why
    key = _judgement_key(desired, job, snapshot, known) if memo is not None else None
    judged = memo.get(key) if memo is not None and key is not None else None
    if not _is_judgement(judged):
        judged = _judged(desired, job, code, snapshot, known, memo)
        if memo is not None and key is not None:
            memo.put(key, judged)
    found, profile, config = judged
    if files and config is not None:
        found = [*found, *(_about(job, _field_of(job, keys), message, severity) for keys, message, severity
                           in verl_files.missing_files(job, config, known.shared_root, code, known))]
    return _located(desired, job, found, profile)


Judgement = tuple[list[Diagnostic], VerlProfile | None, dict[str, Any] | None]
"""What the job's config makes of it (unlocated diagnostics, its profile, the composed config): a function of the
job's spec, its snapshot's code, the inputs it names, and argus's and Hydra's code."""


def _judged(desired: DesiredState, job: Job, code: Path, snapshot: SnapshotState, known: JobInputs,
            memo: Memo | None) -> Judgement:
    version = verl_version.read_version(code)
    found = [] if verl_version.knowledge_for(version) else [
        _about(job, "code", verl_version.outside_warning(version), "warning")]
    point = resolve_entry(code, job)
    if isinstance(point, EntryProblem):
        return [*found, _about(job, point.field, point.message)], None, None
    label = f"{'verl ' + version if version else 'the snapshot'}'s config {point.config_name}"
    composed = _composed(code, job, desired, point, _code_digest(snapshot), label, known, memo)
    found += [_about(job, _override_field(job, index), message) for index, message in composed.errors]
    if composed.config is None:
        return found, None, None
    profile = verl_pools.profile_of(composed.config, job, point, version,
                                    verl_version.knowledge_for(version), desired.shared_root(job.cluster), code)
    profile = profile.model_copy(update={"checked": verl_version.checked_words(version)})
    found += [_about(job, field, message, severity) for field, message, severity
              in recipe_demand.demand_problems(composed.config, job, point.module, version)]
    found += _typed_kept(job, composed.config, desired.shared_root(job.cluster), desired.workspace.name)
    if not verl_version.older_than_known(version):
        found += _rule_diagnostics(job, composed.config, version, profile)
        found += [_about(job, field, message, "error" if profile.knowledge else "warning") for field, message
                  in legacy_problems(job, composed.config, code, point.module, point.config_name, version)]
    return found, profile, composed.config


def _judgement_key(desired: DesiredState, job: Job, snapshot: SnapshotState, known: JobInputs) -> str | None:
    """Everything the judgement reads: the job's spec, where its outputs go (workspace, shared root), the code
    composed by its digest, the states of the inputs it names (a changed Dataset changes only its readers' keys).
    Hydra's and omegaconf's versions name the memo's folder (state.memo.code). None when the code has no digest
    to key it by."""
    code = _code_digest(snapshot)
    if not code:
        return None
    text = job.model_dump_json()
    named = sorted((address, state.model_dump_json()) for address, state in known.states.items()
                   if _names(text, address))
    return key_of("verl-judgement", text, desired.workspace.name, known.shared_root, code, json.dumps(named))


def _code_digest(snapshot: SnapshotState) -> str:
    """The digest of the files composed (`_code_files`): the snapshot on the shared root once made (its manifest's,
    which a path snapshot's moving working copy does not change), else the source's. Empty (kept nowhere) when
    the snapshot's files no longer match their manifest."""
    if snapshot.manifest is not None:
        return "" if snapshot.problem else f"made:{snapshot.manifest.digest}"
    return snapshot.source.digest or ""


def _names(text: str, address: str) -> bool:
    """Whether a job's spec may read an input: by `${dataset:NAME}`, or by a path into `datasets/NAME`."""
    kind, _, name = address.partition(".")
    return f"${{{kind}:{name}}}" in text or f"{kind}s/{name}" in text


def _is_judgement(found: Any) -> bool:
    return isinstance(found, tuple) and len(found) == 3 and isinstance(found[0], list)


def _located(desired: DesiredState, job: Job, found: list[Diagnostic], profile: VerlProfile | None = None) -> JobCheck:
    source = desired.source(Address.job(job.name))
    return JobCheck(tuple(d.located(source) for d in found), profile)


def _composed(code: Path, job: Job, desired: DesiredState, point: Any, digest: str, label: str, inputs: JobInputs,
              memo: Memo | None) -> Composed:
    """Compose the job's config with Hydra; kept in the memo by (code digest, entry, overrides) when its verdict
    is final. Inputs are filled first (`${dataset:...}` is Hydra's syntax too): a sealed one's directory, else a
    stand-in."""
    root = desired.shared_root(job.cluster)
    ours = [expand(inputs.fill(a), root, FAKE_ID)
            for a in verl.overrides(job, desired.workspace.name)[:-len(job.overrides) or None]]
    users = [expand(stand_ins(inputs.fill(a)), root, FAKE_ID) for a in job.overrides]  # `${job:...}` too
    ours += point.searchpath
    key = key_of("verl-compose", json.dumps([digest, point.config_dir, point.config_name, ours, users, label]))
    saved = memo.get(key) if memo is not None and digest else None
    if isinstance(saved, Composed):
        return saved
    composed = compose_job(code / point.config_dir, point.config_name, ours, users, label)
    if memo is not None and digest and composed.final:
        memo.put(key, composed)
    return composed


def _typed_kept(job: Job, config: dict[str, Any], root: str, workspace: str) -> list[Diagnostic]:
    """What argus sets must be what the run gets: a snapshot's config group merged `@trainer` or `@_global_`
    could set the GPUs argus counts or the directory it keeps checkpoints in over argus's own overrides."""
    trainer = job.trainer or Trainer()
    wanted = {"trainer.nnodes": trainer.nnodes, "trainer.n_gpus_per_node": trainer.n_gpus_per_node,
              "trainer.default_local_dir": expand(verl.checkpoint_dir(job, workspace), root, FAKE_ID)}
    return [_about(job, verl.TYPED_KEYS[key], f"the composed config has {key}={got!r}, not the {want!r} argus sets: "
                                              "a config of the snapshot sets it over argus's override; argus counts, "
                                              "places and records the run by its own")
            for key, want in wanted.items() if (got := verl_rules.get(config, key)) != want]


def _rule_diagnostics(job: Job, config: dict[str, Any], version: str | None, profile: VerlProfile) -> list[Diagnostic]:
    n_gpus = (job.trainer or Trainer()).nnodes * (job.trainer or Trainer()).n_gpus_per_node
    if job.workload == "sft":
        problems = verl_rules.sft_problems(config, n_gpus)
    else:
        problems = verl_rules.ppo_problems(config, n_gpus, verl_version.at_least(version, (0, 9)))
    problems += verl_pools.pool_problems(config, profile, version)
    # outside argus's knowledge the rules may not hold: what they find is said, but does not block
    severity: Severity = "error" if profile.knowledge else "warning"
    limits = verl_limits.limit_findings(config, n_gpus, job.workload)
    return [_about(job, _field_of(job, keys), message, severity) for keys, message in problems] + [
        _about(job, _field_of(job, keys), message, said if profile.knowledge else "warning")  # type: ignore[arg-type]
        for keys, message, said in limits]


def _field_of(job: Job, keys: tuple[str, ...]) -> str:
    """The user's last override that set one of the keys, else the typed field that did, else the job."""
    if (index := verl.last_override(job, keys)) is not None:
        return f"overrides.{index}"
    typed = [verl.TYPED_KEYS[k] for k in keys if k in verl.TYPED_KEYS]
    return typed[0] if typed and not typed[0].startswith("(") else ("overrides" if job.overrides else "workload")


def _override_field(job: Job, index: int | None) -> str:
    if index is not None:
        return f"overrides.{index}"
    return "entry" if job.entry is not None else "workload"


def _about(job: Job, field: str, message: str, severity: Severity = "error") -> Diagnostic:
    return Diagnostic(severity=severity, address=Address.job(job.name), field=field, message=message)


def _code_files(desired: DesiredState, job: Job, snapshot: SnapshotState, cache_root: str) -> Path | None:
    """The snapshot on disk, or (not made yet) its files read from the source's git objects."""
    spec = desired.snapshots[job.code or ""]
    if snapshot.manifest is not None:
        return Path(desired.snapshot_dir(spec))
    source = snapshot.source
    if source.error or not source.digest:
        return None
    extracted = Path(cache_root) / ".argus" / CODE_CACHE / source.digest
    if not extracted.exists():
        extracted.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{source.digest}.", dir=extracted.parent))
        for rel, _mode, data in entries(spec, source, desired.root, cache_root):
            if rel.endswith((".py", ".yaml", ".yml")) or rel == verl_version.VERSION_FILE:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(data)
        try:
            tmp.rename(extracted)
        except OSError:  # another argus extracted the same digest meanwhile: the same files, keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    return extracted


def offline_checks(desired: DesiredState, cache_root: str,
                   fetch_timeout: float | None = None) -> dict[str, tuple[Diagnostic, ...]]:
    """`argus validate --deep`: what needs only the code, not the cluster or its files.

    Keyed by address: code.NAME for a source that does not resolve, job.NAME for the job's checks.
    """
    from state.code.cache import memo_for
    from state.code.sources import DEFAULT_FETCH_TIMEOUT, resolve_source
    from state.observed import SnapshotState

    memo = memo_for("verl-offline", desired.root)  # its own: a plan's judgements read the snapshot once made
    used = {job.code for job in desired.jobs.values() if job.workload != "command" and job.code}
    sources = {name: resolve_source(desired.snapshots[name], desired.root, cache_root,
                                    fetch_timeout or DEFAULT_FETCH_TIMEOUT) for name in sorted(used)}
    found: dict[str, tuple[Diagnostic, ...]] = {
        s.error.address: (s.error.located(desired.source(s.error.address)),) for s in sources.values() if s.error}
    for name, job in sorted(desired.jobs.items()):
        if job.workload != "command" and job.code in sources and not sources[job.code].error:
            found[Address.job(name)] = check_job(desired, job, SnapshotState(source=sources[job.code]), cache_root,
                                                 files=False, memo=memo).diagnostics
    memo.save()
    return found
