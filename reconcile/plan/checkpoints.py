"""Whether a verl run about to start resumes, from what, and whether it may: pure.

verl follows trainer.resume_mode: `disable` starts fresh; `auto` loads the step the checkpoint
directory's tracker names; `resume_path` loads trainer.resume_from_path (SFT's trainer also does in
`auto` when it is set). A resume is planned only from a complete checkpoint that the snapshot's verl
can load on the GPUs the job has now: FSDP names its shards by world size and each rank opens its own
W's file; Megatron reshards, but verl 0.9 refuses verl 0.8's layout.

A run never silently resumes a checkpoint another spec saved: all attempts of a run share one
directory (${shared_root}/outputs/<workspace>/checkpoints/<job>/run-<run>), so a spec changed without bumping
`run:` would load the old spec's weights and optimizer state. The evidence is argus's run records:
the newest recorded run that wrote the directory must be of the spec that starts. Resuming another
spec's checkpoint is asked for with verl's own overrides, trainer.resume_mode=resume_path and
trainer.resume_from_path=<the step folder>.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconcile.model import Change, EnqueueStep, SubmitStep
from specs.desired import DesiredState
from specs.kinds.models import Job, Trainer
from specs.workloads.checkpoint_state import (
    MIGRATE,
    MODES,
    TRACKER,
    CheckpointState,
    local_dir_of,
    reads_path,
    resume_of,
    same_path,
    step_folder,
)
from specs.workloads.submission import expand
from specs.workloads.verl import checkpoint_dir
from specs.workloads.verl_profile import Resume
from state.observed import ObservedState, RunRecord, RunStatus, legacy_key

FRESH = "start fresh with a new `trainer.checkpoint_dir` (or bump `run:`)"
OPT_IN = "trainer.resume_mode=resume_path"


@dataclass(frozen=True)
class Resumption:
    """What a verl run about to start resumes from, as the plan tells it, and what stands in the way."""

    note: str
    """For people: "resumes from global_step_40 of team.ppo.3f9c2a1b0c4d.2 (saved by 16 GPUs)"."""
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Start:
    address: str
    job: Job
    spec_hash: str
    gpus: int
    """What the actor's world size will be: trainer.nnodes x n_gpus_per_node (verl's global pool)."""
    directory: str
    """trainer.default_local_dir as the run sees it."""
    resume: Resume
    version: str | None
    writers: tuple[RunRecord, ...]
    """Recorded runs that used the directory, newest first."""
    elsewhere: bool
    """The job has recorded runs whose submission is known: when none wrote the directory, they used others."""
    state: CheckpointState | None


def judge(desired: DesiredState, observed: ObservedState, change: Change) -> Resumption | None:
    """None for a change that starts no verl run (a `command` job, a stop, a no-op)."""
    start = _start(desired, observed, change)
    if start is None:
        return None
    mode = start.resume.mode
    if mode == "disable":
        return Resumption("starts fresh (trainer.resume_mode=disable)")
    if mode not in MODES:
        return Resumption(f"unknown trainer.resume_mode {mode!r}", errors=(
            f"{start.address} sets trainer.resume_mode={mode!r}: verl knows {', '.join(MODES)}",))
    if reads_path(start.resume, start.job.workload):
        return _from_path(start)
    return _from_directory(start)


def resume_note(desired: DesiredState, observed: ObservedState, change: Change) -> str | None:
    """Whether the run a change starts resumes, and from which step of which earlier run; None when
    the change starts no verl run."""
    judged = judge(desired, observed, change)
    return judged.note if judged else None


def _start(desired: DesiredState, observed: ObservedState, change: Change) -> _Start | None:
    job = desired.jobs.get(change.address.removeprefix("job."))
    spec_hash, legacy = _starting_hash(change), _continues_legacy(change)
    if job is None or job.workload == "command" or spec_hash is None:
        return None
    root = desired.shared_roots.get(job.cluster, "${shared_root}")
    profile = observed.verl_profiles.get(job.name)
    resume = profile.resume if profile else resume_of(job.overrides)
    if resume.path is not None:
        resume = resume.model_copy(update={"path": expand(resume.path, root)})
    trainer = job.trainer or Trainer()
    return _Start(address=change.address, job=job, spec_hash=spec_hash, gpus=trainer.nnodes * trainer.n_gpus_per_node,
                  directory=expand(checkpoint_dir(job, desired.workspace.name, legacy), root), resume=resume,
                  version=profile.version if profile else None,
                  writers=_writers(desired, observed, job, spec_hash, legacy),
                  elsewhere=any(r.job == job.name and r.submission for r in observed.records.values()),
                  state=observed.checkpoints.get(legacy_key(job.name) if legacy else job.name))


def _starting_hash(change: Change) -> str | None:
    for step in change.steps:
        if isinstance(step, (SubmitStep, EnqueueStep)):
            return step.spec_hash
    return change.queue.spec_hash if change.queue else None


def _continues_legacy(change: Change) -> bool:
    """A new attempt of a run made before outputs were per workspace: it resumes from that run's directory."""
    return any(isinstance(step, SubmitStep) and step.legacy_outputs for step in change.steps)


def _writers(desired: DesiredState, observed: ObservedState, job: Job, spec_hash: str,
             legacy: bool) -> tuple[RunRecord, ...]:
    """Runs of this workspace that wrote the job's checkpoint directory, by their recorded entrypoint
    (runs of this very spec did, whatever their record holds); a refused submit never ran."""
    wanted = expand(checkpoint_dir(job, desired.workspace.name, legacy), desired.cluster_of(job).shared_root)

    def wrote(record: RunRecord) -> bool:
        if record.job == job.name and record.spec_hash == spec_hash:
            return True
        used = local_dir_of(record.submission.entrypoint) if record.submission else None
        return used is not None and same_path(expand(used, record.submission.shared_root), wanted)

    found = [r for r in observed.records.values() if r.status is not RunStatus.SUBMIT_FAILED and wrote(r)]
    return tuple(sorted(found, key=lambda r: (r.submitted_at or r.updated_at, r.attempt), reverse=True))


def _from_directory(start: _Start) -> Resumption:
    state = start.state
    if state is None:
        return Resumption(f"starts fresh (no checkpoint in {start.directory})")
    if state.path is not None:  # the observation followed the overrides, the composed config says otherwise
        return Resumption(f"resumes from the latest checkpoint in {start.directory}, if any (not inspected)")
    if state.step is None:
        return Resumption(f"cannot tell where it resumes ({TRACKER} unusable)", errors=(
            f"{start.address}'s checkpoint directory has an unusable {TRACKER} ({state.problem}): verl would fail "
            f"or resume from something else; {_fallback(start, state)}",))
    if state.absent:
        return _missing_step(start, state)
    folder = step_folder(state.step)
    errors, warnings = _loadable(start, state, f"{start.address}'s latest checkpoint {folder}")
    lineage = _lineage(start, folder)
    if lineage:
        (errors if lineage[0] == "error" else warnings).append(lineage[1])
    newest = start.writers[0].submission_id if start.writers else None
    return _resumption(f"{folder} of {newest}" if newest else folder, state, errors, warnings)


def _missing_step(start: _Start, state: CheckpointState) -> Resumption:
    """verl's find_latest_ckpt_path returns None for a tracker naming a folder that is not there: the run
    trains from step 0 in the same directory, and never loads an earlier step on its own."""
    folder = step_folder(state.step or 0)
    back = "" if state.previous is None else (
        f"; to resume from {step_folder(state.previous)} instead, point {TRACKER} at it (`echo {state.previous} > "
        f"{start.directory}/{TRACKER}`)")
    return Resumption(f"starts from step 0 ({TRACKER} names {folder}, which is not there)", warnings=(
        f"{start.address}'s {TRACKER} names {folder}, which is not in {start.directory}: verl finds no checkpoint "
        f"and trains from step 0{back}",))


def _from_path(start: _Start) -> Resumption:
    path, state = start.resume.path, start.state
    if path is None:
        return Resumption("cannot resume: trainer.resume_from_path is not set", errors=(
            f"{start.address} sets {OPT_IN} without trainer.resume_from_path: verl asserts it names a "
            "global_step_<N> folder",))
    label = f"{start.address}'s trainer.resume_from_path {path}"
    if problem := _path_problem(path, start.job.workload):
        return Resumption(f"cannot resume from {path}", errors=(f"{label} {problem}",))
    if state is None or state.path is None or not same_path(state.path, path):
        return Resumption(f"resumes from {path} (trainer.resume_from_path, not inspected)", warnings=(
            f"{label} is set by the job's config, not its `overrides:`: argus did not inspect it; make sure it "
            "exists and is complete",))
    errors, warnings = _loadable(start, state, label)
    return _resumption(path, state, errors, warnings, via="trainer.resume_from_path")


def _path_problem(path: str, workload: str) -> str | None:
    """verl asserts `global_step_` is in the path; its PPO trainer takes the step from what follows the
    last one (int(path.split("global_step_")[-1])), SFT's from the first global_step_<digits>."""
    if "global_step_" not in path:
        return "does not name a global_step_<N> folder: verl refuses a path without `global_step_`"
    if not path.startswith("/"):
        return "is relative: verl would look for it in the run's working directory (its code snapshot)"
    tail = path.split("global_step_")[-1]
    if workload != "sft" and not re.fullmatch(r"[0-9]+", tail):
        return (f"must end with global_step_<N> (no trailing / or sub-folder): verl's PPO trainer reads the "
                f"step from {tail!r}")
    return None


def _loadable(start: _Start, state: CheckpointState, label: str) -> tuple[list[str], list[str]]:
    """Errors and warnings about loading this checkpoint on the job's verl and GPUs."""
    if not state.complete:
        why = ("is not a complete checkpoint ({}): verl needs it to exist and be complete" if state.path else
               "is incomplete ({}): verl cannot resume from it").format(state.problem)
        return [f"{label} {why}; {_fallback(start, state)}"], []
    if state.layout == "megatron_legacy" and _minor(start.version) >= (0, 9):
        return [_legacy(start, state, label)], []
    if state.world_size is None or state.world_size == start.gpus:
        return [], []
    if state.reshards:
        return [], [f"{label} was saved by {state.world_size} GPUs and the job now has {start.gpus}: Megatron "
                    "reshards the model on load, but verl's default optimizer format (dp_reshardable) loads only "
                    "with the same tensor- and pipeline-parallel sizes"]
    return [f"{label} was saved by {state.world_size} GPUs (model_world_size_{state.world_size}), but the job "
            f"now has {start.gpus} (trainer.nnodes x n_gpus_per_node): verl cannot load shards of another world "
            f"size; set the GPUs back to {state.world_size}, or {_fresh(start)}"], []


def _legacy(start: _Start, state: CheckpointState, label: str) -> str:
    step = state.path or f"{start.directory}/{step_folder(state.step or 0)}"
    commands = "; ".join(f"`{MIGRATE} {step}/{role}`" for role in state.roles) or f"`{MIGRATE} {step}`"
    return (f"{label} was saved in verl 0.8's Megatron layout (dist_ckpt/ beside the role's files), which the "
            f"snapshot's verl {start.version} refuses when it loads it, after model init with the GPUs held: "
            f"migrate it in place with {commands} from verl's source tree (keep the default --mode hardlink: "
            f"argus does not follow symlinks), or {_fresh(start)}")


def _fallback(start: _Start, state: CheckpointState) -> str:
    """What to resume from instead, naming only folders that exist."""
    if state.previous is not None:
        earlier = step_folder(state.previous)
        if state.path is not None:
            return f"name the complete {state.path.rsplit('/', 1)[0]}/{earlier} instead, or {_fresh(start)}"
        return (f"the newest complete step there is {earlier}: point {TRACKER} at it (`echo {state.previous} > "
                f"{start.directory}/{TRACKER}`) and delete {step_folder(state.step or 0)}, or {_fresh(start)}")
    if state.earlier == 0:
        return f"there is no earlier checkpoint to go back to: {_fresh(start)}"
    of = f" of {state.earlier}" if state.earlier > state.checked else ""
    return f"none of the {state.checked} newest{of} earlier checkpoints there is complete: {_fresh(start)}"


def _fresh(start: _Start) -> str:
    """How this run can start fresh. `run:` picks only the directory argus names: a job that names its own
    directory, or a step folder in trainer.resume_from_path, loads the same checkpoint whatever its `run:`."""
    if start.resume.path is not None and reads_path(start.resume, start.job.workload):
        return "start fresh with `trainer.resume_mode=disable` in `overrides:` (verl then ignores " \
               "trainer.resume_from_path)"
    return "start fresh with a new `trainer.checkpoint_dir`" if _named_dir(start) else FRESH


def _named_dir(start: _Start) -> bool:
    return bool((start.job.trainer or Trainer()).checkpoint_dir)


def _lineage(start: _Start, folder: str) -> tuple[str, str] | None:
    """("error" | "warning", message) unless the newest run that wrote the directory is of this spec."""
    newest = start.writers[0] if start.writers else None
    if newest is not None and newest.job == start.job.name and newest.spec_hash == start.spec_hash:
        return None
    what = f"{start.address} would resume from {folder} in {start.directory}"
    bump = "bump `run:` to start fresh in a new directory" if not _named_dir(start) else \
        "give `trainer.checkpoint_dir` a new directory to start fresh (its `run:` does not pick it)"
    explicit = f"the overrides `{OPT_IN}` and `trainer.resume_from_path={start.directory}/{folder}`"
    if newest is not None:
        whose = "another spec of the job" if newest.job == start.job.name else f"job.{newest.job}"
        return "error", (f"{what}, which {whose} saved there (run {newest.submission_id}): verl would load its "
                         f"weights and optimizer state into this spec without a word; {bump}, or resume it on "
                         f"purpose with {explicit}")
    if start.elsewhere:
        return "error", (f"{what}, which no recorded run of the job saved (its runs used other directories): "
                         f"something else put it there; {bump}, or resume it on purpose with {explicit}")
    # argus has never run this job: a checkpoint put there by hand may well be meant
    return "warning", (f"{what}, which no run argus recorded saved (copied there by hand?); if it is not the one "
                       f"meant, {bump}; to say it is, resume it with {explicit}")


def _resumption(source: str, state: CheckpointState, errors: list[str], warnings: list[str],
                via: str | None = None) -> Resumption:
    count = state.world_size
    saved = f"saved by {count} GPU{'s' * (count != 1)}" if count else "world size not recorded"
    verb = "would resume" if errors else "resumes"
    return Resumption(f"{verb} from {source} ({'; '.join(filter(None, (via, saved)))})", errors=tuple(errors),
                      warnings=tuple(warnings))


def _minor(version: str | None) -> tuple[int, int]:
    """(major, minor) of a verl version ("0.9.1", "0.10.0.dev"); (0, 0) when unknown."""
    match = re.match(r"([0-9]+)\.([0-9]+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
