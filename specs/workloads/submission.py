"""A job spec resolved into exactly what Ray is asked to run, and the identity derived from it.

Pure functions of the specs: the planner uses them to decide, the applier to submit, so the
two can never disagree about which run a spec means.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import threading
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, SerializerFunctionWrapHandler, StringConstraints, ValidationError, model_serializer

from specs.base import Frozen
from specs.kinds.models import SECRET_REF_PATTERN, Cluster, Job, Name, Trainer, Workspace
from specs.workloads import verl

SUBMISSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SHARED_ROOT_PLACEHOLDER = verl.SHARED_ROOT
SpecHash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""sha256 of a canonical Submission, in hex."""

LABEL_WORKSPACE = "argus.workspace"
LABEL_JOB = "argus.job"
LABEL_SPEC_HASH = "argus.spec_hash"
LABEL_ATTEMPT = "argus.attempt"
LABEL_COMMIT = "argus.commit"
LABEL_PLAN = "argus.plan"
_IDENTITY_LABELS = {"workspace": LABEL_WORKSPACE, "job": LABEL_JOB, "spec_hash": LABEL_SPEC_HASH,
                    "attempt": LABEL_ATTEMPT}
MAX_ATTEMPT = 999_999_999
"""Nine digits, as parse_labels reads them: a larger attempt (only a forged record has one) is no run of ours."""
_ATTEMPT = re.compile(r"[1-9][0-9]{0,8}")
"""As str(int) writes a positive attempt: no sign, no leading zero, no spaces or underscores."""


class CodeRef(Frozen):
    """The snapshot a job runs from, pinned by content: moving a job to other code replaces it."""

    snapshot: str
    path: str
    """With the `${shared_root}` placeholder, like every path in a Submission."""
    commit: str
    digest: str


class Submission(Frozen):
    """The canonical resolved submission; its sha256 is the run's spec_hash.

    Secrets appear here only as `${env:NAME}` references, so the hash, plans and records never
    hold a secret value and rotating a secret does not replace a run. `${shared_root}` also stays
    a placeholder (expanded at submit), so a relative shared root does not make the hash depend
    on where the workspace is checked out.
    """

    workspace: str
    cluster: str
    shared_root: str
    """As written in the Cluster spec."""
    job: str
    run: int
    entrypoint: str
    env_vars: dict[str, str]
    entrypoint_num_cpus: float | None
    entrypoint_num_gpus: float | None
    entrypoint_memory: int | None
    entrypoint_resources: dict[str, float]
    code: CodeRef | None = None
    gpus: int | None = None
    """verl jobs: GPUs the training holds (nnodes x n_gpus_per_node), for capacity planning."""
    follows: dict[str, str] | None = None
    """`rerun_with_predecessors: true` only: predecessor job -> its run this one follows, so a new
    predecessor run that ended as required is a new spec of this job (None keeps every other hash)."""
    inputs: dict[str, str] | None = None
    """The Datasets and Models the job names, by address (dataset.NAME), each the version's directory relative to
    the shared root (datasets/NAME/KEY12): a new version is a new spec. None (outside the hash) when it names none."""
    input_digests: dict[str, str] | None = None
    """Each named input's content digest from its sealed manifest, for the record and the audit log; outside the
    hash (the directory pins the version; the digest says what it held)."""
    derived_checkpoints: bool | None = None
    """verl jobs without `trainer.checkpoint_dir`: argus derived the directory (outputs/<workspace>/...). Outside
    the hash; it says which directory spec_hash names as argus named it before outputs were per workspace."""

    @model_serializer(mode="wrap")
    def _without_unnamed_inputs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A job naming no input is written as before inputs existed: records, plans and their golden files keep
        their shape, and an older argus reads them."""
        dumped = handler(self)
        for name in ("inputs", "input_digests"):
            if dumped.get(name) is None:
                dumped.pop(name, None)
        return dumped


def resolve(workspace: Workspace, cluster: Cluster, job: Job, code: CodeRef | None = None) -> Submission:
    """Merge the cluster's job_defaults under the job's own fields; run from the code snapshot."""
    defaults = cluster.job_defaults
    resources = job.entrypoint_resources
    env = {**defaults.env, **job.env}
    command = job.entrypoint if job.workload == "command" else verl.argv(job, workspace.name, code and code.path)
    entrypoint = entrypoint_string(command or [])
    if code is not None:
        # Never a working_dir upload: the job runs in place from the immutable snapshot on NFS.
        env["PYTHONPATH"] = f"{code.path}:{cluster.user_code_path}:{env.get('PYTHONPATH', '${PYTHONPATH}')}"
        # Bytecode caches go elsewhere: the snapshot is sealed read-only.
        env.setdefault("PYTHONPYCACHEPREFIX", "/tmp/argus-pycache")
        entrypoint = f"cd {shlex.quote(code.path)} && {entrypoint}"
    return Submission(
        workspace=workspace.name,
        cluster=cluster.name,
        shared_root=cluster.shared_root,
        job=job.name,
        run=job.run,
        entrypoint=entrypoint,
        env_vars=env,
        entrypoint_num_cpus=_pick(job.entrypoint_num_cpus, defaults.entrypoint_num_cpus),
        entrypoint_num_gpus=_pick(job.entrypoint_num_gpus, _driver_gpus(job, defaults.entrypoint_num_gpus)),
        entrypoint_memory=_pick(job.entrypoint_memory, defaults.entrypoint_memory),
        entrypoint_resources=dict(defaults.entrypoint_resources if resources is None else resources),
        code=code,
        gpus=None if job.workload == "command" else _gpus(job),
        derived_checkpoints=_derives_checkpoints(job),
    )


def _derives_checkpoints(job: Job) -> bool | None:
    """True when argus derives a verl job's checkpoint directory; None (outside every hash) otherwise."""
    return True if job.workload != "command" and not (job.trainer or Trainer()).checkpoint_dir else None


SFT_RAY_DRIVER_GPUS = 0.01
"""verl's sft_trainer_ray sums each step's token counts on trainer.device in the driver. verl 0.9 sets that
device to cuda on any GPU node (auto_set_device), and Ray shows a driver that asks for no GPU none of
them once other entrypoint resources are set: the run would fail after its first step. `trainer.device=cpu`
is no way out: verl 0.8 then asks Ray for a resource named `cpu`. So the driver asks for a sliver of a GPU."""


def _driver_gpus(job: Job, default: float | None) -> float | None:
    """What the workload's driver must hold, at least the cluster's default: torchrun's trainer runs inside
    the driver, which holds the job's GPUs on its node; sft_trainer_ray's driver needs to see one GPU."""
    if job.workload == "sft" and job.entry is not None and job.entry.launcher == "torchrun":
        need: float | None = (job.trainer or Trainer()).n_gpus_per_node
    elif job.workload == "sft":
        need = SFT_RAY_DRIVER_GPUS
    else:
        return default
    return max(need, default or 0.0)


def _gpus(job: Job) -> int:
    trainer = job.trainer or Trainer()
    return trainer.nnodes * trainer.n_gpus_per_node


def driver_needs(sub: Submission) -> dict[str, float]:
    """The resources the driver asks Ray for, named as nodes name them."""
    needs = dict(sub.entrypoint_resources)
    for key, value in (("CPU", sub.entrypoint_num_cpus), ("GPU", sub.entrypoint_num_gpus)):
        if value:
            needs[key] = value
    return needs


def entrypoint_string(entrypoint: list[str] | str) -> str:
    """Ray runs the entrypoint with /bin/sh -c: an argv is quoted so it arrives unchanged."""
    return entrypoint if isinstance(entrypoint, str) else shlex.join(entrypoint)


def spec_hash(submission: Submission) -> str:
    """The identity of what Ray is asked to run. A plan asks it of one job's submission several times in a row
    (its runs, its outputs, its inputs, its followers): the last few answers are kept by the object asked about,
    which they hold, so an id is never reused while its answer is kept."""
    kept = _RECENT_HASHES.get(id(submission))
    if kept is not None and kept[0] is submission:
        return kept[1]
    digest = _spec_hash(submission)
    with _KEEPING:  # apply submits from threads
        _RECENT_HASHES[id(submission)] = (submission, digest)
        if len(_RECENT_HASHES) > 64:
            del _RECENT_HASHES[next(iter(_RECENT_HASHES))]
    return digest


_RECENT_HASHES: dict[int, tuple[Submission, str]] = {}
_KEEPING = threading.Lock()


def _spec_hash(submission: Submission) -> str:
    # Unset fields are left out, so a field added to argus later does not change existing runs' hashes; the
    # directories argus derives are hashed as argus named them before outputs were per workspace, so that
    # change is no new spec of any job (the workspace is in the hash anyway: nothing is lost).
    outside = {"derived_checkpoints", "input_digests"}
    canonical = json.dumps(legacy_outputs(submission).model_dump(exclude_none=True, exclude=outside),
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def legacy_outputs(submission: Submission) -> Submission:
    """The same run with the directories argus derives (checkpoints, Hydra's run dir) where an argus before
    per-workspace outputs put them: how a run made then goes on (its retries resume from its checkpoints).
    Only argus's own override words change (a verl job's typed keys, which its `overrides:` may not set): a
    path the spec writes itself, in `trainer.checkpoint_dir` or anywhere else, stays as written."""
    text = submission.entrypoint
    for new, old in _derived_overrides(submission):
        text = text.replace(new, old)
    return submission if text == submission.entrypoint else submission.model_copy(update={"entrypoint": text})


def _derived_overrides(sub: Submission) -> list[tuple[str, str]]:
    """(per workspace, before) for the override words of the directories argus derives, quoted as in the argv."""
    ws, tail = sub.workspace, f"checkpoints/{sub.job}/run-{sub.run}"
    pairs = [("hydra.run.dir", verl.log_dir(ws), verl.log_dir(ws, legacy=True))]
    if sub.derived_checkpoints:
        pairs.append(("trainer.default_local_dir", f"{verl.outputs_dir(ws)}/{tail}",
                      f"{verl.outputs_dir(ws, legacy=True)}/{tail}"))
    return [(shlex.quote(f"{key}={verl.hydra_value(new)}"), shlex.quote(f"{key}={verl.hydra_value(old)}"))
            for key, new, old in pairs]


def submission_id(workspace: str, job: str, digest: str, attempt: int) -> str:
    """Deterministic, readable in `ray job list`, and within Ray's safe id alphabet.

    The hash covers the workspace, so trimming a long workspace name cannot make ids collide.
    """
    tail = f".{job}.{digest[:12]}.{attempt}"
    sid = workspace[: 128 - len(tail)] + tail
    assert SUBMISSION_ID_PATTERN.match(sid), sid
    return sid


class RunId(Frozen):
    """Which run: one job's spec at one content (its spec hash), and which attempt of it.

    Everything argus stamps on a Ray job and names on NFS derives from these four values.
    """

    workspace: Name
    job: Name
    spec_hash: SpecHash
    attempt: Annotated[int, Field(ge=1, le=MAX_ATTEMPT)]
    """1 for the first run of a spec; a retry or `--replace` asks for the next."""

    @classmethod
    def of(cls, submission: Submission, attempt: int = 1) -> RunId:
        return cls(workspace=submission.workspace, job=submission.job, spec_hash=spec_hash(submission),
                   attempt=attempt)

    @property
    def submission_id(self) -> str:
        return submission_id(self.workspace, self.job, self.spec_hash, self.attempt)

    def with_attempt(self, attempt: int) -> RunId:
        return RunId(workspace=self.workspace, job=self.job, spec_hash=self.spec_hash, attempt=attempt)


def labels(run: RunId, commit: str, plan_id: str) -> dict[str, str]:
    """Metadata stamped on the Ray job: a few hundred bytes, enough to find its spec again."""
    return {
        LABEL_WORKSPACE: run.workspace,
        LABEL_JOB: run.job,
        LABEL_SPEC_HASH: run.spec_hash,
        LABEL_ATTEMPT: str(run.attempt),
        LABEL_COMMIT: commit,
        LABEL_PLAN: plan_id,
    }


def parse_labels(metadata: Mapping[str, Any]) -> RunId | None:
    """The run a Ray job's metadata names, or None for anything `labels` could not have written
    (a missing key, an attempt like "one" or "01", a name or hash out of shape). Never raises:
    metadata is whatever anyone submitted to the cluster."""
    values = {key: metadata.get(label) for key, label in _IDENTITY_LABELS.items()}
    if not all(isinstance(v, str) for v in values.values()) or not _ATTEMPT.fullmatch(values["attempt"]):
        return None
    try:
        return RunId.model_validate(values)
    except ValidationError:
        return None


def secret_refs(env: dict[str, str]) -> dict[str, str]:
    """env keys whose value is a `${env:NAME}` reference, mapped to NAME."""
    refs = {}
    for key, value in env.items():
        match = re.match(SECRET_REF_PATTERN, value)
        if match:
            refs[key] = match.group(1)
    return refs


def held_secrets(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The values `environ` holds of env's `${env:NAME}` references, by NAME: what a run was sent,
    and what its logs may echo."""
    return {name: environ[name] for name in secret_refs(dict(env)).values() if environ.get(name)}


def expand(text: str, shared_root_path: str, submission: str = "") -> str:
    """Fill in `${shared_root}` (seed 001 writes paths this way) and `${submission_id}` (a run's
    log directory is named after it, and the id is derived from the hash: it stays out of it)."""
    return text.replace(SHARED_ROOT_PLACEHOLDER, shared_root_path).replace(verl.SUBMISSION_ID_PLACEHOLDER, submission)


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value
