"""argus import ray-job: adopt a job already running on Ray (submitted by hand) as a run of this workspace.

Writes a spec that reproduces its submission (a `workload: command` job: its entrypoint, runtime_env's
env_vars but secrets, its entrypoint resources), then records the adoption in the workspace's audit chain
(run.imported: the submission id, the job, the spec hash of the spec written, who, the commit) and writes
argus's record of the run on the shared root. The next plan finds the run through the chain, never through
the job's metadata (any job can set metadata), and shows it in sync. The job is never stopped nor submitted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer
import yaml

from reconcile.boundary import contained
from reconcile.commands.common import chosen_cluster, load
from reconcile.execute.cycle import connect
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.secrets.literal_secrets import find_secrets
from specs.secrets.secret_names import allowed
from specs.secrets.secret_scan import SECRET_KEY_PATTERN
from specs.secrets.secret_words import named, redact, secret_name, secrets_in, shell_words, worth_hiding
from specs.workloads.submission import SUBMISSION_ID_PATTERN, Submission, resolve, spec_hash
from state.audit import log as audit
from state.audit import registry
from state.audit.events import RunImported
from state.code.gitinfo import desired_commit
from state.observed import ACTIVE, RayJob, RunRecord
from state.queue import lock
from state.queue.ledger import admission_lock
from state.runs import records

IMPORT_PLAN = "import"
"""The plan id stamped on the audit record and the run record: no plan made this run."""
RESOURCE_FIELDS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources")


def run(directory: Path, submission_id: str, name: str | None, cluster: str | None, timeout: float) -> int:
    desired = load(directory)
    on = chosen_cluster(desired, cluster)
    root = desired.shared_root(on)
    job, raw = _running_job(desired, on, submission_id, timeout)
    hidden = _hidden(job, raw)
    _no_secret_in_entrypoint(job)
    job_name = name or _name(submission_id)
    target = directory / "jobs" / f"{job_name}.yaml"
    if job_name in desired.jobs or target.exists():
        raise ArgusError(f"a Job named {job_name!r} (or {target}) exists already: pass --name")
    # The apply lock keeps this workspace's applies out; the root's admission lock keeps out another workspace's
    # import of the same id between the check that no chain registers it and the record that this one does.
    with lock.held([root], desired.workspace.name, IMPORT_PLAN), admission_lock(root):
        return _adopt(directory, desired, on, job, raw, job_name, target, hidden)


def _adopt(directory: Path, desired: DesiredState, on: str, job: RayJob, raw: dict[str, Any], job_name: str,
           target: Path, hidden: list[str]) -> int:
    root = desired.shared_root(on)
    _not_anyones(root, desired.workspace.name, job)
    spec, left_out = _spec(job_name, on, job, raw)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(redact(f"# imported by `argus import ray-job` from Ray job {job.submission_id} on cluster "
                             f"{on!r}\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=1 << 20),
                             hidden))
    code, error = contained(lambda: _check(directory, job_name))
    if error is not None:
        target.unlink()  # a spec the workspace refuses is no import: nothing recorded
        return code
    sub = _submission(directory, job_name)
    git = desired_commit(str(directory))
    audit.append(root, desired.workspace.name, RunImported(
        submission_id=job.submission_id, address=f"job.{job_name}", job=job_name, spec_hash=spec_hash(sub),
        cluster=on, status=job.status.value), {"plan_id": IMPORT_PLAN, "commit": git.commit, "dirty": git.dirty})
    records.write_status(root, RunRecord(
        submission_id=job.submission_id, workspace=desired.workspace.name, job=job_name, cluster=on,
        spec_hash=spec_hash(sub), attempt=1, status=job.status, submitted_at=records.now(), updated_at=records.now(),
        plan_id=IMPORT_PLAN, commit=git.commit, submission=sub, outputs="workspace"))
    _report(target, job, job_name, left_out, hidden)
    return 0


def _hidden(job: RayJob, raw: dict[str, Any]) -> list[str]:
    """Every secret value the job carries (entrypoint, runtime_env, metadata): redacted from whatever is printed or
    written, should any reach a line."""
    env = (raw.get("runtime_env") or {}).get("env_vars") or {}
    words = shell_words(job.entrypoint) + [f"{k}={v}" for k, v in env.items() if isinstance(v, str)]
    words += [json.dumps(raw.get("runtime_env") or {}), json.dumps(job.metadata)]
    return secrets_in(words) + [str(v) for k, v in env.items() if SECRET_KEY_PATTERN.search(str(k))
                                and worth_hiding(str(v))]


def _no_secret_in_entrypoint(job: RayJob) -> None:
    """Refused: an entrypoint that carries a secret (`WANDB_API_KEY=... python train.py`, `--hf-token ...`, a
    literal token) would be written into the spec, and the spec is the submission, so it cannot be redacted."""
    words = shell_words(job.entrypoint)
    if not secrets_in(words):
        return
    names = sorted({named(w.partition("=")[0].lstrip("-").rpartition(".")[2]) for w in words
                    if "=" in w and secret_name(w.partition("=")[0].lstrip("-+~").rpartition(".")[2])})
    said = f" (it sets {', '.join(names)})" if names else ""
    raise ArgusError(f"Ray job {job.submission_id}'s entrypoint holds a secret{said}: argus never writes one into a "
                     "spec, and the entrypoint is the spec, so this job is not imported (nothing written or recorded). "
                     "To bring it under argus, write its Job by hand taking the secret from the environment (the "
                     "Workspace's `secrets:` and the Job's `env: {NAME: ${env:NAME}}`), then stop the hand-submitted "
                     f"job (`ray job stop {job.submission_id}`) and `argus apply`")


def _running_job(desired: DesiredState, cluster: str, sid: str, timeout: float) -> tuple[RayJob, dict[str, Any]]:
    if not SUBMISSION_ID_PATTERN.match(sid):
        raise ArgusError(f"{sid!r} is no submission id argus can keep (letters, digits, . _ -)")
    client = connect(desired, timeout)[cluster]
    job = client.job(sid)
    if job is None:
        raise ArgusError(f"cluster {cluster!r} ({client.address}) has no job {sid}: argus imports a job of the "
                         "workspace's own cluster; a job on another cluster goes in the workspace of that cluster")
    if job.status not in ACTIVE:
        raise ArgusError(f"Ray job {sid} is {job.status.value}: argus imports only a job still pending or running. "
                         "A finished job needs no spec to stay finished; write one by hand to run it again")
    return job, client.read_json(f"/api/jobs/{sid}")


def _not_anyones(root: str, workspace: str, job: RayJob) -> None:
    """Refused: a job argus submitted (its labels), or one any workspace's chain on this root registers."""
    said = sorted(k for k in job.metadata if k.startswith("argus."))
    if said:
        raise ArgusError(f"Ray job {job.submission_id} carries argus's labels ({', '.join(said)}: workspace "
                         f"{job.metadata.get('argus.workspace', '?')!r}): it is, or claims to be, a run argus "
                         "submitted; argus never adopts it")
    logs = Path(root) / ".argus" / "audit"
    names = {workspace, *(p.stem for p in logs.glob("*.jsonl") if p.is_file())}
    for name in sorted(names):
        if job.submission_id in registry.read(root, name).submitted:
            raise ArgusError(f"Ray job {job.submission_id} is already a run of workspace {name!r} (its audit log "
                             "registers it): it is never imported twice")


def _spec(name: str, cluster: str, job: RayJob, raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    env, left_out = _env(raw.get("runtime_env") or {})
    spec: dict[str, Any] = {"kind": "Job", "name": name, "cluster": cluster, "workload": "command",
                            "description": f"imported from Ray job {job.submission_id}", "entrypoint": job.entrypoint}
    if env:
        spec["env"] = env
    for field in RESOURCE_FIELDS:  # written even when unset: the cluster's defaults must not stand in for Ray's
        value = raw.get(field)
        spec[field] = dict(value or {}) if field == "entrypoint_resources" else (value or 0)
    return spec, left_out


def _env(runtime_env: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    left_out = [f"runtime_env.{named(str(key))}: argus never uploads code or installs packages; a CodeSnapshot and "
                "`code:` give the job its code" for key in sorted(runtime_env, key=str) if key != "env_vars"]
    env: dict[str, str] = {}
    for key, value in sorted((runtime_env.get("env_vars") or {}).items()):
        text = str(value)
        if SECRET_KEY_PATTERN.search(key) or find_secrets(text) or not allowed(key):
            shown = named(str(key))
            left_out.append(f"env {shown}: a secret is never written; add it to the Workspace's `secrets:` and "
                            f"`env: {{{shown}: ${{env:{shown}}}}}` to the Job")
        elif "${" in text:
            left_out.append(f"env {named(str(key))}: its value holds `${{`: not written")
        else:
            env[key] = text
    return env, left_out


def _check(directory: Path, job: str) -> int:
    _submission(directory, job)
    return 0


def _submission(directory: Path, job: str) -> Submission:
    desired = load(directory)
    spec = desired.jobs[job]
    return resolve(desired.workspace, desired.cluster_of(spec), spec)


def _name(sid: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", sid.lower()).strip("-")[:63].strip("-") or "imported"


def _report(target: Path, job: RayJob, name: str, left_out: list[str], hidden: list[str]) -> None:
    def echo(line: str) -> None:
        typer.echo(redact(line, hidden))

    echo(f"Imported Ray job {job.submission_id} ({job.status.value}) as job.{name}: wrote {target}.")
    echo("The workspace's audit log records the import (run.imported); the job was neither stopped nor submitted.")
    for note in left_out:
        echo(f"  left out: {note}")
    echo("Next: `argus plan` shows it in sync; commit the spec.")
