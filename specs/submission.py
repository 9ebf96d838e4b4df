"""A job spec resolved into exactly what Ray is asked to run, and the identity derived from it.

Pure functions of the specs: the planner uses them to decide, the applier to submit, so the
two can never disagree about which run a spec means.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Any

from specs import verl
from specs.base import Frozen
from specs.models import SECRET_REF_PATTERN, Cluster, Job, Trainer, Workspace

SUBMISSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SHARED_ROOT_PLACEHOLDER = "${shared_root}"


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


def resolve(workspace: Workspace, cluster: Cluster, job: Job, code: CodeRef | None = None) -> Submission:
    """Merge the cluster's job_defaults under the job's own fields; run from the code snapshot."""
    defaults = cluster.job_defaults
    resources = job.entrypoint_resources
    env = {**defaults.env, **job.env}
    command = job.entrypoint if job.workload == "command" else verl.argv(job, workspace.name)
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
        entrypoint_num_gpus=_pick(job.entrypoint_num_gpus, defaults.entrypoint_num_gpus),
        entrypoint_memory=_pick(job.entrypoint_memory, defaults.entrypoint_memory),
        entrypoint_resources=dict(defaults.entrypoint_resources if resources is None else resources),
        code=code,
        gpus=None if job.workload == "command" else _gpus(job),
    )


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
    # Unset fields are left out, so a field added to argus later does not change existing runs' hashes.
    canonical = json.dumps(submission.model_dump(exclude_none=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def submission_id(workspace: str, job: str, digest: str, attempt: int) -> str:
    """Deterministic, readable in `ray job list`, and within Ray's safe id alphabet.

    The hash covers the workspace, so trimming a long workspace name cannot make ids collide.
    """
    tail = f".{job}.{digest[:12]}.{attempt}"
    sid = workspace[: 128 - len(tail)] + tail
    assert SUBMISSION_ID_PATTERN.match(sid), sid
    return sid


def labels(sub: Submission, digest: str, attempt: int, commit: str, plan_id: str) -> dict[str, str]:
    """Metadata stamped on the Ray job: a few hundred bytes, enough to find its spec again."""
    return {
        "argus.workspace": sub.workspace,
        "argus.job": sub.job,
        "argus.spec_hash": digest,
        "argus.attempt": str(attempt),
        "argus.commit": commit,
        "argus.plan": plan_id,
    }


def secret_refs(env: dict[str, str]) -> dict[str, str]:
    """env keys whose value is a `${env:NAME}` reference, mapped to NAME."""
    refs = {}
    for key, value in env.items():
        match = re.match(SECRET_REF_PATTERN, value)
        if match:
            refs[key] = match.group(1)
    return refs


def expand(text: str, shared_root_path: str, submission: str = "") -> str:
    """Fill in `${shared_root}` (seed 001 writes paths this way) and `${submission_id}` (a run's
    log directory is named after it, and the id is derived from the hash: it stays out of it)."""
    return text.replace(SHARED_ROOT_PLACEHOLDER, shared_root_path).replace(verl.SUBMISSION_ID_PLACEHOLDER, submission)


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value
