"""Executors of the steps that change a cluster's job table: submit a run, stop a run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from reconcile.execute.admit import Ahead, admitted, mark_submitted, still_preempted, withdraw
from reconcile.execute.incident import keep_scene
from reconcile.execute.world import Done, Outcome, World
from reconcile.execute.wrapper import wrapped
from reconcile.model import StopStep, SubmitStep
from specs.errors import ArgusError
from specs.load.after import fill
from specs.workloads.submission import Submission, expand, secret_refs
from state.audit.events import RunRefused, RunStopping, RunSubmitting
from state.observed import IDLE, RunRecord, RunStatus
from state.ray.client import ClusterUnreachable
from state.runs import records
from state.runs import secrets as run_secrets
from state.runs.failures import DEADLINE, PREEMPTED
from state.runs.records import job_dir

EXPIRATION_VARIABLE = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
"""verl's checkpoint manager saves early when this epoch time is near (verl.utils.checkpoint.checkpoint_manager.
should_save_ckpt_esi): a run of a job with max_runtime gets its submit time + max_runtime here."""
CHECKPOINT_DIR_VARIABLE = "ARGUS_CHECKPOINT_DIR"
"""A command job's checkpoint directory, as `${job:NAME.checkpoint_dir}` names it to its followers."""


def submit(step: SubmitStep, world: World) -> Done:
    """Record the intent, submit, record the outcome: a crash in between leaves SUBMITTING behind."""
    root, client = world.roots[step.cluster], world.clients[step.cluster]
    ahead = step.submission_id in world.admissions  # its batch marks it submitted once its part is done
    waits = admitted(step, world)
    if waits is not None:
        world.echo(f"  {step.submission_id} {waits}")
        return Done(Outcome.QUEUED)
    if step.submission.code is not None:
        world.code.check(step.submission.code, step.cluster)
    if step.submission.inputs:
        world.inputs.check(step.submission, step.cluster)
    payload = payload_of(step, root, world.runs.labels(step))
    record = world.runs.open(step, payload)
    directory = job_dir(root, step.submission_id)
    unwritten = _hand_over_secrets(step, directory, world)
    if unwritten is not None:
        world.runs.refused(record, unwritten)
        raise unwritten
    _register(step, world, record)  # in the chain before Ray is asked: a crash after it never sends the id again
    try:
        said = client.submit(step.submission_id, payload)
    except ArgusError as err:
        if not isinstance(err, ClusterUnreachable):  # lost on the way, Ray may have it: its run still needs them
            _refused(step, world, err)
            run_secrets.remove(directory)
            _unadmit(step, world)
        world.runs.refused(record, err)
        clean = world.secrets.scrub(err)  # Ray's error may echo the env it was sent
        if clean is err:
            raise
        raise clean from None  # the original must not travel along: it holds the secret
    world.runs.accepted(record, f"{said} to {client.address}")
    world.journal.touched.add(step.cluster)
    if step.ask is not None:
        world.unmarked[step.submission_id] = (root, record.session_name)
        if not ahead:
            marked(world, [step.submission_id])
    return Done(Outcome(said))


def _register(step: SubmitStep, world: World, record: RunRecord) -> None:
    """run.submitting in the workspace's audit log: the registry of argus's submissions (state.audit.registry).
    Not written, nothing is sent: the run's record says SUBMIT_FAILED and its secrets file goes."""
    sub = step.submission
    try:
        world.audit.append(step.cluster, RunSubmitting(
            submission_id=step.submission_id, address=f"job.{sub.job}", job=sub.job, spec_hash=step.spec_hash,
            attempt=step.attempt, cluster=step.cluster, inputs=_inputs_read(sub)))
    except ArgusError as err:
        run_secrets.remove(job_dir(world.roots[step.cluster], step.submission_id))
        world.runs.refused(record, err)
        raise


def _inputs_read(sub: Submission) -> dict[str, str] | None:
    if not sub.inputs:
        return None
    digests = sub.input_digests or {}
    return {address: f"{rel} sha256:{digests.get(address, '?')}" for address, rel in sorted(sub.inputs.items())}


def _refused(step: SubmitStep, world: World, err: ArgusError) -> None:
    """Ray said no: the chain frees the id (it may be sent again). Unrecorded, it stays registered: never sent."""
    try:
        world.audit.append(step.cluster, RunRefused(submission_id=step.submission_id,
                                                    error=world.audit.error_text(err)))
    except ArgusError as why:
        world.echo(f"  Ray's refusal of {step.submission_id} could not be recorded in the audit log ({why}): the "
                   "id stays registered as submitted, so argus will not send it again")


def _unadmit(step: SubmitStep, world: World) -> None:
    """Ray refused the run: its admission holds nothing (a lost answer keeps it: Ray may have the run)."""
    if step.ask is None:
        return
    try:
        withdraw(Ahead(roots={step.submission_id: world.roots[step.cluster]}), {step.submission_id}, world)
    except (OSError, ArgusError) as err:
        world.echo(f"  the admission of {step.submission_id} could not be withdrawn ({err}): it lapses by itself")


def marked(world: World, submission_ids: list[str]) -> None:
    """The admissions of runs Ray accepted say so. Not fatal: the run is on Ray, which lists it as active."""
    try:
        mark_submitted(submission_ids, world)
    except (OSError, ArgusError) as err:
        world.echo(f"  {len(submission_ids)} admission(s) could not be marked submitted ({err}): they hold their "
                   "demand while Ray lists their runs as active")


def stop(step: StopStep, world: World) -> Done:
    """Stop, then wait until Ray says the run ended, so a replacement never runs beside it."""
    client = world.clients[step.cluster]
    if step.preempted_for is not None:
        record = world.runs.get(step.submission_id)
        if record is None or not still_preempted(step, world, record.job):
            world.echo(f"  {step.submission_id} is no longer in the way of {step.preempted_for}: it keeps running")
            return Done(Outcome.SPARED)
        world.runs.update(record, failure=PREEMPTED)  # first the mark: a crash after the stop still leaves it
    # first the chain: a STOPPED run it does not name was stopped outside argus (drift); not written, not stopped
    world.audit.append(step.cluster, RunStopping(submission_id=step.submission_id, why=stop_why(step)))
    asked = world.runs.get(step.submission_id)
    if asked is not None and step.deadline is not None:  # the scene of a run stopped at its limit, while it lives
        keep_scene(client, world.roots[step.cluster], asked, "deadline", failure=DEADLINE, live=True,
                   redact=world.secrets.redact, echo=world.echo)
    if asked is not None:  # the record too, as evidence for people (any job can rewrite it)
        deadline = {"failure": DEADLINE} if step.deadline is not None else {"failure": IDLE} if step.idle else {}
        world.runs.update(asked, stop_asked=records.now(), **deadline)
    client.stop(step.submission_id)
    world.journal.touched.add(step.cluster)
    final = client.wait_terminal(step.submission_id, world.stop_timeout, progress=world.echo)
    run_secrets.remove(job_dir(world.roots[step.cluster], step.submission_id))  # stopped before it started
    record = world.runs.get(step.submission_id)
    if record is not None:  # a run Ray forgot while stopping did stop: its record says so
        world.runs.update(record, status=final.status if final else RunStatus.STOPPED)
    return Done(Outcome.STOPPED, ended_as=final.status if final else "gone")


def stop_why(step: StopStep) -> str:
    """What run.stopping says of a stop: its deadline's, a preemption's, or the plan's (replace, removal...)."""
    if step.deadline is not None:
        return "deadline"
    if step.idle:
        return "idle"
    return "preempt" if step.preempted_for is not None else "plan"


def payload_of(step: SubmitStep, shared_root: str, labels: dict[str, str]) -> dict[str, Any]:
    """What goes to Ray, which is also what is written to NFS: no `${env:NAME}` variable is in it, the
    wrapper gets those from a file (state.runs.secrets). The entrypoint runs inside the wrapper that keeps
    the run's log and end on NFS (execute.wrapper)."""
    sub = step.submission
    secret = secret_refs(sub.env_vars)
    # a follower's `${job:...}` first (their values may hold `${shared_root}`), then argus's own placeholders
    env = {k: expand(fill(v, step.bindings), shared_root, step.submission_id)
           for k, v in sub.env_vars.items() if k not in secret}
    if step.checkpoint_dir is not None:
        env.setdefault(CHECKPOINT_DIR_VARIABLE, expand(step.checkpoint_dir, shared_root, step.submission_id))
    if step.max_runtime is not None:  # verl saves a checkpoint when this is near (should_save_ckpt_esi)
        env[EXPIRATION_VARIABLE] = f"{time.time() + step.max_runtime:.3f}"
    command = expand(fill(sub.entrypoint, step.bindings), shared_root, step.submission_id)
    return {
        "entrypoint": wrapped(command, str(job_dir(shared_root, step.submission_id)), bool(secret)),
        "runtime_env": {"env_vars": env} if env else None,
        "metadata": labels,
        "entrypoint_num_cpus": sub.entrypoint_num_cpus,
        "entrypoint_num_gpus": sub.entrypoint_num_gpus,
        "entrypoint_memory": sub.entrypoint_memory,
        "entrypoint_resources": dict(sub.entrypoint_resources) or None,
    }


def _hand_over_secrets(step: SubmitStep, directory: Path, world: World) -> ArgusError | None:
    """The values of the run's `${env:NAME}` variables, in the file its wrapper reads and removes;
    the error that keeps the run from being submitted, if the file cannot be written."""
    env = step.submission.env_vars
    secret = {key: env[key] for key in secret_refs(env)}
    if not secret:
        return None
    try:
        run_secrets.write(directory, world.secrets.fill(secret))
    except (OSError, ValueError) as err:
        return ArgusError(f"{step.submission_id}: the run's secrets file cannot be written in {directory}: "
                          f"{world.secrets.redact(str(err))}. The run was not submitted.")
    return None
